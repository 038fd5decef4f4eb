"""Where a job's texts come from and how they are read: ``TextSource`` and ``load_texts``.

A source is a file (CSV/TSV, JSON lines or parquet, optionally .gz; a ``.txt``/``.md`` file holds a text a
non-empty line), a folder of such files (each of its ``.txt``/``.md`` files is one text; files of other
types are counted and left out), or a known dataset read by its own reader. Any of them may be a URI. It names its text column(s) (joined with a space, or as sentences, e.g.
AG News's title and description), optionally a title put first as its own sentence, its label column and
the label names of raw label values ("1" → "World"), and its id column. Header-less CSV files give their
column names in ``columns``. Rows without text or with an unknown label are counted by reason and left out,
as are texts shorter than ``min_words`` after ``cleaning``.

The defaults read a file as it is: the ``text`` column, no labels, no cleaning. A job may set other defaults
for its own sources where they are given as mappings (YAML), and says so in its config.
"""

from __future__ import annotations

import csv
import hashlib
import os
import re
from collections import Counter
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Literal, Sequence

import numpy as np
from pydantic import Field, model_validator

from contrastext.config import Settings
from contrastext.data.documents import Cleaning, clean_text, iter_records, open_text
from contrastext.data.paths import resolve_data_path

_ESCAPED_BREAK = re.compile(r"\\n|\\|\s+")
EMPTY_TEXT = "missing or empty text"


class TextSource(Settings):
    replaced_whole = True  # a YAML file's source is read as given, never merged with the default one

    path: str | None = Field(None, description="file or folder (local or URI); relative paths are read under "
                                               "the data folder (None: the dataset's own file, found or fetched)")
    dataset: Literal["vital_articles"] | None = Field(
        None, description="a known dataset read by its own reader (see contrastext.data.vital); None: a CSV, "
                          "JSON lines or parquet file at path")
    columns: list[str] | None = Field(None, description="header-less CSV: the name of each column, in order")
    text_columns: list[str] = Field(["text"], min_length=1, description="joined into the text (see join)")
    join: Literal["space", "sentences"] = Field(
        "space", description="space: parts joined with a space; sentences: each part ends with a full stop "
                             "(\"Title. Description\") so the encoder sees two sentences")
    title_column: str | None = Field(None, description="put before the text as its first sentence, a paragraph "
                                                       "of its own")
    label_column: str | None = Field(None, description="None: no labels (an unlabelled pool)")
    label_names: dict[str, str] | None = Field(None, description="raw label value → label name; None: as written")
    id_column: str | None = Field("id", description="a row without one gets its row number")
    unescape_breaks: bool = Field(False, description="turn backslash-escaped line breaks ('\\n', '\\') into spaces")
    cleaning: Cleaning = Field("none", description="basic: URLs, e-mail addresses and extra spaces removed; "
                                                   "newsgroups: also headers, signatures and quotes")
    min_words: int = Field(1, ge=1, description="texts shorter than this after cleaning are left out")
    max_chars: int | None = Field(None, ge=1, description="cut longer texts after cleaning (an encoder reads its "
                                                          "first tokens only)")
    max_rows: int | None = Field(None, ge=1, description="read only the first rows")
    max_documents: int | None = Field(None, ge=2, description="a seeded random subset of this many texts")

    @model_validator(mode="before")
    @classmethod
    def _one_text_column(cls, data: Any) -> Any:
        """``text_column: x`` (a single column, as document sources used to say) is ``text_columns: [x]``."""
        if isinstance(data, dict) and "text_column" in data:
            if "text_columns" in data:
                raise ValueError("give text_columns (a list) or text_column (one column), not both")
            data = {**data, "text_columns": [data["text_column"]]}
            del data["text_column"]
        return data

    @model_validator(mode="after")
    def _columns_known(self) -> "TextSource":
        if self.path is None and self.dataset is None:
            raise ValueError("a text source needs a path or a dataset")
        if self.columns is not None:
            missing = [c for c in [*self.text_columns, self.label_column] if c and c not in self.columns]
            if missing:
                raise ValueError(f"columns {missing} are not among the declared columns {self.columns}")
        return self


def vital_articles(labelled: bool = True) -> TextSource:
    """Wikipedia's Vital articles: "Title. Lead section", labelled by topic (``Uncategorized`` left out)."""
    from contrastext.data.vital import TOPICS

    return TextSource(dataset="vital_articles", text_columns=["title", "extract"], join="sentences",
                      label_column="topic" if labelled else None,
                      label_names={topic: topic for topic in TOPICS} if labelled else None)


def ag_news_test(path: str = "ag_news/test.csv") -> TextSource:
    """The AG News test set as published: no header; class 1-4, title, description.

    Title and description are read as two sentences ("Title. Description"), the form behind the published
    zero-shot figures of all-MiniLM-L6-v2 on this set (0.647 / 0.684 / 0.728).
    """
    return TextSource(
        path=path, columns=["class", "title", "description"], text_columns=["title", "description"],
        label_column="class", label_names={"1": "World", "2": "Sports", "3": "Business", "4": "Sci/Tech"},
        unescape_breaks=True, join="sentences")


@dataclass
class LabelledTexts:
    texts: list[str]
    labels: list[str] | None  # label names; None for an unlabelled pool
    label_names: list[str]  # every label, in the order of ``label_names`` (or of first appearance)
    skipped: Counter = field(default_factory=Counter)
    ids: list[str] = field(default_factory=list)  # one per text: its id column's value, else its row number

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
                             list(self.label_names), Counter(self.skipped),
                             [self.ids[i] for i in rows] if self.ids else [])

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


def dataset_file(source: TextSource, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The file of a known dataset: under the data folder if there, else found elsewhere or fetched."""
    from contrastext.data.vital import VITAL_FILE, VITAL_FOLDER, find_vital_articles

    if data_dir is not None and (Path(data_dir) / VITAL_FOLDER / VITAL_FILE).is_file():
        return Path(data_dir) / VITAL_FOLDER / VITAL_FILE
    return find_vital_articles()


def locate(source: TextSource, data_dir: str | os.PathLike[str] | None = None, *, what: str = "text source",
           setting: str = "data_dir"):
    """Where a source's texts are: its path under the data folder (see ``resolve_data_path``), or its known
    dataset's file; a clear FileNotFoundError naming ``setting`` when nothing is there."""
    if source.path is None:
        return dataset_file(source, data_dir)
    return resolve_data_path(source.path, data_dir, what=what, setting=setting)


def describe(source: TextSource) -> str:
    """How a text source is named in reports: its path, or its dataset's name."""
    return source.path or str(source.dataset)


TABLE_SUFFIXES = (".jsonl", ".json", ".ndjson", ".csv", ".tsv", ".parquet")
TEXT_SUFFIXES = (".txt", ".md", ".text")


def file_suffix(path: Path | str) -> str:
    """A file's kind: its suffix, lower case, without ``.gz``."""
    return Path(str(path).rstrip("/").rsplit("/", 1)[-1].lower().removesuffix(".gz")).suffix


def _suffix(path: Path) -> str:
    return Path(path.name.lower().removesuffix(".gz")).suffix


# what a record read from a folder or a text file carries beside its columns: its id there, and whether it
# is a whole text file (whose only column is the text: the column check is for table records)
_ID, _TEXT_FILE = "_contrastext_id", "_contrastext_text_file"


def file_records(path: Path, source: TextSource, skipped: Counter) -> Iterator[dict[str, Any]]:
    """The records of one local file or folder as ``source`` reads it (a ``.txt`` file: a record a non-empty
    line; a header-less CSV by ``columns``); malformed ones counted in ``skipped``."""
    if source.dataset == "vital_articles":
        from contrastext.data.vital import iter_vital_records

        yield from iter_vital_records(path, skipped)
    elif path.is_dir() and not _parquet_folder(path):
        yield from _folder_records(path, source, skipped)
    elif _suffix(path) in TEXT_SUFFIXES:
        with open_text(path) as f:
            for number, line in enumerate(f, start=1):
                if line.strip():
                    yield {source.text_columns[0]: line.strip(), _ID: f"{path.name}:{number}", _TEXT_FILE: True}
    elif source.columns is None:
        yield from iter_records(path, skipped)
    else:
        yield from _headerless_csv(path, source.columns, skipped)


def _visible_files(folder: Path) -> list[Path]:
    """A folder's files in name order, without hidden ones and markers such as ``_SUCCESS``."""
    return sorted(p for p in folder.rglob("*") if p.is_file()
                  and not any(part.startswith((".", "_")) for part in p.relative_to(folder).parts))


def _parquet_folder(folder: Path) -> bool:
    """A folder of parquet files only: read as one dataset (partition folders such as ``label=x`` are columns)."""
    files = _visible_files(folder)
    return bool(files) and all(_suffix(p) == ".parquet" for p in files)


def _folder_records(folder: Path, source: TextSource, skipped: Counter) -> Iterator[dict[str, Any]]:
    """Every file of a folder: a table file's records (ids prefixed by the file's path, so two files' ids
    never collide), a text file as one text."""
    for path in _visible_files(folder):
        relative, kind = str(path.relative_to(folder)), _suffix(path)
        if kind in TABLE_SUFFIXES:
            for row, record in enumerate(file_records(path, source, skipped)):
                identifier = record.get(source.id_column) if source.id_column else None
                yield {**record, _ID: f"{relative}:{identifier if identifier is not None else row}"}
        elif kind in TEXT_SUFFIXES:
            with open_text(path) as f:
                yield {source.text_columns[0]: f.read(), _ID: relative, _TEXT_FILE: True}
        else:
            skipped["file of unknown type"] += 1


def _headerless_csv(path: Path, columns: list[str], skipped: Counter) -> Iterator[dict[str, Any]]:
    delimiter = "\t" if _suffix(path) == ".tsv" else ","
    with open_text(path) as f:
        for values in csv.reader(f, delimiter=delimiter):
            if not values:
                continue
            if len(values) != len(columns):
                skipped[f"row with {len(values)} fields, not {len(columns)}"] += 1
                continue
            yield dict(zip(columns, values))


def _local(location: str):
    """A local path for ``location``: itself, or a temporary copy of a URI (a file or a folder)."""
    from contrastext import storage

    if not storage.is_uri(location):
        return nullcontext(Path(location).expanduser())
    return storage.local_copy(location) if storage.is_dir(location) else storage.local_file(location)


def load_texts(source: TextSource, data_dir: str | os.PathLike[str] | None = None,
               seed: int = 0) -> LabelledTexts:
    """The texts (labels, ids) of ``source``; a relative path is under ``data_dir`` when given (see
    :func:`contrastext.data.paths.resolve_data_path`), else under the working directory. ``seed`` draws
    the ``max_documents`` subset."""
    if source.path is None:
        return load_texts(source.model_copy(update={"path": str(dataset_file(source, data_dir))}), seed=seed)
    location = source.path if data_dir is None else resolve_data_path(source.path, data_dir, what="text source")
    from contrastext import storage

    if storage.is_uri(location) and not storage.exists(str(location)):
        raise FileNotFoundError(f"text source {location} does not exist")
    with _local(str(location)) as path:
        if not path.exists():
            raise FileNotFoundError(f"text source {path} does not exist")
        texts = _read(Path(path), source)
    if source.max_documents and source.max_documents < len(texts):
        texts = texts.subset(np.sort(np.random.default_rng(seed).choice(len(texts), source.max_documents,
                                                                          replace=False)).tolist())
    return texts


def record_text(record: dict[str, Any], source: TextSource) -> tuple[str | None, str | None]:
    """The text of one record as ``source`` reads it (columns joined, title first, cleaned, cut): ``(text,
    None)``, or ``(None, reason)`` when the record has no usable text. Labels are not looked at."""
    parts = [record.get(c) for c in source.text_columns]
    text = _join([p.strip() for p in parts if isinstance(p, str) and p.strip()], source.join)
    if source.unescape_breaks:
        text = _ESCAPED_BREAK.sub(" ", text).strip()
    if not text:
        return None, EMPTY_TEXT
    title = record.get(source.title_column) if source.title_column else None
    if isinstance(title, str) and title.strip():
        title = title.strip()
        text = f"{title}{'' if title[-1] in '.!?' else '.'}\n\n{text}"
    if source.cleaning != "none":
        text = clean_text(text, source.cleaning)
    if len(text.split()) < source.min_words:
        return None, f"fewer than {source.min_words} words after cleaning"
    if source.max_chars:
        text = text[: source.max_chars]
    return text, None


def missing_columns(record: dict[str, Any], source: TextSource, *, labels: bool = True) -> list[str]:
    """The columns ``source`` names that a table record lacks (a whole text file's record lacks none)."""
    if record.get(_TEXT_FILE):
        return []
    wanted = [*source.text_columns, source.label_column if labels else None]
    return [c for c in wanted if c and c not in record]


def _read(path: Path, source: TextSource) -> LabelledTexts:
    skipped: Counter = Counter()
    texts: list[str] = []
    ids: list[str] = []
    labels: list[str] | None = [] if source.label_column else None
    checked = False
    for row, record in enumerate(file_records(path, source, skipped)):
        if source.max_rows and len(texts) >= source.max_rows:
            break
        if not checked and not record.get(_TEXT_FILE):
            checked = True
            missing = missing_columns(record, source)
            if missing:
                raise ValueError(f"{path}: column(s) {missing} not found; the records have {sorted(record)}")
        text, reason = record_text(record, source)
        if reason == EMPTY_TEXT:
            skipped[reason] += 1
            continue
        label = None
        if labels is not None:
            label = record.get(source.label_column)
            label = "" if label is None else str(label).strip()
            if not label:
                skipped["missing label"] += 1
                continue
            if source.label_names is not None:
                if label not in source.label_names:
                    skipped[f"label {label!r} not in label_names"] += 1
                    continue
                label = source.label_names[label]
        if text is None:
            skipped[reason] += 1
            continue
        if labels is not None:
            labels.append(label)
        identifier = record.get(_ID) or (record.get(source.id_column) if source.id_column else None)
        ids.append(str(identifier) if identifier is not None else str(row))
        texts.append(text)
    if not texts:
        raise ValueError(f"{path}: no usable texts (skipped: {dict(skipped) or 'none'})")
    if source.label_names is not None:
        names = list(dict.fromkeys(source.label_names.values()))
    else:
        names = list(dict.fromkeys(labels or []))
    return LabelledTexts(texts, labels, names, skipped, ids)
