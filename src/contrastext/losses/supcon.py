"""Supervised NT-Xent (Khosla et al., SupCon L_out): every other row with the same label is a positive."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from contrastext.losses.gather import all_gather_with_grad, local_offset
from contrastext.losses.reduction import LossSum


class SupervisedNTXentLoss(nn.Module):
    """Per anchor, the mean over its positives p of ``-log(exp(s_ip/t) / sum_{a != i} exp(s_ia/t))``.

    Averaged over the local anchors that have at least one positive among the (gathered) rows;
    :meth:`sum_and_count` gives the sum of their terms and how many they are, to average across workers.
    """

    def __init__(self, temperature: float = 0.1, gather_across_workers: bool = True) -> None:
        super().__init__()
        self.temperature = temperature
        self.gather_across_workers = gather_across_workers

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.sum_and_count(embeddings, labels).mean()

    def sum_and_count(self, embeddings: torch.Tensor, labels: torch.Tensor) -> LossSum:
        z = F.normalize(embeddings, dim=-1)
        local_n = z.shape[0]
        if self.gather_across_workers:
            offset = local_offset(local_n, z.device)
            all_z, all_labels = all_gather_with_grad(z), all_gather_with_grad(labels)
        else:
            offset, all_z, all_labels = 0, z, labels

        logits = z @ all_z.T / self.temperature  # [B, N]
        rows = torch.arange(local_n, device=z.device) + offset
        is_self = F.one_hot(rows, all_z.shape[0]).bool()
        log_prob = logits - torch.logsumexp(logits.masked_fill(is_self, float("-inf")), dim=1, keepdim=True)

        positives = (labels[:, None] == all_labels[None, :]) & ~is_self
        n_pos = positives.sum(dim=1)
        has_pos = n_pos > 0
        count = has_pos.sum()
        if not has_pos.any():
            # Built from logits, not embeddings alone, so the gather's backward collective still runs here.
            return LossSum(0.0 * logits.sum(), count)
        per_anchor = -(log_prob * positives).sum(dim=1)[has_pos] / n_pos[has_pos]
        return LossSum(per_anchor.sum(), count)
