"""Which self-training round's model to keep, and when to stop: the job's rule and the WCSBert façade's."""

from __future__ import annotations

from typing import Any


class RoundStop:
    """Keeps the round with the best stopping signal: a dev set's accuracy (``use_dev``, the record's
    ``eval_accuracy``), else the label-free guard (``guard``, see ``methods.wcsbert.guard``; ``guard_0`` is the
    round-0 model's), else the last round. Stops after ``patience`` rounds without improvement, or when
    fewer than ``min_change`` of the pseudo-labels changed."""

    def __init__(self, rounds: int, *, patience: int = 1, min_change: float = 0.0, use_dev: bool = False,
                 guard_0: float | None = None):
        self.patience = patience
        self.min_change = min_change
        self.use_dev = use_dev
        self.best_round, self.best_value, self.stale = 0, None if use_dev else guard_0, 0
        self.reason = "all rounds run" if rounds else "no rounds configured"

    def after(self, record: dict[str, Any]) -> bool:
        """Take round ``record`` into account; True when no further round should run."""
        r = record["round"]
        value = record.get("eval_accuracy") if self.use_dev else record.get("guard")
        if value is not None:
            if self.best_value is None or value > self.best_value:
                self.best_round, self.best_value, self.stale = r, value, 0
            else:
                self.stale += 1
            if self.stale >= self.patience:
                signal = "dev accuracy" if self.use_dev else "the label-free guard"
                self.reason = (f"{signal} did not improve for {self.stale} round(s); kept "
                               f"{'round ' + str(self.best_round) if self.best_round else 'the round-0 model'}")
                return True
        else:
            self.best_round = r
        changed = record.get("labels_changed")
        if changed is not None and changed < self.min_change:
            self.reason = f"pseudo-labels settled (changed {changed:.4f} < min_change)"
            return True
        return False
