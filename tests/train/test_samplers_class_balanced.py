"""ClassBalancedBatchSampler (seeded random loops, no hypothesis)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence

import pytest

from contrastext.train.samplers import ClassBalancedBatchSampler


def random_labels(rng: random.Random, n_classes: int, max_size: int) -> list[int]:
    labels = [c for c in range(n_classes) for _ in range(rng.randint(1, max_size))]
    rng.shuffle(labels)
    return labels


def all_ranks(
    labels: Sequence[int | str], batch_size: int, k: int, world_size: int, seed: int = 0, epoch: int = 0,
    oversample: bool = False,
) -> list[list[list[int]]]:
    out = []
    for rank in range(world_size):
        s = ClassBalancedBatchSampler(
            labels, batch_size, k, seed=seed, rank=rank, world_size=world_size, oversample=oversample
        )
        s.set_epoch(epoch)
        batches = list(s)
        assert len(s) == len(batches)
        out.append(batches)
    return out


def n_groups(labels: Sequence[int | str], k: int) -> int:
    return sum(-(-c // k) for c in Counter(labels).values())


def test_coverage_equal_batches_random() -> None:
    rng = random.Random(2024)
    checked = 0
    for _ in range(200):
        k = rng.randint(1, 5)
        batch_size = k * rng.randint(1, 6)
        labels = random_labels(rng, rng.randint(1, 25), rng.randint(1, 12))
        world_size = rng.randint(1, 4)
        try:
            per_rank = all_ranks(labels, batch_size, k, world_size, seed=rng.randrange(50), epoch=rng.randrange(4))
        except ValueError:
            # Only when the rows cannot make equally many non-empty batches per rank.
            g = batch_size // k
            n_batches = -(-(-(-n_groups(labels, k) // world_size)) // g)
            assert len(labels) < world_size * n_batches
            continue
        checked += 1
        assert len({len(b) for b in per_rank}) == 1
        flat = [i for batches in per_rank for b in batches for i in b]
        assert sorted(flat) == list(range(len(labels)))
        assert all(1 <= len(b) <= batch_size for batches in per_rank for b in batches)
    assert checked > 150


@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
@pytest.mark.parametrize("n_per_class", [4, 5, 7])
def test_k_per_class_when_groups_complete(world_size: int, n_per_class: int) -> None:
    k, batch_size = 4, 16
    labels = [c for c in range(13) for _ in range(n_per_class)]
    per_rank = all_ranks(labels, batch_size, k, world_size, epoch=1)
    assert len({len(b) for b in per_rank}) == 1
    for batches in per_rank:
        for b in batches:
            counts = Counter(labels[i] for i in b)
            for c in counts.values():
                # a full group, several, or a class remainder group (n % k rows)
                assert c % k in (0, n_per_class % k)
    for cls in range(13):
        partial = [
            b for batches in per_rank for b in batches if sum(labels[i] == cls for i in b) % k
        ]
        assert len(partial) <= 1  # only the remainder group is short


def test_single_row_class_included() -> None:
    labels = ["a", "a", "b", "b", "lonely", "c", "c"]
    batches = list(ClassBalancedBatchSampler(labels, 4, 2))
    assert sorted(i for b in batches for i in b) == list(range(7))
    assert any(4 in b for b in batches)


def test_oversample_every_group_has_k() -> None:
    rng = random.Random(5)
    for _ in range(100):
        k = rng.randint(2, 5)
        g = rng.randint(1, 4)
        labels = random_labels(rng, rng.randint(1, 15), rng.randint(1, 11))
        world_size = rng.randint(1, 4)
        if len(labels) < world_size:
            continue
        per_rank = all_ranks(labels, k * g, k, world_size, epoch=rng.randrange(3), oversample=True)
        assert len({len(b) for b in per_rank}) == 1
        flat = [i for batches in per_rank for b in batches for i in b]
        assert set(flat) == set(range(len(labels)))  # nothing dropped
        for batches in per_rank:
            for b in batches:
                assert len(b) % k == 0
                assert all(c % k == 0 for c in Counter(labels[i] for i in b).values())
        # repeats only where asked: top-ups of short classes plus extra groups for rank balance
        sizes = Counter(labels)
        top_ups = sum((k - s % k) % k for s in sizes.values())
        groups = n_groups(labels, k)
        n_batches = -(-(-(-groups // world_size)) // g)
        extra = sum(max(0, n_batches - len(range(r, groups, world_size))) for r in range(world_size))
        assert len(flat) == len(labels) + top_ups + extra * k


def test_oversample_without_replacement_when_class_big_enough() -> None:
    labels = [0] * 5 + [1] * 2
    for epoch in range(10):
        s = ClassBalancedBatchSampler(labels, 3, 3, oversample=True)
        s.set_epoch(epoch)
        for b in s:
            if labels[b[0]] == 0:
                assert len(set(b)) == 3
            else:
                assert set(b) == {5, 6}


def test_no_oversample_means_no_repeat() -> None:
    labels = [0] * 5 + [1] * 2 + [2]
    batches = list(ClassBalancedBatchSampler(labels, 6, 3))
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(8))


def test_deterministic_and_reshuffled() -> None:
    labels = [c for c in range(10) for _ in range(8)]
    a = ClassBalancedBatchSampler(labels, 8, 4, seed=1)
    b = ClassBalancedBatchSampler(labels, 8, 4, seed=1)
    a.set_epoch(3)
    b.set_epoch(3)
    assert list(a) == list(b)
    first_classes = set()
    orders = set()
    for epoch in range(8):
        a.set_epoch(epoch)
        batches = list(a)
        orders.add(tuple(i for bt in batches for i in bt))
        first_classes.add(labels[batches[0][0]])
    assert len(orders) == 8
    assert len(first_classes) > 1  # no fixed class order
    assert list(ClassBalancedBatchSampler(labels, 8, 4, seed=2)) != list(ClassBalancedBatchSampler(labels, 8, 4, seed=1))


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_one_group_per_batch_balances_ranks(world_size: int) -> None:
    labels = [c for c in range(7) for _ in range(4)]  # 7 groups of 4: not divisible by 2, 3, 4
    per_rank = all_ranks(labels, 4, 4, world_size)
    assert len({len(b) for b in per_rank}) == 1
    assert sorted(i for batches in per_rank for b in batches for i in b) == list(range(28))
    for batches in per_rank:
        for b in batches:
            assert len({labels[i] for i in b}) == 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"batch_size": 6, "samples_per_class": 4},
        {"batch_size": 0, "samples_per_class": 2},
        {"batch_size": 4, "samples_per_class": 0},
        {"world_size": 0},
        {"rank": 3, "world_size": 3},
        {"seed": -2},
        {"world_size": 20},
    ],
)
def test_argument_errors(kwargs: dict[str, int]) -> None:
    args: dict[str, int] = {"batch_size": 4, "samples_per_class": 2} | kwargs
    with pytest.raises(ValueError):
        ClassBalancedBatchSampler([0, 0, 1, 1, 2, 2], **args)


def test_infeasible_rank_split_raises_early() -> None:
    with pytest.raises(ValueError, match="non-empty batches"):
        ClassBalancedBatchSampler([0, 1, 2, 3, 4], 1, 1, world_size=2)


def test_negative_epoch_rejected() -> None:
    with pytest.raises(ValueError):
        ClassBalancedBatchSampler([0, 0], 2, 2).set_epoch(-1)
