"""PhraseTopicModel.mine on the tiny random encoder: the shape and consistency of a topics result."""

import pytest

from conftest import NEWS_DOCUMENTS
from contrastext.uctopic.service import MinedTopic, PhraseOccurrence, PhraseTopicModel, TopicsResult



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
