"""WC-SBERT end to end: Wikipedia category pretraining, self-training rounds, zero-shot evaluation.

    python jobs/wcsbert_selftrain.py                       # the embedded default (dump sample, AG News labels)
    python jobs/wcsbert_selftrain.py --config configs/wcsbert_agnews_half.yaml
    ray job submit --working-dir . -- python jobs/wcsbert_selftrain.py
"""

import sys

from contrastext.cli import job_main

if __name__ == "__main__":
    sys.exit(job_main("wcsbert_selftrain"))
