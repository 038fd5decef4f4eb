"""Fits in the calling process (``train.in_process``): Ray Train's local mode, with the run's checkpoints and
history kept where a worker-group run keeps them.

A worker group costs about 8 s to start and stop on every fit (controller, placement group, workers, the
train function's set-up), which dominates a small CPU fit: a classifier trained over HTTP, a self-training
round on a laptop. Ray Train's local mode (``ScalingConfig(num_workers=0)``) runs the training function in
this process instead, but it keeps no checkpoint beyond the last report's temporary folder, writes no
history and runs no ``RunConfig`` callbacks. :class:`InProcessRun` does that part here, in the layout a
worker-group run leaves: ``checkpoint_step…`` folders under the run folder (the newest
``keep_checkpoints``) and ``history.jsonl`` beside them, each record naming the checkpoint it carried.

Either mode resumes from the newest checkpoint the history names (:func:`newest_checkpoint`; a worker-group
run also from Ray Train's own, whichever is further on), so a fit interrupted in one mode goes on in the
other. A history record is written only once its checkpoint is stored whole: a fit killed half-way through
a copy resumes from the one before, and the next in-process start removes the unnamed folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.fs

from contrastext import storage
from contrastext.train.checkpoint import checkpoint_step
from contrastext.train.history import HISTORY_FILE, read_history

#: keys of ``train_loop_per_worker``'s config: an in-process run's folder, and the checkpoint to resume from
RUN_DIR_KEY, RESUME_KEY = "in_process_run_dir", "resume_from"
#: Ray Train's record of a worker-group run's checkpoints (``ray.train.v2._internal.constants``, not public):
#: an in-process run removes it, since it prunes checkpoints that record would still name
RAY_SNAPSHOT_FILE = "checkpoint_manager_snapshot.json"


def _named(run_dir: str, records: list[dict[str, Any]]) -> list[str]:
    """The checkpoints the records name, oldest first, as locations on the run's storage."""
    scheme = run_dir.split("://", 1)[0] if storage.is_uri(run_dir) else None
    # a worker-group run's history names its checkpoints by their path within the run's filesystem
    named = [c if scheme is None or storage.is_uri(c) else f"{scheme}://{c}"
             for c in (record.get("checkpoint") for record in records) if c]
    return list(dict.fromkeys(named))


def newest_checkpoint(run_dir: str) -> str | None:
    """The newest checkpoint the run's history names whose folder is there, or None."""
    stored = [location for location in _named(run_dir, read_history(run_dir)) if storage.is_dir(location)]
    return max(stored, key=checkpoint_step, default=None)


def as_ray_checkpoint(location: str | None):
    import ray.train

    if location is None:
        return None
    filesystem, path = storage.resolve(location)
    return ray.train.Checkpoint(path=path, filesystem=filesystem)


class InProcessRun:
    """The checkpoints and history of one in-process fit, under ``run_dir`` (a local folder or a URI).

    Made when the fit starts: it removes what an interrupted run left that no history record names.
    """

    def __init__(self, run_dir: str, keep_checkpoints: int):
        self.run_dir = run_dir
        self.keep_checkpoints = keep_checkpoints
        self._records = read_history(run_dir)
        self._unstored = 0  # records appended since history.jsonl was last written
        self._stored = [c for c in _named(run_dir, self._records) if storage.is_dir(c)]
        self._sweep()

    def _sweep(self) -> None:
        storage.delete(storage.join(self.run_dir, RAY_SNAPSHOT_FILE))
        filesystem, path = storage.resolve(self.run_dir)
        named = {checkpoint_step(c) for c in self._stored}
        for info in filesystem.get_file_info(pyarrow.fs.FileSelector(path, allow_not_found=True)):
            step = checkpoint_step(info.base_name)
            if info.type == pyarrow.fs.FileType.Directory and step >= 0 and step not in named:
                filesystem.delete_dir(info.path)

    @property
    def history_location(self) -> str:
        return storage.join(self.run_dir, HISTORY_FILE)

    def report(self, metrics: dict[str, Any], checkpoint_dir: Path | None, checkpoint_name: str) -> None:
        """Store ``checkpoint_dir`` (when given) as ``checkpoint_name``, then the history with the record naming
        it; a record without a checkpoint is written with the next one that has one, or by :meth:`finish`."""
        record = dict(metrics)
        self._records.append(record)
        self._unstored += 1
        if checkpoint_dir is None:
            return
        location = storage.join(self.run_dir, checkpoint_name)
        storage.copy_tree(str(checkpoint_dir), location)
        record["checkpoint"] = location
        self._stored = [c for c in self._stored if c != location] + [location]
        self.finish()
        for stale in self._stored[:-self.keep_checkpoints]:
            storage.delete(stale)
        self._stored = self._stored[-self.keep_checkpoints:]

    def finish(self) -> None:
        """Write ``history.jsonl`` whole (nothing to do when it is up to date)."""
        if self._unstored:
            storage.write_bytes(self.history_location, "".join(
                json.dumps(r, default=str) + "\n" for r in self._records).encode("utf-8"))
            self._unstored = 0
