"""The self-training loop that ``WCSBert.fit`` and the ``wcsbert_selftrain`` job share: run each round, score
its model with the label-free guard, keep the best model and the head to deliver it with, and stop when the
rule says so.

What a round is made of depends on where the pool lives (texts in memory, or ``.h5`` shards with the pairs
written by Ray Data's workers and a done-marker per round): a :class:`RoundRunner` trains a round and then
finishes it (evaluates, saves, shows it). Everything around that lives here, once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from contrastext.methods.wcsbert.guard import HeadScores, guard_fields
from contrastext.methods.wcsbert.heads import LabelHead
from contrastext.methods.wcsbert.stopping import RoundStop


class RoundGuard(Protocol):
    """The label-free guard (``methods.wcsbert.guard``): a model's score with each head; None: the round-0 model's."""

    heads: Sequence[str]

    def score(self, model: Any = None) -> HeadScores: ...


class RoundRunner(Protocol):
    def train(self, r: int, model: Any) -> tuple[dict[str, Any], Any]:
        """Round ``r`` from ``model``: its record (``round``, ``labels_changed``, …) and the new model, in the
        form the guard scores; a round an earlier run finished is read back instead."""

    def finish(self, record: dict[str, Any], model: Any) -> dict[str, Any]:
        """What follows the guard's score (in ``record``): evaluating, saving, showing; the record to keep."""


@dataclass
class RoundsOutcome:
    records: list[dict[str, Any]]
    stop: RoundStop  # which round was kept and why the rounds stopped
    model: Any  # the kept round's model (the start model when no round beat it)
    head: LabelHead | None  # the head the guard chose for it; None without the guard

    @property
    def chosen_round(self) -> int:
        return self.stop.best_round


def run_rounds(runner: RoundRunner, start: Any, rounds: int, stop: RoundStop, guard: RoundGuard | None = None,
               guard_0: HeadScores | None = None) -> RoundsOutcome:
    """Rounds 1..``rounds`` from ``start`` (the round-0 model, whose guard scores are ``guard_0``) until
    ``stop`` says so. A round's record gets the guard's fields unless it already holds them for the heads
    asked for (a finished round read back)."""
    if guard is not None and guard_0 is None:
        guard_0 = guard.score()
    records: list[dict[str, Any]] = []
    kept: tuple[Any, HeadScores | None] = (start, guard_0)
    model = start
    for r in range(1, rounds + 1):
        record, model = runner.train(r, model)
        scores = None
        if guard is not None and list(record.get("guard_heads") or []) != list(guard.heads):
            scores = guard.score(model)
            record |= guard_fields(scores)
        record = runner.finish(record, model)
        records.append(record)
        done = stop.after(record)
        if stop.best_round == r:
            kept = (model, scores)
        if done:
            break
    model, scores = kept
    head = None
    if guard is not None:
        if scores is None:  # a finished round's record holds its head's name only: make the head again
            scores = guard.score(model)
        head = scores.heads[records[stop.best_round - 1]["head"] if stop.best_round else scores.best]
    return RoundsOutcome(records, stop, model, head)
