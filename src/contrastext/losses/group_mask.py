"""The negative mask shared by the group-aware contrastive losses."""

from __future__ import annotations

import torch


def same_group_mask(anchor_groups: torch.Tensor, candidate_groups: torch.Tensor,
                    positive_idx: torch.Tensor) -> torch.Tensor:
    """[A, C]: True where a candidate shares its anchor's group (ids >= 0; a negative id is no group),
    except the anchor's own positive, which stays a candidate."""
    same = (anchor_groups[:, None] == candidate_groups[None, :]) & (anchor_groups[:, None] >= 0)
    same[torch.arange(same.shape[0], device=same.device), positive_idx] = False
    return same
