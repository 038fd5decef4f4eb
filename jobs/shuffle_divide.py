"""Shuffle & Divide: an unsupervised document encoder on Ray Train, then spherical k-means clustering.

    python jobs/shuffle_divide.py                                   # BBCSport under $CONTRASTEXT_DATA or ../shared/data
    python jobs/shuffle_divide.py --set pair_method=tfidf --set output.name=bbcsport_tfidf
    ray job submit -- python jobs/shuffle_divide.py --config my.yaml --set train.scaling.use_gpu=true
"""

import sys

from contrastext.cli import job_main

if __name__ == "__main__":
    sys.exit(job_main("shuffle_divide"))
