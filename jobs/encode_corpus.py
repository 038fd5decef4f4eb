"""Pages parquet → first 200 words encoded → sharded .h5 embeddings + manifest (resumable), on Ray Data.

    python jobs/encode_corpus.py                                  # encodes the build_corpus output in runs/
    ray job submit -- python jobs/encode_corpus.py --set scaling.num_workers=8 --set scaling.use_gpu=true
"""

import sys

from contrastext.cli import job_main

if __name__ == "__main__":
    sys.exit(job_main("encode_corpus"))
