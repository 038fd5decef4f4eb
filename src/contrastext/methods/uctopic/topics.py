"""Topics of phrase instances: k-means (k by silhouette), topic distributions, top phrases, and the
pseudo labels of cluster-assisted contrastive learning (CCL)."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from contrastext.clustering import (
    Clusterer,
    KMeansResult,
    result_of_assignments,
    select_k_by_silhouette,
    spherical_kmeans,
)
from contrastext.methods.uctopic.phrases import PhraseInstance, pair_row
from contrastext.vectors import unit_rows


@dataclass
class Clustering:
    k: int
    result: KMeansResult
    silhouette_by_k: dict[int, float]

    @property
    def silhouette(self) -> float | None:
        value = self.silhouette_by_k.get(self.k)
        return None if value is None or np.isnan(value) else float(value)


def cluster_phrases(embeddings: np.ndarray, n_topics: int | str = "auto", *, k_min: int = 2, k_max: int = 10,
                    seed: int = 0, silhouette_sample: int | None = 5000, nredo: int = 1) -> Clustering:
    """Spherical k-means of phrase vectors; ``n_topics="auto"`` takes the k of [k_min, k_max] with the best
    silhouette (capped below the number of rows)."""
    n = len(embeddings)
    if n_topics == "auto":
        top = min(k_max, n - 1)
        if top < k_min:
            raise ValueError(f"{n} phrase instances are too few to choose among {k_min}..{k_max} topics")
        k, scores = select_k_by_silhouette(embeddings, range(k_min, top + 1), seed=seed,
                                           sample_size=silhouette_sample)
        return Clustering(k, spherical_kmeans(embeddings, k, seed=seed, nredo=nredo), scores)
    k = int(n_topics)
    if not 1 <= k <= n:
        raise ValueError(f"n_topics={k} needs at least {k} phrase instances, got {n}")
    result = spherical_kmeans(embeddings, k, seed=seed, nredo=nredo)
    scores: dict[int, float] = {}
    if 2 <= k < n:
        from contrastext.metrics.clustering import silhouette

        scores[k] = silhouette(embeddings, result.assignments, sample_size=silhouette_sample, seed=seed)
    return Clustering(k, result, scores)


def cluster_phrases_with(clusterer: Clusterer, embeddings: np.ndarray, *, seed: int = 0,
                          silhouette_sample: int | None = 5000) -> Clustering:
    """Topics from any clusterer's ``fit_predict``: its ids renumbered 0..k-1, each centroid its rows' unit mean."""
    from contrastext.metrics.clustering import silhouette

    result = result_of_assignments(embeddings, clusterer.fit_predict(np.asarray(embeddings)))
    k = len(result.centroids)
    scores = {k: silhouette(embeddings, result.assignments, sample_size=silhouette_sample, seed=seed)} \
        if 2 <= k < len(embeddings) else {}
    return Clustering(k, result, scores)


def topic_distributions(embeddings: np.ndarray, centroids: np.ndarray, temperature: float = 0.05) -> np.ndarray:
    """p(topic | instance): softmax of cosine similarity to each centroid over ``temperature``."""
    x = unit_rows(embeddings)
    logits = x @ centroids.T / temperature
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    return p / p.sum(axis=1, keepdims=True)


@dataclass
class PhraseTopics:
    phrases: list[str]  # distinct phrase keys
    counts: np.ndarray  # instances of each phrase
    distributions: np.ndarray  # [P, K] mean of the instances' topic distributions (context-agnostic topic)
    surface: list[str]  # the most frequent surface form of each phrase

    @property
    def topics(self) -> np.ndarray:
        return self.distributions.argmax(axis=1)

    def top_phrases(self, topic: int, n: int = 10, min_count: int = 1) -> list[tuple[str, float, int]]:
        """(phrase, p(topic | phrase), count) of the phrases whose topic is ``topic``, most typical first;
        ties (common when p ≈ 1) go to the more frequent phrase."""
        members = [i for i in np.flatnonzero(self.topics == topic) if self.counts[i] >= min_count]
        if not members and min_count > 1:
            return self.top_phrases(topic, n, 1)
        members.sort(key=lambda i: (-round(float(self.distributions[i, topic]), 3), -int(self.counts[i]),
                                    self.phrases[i]))
        return [(self.surface[i], float(self.distributions[i, topic]), int(self.counts[i])) for i in members[:n]]


def phrase_topics(instances: Sequence[PhraseInstance], distributions: np.ndarray) -> PhraseTopics:
    groups: dict[str, list[int]] = defaultdict(list)
    forms: dict[str, Counter] = defaultdict(Counter)
    for i, inst in enumerate(instances):
        groups[inst.key].append(i)
        forms[inst.key][" ".join(inst.phrase.split())] += 1
    keys = sorted(groups)
    if keys:
        mean = np.stack([distributions[groups[k]].mean(axis=0) for k in keys])
    else:
        mean = np.zeros((0, distributions.shape[1]))
    return PhraseTopics(phrases=keys, counts=np.array([len(groups[k]) for k in keys]), distributions=mean,
                        surface=[forms[k].most_common(1)[0][0] for k in keys])


# ------------------------------------------------------------------------------------------ CCL

@dataclass
class PseudoLabels:
    instance_topics: np.ndarray  # [N] topic of each instance's mention, -1 where its mention has none
    central: int  # instances that were among their cluster's closest t%
    labelled_mentions: int


def ccl_pseudo_labels(instances: Sequence[PhraseInstance], embeddings: np.ndarray, result: KMeansResult,
                      central_fraction: float) -> PseudoLabels:
    """The t% of each cluster's instances closest to its centroid get the cluster as pseudo label; each
    mention's label is the majority vote of its labelled instances, given to all its instances."""
    if not 0 < central_fraction <= 1:
        raise ValueError(f"central_fraction must be in (0, 1], got {central_fraction}")
    x = unit_rows(embeddings)
    similarity = (x * result.centroids[result.assignments]).sum(axis=1)
    votes: dict[str, Counter] = defaultdict(Counter)
    central = 0
    for topic in range(len(result.centroids)):
        members = np.flatnonzero(result.assignments == topic)
        if not len(members):
            continue
        keep = max(1, int(round(central_fraction * len(members))))
        for i in members[np.argsort(-similarity[members], kind="stable")[:keep]]:
            votes[instances[i].key][topic] += 1
            central += 1
    label_of = {key: counter.most_common(1)[0][0] for key, counter in votes.items()}
    topics = np.array([label_of.get(inst.key, -1) for inst in instances], dtype=np.int64)
    return PseudoLabels(topics, central, len(label_of))


def ccl_pairs(instances: Sequence[PhraseInstance], labels: PseudoLabels, *, pairs_per_instance: int = 1,
              positives: str, mask_keep_probability: float | None = None,
              seed: int = 0) -> list[dict]:
    """Positive pairs for CCL. Rows carry the mention's topic, so the loss draws its negatives from other
    topics only.

    ``positives="mention"`` (UCTopic): two instances of the same labelled mention (an instance alone pairs
    with itself; dropout makes the two views differ). ``"topic"``: an instance and an instance of another
    mention with the same pseudo label. ``mask_keep_probability``: mask the mentions as in pretraining
    (one of the two kept visible with this probability); None leaves them visible.
    """
    if positives not in ("mention", "topic"):
        raise ValueError(f"positives must be 'mention' or 'topic', got {positives!r}")
    rng = random.Random(seed)
    groups: dict[str, list[int]] = defaultdict(list)
    by_topic: dict[int, list[int]] = defaultdict(list)
    for i, inst in enumerate(instances):
        if labels.instance_topics[i] >= 0:
            groups[inst.key].append(i)
            by_topic[int(labels.instance_topics[i])].append(i)
    masking = rng if mask_keep_probability is not None else None
    keep = mask_keep_probability or 0.0
    rows = []
    for key, members in sorted(groups.items()):
        for i in members:
            topic = int(labels.instance_topics[i])
            if positives == "mention":
                pool = [j for j in members if j != i] or [i]
            else:
                pool = [j for j in by_topic[topic] if instances[j].key != key] or [i]
            for j in rng.sample(pool, min(pairs_per_instance, len(pool))):
                rows.append(pair_row(instances[i], instances[j], masking, keep, group=f"mention:{key}",
                                     topic=topic))
    rng.shuffle(rows)
    return rows
