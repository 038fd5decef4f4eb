"""A label-free check on self-training rounds: do a model's labels follow the pool's own neighbourhoods?

The reference is fixed before any round: a seeded sample of the pool and each sampled item's nearest
neighbours under the round-0 model. Training cannot move these neighbourhoods, so a round cannot raise
the score just by pulling its own pseudo-labels together (what a margin or a silhouette on the trained
model's embeddings would reward). A model's score is Cohen's kappa between an item's label and its
neighbours' labels: the share of neighbour pairs labelled alike, corrected for the agreement its label
proportions give by chance, so labelling everything alike scores 0, not 1. Self-training on a poor teacher
spreads noise over the labels, which breaks neighbourhoods and lowers the score.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from contrastext.clustering import nearest_neighbours


@dataclass
class NeighbourReference:
    rows: np.ndarray  # [n] positions of the sampled items in the pool's order
    neighbours: np.ndarray  # [n, k] each sampled item's nearest other sampled items (indices into rows)

    def agreement(self, pool_labels: np.ndarray) -> float:
        """Kappa of label agreement over the reference's neighbour pairs (labels in the pool's order)."""
        labels = np.asarray(pool_labels)[self.rows]
        return neighbour_kappa(labels, self.neighbours)


def neighbour_kappa(labels: np.ndarray, neighbours: np.ndarray) -> float:
    observed = float((labels[:, None] == labels[neighbours]).mean())
    shares = np.bincount(labels) / len(labels)
    chance = float((shares ** 2).sum())
    return 0.0 if chance >= 1.0 else (observed - chance) / (1.0 - chance)


def sample_rows(pool_rows: int, max_rows: int, seed: int) -> np.ndarray:
    if pool_rows <= max_rows:
        return np.arange(pool_rows)
    return np.sort(np.random.default_rng(seed).choice(pool_rows, max_rows, replace=False))


def neighbour_reference(embeddings: np.ndarray, rows: np.ndarray, k: int) -> NeighbourReference:
    """The reference over ``embeddings`` [len(rows), D] (the sampled items' round-0 embeddings)."""
    if len(rows) < 2:
        raise ValueError("a neighbour reference needs at least two pool items")
    neighbours = nearest_neighbours(embeddings, min(k, len(rows) - 1))
    return NeighbourReference(np.asarray(rows, dtype=np.int64), neighbours)
