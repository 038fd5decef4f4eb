"""PhraseEncoder span pooling and masking, the CCL loss mask, pseudo labels and topic metrics."""

import json

import numpy as np
import pytest
import torch

from contrastext.clustering import KMeansResult
from contrastext.methods.uctopic.encoder import PHRASE_CONFIG, PhraseEncoder
from contrastext.methods.uctopic.loss import PhraseContrastiveLoss
from contrastext.methods.uctopic.metrics import SentenceTfidf, word_diversity
from contrastext.methods.uctopic.phrases import PhraseInstance
from contrastext.methods.uctopic.topics import ccl_pairs, ccl_pseudo_labels, phrase_topics, topic_distributions


@pytest.fixture(scope="module")
def encoder(tiny_encoder_dir):
    """The span in context alone, what the pooling tests below check."""
    return PhraseEncoder.from_pretrained(str(tiny_encoder_dir), max_length=32, vectors="in_context")


@pytest.fixture(scope="module")
def with_alone(tiny_encoder_dir):
    return PhraseEncoder.from_pretrained(str(tiny_encoder_dir), max_length=32)


def test_span_mask_covers_exactly_the_span_tokens_and_masking_replaces_them(encoder):
    sentence = "The Eiffel Tower is in Paris."
    start = sentence.index("Eiffel Tower")
    features = encoder.tokenize([(sentence, start, start + len("Eiffel Tower"))], mask=[True])
    ids = features["input_ids"][0][features["span_mask"][0].bool()].tolist()
    assert ids and set(ids) == {encoder.tokenizer.mask_token_id}
    plain = encoder.tokenize([(sentence, start, start + len("Eiffel Tower"))])
    span_tokens = plain["input_ids"][0][plain["span_mask"][0].bool()].tolist()
    assert encoder.tokenizer.decode(span_tokens) == "eiffel tower"


def test_encode_equals_the_mean_of_span_token_states_and_shares_sentences(encoder):
    sentence = "Chelsea beat Arsenal at Stamford Bridge."
    spans = [(sentence, 0, 7), (sentence, 13, 20), ("Arsenal lost.", 0, 7)]
    vectors = encoder.encode(spans, normalize=False)
    with torch.no_grad():
        features = encoder.tokenize([spans[1]])
        states = encoder.transformer(input_ids=features["input_ids"],
                                     attention_mask=features["attention_mask"]).last_hidden_state[0]
        expected = states[features["span_mask"][0].bool()].mean(dim=0).numpy()
    np.testing.assert_allclose(vectors[1], expected, atol=1e-5)
    one_by_one = np.stack([encoder.encode([s], normalize=False)[0] for s in spans])
    np.testing.assert_allclose(vectors, one_by_one, atol=1e-5)
    assert not np.allclose(vectors[0], vectors[1])  # different spans of one sentence differ
    masked = encoder.encode(spans, mask=True)
    assert not np.allclose(masked, encoder.encode(spans))
    np.testing.assert_allclose(np.linalg.norm(masked, axis=1), 1.0, atol=1e-5)


def test_a_forward_pass_holds_at_most_max_batch_tokens(encoder, monkeypatch):
    """Long sentences come fewer to a pass, as TextEncoder's texts do; the vectors do not change."""
    from contrastext.methods.uctopic import encoder as phrase_module

    sentences = [f"Team {i} beat the visitors at home in the league on a cold evening." for i in range(12)]
    spans = [(s, 0, s.index(" beat")) for s in sentences]
    passes: list[tuple[int, int]] = []
    forward = encoder.encoder.inference_token_states

    def recorded(inputs):
        passes.append(tuple(inputs["input_ids"].shape))
        return forward(inputs)

    monkeypatch.setattr(encoder.encoder, "inference_token_states", recorded)
    whole = encoder.encode(spans, batch_size=64)
    assert [rows for rows, _ in passes] == [12]
    passes.clear()
    monkeypatch.setattr(phrase_module, "MAX_BATCH_TOKENS", 4 * 32)  # four rows of 32 tokens
    capped = encoder.encode(spans, batch_size=64)
    assert [rows for rows, _ in passes] == [4, 4, 4] and all(rows * 32 <= 128 for rows, _ in passes)
    np.testing.assert_allclose(capped, whole, atol=1e-5)


def test_encode_draws_a_progress_bar_on_a_terminal_only_when_asked(encoder, stderr_terminal):
    terminal_stderr = stderr_terminal()
    spans = [("John Smith met officials from Reuters in Paris .", 0, 10)] * 6
    encoder.encode(spans, batch_size=2, mask=True, show_progress=True)
    drawn = terminal_stderr.getvalue()
    assert "phrases encoded" in drawn and "6/6" in drawn
    terminal_stderr.truncate(0)
    encoder.encode(spans, batch_size=2, mask=True)
    assert terminal_stderr.getvalue() == ""


def test_long_sentences_keep_the_span_inside_the_token_limit(encoder):
    sentence = "word " * 400 + "Target phrase here"
    start = sentence.index("Target")
    features = encoder.tokenize([(sentence, start, start + 13)])
    span = features["input_ids"][0][features["span_mask"][0].bool()].tolist()
    assert encoder.tokenizer.decode(span) == "target phrase"
    with pytest.raises(ValueError, match="outside a sentence"):
        encoder.tokenize([("short", 2, 40)])


def test_save_and_load_round_trip(encoder, tmp_path):
    folder = encoder.save(tmp_path / "phrase")
    assert (folder / PHRASE_CONFIG).is_file()
    again = PhraseEncoder.from_pretrained(str(folder), max_length=32)
    assert again.vectors == "in_context"  # what it was saved with, not the default
    spans = [("A phrase in a sentence.", 2, 8)]
    np.testing.assert_allclose(again.encode(spans), encoder.encode(spans), atol=1e-6)


def test_the_phrase_alone_is_added_to_its_vector_in_context(encoder, with_alone):
    assert with_alone.vectors == "in_context+alone"  # the default for a folder without phrase_encoder.json
    sentence = "Chelsea beat Arsenal at Stamford Bridge."
    spans = [(sentence, 0, 7), (sentence, 13, 20), ("Arsenal lost.", 0, 7)]
    in_context = encoder.encode(spans)
    alone = encoder.encoder.encode(["Chelsea", "Arsenal", "Arsenal"])
    alone /= np.linalg.norm(alone, axis=1, keepdims=True)
    expected = (in_context + alone) / np.linalg.norm(in_context + alone, axis=1, keepdims=True)
    np.testing.assert_allclose(with_alone.encode(spans), expected, atol=1e-5)
    np.testing.assert_allclose(with_alone.encode(spans, normalize=False), (in_context + alone) / 2, atol=1e-5)
    # one mention in two sentences: the phrase part is shared, the context part is not
    assert not np.allclose(with_alone.encode(spans)[1], with_alone.encode(spans)[2])
    # masking hides the phrase: the phrase alone is not added then
    np.testing.assert_allclose(with_alone.encode(spans, mask=True), encoder.encode(spans, mask=True), atol=1e-6)


def test_training_pools_the_vectors_that_encode_delivers(encoder, with_alone):
    sentence = "Chelsea beat Arsenal at Stamford Bridge."
    spans = [(sentence, 0, 7), (sentence, 13, 20)]
    with torch.no_grad():
        trained = with_alone(with_alone.tokenize(spans)).numpy()
        masked = with_alone(with_alone.tokenize(spans, mask=[True, False])).numpy()
        plain = encoder(encoder.tokenize(spans)).numpy()
    assert "phrase_input_ids" not in encoder.tokenize(spans)
    np.testing.assert_allclose(trained / 2, with_alone.encode(spans, normalize=False), atol=1e-5)
    # a masked phrase is not shown alone either: its row is its span in context, unit length
    np.testing.assert_allclose(np.linalg.norm(masked[0]), 1.0, atol=1e-5)
    np.testing.assert_allclose(masked[1], trained[1], atol=1e-5)
    assert not np.allclose(plain[1] / np.linalg.norm(plain[1]), trained[1] / np.linalg.norm(trained[1]), atol=1e-3)


def test_the_phrase_objective_trains_the_vectors_the_job_names(tiny_encoder_dir):
    from contrastext.methods.uctopic.config import UCTopicConfig
    from contrastext.methods.uctopic.objective import PhraseObjective

    for vectors in ("in_context", "in_context+alone"):
        config = UCTopicConfig(model=str(tiny_encoder_dir), phrase_vectors=vectors).train_config()
        objective = PhraseObjective(config)
        objective.build_model(str(tiny_encoder_dir), resuming=False)
        assert objective.encoder.vectors == vectors  # whatever the start folder says


def test_the_phrase_vectors_are_saved_and_an_earlier_folder_reads_as_in_context(with_alone, tmp_path):
    folder = with_alone.save(tmp_path / "alone")
    assert json.loads((folder / PHRASE_CONFIG).read_text())["vectors"] == "in_context+alone"
    assert PhraseEncoder.from_pretrained(str(folder)).vectors == "in_context+alone"
    assert PhraseEncoder.from_pretrained(str(folder), vectors="in_context").vectors == "in_context"
    (folder / PHRASE_CONFIG).write_text(json.dumps({"pooling": "span_mean", "mask_token": "[MASK]"}))
    assert PhraseEncoder.from_pretrained(str(folder)).vectors == "in_context"
    (folder / PHRASE_CONFIG).write_text(json.dumps({"vectors": "sum"}))
    with pytest.raises(ValueError, match="phrase_encoder.json names phrase vectors 'sum'"):
        PhraseEncoder.from_pretrained(str(folder))
    with pytest.raises(ValueError, match="vectors must be one of in_context, in_context\\+alone"):
        PhraseEncoder(with_alone.encoder, vectors="alone")


def test_ccl_loss_drops_same_topic_negatives():
    torch.manual_seed(0)
    anchors, positives = torch.randn(4, 8), torch.randn(4, 8)
    loss = PhraseContrastiveLoss(temperature=0.05, gather_across_workers=False)
    plain = loss(anchors, positives)
    no_topics = loss(anchors, positives, torch.full((4,), -1))
    assert torch.isclose(plain, no_topics)
    # every row its own topic: nothing removed; all rows one topic: only the own positive is left → loss 0
    assert torch.isclose(loss(anchors, positives, torch.arange(4)), plain)
    assert loss(anchors, positives, torch.zeros(4, dtype=torch.long)).item() == pytest.approx(0.0, abs=1e-6)
    # removing negatives can only lower the loss
    assert loss(anchors, positives, torch.tensor([0, 0, 1, 1])) < plain
    with pytest.raises(ValueError):
        PhraseContrastiveLoss(temperature=0)


def _instances(keys: list[str]) -> list[PhraseInstance]:
    return [PhraseInstance(f"{k} appears in sentence {i}.", 0, len(k), key=k) for i, k in enumerate(keys)]


def test_pseudo_labels_take_central_instances_and_vote_per_mention():
    keys = ["a", "a", "b", "b", "c", "c"]
    x = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9], [0.8, 0.2], [0.6, 0.4]], dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    result = KMeansResult(assignments=np.array([0, 0, 1, 1, 0, 0]),
                          centroids=np.array([[1, 0], [0, 1]], dtype=np.float32), inertia=0.0)
    labels = ccl_pseudo_labels(_instances(keys), x, result, central_fraction=0.5)
    # cluster 0 (4 members) labels its 2 most central (a, a); cluster 1 its most central (b)
    assert labels.instance_topics.tolist() == [0, 0, 1, 1, -1, -1]
    assert labels.central == 3 and labels.labelled_mentions == 2
    rows = ccl_pairs(_instances(keys), labels, positives="mention", seed=0)
    assert len(rows) == 4 and all(r["topic"] in (0, 1) for r in rows)
    assert all(r["anchor"] != r["positive"] and r["key"] in ("mention:a", "mention:b") for r in rows)
    assert not any(r["anchor_mask"] or r["positive_mask"] for r in rows)


def test_phrase_topics_average_instance_distributions():
    centroids = np.eye(2, dtype=np.float32)
    x = np.array([[1, 0], [0.2, 1], [0, 1]], dtype=np.float32)
    dist = topic_distributions(x, centroids, temperature=0.05)
    np.testing.assert_allclose(dist.sum(axis=1), 1.0, rtol=1e-6)
    topics = phrase_topics(_instances(["x", "x", "y"]), dist)
    assert topics.phrases == ["x", "y"] and topics.counts.tolist() == [2, 1]
    np.testing.assert_allclose(topics.distributions[0], dist[:2].mean(axis=0))
    assert topics.top_phrases(1) == [("y", pytest.approx(dist[2, 1]), 1)]


def test_informativeness_and_diversity():
    sentences = ["the cat sat", "the dog sat", "the cat ran", "a quokka smiled"]
    tfidf = SentenceTfidf(sentences)
    assert tfidf.idf("the") == pytest.approx(np.log(4 / 3))
    assert tfidf.phrase_informativeness("quokka", ["a quokka smiled"]) == pytest.approx(np.log(4))
    assert tfidf.phrase_informativeness("quokka", []) == pytest.approx(np.log(4))
    assert tfidf.phrase_informativeness("quokka", ["a quokka smiled"]) > tfidf.phrase_informativeness(
        "the cat", ["the cat sat"])
    assert word_diversity(["world cup", "world record", "cup final"]) == pytest.approx(4 / 6)
    assert word_diversity([]) == 0.0


def test_ccl_pairs_by_topic_join_different_mentions_of_one_pseudo_label():
    from contrastext.methods.uctopic.topics import PseudoLabels

    instances = _instances(["a", "a", "b", "c", "d"])
    labels = PseudoLabels(np.array([0, 0, 0, 1, 1]), central=5, labelled_mentions=4)
    rows = ccl_pairs(instances, labels, positives="topic", mask_keep_probability=0.5, seed=0)
    assert len(rows) == 5
    for row in rows:
        anchor = row["anchor"][row["anchor_start"]:row["anchor_end"]]
        positive = row["positive"][row["positive_start"]:row["positive_end"]]
        assert anchor != positive  # another mention...
        assert {anchor, positive} <= ({"a", "b"} if row["topic"] == 0 else {"c", "d"})  # ...of the same topic
        assert row["anchor_mask"] or row["positive_mask"]
    with pytest.raises(ValueError, match="positives"):
        ccl_pairs(instances, labels, positives="cluster")
