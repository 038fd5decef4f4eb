"""Batches without repeated strings, for in-batch-negative losses (MNRL).

Multiple Negatives Ranking treats every other row of a batch as a negative, so a
string that appears in two rows of one batch becomes a false negative.

Training streams Ray Data shards, so batches are packed from a stream here;
sentence-transformers' ``NoDuplicatesBatchSampler`` does the same over an indexed
dataset in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")

__all__ = ["iter_no_duplicate_batches"]


class _Packer(Generic[T]):
    """Greedy batch builder with a pending buffer of rows that clashed."""

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size
        self.batch: list[T] = []
        self.seen: set[str] = set()
        self.pending: list[tuple[T, frozenset[str]]] = []

    def try_add(self, row: T, keys: frozenset[str]) -> bool:
        if len(self.batch) >= self.batch_size or not keys.isdisjoint(self.seen):
            return False
        self.batch.append(row)
        self.seen.update(keys)
        return True

    def restart(self) -> Iterator[list[T]]:
        """Open a new batch, draining pending rows first; yield batches that fill up."""
        while True:
            self.batch, self.seen = [], set()
            keep = [item for item in self.pending if not self.try_add(*item)]
            self.pending = keep
            if len(self.batch) < self.batch_size:
                return
            yield self.batch


def iter_no_duplicate_batches(
    rows: Iterable[T],
    batch_size: int,
    key: Callable[[T], Sequence[str]],
    max_pending: int = 10_000,
) -> Iterator[list[T]]:
    """Stream ``rows`` into batches in which no string of ``key(row)`` appears twice.

    Rows are added greedily; a row that clashes with the open batch is parked in a
    pending buffer, which is drained first into every new batch. When the buffer
    holds ``max_pending`` rows the open batch is emitted early (smaller), so memory
    stays bounded: at most ``max_pending`` parked rows plus one open batch. At the
    end everything is flushed. Every row is yielded exactly once, in some batch.

    A row whose own strings repeat (e.g. anchor == positive) cannot share a batch
    without a repeat, so it is yielded at once as a batch of its own.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if max_pending < 1:
        raise ValueError(f"max_pending must be >= 1, got {max_pending}")
    return _iter_batches(rows, batch_size, key, max_pending)


def _iter_batches(
    rows: Iterable[T], batch_size: int, key: Callable[[T], Sequence[str]], max_pending: int
) -> Iterator[list[T]]:
    packer: _Packer[T] = _Packer(batch_size)
    for row in rows:
        strings = key(row)
        keys = frozenset(strings)
        if len(keys) < len(strings):
            yield [row]
            continue
        if packer.try_add(row, keys):
            if len(packer.batch) == batch_size:
                yield packer.batch
                yield from packer.restart()
            continue
        # A clash needs a non-empty open batch, so emitting it below never yields [].
        packer.pending.append((row, keys))
        if len(packer.pending) >= max_pending:
            yield packer.batch
            yield from packer.restart()
    # After restart() the open batch is non-empty whenever rows are pending.
    while packer.batch:
        yield packer.batch
        yield from packer.restart()
