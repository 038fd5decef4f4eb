"""Differentiable all-gather across torch.distributed ranks, for in-batch negatives over all workers.

Gradient semantics under data parallel. W workers hold B_r rows each (N = sum B_r). Every loss in
this package scores its LOCAL anchors against candidates gathered from all ranks; write l_i for anchor
i's term, the same number it would be in one process over the N rows.

* Values: rank r holds S_r = sum_{i in r} l_i over its n_r anchors (n_r: B_r; 2 B_r for NT-Xent; for
  SupCon the local anchors with a positive anywhere in the batch). The one-process loss over the
  concatenated batch is L = sum_r S_r / sum_r n_r; the plain mean of the rank means is L only when every
  n_r is the same. The losses give (S_r, n_r) as a ``LossSum`` and
  ``contrastext.losses.reduction.mean_over_workers`` adds the counts up across ranks.
* Gradients: the backward of the gather SUMS the incoming gradients across ranks (all_reduce, then
  keep the local rows), so rank r's local rows receive d(sum_r' Q_r')/dx from every rank's Q_r', not
  only from their own. With Q_r = W S_r / sum_r' n_r', sum_r' Q_r' = W L: the local rows get W times the
  single-process gradient, and DistributedDataParallel's division of the parameter gradients by W
  reproduces the single-process parameter gradient exactly, whatever the n_r.

Every rank must run the same sequence of gathers (same losses, hard negatives on all or none) and
call backward, since the backward is itself a collective.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist


def is_distributed() -> bool:
    """A process group with more than one rank is running."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _gather_sizes(local_size: int, device: torch.device) -> list[int]:
    size = torch.tensor([local_size], dtype=torch.long, device=device)
    sizes = [torch.zeros_like(size) for _ in range(dist.get_world_size())]
    dist.all_gather(sizes, size)
    return [int(s.item()) for s in sizes]


class _AllGatherWithGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, t: torch.Tensor) -> torch.Tensor:
        sizes = _gather_sizes(t.shape[0], t.device)
        rank = dist.get_rank()
        ctx.start = sum(sizes[:rank])
        ctx.local_size = t.shape[0]
        max_size = max(sizes)
        padded = t.new_zeros((max_size, *t.shape[1:]))
        padded[: t.shape[0]] = t
        chunks = [torch.empty_like(padded) for _ in sizes]
        dist.all_gather(chunks, padded.contiguous())
        return torch.cat([chunk[:n] for chunk, n in zip(chunks, sizes)], dim=0)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> torch.Tensor:
        grad = grad_output.contiguous().clone()
        # all_reduce (not reduce_scatter): gloo lacks it and it handles unequal sizes without padding.
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad[ctx.start : ctx.start + ctx.local_size]


def all_gather_with_grad(t: torch.Tensor) -> torch.Tensor:
    """Concatenate ``t`` from every rank along dim 0 (rank order); the backward sums gradients across ranks.

    Ranks may hold different numbers of rows. Returns ``t`` itself outside a multi-rank process group.
    """
    if not is_distributed():
        return t
    return _AllGatherWithGrad.apply(t)


def local_offset(local_size: int, device: torch.device | str = "cpu") -> int:
    """Row at which this rank's ``local_size`` rows start in the gathered tensor (0 when not distributed).

    ``device`` must suit the backend (a CUDA device for NCCL).
    """
    if not is_distributed():
        return 0
    sizes = _gather_sizes(local_size, torch.device(device))
    return sum(sizes[: dist.get_rank()])
