"""Corpus pipeline figures, measured in one run, as ratios against plain single-process baselines.

    python benchmarks/corpus.py [--copies 4] [--encode-pages 400] [--memory-pages 1000000] [--skip ...]

1. read + pairs: the real dump sample, repeated ``--copies`` times with new page ids and repacked as a
   multistream dump, through ``run_build_corpus`` (Ray Data tasks) vs a plain loop doing the same work with
   the same functions (read every chunk, write pages parquet, build deduplicated pairs); pages/s ratio.
2. encode: the first ``--encode-pages`` real pages (first 200 words, MiniLM, 256 tokens) through
   ``run_encode_corpus`` (one encoder actor holding every core, writing its own shards) vs ``TextEncoder.encode``
   in this process on the same texts; pages/s ratio (wall time including the model load on both sides, and
   the steady encode rate alone).
3. pair-stage memory: a synthetic corpus of ``--memory-pages`` pages whose category counts follow a
   log-normal law (median 3.5, mean ≈ 4.5, clipped at 80; names drawn Zipf-like (a=1.15) from a vocabulary scaled
   from English Wikipedia's 1.56M categories per 6.4M pages); the pair stage (``build_pairs``: stream pages,
   write hash-bucketed pairs, deduplicate bucket by bucket) runs in a subprocess that reports its peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

from _common import DATA_DIR, write_result  # noqa: E402
from contrastext.report import format_table  # noqa: E402

SAMPLE = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def replicated_multistream(copies: int, out_dir: Path) -> tuple[Path, Path]:
    """The real sample ``copies`` times (page ids shifted per copy) as a multistream dump + index."""
    from contrastext.data.multistream import split_dump, write_multistream

    source = DATA_DIR / "wikipedia" / SAMPLE
    if not source.is_file():
        sys.exit(f"benchmark needs {source} (set CONTRASTEXT_DATA to the folder holding wikipedia/)")
    header, blocks = split_dump(source)
    blocks = list(blocks)
    id_line = re.compile(rb"^(    <id>)(\d+)(</id>)$", re.M)  # the page id line (4-space indent), not revision ids

    def pages():
        for copy in range(copies):
            for block in blocks:
                yield id_line.sub(lambda m: m.group(1) + str(int(m.group(2)) + copy * 10_000_000).encode()
                                  + m.group(3), block, count=1)

    dump, index = out_dir / "bench-multistream.xml.bz2", out_dir / "bench-multistream-index.txt.bz2"
    write_multistream(header, pages(), dump, index, pages_per_stream=100)
    return dump, index


def plain_build(dump: Path, index: Path, out: Path) -> dict:
    """The same work as build_corpus, in one process: read every chunk, write pages, build pairs."""
    import pyarrow.parquet as pq

    from contrastext.data.pairs import PairOptions, build_pairs
    from contrastext.data.wikipedia import Page, iter_dump_chunk, plan_dump_chunks
    from contrastext.data.pages import pages_table

    started = time.perf_counter()
    pages, files = 0, []
    for chunk in plan_dump_chunks(dump, index, streams_per_chunk=1):
        rows = [p.as_row() for p in iter_dump_chunk(chunk) if isinstance(p, Page)]
        if rows:
            files.append(out / "pages" / f"part-{chunk.index:05d}.parquet")
            files[-1].parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pages_table(rows), files[-1])
            pages += len(rows)
    result = build_pairs(files, out / "pairs", PairOptions())
    return {"pages": pages, "pairs": result.pairs_written, "seconds": time.perf_counter() - started}


def bench_build(copies: int, tmp: Path) -> dict:
    from contrastext.config import OutputConfig
    from contrastext.pipelines.corpus import BuildCorpusConfig, run_build_corpus

    dump, index = replicated_multistream(copies, tmp)
    plain = plain_build(dump, index, tmp / "plain")
    config = BuildCorpusConfig(dump=str(dump), index=str(index), streams_per_chunk=1,
                               output=OutputConfig(storage_path=str(tmp), name="ray_build"))
    started = time.perf_counter()
    summary = run_build_corpus(config)
    ray_s = time.perf_counter() - started
    assert summary["pages"] == plain["pages"] and summary["pairs_written"] == plain["pairs"], (summary, plain)
    return {"pages": plain["pages"], "pairs": plain["pairs"], "work_units": summary["work_units"],
            "plain_s": plain["seconds"], "ray_s": ray_s, "plain_pages_per_s": plain["pages"] / plain["seconds"],
            "ray_pages_per_s": plain["pages"] / ray_s, "ratio_ray_over_plain": plain["seconds"] / ray_s,
            "pages_dir": str(tmp / "plain" / "pages")}


def bench_encode(pages_dir: Path, n_pages: int, tmp: Path, threads: int, shards: int) -> dict:
    import pyarrow.parquet as pq
    import torch

    from contrastext.config import EncoderConfig, OutputConfig, ScalingSettings
    from contrastext.data.h5store import first_words
    from contrastext.models import TextEncoder
    from contrastext.pipelines.corpus import EncodeCorpusConfig, run_encode_corpus

    table = pq.read_table(pages_dir).slice(0, n_pages)
    subset = tmp / "encode_pages"
    subset.mkdir(exist_ok=True)
    pq.write_table(table, subset / "part-00000.parquet")
    texts = [first_words(t, 200) for t in table.column("text").to_pylist()]

    torch.set_num_threads(threads)
    started = time.perf_counter()
    encoder = TextEncoder.from_pretrained("bundled:minilm", max_length=256)
    loaded = time.perf_counter()
    plain = encoder.encode(texts, batch_size=64)
    plain_total, plain_encode = time.perf_counter() - started, time.perf_counter() - loaded
    del encoder

    config = EncodeCorpusConfig(pages=str(subset), encoder=EncoderConfig(max_length=256), dtype="float32",
                                rows_per_shard=max(1, n_pages // shards), rows_per_task=max(1, n_pages // shards),
                                scaling=ScalingSettings(num_workers=1, cpus_per_worker=threads),
                                output=OutputConfig(storage_path=str(tmp), name="ray_encode"))
    summary = run_encode_corpus(config)
    ray_total = summary["timings_s"]["encode"]

    from contrastext.data.h5store import H5Corpus

    corpus = H5Corpus(tmp / "ray_encode")
    ids = table.column("page_id").to_pylist()
    max_diff = float(np.abs(corpus.lookup(ids) - plain).max())
    tokenizer = TextEncoder.from_pretrained("bundled:minilm", max_length=256).tokenizer
    tokens = tokenizer(texts, truncation=True, max_length=256)["input_ids"]
    return {"pages": len(texts), "threads": threads, "plain_total_s": plain_total, "plain_encode_s": plain_encode,
            "ray_pipeline_s": ray_total, "plain_pages_per_s": len(texts) / plain_total,
            "plain_encode_pages_per_s": len(texts) / plain_encode, "ray_pages_per_s": len(texts) / ray_total,
            "ratio_ray_over_plain": plain_total / ray_total, "max_abs_diff": max_diff,
            "ray_first_shard_s": summary["first_shard_s"], "ray_steady_pages_per_s": summary["steady_pages_per_s"],
            "steady_ratio_ray_over_plain": (summary["steady_pages_per_s"] or 0) * plain_encode / len(texts),
            "mean_tokens": float(np.mean([len(t) for t in tokens]))}


# VmHWM/VmRSS of /proc/self/status, not ru_maxrss: Linux carries ru_maxrss over from the forking parent
MEMORY_CHILD = r"""
import json, sys, time
from pathlib import Path
from contrastext.data.pairs import PairOptions, build_pairs

def status_mib(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024

files = sorted(Path(sys.argv[1]).glob("part-*.parquet"))
after_imports = status_mib("VmRSS")
started = time.perf_counter()
result = build_pairs(files, Path(sys.argv[2]), PairOptions(buckets=int(sys.argv[3])))
print(json.dumps({"pages": result.counts.pages, "pairs_generated": result.counts.pairs,
                  "pairs_written": result.pairs_written, "seconds": time.perf_counter() - started,
                  "rss_after_imports_mib": after_imports, "peak_rss_mib": status_mib("VmHWM")}))
"""


def synthetic_pages(n_pages: int, out: Path, seed: int = 0, pages_per_file: int = 50_000) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    vocabulary = max(1000, int(n_pages * 1.56 / 6.4))
    names = np.array([f"Category {i}" for i in range(vocabulary)], dtype=object)
    out.mkdir(parents=True, exist_ok=True)
    counts_seen = []
    for f, start in enumerate(range(0, n_pages, pages_per_file)):
        n = min(pages_per_file, n_pages - start)
        counts = np.clip(np.rint(rng.lognormal(np.log(3.5), 0.7, size=n)), 0, 80).astype(int)
        counts_seen.append(counts)
        drawn = (rng.zipf(1.15, size=int(counts.sum())) - 1) % vocabulary
        cats, offset = [], 0
        for c in counts:
            cats.append(list(dict.fromkeys(names[drawn[offset:offset + c]].tolist())))
            offset += c
        pq.write_table(pa.table({"page_id": np.arange(start, start + n, dtype=np.int64),
                                 "categories": cats}), out / f"part-{f:05d}.parquet")
    counts = np.concatenate(counts_seen)
    return {"vocabulary": vocabulary, "mean_categories": float(counts.mean()),
            "mean_pairs_per_page": float((counts * (counts - 1) / 2).mean()), "max_categories": int(counts.max())}


def bench_memory(n_pages: int, tmp: Path, buckets: int) -> dict:
    shape = synthetic_pages(n_pages, tmp / "synthetic")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1] / "src"),
                                                                    os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", MEMORY_CHILD, str(tmp / "synthetic"), str(tmp / "synthetic_pairs"),
                           str(buckets)], capture_output=True, text=True, env=env, check=True)
    return {**shape, "buckets": buckets, **json.loads(done.stdout.strip().splitlines()[-1])}


def previous_result() -> dict:
    """The parts an earlier run measured, so a run with --skip keeps them beside its own."""
    path = Path(os.environ.get("BENCHMARK_OUT", Path(__file__).resolve().parents[1] / "runs" / "benchmarks"))
    try:
        return json.loads((path / "corpus.json").read_text())
    except (OSError, ValueError):
        return {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=4, help="copies of the real sample in the read benchmark")
    parser.add_argument("--encode-pages", type=int, default=400)
    parser.add_argument("--encode-shards", type=int, default=8, help="shards (and actor batches) of the encode run")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads, both sides")
    parser.add_argument("--memory-pages", type=int, default=1_000_000)
    parser.add_argument("--buckets", type=int, default=16, help="dedup buckets of the memory benchmark")
    parser.add_argument("--skip", nargs="*", default=[], choices=["build", "encode", "memory"])
    args = parser.parse_args()

    from contrastext.config import RayConfig
    from contrastext.runtime import init_ray

    result: dict = {"cpus": os.cpu_count()}
    rows = []
    with tempfile.TemporaryDirectory(prefix="corpus-bench-") as tmp_name:
        tmp = Path(tmp_name)
        if "build" not in args.skip or "encode" not in args.skip:
            init_ray(RayConfig())  # started before any timing
        if "build" not in args.skip or "encode" not in args.skip:
            build = bench_build(args.copies, tmp)
            result["build"] = build
            rows += [["read+pairs: plain loop (pages/s)", build["plain_pages_per_s"]],
                     ["read+pairs: Ray Data (pages/s)", build["ray_pages_per_s"]],
                     ["read+pairs: ratio Ray / plain", build["ratio_ray_over_plain"]]]
        if "encode" not in args.skip:
            encode = bench_encode(Path(result["build"]["pages_dir"]), args.encode_pages, tmp, args.threads,
                                  args.encode_shards)
            result["encode"] = encode
            rows += [["encode: TextEncoder.encode, one process (pages/s)", encode["plain_pages_per_s"]],
                     ["encode: Ray Data pipeline (pages/s)", encode["ray_pages_per_s"]],
                     ["encode: ratio Ray / plain (target >= 0.9)", encode["ratio_ray_over_plain"]],
                     ["encode: plain, encode only (pages/s)", encode["plain_encode_pages_per_s"]],
                     ["encode: Ray after its first shard (pages/s)", encode["ray_steady_pages_per_s"] or 0.0],
                     ["encode: steady ratio Ray / plain", encode["steady_ratio_ray_over_plain"]],
                     ["encode: Ray start-up to first shard (s)", encode["ray_first_shard_s"] or 0.0]]
        if "memory" not in args.skip:
            memory = bench_memory(args.memory_pages, tmp, args.buckets)
            result["memory"] = memory
            rows += [[f"pairs: {memory['pages']:,} synthetic pages → pairs (dedup)", f"{memory['pairs_generated']:,}"
                      f" → {memory['pairs_written']:,}"],
                     ["pairs: peak RSS MiB (after imports)", f"{memory['peak_rss_mib']:.0f} "
                                                             f"({memory['rss_after_imports_mib']:.0f})"],
                     ["pairs: seconds", memory["seconds"]]]
    print(format_table(rows, headers=["corpus benchmark", "value"]))
    print(f"written to {write_result('corpus', {**previous_result(), **result})}")


if __name__ == "__main__":
    main()
