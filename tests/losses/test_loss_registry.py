from __future__ import annotations

import pytest

from contrastext.losses import (LOSSES, FocalLoss, MultipleNegativesRankingLoss, NTXentLoss, SupervisedNTXentLoss,
                                build_loss)


def test_registry_names():
    assert LOSSES == {"mnr": MultipleNegativesRankingLoss, "ntxent": NTXentLoss, "supcon": SupervisedNTXentLoss,
                      "focal": FocalLoss}


def test_build_loss_passes_params():
    loss = build_loss("mnr", scale=10.0, symmetric=True)
    assert isinstance(loss, MultipleNegativesRankingLoss) and loss.scale == 10.0 and loss.symmetric
    assert build_loss("ntxent", temperature=0.3).temperature == 0.3
    assert build_loss("supcon", gather_across_workers=False).gather_across_workers is False
    assert build_loss("focal", gamma=1.0).gamma == 1.0


def test_unknown_name_lists_known():
    with pytest.raises(ValueError, match="infonce") as info:
        build_loss("infonce")
    for name in ("mnr", "ntxent", "supcon", "focal"):
        assert name in str(info.value)
