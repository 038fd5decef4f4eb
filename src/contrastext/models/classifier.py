"""TextClassifier: a TextEncoder (CLS or mean pooling) plus a linear head, saved beside the encoder."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch import nn

from contrastext.models.encoder import TextEncoder, pick_device
from contrastext.models.resolve import DEFAULT_MODEL, resolve_model_path
from contrastext.models.st_format import Pooling

HEAD_CONFIG = "classifier.json"
HEAD_WEIGHTS = "classifier_head.safetensors"


class ClassifierLayoutError(ValueError):
    """A model folder's classifier head does not match what was asked for."""


@dataclass
class Prediction:
    embeddings: np.ndarray  # [N, D] float32, what the head reads
    probabilities: np.ndarray  # [N, C] float32

    @property
    def labels(self) -> np.ndarray:
        return self.probabilities.argmax(axis=1)


class TextClassifier(nn.Module):
    """``logits = W · dropout(pool(encoder(text))) + b``.

    The folder it saves is a sentence-transformers encoder folder (the encoder alone stays loadable by
    ``TextEncoder`` and ``SentenceTransformer``) with the head in ``classifier_head.safetensors`` and its
    shape and label names in ``classifier.json``.
    """

    def __init__(self, encoder: TextEncoder, num_labels: int, *, dropout: float = 0.1,
                 labels: Sequence[str] | None = None):
        super().__init__()
        if num_labels < 2:
            raise ValueError(f"num_labels must be >= 2, got {num_labels}")
        if labels is not None and len(labels) != num_labels:
            raise ValueError(f"{len(labels)} label names for {num_labels} labels")
        self.encoder = encoder
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(encoder.embedding_dimension, num_labels)
        self.labels = list(labels) if labels is not None else [str(i) for i in range(num_labels)]
        self.encoder_frozen = False
        self.to(encoder.device)

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_pretrained(cls, spec: str | os.PathLike[str] = DEFAULT_MODEL, *, num_labels: int | None = None,
                        labels: Sequence[str] | None = None, dropout: float | None = None,
                        pooling: Pooling | None = None, normalize: bool | None = None,
                        max_length: int | None = None, device: str | torch.device | None = None,
                        allow_download: bool = False, reset_head: bool = False) -> "TextClassifier":
        """A classifier folder (head restored) or any encoder folder (a new head, ``num_labels`` needed).

        ``reset_head`` ignores a saved head: a new one is initialised from the current torch seed.
        """
        from safetensors.torch import load_file

        folder = resolve_model_path(spec, allow_download=allow_download)
        encoder = TextEncoder.from_pretrained(folder, pooling=pooling, normalize=normalize,
                                              max_length=max_length, device="cpu")
        saved = _read_head_config(Path(folder)) if not reset_head else None
        if saved is None:
            if num_labels is None:
                raise ClassifierLayoutError(f"{folder} has no classifier head; pass num_labels for a new one")
            model = cls(encoder, num_labels, dropout=0.1 if dropout is None else dropout, labels=labels)
        else:
            if num_labels is not None and num_labels != saved["num_labels"]:
                raise ClassifierLayoutError(f"{folder} holds a head for {saved['num_labels']} labels, "
                                            f"not {num_labels}; set reset_head to train a new one")
            model = cls(encoder, saved["num_labels"], dropout=saved["dropout"] if dropout is None else dropout,
                        labels=labels or saved["labels"])
            model.head.load_state_dict(load_file(str(Path(folder) / HEAD_WEIGHTS)))
        return model.to(pick_device(device)).eval()

    load = from_pretrained

    @staticmethod
    def has_head(folder: str | os.PathLike[str]) -> bool:
        return (Path(folder) / HEAD_CONFIG).is_file()

    # ---------------------------------------------------------------- training path
    @property
    def num_labels(self) -> int:
        return self.head.out_features

    @property
    def device(self) -> torch.device:
        return self.head.weight.device

    def freeze_encoder(self) -> None:
        """Train the head alone: the encoder keeps its weights and runs in eval mode (no dropout)."""
        self.encoder_frozen = True
        for parameter in self.encoder.parameters():
            parameter.requires_grad_(False)
        self.encoder.eval()

    def train(self, mode: bool = True) -> "TextClassifier":
        super().train(mode)
        if self.encoder_frozen:
            self.encoder.eval()
        return self

    def tokenize(self, texts: Sequence[str], max_length: int | None = None) -> dict[str, torch.Tensor]:
        return self.encoder.tokenize(texts, max_length)

    def forward(self, features: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(pooled embeddings [B, D], logits [B, C]) from tokenised features."""
        if self.encoder_frozen:
            with torch.no_grad():
                embeddings = self.encoder(features)
        else:
            embeddings = self.encoder(features)
        return embeddings, self.head(self.dropout(embeddings.float()))

    # ---------------------------------------------------------------- inference path
    @torch.inference_mode()
    def predict(self, texts: Sequence[str], batch_size: int = 64, max_length: int | None = None,
                show_progress: bool = False) -> Prediction:
        """Embeddings and class probabilities of ``texts`` in input order (length-sorted batches)."""
        embeddings = self.encoder.encode(texts, batch_size=batch_size, max_length=max_length,
                                         show_progress=show_progress)
        was_training = self.training
        self.eval()
        try:
            logits = self.head(torch.from_numpy(embeddings).to(self.device))
        finally:
            self.train(was_training)
        probabilities = torch.softmax(logits.float(), dim=-1).cpu().numpy().astype(np.float32)
        return Prediction(embeddings=embeddings, probabilities=probabilities)

    # ---------------------------------------------------------------- persistence
    def save(self, path: str | os.PathLike[str]) -> Path:
        from safetensors.torch import save_file

        target = self.encoder.save(path)
        save_file({k: v.detach().cpu().contiguous() for k, v in self.head.state_dict().items()},
                  str(target / HEAD_WEIGHTS))
        config = {"num_labels": self.num_labels, "labels": self.labels, "dropout": self.dropout.p,
                  "input_dimension": self.head.in_features, "pooling": self.encoder.pooling}
        (target / HEAD_CONFIG).write_text(json.dumps(config, indent=2))
        return target


def _read_head_config(folder: Path) -> dict | None:
    path = folder / HEAD_CONFIG
    if not path.is_file():
        return None
    config = json.loads(path.read_text())
    missing = {"num_labels", "labels", "dropout"} - set(config)
    if missing or not (folder / HEAD_WEIGHTS).is_file():
        raise ClassifierLayoutError(f"{folder}: incomplete classifier head (missing {sorted(missing) or HEAD_WEIGHTS})")
    return config
