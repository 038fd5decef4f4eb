"""A trained model applied to every text of a folder, glob or bucket prefix → parquet shards (resumable), on Ray Data.

    python jobs/predict.py --set model=runs/wcsbert/final/model --set input.path=docs/ --set output.name=labels
    ray job submit -- python jobs/predict.py --set model=s3://b/wcsbert/final/model \
        --set input.path=s3://b/docs/ --set output.storage_path=s3://b/predictions --set scaling.gpus_per_actor=0.5
"""

import sys

from contrastext.cli import job_main

if __name__ == "__main__":
    sys.exit(job_main("predict"))
