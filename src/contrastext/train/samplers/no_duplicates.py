"""Batches without repeated strings, for in-batch-negative losses (MNRL).

Multiple Negatives Ranking treats every other row of a batch as a negative, so a
string that appears in two rows of one batch becomes a false negative.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Generic, TypeVar

import numpy as np

from contrastext.train.samplers.base import EpochPlannedSampler

T = TypeVar("T")

__all__ = ["NoDuplicatesBatchSampler", "iter_no_duplicate_batches"]


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


class NoDuplicatesBatchSampler(EpochPlannedSampler):
    """Batch sampler over in-memory rows; no string repeats inside a batch.

    Row ``i`` holds the strings ``texts_per_row[i]`` (e.g. anchor, positive). Each
    epoch the rows are shuffled with ``(seed, epoch)`` and packed greedily with
    :func:`iter_no_duplicate_batches`: a clashing row is deferred to a later batch,
    never dropped, so the last batches may be smaller. A row whose own strings
    repeat (anchor == positive) gets a batch of its own.

    Data-parallel (``world_size > 1``): every rank plans the same global epoch from
    the shared seed and takes batches ``rank, rank + world_size, ...``, so ranks
    hold disjoint rows. Ranks left one batch short split their largest batch in
    two (if all their batches are singletons, a row is moved from the largest
    batch of another rank into a new batch), so every rank yields
    ``ceil(n_batches / world_size)`` non-empty batches and all rows are covered
    exactly once. Impossible cases raise ``ValueError``: fewer rows than ranks, or
    so many clashes that there are not ``world_size`` rows per batch slot.

    ``drop_last=True`` instead yields only full batches, and only as many as can be
    dealt evenly; rows of the other batches are skipped for that epoch.
    """

    def __init__(
        self,
        texts_per_row: Sequence[Sequence[str]],
        batch_size: int,
        seed: int = 0,
        drop_last: bool = False,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if world_size < 1:
            raise ValueError(f"world_size must be >= 1, got {world_size}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, {world_size}), got {rank}")
        if seed < 0:
            raise ValueError(f"seed must be >= 0, got {seed}")
        if len(texts_per_row) < world_size:
            raise ValueError(
                f"{len(texts_per_row)} rows cannot be split over {world_size} ranks "
                "without an empty rank"
            )
        self.texts_per_row = texts_per_row
        self.batch_size = batch_size
        self.seed = seed
        self.drop_last = drop_last
        self.rank = rank
        self.world_size = world_size
        self.epoch = 0
        self._cache: tuple[int, list[list[int]]] | None = None
        self._plan()  # fail fast on data too clash-heavy for world_size (epoch 0)

    def _build_plan(self) -> list[list[int]]:
        return self._plan_rank(self._plan_epoch())

    def _plan_epoch(self) -> list[list[int]]:
        rng = np.random.default_rng([self.seed, self.epoch])
        order: list[int] = rng.permutation(len(self.texts_per_row)).tolist()
        texts = self.texts_per_row
        return list(
            iter_no_duplicate_batches(order, self.batch_size, key=lambda i: texts[i])
        )

    def _plan_rank(self, batches: list[list[int]]) -> list[list[int]]:
        ws = self.world_size
        if self.drop_last:
            full = [b for b in batches if len(b) == self.batch_size]
            return full[: len(full) // ws * ws][self.rank :: ws]
        per_rank = [batches[r::ws] for r in range(ws)]
        target = len(per_rank[0])  # rank 0 always has the most
        n_rows = len(self.texts_per_row)
        if n_rows < ws * target:
            raise ValueError(
                f"epoch {self.epoch}: {n_rows} rows form {len(batches)} duplicate-free "
                f"batches, too few rows to give {ws} ranks {target} non-empty batches "
                "each; lower world_size or deduplicate the data"
            )
        for mine in per_rank:
            while len(mine) < target:
                j = _largest(mine)
                if j is not None and len(mine[j]) >= 2:
                    half = len(mine[j]) // 2
                    mine[j : j + 1] = [mine[j][:half], mine[j][half:]]
                    continue
                # Exists: fewer batches than ws * target <= n_rows means one has >= 2 rows.
                donor = max((b for p in per_rank for b in p), key=len)
                mine.append([donor.pop()])
        return per_rank[self.rank]


def _largest(batches: list[list[int]]) -> int | None:
    if not batches:
        return None
    return max(range(len(batches)), key=lambda j: len(batches[j]))
