"""Labelled text sets for evaluation (and unlabelled pools for self-training): CSV, JSON lines or parquet.

A set names its text column(s) (joined with a space, e.g. AG News's title and description), its label
column and, optionally, the label names of raw label values ("1" → "World"). Header-less CSV files give
their column names in ``columns``. Rows without text or with an unknown label are counted by reason and
left out.
"""

from __future__ import annotations

import csv
import hashlib
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Literal, Sequence

import numpy as np
from pydantic import Field, model_validator

from contrastext.config import Settings
from contrastext.data.documents import iter_records, open_text
from contrastext.data.paths import resolve_data_path

_ESCAPED_BREAK = re.compile(r"\\n|\\|\s+")


class LabelledTextsConfig(Settings):
    path: str | None = Field(None, description="file; relative paths are read under the data folder (None: the "
                                               "dataset's own file, found or fetched)")
    dataset: Literal["vital_articles"] | None = Field(
        None, description="a known dataset read by its own reader (see contrastext.data.vital); None: a CSV, "
                          "JSON lines or parquet file at path")
    columns: list[str] | None = Field(None, description="header-less CSV: the name of each column, in order")
    text_columns: list[str] = Field(["text"], min_length=1, description="joined into the text (see join)")
    join: Literal["space", "sentences"] = Field(
        "space", description="space: parts joined with a space; sentences: each part ends with a full stop "
                             "(\"Title. Description\") so the encoder sees two sentences")
    label_column: str | None = Field("label", description="None: an unlabelled pool")
    label_names: dict[str, str] | None = Field(None, description="raw label value → label name; None: as written")
    unescape_breaks: bool = Field(False, description="turn backslash-escaped line breaks ('\\n', '\\') into spaces")
    max_rows: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _columns_known(self) -> "LabelledTextsConfig":
        if self.path is None and self.dataset is None:
            raise ValueError("a text set needs a path or a dataset")
        if self.columns is not None:
            missing = [c for c in [*self.text_columns, self.label_column] if c and c not in self.columns]
            if missing:
                raise ValueError(f"columns {missing} are not among the declared columns {self.columns}")
        return self


def vital_articles(labelled: bool = True) -> LabelledTextsConfig:
    """Wikipedia's Vital articles: "Title. Lead section", labelled by topic (``Uncategorized`` left out)."""
    from contrastext.data.vital import TOPICS

    return LabelledTextsConfig(dataset="vital_articles", text_columns=["title", "extract"], join="sentences",
                               label_column="topic" if labelled else None,
                               label_names={topic: topic for topic in TOPICS} if labelled else None)


def ag_news_test(path: str = "ag_news/test.csv") -> LabelledTextsConfig:
    """The AG News test set as published: no header; class 1-4, title, description.

    Title and description are read as two sentences ("Title. Description"), the form behind the published
    zero-shot figures of all-MiniLM-L6-v2 on this set (0.647 / 0.684 / 0.728).
    """
    return LabelledTextsConfig(
        path=path, columns=["class", "title", "description"], text_columns=["title", "description"],
        label_column="class", label_names={"1": "World", "2": "Sports", "3": "Business", "4": "Sci/Tech"},
        unescape_breaks=True, join="sentences")


@dataclass
class LabelledTexts:
    texts: list[str]
    labels: list[str] | None  # label names; None for an unlabelled pool
    label_names: list[str]  # every label, in the order of ``label_names`` (or of first appearance)
    skipped: Counter = field(default_factory=Counter)

    def __len__(self) -> int:
        return len(self.texts)

    def label_ids(self) -> np.ndarray:
        if self.labels is None:
            raise ValueError("This text set has no labels.")
        index = {name: i for i, name in enumerate(self.label_names)}
        return np.array([index[label] for label in self.labels], dtype=np.int64)

    def subset(self, rows: Sequence[int]) -> "LabelledTexts":
        return LabelledTexts([self.texts[i] for i in rows],
                             None if self.labels is None else [self.labels[i] for i in rows],
                             list(self.label_names), Counter(self.skipped))

    def split_halves(self, seed: int) -> tuple["LabelledTexts", "LabelledTexts"]:
        """Two halves by a seeded hash of each text: (first, second), each about half the rows.

        A text's half depends only on the text and the seed, never on which other rows were read, so a
        pool read without labels and an evaluation set read with them split the same way, and repeated
        texts always fall in the same half (nothing leaks from one half into the other).
        """
        first = [i for i, text in enumerate(self.texts) if _hash_half(text, seed) == 0]
        chosen = set(first)
        return self.subset(first), self.subset([i for i in range(len(self.texts)) if i not in chosen])


def _join(parts: list[str], how: str) -> str:
    if how == "sentences":
        parts = [p if p[-1] in ".!?" else f"{p}." for p in parts[:-1]] + parts[-1:]
    return " ".join(parts)


def _hash_half(text: str, seed: int) -> int:
    digest = hashlib.blake2b(f"{seed}:{text}".encode("utf-8"), digest_size=8).digest()
    return digest[0] >> 7


def dataset_file(config: LabelledTextsConfig, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The file of a known dataset: under the data folder if there, else found elsewhere or fetched."""
    from contrastext.data.vital import VITAL_FILE, VITAL_FOLDER, find_vital_articles

    if data_dir is not None and (Path(data_dir) / VITAL_FOLDER / VITAL_FILE).is_file():
        return Path(data_dir) / VITAL_FOLDER / VITAL_FILE
    return find_vital_articles()


def describe(config: LabelledTextsConfig) -> str:
    """How a text set is named in reports: its path, or its dataset's name."""
    return config.path or str(config.dataset)


def _records(path: Path, config: LabelledTextsConfig, skipped: Counter) -> Iterator[dict[str, Any]]:
    if config.dataset == "vital_articles":
        from contrastext.data.vital import iter_vital_records

        yield from iter_vital_records(path, skipped)
        return
    if config.columns is None:
        yield from iter_records(path, skipped)
        return
    delimiter = "\t" if path.name.lower().removesuffix(".gz").endswith(".tsv") else ","
    with open_text(path) as f:
        for values in csv.reader(f, delimiter=delimiter):
            if not values:
                continue
            if len(values) != len(config.columns):
                skipped[f"row with {len(values)} fields, not {len(config.columns)}"] += 1
                continue
            yield dict(zip(config.columns, values))


def load_labelled_texts(config: LabelledTextsConfig,
                        data_dir: str | os.PathLike[str] | None = None) -> LabelledTexts:
    """The texts (and labels) of ``config``; a relative path is under ``data_dir`` when given (see
    :func:`contrastext.data.paths.resolve_data_path`), else under the working directory."""
    from contrastext import storage

    if config.path is None:
        return load_labelled_texts(config.model_copy(update={"path": str(dataset_file(config, data_dir))}))
    location = config.path if data_dir is None else resolve_data_path(config.path, data_dir, what="text set")
    if storage.is_uri(location):  # read from a local copy; the file is driver-sized by design (a dev set)
        with storage.local_file(location) as local:
            return load_labelled_texts(config.model_copy(update={"path": str(local)}))
    path = Path(location).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"text set {path} does not exist")
    skipped: Counter = Counter()
    texts: list[str] = []
    labels: list[str] | None = [] if config.label_column else None
    for record in _records(path, config, skipped):
        if config.max_rows and len(texts) >= config.max_rows:
            break
        missing = [c for c in [*config.text_columns, config.label_column] if c and c not in record]
        if missing:
            raise ValueError(f"{path}: column(s) {missing} not found; the records have {sorted(record)}")
        parts = [record[c] for c in config.text_columns if isinstance(record[c], str) and record[c].strip()]
        text = _join([p.strip() for p in parts], config.join)
        if config.unescape_breaks:
            text = _ESCAPED_BREAK.sub(" ", text).strip()
        if not text:
            skipped["missing or empty text"] += 1
            continue
        if labels is not None:
            raw = record[config.label_column]
            raw = "" if raw is None else str(raw).strip()
            if not raw:
                skipped["missing label"] += 1
                continue
            if config.label_names is not None:
                if raw not in config.label_names:
                    skipped[f"label {raw!r} not in label_names"] += 1
                    continue
                raw = config.label_names[raw]
            labels.append(raw)
        texts.append(text)
    if not texts:
        raise ValueError(f"{path}: no usable rows (skipped: {dict(skipped) or 'none'})")
    if config.label_names is not None:
        names = list(dict.fromkeys(config.label_names.values()))
    else:
        names = list(dict.fromkeys(labels or []))
    return LabelledTexts(texts, labels, names, skipped)
