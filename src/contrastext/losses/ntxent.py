"""NT-Xent (SimCLR): each view's positive is its other view, the other 2N - 2 views are negatives."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from contrastext.losses.gather import all_gather_with_grad, local_offset


class NTXentLoss(nn.Module):
    """Mean over the local 2B views of the cross-entropy of ``cos / temperature`` over all other views.

    With ``gather_across_workers`` the candidate views are those of every worker (2N in all).
    """

    def __init__(self, temperature: float = 0.1, gather_across_workers: bool = True) -> None:
        super().__init__()
        self.temperature = temperature
        self.gather_across_workers = gather_across_workers

    def forward(self, view_a: torch.Tensor, view_b: torch.Tensor) -> torch.Tensor:
        a = F.normalize(view_a, dim=-1)
        b = F.normalize(view_b, dim=-1)
        local_n = a.shape[0]
        if self.gather_across_workers:
            offset = local_offset(local_n, a.device)
            all_a, all_b = all_gather_with_grad(a), all_gather_with_grad(b)
        else:
            offset, all_a, all_b = 0, a, b
        n = all_a.shape[0]

        anchors = torch.cat([a, b])  # [2B, D]
        candidates = torch.cat([all_a, all_b])  # [2N, D]: all a views, then all b views
        logits = anchors @ candidates.T / self.temperature

        rows = torch.arange(local_n, device=a.device) + offset
        self_idx = torch.cat([rows, rows + n])
        positive_idx = torch.cat([rows + n, rows])
        logits = logits.masked_fill(F.one_hot(self_idx, 2 * n).bool(), float("-inf"))
        return F.cross_entropy(logits, positive_idx)
