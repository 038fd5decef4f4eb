"""Contrastive and classification losses, and a registry to build them by name."""

from __future__ import annotations

from typing import Any

from torch import nn

from contrastext.losses.focal import FocalLoss
from contrastext.losses.gather import all_gather_with_grad, local_offset
from contrastext.losses.mnr import MultipleNegativesRankingLoss
from contrastext.losses.ntxent import NTXentLoss
from contrastext.losses.reduction import LossSum, mean_over_workers
from contrastext.losses.supcon import SupervisedNTXentLoss

LOSSES: dict[str, type[nn.Module]] = {
    "mnr": MultipleNegativesRankingLoss,
    "ntxent": NTXentLoss,
    "supcon": SupervisedNTXentLoss,
    "focal": FocalLoss,
}


def build_loss(name: str, **params: Any) -> nn.Module:
    """Instantiate the loss registered under ``name`` with ``params``."""
    try:
        cls = LOSSES[name]
    except KeyError:
        raise ValueError(f"Unknown loss {name!r}; known losses: {', '.join(sorted(LOSSES))}.") from None
    return cls(**params)


__all__ = [
    "LOSSES",
    "FocalLoss",
    "LossSum",
    "MultipleNegativesRankingLoss",
    "NTXentLoss",
    "SupervisedNTXentLoss",
    "all_gather_with_grad",
    "build_loss",
    "local_offset",
    "mean_over_workers",
]
