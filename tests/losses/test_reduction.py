"""LossSum and mean_over_workers in one process; tests/losses/test_gather_distributed.py runs them on 2 ranks."""

from __future__ import annotations

import pytest
import torch

from contrastext.losses import (FocalLoss, LossSum, MultipleNegativesRankingLoss, NTXentLoss,
                                SupervisedNTXentLoss, mean_over_workers)
from contrastext.losses.focal_supcon import FocalSupConLoss


def _inputs():
    g = torch.Generator().manual_seed(3)
    a, b = (torch.randn(5, 4, generator=g, dtype=torch.float64) for _ in range(2))
    return a, b, torch.tensor([0, 0, 1, 1, 2])


def test_each_loss_is_its_sum_over_its_count():
    a, b, labels = _inputs()
    cases = [
        (MultipleNegativesRankingLoss(), (a, b), 5),
        (MultipleNegativesRankingLoss(symmetric=True), (a, b), 5),
        (NTXentLoss(), (a, b), 10),
        (SupervisedNTXentLoss(), (a, labels), 4),  # row 4 has no positive
        (FocalLoss(weight=torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64)), (a[:, :3], labels), 6.5),
    ]
    for loss, args, count in cases:
        part = loss.sum_and_count(*args)
        assert float(part.count) == count, type(loss).__name__
        torch.testing.assert_close(part.total / count, loss(*args))


def test_mean_over_workers_in_one_process_is_the_mean():
    a, b, labels = _inputs()
    loss = FocalSupConLoss(ntxent_weight=0.5)
    parts = loss.parts(a[:, :3], b, labels)
    to_backward, value = mean_over_workers(parts)
    torch.testing.assert_close(to_backward, loss(a[:, :3], b, labels))
    assert value == pytest.approx(float(to_backward))


def test_a_part_with_nothing_to_average_is_zero_and_keeps_its_graph():
    z = torch.randn(3, 4, requires_grad=True)
    part = SupervisedNTXentLoss().sum_and_count(z, torch.arange(3))
    assert float(part.count) == 0 and float(part.mean().detach()) == 0.0
    to_backward, value = mean_over_workers([part])
    assert value == 0.0 and to_backward.requires_grad
    to_backward.backward()
    torch.testing.assert_close(z.grad, torch.zeros_like(z))


def test_no_parts_is_an_error():
    with pytest.raises(ValueError, match="no loss parts"):
        mean_over_workers([])


def test_loss_sum_is_a_pair():
    total, count = LossSum(torch.tensor(6.0), torch.tensor(3))
    assert float(total) == 6.0 and int(count) == 3
