from __future__ import annotations

import math

import pytest
import torch

from contrastext.losses import NTXentLoss


def reference(view_a: torch.Tensor, view_b: torch.Tensor, temperature: float) -> torch.Tensor:
    """Loop over the 2N views; asserts each row has exactly one positive and 2N - 2 negatives."""
    n = view_a.shape[0]
    views = list(view_a) + list(view_b)
    total = torch.zeros((), dtype=view_a.dtype)
    for k, z in enumerate(views):
        pos = k + n if k < n else k - n
        sim = [(z @ v) / (z.norm() * v.norm()) / temperature for v in views]
        negatives = [j for j in range(2 * n) if j not in (k, pos)]
        assert len(negatives) == 2 * n - 2
        denominator = torch.exp(sim[pos]) + sum((torch.exp(sim[j]) for j in negatives), torch.zeros(()))
        total = total - torch.log(torch.exp(sim[pos]) / denominator)
    return total / (2 * n)


@pytest.mark.parametrize("n,d", [(1, 3), (2, 5), (6, 8), (9, 16)])
@pytest.mark.parametrize("temperature", [0.1, 0.5])
def test_matches_loop_reference(n, d, temperature):
    g = torch.Generator().manual_seed(n * 10 + d)
    a, b = (torch.randn(n, d, generator=g, dtype=torch.float64) for _ in range(2))
    torch.testing.assert_close(NTXentLoss(temperature)(a, b), reference(a, b, temperature))


def test_gradients_match_reference():
    g = torch.Generator().manual_seed(3)
    a, b = (torch.randn(5, 7, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(2))
    NTXentLoss(0.2)(a, b).backward()
    ours = (a.grad.clone(), b.grad.clone())
    a.grad = b.grad = None
    reference(a, b, 0.2).backward()
    torch.testing.assert_close(ours, (a.grad, b.grad))


@pytest.mark.parametrize("n", [1, 2, 5])
def test_each_row_sees_exactly_2n_minus_2_negatives(n):
    # All views identical: each row's softmax is uniform over 1 positive + its negatives, self excluded.
    z = torch.ones(n, 4, dtype=torch.float64)
    expected = torch.tensor(math.log(2 * n - 1), dtype=torch.float64)
    torch.testing.assert_close(NTXentLoss(0.1)(z, z), expected)


def test_float32_gather_flag_noop():
    g = torch.Generator().manual_seed(4)
    a, b = (torch.randn(4, 6, generator=g) for _ in range(2))
    torch.testing.assert_close(NTXentLoss(gather_across_workers=True)(a, b),
                               NTXentLoss(gather_across_workers=False)(a, b))
