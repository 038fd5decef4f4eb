"""PhraseEncoder: a transformer encodes the sentence; the phrase is the mean of its span's token states, plus
(by default) the phrase encoded on its own."""

from __future__ import annotations

import json
import os
from contextlib import nullcontext
from pathlib import Path
from typing import Sequence, get_args

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from contrastext.console import progress_bar
from contrastext.methods.uctopic.config import DEFAULT_PHRASE_VECTORS, PhraseVectors
from contrastext.methods.uctopic.phrases import PhraseInstance
from contrastext.models.encoder import MAX_BATCH_TOKENS, TextEncoder, pick_device, pool
from contrastext.models.resolve import DEFAULT_MODEL, resolve_model_path

PHRASE_CONFIG = "phrase_encoder.json"
# characters kept either side of a span when a sentence is longer than the token limit allows
_CHARS_PER_TOKEN = 4

Span = tuple[str, int, int]  # (sentence, start, end) in characters


class PhraseEncoder(nn.Module):
    """Context-aware phrase vectors: ``mean(token states of the span's tokens)`` of the encoded sentence, by
    default plus the phrase encoded alone (``vectors``, see ``PhraseVectors``).

    Training (``forward`` on ``tokenize``'s features) builds the same vectors. With ``mask`` the span's tokens are
    replaced by the tokenizer's mask token and the phrase is not added, so the vector comes from the context
    alone (UCTopic pretraining). The folder it saves is the encoder's sentence-transformers folder plus
    ``phrase_encoder.json``, which names ``vectors``; any encoder folder loads as a phrase encoder.
    """

    def __init__(self, encoder: TextEncoder, vectors: PhraseVectors = DEFAULT_PHRASE_VECTORS):
        super().__init__()
        if vectors not in get_args(PhraseVectors):
            raise ValueError(f"vectors must be one of {', '.join(get_args(PhraseVectors))}, not {vectors!r}")
        self.encoder = encoder
        self.vectors = vectors
        if encoder.tokenizer.mask_token_id is None:
            raise ValueError("the tokenizer has no mask token; phrase masking needs one")

    @classmethod
    def from_pretrained(cls, spec: str | os.PathLike[str] = DEFAULT_MODEL, *, max_length: int | None = None,
                        device: str | torch.device | None = None, allow_download: bool = False,
                        backend: str = "torch", vectors: PhraseVectors | None = None) -> "PhraseEncoder":
        """Load a phrase encoder from a folder, a URI of a folder an earlier stage saved, or a model spec;
        ``backend``: what ``encode`` runs on (``models.onnx_backend``; training always runs on torch);
        ``vectors``: None takes what the folder was saved with, else the default."""
        from contrastext import storage

        if storage.is_uri(spec) and not str(spec).startswith("file://"):
            with storage.local_copy(spec) as local:
                return cls.from_pretrained(local, max_length=max_length, device=device,
                                           allow_download=allow_download, backend=backend, vectors=vectors)
        if str(spec).startswith("file://"):
            spec = storage.resolve(spec)[1]
        folder = resolve_model_path(spec, allow_download=allow_download)
        encoder = TextEncoder.from_pretrained(folder, max_length=max_length, device="cpu")
        vectors = vectors or saved_phrase_vectors(folder)
        return cls(encoder, vectors).to(pick_device(device)).eval().set_backend(backend)

    def set_backend(self, backend: str) -> "PhraseEncoder":
        """Run ``encode``'s transformer on ``backend``: the span pooling reads the ONNX session's token states."""
        self.encoder.set_backend(backend)
        return self

    @property
    def backend(self) -> str:
        return self.encoder.backend

    def prepare_backend(self) -> float:
        return self.encoder.prepare_backend()

    load = from_pretrained

    @property
    def transformer(self) -> nn.Module:
        return self.encoder.transformer

    @property
    def tokenizer(self):
        return self.encoder.tokenizer

    @property
    def max_length(self) -> int:
        return self.encoder.max_length

    @property
    def device(self) -> torch.device:
        return self.encoder.device

    @property
    def embedding_dimension(self) -> int:
        return self.encoder.embedding_dimension

    # ---------------------------------------------------------------- features
    def tokenize(self, spans: Sequence[Span | PhraseInstance], mask: Sequence[bool] | None = None,
                 max_length: int | None = None, *, phrases_alone: bool | None = None) -> dict[str, torch.Tensor]:
        """Tokenised sentences plus ``span_mask`` [B, T] (1 on the span's tokens); with ``phrases_alone`` (None:
        where ``vectors`` adds them) also the phrases tokenised alone for ``forward``."""
        max_length = max_length or self.max_length
        window = max_length * _CHARS_PER_TOKEN
        texts, bounds = [], []
        for item in spans:
            sentence, start, end = (item.sentence, item.start, item.end) if isinstance(item, PhraseInstance) else item
            if not 0 <= start < end <= len(sentence):
                raise ValueError(f"span [{start}, {end}) is outside a sentence of {len(sentence)} characters")
            if len(sentence) > window:  # keep the span and its nearest context inside the token limit
                left = max(0, min(start - (window - (end - start)) // 2, len(sentence) - window))
                sentence, start, end = sentence[left:left + window], start - left, end - left
                end = min(end, len(sentence))
            texts.append(sentence.lower() if self.encoder.do_lower_case else sentence)
            bounds.append((start, end))
        features = self.tokenizer(texts, padding=True, truncation=True, max_length=max_length,
                                  return_offsets_mapping=True, return_tensors="pt")
        offsets = features.pop("offset_mapping")
        tok_start, tok_end = offsets[..., 0], offsets[..., 1]
        starts = torch.tensor([b[0] for b in bounds])[:, None]
        ends = torch.tensor([b[1] for b in bounds])[:, None]
        span_mask = (tok_end > tok_start) & (tok_start < ends) & (tok_end > starts)
        empty = ~span_mask.any(dim=1)
        if empty.any():  # the span fell past the token limit: the sentence's tokens stand in for it
            span_mask[empty] = features["attention_mask"][empty].bool()
        hidden = torch.tensor(list(mask) if mask is not None else [False] * len(texts), dtype=torch.bool)
        if mask is not None:
            masked = hidden[:, None] & span_mask & ~empty[:, None]
            features["input_ids"] = features["input_ids"].masked_fill(masked, self.tokenizer.mask_token_id)
        features["span_mask"] = span_mask.long()
        features = dict(features)
        if phrases_alone if phrases_alone is not None else self.vectors == "in_context+alone":
            alone = self.encoder.tokenize([text[start:end] for text, (start, end) in zip(texts, bounds)], max_length)
            features |= {"phrase_input_ids": alone["input_ids"], "phrase_attention_mask": alone["attention_mask"],
                         "phrase_shown": (~hidden).long()}
        return features

    def forward(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """Phrase vectors with their graph: the span's mean token state in context, plus (``in_context+alone``,
        features from ``tokenize``) the phrase encoded alone for rows whose phrase is not masked, each part unit
        length; the loss compares directions only."""
        inputs = {k: v for k, v in features.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
        states = self.encoder.transformer(**inputs).last_hidden_state.float()
        weights = features["span_mask"].unsqueeze(-1).to(states.dtype)
        in_context = (states * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
        if "phrase_input_ids" not in features:
            return in_context
        alone_states = self.encoder.transformer(input_ids=features["phrase_input_ids"],
                                                attention_mask=features["phrase_attention_mask"]).last_hidden_state
        alone = pool(alone_states.float(), features["phrase_attention_mask"], self.encoder.pooling)
        shown = features["phrase_shown"].unsqueeze(-1).to(in_context.dtype)
        return F.normalize(in_context, dim=1) + shown * F.normalize(alone, dim=1)

    # ---------------------------------------------------------------- inference
    @torch.inference_mode()
    def encode(self, spans: Sequence[Span | PhraseInstance], batch_size: int = 64, *, mask: bool = False,
               normalize: bool = True, max_length: int | None = None, show_progress: bool = False) -> np.ndarray:
        """Phrase vectors [N, D] float32 in input order (length-sorted batches of ``batch_size`` sentences, fewer
        where they would pass ``MAX_BATCH_TOKENS`` padded tokens; bf16 autocast on GPU).

        Unmasked spans of the same sentence share one forward pass of that sentence. With ``in_context+alone``
        (not with ``mask``) each distinct phrase is also encoded once on its own; without ``normalize`` the
        result is then the mean of the two unit vectors.
        """
        items = [(s.sentence, s.start, s.end) if isinstance(s, PhraseInstance) else tuple(s) for s in spans]
        out = np.empty((len(items), self.embedding_dimension), dtype=np.float32)
        if not items:
            return out
        # one "unit" per forward row: a masked span alone, or every unmasked span of one sentence
        units: dict[object, list[int]] = {}
        for i, (sentence, _, _) in enumerate(items):
            units.setdefault(i if mask else sentence, []).append(i)
        groups = sorted(units.values(), key=lambda g: -len(items[g[0]][0]))
        was_training = self.training
        self.eval()
        use_bf16 = self.device.type == "cuda" and self.encoder.bf16_on_gpu
        autocast = torch.autocast("cuda", dtype=torch.bfloat16) if use_bf16 else nullcontext()
        progress = progress_bar(len(items), "phrases encoded", enabled=show_progress, unit="phrases")
        # at most MAX_BATCH_TOKENS a forward pass, as TextEncoder.encode: a row is padded to max_length at most
        sentences_per_pass = max(1, min(batch_size, MAX_BATCH_TOKENS // (max_length or self.max_length)))
        try:
            for b in range(0, len(groups), sentences_per_pass):
                chunk = groups[b:b + sentences_per_pass]
                rows = [i for g in chunk for i in g]
                features = self.tokenize([items[i] for i in rows], [mask] * len(rows), max_length,
                                         phrases_alone=False)  # added below, once per distinct phrase
                # rows of one sentence tokenise identically: run the transformer once per sentence
                first = np.cumsum([0] + [len(g) for g in chunk[:-1]])
                inputs = {k: v[first].to(self.device) for k, v in features.items() if k != "span_mask"}
                with autocast:
                    states = self.encoder.inference_token_states(inputs)
                owner = torch.tensor(np.repeat(np.arange(len(chunk)), [len(g) for g in chunk]), device=self.device)
                weights = features["span_mask"].to(self.device).unsqueeze(-1).float()
                vectors = (states[owner] * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
                if normalize:
                    vectors = F.normalize(vectors, dim=1)
                out[rows] = vectors.cpu().numpy()
                progress.update(len(rows))
        finally:
            progress.close()
            self.train(was_training)
        if self.vectors == "in_context+alone" and not mask:
            out = self._add_phrases_alone(out, items, batch_size, max_length, normalize)
        return out

    def _add_phrases_alone(self, in_context: np.ndarray, items: list[Span], batch_size: int,
                           max_length: int | None, normalize: bool) -> np.ndarray:
        phrases = [sentence[start:end] for sentence, start, end in items]
        distinct = sorted(set(phrases))
        alone = self.encoder.encode(distinct, batch_size=batch_size, max_length=max_length)
        row = {phrase: i for i, phrase in enumerate(distinct)}
        total = _unit(in_context) + _unit(alone)[[row[p] for p in phrases]]
        return _unit(total) if normalize else total / 2

    # ---------------------------------------------------------------- persistence
    def save(self, path: str | os.PathLike[str]) -> Path:
        target = self.encoder.save(path)
        (target / PHRASE_CONFIG).write_text(json.dumps(phrase_layout(self.vectors), indent=2))
        return target


def phrase_layout(vectors: PhraseVectors) -> dict[str, str]:
    """What ``phrase_encoder.json`` says: how a phrase's vector is made from the folder's encoder."""
    return {"vectors": vectors}


def saved_phrase_vectors(folder: str | os.PathLike[str]) -> PhraseVectors:
    """What a saved phrase encoder's vectors are (a folder saved before the choice existed: ``in_context``;
    a plain encoder folder: the default)."""
    path = Path(folder) / PHRASE_CONFIG
    if not path.is_file():
        return DEFAULT_PHRASE_VECTORS
    vectors = json.loads(path.read_text()).get("vectors", "in_context")
    if vectors not in get_args(PhraseVectors):
        raise ValueError(f"{path} names phrase vectors {vectors!r}: expected one of "
                         f"{', '.join(get_args(PhraseVectors))}")
    return vectors


def _unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
