"""Documents for clustering: reading records, cleaning, sentence splitting and the two positive-pair builders.

Shuffle & Divide pairs: each document's units (its words, as in the original method, or its sentences)
are shuffled anew every epoch and cut in half; the two halves are a positive pair. TF-IDF pairs: each
document's positive is the other document with the highest TF-IDF cosine similarity.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Literal, Sequence

import numpy as np


Cleaning = Literal["none", "basic", "newsgroups"]
ShuffleUnit = Literal["word", "sentence"]

_URL = re.compile(r"(?:https?://|ftp://|www\.)\S+", re.IGNORECASE)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_SPACES = re.compile(r"[ \t\f\v]+")
_BLANK_LINES = re.compile(r"\n\s*\n+")


# ---------------------------------------------------------------- loading

def open_text(path: Path) -> io.TextIOBase:
    """A local text file (``.gz`` decompressed) for reading as UTF-8, undecodable bytes replaced."""
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace", newline="")


def _format_of(path: Path) -> str:
    name = path.name.lower().removesuffix(".gz")
    if path.is_dir() or name.endswith(".parquet"):
        return "parquet"
    if name.endswith((".jsonl", ".json", ".ndjson")):
        return "jsonl"
    if name.endswith((".csv", ".tsv")):
        return "csv"
    raise ValueError(f"{path}: unknown document format (expected .jsonl, .json, .csv, .tsv or .parquet, "
                     f"optionally .gz)")


def iter_records(path: Path, skipped: Counter) -> Iterator[dict[str, Any]]:
    """The records of a JSON lines / CSV / TSV / parquet file (optionally .gz); bad ones counted in ``skipped``."""
    kind = _format_of(path)
    if kind == "jsonl":
        with open_text(path) as f:
            for line in f:
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    skipped["malformed JSON line"] += 1
                    continue
                if not isinstance(record, dict):
                    skipped["JSON line is not an object"] += 1
                    continue
                yield record
    elif kind == "csv":
        with open_text(path) as f:
            delimiter = "\t" if path.name.lower().removesuffix(".gz").endswith(".tsv") else ","
            reader = csv.DictReader(f, delimiter=delimiter)
            for record in reader:
                if None in record or any(v is None for v in record.values()):
                    skipped["CSV row with the wrong number of fields"] += 1
                    continue
                yield record
    else:
        import pyarrow.parquet as pq

        for batch in pq.ParquetDataset(str(path)).read().to_batches():
            yield from batch.to_pylist()


# ---------------------------------------------------------------- cleaning

def strip_newsgroup_parts(text: str) -> str:
    """Remove a Usenet message's headers, signature block and quoted replies (scikit-learn's rules)."""
    from sklearn.datasets._twenty_newsgroups import (
        strip_newsgroup_footer,
        strip_newsgroup_header,
        strip_newsgroup_quoting,
    )

    return strip_newsgroup_footer(strip_newsgroup_quoting(strip_newsgroup_header(text)))


def remove_urls_and_emails(text: str) -> str:
    return _EMAIL.sub(" ", _URL.sub(" ", text))


def normalize_whitespace(text: str) -> str:
    """Runs of spaces collapsed, paragraph breaks kept (they help the sentence splitter)."""
    text = _BLANK_LINES.sub("\n\n", text.replace("\r\n", "\n").replace("\r", "\n"))
    return "\n".join(_SPACES.sub(" ", line).strip() for line in text.split("\n")).strip()


def clean_text(text: str, cleaning: Cleaning = "basic") -> str:
    if cleaning == "none":
        return text
    if cleaning == "newsgroups":
        text = strip_newsgroup_parts(text)
    return normalize_whitespace(remove_urls_and_emails(text))


# ---------------------------------------------------------------- sentences

class SentenceSplitter:
    """Rule-based sentence boundaries: spaCy's tokenizer (abbreviation exceptions) + its ``sentencizer``.

    No statistical model is loaded, so nothing is downloaded; blank lines also end a sentence, because
    list items, headings and signatures in posts often lack final punctuation.
    """

    def __init__(self, batch_size: int = 256) -> None:
        import spacy

        self._nlp = spacy.blank("en")
        self._nlp.add_pipe("sentencizer")
        self._nlp.max_length = 10_000_000
        self.batch_size = batch_size

    def split(self, text: str) -> list[str]:
        return self.split_many([text])[0]

    def split_many(self, texts: Sequence[str]) -> list[list[str]]:
        paragraphs: list[str] = []
        owner: list[int] = []
        for i, text in enumerate(texts):
            for paragraph in _BLANK_LINES.split(text):
                if paragraph.strip():
                    paragraphs.append(paragraph)
                    owner.append(i)
        out: list[list[str]] = [[] for _ in texts]
        for i, doc in zip(owner, self._nlp.pipe(paragraphs, batch_size=self.batch_size)):
            for sentence in doc.sents:
                cleaned = " ".join(sentence.text.split())
                if cleaned:
                    out[i].append(cleaned)
        return out


# ---------------------------------------------------------------- Shuffle & Divide pairs

def split_words(texts: Sequence[str]) -> list[list[str]]:
    """Whitespace-separated words of each text (punctuation stays attached, as the tokenizer sees it)."""
    return [text.split() for text in texts]


def split_units(texts: Sequence[str], unit: ShuffleUnit) -> list[list[str]]:
    """The units Shuffle & Divide shuffles: words, or sentences from ``SentenceSplitter``."""
    if unit == "word":
        return split_words(texts)
    if unit == "sentence":
        return SentenceSplitter().split_many(texts)
    raise ValueError(f"unknown shuffle unit {unit!r}; expected 'word' or 'sentence'")


def shuffle_divide(units: Sequence[str], rng: np.random.Generator) -> tuple[str, str]:
    """Shuffle the units (words or sentences), cut in half (the first half is the shorter one for odd counts).

    Shuffling before cutting makes each half a random sample of the whole document, so even a half the
    encoder truncates still speaks of all of it, not only of its opening.
    """
    order = rng.permutation(len(units))
    half = len(units) // 2
    return (" ".join(units[i] for i in order[:half]), " ".join(units[i] for i in order[half:]))


def _pair(anchor: str, positive: str, i: int, ids: Sequence[str] | None,
          groups: Sequence[int] | None) -> dict[str, Any]:
    pair: dict[str, Any] = {"anchor": anchor, "positive": positive, "id": ids[i] if ids is not None else str(i)}
    if groups is not None:
        pair["group"] = int(groups[i])
    return pair


def _check_groups(groups: Sequence[int] | None, n: int) -> None:
    if groups is not None and len(groups) != n:
        raise ValueError(f"groups has {len(groups)} entries for {n} documents: give one per document")


def shuffle_divide_pairs(units: Sequence[Sequence[str]], *, epoch: int, seed: int = 0, min_units: int = 4,
                         ids: Sequence[str] | None = None,
                         groups: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """One epoch's positive pairs: ``{anchor, positive, id}`` for every document with ≥ ``min_units`` units.

    ``units`` holds each document's words or sentences. Each document draws from its own generator seeded
    by (seed + epoch, document index), so an epoch's pairs are reproducible and independent of how the
    work is partitioned. ``groups`` (one int per document, e.g. its cluster) adds a ``group`` to each pair.
    """
    if min_units < 2:
        raise ValueError("min_units must be at least 2 so both halves are non-empty")
    _check_groups(groups, len(units))
    pairs = []
    for i, doc in enumerate(units):
        if len(doc) < min_units:
            continue
        anchor, positive = shuffle_divide(doc, np.random.default_rng([seed + epoch, i]))
        pairs.append(_pair(anchor, positive, i, ids, groups))
    return pairs


# ---------------------------------------------------------------- TF-IDF pairs

@dataclass
class TfidfNeighbours:
    neighbour: np.ndarray  # (n,) index of each document's most similar other document
    similarity: np.ndarray  # (n,) its cosine similarity
    label_agreement: float | None  # share of pairs whose two documents share a label


def tfidf_matrix(texts: Sequence[str], *, max_features: int | None = 100_000, min_df: int = 2):
    """Sparse (CSR) TF-IDF rows of the texts, L2-normalised (a dot product is a cosine); English stop words out."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer(sublinear_tf=True, stop_words="english", max_features=max_features,
                                 min_df=min_df if len(texts) >= 10 * min_df else 1, dtype=np.float32)
    return vectorizer.fit_transform(texts).tocsr()


def tfidf_neighbours(texts: Sequence[str], *, labels: Sequence[str] | None = None, chunk_rows: int = 1024,
                     max_features: int | None = 100_000, min_df: int = 2) -> TfidfNeighbours:
    """Each document's nearest other document by TF-IDF cosine, computed ``chunk_rows`` rows at a time.

    Only a chunk × n block of similarities exists at once, never the n × n matrix.
    """
    n = len(texts)
    if n < 2:
        raise ValueError("TF-IDF neighbours need at least two documents")
    matrix = tfidf_matrix(texts, max_features=max_features, min_df=min_df)
    transposed = matrix.T.tocsc()
    neighbour = np.empty(n, dtype=np.int64)
    similarity = np.empty(n, dtype=np.float32)
    for start in range(0, n, chunk_rows):
        stop = min(n, start + chunk_rows)
        block = (matrix[start:stop] @ transposed).toarray()
        block[np.arange(stop - start), np.arange(start, stop)] = -np.inf  # never one's own neighbour
        neighbour[start:stop] = block.argmax(axis=1)
        similarity[start:stop] = block[np.arange(stop - start), neighbour[start:stop]]
    agreement = None
    if labels is not None:
        labels_array = np.asarray(labels)
        agreement = float(np.mean(labels_array == labels_array[neighbour]))
    return TfidfNeighbours(neighbour=neighbour, similarity=similarity, label_agreement=agreement)


def tfidf_pairs(texts: Sequence[str], neighbours: TfidfNeighbours, *, ids: Sequence[str] | None = None,
                groups: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """``{anchor, positive, id}`` for each document and its TF-IDF neighbour (``group``: the anchor's)."""
    _check_groups(groups, len(texts))
    return [_pair(texts[i], texts[j], i, ids, groups) for i, j in enumerate(neighbours.neighbour.tolist())]
