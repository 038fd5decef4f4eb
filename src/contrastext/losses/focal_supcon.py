"""Focal loss on a classifier's logits plus λ·supervised NT-Xent on its embeddings."""

from __future__ import annotations

import torch
from torch import nn

from contrastext.losses.focal import FocalLoss
from contrastext.losses.reduction import LossSum
from contrastext.losses.supcon import SupervisedNTXentLoss


class FocalSupConLoss(nn.Module):
    """``focal_weight · focal(logits, y) + ntxent_weight · supcon(embeddings, y)``.

    ``focal_weight=0`` is NT-Xent alone; ``ntxent_weight=0`` is focal alone (no cross-worker gather then).
    With ``focal_weight=0`` the logits still enter the graph with weight 0, so under data parallel every
    parameter of the head receives a (zero) gradient, as DDP requires.
    """

    def __init__(self, focal_weight: float = 1.0, ntxent_weight: float = 1.0, gamma: float = 2.0,
                 temperature: float = 0.1, gather_across_workers: bool = True) -> None:
        super().__init__()
        if focal_weight < 0 or ntxent_weight < 0:
            raise ValueError(f"loss weights must be >= 0, got focal {focal_weight}, ntxent {ntxent_weight}")
        if focal_weight == 0 and ntxent_weight == 0:
            raise ValueError("focal_weight and ntxent_weight are both 0: nothing to train")
        self.focal_weight = focal_weight
        self.ntxent_weight = ntxent_weight
        self.focal = FocalLoss(gamma=gamma)
        self.supcon = SupervisedNTXentLoss(temperature=temperature, gather_across_workers=gather_across_workers)

    def forward(self, logits: torch.Tensor, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        focal, *rest = self.parts(logits, embeddings, labels)
        return focal.mean() + sum(part.mean() for part in rest)

    def parts(self, logits: torch.Tensor, embeddings: torch.Tensor, labels: torch.Tensor) -> list[LossSum]:
        """The weighted focal and NT-Xent sums, each with its own count: they average over different things
        (rows, anchors with a positive), so each is averaged across workers on its own."""
        focal = self.focal.sum_and_count(logits.float(), labels)
        parts = [LossSum(self.focal_weight * focal.total, focal.count)]
        if self.ntxent_weight:
            supcon = self.supcon.sum_and_count(embeddings.float(), labels)
            parts.append(LossSum(self.ntxent_weight * supcon.total, supcon.count))
        return parts
