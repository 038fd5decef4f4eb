"""Contrastive fit of an encoder on (anchor, positive) pairs, on Ray Train.

    python jobs/contrastive_fit.py                       # embedded demo pairs, bundled MiniLM, local Ray
    ray job submit -- python jobs/contrastive_fit.py --config my.yaml --set train.scaling.num_workers=4
"""

import sys

from contrastext.cli import job_main

if __name__ == "__main__":
    sys.exit(job_main("fit"))
