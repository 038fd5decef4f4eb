"""What every epoch-planned batch sampler shares: a plan per (seed, epoch), computed once and cached."""

from __future__ import annotations

from collections.abc import Iterator


class EpochPlannedSampler:
    """Subclasses implement ``_build_plan`` (this rank's batches of row indices for ``self.epoch``)."""

    epoch: int = 0
    _cache: tuple[int, list[list[int]]] | None = None

    def set_epoch(self, epoch: int) -> None:
        if epoch < 0:
            raise ValueError(f"epoch must be >= 0, got {epoch}")
        self.epoch = epoch

    def __iter__(self) -> Iterator[list[int]]:
        return iter([list(b) for b in self._plan()])

    def __len__(self) -> int:
        return len(self._plan())

    def _plan(self) -> list[list[int]]:
        if self._cache is None or self._cache[0] != self.epoch:
            self._cache = (self.epoch, self._build_plan())
        return self._cache[1]

    def _build_plan(self) -> list[list[int]]:
        raise NotImplementedError
