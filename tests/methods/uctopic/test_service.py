"""PhraseTopicModel.mine on the tiny random encoder: the shape and consistency of a topics result."""

import numpy as np
import pytest
from conftest import NEWS_DOCUMENTS

from contrastext.methods.uctopic.model import MinedTopic, PhraseOccurrence, PhraseTopicModel, TopicsResult


@pytest.fixture(scope="module")
def model(tiny_encoder_dir):
    return PhraseTopicModel.load(str(tiny_encoder_dir), max_length=64)


def test_mine_returns_consistent_topics_occurrences_and_phrase_topics(model):
    result = model.mine(NEWS_DOCUMENTS, n_topics="auto", k_min=2, k_max=4, top_phrases=5, seed=0)
    assert isinstance(result, TopicsResult)
    assert set(result.silhouette_by_k) == {2, 3, 4}
    # "auto" takes the k of the highest silhouette: on this fixture k=2 (0.20 against 0.19 and 0.13)
    assert result.n_topics == 2 and len(result.topics) == result.n_topics
    assert result.silhouette == result.silhouette_by_k[2] == max(result.silhouette_by_k.values())
    assert result.silhouette == pytest.approx(0.203, abs=0.02)
    assert result.extractor == "ngram"  # no spaCy model package is installed here
    assert all(isinstance(t, MinedTopic) and len(t.phrases) <= 5 for t in result.topics)
    assert sum(t.size for t in result.topics) == len(result.occurrences) == result.instances
    for occurrence in result.occurrences:
        assert isinstance(occurrence, PhraseOccurrence)
        assert NEWS_DOCUMENTS[occurrence.document][occurrence.start:occurrence.end] == occurrence.phrase
        # an occurrence's topic is its nearest centroid, hence its most probable topic: p ≥ 1/k
        assert 0 <= occurrence.topic < result.n_topics and 1 / result.n_topics <= occurrence.score <= 1.0
    # a phrase repeated across documents is one key with one context-agnostic topic
    assert "premier league" in result.phrase_topics and "interest rates" in result.phrase_topics
    for topic in result.topics:
        for phrase in topic.phrases:
            assert result.phrase_topics[phrase.phrase.lower()] == topic.topic
            # a phrase belongs to the topic of its highest mean probability, so that probability is ≥ 1/k
            assert 1 / result.n_topics <= phrase.score <= 1.0 and phrase.count >= 1
        scores = [p.score for p in topic.phrases]
        assert all(round(a, 3) >= round(b, 3) for a, b in zip(scores, scores[1:]))  # most typical first


def test_fixed_number_of_topics_and_determinism(model):
    first = model.mine(NEWS_DOCUMENTS, n_topics=3, seed=1)
    second = model.mine(NEWS_DOCUMENTS, n_topics=3, seed=1)
    assert first.n_topics == 3
    assert first.phrase_topics == second.phrase_topics


def test_max_phrases_caps_the_instances_encoded(model):
    result = model.mine(NEWS_DOCUMENTS, n_topics=2, max_phrases=10)
    assert result.instances == 10 and len(result.occurrences) == 10


@pytest.mark.parametrize("documents, message", [
    (["Hello."], "too few phrases"),
    (["", "   "], "no document has any text"),
    ("a single string", "list of strings"),
])
def test_unusable_documents_raise_a_clear_value_error(model, documents, message):
    with pytest.raises(ValueError, match=message):
        model.mine(documents)


def test_bad_arguments_raise_value_error(model):
    with pytest.raises(ValueError, match="n_topics"):
        model.mine(NEWS_DOCUMENTS, n_topics=0)
    with pytest.raises(ValueError, match="k_min"):
        model.mine(NEWS_DOCUMENTS, k_min=5, k_max=3)


def test_a_clusterer_given_to_the_model_makes_the_topics(model, tiny_encoder_dir):
    from sklearn.cluster import AgglomerativeClustering

    clusterer = AgglomerativeClustering(n_clusters=3, metric="cosine", linkage="average")
    swapped = PhraseTopicModel(model.encoder, clusterer=clusterer)
    result = swapped.mine(NEWS_DOCUMENTS, top_phrases=5)
    instances, _ = swapped.extract(NEWS_DOCUMENTS)
    expected = clusterer.fit_predict(model.encoder.encode(instances))
    assert result.n_topics == 3 and set(result.silhouette_by_k) == {3}
    by_offset = {(o.document, o.start, o.end): o.topic for o in result.occurrences}
    topics = [by_offset[(inst.document, inst.offset + inst.start, inst.offset + inst.end)] for inst in instances]
    # the same partition as the clusterer's (ids renumbered in sorted order, so here equal)
    np.testing.assert_array_equal(topics, expected)
    assert sum(t.size for t in result.topics) == len(instances)
    with pytest.raises(ValueError, match="n_topics is for the default clusterer"):
        swapped.mine(NEWS_DOCUMENTS, n_topics=2)


def test_the_encoder_may_be_a_text_encoder_or_a_spec(model, tiny_encoder_dir):
    from contrastext.models import TextEncoder

    from_text_encoder = PhraseTopicModel(TextEncoder.from_pretrained(str(tiny_encoder_dir), max_length=64))
    from_spec = PhraseTopicModel(str(tiny_encoder_dir), max_length=64)
    expected = model.mine(NEWS_DOCUMENTS, n_topics=3, seed=1).phrase_topics
    assert from_text_encoder.mine(NEWS_DOCUMENTS, n_topics=3, seed=1).phrase_topics == expected
    assert from_spec.mine(NEWS_DOCUMENTS, n_topics=3, seed=1).phrase_topics == expected
