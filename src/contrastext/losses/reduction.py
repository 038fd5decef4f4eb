"""A loss as (sum of its terms, how many terms), and its mean over the terms of every worker.

A mean loss cannot be combined across workers exactly unless one knows what each worker averaged over
(the rows, twice the rows for NT-Xent, the anchors that have a positive for SupCon, the class weights for
focal loss). The losses of this package therefore also give their :class:`LossSum`, and
:func:`mean_over_workers` divides the sums by the counts added up over all ranks.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import torch
import torch.distributed as dist

from contrastext.losses.gather import is_distributed


class LossSum(NamedTuple):
    """``total``: the sum of a loss's per-anchor terms (a scalar in the graph); ``count``: what it averages over."""

    total: torch.Tensor
    count: torch.Tensor

    def mean(self) -> torch.Tensor:
        """``total / count``, or ``total`` itself (0, still in the graph) when there is nothing to average."""
        count = self.count.to(self.total.dtype)
        return self.total / torch.where(count > 0, count, torch.ones_like(count))


def mean_over_workers(parts: Sequence[LossSum]) -> tuple[torch.Tensor, float]:
    """``sum_k (sum over ranks of total_k) / (sum over ranks of count_k)``: the one-process loss of the whole batch.

    Returns what to call ``backward`` on and the loss's value. The former is ``W * sum_k total_k / count_k``
    with the counts summed over the W ranks: the gather's backward sums every rank's gradient into the local
    rows, so those rows get W times the one-process gradient, and DistributedDataParallel's average of the
    parameter gradients divides the W out again. Every rank must pass the same number of parts.
    """
    if not parts:
        raise ValueError("no loss parts to combine")
    device = parts[0].total.device
    stats = torch.stack([torch.stack([p.total.detach().to(device, torch.float64),
                                      p.count.detach().to(device, torch.float64)]) for p in parts])
    world = 1
    if is_distributed():
        dist.all_reduce(stats)
        world = dist.get_world_size()
    totals, counts = stats[:, 0], stats[:, 1]
    counts = torch.where(counts > 0, counts, torch.ones_like(counts))  # no terms anywhere: each total is 0
    to_backward = world * parts[0].total / counts[0].to(parts[0].total.dtype)
    for k, p in enumerate(parts[1:], start=1):
        to_backward = to_backward + world * p.total / counts[k].to(p.total.dtype)
    return to_backward, float((totals / counts).sum())
