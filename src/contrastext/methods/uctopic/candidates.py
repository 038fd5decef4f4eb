"""Candidate phrases of raw documents.

With an installed spaCy model package (e.g. ``en_core_web_sm``) the candidates are its noun chunks and
named entities. Without one — nothing is ever downloaded — a statistical extractor needs no model: 1–3-word
n-grams that neither start nor end with a stop word, frequent enough, and (for 2–3 words) whose words
co-occur more than chance (normalised PMI); each sentence is then matched greedily, longest phrase first.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Literal, Sequence

from contrastext.methods.uctopic.phrases import OffsetSentenceSplitter, PhraseInstance, SentenceSpan

Extractor = Literal["auto", "spacy", "ngram"]
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’&\-]*[A-Za-z0-9]|[A-Za-z0-9]")


def stop_words() -> frozenset[str]:
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(STOP_WORDS) | {"said", "says", "mr", "mrs", "ms", "also", "just", "like", "got", "get"}


@dataclass
class NgramSettings:
    max_n: int = 3
    min_count: int = 2
    min_npmi: float = 0.3  # multi-word phrases: normalised PMI of the n-gram over its words
    min_chars: int = 3
    max_vocabulary: int = 5000


def available_spacy_model(name: str = "en_core_web_sm") -> bool:
    try:
        import spacy.util

        return bool(spacy.util.is_package(name))
    except ImportError:
        return False


def _tokens(sentence: str) -> list[tuple[int, int, str]]:
    """Words with offsets; a punctuation mark between two words breaks n-grams (marked by a None gap)."""
    return [(m.start(), m.end(), m.group(0)) for m in _WORD.finditer(sentence)]


def _joinable(sentence: str, left_end: int, right_start: int) -> bool:
    return sentence[left_end:right_start].isspace()


def ngrams(sentence: str, max_n: int) -> list[tuple[int, int, tuple[str, ...]]]:
    words = _tokens(sentence)
    out = []
    for i in range(len(words)):
        for n in range(1, max_n + 1):
            j = i + n - 1
            if j >= len(words):
                break
            if n > 1 and not _joinable(sentence, words[j - 1][1], words[j][0]):
                break
            out.append((words[i][0], words[j][1], tuple(w[2].lower() for w in words[i:j + 1])))
    return out


class NgramExtractor:
    """Fits a phrase vocabulary on a collection's sentences, then marks phrase occurrences in them."""

    def __init__(self, settings: NgramSettings | None = None):
        self.settings = settings or NgramSettings()
        self.stop = stop_words()
        self.vocabulary: dict[tuple[str, ...], float] = {}

    def _good_edges(self, gram: tuple[str, ...]) -> bool:
        first, last = gram[0], gram[-1]
        if first in self.stop or last in self.stop:
            return False
        if first.isdigit() or last.isdigit():
            return False
        return len(" ".join(gram)) >= self.settings.min_chars

    # not gensim's Phrases(scoring="npmi"): on BBCSport it gives our 5,355 bigrams but at most 2,027 of our 3,772 trigrams
    def fit(self, sentences: Sequence[str]) -> "NgramExtractor":
        s = self.settings
        counts: Counter = Counter()
        for sentence in sentences:
            counts.update(g for _, _, g in ngrams(sentence, s.max_n))
        unigrams = {g[0]: c for g, c in counts.items() if len(g) == 1}
        total = max(1, sum(unigrams.values()))
        scored: dict[tuple[str, ...], float] = {}
        for gram, count in counts.items():
            if count < s.min_count or not self._good_edges(gram):
                continue
            if len(gram) == 1:
                scored[gram] = float(count)
                continue
            p_gram = count / total
            p_words = math.prod(unigrams[w] / total for w in gram)
            npmi = math.log(p_gram / p_words) / (-math.log(p_gram) * (len(gram) - 1))
            if npmi >= s.min_npmi:
                scored[gram] = count * (1.0 + npmi)  # a good multi-word phrase outranks its words
        best = sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))[: s.max_vocabulary]
        self.vocabulary = dict(best)
        return self

    def find(self, sentence: str) -> list[tuple[int, int]]:
        """Non-overlapping phrase spans of one sentence, longest match first, left to right."""
        spans: list[tuple[int, int]] = []
        covered_until = -1
        matches = sorted(((start, end, gram) for start, end, gram in ngrams(sentence, self.settings.max_n)
                          if gram in self.vocabulary), key=lambda m: (m[0], -(m[1] - m[0])))
        for start, end, _ in matches:
            if start >= covered_until:
                spans.append((start, end))
                covered_until = end
        return spans


def _spacy_spans(nlp, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
    stop = stop_words()
    out = []
    for doc in nlp.pipe(texts, batch_size=64):
        spans = {}
        candidates = list(doc.ents)
        try:
            candidates += list(doc.noun_chunks)
        except (ValueError, NotImplementedError):
            pass
        for span in candidates:
            tokens = [t for t in span if not (t.is_stop or t.is_punct or t.lower_ in stop)]
            if not tokens:
                continue
            start, end = tokens[0].idx, tokens[-1].idx + len(tokens[-1].text)
            if not any(s <= start < e or s < end <= e for s, e in spans.items()):
                spans[start] = end
        out.append(sorted(spans.items()))
    return out


def fit_ngram_extractor(sentences: Sequence[str], ngram: NgramSettings | None = None) -> NgramExtractor:
    """An n-gram phrase vocabulary fitted on ``sentences`` (every candidate counts once a handful of short
    documents leaves none seen twice)."""
    fitted = NgramExtractor(ngram).fit(sentences)
    if not fitted.vocabulary and (ngram is None or ngram.min_count > 1):
        fitted = NgramExtractor(NgramSettings(**{**(ngram or NgramSettings()).__dict__, "min_count": 1})).fit(sentences)
    return fitted


def document_phrases(documents: Sequence[str], *, extractor: Extractor = "auto",
                     spacy_model: str = "en_core_web_sm", ngram: NgramSettings | None = None,
                     splitter: OffsetSentenceSplitter | None = None,
                     fitted: NgramExtractor | None = None) -> tuple[list[PhraseInstance], str]:
    """Phrase instances of documents (``document`` = its index, ``offset`` = its sentence's start) and the
    extractor that found them (``spacy:<model>`` or ``ngram``). ``fitted``: the n-gram path marks the
    phrases of this vocabulary (fitted on other documents) instead of fitting one on these."""
    if extractor == "spacy" and not available_spacy_model(spacy_model):
        raise ValueError(f"extractor 'spacy' needs the spaCy model package {spacy_model!r} installed; "
                         f"use extractor 'ngram' (or 'auto') without it")
    splitter = splitter or OffsetSentenceSplitter()
    sentences: list[tuple[int, SentenceSpan]] = [(i, s) for i, spans in enumerate(splitter.split_many(documents))
                                                 for s in spans]
    texts = [s.text for _, s in sentences]
    use_spacy = extractor == "spacy" or (extractor == "auto" and available_spacy_model(spacy_model))
    if use_spacy:
        import spacy

        spans_per_sentence = _spacy_spans(spacy.load(spacy_model, disable=["lemmatizer"]), texts)
        used = f"spacy:{spacy_model}"
    else:
        fitted = fitted or fit_ngram_extractor(texts, ngram)
        spans_per_sentence = [fitted.find(t) for t in texts]
        used = "ngram"
    out = []
    for (document, sentence), spans in zip(sentences, spans_per_sentence):
        for start, end in spans:
            out.append(PhraseInstance(sentence.text, start, end, key=" ".join(sentence.text[start:end].lower().split()),
                                      document=document, offset=sentence.start))
    return out, used
