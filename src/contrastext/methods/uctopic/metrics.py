"""Topic quality as UCTopic measures it: phrase informativeness (tf-idf) and word diversity."""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Sequence

_WORD = re.compile(r"[a-z0-9][a-z0-9'’&\-]*[a-z0-9]|[a-z0-9]")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class SentenceTfidf:
    """tf-idf of words with each sentence as a document: ``tf(w, s) · log(N / df(w))``."""

    def __init__(self, sentences: Sequence[str]):
        self.sentences = len(sentences)
        self.df: Counter = Counter()
        for sentence in sentences:
            self.df.update(set(words(sentence)))

    def idf(self, word: str) -> float:
        return math.log(max(1, self.sentences) / max(1, self.df.get(word, 0)))

    def phrase_informativeness(self, phrase: str, contexts: Sequence[str]) -> float:
        """Mean tf-idf of the phrase's words over the sentences it occurs in (the phrase's own sentences)."""
        phrase_words = words(phrase)
        if not phrase_words:
            return 0.0
        if not contexts:
            return sum(self.idf(w) for w in phrase_words) / len(phrase_words)
        total = 0.0
        for context in contexts:
            counts = Counter(words(context))
            total += sum(max(1, counts[w]) * self.idf(w) for w in phrase_words) / len(phrase_words)
        return total / len(contexts)


def word_diversity(phrases: Sequence[str]) -> float:
    """Distinct words / all words over a topic's phrases (1.0: no word repeats)."""
    tokens = [w for p in phrases for w in words(p)]
    return len(set(tokens)) / len(tokens) if tokens else 0.0
