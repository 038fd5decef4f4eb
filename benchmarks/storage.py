"""The same jobs with their outputs on a local folder and on S3 (moto's S3 API on 127.0.0.1), one run.

    python benchmarks/storage.py [--copies 2] [--model bundled:minilm]

build_corpus (the real dump sample ``--copies`` times, as multistream), encode_corpus (its pages, first 200
words) and a pair fit (the embedded demo pairs, a checkpoint every 5 steps); seconds per job and the ratio
S3 / local. moto runs in this process (``pip install "moto[server]"``, part of the ``test`` extra), so the
ratio measures the storage layer's own cost (requests, uploads, temporary names), not a network.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import write_result  # noqa: E402
from corpus import replicated_multistream  # noqa: E402
from contrastext.report import format_table  # noqa: E402


def start_s3() -> str:
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1",
                      AWS_ENDPOINT_URL=f"http://{host}:{port}", AWS_EC2_METADATA_DISABLED="true")
    boto3.client("s3").create_bucket(Bucket="bench")
    return "s3://bench/runs"


def run_jobs(storage_path: str, dump: Path, index: Path, model: str) -> dict[str, float]:
    from contrastext.config import FitJobConfig, OutputConfig, TrainConfig
    from contrastext.pipelines.corpus import BuildCorpusConfig, EncodeCorpusConfig, run_build_corpus, run_encode_corpus
    from contrastext.pipelines.pair_fit import run_pair_fit

    seconds = {}
    t = time.perf_counter()
    run_build_corpus(BuildCorpusConfig(dump=str(dump), index=str(index), streams_per_chunk=1,
                                       output=OutputConfig(storage_path=storage_path, name="wiki_corpus")))
    seconds["build_corpus"] = time.perf_counter() - t
    t = time.perf_counter()
    encode = EncodeCorpusConfig(rows_per_shard=50, output=OutputConfig(storage_path=storage_path,
                                                                       name="wiki_embeddings"))
    run_encode_corpus(encode.model_copy(update={"encoder": encode.encoder.model_copy(update={"model": model})}))
    seconds["encode_corpus"] = time.perf_counter() - t
    t = time.perf_counter()
    fit = FitJobConfig(output=OutputConfig(storage_path=storage_path, name="fit"))
    train = TrainConfig(epochs=1, batch_size=16, max_steps=20, checkpoint_every_steps=5)
    run_pair_fit(fit.model_copy(update={"train": train.model_copy(update={
        "encoder": train.encoder.model_copy(update={"model": model})})}))
    seconds["fit (20 steps, 4 checkpoints)"] = time.perf_counter() - t
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=2)
    parser.add_argument("--model", default="bundled:minilm")
    args = parser.parse_args()
    from contrastext.runtime import init_ray

    s3 = start_s3()  # before Ray starts, so its workers inherit the endpoint
    init_ray()
    with tempfile.TemporaryDirectory() as tmp:
        dump, index = replicated_multistream(args.copies, Path(tmp))
        local = run_jobs(str(Path(tmp) / "runs"), dump, index, args.model)
        remote = run_jobs(s3, dump, index, args.model)
    rows = [[job, local[job], remote[job], remote[job] / local[job]] for job in local]
    print(format_table(rows, headers=["job", "local folder s", "S3 s", "S3 / local"]))
    print(f"result: {write_result('storage', {'copies': args.copies, 'model': args.model, 'local_s': local, 's3_s': remote})}")


if __name__ == "__main__":
    main()
