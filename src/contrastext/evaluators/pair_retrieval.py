"""Held-out pair retrieval: does each anchor find its own positive among all the positives?"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from contrastext.vectors import unit_rows


@dataclass
class PairRetrievalEvaluator:
    """Accuracy@1, accuracy@5 and MRR of anchor → positive retrieval by cosine similarity.

    Distinct positive strings are the candidates, so repeated positives never count against the model.
    A candidate scoring the same as the target counts against it (the rank is pessimistic), so a collapsed
    encoder that gives every text one vector scores acc@1 = 0, not 1.
    """

    anchors: Sequence[str]
    positives: Sequence[str]
    batch_size: int = 64

    def __call__(self, encoder) -> dict[str, float]:
        if not self.anchors:
            return {}
        candidates = sorted(set(self.positives))
        index = {text: i for i, text in enumerate(candidates)}
        targets = np.array([index[p] for p in self.positives])
        a = unit_rows(encoder.encode(list(self.anchors), batch_size=self.batch_size))
        c = unit_rows(encoder.encode(candidates, batch_size=self.batch_size))
        scores = a @ c.T
        target_scores = scores[np.arange(len(targets)), targets]
        ranks = (scores >= target_scores[:, None]).sum(axis=1)  # the target itself counts once
        ranks[~np.isfinite(target_scores)] = len(candidates)  # a NaN embedding retrieves nothing
        return {
            "acc@1": float((ranks == 1).mean()),
            "acc@5": float((ranks <= 5).mean()),
            "mrr": float((1.0 / ranks).mean()),
        }
