"""Batches made of same-label groups, so a supervised contrastive loss has positives."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from contrastext.train.samplers.base import EpochPlannedSampler

__all__ = ["ClassBalancedBatchSampler"]


class ClassBalancedBatchSampler(EpochPlannedSampler):
    """Batches of ``batch_size // samples_per_class`` groups of ``k`` same-label rows.

    Each epoch, seeded by ``(seed, epoch)``: the rows of every class are shuffled
    and cut into groups of ``k = samples_per_class``, then the order of all groups
    is shuffled (no fixed class order). Two groups of one class may share a batch.

    ``oversample=False`` (default): every row appears exactly once per epoch. A
    class whose size is not a multiple of ``k`` contributes one smaller group; a
    class with a single row still appears, but that row has no in-batch positive.
    ``oversample=True``: short groups are topped up with other rows of the same
    class (with replacement only if the class has fewer than ``k`` rows), so every
    group has exactly ``k`` rows; this is the only way a row repeats.

    Data-parallel (``world_size > 1``): groups are dealt round-robin, so ranks hold
    disjoint rows, and each rank packs its groups into the same number of batches,
    ``ceil(ceil(n_groups / world_size) / groups_per_batch)``, full batches first,
    so the ranks with fewer groups get smaller last batches. When a rank has fewer
    groups than batches (only if ``batch_size == k`` or there are fewer groups than
    ranks) it makes up the difference: with ``oversample`` by drawing an extra
    ``k``-group of a random class; otherwise by splitting its largest group in two
    (or, if all its groups are single rows, moving one row from another rank's
    largest group), so those batches have fewer than ``k`` rows of their class.
    Nothing is dropped; ``ValueError`` if there are too few rows for that.
    """

    def __init__(
        self,
        labels: Sequence[int | str],
        batch_size: int,
        samples_per_class: int,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        oversample: bool = False,
    ) -> None:
        if samples_per_class < 1:
            raise ValueError(f"samples_per_class must be >= 1, got {samples_per_class}")
        if batch_size < 1 or batch_size % samples_per_class:
            raise ValueError(
                f"batch_size ({batch_size}) must be a positive multiple of "
                f"samples_per_class ({samples_per_class})"
            )
        if world_size < 1:
            raise ValueError(f"world_size must be >= 1, got {world_size}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, {world_size}), got {rank}")
        if seed < 0:
            raise ValueError(f"seed must be >= 0, got {seed}")
        if len(labels) < world_size:
            raise ValueError(
                f"{len(labels)} rows cannot be split over {world_size} ranks "
                "without an empty rank"
            )
        by_class: dict[Hashable, list[int]] = {}
        for i, label in enumerate(labels):
            by_class.setdefault(label, []).append(i)
        self._classes = list(by_class.values())  # first-occurrence order, never sorted
        self._n_rows = len(labels)
        self.batch_size = batch_size
        self.samples_per_class = samples_per_class
        self.groups_per_batch = batch_size // samples_per_class
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.oversample = oversample
        self.epoch = 0
        self._cache: tuple[int, list[list[int]]] | None = None
        self._plan()  # fail fast: feasibility does not depend on the epoch

    def _build_plan(self) -> list[list[int]]:
        return self._plan_epoch()

    def _plan_epoch(self) -> list[list[int]]:
        rng = np.random.default_rng([self.seed, self.epoch])
        k = self.samples_per_class
        groups: list[list[int]] = []
        for rows in self._classes:
            shuffled: list[int] = rng.permutation(rows).tolist()
            for start in range(0, len(shuffled), k):
                group = shuffled[start : start + k]
                if self.oversample and len(group) < k:
                    group += _draw(rng, rows, exclude=group, n=k - len(group))
                groups.append(group)
        groups = [groups[i] for i in rng.permutation(len(groups))]

        ws, g = self.world_size, self.groups_per_batch
        per_rank = [groups[r::ws] for r in range(ws)]
        n_batches = -(-len(per_rank[0]) // g)  # rank 0 holds the most groups
        if not self.oversample and self._n_rows < ws * n_batches:
            raise ValueError(
                f"{self._n_rows} rows cannot fill {n_batches} non-empty batches on "
                f"each of {ws} ranks; change world_size or batch_size"
            )
        for mine in per_rank:  # same order on every rank keeps the rng in sync
            while len(mine) < n_batches:
                if self.oversample:
                    rows = self._classes[int(rng.integers(len(self._classes)))]
                    mine.append(_draw(rng, rows, exclude=[], n=k))
                    continue
                big = max(mine, key=len, default=[])
                if len(big) >= 2:
                    j = mine.index(big)
                    mine[j : j + 1] = [big[: len(big) // 2], big[len(big) // 2 :]]
                else:  # n_rows >= ws * n_batches guarantees a group of >= 2 somewhere
                    donor = max((grp for p in per_rank for grp in p), key=len)
                    mine.append([donor.pop()])
        return _pack(per_rank[self.rank], n_batches, g)


def _draw(rng: np.random.Generator, rows: list[int], exclude: list[int], n: int) -> list[int]:
    """``n`` rows of a class, distinct and outside ``exclude`` as far as possible."""
    taken = set(exclude)
    pool = [r for r in rows if r not in taken]
    m = min(n, len(pool))
    out: list[int] = rng.choice(pool, size=m, replace=False).tolist() if m else []
    if n > m:
        out += rng.choice(rows, size=n - m, replace=True).tolist()
    return out


def _pack(groups: list[list[int]], n_batches: int, per_batch: int) -> list[list[int]]:
    """Full batches first, keeping at least one group for every remaining batch."""
    batches: list[list[int]] = []
    start = 0
    for b in range(n_batches):
        take = min(per_batch, len(groups) - start - (n_batches - b - 1))
        batches.append([i for grp in groups[start : start + take] for i in grp])
        start += take
    return batches
