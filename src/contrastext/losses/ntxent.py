"""NT-Xent (SimCLR): each view's positive is its other view, the other 2N - 2 views are negatives."""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from contrastext.losses.gather import all_gather_with_grad, local_offset
from contrastext.losses.group_mask import same_group_mask
from contrastext.losses.reduction import LossSum


class NTXentLoss(nn.Module):
    """Mean over the local 2B views of the cross-entropy of ``cos / temperature`` over all other views.

    With ``gather_across_workers`` the candidate views are those of every worker (2N in all).

    ``groups`` (one integer per row, e.g. each document's cluster in a label-free clustering) removes
    the views of other rows of the same group from a view's negatives, so training stops pushing apart
    documents that already belong together. A negative group id means "no group": such a row is a
    negative of every other row and takes every other row as its negatives.
    """

    def __init__(self, temperature: float = 0.1, gather_across_workers: bool = True) -> None:
        super().__init__()
        self.temperature = temperature
        self.gather_across_workers = gather_across_workers

    def forward(self, view_a: torch.Tensor, view_b: torch.Tensor,
                groups: Optional[torch.Tensor] = None) -> torch.Tensor:
        return self.sum_and_count(view_a, view_b, groups).mean()

    def sum_and_count(self, view_a: torch.Tensor, view_b: torch.Tensor,
                      groups: Optional[torch.Tensor] = None) -> LossSum:
        """The sum of the local 2B views' terms and their number (see :mod:`contrastext.losses.reduction`)."""
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
        excluded = F.one_hot(self_idx, 2 * n).bool()
        if groups is not None:
            excluded |= self._same_group(groups.to(a.device), positive_idx, n)
        logits = logits.masked_fill(excluded, float("-inf"))
        return LossSum(F.cross_entropy(logits, positive_idx, reduction="sum"),
                       torch.tensor(2 * local_n, device=a.device))

    def _same_group(self, groups: torch.Tensor, positive_idx: torch.Tensor, n: int) -> torch.Tensor:
        """[2B, 2N]: True where a candidate shares the anchor's (non-negative) group, except its positive."""
        all_groups = all_gather_with_grad(groups) if self.gather_across_workers else groups
        if all_groups.shape[0] != n:
            raise ValueError(f"groups has {groups.shape[0]} entries for {n} gathered rows: give one per row")
        return same_group_mask(torch.cat([groups, groups]), torch.cat([all_groups, all_groups]), positive_idx)
