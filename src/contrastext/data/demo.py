"""Small demo data bundled with the package, so the quick start runs with no downloads."""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

__all__ = ["load_demo_labels", "load_demo_pairs"]

_PACKAGE = "contrastext.resources"


def load_demo_pairs() -> list[dict[str, str]]:
    """~400 ``{"anchor", "positive"}`` pairs of category names that label the same article."""
    text = files(_PACKAGE).joinpath("demo_pairs.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def load_demo_labels() -> dict[str, Any]:
    """Zero-shot check: ``{"labels": [...], "texts": [{"text", "label"}, ...]}``, 10 texts per label."""
    text = files(_PACKAGE).joinpath("demo_labels.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data
