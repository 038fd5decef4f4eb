"""iter_no_duplicate_batches: batches without repeated strings from a stream (seeded random loops)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator, Sequence

import pytest

from contrastext.train.samplers import iter_no_duplicate_batches


def random_rows(rng: random.Random, n: int, vocab: int, self_dup: float = 0.0) -> list[tuple[str, str]]:
    rows = []
    for _ in range(n):
        a = f"s{rng.randrange(vocab)}"
        b = a if rng.random() < self_dup else f"s{rng.randrange(vocab)}"
        rows.append((a, b))
    return rows


def assert_no_duplicates(rows: Sequence[Sequence[str]], batch: list[int]) -> None:
    if len(batch) == 1:
        return
    strings = [t for i in batch for t in set(rows[i])]
    assert len(strings) == len(set(strings)), batch
    for i in batch:  # rows with anchor == positive only ever travel alone
        assert len(set(rows[i])) == len(rows[i])


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
