"""Focal loss on a classifier's logits plus λ·supervised NT-Xent on its embeddings."""

from __future__ import annotations

import torch
from torch import nn

from contrastext.losses.focal import FocalLoss
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
        loss = self.focal_weight * self.focal(logits.float(), labels)
        if self.ntxent_weight:
            loss = loss + self.ntxent_weight * self.supcon(embeddings.float(), labels)
        return loss
