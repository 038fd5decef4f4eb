"""The per-worker training function that Ray Train runs on every worker."""

from __future__ import annotations

import math
import tempfile
import time
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Callable

import torch
import torch.distributed as dist
from torch import nn

from contrastext import storage
from contrastext.config import TrainConfig
from contrastext.losses.reduction import mean_over_workers
from contrastext.train.batches import SkippedRows
from contrastext.train.checkpoint import (
    MODEL_SUBDIR,
    Progress,
    checkpoint_dir_name,
    checkpoint_step,
    load_progress,
    restore_state,
    save_checkpoint,
)
from contrastext.train.in_process import RESUME_KEY, RUN_DIR_KEY, InProcessRun, as_ray_checkpoint
from contrastext.train.objectives import build_objective, loss_parts

# called with the model being trained: a TextEncoder (embedding objective) or a TextClassifier (classify)
EvalFn = Callable[[nn.Module], dict[str, float]]


def _all_have_batch(local_rows: int, device: torch.device) -> bool:
    """One collective per step, before the forward: does every rank have a batch?

    Every rank must take the same number of steps (the gathers in the losses are collectives), so an
    epoch ends when any rank runs dry. A rank without a batch passes ``local_rows=0``.
    """
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return local_rows > 0
    ranks_without_batch = torch.tensor([0 if local_rows else 1], dtype=torch.long, device=device)
    dist.all_reduce(ranks_without_batch)
    return int(ranks_without_batch.item()) == 0


def training_autocast(device: torch.device, bf16: bool) -> AbstractContextManager:
    """bf16 autocast on a GPU, and on a CPU that multiplies bf16 natively (AMX, AVX512-BF16); else float32."""
    from contrastext.models.encoder import cpu_has_native_bf16

    if bf16 and (device.type == "cuda" or (device.type == "cpu" and cpu_has_native_bf16())):
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return nullcontext()


def lr_scheduler(optimizer: torch.optim.Optimizer, total_steps: int, warmup_steps: int,
                 schedule: str = "linear") -> torch.optim.lr_scheduler.LambdaLR:
    """transformers' schedules: linear warm-up from 0 over ``warmup_steps``, then linear decay to 0 at
    ``total_steps`` (``linear``) or the full rate (``constant``)."""
    from transformers import get_constant_schedule_with_warmup, get_linear_schedule_with_warmup

    if schedule == "constant":
        return get_constant_schedule_with_warmup(optimizer, warmup_steps)
    return get_linear_schedule_with_warmup(optimizer, warmup_steps, total_steps)


def _resume_from(ray_checkpoint, named: str | None):
    """Ray Train's checkpoint of a worker-group run or the newest its history names (an in-process run's),
    whichever is further on."""
    if ray_checkpoint is not None and checkpoint_step(ray_checkpoint.path) >= checkpoint_step(named):
        return ray_checkpoint
    return as_ray_checkpoint(named)


def train_loop_per_worker(loop_config: dict[str, Any]) -> None:
    import ray.train
    import ray.train.torch

    config = TrainConfig.model_validate(loop_config["train"])
    total_steps: int = loop_config["total_steps"]
    eval_fn: EvalFn | None = loop_config.get("eval_fn")
    context = ray.train.get_context()
    rank, world = context.get_world_rank(), context.get_world_size()
    # Ray's local mode hands out a visible GPU whatever use_gpu says; an in-process fit is a CPU fit
    device = torch.device("cpu") if loop_config.get(RUN_DIR_KEY) else ray.train.torch.get_device()
    if device.type == "cpu":  # a CPU worker computes on the cores it reserved (torch would otherwise take one)
        torch.set_num_threads(max(1, int(config.scaling.cpus_per_worker)))
    torch.manual_seed(config.seed)

    objective = loop_config["objective"](config) if "objective" in loop_config else build_objective(config)
    # an in-process fit (Ray Train's local mode) stores its own checkpoints and history
    in_process = (InProcessRun(loop_config[RUN_DIR_KEY], config.keep_checkpoints)
                  if loop_config.get(RUN_DIR_KEY) else None)
    checkpoint = _resume_from(None if in_process else ray.train.get_checkpoint(), loop_config.get(RESUME_KEY))
    progress = Progress()
    model_spec = config.encoder.model
    resume_dir_ctx = checkpoint.as_directory() if checkpoint else nullcontext(None)
    with resume_dir_ctx as resume_dir:
        if resume_dir:
            model_spec = str(Path(resume_dir) / MODEL_SUBDIR)
            progress = load_progress(Path(resume_dir))
        with storage.local_copy(model_spec) if storage.is_uri(model_spec) else nullcontext(model_spec) as spec:
            net = objective.build_model(str(spec), resuming=bool(resume_dir))
        model = ray.train.torch.prepare_model(net, move_to_device=device)
        optimizer = torch.optim.AdamW(objective.param_groups(net), lr=config.optimizer.lr,
                                      weight_decay=config.optimizer.weight_decay)
        warmup = math.ceil(total_steps * config.optimizer.warmup_ratio)
        scheduler = lr_scheduler(optimizer, total_steps, warmup, config.optimizer.schedule)
        if resume_dir:
            restore_state(Path(resume_dir), optimizer, scheduler)
            if rank == 0:
                print(f"[contrastext] resuming at step {progress.step} (epoch {progress.epoch}, "
                      f"batch {progress.batch_in_epoch})", flush=True)

    autocast = training_autocast(device, config.bf16)
    if rank == 0:
        print(f"[contrastext] training on {device.type} in "
              f"{'bf16 autocast' if isinstance(autocast, torch.autocast) else 'float32'}", flush=True)
    shard = ray.train.get_dataset_shard("train")
    skipped = SkippedRows()
    window_loss, window_steps, window_rows, window_start = 0.0, 0, 0, time.perf_counter()
    rows_seen = 0
    resumed_from = progress.step
    last_checkpoint_step = progress.step if resume_dir else -1

    def report(metrics: dict[str, Any], with_checkpoint: bool) -> None:
        nonlocal last_checkpoint_step
        metrics = {**metrics, "step": progress.step, "epoch": progress.epoch,
                   "lr": scheduler.get_last_lr()[0], "rows_skipped": skipped.total, "resumed_from_step": resumed_from}
        if not with_checkpoint:
            if in_process:
                in_process.report(metrics, None, "")
            else:
                ray.train.report(metrics)
            return
        with tempfile.TemporaryDirectory() as tmp:
            ckpt = None
            if rank == 0:
                save_checkpoint(Path(tmp), net, optimizer, scheduler, progress)
                ckpt = ray.train.Checkpoint.from_directory(tmp)
            if in_process:
                in_process.report(metrics, Path(tmp), checkpoint_dir_name(progress))
            else:
                ray.train.report(metrics, checkpoint=ckpt, checkpoint_dir_name=checkpoint_dir_name(progress))
        last_checkpoint_step = progress.step
        if rank == 0:
            print(f"[contrastext] checkpoint at step {progress.step}", flush=True)

    def evaluate() -> dict[str, float]:
        if eval_fn is None or rank != 0:
            return {}
        net.eval()
        try:
            return {f"eval_{k}": float(v) for k, v in eval_fn(net).items()}
        finally:
            net.train()

    try:
        done = config.max_steps is not None and progress.step >= config.max_steps
        for epoch in range(progress.epoch, config.epochs):
            if done:
                break
            skip = progress.batch_in_epoch if epoch == progress.epoch else 0
            progress.epoch, progress.batch_in_epoch = epoch, 0
            batches = objective.batches(shard, epoch, rank, world, skipped)
            while True:
                batch = next(batches, None)
                if not _all_have_batch(len(batch) if batch else 0, device):
                    break
                progress.batch_in_epoch += 1
                if progress.batch_in_epoch <= skip:
                    continue  # batches this epoch already trained on before the resume
                # the loss over every worker's batch, as one process would compute it over their concatenation
                to_backward, loss = mean_over_workers(loss_parts(objective.loss(model, batch, device, autocast),
                                                                 len(batch)))
                optimizer.zero_grad(set_to_none=True)
                to_backward.backward()
                if config.optimizer.max_grad_norm:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), config.optimizer.max_grad_norm)
                optimizer.step()
                scheduler.step()
                progress.step += 1
                window_loss += loss
                window_steps += 1
                window_rows += len(batch)
                rows_seen += len(batch)
                done = config.max_steps is not None and progress.step >= config.max_steps
                at_checkpoint = (bool(config.checkpoint_every_steps)
                                 and progress.step % config.checkpoint_every_steps == 0)
                at_eval = bool(config.eval_every_steps) and progress.step % config.eval_every_steps == 0
                if progress.step % config.log_every_steps == 0 or at_checkpoint or at_eval or done:
                    elapsed = time.perf_counter() - window_start
                    metrics = {"loss": window_loss / max(1, window_steps),
                               "rows_per_s": window_rows * world / max(elapsed, 1e-9),
                               **(evaluate() if at_eval else {})}
                    if rank == 0:
                        print(f"[contrastext] step {progress.step}/{total_steps} epoch {epoch} "
                              f"loss {metrics['loss']:.4f} rows/s {metrics['rows_per_s']:.1f}", flush=True)
                    report(metrics, with_checkpoint=at_checkpoint and not done)
                    window_loss, window_steps, window_rows, window_start = 0.0, 0, 0, time.perf_counter()
                if done:
                    break
            if not done:
                progress.epoch, progress.batch_in_epoch = epoch + 1, 0
            # every epoch ends (and the run finishes) with a checkpoint of the model it reached, unless the
            # step-interval checkpoint has just saved that model: one step, one checkpoint folder
            # a window report on the epoch's last step leaves no step to this one: it then has no loss
            # rather than a loss of 0 that would read as a trained value
            window = {"loss": window_loss / window_steps} if window_steps else {}
            report({**window, "rows_trained": rows_seen, "skipped_reasons": dict(skipped.reasons), **evaluate()},
                   with_checkpoint=progress.step != last_checkpoint_step)
            window_loss, window_steps, window_rows, window_start = 0.0, 0, 0, time.perf_counter()
    finally:
        if in_process:
            in_process.finish()
