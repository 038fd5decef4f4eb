"""One self-training round's similarity scan: streaming the pool from ``.h5`` shards vs a numpy array in memory.

    python benchmarks/selftrain_scan.py [--rows 1000000] [--dim 384] [--labels 4] [--rows-per-shard 100000]
                                        [--chunk-rows 65536] [--repeats 3]

Synthetic page embeddings (random directions, stored as float16 like ``encode_corpus`` writes them) are
written once to ``.h5`` shards with a manifest. The scan is what a round runs before selecting pages:
every page's cosine to each label's aliases (AG News style: the last label has two), its best alias and
best label, then the pseudo-labels (``methods.wcsbert.pseudo_labels.select``). ``streaming`` reads the shards
chunk by chunk (``scoring.scan_pool`` over ``H5Corpus.iter_chunks``: what ``score_pool`` does); ``in
memory`` runs the same functions on the whole array, already loaded as float32. The figure is pages/s
streaming over pages/s in memory (target ≥ 0.8). The shards are freshly written, so they are read from
the page cache, as on a node whose memory holds them.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import write_result  # noqa: E402

from contrastext.data.h5store import H5Corpus, write_shard  # noqa: E402
from contrastext.methods.wcsbert.pseudo_labels import SelectionConfig, select  # noqa: E402
from contrastext.methods.wcsbert.scoring import scan_pool  # noqa: E402
from contrastext.report import format_table  # noqa: E402


def write_pool(directory: Path, rows: int, dim: int, rows_per_shard: int, seed: int) -> np.ndarray:
    """Shards + manifest of ``rows`` synthetic embeddings; returns them as float32 (the in-memory copy)."""
    import json

    rng = np.random.default_rng(seed)
    attributes = {"dimension": dim, "model": "synthetic", "max_words": 200}
    shards, parts = [], []
    for shard, start in enumerate(range(0, rows, rows_per_shard)):
        n = min(rows_per_shard, rows - start)
        embeddings = rng.standard_normal((n, dim), dtype=np.float32).astype(np.float16)
        ids = np.arange(start, start + n, dtype=np.int64)
        shards.append(write_shard(directory, shard, ids, embeddings, {**attributes, "row_start": start,
                                                                      "row_end": start + n, "expected_rows": n}))
        parts.append(embeddings.astype(np.float32))
    (directory / "manifest.json").write_text(json.dumps({"attributes": attributes, "shards": shards}))
    return np.concatenate(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--labels", type=int, default=4)
    parser.add_argument("--rows-per-shard", type=int, default=100_000)
    parser.add_argument("--chunk-rows", type=int, default=65_536)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed + 1)
    owner = np.append(np.arange(args.labels), args.labels - 1)  # the last label has two aliases
    aliases = rng.standard_normal((len(owner), args.dim)).astype(np.float32)
    selection = SelectionConfig()

    with tempfile.TemporaryDirectory(prefix="selftrain-scan-", dir=os.environ.get("TMPDIR")) as tmp:
        pool_dir = Path(tmp)
        start = time.perf_counter()
        in_memory = write_pool(pool_dir, args.rows, args.dim, args.rows_per_shard, args.seed)
        write_s = time.perf_counter() - start
        ids = np.arange(args.rows, dtype=np.int64)
        shard_mib = sum(f.stat().st_size for f in pool_dir.glob("*.h5")) / 2**20
        results: dict[str, object] = {}

        def run_streaming() -> float:
            t = time.perf_counter()
            pool = scan_pool(H5Corpus(pool_dir).iter_chunks(args.chunk_rows), aliases, owner, args.labels)
            results["streaming"] = (pool, select(pool.scores, selection, pool.alias))
            return time.perf_counter() - t

        def run_in_memory() -> float:
            t = time.perf_counter()
            pool = scan_pool([(ids, in_memory)], aliases, owner, args.labels)
            results["in_memory"] = (pool, select(pool.scores, selection, pool.alias))
            return time.perf_counter() - t

        times: dict[str, list[float]] = {"in_memory": [], "streaming": []}
        for _ in range(args.repeats):  # alternate, so machine noise hits both alike
            times["in_memory"].append(run_in_memory())
            times["streaming"].append(run_streaming())
        medians = {name: float(np.median(t)) for name, t in times.items()}

        (stream_pool, stream_pseudo), (memory_pool, memory_pseudo) = results["streaming"], results["in_memory"]
        if not (np.array_equal(stream_pool.ids, memory_pool.ids)
                and np.allclose(stream_pool.scores, memory_pool.scores, atol=1e-6)
                and np.array_equal(stream_pseudo.kept, memory_pseudo.kept)):
            raise RuntimeError("the streaming scan and the in-memory scan disagree")

    rates = {name: args.rows / seconds for name, seconds in medians.items()}
    ratio = rates["streaming"] / rates["in_memory"]
    print(format_table([
        ["pages (synthetic embeddings)", f"{args.rows:,} × {args.dim}, {args.labels} labels, "
                                         f"{len(owner)} aliases"],
        ["shards written", f"{-(-args.rows // args.rows_per_shard)} × {args.rows_per_shard:,} rows, "
                           f"{shard_mib:.0f} MiB float16, {write_s:.1f} s"],
        ["in memory: pages/s", rates["in_memory"]],
        ["streaming from .h5: pages/s", rates["streaming"]],
        ["ratio streaming / in memory (target ≥ 0.8)", ratio],
        ["pages kept by the selection", len(stream_pseudo.kept)],
    ], headers=["self-training scan", "value"]))
    out = write_result("selftrain_scan", {
        "rows": args.rows, "dim": args.dim, "labels": args.labels, "rows_per_shard": args.rows_per_shard,
        "chunk_rows": args.chunk_rows, "repeats": args.repeats, "seconds": times, "median_seconds": medians,
        "pages_per_s": rates, "ratio_streaming_over_in_memory": ratio, "shard_mib": shard_mib})
    print(f"written to {out}")


if __name__ == "__main__":
    main()
