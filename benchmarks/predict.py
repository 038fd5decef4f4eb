"""The predict job against a plain single-process loop of the same model, and the driver's memory at scale.

    python benchmarks/predict.py [--rows 20000] [--memory-rows 100000 1000000] [--use-gpu] [--skip-memory]

1. Throughput: a WCSBert folder (the bundled MiniLM, AG News's four labels) labels ``--rows`` AG News texts
   (the test set's rows, cycled and numbered) from a parquet file, once by ``run_predict`` on the running
   local Ray (one actor holding every CPU) and once by a plain loop in this process (read the file, predict
   each chunk with ``WCSBert.embed_and_predict_proba``, write a parquet file per chunk), alternately. Ratios:
   end to end (the job's whole run, Ray already started, against the loop's) and steady state (rows after
   the first chunk per second, by the chunks' finishing times).
2. Driver memory: ``run_predict`` in a fresh process per size over synthetic rows with a tiny random encoder
   (the model's speed does not matter here, only what the driver holds); the peak resident memory of the
   driver process at each size, and its growth.
3. A projection for 10M documents on 8 GPUs from the per-actor rate measured here (on a GPU with
   ``--use-gpu``; on a CPU the figure is for 8 actors of this CPU's rate, said so).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import REPO_ROOT, ag_news_rows, write_result  # noqa: E402

LABELS = ["World", "Sports", "Business", "Sci/Tech"]


def _texts(rows: int) -> list[str]:
    base = [f"{title}. {body}" for title, body in ag_news_rows(7600)]
    return [base[i % len(base)] if i < len(base) else f"{base[i % len(base)]} ({i // len(base)})" for i in range(rows)]


def _classifier(folder: Path) -> Path:
    from contrastext import WCSBert

    return WCSBert("bundled:minilm", rounds=0, max_length=128, heads=["prompts"]).fit(["a text"] * 8, LABELS).save(folder)


def plain_loop(model: Path, data: Path, out: Path, chunk_rows: int, batch_size: int, threads: int) -> dict:
    """The baseline: one process reads, predicts and writes chunk by chunk, as a user's own script would."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import torch

    from contrastext import WCSBert

    torch.set_num_threads(threads)
    started = time.perf_counter()
    classifier = WCSBert.load(model, batch_size=batch_size)
    out.mkdir(parents=True, exist_ok=True)
    finished, rows = [], 0
    parquet = pq.ParquetFile(data)
    for i, batch in enumerate(parquet.iter_batches(batch_size=chunk_rows, columns=["id", "text"])):
        ids, texts = batch.column("id").to_pylist(), batch.column("text").to_pylist()
        _, proba = classifier.embed_and_predict_proba(texts)
        labels = [classifier.labels[j] for j in proba.argmax(axis=1)]
        table = pa.table({"id": ids, "label": labels, "score": proba.max(axis=1)})
        pq.write_table(table, out / f"part-{i:05d}.parquet")
        rows += len(ids)
        finished.append((time.perf_counter(), len(ids)))
    total = time.perf_counter() - started
    later = sum(n for _, n in finished[1:])
    return {"seconds": total, "rows_per_s": rows / total,
            "steady_rows_per_s": later / (finished[-1][0] - finished[0][0]) if len(finished) > 1 else None}


def job_run(model: Path, data: Path, out: Path, name: str, chunk_rows: int, batch_size: int, cpus: float,
            gpus: float) -> dict:
    from contrastext.pipelines.predict import run_predict
    from contrastext.predict.config import PredictConfig

    # torch, as the plain loop it is measured against: the figure is the pipeline's cost, not the backend's
    config = PredictConfig(model=str(model), input={"path": str(data)}, chunk_rows=chunk_rows, batch_size=batch_size,
                           backend="torch", output={"storage_path": str(out), "name": name},
                           scaling={"actors": 1, "cpus_per_actor": cpus, "gpus_per_actor": gpus})
    started = time.perf_counter()
    summary = run_predict(config)
    total = time.perf_counter() - started
    return {"seconds": total, "rows_per_s": summary["rows_out"] / total,
            "steady_rows_per_s": summary["steady_rows_per_s"], "first_chunk_s": summary["first_chunk_s"]}


def throughput(args, work: Path) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from contrastext.console import configure_console
    from contrastext.runtime import init_ray

    texts = _texts(args.rows)
    data = work / "texts.parquet"
    pq.write_table(pa.table({"id": [str(i) for i in range(len(texts))], "text": texts}), data, row_group_size=4096)
    model = _classifier(work / "model")
    configure_console(verbose=False)
    ray_started = time.perf_counter()
    init_ray()
    ray_s = time.perf_counter() - ray_started
    cpus = float(os.cpu_count() or 1)
    gpus = 1.0 if args.use_gpu else 0.0
    runs = {"job": [], "loop": []}
    for repeat in range(args.repeats):  # alternately, so a noisy neighbour hits both
        runs["job"].append(job_run(model, data, work / "out", f"job-{repeat}", args.chunk_rows, args.batch_size,
                                   cpus, gpus))
        runs["loop"].append(plain_loop(model, data, work / f"loop-{repeat}", args.chunk_rows, args.batch_size,
                                       int(cpus)))
    best = {kind: max(r, key=lambda x: x["rows_per_s"]) for kind, r in runs.items()}
    steady_job, steady_loop = best["job"]["steady_rows_per_s"], best["loop"]["steady_rows_per_s"]
    return {"rows": args.rows, "chunk_rows": args.chunk_rows, "batch_size": args.batch_size, "ray_init_s": ray_s,
            "runs": runs, "job": best["job"], "loop": best["loop"],
            "ratio_end_to_end": best["job"]["rows_per_s"] / best["loop"]["rows_per_s"],
            "ratio_steady": steady_job / steady_loop if steady_job and steady_loop else None}


def memory_data(rows: int, work: Path) -> tuple[Path, Path]:
    """Synthetic parquet files of ``rows`` short texts and a tiny random encoder (made here, not in the driver
    measured: they would set its peak)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from transformers import BertConfig

    from contrastext.models import TextEncoder

    data = work / f"synthetic-{rows}"
    data.mkdir(parents=True, exist_ok=True)
    words = "rivers mountains towns wizards boxing judges foxes dogs bridges markets".split()
    per_file = 100_000
    for f in range(0, rows, per_file):
        n = min(per_file, rows - f)
        texts = [f"{words[i % 10]} {words[(i * 7) % 10]} {words[(i * 3) % 10]}" for i in range(n)]
        pq.write_table(pa.table({"id": [str(f + i) for i in range(n)], "text": texts}),
                       data / f"part-{f // per_file:04d}.parquet", row_group_size=20_000)
    tiny = work / "tiny"
    if not tiny.exists():
        config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=64, max_position_embeddings=64)
        TextEncoder.from_config(config, max_length=16).save(tiny)
    return data, tiny


def memory_child(rows: int, work: Path) -> None:
    """One driver's run over the ``rows`` synthetic rows; prints its peak resident memory as JSON."""
    from contrastext.console import configure_console
    from contrastext.pipelines.predict import run_predict
    from contrastext.predict.config import PredictConfig

    configure_console(verbose=False)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    summary = run_predict(PredictConfig(model=str(work / "tiny"), input={"path": str(work / f"synthetic-{rows}")},
                                        chunk_rows=10_000, batch_size=256, max_length=16, rows_per_unit=100_000,
                                        output={"storage_path": str(work / "memory-out"), "name": f"rows-{rows}"},
                                        scaling={"actors": 1, "cpus_per_actor": float(os.cpu_count() or 1)}))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"rows": rows, "rows_out": summary["rows_out"], "peak_rss_mib": peak / 1024,
                      "rss_before_job_mib": before / 1024, "seconds": summary["timings_s"]["total"],
                      "torch_in_driver": "torch" in sys.modules}))


def memory(args, work: Path) -> dict:
    results = []
    for rows in args.memory_rows:
        memory_data(rows, work)
        out = subprocess.run([sys.executable, __file__, "--memory-child", str(rows), "--work", str(work)],
                             capture_output=True, text=True, cwd=REPO_ROOT)
        if out.returncode != 0:
            sys.exit(f"memory run at {rows} rows failed:\n{out.stderr[-2000:]}")
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    growth = results[-1]["peak_rss_mib"] / results[0]["peak_rss_mib"]
    return {"runs": results, "growth": growth, "peak_rss_mib_max": max(r["peak_rss_mib"] for r in results)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--chunk-rows", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--memory-rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true", help="the memory runs alone (predict_memory.json)")
    parser.add_argument("--use-gpu", action="store_true", help="the job's actor and the loop on the GPU")
    parser.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args.memory_child, args.work)
        return
    from contrastext.report import format_table

    with tempfile.TemporaryDirectory(prefix="contrastext-predict-bench-") as folder:
        work = Path(folder)
        if args.skip_throughput:
            result = memory(args, work)
            print(json.dumps(result, indent=1))
            print(f"written to {write_result('predict_memory', result)}")
            return
        result = {"throughput": throughput(args, work)}
        if not args.skip_memory:
            result["memory"] = memory(args, work)
    t = result["throughput"]
    per_actor = t["job"]["steady_rows_per_s"] or t["job"]["rows_per_s"]
    device = "GPU" if args.use_gpu else f"CPU actor ({os.cpu_count()} cores)"
    result["projection_10m_on_8"] = {"device": device, "per_actor_rows_per_s": per_actor,
                                     "hours": 10_000_000 / (8 * per_actor) / 3600}
    rows = [["job rows/s (end to end)", f"{t['job']['rows_per_s']:,.1f}"],
            ["plain loop rows/s", f"{t['loop']['rows_per_s']:,.1f}"],
            ["ratio end to end (target ≥ 0.9)", f"{t['ratio_end_to_end']:.2f}"],
            ["job steady rows/s", f"{t['job']['steady_rows_per_s'] or 0:,.1f}"],
            ["plain loop steady rows/s", f"{t['loop']['steady_rows_per_s'] or 0:,.1f}"],
            ["ratio steady (target ≥ 1.0)", f"{t['ratio_steady']:.2f}" if t["ratio_steady"] else "-"]]
    if "memory" in result:
        for run in result["memory"]["runs"]:
            rows.append([f"driver peak RSS at {run['rows']:,} rows", f"{run['peak_rss_mib']:,.0f} MiB"])
        rows.append(["driver RSS growth (target ≤ 1.2×)", f"{result['memory']['growth']:.2f}×"])
    projection = result["projection_10m_on_8"]
    rows.append([f"10M documents on 8 × {device}", f"{projection['hours']:.1f} h at {per_actor:,.0f} rows/s each"])
    print(format_table(rows, headers=[f"predict, {t['rows']:,} AG News rows", "value"]))
    print(f"written to {write_result('predict', result)}")


if __name__ == "__main__":
    main()
