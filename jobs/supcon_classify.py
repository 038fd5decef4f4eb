"""Classifier variants (focal loss, + λ·supervised NT-Xent, head retrained alone) on Ray Train, compared.

    python jobs/supcon_classify.py --set data.train_per_class=80 --set data.test_per_class=50
    ray job submit -- python jobs/supcon_classify.py --config my.yaml --set train.scaling.num_workers=4
"""

import sys

from contrastext.cli import job_main

if __name__ == "__main__":
    sys.exit(job_main("supcon_classify"))
