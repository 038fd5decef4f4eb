"""What a WC-SBERT model predicts with: label vectors, saved beside the encoder.

A head holds unit vectors, one per label string (the label and its aliases), each standing for its label; a
text's score for a label is its best cosine over that label's vectors (``zeroshot.label_scores``). Three kinds:

- ``prompts``: the label strings put into the prompt templates and encoded;
- ``prototypes``: each label's mean direction over the texts the prompts label most confidently (label-free:
  no gold label is read), repeated for each of the label's strings. It classifies in the encoder's own
  space, where a self-trained model has grouped the texts, rather than by where the prompts point;
- ``blend``: each label string's prompt vector and its label's prototype, averaged and renormalised. After a
  round of self-training it scored within 0.009 of the better of the other two on all 50 rows of 10 unskewed
  label sets of ``benchmarks/heads_tokens.py`` (3 draws), though up to 2.1 points below the prompts on skewed
  20 Newsgroups; the guard delivers it on a trained model without having to tell the other two apart
  (``methods.wcsbert.guard``).

Saving a head means ``predict``, Serve and ``WCSBert.load`` score with the very vectors the model was
delivered with, without encoding the prompts or the texts again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from contrastext.methods.wcsbert.prototypes import label_prototypes
from contrastext.vectors import unit_rows
from contrastext.zeroshot import LabelSet, ZeroShotClassifier, label_scores

HEAD_FILE = "head.json"
HEAD_VECTORS = "head_vectors.npy"
HEAD_KINDS = ("prompts", "prototypes", "blend")
#: the share of each label's texts, most confident first, whose mean is its prototype (the teacher's default)
PROTOTYPE_FRACTION = 0.5
#: the blend's weight on the prototypes (0: the prompts, 1: the prototypes); chosen on 7 label sets of
#: benchmarks/heads_tokens.py (one draw), and measured after on 3 more sets, 2 more draws and 2 skewed sets
BLEND_WEIGHT = 0.5


@dataclass(frozen=True)
class LabelHead:
    kind: str  # one of HEAD_KINDS
    vectors: np.ndarray  # [S, D] float32
    owner: np.ndarray  # [S]: the label each vector stands for
    n_labels: int

    @classmethod
    def from_prompts(cls, encoder, label_set: LabelSet, templates: Sequence[str], batch_size: int = 64) -> "LabelHead":
        vectors = ZeroShotClassifier(encoder, template=tuple(templates), batch_size=batch_size).alias_embeddings(
            label_set)
        _, owner = label_set.flat()
        return cls("prompts", np.asarray(vectors, np.float32), owner.astype(np.int64), len(label_set.labels))

    def prototypes(self, embeddings: np.ndarray, fraction: float = PROTOTYPE_FRACTION) -> "LabelHead":
        """The prototype head of the texts ``embeddings`` [N, D] (under this head's model), each label's mean
        over the texts this head labels most confidently; a label no text takes keeps its mean string vector."""
        fallback = np.stack([self.vectors[self.owner == label].mean(axis=0) for label in range(self.n_labels)])
        prototypes = label_prototypes(embeddings, self.scores(embeddings), fraction, fallback=fallback)
        return LabelHead("prototypes", prototypes[self.owner], self.owner, self.n_labels)

    def blend(self, prototypes: "LabelHead", weight: float = BLEND_WEIGHT) -> "LabelHead":
        """The blend head of this (prompt) head and its ``prototypes`` head: each label string's vector moved
        ``weight`` of the way to its label's prototype, renormalised."""
        if not np.array_equal(self.owner, prototypes.owner):
            raise ValueError("a blend needs the prompt and prototype heads of the same label strings")
        return LabelHead("blend", unit_rows((1 - weight) * unit_rows(self.vectors) + weight * unit_rows(
            prototypes.vectors)), self.owner, self.n_labels)

    def labels(self, embeddings: np.ndarray) -> np.ndarray:
        """[N] each text's best label."""
        return self.scores(embeddings).argmax(axis=1)

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


def head_kind(head: "LabelHead | None") -> str:
    """The kind of ``head``; no head (no guard chose one) means the prompts'."""
    return head.kind if head is not None else "prompts"


def saved_head(folder: str | Path) -> tuple[LabelSet, tuple[str, ...], np.ndarray] | None:
    """A saved WCSBert folder's label set, prompt templates and head vectors (one per label string; None for any
    other folder), for a server to score that model's own labels with the vectors it was delivered with."""
    folder = Path(folder)
    manifest_file = folder / "wcsbert.json"
    head = LabelHead.load(folder)
    if head is None or not manifest_file.is_file():
        return None
    manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    templates = tuple(manifest.get("templates") or [manifest["template"]])
    return LabelSet.build(manifest["labels"], manifest["aliases"]), templates, head.vectors
