"""Wikipedia dump → pages (plain text + categories) → category pairs, as parquet, on Ray Data.

    python jobs/build_corpus.py                                   # the real dump sample, local Ray
    python jobs/build_corpus.py --set dump=enwiki-…-multistream.xml.bz2 --set index=enwiki-…-index.txt.bz2
    ray job submit -- python jobs/build_corpus.py --config corpus.yaml --set pairs.max_pairs_per_page=100
"""

import sys

from contrastext.cli import job_main

if __name__ == "__main__":
    sys.exit(job_main("build_corpus"))
