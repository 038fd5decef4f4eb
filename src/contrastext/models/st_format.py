"""Reading and writing the sentence-transformers on-disk layout.

We read both the classic module names (``sentence_transformers.models.Pooling``) and the ones newer
sentence-transformers releases write (``sentence_transformers.sentence_transformer.modules.pooling.Pooling``),
and we write the classic names, which every sentence-transformers release loads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Pooling = Literal["mean", "cls", "max"]

_SUPPORTED_MODULES = ("Transformer", "Pooling", "Normalize")


class UnsupportedModelLayoutError(ValueError):
    """The folder holds sentence-transformers modules this encoder cannot reproduce."""


@dataclass(frozen=True)
class STLayout:
    """What a sentence-transformers folder says about pooling, normalisation and length."""

    transformer_dir: Path
    pooling: Pooling
    normalize: bool
    max_seq_length: int | None
    do_lower_case: bool = False


def _module_kind(type_name: str) -> str:
    return type_name.rsplit(".", 1)[-1]


def _read_json(path: Path) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _pooling_from_config(config: dict, where: Path) -> Pooling:
    mode = config.get("pooling_mode")
    if mode is None:  # classic layout: one boolean per mode
        flags = {
            "mean": config.get("pooling_mode_mean_tokens", False),
            "cls": config.get("pooling_mode_cls_token", False),
            "max": config.get("pooling_mode_max_tokens", False),
        }
        unsupported = [k for k in ("pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens",
                                   "pooling_mode_lasttoken") if config.get(k)]
        chosen = [m for m, on in flags.items() if on]
        if unsupported or len(chosen) != 1:
            raise UnsupportedModelLayoutError(
                f"{where}: pooling {config} is not one of mean, cls or max alone."
            )
        return chosen[0]  # type: ignore[return-value]
    if mode in ("mean", "cls", "max"):
        return mode
    raise UnsupportedModelLayoutError(f"{where}: pooling mode {mode!r} is not one of mean, cls or max.")


def read_layout(model_dir: Path) -> STLayout:
    """Describe ``model_dir``; a plain Hugging Face folder (no modules.json) gets mean pooling."""
    modules_file = model_dir / "modules.json"
    if not modules_file.is_file():
        return STLayout(transformer_dir=model_dir, pooling="mean", normalize=False, max_seq_length=None)

    modules = _read_json(modules_file)
    kinds = [_module_kind(m["type"]) for m in modules]
    unknown = [m["type"] for m in modules if _module_kind(m["type"]) not in _SUPPORTED_MODULES]
    if unknown or kinds[:1] != ["Transformer"] or kinds.count("Pooling") != 1:
        raise UnsupportedModelLayoutError(
            f"{model_dir}: modules {kinds} are not supported; expected Transformer, Pooling and an optional "
            f"Normalize (unsupported: {unknown or 'module order'})."
        )
    transformer = model_dir / modules[0].get("path", "")
    pooling_module = modules[kinds.index("Pooling")]
    pooling_dir = model_dir / pooling_module["path"]
    pooling = _pooling_from_config(_read_json(pooling_dir / "config.json"), pooling_dir)

    st_config_file = transformer / "sentence_bert_config.json"
    st_config = _read_json(st_config_file) if st_config_file.is_file() else {}
    return STLayout(
        transformer_dir=transformer,
        pooling=pooling,
        normalize="Normalize" in kinds,
        max_seq_length=st_config.get("max_seq_length"),
        do_lower_case=bool(st_config.get("do_lower_case", False)),
    )


def write_layout(model_dir: Path, *, pooling: Pooling, normalize: bool, max_seq_length: int,
                 embedding_dimension: int, versions: dict[str, str]) -> None:
    """Write the sentence-transformers files beside an already saved HF model and tokenizer."""
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
        (model_dir / "2_Normalize").mkdir(exist_ok=True)
    (model_dir / "1_Pooling").mkdir(exist_ok=True)
    pooling_config = {
        "word_embedding_dimension": embedding_dimension,
        "pooling_mode_cls_token": pooling == "cls",
        "pooling_mode_mean_tokens": pooling == "mean",
        "pooling_mode_max_tokens": pooling == "max",
        "pooling_mode_mean_sqrt_len_tokens": False,
    }
    files = {
        "modules.json": modules,
        "1_Pooling/config.json": pooling_config,
        "sentence_bert_config.json": {"max_seq_length": max_seq_length, "do_lower_case": False},
        "config_sentence_transformers.json": {
            "__version__": versions, "prompts": {}, "default_prompt_name": None, "similarity_fn_name": "cosine",
        },
    }
    for name, content in files.items():
        with open(model_dir / name, "w", encoding="utf-8") as f:
            json.dump(content, f, indent=2)
