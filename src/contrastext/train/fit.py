"""The driver side of training: one TorchTrainer-based fit that every method uses."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contrastext import storage
from contrastext.config import OutputConfig, TrainConfig
from contrastext.train.checkpoint import MODEL_SUBDIR
from contrastext.train.history import HistoryCallback, logged_windows, read_history, total_over_runs
from contrastext.train.in_process import RESUME_KEY, RUN_DIR_KEY, as_ray_checkpoint, newest_checkpoint
from contrastext.train.objectives import Objective, build_objective
from contrastext.train.worker import EvalFn, train_loop_per_worker

DatasetOrFactory = Any  # ray.data.Dataset or a zero-argument callable returning one
# Ray Train's controller polls its workers this often (Ray's default 2 s), so a fit's end is seen up to that
# late: seconds on every short fit (a round, a classifier trained over HTTP). Ray Train hands the driver's
# value to its controller; a value the user set is kept.
POLL_INTERVAL_ENV, POLL_INTERVAL_S = "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.2"


@dataclass
class FitResult:
    """What a fit made, and its numbers read once from its history (``history.jsonl``, one record per report).

    ``metrics`` is the last record. The typed fields below are derived from ``history`` when the result is made.
    """

    model_path: str | None  # a local folder or a URI, like the run's storage path
    steps: int
    metrics: dict[str, Any]
    history: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    checkpoint_path: str | None = None
    #: the mean training loss of each logged window (every ``log_every_steps`` steps), in order
    window_losses: list[float] = field(init=False)
    #: rows per second over all workers in each logged window, in order
    window_rows_per_s: list[float] = field(init=False)
    #: rows trained on, summed over the workers and over the runs a resumed fit was made of
    rows_trained: int = field(init=False)
    #: malformed rows skipped, counted the same way
    rows_skipped: int = field(init=False)

    def __post_init__(self) -> None:
        windows = logged_windows(self.history)
        self.window_losses = [float(w["loss"]) for w in windows]
        self.window_rows_per_s = [float(w["rows_per_s"]) for w in windows]
        self.rows_trained = total_over_runs(self.history, "rows_trained")
        self.rows_skipped = total_over_runs(self.history, "rows_skipped")

    @property
    def steady_rows_per_s(self) -> float | None:
        """Rows per second over all workers while stepping: the mean of the windows' rates."""
        rates = self.window_rows_per_s
        return sum(rates) / len(rates) if rates else None

    @property
    def mean_loss(self) -> float | None:
        """The mean of the windows' losses; a fit too short to log a window has only its last report's loss."""
        if self.window_losses:
            return sum(self.window_losses) / len(self.window_losses)
        return self._last_reported_loss()

    @property
    def last_loss(self) -> float | None:
        """The loss of the last logged window (else of the last report)."""
        return self.window_losses[-1] if self.window_losses else self._last_reported_loss()

    def _last_reported_loss(self) -> float | None:
        # an epoch's closing report has no loss when no step was left after the last window
        for record in reversed(self.history or [self.metrics]):
            if record.get("loss") is not None:
                return float(record["loss"])
        return None


def data_config(objective: Objective, preserve_order: bool = True):
    """Split the dataset over the workers, or give each all of it when the objective plans the split itself;
    with ``preserve_order`` the blocks reach the workers in the dataset's order (``TrainConfig.preserve_order``).
    Ray Train replaces the dataset's own execution options with these."""
    import ray.train

    options = ray.train.DataConfig.default_ingest_options()
    options.preserve_order = preserve_order
    return ray.train.DataConfig(datasets_to_split="all" if objective.split_dataset else [],
                                execution_options=options)


@contextmanager
def _calling_process_kept():
    """An in-process fit sets torch's thread count and seeds its random generators for its worker; the calling
    process gets its own back."""
    import torch

    threads = torch.get_num_threads()
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        torch.set_num_threads(threads)


def fit(dataset: DatasetOrFactory, config: TrainConfig, output: OutputConfig, *,
        eval_fn: EvalFn | None = None, rows: int | None = None,
        export_model_to: str | Path | None = None) -> FitResult:
    """Train ``config.encoder`` on ``dataset`` with Ray Train (on a worker group, or in this process when
    ``config.trains_in_process()``); resumes when ``output`` names an earlier run.

    ``config.objective`` says what is trained (see ``contrastext.train.objectives``): the encoder, or the
    encoder plus a classification head. ``eval_fn(model) -> {name: value}`` runs on the first worker every
    ``eval_every_steps`` and at each epoch end. The final model is copied to ``export_model_to``
    (sentence-transformers format, plus the head for the classify objective) when given.
    """
    import ray.train
    from ray.train.torch import TorchTrainer

    os.environ.setdefault(POLL_INTERVAL_ENV, POLL_INTERVAL_S)
    ds = dataset() if callable(dataset) else dataset
    rows = rows if rows is not None else ds.count()
    if rows == 0:
        raise ValueError("The training dataset is empty.")
    objective = build_objective(config)
    run_dir = output.run_dir()
    in_process = config.trains_in_process()
    order_before = ds.context.execution_options.preserve_order
    ds.context.execution_options.preserve_order = config.preserve_order  # a packing plan reads as a worker will
    try:
        total_steps = objective.planned_steps(ds, rows)
    finally:
        ds.context.execution_options.preserve_order = order_before
    if in_process:  # Ray Train's local mode hands the dataset over as it is: no DataConfig applies
        ds.context.execution_options.preserve_order = config.preserve_order
    loop_config = {"train": config.model_dump(mode="json"), "total_steps": total_steps, "eval_fn": eval_fn,
                   # the objective's class travels by reference: a worker unpickling it imports its module
                   "objective": type(objective)}
    # either mode resumes from the newest checkpoint the history names (one written in the other mode too)
    loop_config[RESUME_KEY] = newest_checkpoint(run_dir)
    if in_process:
        loop_config[RUN_DIR_KEY] = run_dir
    # the same filesystem (endpoint, region) as every other read and write of the run
    storage_filesystem, storage_path = storage.resolve(output.storage_uri())
    trainer = TorchTrainer(
        train_loop_per_worker,
        train_loop_config=loop_config,
        scaling_config=ray.train.ScalingConfig(
            num_workers=0 if in_process else config.scaling.num_workers, use_gpu=config.scaling.use_gpu,
            resources_per_worker={"CPU": config.scaling.cpus_per_worker},
        ),
        run_config=ray.train.RunConfig(
            name=output.name,
            storage_path=storage_path,
            storage_filesystem=storage_filesystem,
            checkpoint_config=ray.train.CheckpointConfig(num_to_keep=config.keep_checkpoints),
            failure_config=ray.train.FailureConfig(max_failures=config.max_failures),
            callbacks=None if in_process else HistoryCallback(run_dir).callbacks(),
        ),
        datasets={"train": ds},
        dataset_config=data_config(objective, config.preserve_order),
    )
    started = time.perf_counter()
    try:
        with _calling_process_kept() if in_process else nullcontext():
            result = trainer.fit()
    finally:  # the caller's dataset (and those derived from it, which share its context) as it was
        ds.context.execution_options.preserve_order = order_before
    seconds = time.perf_counter() - started
    model_path = None
    checkpoint = as_ray_checkpoint(newest_checkpoint(run_dir)) if in_process else result.checkpoint
    if checkpoint is not None and export_model_to is not None:
        model_path = storage.copy_tree(storage.join(checkpoint.path, MODEL_SUBDIR), str(export_model_to),
                                       source_filesystem=checkpoint.filesystem)
    history = read_history(run_dir)
    metrics = history[-1] if history else dict(result.metrics or {})
    return FitResult(model_path=model_path, steps=int(metrics.get("step", 0)), metrics=metrics,
                     history=history, seconds=seconds, checkpoint_path=checkpoint.path if checkpoint else None)
