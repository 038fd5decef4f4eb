"""Every report of a fit, from every worker, kept as ``history.jsonl`` beside the run's checkpoints.

Ray Train's result keeps only the metrics stored with checkpoints; the learning curve, the per-worker
row counts and throughput windows live here. The callback runs in Ray Train's controller process.
"""

from __future__ import annotations

import json
from typing import Any

import ray.train

HISTORY_FILE = "history.jsonl"
_SUMMED_ACROSS_WORKERS = ("rows_skipped", "rows_trained")


def _filesystem(run_dir: str):
    import pyarrow.fs

    if "://" in run_dir:
        return pyarrow.fs.FileSystem.from_uri(run_dir)
    return pyarrow.fs.LocalFileSystem(), run_dir


def merge_worker_metrics(per_worker: list[dict[str, Any]]) -> dict[str, Any]:
    """Rank 0's metrics, with counts that each worker keeps for its own shard summed over all workers."""
    merged = dict(per_worker[0]) if per_worker else {}
    for key in _SUMMED_ACROSS_WORKERS:
        values = [m[key] for m in per_worker if key in m]
        if values:
            merged[key] = sum(values)
    reasons: dict[str, int] = {}
    for m in per_worker:
        for reason, count in (m.get("skipped_reasons") or {}).items():
            reasons[reason] = reasons.get(reason, 0) + count
    if any("skipped_reasons" in m for m in per_worker):
        merged["skipped_reasons"] = reasons
    return merged


def read_history(run_dir: str) -> list[dict[str, Any]]:
    fs, path = _filesystem(run_dir)
    target = f"{path}/{HISTORY_FILE}"
    import pyarrow.fs

    if fs.get_file_info(target).type == pyarrow.fs.FileType.NotFound:
        return []
    with fs.open_input_stream(target) as f:
        return [json.loads(line) for line in f.read().decode("utf-8").splitlines() if line.strip()]


class HistoryCallback(ray.train.UserCallback):
    def __init__(self, run_dir: str):
        self.run_dir = run_dir
        self._records: list[dict[str, Any]] | None = None

    def after_report(self, run_context, metrics: list[dict[str, Any]], checkpoint) -> None:
        if self._records is None:  # a resumed run keeps the history of the runs before it
            self._records = read_history(self.run_dir)
        record = merge_worker_metrics(metrics)
        if checkpoint is not None:
            record["checkpoint"] = checkpoint.path
        self._records.append(record)
        fs, path = _filesystem(self.run_dir)
        fs.create_dir(path, recursive=True)
        tmp = f"{path}/{HISTORY_FILE}.tmp"
        with fs.open_output_stream(tmp) as f:
            f.write("".join(json.dumps(r, default=str) + "\n" for r in self._records).encode("utf-8"))
        fs.move(tmp, f"{path}/{HISTORY_FILE}")
