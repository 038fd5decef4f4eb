"""The phrase objective of the shared training loop: a PhraseEncoder trained on pairs of phrase mentions.

Rows (see :func:`contrastext.methods.uctopic.phrases.positive_pairs`): ``anchor``/``positive`` sentences with
``*_start``/``*_end`` character spans and ``*_mask`` flags, a ``key`` that no two rows of a batch share,
and a ``topic`` pseudo label (-1: none; >= 0: CCL, same-topic rows are not negatives of each other).
The loss is :class:`~contrastext.methods.uctopic.loss.PhraseContrastiveLoss`; ``train.loss.params`` may set
``temperature`` (0.05), ``symmetric`` and ``gather_across_workers``, and the optional masked-language-model
loss of UCTopic pretraining: ``mlm_weight`` (λ in contrastive + λ·MLM; 0, off, by default),
``mlm_probability`` (0.15) and ``mlm_head_lr`` (1e-3, for the newly initialised prediction head).
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import torch
from torch import nn

from contrastext.config import TrainConfig
from contrastext.train.batches import READ_BATCH_ROWS, SkippedRows, valid_text
from contrastext.train.objectives import Objective, freeze_unused_pooler, register_objective
from contrastext.train.samplers import iter_no_duplicate_batches

PAIR_COLUMNS = ("anchor", "anchor_start", "anchor_end", "anchor_mask",
                "positive", "positive_start", "positive_end", "positive_mask", "key", "topic")


def _span(text: Any, start: Any, end: Any) -> tuple[str, int, int] | None:
    if not valid_text(text):
        return None
    try:
        s, e = int(start), int(end)
    except (TypeError, ValueError):
        return None
    return (str(text), s, e) if 0 <= s < e <= len(text) else None


def phrase_rows(batch: dict[str, Any], skipped: SkippedRows) -> Iterator[tuple]:
    missing = [c for c in PAIR_COLUMNS[:-2] if c not in batch]
    if missing:
        raise KeyError(f"phrase training data has no column(s) {missing}; it has {sorted(batch)}")
    n = len(batch["anchor"])
    keys = batch.get("key", [None] * n)
    topics = batch.get("topic", [-1] * n)
    for i in range(n):
        anchor = _span(batch["anchor"][i], batch["anchor_start"][i], batch["anchor_end"][i])
        positive = _span(batch["positive"][i], batch["positive_start"][i], batch["positive_end"][i])
        if anchor is None:
            skipped.add("anchor: empty text or span outside it")
        elif positive is None:
            skipped.add("positive: empty text or span outside it")
        else:
            topic = topics[i]
            topic = int(topic) if topic is not None and np.isfinite(topic) else -1
            key = str(keys[i]) if keys[i] is not None else f"{anchor[0][anchor[1]:anchor[2]].lower()}"
            yield (anchor, bool(batch["anchor_mask"][i]), positive, bool(batch["positive_mask"][i]), key, topic)


class PhraseObjective(Objective):
    def __init__(self, config: TrainConfig):
        from contrastext.methods.uctopic.config import PHRASE_VECTORS_PARAM
        from contrastext.methods.uctopic.loss import PhraseContrastiveLoss
        from contrastext.methods.uctopic.mlm import MLMSettings

        super().__init__(config)
        if config.loss.name != "mnr":
            raise ValueError("objective 'phrase' trains with in-batch negatives: set train.loss.name to 'mnr' "
                             "(train.loss.params: temperature, symmetric, gather_across_workers, mlm_weight, "
                             "mlm_probability, mlm_head_lr)")
        params = dict(config.loss.params)
        self.vectors = params.pop(PHRASE_VECTORS_PARAM, None)  # set by the job from its phrase_vectors
        self.mlm, params = MLMSettings.split_loss_params(params)
        self.loss_fn = PhraseContrastiveLoss(**params)
        self.encoder = None
        self._mlm_generator: torch.Generator | None = None

    def build_model(self, model_spec: str, resuming: bool) -> nn.Module:
        from contrastext.methods.uctopic.encoder import PhraseEncoder

        enc = self.config.encoder
        self.encoder = PhraseEncoder.from_pretrained(model_spec, max_length=enc.max_length, device="cpu",
                                                     allow_download=enc.allow_download, vectors=self.vectors)
        self.encoder.train()
        freeze_unused_pooler(self.encoder.transformer)
        if not self.mlm.enabled:
            return self.encoder
        from contrastext.methods.uctopic.mlm import PhraseModelWithMLM
        from contrastext.models.resolve import resolve_model_path

        self._mlm_generator = torch.Generator().manual_seed(self.config.seed)
        model = PhraseModelWithMLM.around(self.encoder, resolve_model_path(model_spec,
                                                                           allow_download=enc.allow_download))
        return model.train()

    def param_groups(self, model: nn.Module) -> list[dict[str, Any]]:
        if not self.mlm.enabled:
            return super().param_groups(model)
        return [{"params": list(model.phrase_encoder.parameters()), "lr": self.config.optimizer.lr},
                {"params": list(model.head.parameters()), "lr": self.mlm.head_lr}]

    def packs_batches(self) -> bool:
        return self.config.no_duplicates

    def batches(self, shard, epoch: int, rank: int, world: int, skipped: SkippedRows) -> Iterator[list[tuple]]:
        config = self.config
        shuffle = config.shuffle_buffer_rows or None

        def rows() -> Iterator[tuple]:
            seed = (config.seed + 7919 * epoch + rank) if shuffle else None
            for batch in shard.iter_batches(batch_size=READ_BATCH_ROWS, batch_format="numpy",
                                            local_shuffle_buffer_size=shuffle, local_shuffle_seed=seed):
                yield from phrase_rows(batch, skipped)

        if config.no_duplicates:
            return iter_no_duplicate_batches(rows(), config.batch_size, key=lambda row: (row[4],))
        return _plain_batches(rows(), config.batch_size)

    def loss(self, model, batch, device, autocast) -> torch.Tensor:
        spans = [row[0] for row in batch] + [row[2] for row in batch]
        masks = [row[1] for row in batch] + [row[3] for row in batch]
        features = self.encoder.tokenize(spans, masks, self.config.encoder.max_length)
        topics = torch.tensor([row[5] for row in batch], dtype=torch.long, device=device)
        if not self.mlm.enabled:
            with autocast:
                vectors = model({k: v.to(device) for k, v in features.items()}).float()
            return self.loss_fn(*vectors.split(len(batch)), topics)
        from contrastext.methods.uctopic.mlm import mask_tokens

        ids, labels = mask_tokens(features["input_ids"], features["attention_mask"], self.encoder.tokenizer,
                                  self.mlm.probability, self._mlm_generator)
        mlm_features = {k: v.to(device) for k, v in {**features, "input_ids": ids, "labels": labels}.items()
                        if k in ("input_ids", "attention_mask", "token_type_ids", "labels")}
        features = {k: v.to(device) for k, v in features.items()}
        with autocast:
            vectors, mlm_loss = model(features, mlm_features)
        return self.loss_fn(*vectors.float().split(len(batch)), topics) + self.mlm.weight * mlm_loss.float()


def _plain_batches(rows: Iterator[tuple], size: int) -> Iterator[list[tuple]]:
    batch: list[tuple] = []
    for row in rows:
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


register_objective("phrase", PhraseObjective)
