"""What a WC-SBERT model predicts with: label vectors, saved beside the encoder.

A head holds unit vectors, each standing for one label; a text's score for a label is its best cosine over
that label's vectors (``zeroshot.label_scores``). The prompt head has a vector per label string (the label
and its aliases, put into the prompt templates); saving it means ``predict``, Serve and ``WCSBert.load`` score
with the very vectors the model was delivered with, without encoding the prompts again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from contrastext.zeroshot import LabelSet, ZeroShotClassifier, label_scores

HEAD_FILE = "head.json"
HEAD_VECTORS = "head_vectors.npy"


@dataclass(frozen=True)
class LabelHead:
    kind: str  # "prompts": a vector per label string in the prompt templates
    vectors: np.ndarray  # [S, D] float32
    owner: np.ndarray  # [S]: the label each vector stands for
    n_labels: int

    @classmethod
    def from_prompts(cls, encoder, label_set: LabelSet, templates: Sequence[str], batch_size: int = 64) -> "LabelHead":
        vectors = ZeroShotClassifier(encoder, template=tuple(templates), batch_size=batch_size).alias_embeddings(
            label_set)
        _, owner = label_set.flat()
        return cls("prompts", np.asarray(vectors, np.float32), owner.astype(np.int64), len(label_set.labels))

    def scores(self, embeddings: np.ndarray) -> np.ndarray:
        """[N, labels] best cosine of each text over each label's vectors."""
        return label_scores(embeddings, self.vectors, self.owner, self.n_labels)

    def save(self, folder: str | Path) -> None:
        folder = Path(folder)
        np.save(folder / HEAD_VECTORS, self.vectors)
        (folder / HEAD_FILE).write_text(json.dumps({"kind": self.kind, "owner": self.owner.tolist(),
                                                    "labels": self.n_labels}, indent=2), encoding="utf-8")

    @classmethod
    def load(cls, folder: str | Path) -> "LabelHead | None":
        """The head saved in ``folder``; None for a folder saved before heads were."""
        folder = Path(folder)
        if not (folder / HEAD_FILE).is_file():
            return None
        meta = json.loads((folder / HEAD_FILE).read_text(encoding="utf-8"))
        return cls(meta["kind"], np.load(folder / HEAD_VECTORS).astype(np.float32),
                   np.asarray(meta["owner"], np.int64), int(meta["labels"]))


def saved_prompt_head(folder: str | Path) -> tuple[LabelSet, tuple[str, ...], np.ndarray] | None:
    """A saved WCSBert folder's label set, prompt templates and head vectors (None for any other folder), for
    a server to score that model's own labels with the vectors it was delivered with."""
    folder = Path(folder)
    manifest_file = folder / "wcsbert.json"
    head = LabelHead.load(folder)
    if head is None or head.kind != "prompts" or not manifest_file.is_file():
        return None
    manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    templates = tuple(manifest.get("templates") or [manifest["template"]])
    return LabelSet.build(manifest["labels"], manifest["aliases"]), templates, head.vectors
