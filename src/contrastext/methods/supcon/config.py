"""The ``supcon_classify`` job's config: the labelled data, the variants it trains and compares (each a
``SupConSettings``, as ``SupConClassifier`` takes it) and the train block they share."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import Field, field_validator, model_validator

from contrastext.config import OutputConfig, RayConfig, Settings, TrainConfig
from contrastext.data.paths import DATA_ENV
from contrastext.data.sources import TextSource
from contrastext.methods.supcon.settings import ClassifyLoss, SupConSettings, default_classify_train


def newsgroups_source(path: str) -> TextSource:
    """A 20 Newsgroups JSON-lines file (``id, label, label_id, text``): messages without headers, signatures
    and quotes (scikit-learn's rules), labelled by group name, cut at 20,000 characters."""
    return TextSource(path=path, label_column="label", cleaning="newsgroups", max_chars=20_000)


def _labelled_source(value: Any) -> Any:
    """A source given as a mapping is labelled by its ``label`` column unless it says otherwise."""
    if isinstance(value, str):
        return {"path": value, "label_column": "label"}
    if isinstance(value, dict):
        return {"label_column": "label", **value}
    return value


class LabelledTextData(Settings):
    """The train and test texts (``TextSource``: any file ``load_texts`` reads) and how they are subset."""

    replaced_whole: ClassVar[bool] = True  # the earlier keys (train_file, …) must not meet the default sources

    root: str | None = Field(None, description=f"data folder of relative paths; None: ${DATA_ENV}, else "
                                               "../shared/data")
    train: TextSource = Field(default_factory=lambda: newsgroups_source("20newsgroups/20ng_bydate_train.jsonl.gz"))
    test: TextSource = Field(default_factory=lambda: newsgroups_source("20newsgroups/20ng_bydate_test.jsonl.gz"))
    train_per_class: int | None = Field(None, ge=1, description="seeded class-stratified subset: rows per label")
    test_per_class: int | None = Field(None, ge=1)
    class_caps: dict[str, int] = Field(default_factory=dict,
                                       description="train rows per label for some labels (a long tail)")
    null_groups: list[str] = Field(default_factory=list,
                                   description="labels merged into one null label, which micro-F1 leaves out")
    null_label: str = "other"
    seed: int = 0

    @model_validator(mode="before")
    @classmethod
    def _earlier_keys(cls, data: Any) -> Any:
        """The keys this block had before it held two text sources (``train_file``, ``text_field``, ``remove``,
        …) still read: they become the sources' path, columns and cleaning."""
        earlier = ("train_file", "test_file", "text_field", "label_field", "remove", "max_chars")
        if not isinstance(data, dict) or not any(key in data for key in earlier):
            return data
        if "train" in data or "test" in data:
            raise ValueError(f"give data.train / data.test (text sources) or the keys {list(earlier)}, not both")
        data = dict(data)
        remove = data.pop("remove", ["headers", "footers", "quotes"])
        if remove and sorted(remove) != ["footers", "headers", "quotes"]:
            raise ValueError("data.remove with some parts only is no longer read: a source's cleaning is "
                             "'newsgroups' (headers, footers and quotes removed) or 'none'")
        common = {"text_columns": [data.pop("text_field", "text")], "label_column": data.pop("label_field", "label"),
                  "cleaning": "newsgroups" if remove else "none", "max_chars": data.pop("max_chars", 20_000)}
        data["train"] = {"path": data.pop("train_file", "20newsgroups/20ng_bydate_train.jsonl.gz"), **common}
        data["test"] = {"path": data.pop("test_file", "20newsgroups/20ng_bydate_test.jsonl.gz"), **common}
        return data

    @field_validator("train", "test", mode="before")
    @classmethod
    def _labelled(cls, value: Any) -> Any:
        return _labelled_source(value)

    @model_validator(mode="after")
    def _sources_have_labels(self) -> "LabelledTextData":
        for name, source in (("train", self.train), ("test", self.test)):
            if source.label_column is None:
                raise ValueError(f"data.{name} needs a label_column: a classifier learns from labels")
        return self


class VariantConfig(SupConSettings):
    """One classifier the job trains and compares: how it trains (``SupConSettings``, as ``SupConClassifier``
    takes it), its name and where it starts."""

    name: str = Field(description="folder name of the variant's outputs")
    start_from: str | None = Field(None, description="an earlier variant whose trained model this one starts from")

    @field_validator("name")
    @classmethod
    def _folder_name(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", value):
            raise ValueError(f"variant name {value!r} must be letters, digits, '_', '-' or '.'")
        return value


def _default_variants() -> list[VariantConfig]:
    return [
        VariantConfig(name="focal"),
        VariantConfig(name="focal_ntxent", loss=ClassifyLoss(ntxent_weight=1.0)),
        VariantConfig(name="focal_100ntxent", loss=ClassifyLoss(ntxent_weight=100.0)),
        VariantConfig(name="focal_ntxent_then_head", start_from="focal_ntxent", freeze_encoder=True,
                      reset_head=True),
    ]


class SupconClassifyConfig(Settings):
    """Train and compare classifier variants on a labelled text set (default: 20 Newsgroups)."""

    data: LabelledTextData = Field(default_factory=LabelledTextData)
    variants: list[VariantConfig] = Field(default_factory=_default_variants, min_length=1)
    train: TrainConfig = Field(default_factory=default_classify_train,
                               description="shared by every variant; loss and classifier.* come from the variant")
    eval_batch_size: int = Field(64, ge=1)
    tsne: bool = Field(True, description="a t-SNE plot of the test embeddings per variant")
    tsne_rows: int = Field(2000, ge=10, description="test rows in the t-SNE plot (seeded sample)")
    output: OutputConfig = Field(default_factory=lambda: OutputConfig(name="supcon_classify"))
    ray: RayConfig = Field(default_factory=RayConfig)

    @model_validator(mode="after")
    def _variants_in_order(self) -> "SupconClassifyConfig":
        if self.train.objective != "classify":
            raise ValueError("train.objective must be 'classify' for this job")
        seen: set[str] = set()
        for variant in self.variants:
            if variant.name in seen:
                raise ValueError(f"two variants are named {variant.name!r}")
            if variant.start_from is not None and variant.start_from not in seen:
                raise ValueError(f"variant {variant.name!r} starts from {variant.start_from!r}, "
                                 "which is not an earlier variant")
            seen.add(variant.name)
        return self
