"""Focal + λ·supervised NT-Xent: the sum of its two parts, each switchable off."""

import pytest
import torch

from contrastext.losses import FocalLoss, SupervisedNTXentLoss
from contrastext.losses.focal_supcon import FocalSupConLoss


def _batch():
    torch.manual_seed(0)
    return torch.randn(8, 5, requires_grad=True), torch.randn(8, 16, requires_grad=True), \
        torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])


def test_weighted_sum_of_focal_and_supcon():
    logits, embeddings, labels = _batch()
    loss = FocalSupConLoss(focal_weight=0.5, ntxent_weight=100.0, gamma=1.0, temperature=0.2)
    expected = 0.5 * FocalLoss(gamma=1.0)(logits, labels) + 100.0 * SupervisedNTXentLoss(0.2)(embeddings, labels)
    torch.testing.assert_close(loss(logits, embeddings, labels), expected)


def test_focal_only_leaves_the_embeddings_without_gradient():
    logits, embeddings, labels = _batch()
    FocalSupConLoss(ntxent_weight=0.0)(logits, embeddings, labels).backward()
    assert logits.grad.abs().sum() > 0 and embeddings.grad is None


def test_ntxent_only_keeps_the_head_in_the_graph_with_zero_gradient():
    logits, embeddings, labels = _batch()
    FocalSupConLoss(focal_weight=0.0, ntxent_weight=1.0)(logits, embeddings, labels).backward()
    assert embeddings.grad.abs().sum() > 0
    assert logits.grad is not None and logits.grad.abs().sum() == 0


@pytest.mark.parametrize("weights", [(0.0, 0.0), (-1.0, 1.0), (1.0, -0.5)])
def test_bad_weights(weights):
    with pytest.raises(ValueError):
        FocalSupConLoss(focal_weight=weights[0], ntxent_weight=weights[1])
