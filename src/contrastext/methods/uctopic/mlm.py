"""The optional masked-language-model loss of UCTopic pretraining: BERT-style token masking, a prediction
head tied to the encoder's input embeddings, and the phrase model that trains both in one forward pass.

Sentence-transformers folders carry no MLM head, so a new one is initialised; it is saved beside the
encoder as ``mlm_head.safetensors`` and restored from there (resumed runs, later stages).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

MLM_HEAD_WEIGHTS = "mlm_head.safetensors"
IGNORE_INDEX = -100


@dataclass(frozen=True)
class MLMSettings:
    """``weight``: λ of ``loss = contrastive + λ·MLM`` (0: off); ``probability``: share of tokens masked;
    ``head_lr``: learning rate of the prediction head, which starts from random weights."""

    weight: float = 0.0
    probability: float = 0.15
    head_lr: float = 1e-3

    def __post_init__(self) -> None:
        if self.weight < 0:
            raise ValueError(f"mlm_weight must be >= 0, got {self.weight}")
        if not 0 < self.probability < 1:
            raise ValueError(f"mlm_probability must be in (0, 1), got {self.probability}")
        if self.head_lr <= 0:
            raise ValueError(f"mlm_head_lr must be > 0, got {self.head_lr}")

    @property
    def enabled(self) -> bool:
        return self.weight > 0

    @classmethod
    def split_loss_params(cls, params: dict) -> tuple["MLMSettings", dict]:
        """The ``mlm_*`` entries of ``train.loss.params`` as settings, and the rest for the contrastive loss."""
        rest = dict(params)
        settings = cls(**{name: rest.pop(f"mlm_{name}") for name in ("weight", "probability", "head_lr")
                          if f"mlm_{name}" in rest})
        return settings, rest


def mask_tokens(input_ids: torch.Tensor, attention_mask: torch.Tensor, tokenizer, probability: float = 0.15,
                generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking by transformers' ``DataCollatorForLanguageModeling``: ``probability`` of the real,
    non-special tokens are chosen; of those 80% become the mask token, 10% a random token, 10% stay.
    Returns (masked ids, labels: the original id where chosen, -100 elsewhere). Padding and tokens that
    already are the mask token (masked mentions) are never chosen; ``input_ids`` is left untouched."""
    from transformers import DataCollatorForLanguageModeling

    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=probability)
    collator.generator = generator  # torch_mask_tokens draws from it (None: torch's global generator)
    special = torch.tensor(sorted(set(tokenizer.all_special_ids)), dtype=input_ids.dtype)
    never_chosen = ~attention_mask.bool() | torch.isin(input_ids, special)  # the mask token is a special id
    return collator.torch_mask_tokens(input_ids.clone(), special_tokens_mask=never_chosen)


class MaskedLMHead(nn.Module):
    """dense → GELU → LayerNorm → logits over the vocabulary, the decoder being the input embeddings."""

    def __init__(self, hidden_size: int, embedding_size: int, vocab_size: int, layer_norm_eps: float = 1e-12):
        super().__init__()
        self.dense = nn.Linear(hidden_size, embedding_size)
        self.norm = nn.LayerNorm(embedding_size, eps=layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(vocab_size))
        nn.init.normal_(self.dense.weight, std=0.02)
        nn.init.zeros_(self.dense.bias)

    def forward(self, states: torch.Tensor, embeddings: torch.Tensor) -> torch.Tensor:
        return F.linear(self.norm(F.gelu(self.dense(states))), embeddings, self.bias)


class PhraseModelWithMLM(nn.Module):
    """A PhraseEncoder plus an MLM head. ``forward(features, mlm_features)`` returns the phrase vectors and
    the MLM loss in one call, so data-parallel training sees every parameter used in its forward."""

    def __init__(self, phrase_encoder, head: MaskedLMHead):
        super().__init__()
        self.phrase_encoder = phrase_encoder
        self.head = head

    @classmethod
    def around(cls, phrase_encoder, folder: str | os.PathLike[str] | None = None) -> "PhraseModelWithMLM":
        """A new head for ``phrase_encoder``, or the one saved in ``folder`` when it holds one."""
        transformer = phrase_encoder.transformer
        embeddings = transformer.get_input_embeddings().weight
        config = transformer.config
        head = MaskedLMHead(config.hidden_size, embeddings.shape[1], embeddings.shape[0],
                            getattr(config, "layer_norm_eps", 1e-12))
        saved = Path(folder) / MLM_HEAD_WEIGHTS if folder is not None else None
        if saved is not None and saved.is_file():
            from safetensors.torch import load_file

            head.load_state_dict(load_file(str(saved)))
        return cls(phrase_encoder, head)

    def forward(self, features: dict[str, torch.Tensor],
                mlm_features: dict[str, torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        vectors = self.phrase_encoder(features)
        if mlm_features is None:
            return vectors, None
        labels = mlm_features["labels"]
        inputs = {k: v for k, v in mlm_features.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
        states = self.phrase_encoder.transformer(**inputs).last_hidden_state
        chosen = labels != IGNORE_INDEX
        if not chosen.any():  # nothing was masked (tiny batch): a zero that still touches the head
            return vectors, sum(p.sum() for p in self.head.parameters()) * 0.0
        logits = self.head(states[chosen], self.phrase_encoder.transformer.get_input_embeddings().weight)
        return vectors, F.cross_entropy(logits.float(), labels[chosen])

    def save(self, path: str | os.PathLike[str]) -> Path:
        from safetensors.torch import save_file

        target = self.phrase_encoder.save(path)
        save_file({k: v.detach().cpu().contiguous() for k, v in self.head.state_dict().items()},
                  str(target / MLM_HEAD_WEIGHTS))
        return target
