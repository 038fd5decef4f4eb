"""Typed job configuration: pydantic models, loaded from YAML with ``key.path=value`` overrides."""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from contrastext.models.resolve import DEFAULT_MODEL

if TYPE_CHECKING:
    from contrastext.models.encoder import TextEncoder


class Settings(BaseModel):
    """Base for every config block: unknown keys are errors, so a typo never passes silently.

    ``replaced_whole``: a YAML file that gives this block replaces the default one rather than merging into
    it (a data source: another file's columns and reader must not mix with the default dataset's).
    ``belongs_to``: settings that belong to another one of the block (a loss's ``params`` to its ``name``):
    where a file or ``--set`` changes the owner without giving them, they go back to their own defaults.
    """

    model_config = ConfigDict(extra="forbid", protected_namespaces=())
    replaced_whole: ClassVar[bool] = False
    belongs_to: ClassVar[dict[str, str]] = {}

    @classmethod
    def refuse_unknown(cls, keywords: Iterable[str], owner: str, also: Iterable[str] = ()) -> None:
        """A TypeError naming every setting when ``keywords`` (given to ``owner``, a class that takes this block's
        fields, and ``also``, as keywords) hold one that is neither."""
        known = set(cls.model_fields) | set(also)
        unknown = sorted(set(keywords) - known)
        if unknown:
            raise TypeError(f"{owner} got unknown settings {unknown}; a setting is a field of "
                            f"{cls.__module__}.{cls.__name__}: {sorted(known)}")


BackendName = Literal["torch", "onnx", "onnx-int8", "auto"]
#: tokens read of each text: a number, or ``auto`` (settled from the texts: ``methods.wcsbert.read_length``)
ReadLength = Annotated[int, Field(gt=0)] | Literal["auto"]


def backend_field(description: str) -> Any:
    """The ``backend`` setting of a config (one home: the encoder, Serve and ``predict`` share it)."""
    from contrastext.models.onnx_backend import default_backend

    return Field(default_factory=default_backend, description=description + " (default: $CONTRASTEXT_BACKEND, "
                 "else auto: ONNX int8 on a CPU where its check passed, else torch; torch bf16 on a GPU)")


class EncoderConfig(Settings):
    model: str = Field(DEFAULT_MODEL, description="bundled:minilm, a local folder, or an HF id in the local cache")
    pooling: Literal["mean", "cls", "max"] | None = Field(None, description="None: what the model folder says")
    normalize: bool | None = None
    max_length: int = Field(128, gt=0, description="tokens read of each text at most; a model with fewer "
                            "positions reads what it can")
    allow_download: bool = Field(False, description="let the Hugging Face hub be contacted for a missing model")
    backend: BackendName = backend_field("what encode runs on; training always runs on torch")

    def load(self, model: str | os.PathLike[str] | None = None, *, max_length: int | None = None,
             device: str | None = None, backend: str | None = None) -> "TextEncoder":
        """The ``TextEncoder`` these settings describe (torch is imported only here).

        ``model``: another model to load with the same settings (a trained folder, a URI) instead of
        ``self.model``; ``max_length``: another token limit (e.g. for encoding rather than training); either
        is lowered to what the model has positions for;
        ``device``: None picks the GPU when there is one; ``backend``: another backend than ``self.backend``
        (a model about to be trained takes torch).
        """
        from contrastext.models.encoder import TextEncoder

        return TextEncoder.from_pretrained(self.model if model is None else model, pooling=self.pooling,
                                           normalize=self.normalize, max_length=max_length or self.max_length,
                                           device=device, allow_download=self.allow_download,
                                           backend=backend or self.backend, fit_positions=True)


class OptimizerConfig(Settings):
    lr: float = Field(2e-5, gt=0)
    weight_decay: float = Field(0.01, ge=0)
    warmup_ratio: float = Field(0.1, ge=0, le=1, description="share of the steps over which the rate rises "
                                "linearly from 0 (transformers' schedules: the first step's rate is 0)")
    schedule: Literal["linear", "constant"] = Field(
        "linear", description="after warm-up: linear decay to 0 at the last step, or a constant rate")
    max_grad_norm: float | None = Field(1.0, gt=0, description="None disables gradient clipping")


EMBEDDING_LOSSES = ("mnr", "ntxent", "supcon")
CLASSIFY_LOSSES = ("focal", "focal_supcon")


class LossConfig(Settings):
    name: Literal["mnr", "ntxent", "supcon", "focal", "focal_supcon"] = Field(
        "mnr", description="embedding objective: mnr, ntxent, supcon; classify objective: focal, focal_supcon")
    params: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of the loss class")
    belongs_to: ClassVar[dict[str, str]] = {"params": "name"}  # another loss does not take this one's params


#: ``1`` makes in-process training the default for one-worker CPU fits (``TrainConfig.in_process``)
IN_PROCESS_ENV = "CONTRASTEXT_TRAIN_IN_PROCESS"


class ScalingSettings(Settings):
    num_workers: int = Field(1, ge=1)
    use_gpu: bool = False
    cpus_per_worker: float = Field(1.0, gt=0)


class ClassifierConfig(Settings):
    """The classify objective: a linear head on the pooled embedding, class-balanced batches."""

    num_labels: int | None = Field(None, ge=2, description="labels are ints in [0, num_labels); required to train")
    dropout: float = Field(0.1, ge=0, lt=1, description="dropout before the linear head")
    head_lr: float = Field(1e-3, gt=0, description="learning rate of the head (a new head needs more than the encoder)")
    freeze_encoder: bool = Field(False, description="train the head alone on a fixed encoder")
    reset_head: bool = Field(False, description="start from a new head even if the model folder has one")
    samples_per_class: int = Field(4, ge=1, description="k same-label rows per group; batch_size must be a multiple")
    oversample: bool = Field(False, description="top short groups up to k rows by repeating rows of their class")


class TrainConfig(Settings):
    objective: Literal["embedding", "classify", "phrase"] = Field(
        "embedding", description="embedding: pair or supcon loss on the encoder; classify: encoder + linear head; "
                                 "phrase: span-pooled phrase pairs (contrastext.methods.uctopic)")
    classifier: ClassifierConfig = Field(default_factory=ClassifierConfig)
    encoder: EncoderConfig = Field(default_factory=EncoderConfig)
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig)
    loss: LossConfig = Field(default_factory=LossConfig)
    scaling: ScalingSettings = Field(default_factory=ScalingSettings)
    epochs: int = Field(1, ge=1)
    batch_size: int = Field(32, ge=2, description="rows per worker per step")
    max_steps: int | None = Field(None, ge=1, description="stop after this many optimiser steps")
    columns: tuple[str, str] = Field(("anchor", "positive"),
                                     description="(anchor, positive) for pair losses, (text, label) for supcon")
    group_column: str | None = Field(
        None, description="ntxent or mnr: rows with the same integer in this column (e.g. a cluster id, a "
                          "pseudo-label) are not each other's negatives; a negative or missing value is no group")
    no_duplicates: bool = Field(True, description="pair losses: never put the same string twice in a batch")
    shuffle_buffer_rows: int = Field(10_000, ge=0, description="per-worker shuffle buffer, reseeded every epoch")
    # left out of a dump at its default, so done-markers written before it existed still match
    preserve_order: bool = Field(
        True, exclude_if=lambda value: value,
        description="hand the workers the training rows in the dataset's block order, so that a seed gives the "
                    "same model run to run (Ray Data otherwise passes blocks on as they finish: a dataset of several "
                    "files came in another order each run); several workers are dealt the blocks in order, "
                    "without regard to the node they are on; false: no worker waits for a slow block, and blocks "
                    "go to workers on their node")
    checkpoint_every_steps: int | None = Field(500, ge=1, description="None: only at the end of each epoch")
    keep_checkpoints: int = Field(2, ge=1)
    # left out of a dump while unset, so done-markers written before it existed still match (and no marker
    # compares it: contrastext.stages.RUN_ONLY_SETTINGS)
    in_process: bool | None = Field(
        None, exclude_if=lambda value: value is None,
        description="train in the calling process (Ray Train's local mode: one CPU worker, no retries on failure, "
                    "CPUs not reserved from Ray), saving the ~8 s a worker group takes to start on every fit; "
                    f"None: on when ${IN_PROCESS_ENV}=1 in the calling process and the fit is one CPU worker with "
                    "max_failures 0")
    eval_every_steps: int | None = Field(None, ge=1)
    log_every_steps: int = Field(10, ge=1)
    bf16: bool = Field(True, description="bf16 autocast on GPU, and on a CPU with native bf16 (AVX512-BF16, AMX): "
                                         "1.8× the steps/s of float32 on a 2-core Xeon; false: float32 everywhere")
    seed: int = 42
    max_failures: int = Field(0, ge=0, description="worker failures Ray Train recovers from checkpoint")

    @model_validator(mode="after")
    def _objective_fits_loss(self) -> "TrainConfig":
        allowed = CLASSIFY_LOSSES if self.objective == "classify" else EMBEDDING_LOSSES
        if self.loss.name not in allowed:
            raise ValueError(f"loss {self.loss.name!r} does not suit objective {self.objective!r}; "
                             f"use one of {', '.join(allowed)}")
        if self.group_column is not None and (self.objective != "embedding" or self.loss.name not in ("ntxent", "mnr")):
            raise ValueError("group_column needs objective 'embedding' with loss 'ntxent' or 'mnr' (their negatives "
                             f"are masked by group); got {self.objective!r} with {self.loss.name!r}")
        if self.objective == "classify":
            if self.batch_size % self.classifier.samples_per_class:
                raise ValueError(f"batch_size ({self.batch_size}) must be a multiple of "
                                 f"classifier.samples_per_class ({self.classifier.samples_per_class})")
        if self.in_process and (self.scaling.num_workers != 1 or self.scaling.use_gpu or self.max_failures):
            raise ValueError("in_process trains on one CPU worker in the calling process, without retries: it "
                             "needs scaling.num_workers=1, scaling.use_gpu=false and max_failures=0 (got "
                             f"{self.scaling.num_workers}, {self.scaling.use_gpu}, {self.max_failures})")
        return self

    def trains_in_process(self) -> bool:
        """``in_process`` as set, else ``$CONTRASTEXT_TRAIN_IN_PROCESS=1`` for a one-worker CPU fit without
        retries."""
        if self.in_process is not None:
            return self.in_process
        return (os.environ.get(IN_PROCESS_ENV, "") == "1" and self.scaling.num_workers == 1
                and not self.scaling.use_gpu and not self.max_failures)


class OutputConfig(Settings):
    storage_path: str = Field("runs", description="local folder or pyarrow URI (s3://…) for checkpoints and results")
    name: str = Field("fit", description="run name; running again with the same name resumes it")

    def storage_uri(self) -> str:
        """The storage path as Ray Train needs it: a URI as given, a local folder made absolute."""
        if "://" in self.storage_path:
            return self.storage_path.rstrip("/")
        return str(Path(self.storage_path).expanduser().resolve())

    def run_dir(self) -> str:
        return f"{self.storage_uri()}/{self.name}"


class RayConfig(Settings):
    address: str | None = Field(None, description="None: RAY_ADDRESS if set, else a new local Ray")
    num_cpus: int | None = Field(None, ge=1, description="local Ray only; None: see contrastext.runtime")


class FitJobConfig(Settings):
    """The quick-start contrastive fit: pairs in, a trained encoder out."""

    pairs: str | None = Field(None, description="parquet/jsonl/csv with the two text columns; None: embedded demo")
    max_rows: int | None = Field(None, ge=1)
    eval_fraction: float = Field(0.1, ge=0, lt=1, description="held-out pairs for retrieval accuracy")
    train: TrainConfig = Field(default_factory=lambda: TrainConfig(epochs=1, batch_size=16,
                                                                  checkpoint_every_steps=None))
    output: OutputConfig = Field(default_factory=lambda: OutputConfig(name="quickstart"))
    ray: RayConfig = Field(default_factory=RayConfig)


ConfigT = TypeVar("ConfigT", bound=BaseModel)


class _YamlLoader(yaml.SafeLoader):
    """SafeLoader that also reads ``1e-4`` as a float (YAML 1.2), not a string as PyYAML's 1.1 rules do.

    Typed fields would coerce the string anyway, but free-form ones (``train.loss.params``) would not.
    """


_YamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _yaml_load(stream: Any) -> Any:
    return yaml.load(stream, Loader=_YamlLoader)  # noqa: S506 -- a SafeLoader subclass


def parse_override(item: str) -> tuple[list[str], Any]:
    """``a.b=3`` → (['a', 'b'], 3); the value is read as YAML so numbers, booleans and lists work."""
    if "=" not in item:
        raise ValueError(f"Override {item!r} is not of the form key.path=value.")
    key, raw = item.split("=", 1)
    if not key.strip():
        raise ValueError(f"Override {item!r} has an empty key.")
    return key.strip().split("."), _yaml_load(raw) if raw.strip() else ""


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    for item in overrides:
        path, value = parse_override(item)
        node = data
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ValueError(f"Override {item!r}: {part!r} is a value, not a section.")
            node = child
        node[path[-1]] = value
    return data


def _section_model(annotation: Any) -> type[BaseModel] | None:
    """The settings class a field holds, when it holds exactly one (``X`` or ``X | None``) that a file's
    section merges into; else None."""
    model = _settings_class(annotation)
    return None if model is None or getattr(model, "replaced_whole", False) else model


def merge_into_defaults(model: type[BaseModel], defaults: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """``given`` (a YAML file's settings) over ``defaults``, section by section, as ``--set`` does: a section
    the file names keeps the job's defaults for the settings it leaves out (``output: {storage_path: ...}``
    keeps the job's ``output.name``). A free mapping (aliases, loss parameters), a data source
    (``Settings.replaced_whole``) or a section that may take several kinds is replaced whole, since merging
    would mix two settings' keys."""
    merged = dict(defaults)
    for key, value in given.items():
        field = model.model_fields.get(key)
        section = _section_model(field.annotation) if field is not None else None
        if section is not None and isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_into_defaults(section, merged[key], value)
        else:
            merged[key] = value
    _reset_what_belongs_to_changed(model, defaults, merged, given=set(given))
    return merged


def _reset_what_belongs_to_changed(model: type[BaseModel], before: dict[str, Any], after: dict[str, Any],
                                   given: set[str]) -> list[str]:
    """Settings of ``model`` that belong to one whose value changed, and were not given, back to their
    defaults; returns their names."""
    reset = []
    for setting, owner in getattr(model, "belongs_to", {}).items():
        if setting not in given and owner in before and after.get(owner) != before[owner]:
            default = model.model_fields[setting].get_default(call_default_factory=True)
            after[setting] = default.model_dump(mode="python") if isinstance(default, BaseModel) else default
            reset.append(setting)
    return reset


def _section_at(model: type[BaseModel], path: list[str]) -> type[BaseModel] | None:
    """The settings class found by following ``path`` from ``model`` (None where it leaves the settings)."""
    for part in path:
        field = model.model_fields.get(part)
        found = _settings_class(field.annotation) if field is not None else None
        if found is None:
            return None
        model = found
    return model


def _settings_class(annotation: Any) -> type[BaseModel] | None:
    """The settings class of a field that holds exactly one (``X`` or ``X | None``); else None."""
    import types
    import typing

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        models = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _settings_class(models[0]) if len(models) == 1 else None
    return None


def _apply_model_overrides(model: type[BaseModel], data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """:func:`apply_overrides`; a setting that belongs to one an override changed starts again from its
    default, then takes the overrides that address it (``--set loss.name=mnr --set loss.params.scale=20``)."""
    before = copy.deepcopy(data)
    data = apply_overrides(data, overrides)
    addressed = [(item, *parse_override(item)) for item in overrides]
    for section_path in {tuple(path[:-1]) for _, path, _ in addressed}:
        section = _section_at(model, list(section_path))
        old, new = _node(before, section_path), _node(data, section_path)
        if section is None or not isinstance(old, dict) or not isinstance(new, dict):
            continue
        # a mapping given whole at the section or above it that holds the setting gives it as it stands
        given = {setting for setting in section.belongs_to for _, path, value in addressed
                 if tuple(path) == section_path[:len(path)]
                 and _holds(value, (*section_path[len(path):], setting))}
        for setting in _reset_what_belongs_to_changed(section, old, new, given=given):
            data = apply_overrides(data, [item for item, path, _ in addressed
                                          if tuple(path[:len(section_path) + 1]) == (*section_path, setting)])
    return data


def _node(data: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        data = data.get(part) if isinstance(data, dict) else None
    return data


def _holds(value: Any, path: tuple[str, ...]) -> bool:
    """Whether a mapping given whole holds a setting at ``path`` below it."""
    parent = _node(value, path[:-1])
    return isinstance(parent, dict) and path[-1] in parent


def _defaults(model: type[BaseModel]) -> dict[str, Any]:
    """Every setting of ``model`` that has a default, as plain data."""
    out = {}
    for name, field in model.model_fields.items():
        if not field.is_required():
            value = field.get_default(call_default_factory=True)
            out[name] = value.model_dump(mode="python") if isinstance(value, BaseModel) else value
    return out


def load_config(model: type[ConfigT], path: str | os.PathLike[str] | None = None,
                overrides: list[str] | None = None) -> ConfigT:
    """Build ``model`` from an optional YAML file, then ``overrides``; pydantic reports what is wrong."""
    data: dict[str, Any] = {}
    if path is not None:
        with open(path, encoding="utf-8") as f:
            loaded = _yaml_load(f) or {}
        if not isinstance(loaded, dict):
            raise ValueError(f"{path}: the top level must be a mapping, not {type(loaded).__name__}.")
        data = merge_into_defaults(model, _defaults(model), loaded)
    if overrides:
        # overrides apply over the model's defaults, so nested defaults factories are honoured
        try:
            base = model.model_validate(data).model_dump(mode="python")
        except ValidationError:  # required settings the overrides may give: the defaults of the others
            base = {**_defaults(model), **data}
        data = _apply_model_overrides(model, base, overrides)
    return model.model_validate(data)


def dump_config(config: BaseModel) -> str:
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
