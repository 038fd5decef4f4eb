"""Topic mining for a handful of documents at a time (the HTTP endpoint, the ``mine`` stage, library use).

``PhraseTopicModel().mine(documents)``: candidate phrases of the documents, their context-aware vectors,
topics (spherical k-means with k by silhouette unless given, or any clusterer), each phrase's
context-agnostic topic (the mean of its instances' topic distributions) and the top phrases of every topic.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal, Sequence

import numpy as np

from contrastext.clustering import Clusterer
from contrastext.models.resolve import DEFAULT_MODEL
from contrastext.uctopic.candidates import Extractor, NgramSettings, document_phrases
from contrastext.uctopic.phrases import OffsetSentenceSplitter, PhraseInstance
from contrastext.uctopic.topics import (
    Clustering,
    cluster_phrases,
    cluster_phrases_with,
    phrase_topics,
    topic_distributions,
)


@dataclass
class TopicPhrase:
    phrase: str
    score: float  # p(topic | phrase): the mean of its instances' topic distributions
    count: int = 0  # instances of the phrase in the documents


@dataclass
class MinedTopic:
    topic: int
    size: int  # phrase instances assigned to the topic
    phrases: list[TopicPhrase]


@dataclass
class PhraseOccurrence:
    document: int
    start: int  # character offsets in the document
    end: int
    phrase: str
    topic: int
    score: float  # p(topic | this occurrence)


@dataclass
class TopicsResult:
    n_topics: int
    silhouette: float | None
    topics: list[MinedTopic]
    occurrences: list[PhraseOccurrence]
    phrase_topics: dict[str, int]
    silhouette_by_k: dict[int, float] = field(default_factory=dict)
    extractor: str = ""
    instances: int = 0  # phrase instances encoded (after the max_phrases cap)


class PhraseTopicModel:
    """Phrase topics of documents.

    ``encoder``: a ``PhraseEncoder``, a ``TextEncoder`` (a phrase is the mean of its span's token states in
    the encoded sentence), or a model spec (``bundled:minilm``, a folder, a cached Hugging Face id).
    ``clusterer``: None for spherical k-means with k chosen by silhouette among ``mine``'s ``k_min..k_max``
    (or ``n_topics``); else any object with ``fit_predict(embeddings) -> cluster ids`` (ints ≥ 0, one per
    phrase instance; scikit-learn's clusterers qualify), which then decides the number of topics.
    """

    def __init__(self, encoder=DEFAULT_MODEL, *, clusterer: Clusterer | None = None, batch_size: int = 64,
                 temperature: float = 0.05, extractor: Extractor = "auto", ngram: NgramSettings | None = None,
                 max_length: int = 128):
        self.encoder = phrase_encoder(encoder, max_length)
        self.clusterer = clusterer
        self.batch_size = batch_size
        self.temperature = temperature
        self.extractor = extractor
        self.ngram = ngram
        self._splitter = OffsetSentenceSplitter()

    @classmethod
    def load(cls, spec: str = DEFAULT_MODEL, *, device: str | None = None, max_length: int = 128,
             **kwargs) -> "PhraseTopicModel":
        """``spec``: a folder written by the pretrain/finetune stages, or any encoder spec
        (``bundled:minilm``, a local folder, a cached Hugging Face id)."""
        return cls(phrase_encoder(spec, max_length, device), **kwargs)

    def extract(self, documents: Sequence[str]) -> tuple[list[PhraseInstance], str]:
        return document_phrases(documents, extractor=self.extractor, ngram=self.ngram, splitter=self._splitter)

    def mine(self, documents: Sequence[str], n_topics: int | Literal["auto"] = "auto", *, k_min: int = 2,
             k_max: int = 10, top_phrases: int = 10, max_phrases: int = 2000, seed: int = 0) -> TopicsResult:
        if isinstance(documents, str) or not all(isinstance(d, str) for d in documents):
            raise ValueError("documents must be a list of strings")
        if not any(d.strip() for d in documents):
            raise ValueError("no document has any text")
        if n_topics != "auto" and self.clusterer is not None:
            raise ValueError("n_topics is for the default clusterer; the clusterer given to the model sets the "
                             "number of topics itself")
        if n_topics != "auto" and (not isinstance(n_topics, int) or n_topics < 1):
            raise ValueError(f"n_topics must be a positive integer or 'auto', got {n_topics!r}")
        if k_min < 2 or k_max < k_min:
            raise ValueError(f"need 2 <= k_min <= k_max, got k_min={k_min}, k_max={k_max}")
        if max_phrases < 2:
            raise ValueError(f"max_phrases must be >= 2, got {max_phrases}")
        instances, extractor = self.extract(documents)
        if len(instances) > max_phrases:
            keep = sorted(random.Random(seed).sample(range(len(instances)), max_phrases))
            instances = [instances[i] for i in keep]
        distinct = len({inst.key for inst in instances})
        needed = k_min + 1 if n_topics == "auto" else max(2, int(n_topics))
        if len(instances) < needed or distinct < min(needed, 2):
            raise ValueError(f"the documents yield too few phrases to mine topics: {len(instances)} phrase "
                             f"instances ({distinct} distinct), at least {needed} needed; send more or longer "
                             f"documents or fewer topics")
        embeddings = self.encoder.encode(instances, batch_size=self.batch_size)
        if self.clusterer is not None:
            clustering = cluster_phrases_with(self.clusterer, embeddings, seed=seed)
        else:
            clustering = cluster_phrases(embeddings, n_topics, k_min=k_min, k_max=k_max, seed=seed)
        return self.topics_of(instances, embeddings, clustering, top_phrases=top_phrases, extractor=extractor)

    def topics_of(self, instances: Sequence[PhraseInstance], embeddings: np.ndarray, clustering: Clustering, *,
                  top_phrases: int = 10, min_phrase_count: int = 1, extractor: str = "") -> TopicsResult:
        """The result for instances already encoded and clustered; top phrases are drawn from phrases seen
        at least ``min_phrase_count`` times (from all phrases where a topic has none so frequent)."""
        distributions = topic_distributions(embeddings, clustering.result.centroids, self.temperature)
        by_phrase = phrase_topics(instances, distributions)
        topic_of = dict(zip(by_phrase.phrases, by_phrase.topics.tolist()))
        sizes = np.bincount(clustering.result.assignments, minlength=clustering.k)
        topics = []
        for t in range(clustering.k):
            top = by_phrase.top_phrases(t, top_phrases, min_phrase_count)
            topics.append(MinedTopic(topic=t, size=int(sizes[t]),
                                     phrases=[TopicPhrase(p, round(score, 6), c) for p, score, c in top]))
        occurrences = []
        for inst, assigned, dist in zip(instances, clustering.result.assignments, distributions):
            occurrences.append(PhraseOccurrence(document=inst.document, start=inst.offset + inst.start,
                                                end=inst.offset + inst.end, phrase=inst.phrase,
                                                topic=int(assigned), score=round(float(dist[assigned]), 6)))
        occurrences.sort(key=lambda o: (o.document, o.start))
        return TopicsResult(n_topics=clustering.k, silhouette=clustering.silhouette, topics=topics,
                            occurrences=occurrences, phrase_topics={k: int(v) for k, v in topic_of.items()},
                            silhouette_by_k={int(k): float(v) for k, v in clustering.silhouette_by_k.items()},
                            extractor=extractor, instances=len(instances))


def phrase_encoder(encoder, max_length: int = 128, device: str | None = None):
    """A phrase encoder from a model spec or a ``TextEncoder`` (its transformer); any other object is taken
    as a phrase encoder already (``encode(instances, batch_size=...)``)."""
    import os

    from contrastext.models.encoder import TextEncoder
    from contrastext.uctopic.encoder import PhraseEncoder

    if isinstance(encoder, (str, os.PathLike)):
        return PhraseEncoder.from_pretrained(encoder, max_length=max_length, device=device)
    if isinstance(encoder, TextEncoder):
        return PhraseEncoder(encoder)
    return encoder
