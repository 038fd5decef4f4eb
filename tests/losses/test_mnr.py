from __future__ import annotations

import math

import pytest
import torch

from contrastext.losses import MultipleNegativesRankingLoss


def _cos(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return (u * v).sum() / (u.norm() * v.norm())


def _ce_loop(queries: torch.Tensor, candidates: list[torch.Tensor], scale: float) -> torch.Tensor:
    """Mean over i of -log softmax(scale * cos(q_i, c))[i], written out term by term."""
    total = torch.zeros((), dtype=queries.dtype)
    for i in range(queries.shape[0]):
        scores = [scale * _cos(queries[i], c) for c in candidates]
        log_denominator = torch.log(sum(torch.exp(s) for s in scores))
        total = total + (log_denominator - scores[i])
    return total / queries.shape[0]


def reference(anchors, positives, negatives=None, scale=20.0, symmetric=False):
    candidates = list(positives) + (list(negatives) if negatives is not None else [])
    forward = _ce_loop(anchors, candidates, scale)
    if not symmetric:
        return forward
    return (forward + _ce_loop(positives, list(anchors), scale)) / 2


SHAPES = [(1, 3), (4, 8), (7, 16)]


@pytest.mark.parametrize("b,d", SHAPES)
@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("with_negatives", [False, True])
def test_matches_loop_reference(b, d, symmetric, with_negatives):
    g = torch.Generator().manual_seed(b * 100 + d)
    a, p, n = (torch.randn(b, d, generator=g, dtype=torch.float64) for _ in range(3))
    negatives = n if with_negatives else None
    loss = MultipleNegativesRankingLoss(scale=20.0, symmetric=symmetric)(a, p, negatives)
    torch.testing.assert_close(loss, reference(a, p, negatives, 20.0, symmetric))


@pytest.mark.parametrize("symmetric", [False, True])
def test_gradients_match_reference(symmetric):
    g = torch.Generator().manual_seed(0)
    inputs = [torch.randn(5, 8, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3)]
    MultipleNegativesRankingLoss(scale=7.0, symmetric=symmetric)(*inputs).backward()
    ours = [t.grad.clone() for t in inputs]
    for t in inputs:
        t.grad = None
    reference(*inputs, scale=7.0, symmetric=symmetric).backward()
    for got, expected in zip(ours, [t.grad for t in inputs]):
        torch.testing.assert_close(got, expected)


def test_float32_and_gather_flag_is_noop_without_process_group():
    g = torch.Generator().manual_seed(1)
    a, p, n = (torch.randn(6, 10, generator=g) for _ in range(3))
    on = MultipleNegativesRankingLoss(gather_across_workers=True)(a, p, n)
    off = MultipleNegativesRankingLoss(gather_across_workers=False)(a, p, n)
    torch.testing.assert_close(on, off)
    torch.testing.assert_close(on, reference(a.double(), p.double(), n.double()).float())


def test_symmetric_is_mean_of_both_directions():
    g = torch.Generator().manual_seed(2)
    a, p = (torch.randn(6, 4, generator=g, dtype=torch.float64) for _ in range(2))
    loss_fn = MultipleNegativesRankingLoss(scale=5.0)
    symmetric = MultipleNegativesRankingLoss(scale=5.0, symmetric=True)(a, p)
    torch.testing.assert_close(symmetric, (loss_fn(a, p) + loss_fn(p, a)) / 2)
    # Swapping anchors and positives leaves the symmetric loss unchanged.
    torch.testing.assert_close(symmetric, MultipleNegativesRankingLoss(scale=5.0, symmetric=True)(p, a))


def test_hard_negatives_add_candidates():
    # All vectors identical: every candidate scores the same, so the loss is log(#candidates).
    a = torch.ones(3, 4, dtype=torch.float64)
    loss_fn = MultipleNegativesRankingLoss()
    torch.testing.assert_close(loss_fn(a, a), torch.tensor(math.log(3), dtype=torch.float64))
    torch.testing.assert_close(loss_fn(a, a, a), torch.tensor(math.log(6), dtype=torch.float64))


def _grouped_reference(anchors, positives, groups, scale=20.0):
    """Each anchor against the DISTINCT positives (first copy of each group), target its group's copy."""
    firsts = {}
    for i, g in enumerate(groups):
        firsts.setdefault(g, i)
    columns = sorted(firsts.values())
    total = torch.zeros(())
    for i in range(anchors.shape[0]):
        scores = [scale * _cos(anchors[i], positives[j]) for j in columns]
        target = columns.index(firsts[groups[i]])
        total = total + (torch.log(sum(torch.exp(s) for s in scores)) - scores[target])
    return total / anchors.shape[0]


def test_positive_groups_make_repeated_positives_one_candidate():
    g = torch.Generator().manual_seed(5)
    anchors = torch.randn(6, 8, generator=g)
    labels = [0, 1, 0, 2, 1, 0]
    prompts = torch.randn(3, 8, generator=g)
    positives = prompts[labels]
    loss = MultipleNegativesRankingLoss(scale=20.0)(anchors, positives, positive_groups=torch.tensor(labels))
    expected = _grouped_reference(anchors, positives, labels)
    assert torch.allclose(loss, expected, atol=1e-5)
    # plain MNR treats the copies of a label as negatives of each other, which gives a different loss
    plain = MultipleNegativesRankingLoss(scale=20.0)(anchors, positives)
    assert not torch.allclose(plain, expected, atol=1e-3)


def test_distinct_groups_equal_plain_mnr():
    g = torch.Generator().manual_seed(6)
    anchors, positives = torch.randn(5, 8, generator=g), torch.randn(5, 8, generator=g)
    for symmetric in (False, True):
        loss_fn = MultipleNegativesRankingLoss(symmetric=symmetric)
        grouped = loss_fn(anchors, positives, positive_groups=torch.arange(5))
        assert torch.allclose(grouped, loss_fn(anchors, positives), atol=1e-6)


def test_symmetric_grouped_ignores_same_group_anchors():
    g = torch.Generator().manual_seed(7)
    anchors = torch.randn(4, 8, generator=g)
    prompts = torch.randn(2, 8, generator=g)
    labels = [0, 0, 1, 1]
    loss = MultipleNegativesRankingLoss(symmetric=True)(anchors, prompts[labels],
                                                        positive_groups=torch.tensor(labels))
    forward = _grouped_reference(anchors, prompts[labels], labels)
    # backward direction: positive i against anchors of other groups plus its own anchor
    total = torch.zeros(())
    for i in range(4):
        columns = [j for j in range(4) if labels[j] != labels[i] or j == i]
        scores = [20.0 * _cos(prompts[labels[i]], anchors[j]) for j in columns]
        total = total + torch.log(sum(torch.exp(s) for s in scores)) - scores[columns.index(i)]
    assert torch.allclose(loss, (forward + total / 4) / 2, atol=1e-5)


def _kin_reference(anchors, positives, groups, positive_groups=None):
    """Forward MNR written out: an anchor's candidates are every positive except the other rows of its
    group (and, with ``positive_groups``, a repeated positive counts once: its first row)."""
    n = anchors.shape[0]
    firsts = {}
    if positive_groups is not None:
        for j, key in enumerate(positive_groups):
            firsts.setdefault(key, j)
    total = torch.zeros((), dtype=anchors.dtype)
    for i in range(n):
        target = firsts[positive_groups[i]] if positive_groups is not None else i
        columns = [j for j in range(n)
                   if j == target or ((positive_groups is None or firsts[positive_groups[j]] == j)
                                      and not (groups[j] == groups[i] and groups[i] >= 0))]
        scores = [20.0 * _cos(anchors[i], positives[j]) for j in columns]
        total = total + torch.log(sum(torch.exp(s) for s in scores)) - scores[columns.index(target)]
    return total / n


def test_groups_keep_kin_pairs_of_another_kind_from_being_negatives():
    """Prompt pairs (text, its label's prompt) and text pairs (text, another text of the label): with the
    pairs' labels as groups, no row is pushed from its own label's prompt or texts; -1 is no group."""
    g = torch.Generator().manual_seed(8)
    prompts = torch.randn(2, 8, generator=g)
    texts = torch.randn(6, 8, generator=g)
    anchors = torch.stack([texts[0], texts[1], texts[2], texts[0], texts[3], texts[4]])
    positives = torch.stack([prompts[0], prompts[0], prompts[1], texts[1], texts[2], texts[5]])
    groups = [0, 0, 1, 0, 1, -1]
    keys = [100, 100, 101, 1, 2, 3]  # the prompt rows share a positive
    loss_fn = MultipleNegativesRankingLoss(scale=20.0)
    loss = loss_fn(anchors, positives, positive_groups=torch.tensor(keys), groups=torch.tensor(groups))
    assert torch.allclose(loss, _kin_reference(anchors, positives, groups, keys), atol=1e-5)
    without = loss_fn(anchors, positives, positive_groups=torch.tensor(keys))
    assert not torch.allclose(loss, without, atol=1e-3)
    # no two rows in one group: the plain loss
    assert torch.allclose(loss_fn(anchors, positives, groups=torch.arange(6)), loss_fn(anchors, positives))


def test_symmetric_groups_mask_kin_anchors_too():
    g = torch.Generator().manual_seed(9)
    anchors, positives = torch.randn(4, 8, generator=g), torch.randn(4, 8, generator=g)
    groups = [0, 0, 1, 1]
    loss = MultipleNegativesRankingLoss(symmetric=True)(anchors, positives, groups=torch.tensor(groups))
    total = torch.zeros(())
    for i in range(4):
        columns = [j for j in range(4) if groups[j] != groups[i] or j == i]
        scores = [20.0 * _cos(positives[i], anchors[j]) for j in columns]
        total = total + torch.log(sum(torch.exp(s) for s in scores)) - scores[columns.index(i)]
    assert torch.allclose(loss, (_kin_reference(anchors, positives, groups) + total / 4) / 2, atol=1e-5)
