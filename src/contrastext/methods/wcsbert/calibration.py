"""Label-prior calibration of a teacher's scores, so one label cannot swallow the pool.

A teacher's cosines carry a prior: a label whose prompt or prototype sits near the middle of the pool wins
most argmaxes. Read as probabilities, ``p = softmax(scores / temperature)``, the scores are corrected to a
uniform label prior by the prior-ratio rule of Saerens, Latinne & Decaestecker (Neural Computation 14(1),
2002, eq. 2.4), ``p'(k|x) ∝ p(k|x) · (1/K) / π_k``, where ``π_k`` is label k's share of the pool's current
pseudo-labels (argmaxes, add-one smoothed). Taken back to cosine units, ``temperature · log p'`` is the
score less ``temperature · log(K · π_k)`` up to a constant per row, and that is what ``calibrate`` returns:
argmaxes and margins are those of the corrected probabilities, a label holding exactly its fair share
``1/K`` keeps its scores, and thresholds on the cosine keep their meaning. With ``iterations`` > 1 the
shares are counted again on the corrected scores and the corrections add up, moving the argmaxes further
towards a balanced pool.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pydantic import Field

from contrastext.config import Settings


class CalibrationConfig(Settings):
    enabled: bool = Field(False, description="correct the teacher's scores by each label's share of the pool")
    temperature: float = Field(0.05, gt=0, description="the scores are read as softmax(scores / temperature): a "
                                                       "label's score falls by temperature × log(labels × its "
                                                       "share)")
    iterations: int = Field(1, ge=1, description="count the shares again on the corrected scores and correct "
                                                 "again, this many times in all")


@dataclass
class Calibrated:
    scores: np.ndarray  # [N, labels] the corrected scores
    shares: np.ndarray  # [labels] each label's share of the argmaxes before the correction
    shift: np.ndarray  # [labels] what was subtracted from each label's scores


def argmax_counts(scores: np.ndarray, shift: np.ndarray | None = None, chunk_rows: int = 65_536) -> np.ndarray:
    """[labels] how many rows of ``scores - shift`` each label wins, a chunk of rows at a time."""
    counts = np.zeros(scores.shape[1], dtype=np.int64)
    for start in range(0, len(scores), chunk_rows):
        part = scores[start:start + chunk_rows]
        if shift is not None:
            part = part - shift
        counts += np.bincount(part.argmax(axis=1), minlength=scores.shape[1])
    return counts


def prior_shift(counts: np.ndarray, temperature: float) -> np.ndarray:
    """``temperature · log(K · π)`` with ``π`` the add-one smoothed shares of ``counts`` (a label no row takes
    is raised, never by an infinite amount)."""
    n_labels = len(counts)
    shares = (counts + 1.0) / (counts.sum() + n_labels)
    return temperature * np.log(n_labels * shares)


def calibrate(scores: np.ndarray, config: CalibrationConfig) -> Calibrated:
    """``scores`` [N, labels] corrected by the labels' shares of the pool (one new array; ``scores`` is kept)."""
    counts = argmax_counts(scores)
    shares = counts / max(int(counts.sum()), 1)
    if not config.enabled:
        return Calibrated(scores, shares, np.zeros(scores.shape[1]))
    shift = prior_shift(counts, config.temperature)
    for _ in range(config.iterations - 1):
        shift = shift + prior_shift(argmax_counts(scores, shift), config.temperature)
    corrected = np.subtract(scores, shift.astype(scores.dtype), dtype=scores.dtype)
    return Calibrated(corrected, shares, shift)
