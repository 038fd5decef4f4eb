"""Every report of a fit, from every worker, kept as ``history.jsonl`` beside the run's checkpoints.

Ray Train's result keeps only the metrics stored with checkpoints; the learning curve, the per-worker
row counts and throughput windows live here. The callback runs in Ray Train's controller process.
"""

from __future__ import annotations

import json
from typing import Any

import ray.train

from contrastext import storage

HISTORY_FILE = "history.jsonl"
_SUMMED_ACROSS_WORKERS = ("rows_skipped", "rows_trained")


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
    location = storage.join(run_dir, HISTORY_FILE)
    if not storage.exists(location):
        return []
    return [json.loads(line) for line in storage.read_bytes(location).decode("utf-8").splitlines() if line.strip()]


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
        storage.write_bytes(storage.join(self.run_dir, HISTORY_FILE),
                            "".join(json.dumps(r, default=str) + "\n" for r in self._records).encode("utf-8"))
