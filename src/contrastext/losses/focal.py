"""Focal loss (Lin et al.) for classification, with optional class weights."""

from __future__ import annotations

from typing import Literal, Optional

import torch
import torch.nn.functional as F
from torch import nn

from contrastext.losses.reduction import LossSum

Reduction = Literal["mean", "sum", "none"]


class FocalLoss(nn.Module):
    """``-w_t (1 - p_t)^gamma log p_t``; "mean" is ``sum(w_t fl) / sum(w_t)``, so gamma=0 is cross-entropy."""

    weight: Optional[torch.Tensor]

    def __init__(self, gamma: float = 2.0, weight: Optional[torch.Tensor] = None,
                 reduction: Reduction = "mean") -> None:
        super().__init__()
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"Unknown reduction {reduction!r}; expected mean, sum or none.")
        self.gamma = gamma
        self.reduction: Reduction = reduction
        self.register_buffer("weight", weight)

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        weighted, w_t = self._terms(logits, targets)
        if self.reduction == "none":
            return weighted
        if self.reduction == "sum":
            return weighted.sum()
        return weighted.sum() / w_t.sum()

    def sum_and_count(self, logits: torch.Tensor, targets: torch.Tensor) -> LossSum:
        """``sum(w_t fl)`` and ``sum(w_t)``: the "mean" reduction's numerator and denominator."""
        weighted, w_t = self._terms(logits, targets)
        return LossSum(weighted.sum(), w_t.sum())

    def _terms(self, logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        log_p_t = F.log_softmax(logits, dim=-1).gather(1, targets[:, None]).squeeze(1)
        fl = -log_p_t
        if self.gamma != 0:
            fl = (1 - log_p_t.exp()).pow(self.gamma) * fl
        w_t = self.weight[targets] if self.weight is not None else torch.ones_like(fl)
        return w_t * fl, w_t
