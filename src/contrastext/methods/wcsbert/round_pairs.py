"""A plain-text pool's round pairs on storage: written in a seeded order, found again by the training and the
label-mapping evaluation (a Wikipedia pool's are written by ``category_votes``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from contrastext import storage
from contrastext.methods.wcsbert.category_votes import PairsWritten
from contrastext.methods.wcsbert.pseudo_pairs import PseudoPairs


def write_pairs(pairs: PseudoPairs, location: str, n_labels: int, seed: int, text_pairs: int = 0) -> PairsWritten:
    """The pairs in a seeded random order (the training reads the file as it is: pairs come grouped by
    confidence, batches must mix labels)."""
    table = pa.table({"anchor": pairs.anchors, "positive": pairs.positives,
                      "label": pa.array(pairs.labels, pa.int32())})
    order = np.random.default_rng(seed).permutation(len(pairs))
    storage.delete(location)
    storage.write_parquet(table.take(pa.array(order)), storage.join(location, "part-0.parquet"))
    return PairsWritten(location, pairs.per_label(n_labels), pairs.conflicts, text_pairs)


def pairs_files(location: str) -> list[str]:
    """The parquet files of the pairs at ``location`` (none when it does not exist)."""
    return storage.list_files(location, ".parquet") if storage.is_dir(location) else []
