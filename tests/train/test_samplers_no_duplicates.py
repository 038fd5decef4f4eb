"""NoDuplicatesBatchSampler and iter_no_duplicate_batches (seeded random loops, no hypothesis)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator, Sequence

import pytest

from contrastext.train.samplers import NoDuplicatesBatchSampler, iter_no_duplicate_batches


def random_rows(rng: random.Random, n: int, vocab: int, self_dup: float = 0.0) -> list[tuple[str, str]]:
    rows = []
    for _ in range(n):
        a = f"s{rng.randrange(vocab)}"
        b = a if rng.random() < self_dup else f"s{rng.randrange(vocab)}"
        rows.append((a, b))
    return rows


def all_ranks(
    rows: Sequence[Sequence[str]], batch_size: int, world_size: int, seed: int = 0, epoch: int = 0, **kw: bool
) -> list[list[list[int]]]:
    out = []
    for rank in range(world_size):
        s = NoDuplicatesBatchSampler(rows, batch_size, seed=seed, rank=rank, world_size=world_size, **kw)
        s.set_epoch(epoch)
        batches = list(s)
        assert len(s) == len(batches)
        out.append(batches)
    return out


def assert_no_duplicates(rows: Sequence[Sequence[str]], batch: list[int]) -> None:
    if len(batch) == 1:
        return
    strings = [t for i in batch for t in set(rows[i])]
    assert len(strings) == len(set(strings)), batch
    for i in batch:  # rows with anchor == positive only ever travel alone
        assert len(set(rows[i])) == len(rows[i])


def test_coverage_no_duplicates_equal_batches_random() -> None:
    rng = random.Random(1234)
    for _ in range(150):
        n = rng.randint(1, 300)
        world_size = rng.randint(1, 4)
        if n < world_size:
            continue
        batch_size = rng.randint(2, 33)
        rows = random_rows(rng, n, vocab=max(4 * n, 8), self_dup=rng.choice([0.0, 0.05]))
        per_rank = all_ranks(rows, batch_size, world_size, seed=rng.randrange(100), epoch=rng.randrange(5))
        assert len({len(b) for b in per_rank}) == 1
        flat = [i for batches in per_rank for b in batches for i in b]
        assert sorted(flat) == list(range(n))
        for batches in per_rank:
            for b in batches:
                assert 1 <= len(b) <= batch_size
                assert_no_duplicates(rows, b)


def test_heavy_duplicates_still_cover_everything() -> None:
    rng = random.Random(7)
    for _ in range(60):
        n = rng.randint(40, 200)
        rows = random_rows(rng, n, vocab=rng.randint(5, 30))
        world_size = rng.randint(1, 4)
        try:
            per_rank = all_ranks(rows, rng.randint(2, 16), world_size, epoch=rng.randrange(3))
        except ValueError:
            continue  # too many clashes for this world size; checked separately
        assert len({len(b) for b in per_rank}) == 1
        assert sorted(i for batches in per_rank for b in batches for i in b) == list(range(n))
        for batches in per_rank:
            for b in batches:
                assert b
                assert_no_duplicates(rows, b)


@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
@pytest.mark.parametrize("n", [4, 5, 7, 17, 63, 64, 65, 101])
def test_awkward_sizes(world_size: int, n: int) -> None:
    rows = [(f"a{i}", f"p{i}") for i in range(n)]
    per_rank = all_ranks(rows, 8, world_size, seed=3)
    assert len({len(b) for b in per_rank}) == 1
    assert all(b for batches in per_rank for b in batches)
    assert sorted(i for batches in per_rank for b in batches for i in b) == list(range(n))


def test_deferred_row_not_dropped_and_self_duplicate_alone() -> None:
    rows = [("x", "y"), ("x", "z"), ("same", "same"), ("u", "v")]
    batches = all_ranks(rows, 4, 1)[0]
    assert sorted(i for b in batches for i in b) == [0, 1, 2, 3]
    assert [2] in batches
    assert not any(0 in b and 1 in b for b in batches)


def test_deterministic_per_seed_and_epoch() -> None:
    rows = random_rows(random.Random(0), 200, vocab=1000)
    a = NoDuplicatesBatchSampler(rows, 16, seed=5)
    b = NoDuplicatesBatchSampler(rows, 16, seed=5)
    a.set_epoch(2)
    b.set_epoch(2)
    assert list(a) == list(b)
    first = list(a)
    a.set_epoch(3)
    assert list(a) != first
    a.set_epoch(2)
    assert list(a) == first
    assert list(NoDuplicatesBatchSampler(rows, 16, seed=6)) != list(NoDuplicatesBatchSampler(rows, 16, seed=5))


def test_order_changes_across_epochs() -> None:
    rows = [(f"a{i}", f"p{i}") for i in range(50)]
    s = NoDuplicatesBatchSampler(rows, 10)
    orders = set()
    for epoch in range(5):
        s.set_epoch(epoch)
        orders.add(tuple(i for b in s for i in b))
    assert len(orders) == 5


def test_drop_last_yields_full_even_batches() -> None:
    rows = [(f"a{i}", f"p{i}") for i in range(103)]
    per_rank = all_ranks(rows, 10, 3, drop_last=True)
    assert [len(b) for b in per_rank] == [3, 3, 3]
    flat = [i for batches in per_rank for b in batches for i in b]
    assert all(len(b) == 10 for batches in per_rank for b in batches)
    assert len(flat) == len(set(flat)) == 90


def test_infeasible_world_size_raises() -> None:
    rows = [("same", f"p{i}") for i in range(5)]  # every batch is a singleton
    with pytest.raises(ValueError, match="too few rows"):
        NoDuplicatesBatchSampler(rows, 4, world_size=2)
    with pytest.raises(ValueError, match="ranks"):
        NoDuplicatesBatchSampler(rows[:3], 4, world_size=4)


def test_rank_falls_back_to_moving_a_row() -> None:
    # 2 ranks: singletons from the clashing rows plus one batch of 2 must still balance.
    rows = [("x", "a"), ("x", "b"), ("x", "c"), ("y", "d")]
    for epoch in range(10):
        per_rank = all_ranks(rows, 4, 2, epoch=epoch)
        assert len(per_rank[0]) == len(per_rank[1])
        assert sorted(i for batches in per_rank for b in batches for i in b) == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"batch_size": 0},
        {"world_size": 0},
        {"rank": 2, "world_size": 2},
        {"rank": -1},
        {"seed": -1},
    ],
)
def test_argument_errors(kwargs: dict[str, int]) -> None:
    args: dict[str, int] = {"batch_size": 4} | kwargs
    with pytest.raises(ValueError):
        NoDuplicatesBatchSampler([("a", "b")] * 4, **args)


def test_negative_epoch_rejected() -> None:
    with pytest.raises(ValueError):
        NoDuplicatesBatchSampler([("a", "b")], 1).set_epoch(-1)


# --- streaming -----------------------------------------------------------------


class Counting:
    def __init__(self, rows: list[int]) -> None:
        self.rows = rows
        self.consumed = 0

    def __iter__(self) -> Iterator[int]:
        for r in self.rows:
            self.consumed += 1
            yield r


def test_streaming_no_loss_no_repeat_bounded_buffer() -> None:
    rng = random.Random(99)
    for _ in range(200):
        n = rng.randint(0, 400)
        table = random_rows(rng, n, vocab=rng.choice([3, 20, 200, 5000]), self_dup=rng.choice([0.0, 0.1]))
        batch_size = rng.randint(1, 20)
        max_pending = rng.randint(1, 30)
        source = Counting(list(range(n)))
        yielded = 0
        seen: Counter[int] = Counter()
        for batch in iter_no_duplicate_batches(source, batch_size, key=lambda i: table[i], max_pending=max_pending):
            assert 1 <= len(batch) <= batch_size
            assert_no_duplicates(table, batch)
            yielded += len(batch)
            seen.update(batch)
            # parked rows + the open batch never exceed the bound
            assert source.consumed - yielded <= max_pending + batch_size - 1
        assert source.consumed == n
        assert seen == Counter(range(n))


def test_streaming_pending_drained_first() -> None:
    table = [("a", "b"), ("a", "c"), ("d", "e"), ("f", "g"), ("h", "i")]
    out = list(iter_no_duplicate_batches(range(5), 2, key=lambda i: table[i]))
    assert out == [[0, 2], [1, 3], [4]]


def test_streaming_full_buffer_emits_smaller_batch() -> None:
    table = [("a", "b"), ("a", "c"), ("d", "e"), ("f", "g")]
    out = list(iter_no_duplicate_batches(range(4), 4, key=lambda i: table[i], max_pending=1))
    assert out[0] == [0]
    assert sorted(i for b in out for i in b) == [0, 1, 2, 3]


def test_streaming_all_clash_stays_bounded() -> None:
    n, max_pending = 5000, 8
    source = Counting(list(range(n)))
    yielded = 0
    for batch in iter_no_duplicate_batches(source, 32, key=lambda i: ("shared", f"p{i}"), max_pending=max_pending):
        assert len(batch) == 1
        yielded += 1
        assert source.consumed - yielded <= max_pending
    assert yielded == n


def test_streaming_generic_rows_and_full_batches() -> None:
    rows = [{"anchor": f"a{i}", "positive": f"p{i}"} for i in range(10)]
    out = list(iter_no_duplicate_batches(iter(rows), 4, key=lambda r: (r["anchor"], r["positive"])))
    assert out == [rows[0:4], rows[4:8], rows[8:10]]


def test_streaming_argument_errors_are_eager() -> None:
    with pytest.raises(ValueError):
        iter_no_duplicate_batches([], 0, key=lambda r: r)
    with pytest.raises(ValueError):
        iter_no_duplicate_batches([], 2, key=lambda r: r, max_pending=0)
