"""The reports of a fit kept as ``history.jsonl`` beside the run's checkpoints, one record per report.

Ray Train's result keeps only the metrics stored with checkpoints; the learning curve, the row counts and
throughput windows live here. A record is rank 0's metrics (see :func:`merge_worker_metrics`), with
``rows_trained`` and ``rows_skipped`` summed over the workers and ``skipped_reasons`` added up by reason,
plus ``checkpoint`` (its path) when the report carried one. Other workers' own metrics are not kept; what
rank 0 reports already covers them where it matters: ``loss`` is the loss over every worker's batch (the
loop combines the workers' sums and counts), ``step``, ``epoch`` and ``lr`` are the same on every worker,
``rows_per_s`` is rank 0's rate times the workers, and ``eval_*`` runs on rank 0 only.

:class:`HistoryCallback` runs in Ray Train's controller process. It appends each record to a file in the
controller node's scratch space as it comes, and writes the run's ``history.jsonl`` whole only when a
report carries a checkpoint and when the run ends (finished, failed or aborted): the stored history is
complete up to the last checkpoint while the run goes on, and complete once it has ended. A run that
resumes an earlier one starts from the stored history, so the records of the runs before it come first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ray.train
from ray.train.v2._internal.execution.callback import (
    ControllerCallback,  # has the end-of-run hooks
)
from ray.train.v2.api.callback import RayTrainCallback

from contrastext import storage

HISTORY_FILE = "history.jsonl"
_SUMMED_ACROSS_WORKERS = ("rows_skipped", "rows_trained")


def logged_windows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of the step-interval reports, each covering the steps since the one before.

    They are the ones with ``rows_per_s``. An epoch's closing report has none: it covers whatever steps were
    left, possibly none (it then has no loss) or one short last batch (whose in-batch loss is near 0).
    """
    return [r for r in records if r.get("rows_per_s") is not None and r.get("loss") is not None]


def runs_of(records: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The records split by the run that reported them.

    A resumed run starts again from its checkpoint's step: ``resumed_from_step`` changes, or the step goes
    back, or it repeats where one run never reports the same step twice except as a window followed by its
    epoch's closing report.
    """
    runs: list[list[dict[str, Any]]] = []
    for record in records:
        previous = runs[-1][-1] if runs else None
        if previous is None or _starts_a_run(record, previous):
            runs.append([])
        runs[-1].append(record)
    return runs


def _starts_a_run(record: dict[str, Any], previous: dict[str, Any]) -> bool:
    if record.get("resumed_from_step") != previous.get("resumed_from_step"):
        return True
    step, previous_step = record.get("step", 0), previous.get("step", 0)
    if step != previous_step:
        return step < previous_step
    closes_the_epoch = "rows_trained" in record and "rows_trained" not in previous
    return not closes_the_epoch


def total_over_runs(records: list[dict[str, Any]], key: str) -> int:
    """A count each run keeps from its own start (``rows_trained``, ``rows_skipped``), added up over the runs
    that made the history; rows a resumed run trained again count again."""
    return sum(max((int(r[key]) for r in run if r.get(key) is not None), default=0) for run in runs_of(records))


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
    """Records every report; pass :meth:`callbacks` (this and its end-of-run hook) to ``RunConfig``."""

    def __init__(self, run_dir: str):
        self.run_dir = run_dir
        self._local: Path | None = None  # the records so far, in the controller's scratch space
        self._unstored = 0  # records appended since history.jsonl was last written

    def callbacks(self) -> list[RayTrainCallback]:
        """This callback and the hook that writes the history when the run ends, for ``RunConfig.callbacks``."""
        return [self, HistoryRunEnd(self)]

    @property
    def location(self) -> str:
        return storage.join(self.run_dir, HISTORY_FILE)

    @property
    def local_path(self) -> Path | None:
        return self._local

    def _start(self) -> Path:
        # a resumed run keeps the history of the runs before it
        local = storage.scratch_dir(prefix="contrastext-history-") / HISTORY_FILE
        stored = storage.read_bytes(self.location) if storage.exists(self.location) else b""
        if stored and not stored.endswith(b"\n"):
            stored += b"\n"
        local.write_bytes(stored)
        self._local, self._unstored = local, 0
        return local

    def after_report(self, run_context, metrics: list[dict[str, Any]], checkpoint) -> None:
        local = self._local if self._local is not None else self._start()
        record = merge_worker_metrics(metrics)
        if checkpoint is not None:
            record["checkpoint"] = checkpoint.path
        with local.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record, default=str) + "\n")
        self._unstored += 1
        if checkpoint is not None:
            self.store()

    def store(self) -> None:
        """Write ``history.jsonl`` whole from the local records (nothing to do when it is up to date)."""
        if self._local is None or self._unstored == 0:
            return
        storage.write_bytes(self.location, self._local.read_bytes())
        self._unstored = 0

    def finish(self) -> None:
        """Store what is left and drop the local file; a later report would start again from the stored one."""
        if self._local is None:
            return
        self.store()
        storage.remove_local(self._local.parent)
        self._local = None


class HistoryRunEnd(ControllerCallback):
    """Writes the remaining records of a :class:`HistoryCallback` when the run ends.

    Ray Train hands ``UserCallback`` instances only ``after_report`` and ``after_exception``, so the end of
    the run is taken from the controller: ``after_controller_finish`` (a finished or failed run, before
    ``trainer.fit()`` returns) and ``before_controller_abort`` (a run stopped with Ctrl-C).
    """

    def __init__(self, history: HistoryCallback):
        self.history = history

    def after_controller_finish(self, result) -> None:
        self.history.finish()

    def before_controller_abort(self) -> None:
        self.history.finish()
