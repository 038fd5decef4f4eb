"""Phrase topics: mined from documents, kept, and assigned to new documents.

``PhraseTopicModel().mine(documents)``: candidate phrases of the documents, their context-aware vectors,
topics (spherical k-means with k by silhouette unless given, or any clusterer), each phrase's
context-agnostic topic (the mean of its instances' topic distributions) and the top phrases of every topic.
``fit(documents)`` mines and keeps the topics (their centroids and the phrase vocabulary that found them);
``assign(documents)`` then gives each new document's phrases and the document itself a topic, one document
independently of the others, and ``save`` / ``load`` carry the topics with the encoder (the ``predict`` job).
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal, Sequence

import numpy as np

from contrastext.clustering import Clusterer
from contrastext.methods.uctopic.candidates import (
    Extractor,
    NgramExtractor,
    NgramSettings,
    available_spacy_model,
    document_phrases,
    fit_ngram_extractor,
)
from contrastext.methods.uctopic.phrases import OffsetSentenceSplitter, PhraseInstance
from contrastext.methods.uctopic.topics import (
    Clustering,
    cluster_phrases,
    cluster_phrases_with,
    phrase_topics,
    topic_distributions,
)
from contrastext.models.resolve import DEFAULT_MODEL


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
class DocumentTopics:
    """A document's topic (the most likely under the mean of its phrases' topic distributions; None when
    it has no phrase of the vocabulary) and its phrases, each with its own topic."""

    topic: int | None
    score: float | None  # that topic's mean probability over the document's phrases
    phrases: list[PhraseOccurrence]


TOPICS_FILE = "phrase_topics.json"
CENTROIDS_FILE = "topic_centroids.npy"


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
        self.topic_centroids_: np.ndarray | None = None
        self.topics_: list[MinedTopic] = []
        self.vocabulary_: NgramExtractor | None = None  # the n-gram phrases fit found (None: spaCy's)

    @classmethod
    def load(cls, spec: str = DEFAULT_MODEL, *, device: str | None = None, max_length: int = 128,
             backend: str = "torch", **kwargs) -> "PhraseTopicModel":
        """``spec``: a folder written by ``save`` (encoder and topics), by the pretrain/finetune stages, or any
        encoder spec (``bundled:minilm``, a local folder, a cached Hugging Face id); ``backend``: what the
        phrase encoder runs on (``models.onnx_backend``)."""
        topics_file = Path(str(spec)) / TOPICS_FILE
        if not topics_file.is_file():
            return cls(phrase_encoder(spec, max_length, device, backend), **kwargs)
        saved = json.loads(topics_file.read_text(encoding="utf-8"))
        settings = {"temperature": saved["temperature"], "extractor": saved["extractor"],
                    "ngram": NgramSettings(**saved["ngram"]) if saved.get("ngram") else None, **kwargs}
        model = cls(phrase_encoder(spec, saved.get("max_length", max_length), device, backend), **settings)
        model.topic_centroids_ = np.load(Path(str(spec)) / CENTROIDS_FILE).astype(np.float32)
        model.topics_ = [MinedTopic(t["topic"], t["size"], [TopicPhrase(**p) for p in t["phrases"]])
                         for t in saved["topics"]]
        if saved.get("vocabulary") is not None:
            model.vocabulary_ = NgramExtractor(model.ngram)
            model.vocabulary_.vocabulary = {tuple(gram): float(score) for gram, score in saved["vocabulary"]}
        return model

    def extract(self, documents: Sequence[str],
                fitted: NgramExtractor | None = None) -> tuple[list[PhraseInstance], str]:
        return document_phrases(documents, extractor=self.extractor, ngram=self.ngram, splitter=self._splitter,
                                fitted=fitted)

    # ------------------------------------------------------------------ topics kept and assigned
    def _uses_spacy(self) -> bool:
        return self.extractor == "spacy" or (self.extractor == "auto" and available_spacy_model())

    def fit(self, documents: Sequence[str], n_topics: int | Literal["auto"] = "auto", **mine_settings
            ) -> "PhraseTopicModel":
        """Mine the topics of ``documents`` (``mine``'s settings) and keep them for ``assign`` and ``save``."""
        fitted = None
        if not self._uses_spacy():  # the vocabulary is fitted here once, so assign finds the same phrases
            sentences = [s.text for spans in self._splitter.split_many(list(documents)) for s in spans]
            fitted = fit_ngram_extractor(sentences, self.ngram)
        result, clustering = self._mine(documents, n_topics, fitted=fitted, **mine_settings)
        self.topic_centroids_ = np.asarray(clustering.result.centroids, np.float32)
        self.topics_ = result.topics
        self.vocabulary_ = fitted
        self.extractor = "ngram" if fitted is not None else "spacy"
        return self

    def assign(self, documents: Sequence[str]) -> list[DocumentTopics]:
        """Each document's phrases and their topics, and the document's topic, under the kept topics."""
        if self.topic_centroids_ is None:
            raise RuntimeError("no topics yet: call fit(documents), or PhraseTopicModel.load(a saved folder)")
        return self.assign_with_embeddings(documents)[0]

    def assign_with_embeddings(self, documents: Sequence[str]) -> tuple[list[DocumentTopics], np.ndarray]:
        """``assign`` and the phrase vectors it scored, one row per phrase instance in document order."""
        instances, _ = self.extract(list(documents), fitted=self.vocabulary_)
        embeddings = self.encoder.encode(instances, batch_size=self.batch_size)
        distributions = (topic_distributions(embeddings, self.topic_centroids_, self.temperature) if instances
                         else np.zeros((0, len(self.topic_centroids_))))
        per_document: list[list[int]] = [[] for _ in documents]
        for i, inst in enumerate(instances):
            per_document[inst.document].append(i)
        out = []
        for rows in per_document:
            occurrences = [PhraseOccurrence(document=instances[i].document,
                                            start=instances[i].offset + instances[i].start,
                                            end=instances[i].offset + instances[i].end, phrase=instances[i].phrase,
                                            topic=int(distributions[i].argmax()),
                                            score=round(float(distributions[i].max()), 6)) for i in rows]
            occurrences.sort(key=lambda o: o.start)
            if rows:
                mean = distributions[rows].mean(axis=0)
                out.append(DocumentTopics(int(mean.argmax()), round(float(mean.max()), 6), occurrences))
            else:
                out.append(DocumentTopics(None, None, []))
        return out, embeddings

    def save(self, path: str | os.PathLike[str]) -> Path:
        """The phrase encoder (sentence-transformers format) and the kept topics: ``load`` reads both."""
        if self.topic_centroids_ is None:
            raise RuntimeError("no topics to save: call fit(documents) first")
        target = Path(self.encoder.save(path))
        np.save(target / CENTROIDS_FILE, self.topic_centroids_)
        vocabulary = (None if self.vocabulary_ is None else
                      [[list(gram), score] for gram, score in self.vocabulary_.vocabulary.items()])
        saved = {"n_topics": int(len(self.topic_centroids_)), "temperature": self.temperature,
                 "extractor": self.extractor, "ngram": asdict(self.ngram) if self.ngram else None,
                 "max_length": int(self.encoder.max_length), "vocabulary": vocabulary,
                 "topics": [asdict(topic) for topic in self.topics_]}
        (target / TOPICS_FILE).write_text(json.dumps(saved, indent=1), encoding="utf-8")
        return target

    def mine(self, documents: Sequence[str], n_topics: int | Literal["auto"] = "auto", *, k_min: int = 2,
             k_max: int = 10, top_phrases: int = 10, max_phrases: int = 2000, seed: int = 0) -> TopicsResult:
        return self._mine(documents, n_topics, k_min=k_min, k_max=k_max, top_phrases=top_phrases,
                          max_phrases=max_phrases, seed=seed)[0]

    def _mine(self, documents: Sequence[str], n_topics: int | Literal["auto"] = "auto", *, k_min: int = 2,
              k_max: int = 10, top_phrases: int = 10, max_phrases: int = 2000, seed: int = 0,
              fitted: NgramExtractor | None = None) -> tuple[TopicsResult, Clustering]:
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
        instances, extractor = self.extract(documents, fitted=fitted)
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
        result = self.topics_of(instances, embeddings, clustering, top_phrases=top_phrases, extractor=extractor)
        return result, clustering

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


def phrase_encoder(encoder, max_length: int = 128, device: str | None = None, backend: str = "torch"):
    """A phrase encoder from a model spec (the phrase vectors its folder names) or a ``TextEncoder`` (its
    transformer, the default phrase vectors); any other object is taken as a phrase encoder already
    (``encode(instances, batch_size=...)``)."""
    import os

    from contrastext.methods.uctopic.encoder import PhraseEncoder
    from contrastext.models.encoder import TextEncoder

    if isinstance(encoder, (str, os.PathLike)):
        return PhraseEncoder.from_pretrained(encoder, max_length=max_length, device=device, backend=backend)
    if isinstance(encoder, TextEncoder):
        return PhraseEncoder(encoder)
    return encoder
