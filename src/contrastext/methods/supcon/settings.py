"""Settings of the focal + supervised NT-Xent classifier, shared by ``SupConClassifier`` and the
``supcon_classify`` job: how one classifier trains (``SupConSettings``: the loss, the head's options, epochs
and rates; each job variant is one) and the train block of the ``classify`` objective."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from contrastext.config import ClassifierConfig, EncoderConfig, LossConfig, Settings, TrainConfig


class ClassifyLoss(Settings):
    focal_weight: float = Field(1.0, ge=0)
    ntxent_weight: float = Field(0.0, ge=0, description="λ: weight of supervised NT-Xent on the embeddings")
    gamma: float = Field(2.0, ge=0, description="focal loss focusing parameter (0: cross-entropy)")
    temperature: float = Field(0.1, gt=0, description="NT-Xent temperature")

    @model_validator(mode="after")
    def _something_to_train(self) -> "ClassifyLoss":
        if self.focal_weight == 0 and self.ntxent_weight == 0:
            raise ValueError("focal_weight and ntxent_weight are both 0")
        return self

    def to_loss_config(self) -> LossConfig:
        if self.ntxent_weight == 0:
            return LossConfig(name="focal", params={"gamma": self.gamma, "focal_weight": self.focal_weight})
        return LossConfig(name="focal_supcon", params=self.model_dump())


class SupConSettings(Settings):
    """How one classifier trains: ``SupConClassifier(config=...)`` (or any field, the loss's too, as a
    keyword) and each variant of the ``supcon_classify`` job, so each default is written once."""

    loss: ClassifyLoss = Field(default_factory=ClassifyLoss)
    freeze_encoder: bool = Field(False, description="train the head alone (phase 2 of the two-phase schedule)")
    reset_head: bool = Field(False, description="a new head instead of the one the start model has")
    epochs: int | None = Field(None, ge=1, description="None: train.epochs")
    lr: float | None = Field(None, gt=0, description="None: train.optimizer.lr")
    head_lr: float | None = Field(None, gt=0, description="None: train.classifier.head_lr")

    @model_validator(mode="after")
    def _something_trains(self) -> "SupConSettings":
        if self.freeze_encoder and self.loss.ntxent_weight and self.loss.focal_weight == 0:
            raise ValueError("a frozen encoder with NT-Xent alone trains nothing")
        return self

    @classmethod
    def given(cls, config: "SupConSettings | None", settings: dict[str, Any]) -> "SupConSettings":
        """``config`` (default: the defaults; a job variant gives its settings) with ``settings`` over it; a
        loss field (``ntxent_weight``, ``focal_weight``, ``gamma``, ``temperature``) may be given on its own. A
        keyword that is neither is a TypeError that names them."""
        fields, loss_fields = set(cls.model_fields), set(ClassifyLoss.model_fields)
        cls.refuse_unknown(settings, "SupConClassifier", also=loss_fields)
        data = (config or cls()).model_dump(include=fields)
        data |= {key: value for key, value in settings.items() if key in fields}
        if isinstance(data["loss"], ClassifyLoss):
            data["loss"] = data["loss"].model_dump()
        data["loss"] = {**data["loss"], **{key: value for key, value in settings.items() if key in loss_fields}}
        return cls.model_validate(data)


def default_classify_train() -> TrainConfig:
    """Encoder + linear head, mean pooling, class-balanced batches of 32 (4 rows per class), one epoch."""
    return TrainConfig(objective="classify", loss=LossConfig(name="focal"), columns=("text", "label"),
                       encoder=EncoderConfig(pooling="mean", normalize=False, max_length=128),
                       classifier=ClassifierConfig(samples_per_class=4), batch_size=32, epochs=1,
                       checkpoint_every_steps=None, log_every_steps=5)


def classify_train_config(base: TrainConfig, loss: ClassifyLoss, num_labels: int, model: str | None = None, *,
                          freeze_encoder: bool = False, reset_head: bool = False, epochs: int | None = None,
                          lr: float | None = None, head_lr: float | None = None) -> TrainConfig:
    """``base`` with the loss, the head's options, the start model and, where given, epochs and rates."""
    data = base.model_dump()
    data["columns"] = ("text", "label")  # the rows are built as {text, label id}
    data["loss"] = loss.to_loss_config().model_dump()
    data["classifier"].update(num_labels=num_labels, freeze_encoder=freeze_encoder, reset_head=reset_head)
    if head_lr is not None:
        data["classifier"]["head_lr"] = head_lr
    if model is not None:
        data["encoder"]["model"] = model
    if epochs is not None:
        data["epochs"] = epochs
    if lr is not None:
        data["optimizer"]["lr"] = lr
    return TrainConfig.model_validate(data)
