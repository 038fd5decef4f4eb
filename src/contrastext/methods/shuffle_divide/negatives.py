"""Which other documents of a batch are an anchor's negatives: one object per rule.

    BatchNegatives()         # every other document of the batch (the paper's 2N-2 for NT-Xent)
    OtherClusterNegatives()  # only documents the previous epoch's clustering put in another cluster

Plain in-batch negatives also push apart documents of one topic, which on an encoder that already clusters
well (MiniLM) splits topics into document-specific clumps; ``OtherClusterNegatives`` feeds the previous
epoch's clusters (no labels) back into training as NT-Xent's groups, so same-cluster documents are neither
positives nor negatives.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from contrastext.clustering import Clusterer


class Negatives(Protocol):
    group_column: str | None  # the pair column that masks same-group negatives; None: no masking

    def groups(self, embeddings: np.ndarray, clusterer: Clusterer) -> np.ndarray | None:
        """One group id per training document (embedded by the previous epoch's model), or None."""


class BatchNegatives:
    group_column = None

    def groups(self, embeddings: np.ndarray, clusterer: Clusterer) -> None:
        return None


class OtherClusterNegatives:
    """``clusterer``: what groups the documents; None: the clusterer the method clusters with."""

    group_column = "group"

    def __init__(self, clusterer: Clusterer | None = None):
        self.clusterer = clusterer

    def groups(self, embeddings: np.ndarray, clusterer: Clusterer) -> np.ndarray:
        ids = np.asarray((self.clusterer or clusterer).fit_predict(embeddings)).reshape(-1)
        if len(ids) != len(embeddings):
            raise ValueError(f"the clusterer gave {len(ids)} cluster ids for {len(embeddings)} documents")
        return ids.astype(np.int64)
