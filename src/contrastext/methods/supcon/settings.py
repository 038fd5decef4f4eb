"""Settings of the focal + supervised NT-Xent classifier, shared by ``SupConClassifier`` and the
``supcon_classify`` job: the loss weights and the train block of the ``classify`` objective."""

from __future__ import annotations

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
