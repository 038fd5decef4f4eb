from __future__ import annotations

import math

import pytest
import torch

from contrastext.losses import NTXentLoss


def reference(view_a: torch.Tensor, view_b: torch.Tensor, temperature: float,
              groups: list[int] | None = None) -> torch.Tensor:
    """Loop over the 2N views; without groups asserts each row has one positive and 2N - 2 negatives.

    With groups, a view's negatives leave out the views of other rows of its (non-negative) group.
    """
    n = view_a.shape[0]
    views = list(view_a) + list(view_b)
    total = torch.zeros((), dtype=view_a.dtype)
    for k, z in enumerate(views):
        pos = k + n if k < n else k - n
        sim = [(z @ v) / (z.norm() * v.norm()) / temperature for v in views]
        negatives = [j for j in range(2 * n) if j not in (k, pos)]
        if groups is None:
            assert len(negatives) == 2 * n - 2
        else:
            own = groups[k % n]
            negatives = [j for j in negatives if own < 0 or groups[j % n] != own]
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


@pytest.mark.parametrize("groups", [[0, 0, 1, 1, 2], [3, -1, 3, 3, -1], [0, 1, 2, 3, 4]])
def test_groups_drop_same_group_negatives(groups):
    g = torch.Generator().manual_seed(5)
    a, b = (torch.randn(5, 7, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(2))
    loss = NTXentLoss(0.2)(a, b, groups=torch.tensor(groups))
    torch.testing.assert_close(loss, reference(a, b, 0.2, groups))
    loss.backward()
    ours = (a.grad.clone(), b.grad.clone())
    a.grad = b.grad = None
    reference(a, b, 0.2, groups).backward()
    torch.testing.assert_close(ours, (a.grad, b.grad))


def test_no_group_equals_plain_loss():
    g = torch.Generator().manual_seed(6)
    a, b = (torch.randn(4, 6, generator=g, dtype=torch.float64) for _ in range(2))
    torch.testing.assert_close(NTXentLoss(0.1)(a, b, groups=torch.full((4,), -1)), NTXentLoss(0.1)(a, b))


def test_one_group_leaves_only_the_positive():
    g = torch.Generator().manual_seed(7)
    a, b = (torch.randn(4, 6, generator=g, dtype=torch.float64) for _ in range(2))
    torch.testing.assert_close(NTXentLoss(0.1)(a, b, groups=torch.zeros(4, dtype=torch.long)),
                               torch.zeros((), dtype=torch.float64))


def test_groups_must_match_rows():
    a = torch.randn(3, 4)
    with pytest.raises(ValueError, match="one per row"):
        NTXentLoss()(a, a, groups=torch.tensor([0, 1]))
