from __future__ import annotations

import pytest
import torch

from contrastext.losses import NTXentLoss, SupervisedNTXentLoss


def reference(z: torch.Tensor, labels: torch.Tensor, temperature: float) -> torch.Tensor:
    n = z.shape[0]
    sim = [[(z[i] @ z[j]) / (z[i].norm() * z[j].norm()) / temperature for j in range(n)] for i in range(n)]
    per_anchor = []
    for i in range(n):
        positives = [p for p in range(n) if p != i and labels[p] == labels[i]]
        if not positives:
            continue
        denominator = sum(torch.exp(sim[i][a]) for a in range(n) if a != i)
        terms = [-torch.log(torch.exp(sim[i][p]) / denominator) for p in positives]
        per_anchor.append(sum(terms) / len(terms))
    return sum(per_anchor) / len(per_anchor)


@pytest.mark.parametrize("n,d,classes", [(2, 3, 1), (6, 8, 2), (10, 16, 4), (12, 5, 6)])
def test_matches_loop_reference(n, d, classes):
    g = torch.Generator().manual_seed(n + d + classes)
    z = torch.randn(n, d, generator=g, dtype=torch.float64)
    labels = torch.randint(0, classes, (n,), generator=g)
    labels[0] = labels[1]  # at least one anchor has a positive
    torch.testing.assert_close(SupervisedNTXentLoss(0.1)(z, labels), reference(z, labels, 0.1))


def test_anchors_without_positive_are_excluded():
    g = torch.Generator().manual_seed(5)
    z = torch.randn(7, 6, generator=g, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([0, 0, 1, 1, 1, 2, 3])  # anchors 5 and 6 have no positive
    loss = SupervisedNTXentLoss(0.3)(z, labels)
    loss.backward()
    ours = z.grad.clone()
    z.grad = None
    expected = reference(z, labels, 0.3)
    expected.backward()
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(ours, z.grad)
    # The excluded rows still act as negatives, so they do get a gradient.
    assert ours[5].abs().sum() > 0


def test_no_positive_at_all_returns_zero_with_grad_path():
    z = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    loss = SupervisedNTXentLoss()(z, torch.arange(4))
    assert loss.item() == 0.0 and loss.requires_grad
    loss.backward()
    torch.testing.assert_close(z.grad, torch.zeros_like(z))


def test_pair_labels_reduce_to_ntxent():
    g = torch.Generator().manual_seed(6)
    a, b = (torch.randn(5, 8, generator=g, dtype=torch.float64) for _ in range(2))
    labels = torch.cat([torch.arange(5), torch.arange(5)])
    torch.testing.assert_close(SupervisedNTXentLoss(0.2)(torch.cat([a, b]), labels), NTXentLoss(0.2)(a, b))
