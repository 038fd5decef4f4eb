"""Fits in the calling process (``scaling.in_process``): Ray Train's local mode, with the run's checkpoints and
history kept where a worker-group run keeps them.

A worker group costs about 8 s to start and stop on every fit (controller, placement group, workers, the
train function's set-up), which dominates a small CPU fit: a classifier trained over HTTP, a self-training
round on a laptop. Ray Train's local mode (``ScalingConfig(num_workers=0)``) runs the training function in
this process instead, but it keeps no checkpoint beyond the last report's temporary folder, writes no
history and runs no ``RunConfig`` callbacks. :class:`InProcessRun` does that part here, in the same layout a
worker-group run leaves: ``checkpoint_step…`` folders under the run folder (the newest
``keep_checkpoints``) and ``history.jsonl`` beside them, each record naming the checkpoint it carried. A run
resumes from the newest checkpoint its history names, so a history record is written only after its
checkpoint is stored whole; a fit interrupted half-way through a copy resumes from the one before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from contrastext import storage
from contrastext.train.history import HISTORY_FILE, read_history

#: the key of ``train_loop_per_worker``'s config that names an in-process run's folder
RUN_DIR_KEY = "in_process_run_dir"


class InProcessRun:
    """The checkpoints and history of one in-process fit, under ``run_dir`` (a local folder or a URI)."""

    def __init__(self, run_dir: str, keep_checkpoints: int):
        self.run_dir = run_dir
        self.keep_checkpoints = keep_checkpoints
        self._records = read_history(run_dir)

    @property
    def history_location(self) -> str:
        return storage.join(self.run_dir, HISTORY_FILE)

    def stored_checkpoints(self) -> list[str]:
        """The checkpoints the history names whose folders are there, oldest first."""
        named = [self._location(record["checkpoint"]) for record in self._records if record.get("checkpoint")]
        return [location for location in dict.fromkeys(named) if storage.is_dir(location)]

    def _location(self, named: str) -> str:
        # a worker-group run's history names its checkpoints by their path within the run's filesystem
        if storage.is_uri(self.run_dir) and not storage.is_uri(named):
            return f"{self.run_dir.split('://', 1)[0]}://{named}"
        return named

    def latest_checkpoint(self):
        """The newest stored checkpoint as a ``ray.train.Checkpoint``, or None for a fresh run."""
        import ray.train

        stored = self.stored_checkpoints()
        if not stored:
            return None
        filesystem, path = storage.resolve(stored[-1])
        return ray.train.Checkpoint(path=path, filesystem=filesystem)

    def report(self, metrics: dict[str, Any], checkpoint_dir: Path | None, checkpoint_name: str) -> None:
        """Store ``checkpoint_dir`` (when given) as ``checkpoint_name``, then append the record naming it."""
        record = dict(metrics)
        if checkpoint_dir is not None:
            location = storage.join(self.run_dir, checkpoint_name)
            storage.copy_tree(str(checkpoint_dir), location)
            record["checkpoint"] = location
        self._records.append(record)
        storage.write_bytes(self.history_location, "".join(
            json.dumps(r, default=str) + "\n" for r in self._records).encode("utf-8"))
        if checkpoint_dir is not None:
            for stale in self.stored_checkpoints()[:-self.keep_checkpoints]:
                storage.delete(stale)
