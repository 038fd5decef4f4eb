"""Contrastive fit on (anchor, positive) pairs, evaluated by held-out retrieval before and after."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from contrastext import storage
from contrastext.config import FitJobConfig
from contrastext.evaluators import PairRetrievalEvaluator
from contrastext.manifest import file_checksum, write_json_atomic, write_manifest
from contrastext.report import format_table
from contrastext.runtime import init_ray
from contrastext.stages import Timings
from contrastext.train import fit

log = logging.getLogger(__name__)
_MAX_EVAL_ROWS = 2000


def read_pairs(path: str):
    """A Ray Dataset from parquet, JSON lines or CSV (by extension; a folder is read as parquet)."""
    import ray.data

    lowered = path.lower()
    # reading is I/O: a tenth of a CPU a task, so that it runs beside training workers holding every CPU
    if lowered.endswith((".jsonl", ".json", ".jsonl.gz", ".json.gz")):
        return ray.data.read_json(path, num_cpus=0.1)
    if lowered.endswith((".csv", ".csv.gz")):
        return ray.data.read_csv(path, num_cpus=0.1)
    return storage.parquet_dataset(path)


def _load_dataset(config: FitJobConfig):
    import ray.data

    from contrastext.data.demo import load_demo_pairs

    if config.pairs is None:
        ds, source = ray.data.from_items(load_demo_pairs()), "embedded demo pairs"
    else:
        ds, source = read_pairs(config.pairs), config.pairs
    if config.max_rows:
        ds = ds.limit(config.max_rows)
    return ds, source


def run_pair_fit(config: FitJobConfig) -> dict[str, Any]:
    """Run the fit and return its summary (also written to ``metrics.json`` and ``manifest.json``)."""
    timings = Timings()
    with timings.measure("load"):
        init_ray(config.ray)
        run_dir = config.output.run_dir()  # a local folder or a URI
        first, second = config.train.columns
        ds, source = _load_dataset(config)
        ds = ds.materialize()
        if config.eval_fraction > 0:
            train_ds, eval_ds = ds.train_test_split(test_size=config.eval_fraction, shuffle=True,
                                                    seed=config.train.seed)
            eval_rows = eval_ds.take(_MAX_EVAL_ROWS)
        else:
            train_ds, eval_rows = ds, []
        evaluator = PairRetrievalEvaluator([r[first] for r in eval_rows], [r[second] for r in eval_rows])
        train_rows = train_ds.count()

    with timings.measure("eval_before"):
        before = evaluator(config.train.encoder.load())

    with timings.measure("train"):
        result = fit(train_ds, config.train, config.output, eval_fn=evaluator, rows=train_rows,
                     export_model_to=storage.join(run_dir, "model"))

    after = {}
    with timings.measure("eval_after"):
        if result.model_path:
            with storage.local_copy(result.model_path) as model_dir:
                after = evaluator(config.train.encoder.load(model_dir))
    timings.total()

    summary = {
        "source": source,
        "train_pairs": train_rows,
        "eval_pairs": len(eval_rows),
        "steps": result.steps,
        "final_loss": result.last_loss,
        "rows_skipped": result.rows_skipped,
        "pairs_per_s": result.steady_rows_per_s,
        "before": before,
        "after": after,
        "model_path": result.model_path,
        "timings_s": timings,
    }
    write_json_atomic(storage.join(run_dir, "metrics.json"), summary)
    inputs = {}
    if config.pairs and Path(config.pairs).is_file():
        inputs[config.pairs] = file_checksum(config.pairs)
    write_manifest(run_dir, job="pair_fit", config=config, inputs=inputs, timings=timings,
                   counts={"train_pairs": train_rows, "eval_pairs": len(eval_rows), "steps": result.steps,
                           "rows_skipped": summary["rows_skipped"]})
    print(summary_table(summary))
    return summary


def summary_table(summary: dict[str, Any]) -> str:
    rows: list[list[Any]] = [
        ["data", summary["source"], ""],
        ["train pairs / eval pairs", summary["train_pairs"], summary["eval_pairs"]],
        ["optimiser steps", summary["steps"], ""],
        ["final loss", summary["final_loss"] if summary["final_loss"] is not None else "-", ""],
        ["train pairs/s (all workers, while stepping)", summary["pairs_per_s"] or "-", ""],
        ["rows skipped (malformed)", summary["rows_skipped"], ""],
    ]
    for metric in summary["before"]:
        rows.append([f"held-out {metric}: before → after", summary["before"][metric],
                     summary["after"].get(metric, "-")])
    rows.append(["time (s): train / total", summary["timings_s"]["train"], summary["timings_s"]["total"]])
    rows.append(["model", summary["model_path"] or "-", ""])
    return format_table(rows, headers=["pair fit", "value", ""])
