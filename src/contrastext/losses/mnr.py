"""Multiple negatives ranking loss (InfoNCE with in-batch negatives), sentence-transformers style."""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from contrastext.losses.gather import all_gather_with_grad, local_offset


def _cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T


class MultipleNegativesRankingLoss(nn.Module):
    """Cross-entropy of ``scale * cos(anchor, candidate)`` with each anchor's own positive as the target.

    Candidates are the positives of every worker (when ``gather_across_workers``) followed by the
    optional hard negatives, gathered the same way. ``symmetric`` averages in the positive -> anchor
    direction, whose candidates are the (gathered) anchors only.
    """

    def __init__(self, scale: float = 20.0, symmetric: bool = False, gather_across_workers: bool = True) -> None:
        super().__init__()
        self.scale = scale
        self.symmetric = symmetric
        self.gather_across_workers = gather_across_workers

    def _gather(self, t: torch.Tensor) -> torch.Tensor:
        return all_gather_with_grad(t) if self.gather_across_workers else t

    def forward(self, anchors: torch.Tensor, positives: torch.Tensor,
                negatives: Optional[torch.Tensor] = None) -> torch.Tensor:
        offset = local_offset(anchors.shape[0], anchors.device) if self.gather_across_workers else 0
        labels = torch.arange(anchors.shape[0], device=anchors.device) + offset

        all_positives = self._gather(positives)
        candidates = all_positives if negatives is None else torch.cat([all_positives, self._gather(negatives)])
        loss = F.cross_entropy(self.scale * _cosine(anchors, candidates), labels)
        if not self.symmetric:
            return loss
        backward = F.cross_entropy(self.scale * _cosine(positives, self._gather(anchors)), labels)
        return (loss + backward) / 2
