from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from contrastext.losses import FocalLoss


def reference_terms(logits, targets, gamma, weight=None):
    """Per-example w_t * fl and w_t, one example at a time."""
    terms, weights = [], []
    for row, t in zip(logits, targets):
        p = torch.exp(row) / torch.exp(row).sum()
        w = weight[t] if weight is not None else torch.ones((), dtype=logits.dtype)
        terms.append(-w * (1 - p[t]) ** gamma * torch.log(p[t]))
        weights.append(w)
    return torch.stack(terms), torch.stack(weights)


def _data(b, c, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(b, c, generator=g, dtype=dtype) * 3
    targets = torch.randint(0, c, (b,), generator=g)
    weight = torch.rand(c, generator=g, dtype=dtype) + 0.1
    return logits, targets, weight


@pytest.mark.parametrize("b,c", [(1, 2), (8, 3), (33, 10)])
@pytest.mark.parametrize("gamma", [0.5, 2.0, 5.0])
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_loop_reference_all_reductions(b, c, gamma, weighted):
    logits, targets, weight = _data(b, c, b * c)
    w = weight if weighted else None
    terms, weights = reference_terms(logits, targets, gamma, w)
    torch.testing.assert_close(FocalLoss(gamma, w, reduction="none")(logits, targets), terms)
    torch.testing.assert_close(FocalLoss(gamma, w, reduction="sum")(logits, targets), terms.sum())
    torch.testing.assert_close(FocalLoss(gamma, w, reduction="mean")(logits, targets), terms.sum() / weights.sum())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_gamma_zero_is_cross_entropy(dtype, weighted, reduction):
    logits, targets, weight = _data(16, 5, 7, dtype)
    w = weight if weighted else None
    torch.testing.assert_close(FocalLoss(0.0, w, reduction=reduction)(logits, targets),
                               F.cross_entropy(logits, targets, weight=w, reduction=reduction))


def test_gamma_zero_gradient_is_cross_entropy_gradient():
    logits, targets, weight = _data(10, 4, 8)
    logits.requires_grad_()
    FocalLoss(0.0, weight)(logits, targets).backward()
    ours = logits.grad.clone()
    logits.grad = None
    F.cross_entropy(logits, targets, weight=weight).backward()
    torch.testing.assert_close(ours, logits.grad)


def test_focusing_downweights_easy_examples():
    logits = torch.tensor([[10.0, 0.0], [0.5, 0.0]], dtype=torch.float64)
    targets = torch.tensor([0, 0])
    ratio = FocalLoss(2.0, reduction="none")(logits, targets) / F.cross_entropy(logits, targets, reduction="none")
    assert ratio[0] < 1e-6 < ratio[1]


def test_stable_for_extreme_logits():
    logits = torch.tensor([[1000.0, -1000.0], [-1000.0, 1000.0]], requires_grad=True)
    loss = FocalLoss(2.0)(logits, torch.tensor([0, 0]))
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logits.grad).all()


def test_weight_is_a_buffer_and_bad_reduction_rejected():
    loss = FocalLoss(weight=torch.ones(3))
    assert "weight" in dict(loss.named_buffers())
    with pytest.raises(ValueError, match="reduction"):
        FocalLoss(reduction="avg")  # type: ignore[arg-type]
