"""Phrase mentions of any text, for UCTopic's pretraining where there are no Wikipedia links.

UCTopic pretrains on two contexts of the same phrase. Without links, a phrase is one of:

- a **named span**: a run of capitalised words inside a sentence ("Manchester United", "Bank of England"),
  not a single capitalised word that opens the sentence (that is usually an ordinary word);
- an **NPMI phrase**: a 2–3-word n-gram whose words occur together more than chance over the collection
  (the n-gram extractor of :mod:`contrastext.methods.uctopic.candidates`, fitted on a bounded sample of sentences).

Each mention's key is its lowercased text; the pretraining pairs two mentions of one key in different
sentences (:func:`contrastext.methods.uctopic.phrases.mention_pair_dataset`), so only repeated phrases count. No
label is read.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from contrastext.methods.uctopic.phrases import sentence_splitter

if TYPE_CHECKING:
    import pyarrow as pa
    import ray.data

    from contrastext.data.sources import TextSource

_WORD = re.compile(r"[^\W_][\w'’&.\-]*[^\W_]|[^\W_]")
#: lowercase words that may sit inside a name ("Bank of England", "Leonardo da Vinci")
_NAME_CONNECTORS = frozenset({"of", "de", "da", "del", "van", "von", "der", "la", "le", "du"})
_MIN_NAME_CHARS = 2


@functools.lru_cache(maxsize=1)
def _stop_words() -> frozenset[str]:
    from contrastext.methods.uctopic.candidates import stop_words

    return stop_words()


def _capitalised(word: str) -> bool:
    return word[0].isupper()


def named_spans(sentence: str) -> list[tuple[int, int]]:
    """Runs of capitalised words (connectors allowed inside), except a lone capitalised first word."""
    words = [(m.start(), m.end(), m.group(0)) for m in _WORD.finditer(sentence)]
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(words):
        if not _capitalised(words[i][2]) or (i == 0 and not _name_follows(sentence, words)):
            i += 1  # a lowercase word, or a capitalised opener alone ("Fans of Manchester United" → not "Fans")
            continue
        j = i
        while True:  # extend over "word", or "connector word" where the word after the connector is capitalised
            nxt = j + 1
            if nxt < len(words) and _adjacent(sentence, words[j], words[nxt]) and _capitalised(words[nxt][2]):
                j = nxt
                continue
            if (nxt + 1 < len(words) and words[nxt][2].lower() in _NAME_CONNECTORS and not _capitalised(words[nxt][2])
                    and _adjacent(sentence, words[j], words[nxt]) and _adjacent(sentence, words[nxt], words[nxt + 1])
                    and _capitalised(words[nxt + 1][2])):
                j = nxt + 1
                continue
            break
        first = i
        while first < j and words[first][2].lower() in _stop_words():  # "The Bank of England" → "Bank of England"
            first += 1
        start, end = words[first][0], words[j][1]
        if (end - start >= _MIN_NAME_CHARS and not sentence[start:end].isdigit()
                and words[first][2].lower() not in _stop_words()):
            spans.append((start, end))
        i = j + 1
    return spans


def _name_follows(sentence: str, words: list[tuple[int, int, str]]) -> bool:
    """Whether the sentence's first word runs straight into a capitalised second word ("Manchester United")."""
    return len(words) > 1 and _adjacent(sentence, words[0], words[1]) and _capitalised(words[1][2])


def _adjacent(sentence: str, left: tuple[int, int, str], right: tuple[int, int, str]) -> bool:
    """Only spaces between two words (a comma or a full stop ends a name)."""
    between = sentence[left[1]:right[0]]
    return bool(between) and between.isspace()


def sentence_mentions(sentence: str, vocabulary: frozenset[tuple[str, ...]] | None,
                      max_n: int = 3) -> list[tuple[int, int]]:
    """The named spans of a sentence, then its NPMI phrases (multi-word entries of ``vocabulary``) that do not
    overlap one, longest first."""
    from contrastext.methods.uctopic.candidates import ngrams

    spans = named_spans(sentence)
    if vocabulary:
        taken = [(s, e) for s, e in spans]
        for start, end, gram in sorted(ngrams(sentence, max_n), key=lambda m: (m[0], -(m[1] - m[0]))):
            if len(gram) < 2 or gram not in vocabulary:
                continue
            if any(start < e and s < end for s, e in taken):
                continue
            taken.append((start, end))
            spans.append((start, end))
    return sorted(spans)


def mention_key(text: str) -> str:
    return " ".join(text.lower().split())


def document_mentions(texts: Sequence[str], vocabulary: frozenset[tuple[str, ...]] | None, *,
                      min_sentence_words: int = 4) -> Iterator[tuple[str, int, int, str]]:
    """(sentence, start, end, key) of every mention in the documents' sentences of at least
    ``min_sentence_words`` words."""
    for sentences in sentence_splitter().split_many(list(texts)):
        for sentence in sentences:
            if len(sentence.text.split()) < min_sentence_words:
                continue
            for start, end in sentence_mentions(sentence.text, vocabulary):
                yield sentence.text, start, end, mention_key(sentence.text[start:end])


def mentions_of_batch(batch: pa.Table, vocabulary: list[list[str]], min_sentence_words: int) -> pa.Table:
    """Ray Data: a batch of documents (``text``) → its mention rows (``sentence``, ``start``, ``end``, ``key``)."""
    import pyarrow as pa

    from contrastext.methods.uctopic.phrases import mention_schema

    grams = _vocabulary(tuple(tuple(g) for g in vocabulary))
    rows = list(document_mentions([t for t in batch.column("text").to_pylist() if t], grams,
                                  min_sentence_words=min_sentence_words))
    columns = list(zip(*rows)) if rows else [[], [], [], []]
    return pa.table([list(c) for c in columns], schema=mention_schema())


@functools.lru_cache(maxsize=4)
def _vocabulary(grams: tuple[tuple[str, ...], ...]) -> frozenset[tuple[str, ...]]:
    return frozenset(grams)


def fit_phrase_vocabulary(texts: Sequence[str], *, max_vocabulary: int = 5000, min_count: int = 3,
                          min_npmi: float = 0.3) -> list[list[str]]:
    """The multi-word NPMI phrases of ``texts`` (a bounded sample of the collection), by count × (1 + NPMI)."""
    from contrastext.methods.uctopic.candidates import NgramExtractor, NgramSettings

    sentences = [s.text for spans in sentence_splitter().split_many(list(texts)) for s in spans]
    fitted = NgramExtractor(NgramSettings(min_count=min_count, min_npmi=min_npmi,
                                          max_vocabulary=10 * max_vocabulary)).fit(sentences)
    multi = [list(gram) for gram in fitted.vocabulary if len(gram) > 1]
    return multi[:max_vocabulary]


# ------------------------------------------------------------------------------------------ text sources

def source_documents(item: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Ray Data: one text source (a JSON-dumped ``TextSource``) → its documents, read in the worker."""
    from contrastext.data.sources import TextSource, load_texts

    source = TextSource.model_validate_json(item["source"])
    for text in load_texts(source, data_dir=item["data_dir"] or None).texts:
        yield {"text": text}


def documents_dataset(sources: Sequence[TextSource], data_dir: str | None = None) -> ray.data.Dataset:
    """The documents of every source as one Ray dataset (``text``); each source is read by a task of its own."""
    import ray.data

    items = [{"source": s.model_dump_json(), "data_dir": data_dir or ""} for s in sources]
    return ray.data.from_items(items, override_num_blocks=len(items)).flat_map(source_documents)


def sample_documents(sources: Sequence[TextSource], per_source: int, data_dir: str | None = None) -> list[str]:
    """The first ``per_source`` documents of each source (the vocabulary's sample: bounded, whatever the corpus)."""
    from contrastext.data.sources import load_texts

    out: list[str] = []
    for source in sources:
        limited = source.model_copy(update={"max_rows": min(source.max_rows or per_source, per_source)})
        out += load_texts(limited, data_dir=data_dir).texts
    return out
