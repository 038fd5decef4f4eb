"""InfoNCE over phrase pairs with in-batch negatives; under CCL, same-topic rows are never negatives."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from contrastext.losses.gather import all_gather_with_grad, local_offset
from contrastext.losses.group_mask import same_group_mask


class PhraseContrastiveLoss(nn.Module):
    """Cross-entropy of ``cos(anchor, candidate) / temperature`` with each anchor's own positive as target.

    Candidates are the positives of the batch (of every worker when ``gather_across_workers``). With
    ``topics`` (pseudo labels, -1 for none), candidates that share the anchor's topic are removed from its
    denominator: cluster-assisted contrastive learning takes negatives from other topics only.
    """

    def __init__(self, temperature: float = 0.05, symmetric: bool = False, gather_across_workers: bool = True):
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.temperature = temperature
        self.symmetric = symmetric
        self.gather_across_workers = gather_across_workers

    def _gather(self, t: torch.Tensor) -> torch.Tensor:
        return all_gather_with_grad(t) if self.gather_across_workers else t

    def _direction(self, queries: torch.Tensor, keys: torch.Tensor, labels: torch.Tensor,
                   topics: torch.Tensor | None, all_topics: torch.Tensor | None) -> torch.Tensor:
        logits = F.normalize(queries, dim=-1) @ F.normalize(keys, dim=-1).T / self.temperature
        if topics is not None:
            logits = logits.masked_fill(same_group_mask(topics, all_topics, labels), float("-inf"))
        return F.cross_entropy(logits, labels)

    def forward(self, anchors: torch.Tensor, positives: torch.Tensor,
                topics: torch.Tensor | None = None) -> torch.Tensor:
        offset = local_offset(anchors.shape[0], anchors.device) if self.gather_across_workers else 0
        labels = torch.arange(anchors.shape[0], device=anchors.device) + offset
        all_topics = None
        if topics is not None:
            all_topics = self._gather(topics.to(anchors.dtype)).round().long()
            topics = topics.long()
        loss = self._direction(anchors, self._gather(positives), labels, topics, all_topics)
        if not self.symmetric:
            return loss
        return (loss + self._direction(positives, self._gather(anchors), labels, topics, all_topics)) / 2
