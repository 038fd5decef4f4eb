"""Multiple negatives ranking loss (InfoNCE with in-batch negatives), sentence-transformers style."""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from contrastext.losses.gather import all_gather_with_grad, local_offset
from contrastext.losses.group_mask import same_group_mask
from contrastext.losses.reduction import LossSum


def _cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T


class MultipleNegativesRankingLoss(nn.Module):
    """Cross-entropy of ``scale * cos(anchor, candidate)`` with each anchor's own positive as the target.

    Candidates are the positives of every worker (when ``gather_across_workers``) followed by the
    optional hard negatives, gathered the same way. ``symmetric`` averages in the positive -> anchor
    direction, whose candidates are the (gathered) anchors only.

    ``positive_groups`` (one integer per row, e.g. a hash of the positive's text) marks rows whose
    positives are the same item. Such a positive is then one candidate, not several: its repeats are
    dropped from the candidates and every anchor of the group targets it. Without this, a batch with
    few distinct positives (pseudo-pairs of a handful of labels) would push each anchor away from its
    own label's other copies, i.e. train on false negatives.

    ``groups`` (one integer per row, e.g. the pair's pseudo-label; a negative id is no group) goes further:
    the positives of other rows of the anchor's group are not its negatives (in the symmetric direction,
    nor their anchors), so pairs of different kinds that belong together (a text and its label's prompt, two
    texts of one label) do not push each other apart.
    """

    def __init__(self, scale: float = 20.0, symmetric: bool = False, gather_across_workers: bool = True) -> None:
        super().__init__()
        self.scale = scale
        self.symmetric = symmetric
        self.gather_across_workers = gather_across_workers

    def _gather(self, t: torch.Tensor) -> torch.Tensor:
        return all_gather_with_grad(t) if self.gather_across_workers else t

    def forward(self, anchors: torch.Tensor, positives: torch.Tensor,
                negatives: Optional[torch.Tensor] = None,
                positive_groups: Optional[torch.Tensor] = None,
                groups: Optional[torch.Tensor] = None) -> torch.Tensor:
        return self.sum_and_count(anchors, positives, negatives, positive_groups, groups).mean()

    def sum_and_count(self, anchors: torch.Tensor, positives: torch.Tensor,
                      negatives: Optional[torch.Tensor] = None,
                      positive_groups: Optional[torch.Tensor] = None,
                      groups: Optional[torch.Tensor] = None) -> LossSum:
        """The sum of the local anchors' terms and their number (see :mod:`contrastext.losses.reduction`)."""
        count = torch.tensor(anchors.shape[0], device=anchors.device)
        offset = local_offset(anchors.shape[0], anchors.device) if self.gather_across_workers else 0
        labels = torch.arange(anchors.shape[0], device=anchors.device) + offset

        all_positives = self._gather(positives)
        candidates = all_positives if negatives is None else torch.cat([all_positives, self._gather(negatives)])
        logits = self.scale * _cosine(anchors, candidates)
        same_group = None
        if positive_groups is not None:
            keys = self._gather(positive_groups.to(anchors.device))
            same_group = keys[:, None] == keys[None, :]  # [N, N] over the gathered rows
            first = same_group.to(torch.int8).argmax(dim=1)  # each row's group's first column
            repeat = first != torch.arange(keys.shape[0], device=keys.device)
            mask = torch.zeros_like(logits, dtype=torch.bool)
            mask[:, : keys.shape[0]] = repeat[None, :]
            logits = logits.masked_fill(mask, float("-inf"))
            labels = first[labels]
        own = torch.arange(anchors.shape[0], device=anchors.device) + offset
        all_groups = None
        if groups is not None:
            groups = groups.to(anchors.device)
            all_groups = self._gather(groups)
            kin = torch.zeros_like(logits, dtype=torch.bool)
            kin[:, : all_groups.shape[0]] = same_group_mask(groups, all_groups, labels)
            logits = logits.masked_fill(kin, float("-inf"))
        loss = F.cross_entropy(logits, labels, reduction="sum")
        if not self.symmetric:
            return LossSum(loss, count)
        backward_logits = self.scale * _cosine(positives, self._gather(anchors))
        if same_group is not None:
            # for a positive, the other anchors of its group are not negatives
            others = same_group[own].clone()
            others[torch.arange(own.shape[0]), own] = False
            backward_logits = backward_logits.masked_fill(others, float("-inf"))
        if all_groups is not None:
            backward_logits = backward_logits.masked_fill(same_group_mask(groups, all_groups, own), float("-inf"))
        backward = F.cross_entropy(backward_logits, own, reduction="sum")
        return LossSum((loss + backward) / 2, count)
