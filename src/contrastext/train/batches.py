"""Turning a worker's Ray Data shard into training batches of texts, one epoch at a time."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from contrastext.config import TrainConfig
from contrastext.train.samplers import iter_no_duplicate_batches

PAIR_LOSSES = ("mnr", "ntxent")
READ_BATCH_ROWS = 1024


@dataclass
class SkippedRows:
    """Rows left out of training, by reason (malformed input never stops a run)."""

    reasons: Counter = field(default_factory=Counter)

    def add(self, reason: str) -> None:
        self.reasons[reason] += 1

    @property
    def total(self) -> int:
        return sum(self.reasons.values())


def label_id(label: Any) -> int:
    """A label as an int that is the same on every worker (string labels are hashed, not enumerated).

    The id is an identity (same id: same positive, same class), so the hash is 64 bits: among a few
    hundred thousand distinct labels a 32-bit one such as crc32 would already merge some.
    """
    if isinstance(label, (int, np.integer)) and not isinstance(label, bool):
        return int(label)
    digest = hashlib.blake2b(str(label).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)  # signed: fits torch.long


def valid_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def column_values(batch: dict[str, Any], columns: tuple[str, str], hint: str) -> tuple[Any, Any]:
    """The two columns of a numpy batch; a missing one is a configuration error naming what exists."""
    missing = [c for c in columns if c not in batch]
    if missing:
        raise KeyError(f"Training data has no column(s) {missing}; it has {sorted(batch)}. "
                       f"Set train.columns to {hint}.")
    return batch[columns[0]], batch[columns[1]]


def group_id(value: Any) -> int:
    """A row's negative-masking group as an int; None, NaN or anything not integral is -1 (no group)."""
    if isinstance(value, (bool, np.bool_)) or value is None:
        return -1
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)) and np.isfinite(value) and float(value).is_integer():
        return int(value)
    return -1


def iter_rows(shard, config: TrainConfig, epoch: int, rank: int, skipped: SkippedRows) -> Iterator[tuple]:
    """(first, second) column values of each well-formed row, locally shuffled with a per-epoch seed.

    With ``config.group_column`` each pair row is (first, second, group id).
    """
    first, second = config.columns
    pair_task = config.loss.name in PAIR_LOSSES
    shuffle = config.shuffle_buffer_rows or None
    for batch in shard.iter_batches(
        batch_size=READ_BATCH_ROWS, batch_format="numpy",
        local_shuffle_buffer_size=shuffle,
        local_shuffle_seed=(config.seed + 7919 * epoch + rank) if shuffle else None,
    ):
        firsts, seconds = column_values(batch, (first, second), "the two columns to use")
        groups = None
        if pair_task and config.group_column is not None:
            if config.group_column not in batch:
                raise KeyError(f"Training data has no group column {config.group_column!r}; it has "
                               f"{sorted(batch)}. Set train.group_column to one of them, or to null.")
            groups = batch[config.group_column]
        for i, (a, b) in enumerate(zip(firsts, seconds)):
            if not valid_text(a):
                skipped.add(f"empty or non-text {first}")
            elif pair_task and not valid_text(b):
                skipped.add(f"empty or non-text {second}")
            elif not pair_task and b is None:
                skipped.add(f"missing {second}")
            elif groups is not None:
                yield a, b, group_id(groups[i])
            else:
                yield (a, b) if pair_task else (a, label_id(b))


def epoch_batches(shard, config: TrainConfig, epoch: int, rank: int, skipped: SkippedRows) -> Iterator[list[tuple]]:
    rows = iter_rows(shard, config, epoch, rank, skipped)
    if config.loss.name in PAIR_LOSSES and config.no_duplicates:
        # only the texts count as duplicates (a group id is shared by design)
        yield from iter_no_duplicate_batches(rows, config.batch_size, key=lambda row: row[:2])
        return
    batch: list[tuple] = []
    for row in rows:
        batch.append(row)
        if len(batch) == config.batch_size:
            yield batch
            batch = []
    if batch:
        yield batch
