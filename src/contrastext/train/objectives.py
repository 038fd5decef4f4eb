"""What the shared training loop trains: the model, its batches, its loss and what a checkpoint holds.

An objective is chosen by ``TrainConfig.objective``:

* ``embedding`` — a ``TextEncoder`` trained with a pair loss on (anchor, positive) rows or supervised
  NT-Xent on (text, label) rows; each worker reads its own shard of the dataset.
* ``classify`` — a ``TextClassifier`` (encoder + linear head) trained with focal loss, optionally plus
  λ·supervised NT-Xent, on class-balanced batches (k same-label rows per group). The batches are
  planned over the whole dataset, so every worker reads all of it (sorted, so the plan is the same on
  every worker) and ``ClassBalancedBatchSampler`` deals each worker its own disjoint groups.
* ``phrase`` — a ``PhraseEncoder`` (span pooling) trained on pairs of phrase mentions; defined and
  registered by ``contrastext.methods.uctopic.objective``.

A method with its own objective subclasses :class:`Objective` and calls :func:`register_objective` when
its module is imported; this package imports no method package.

The loop calls ``build_model`` (the checkpoint's model folder when resuming), ``param_groups``,
``batches`` and ``loss``; a checkpoint saves the module ``build_model`` returned (``module.save``).
``loss`` gives the batch's loss as sums with their counts (``LossSum``), which the loop averages over
every worker's counts, or as a tensor that is a mean over the batch's rows.
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager
from typing import Any, Iterator, Sequence, Union

import numpy as np
import torch
from torch import nn

from contrastext.config import TrainConfig
from contrastext.losses.reduction import LossSum
from contrastext.train.batches import (
    PAIR_LOSSES,
    READ_BATCH_ROWS,
    SkippedRows,
    column_values,
    epoch_batches,
    label_id,
    valid_text,
)

# a mean over the batch's rows, or sums each averaged over its count summed across workers
BatchLoss = Union[torch.Tensor, Sequence[LossSum]]


def loss_parts(loss: BatchLoss, rows: int) -> list[LossSum]:
    """An objective's loss as sums with counts; a plain tensor is taken as a mean over ``rows`` rows."""
    if isinstance(loss, torch.Tensor):
        return [LossSum(loss * rows, torch.tensor(rows, device=loss.device))]
    return list(loss)


def planned_steps(rows: int, config: TrainConfig) -> int:
    """Optimiser steps for the whole fit when each worker batches its own shard of ``rows``."""
    per_epoch = max(1, math.ceil(rows / (config.batch_size * config.scaling.num_workers)))
    return _capped(per_epoch * config.epochs, config)


#: rows of the dataset the driver packs to plan a fit whose batches hold no repeated key (the rest scale with it)
PLAN_SAMPLE_ROWS = 100_000


def _capped(steps: int, config: TrainConfig) -> int:
    return min(steps, config.max_steps) if config.max_steps else steps


class Objective:
    """Base: subclasses say how a batch of rows becomes a loss on the model they build."""

    #: False: every worker reads the whole dataset and the objective splits it into per-worker batches
    split_dataset: bool = True

    def __init__(self, config: TrainConfig):
        self.config = config

    def packs_batches(self) -> bool:
        """True where ``batches`` keeps a key from repeating within a batch: rows that share one wait for a
        later batch, so repeated keys make more, smaller batches than ``rows / batch_size``."""
        return False

    def planned_steps(self, dataset, rows: int) -> int:
        """Optimiser steps of the whole fit (drives the learning-rate schedule); runs on the driver. Packed
        batches are counted by packing (the first ``PLAN_SAMPLE_ROWS`` of) the rows as a worker would: planned
        from the row count, the schedule would reach zero while a fifth of the batches were still to come."""
        fewest = planned_steps(rows, self.config)  # packing only adds batches (malformed rows aside)
        if not self.packs_batches() or (self.config.max_steps and fewest >= self.config.max_steps):
            return fewest
        seen = min(rows, PLAN_SAMPLE_ROWS)
        sample = dataset.limit(seen) if rows > seen else dataset
        batches = sum(1 for _ in self.batches(sample, 0, 0, 1, SkippedRows()))
        per_epoch = max(1, math.ceil(batches * rows / seen / self.config.scaling.num_workers))
        return _capped(per_epoch * self.config.epochs, self.config)

    def build_model(self, model_spec: str, resuming: bool) -> nn.Module:
        raise NotImplementedError

    def param_groups(self, model: nn.Module) -> list[dict[str, Any]]:
        return [{"params": list(model.parameters()), "lr": self.config.optimizer.lr}]

    def batches(self, shard, epoch: int, rank: int, world: int, skipped: SkippedRows) -> Iterator[list[tuple]]:
        raise NotImplementedError

    def loss(self, model: nn.Module, batch: list[tuple], device: torch.device,
             autocast: AbstractContextManager) -> BatchLoss:
        raise NotImplementedError


def freeze_unused_pooler(transformer: nn.Module) -> None:
    """Our pooling reads token states, so a model's own pooler head gets no gradient; DDP refuses
    parameters that never receive one, and keeping them frozen preserves them unchanged on save."""
    for name, parameter in transformer.named_parameters():
        if name.startswith("pooler."):
            parameter.requires_grad_(False)


class EmbeddingObjective(Objective):
    def __init__(self, config: TrainConfig):
        from contrastext.losses import build_loss

        super().__init__(config)
        self.loss_fn = build_loss(config.loss.name, **config.loss.params)
        self.encoder = None

    def packs_batches(self) -> bool:
        # as ``epoch_batches`` packs them: category pairs repeat categories ("Living people") in many rows
        return self.config.loss.name in PAIR_LOSSES and self.config.no_duplicates

    def build_model(self, model_spec: str, resuming: bool) -> nn.Module:
        self.encoder = self.config.encoder.load(model_spec, device="cpu", backend="torch")
        self.encoder.train()
        freeze_unused_pooler(self.encoder.transformer)
        return self.encoder

    def batches(self, shard, epoch: int, rank: int, world: int, skipped: SkippedRows) -> Iterator[list[tuple]]:
        return epoch_batches(shard, self.config, epoch, rank, skipped)

    def loss(self, model, batch, device, autocast) -> list[LossSum]:
        def embed(texts: list[str]) -> torch.Tensor:
            with autocast:
                features = self.encoder.tokenize(texts, self.config.encoder.max_length)
                return model({k: v.to(device) for k, v in features.items()}).float()

        if self.config.loss.name in PAIR_LOSSES:
            # one forward over anchors and positives together: one padded batch, one DDP forward
            anchors, positives = embed([row[0] for row in batch] + [row[1] for row in batch]).split(len(batch))
            groups = (torch.tensor([row[2] for row in batch], dtype=torch.long, device=device)
                      if self.config.group_column is not None else None)
            if self.config.loss.name == "mnr":
                # rows sharing a positive text (pseudo-pairs of a few labels) must not be each other's negatives
                same_positive = torch.tensor([label_id(row[1]) for row in batch], dtype=torch.long, device=device)
                return [self.loss_fn.sum_and_count(anchors, positives, positive_groups=same_positive, groups=groups)]
            return [self.loss_fn.sum_and_count(anchors, positives, groups=groups)]
        labels = torch.tensor([label for _, label in batch], dtype=torch.long, device=device)
        return [self.loss_fn.sum_and_count(embed([t for t, _ in batch]), labels)]


def classification_rows(batches, text_column: str, label_column: str, num_labels: int,
                        skipped: SkippedRows) -> list[tuple[str, int]]:
    """Well-formed (text, label id) rows of numpy batches; malformed ones are counted in ``skipped``."""
    rows: list[tuple[str, int]] = []
    for batch in batches:
        texts, labels = column_values(batch, (text_column, label_column), "the (text, label id) columns")
        for text, label in zip(texts, labels):
            if not valid_text(text):
                skipped.add(f"empty or non-text {text_column}")
            elif not _is_label_id(label, num_labels):
                skipped.add(f"{label_column} not an integer in [0, {num_labels})")
            else:
                rows.append((str(text), int(label)))
    # Ray Data does not promise an order across workers; sorting makes every worker's plan the same
    rows.sort(key=lambda row: (row[1], row[0]))
    return rows


def _is_label_id(label: Any, num_labels: int) -> bool:
    if isinstance(label, (bool, np.bool_)):
        return False
    if isinstance(label, (float, np.floating)):
        if not np.isfinite(label) or not float(label).is_integer():
            return False
    elif not isinstance(label, (int, np.integer)):
        return False
    return 0 <= int(label) < num_labels


class ClassificationObjective(Objective):
    split_dataset = False

    def __init__(self, config: TrainConfig):
        from contrastext.losses.focal_supcon import FocalSupConLoss

        super().__init__(config)
        if config.classifier.num_labels is None:
            raise ValueError("objective 'classify' needs train.classifier.num_labels")
        params = dict(config.loss.params)
        if config.loss.name == "focal":
            params = {"focal_weight": 1.0, **params, "ntxent_weight": 0.0}
        self.loss_fn = FocalSupConLoss(**params)
        self.classifier = None
        self._rows: list[tuple[str, int]] | None = None
        self._sampler = None

    @property
    def num_labels(self) -> int:
        assert self.config.classifier.num_labels is not None  # checked in __init__
        return self.config.classifier.num_labels

    def _sampler_for(self, labels: list[int], rank: int, world: int):
        from contrastext.train.samplers import ClassBalancedBatchSampler

        head = self.config.classifier
        return ClassBalancedBatchSampler(labels, self.config.batch_size, head.samples_per_class,
                                         seed=self.config.seed, rank=rank, world_size=world,
                                         oversample=head.oversample)

    def planned_steps(self, dataset, rows: int) -> int:
        text, label = self.config.columns
        names = dataset.schema().names
        if text in names and label in names:
            dataset = dataset.select_columns([text, label])
        batches = dataset.iter_batches(batch_size=READ_BATCH_ROWS, batch_format="numpy")
        good = classification_rows(batches, text, label, self.num_labels, SkippedRows())
        if not good:
            raise ValueError("The training dataset has no well-formed (text, label id) rows.")
        per_epoch = len(self._sampler_for([lab for _, lab in good], 0, self.config.scaling.num_workers))
        return _capped(per_epoch * self.config.epochs, self.config)

    def build_model(self, model_spec: str, resuming: bool) -> nn.Module:
        from contrastext.models.classifier import TextClassifier

        enc, head = self.config.encoder, self.config.classifier
        self.classifier = TextClassifier.from_pretrained(
            model_spec, num_labels=head.num_labels, dropout=head.dropout, pooling=enc.pooling,
            normalize=enc.normalize, max_length=enc.max_length, device="cpu",
            allow_download=enc.allow_download, reset_head=head.reset_head and not resuming)
        if head.freeze_encoder:
            self.classifier.freeze_encoder()
        else:
            freeze_unused_pooler(self.classifier.encoder.transformer)
        self.classifier.train()
        return self.classifier

    def param_groups(self, model: nn.Module) -> list[dict[str, Any]]:
        groups = [{"params": list(model.head.parameters()), "lr": self.config.classifier.head_lr}]
        if not self.config.classifier.freeze_encoder:
            groups.insert(0, {"params": list(model.encoder.parameters()), "lr": self.config.optimizer.lr})
        return groups

    def batches(self, shard, epoch: int, rank: int, world: int, skipped: SkippedRows) -> Iterator[list[tuple]]:
        if self._rows is None:
            # every worker reads all rows; only the first counts the malformed ones, so totals stay true
            counter = skipped if rank == 0 else SkippedRows()
            text, label = self.config.columns
            self._rows = classification_rows(
                shard.iter_batches(batch_size=READ_BATCH_ROWS, batch_format="numpy"),
                text, label, self.num_labels, counter)
            if not self._rows:
                raise ValueError("The training dataset has no well-formed (text, label id) rows.")
            self._sampler = self._sampler_for([lab for _, lab in self._rows], rank, world)
        self._sampler.set_epoch(epoch)
        rows = self._rows
        return ([rows[i] for i in indices] for indices in self._sampler)

    def loss(self, model, batch, device, autocast) -> list[LossSum]:
        features = self.classifier.tokenize([t for t, _ in batch], self.config.encoder.max_length)
        labels = torch.tensor([label for _, label in batch], dtype=torch.long, device=device)
        with autocast:
            embeddings, logits = model({k: v.to(device) for k, v in features.items()})
        return self.loss_fn.parts(logits.float(), embeddings.float(), labels)


OBJECTIVES: dict[str, type[Objective]] = {"embedding": EmbeddingObjective, "classify": ClassificationObjective}


def register_objective(name: str, objective: type[Objective]) -> type[Objective]:
    """Make ``objective`` what ``TrainConfig.objective == name`` trains (called by the module defining it)."""
    OBJECTIVES[name] = objective
    return objective


def build_objective(config: TrainConfig) -> Objective:
    objective = OBJECTIVES.get(config.objective)
    if objective is None:
        raise ValueError(f"no objective {config.objective!r} is registered (registered: "
                         f"{', '.join(sorted(OBJECTIVES))}); import the module that defines it first")
    return objective(config)
