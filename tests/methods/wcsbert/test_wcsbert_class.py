"""WCSBert: self-training on unlabelled AG News texts (the bundled MiniLM) beats the untrained zero-shot
model on held-out texts; the round-0 model is the plain zero-shot classifier; save and load round-trip."""

import numpy as np
import pytest
from conftest import AG_NEWS_ALIASES, AG_NEWS_LABELS, AG_NEWS_MAX_LENGTH, AG_NEWS_TEMPLATE

from contrastext import WCSBert

LABELS, ALIASES, TEMPLATE = AG_NEWS_LABELS, AG_NEWS_ALIASES, AG_NEWS_TEMPLATE


@pytest.fixture(scope="module")
def ag_news(ag_news_split):
    """400 pool texts (their labels never given to the model) and 400 other texts to evaluate on, seeded."""
    return ag_news_split


def _accuracy(model: WCSBert, texts, gold) -> float:
    return float(np.mean(np.array(model.predict(texts)) == gold))


@pytest.fixture(scope="module")
def untrained(ag_news):
    pool, _, _ = ag_news
    # the plain zero-shot classifier: no round, the label prompts (no other head for the guard to choose)
    return WCSBert(rounds=0, template=TEMPLATE, max_length=AG_NEWS_MAX_LENGTH, heads=["prompts"]).fit(
        pool, LABELS, ALIASES)


@pytest.fixture(scope="module")
def self_trained(self_trained_wcsbert):
    return self_trained_wcsbert


@pytest.mark.integration
def test_round_zero_is_the_untrained_zero_shot_classifier(untrained, ag_news):
    from contrastext.zeroshot import ZeroShotClassifier

    _, held_out, _ = ag_news
    expected = ZeroShotClassifier(untrained.encoder_, template=TEMPLATE).predict(held_out[:50], LABELS, ALIASES)
    assert untrained.predict(held_out[:50]) == expected
    assert untrained.history_ == []


@pytest.mark.integration
def test_with_no_round_the_guard_chooses_the_untrained_models_head(untrained, ag_news):
    """rounds=0 with the default heads: the guard scores the untrained model's prompts, its pool prototypes and
    their blend, and delivers the prototypes where they score clearly higher than the prompts (on AG News they
    do, and are more accurate), else the prompts."""
    from contrastext.methods.wcsbert.guard import PROTOTYPE_MARGIN

    pool, held_out, gold = ag_news
    chosen = WCSBert(rounds=0, template=TEMPLATE, max_length=AG_NEWS_MAX_LENGTH).fit(pool, LABELS, ALIASES)
    heads = chosen.guard_round_0_["guard_heads"]
    assert chosen.history_ == [] and chosen.chosen_round_ == 0 and set(heads) == {"prompts", "prototypes", "blend"}
    assert chosen.chosen_head_ == chosen.head.kind == (
        "prototypes" if heads["prototypes"] > heads["prompts"] + PROTOTYPE_MARGIN else "prompts")
    assert chosen.chosen_head_ == "prototypes", heads  # measured: guard 0.52 prompts, 0.69 prototypes
    # measured: 0.858 against the prompts' 0.703
    assert _accuracy(chosen, held_out, gold) > _accuracy(untrained, held_out, gold) + 0.05
    np.testing.assert_allclose(chosen.encoder_.encode(held_out[:5]), untrained.encoder_.encode(held_out[:5]), atol=1e-6)


@pytest.mark.integration
@pytest.mark.ray
@pytest.mark.slow
def test_one_round_of_self_training_beats_the_untrained_model_on_held_out_texts(untrained, self_trained, ag_news):
    _, held_out, gold = ag_news
    before, after = _accuracy(untrained, held_out, gold), _accuracy(self_trained, held_out, gold)
    # measured: 0.703 untrained at 64 tokens (0.705 at 128); one round on 400 pool texts adds about 0.1
    assert before == pytest.approx(0.703, abs=0.03)
    assert after >= before + 0.05, (before, after)
    (record,) = self_trained.history_
    # each kept text paired with its label's prompt and (the default) with another kept text of its label
    assert record["round"] == 1 and 150 <= record["kept"] <= 200
    assert record["pairs"] == record["kept"] + record["text_pairs"] and record["text_pairs"] == record["kept"]
    assert record["steps"] == int(np.ceil(record["pairs"] / 32))
    # the guard keeps the round, delivered with the blend of its prompts and its prototypes
    assert self_trained.chosen_round_ == 1 and self_trained.chosen_head_ == self_trained.head.kind == "blend"
    assert set(record["guard_heads"]) == {"prompts", "prototypes", "blend"} and record["head"] == "blend"


@pytest.mark.integration
@pytest.mark.ray
@pytest.mark.slow
def test_predict_proba_rows_are_distributions_that_agree_with_predict(self_trained, ag_news):
    _, held_out, _ = ag_news
    texts = held_out[:40]
    proba = self_trained.predict_proba(texts)
    assert proba.shape == (40, 4) and proba.dtype == np.float32
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-5)
    assert [LABELS[i] for i in proba.argmax(axis=1)] == self_trained.predict(texts)


@pytest.mark.integration
@pytest.mark.ray
@pytest.mark.slow
def test_save_and_load_give_the_same_predictions(self_trained, ag_news, tmp_path):
    from sentence_transformers import SentenceTransformer

    _, held_out, _ = ag_news
    folder = self_trained.save(tmp_path / "model")
    loaded = WCSBert.load(folder)
    assert loaded.labels == LABELS and loaded.template == TEMPLATE and loaded.aliases_ == ALIASES
    np.testing.assert_allclose(loaded.predict_proba(held_out[:20]), self_trained.predict_proba(held_out[:20]),
                               atol=1e-5)
    # settings given to load win over the saved ones
    other = WCSBert.load(folder, templates=["News about {label}.", "{label}"], temperature=0.5)
    assert other.prompts == ("News about {label}.", "{label}") and other.temperature == 0.5
    assert WCSBert.load(folder, template="{label} news").prompts == ("{label} news",)
    # "auto" is for the next fit: the saved model still reads the length it was fitted at
    again = WCSBert.load(folder, max_length="auto")
    assert again.max_length == "auto" and again.max_length_ == loaded.max_length_ == self_trained.max_length_
    # the folder is a sentence-transformers model
    vectors = SentenceTransformer(str(folder), device="cpu").encode(held_out[:3])
    np.testing.assert_allclose(vectors, self_trained.encoder_.encode(held_out[:3]), atol=1e-4)


class KeywordTeacher:
    """A user's own teacher: a label's score is 1 where the text names one of its keywords (a weak labeller)."""

    def __init__(self, texts, keywords):
        self.scores_ = np.array([[float(any(k in text.lower() for k in words)) for words in keywords]
                                 for text in texts], dtype=np.float32)

    def scores(self, embeddings, prompt_scores, label_vectors):
        assert len(embeddings) == len(prompt_scores) == len(self.scores_)
        return self.scores_


@pytest.mark.ray
@pytest.mark.slow
def test_the_teacher_given_chooses_the_pseudo_labels(ray_session, tiny_encoder_dir, tmp_path):
    """The tiny random encoder's prompts put every text under one label; a keyword teacher spreads them, and
    the round keeps the items that teacher's scores select."""
    from conftest import NEWS_DOCUMENTS

    from contrastext.methods.wcsbert.pseudo_labels import select

    texts = NEWS_DOCUMENTS * 4
    labels = ["Football", "Finance", "Phones"]
    teacher = KeywordTeacher(texts, [("striker", "league"), ("interest", "bank"), ("smartphone",)])
    model = WCSBert(str(tiny_encoder_dir), teacher=teacher, rounds=1, heads=["prototypes"],
                    work_dir=tmp_path).fit(texts, labels)
    expected = select(teacher.scores_, model.selection)
    assert model.history_[0]["kept_per_label"] == {"Football": 4, "Finance": 4, "Phones": 4}
    assert model.history_[0]["kept"] == len(expected.kept) == 12
    untrained = WCSBert(str(tiny_encoder_dir), rounds=0, heads=["prompts"]).fit(texts, labels)
    prompts = select(untrained.scores(texts), model.selection)
    assert len(set(prompts.label.tolist())) == 1  # what the prompt teacher would have trained on
    assert set(model.predict(texts)) <= set(labels)

    # the only head asked for is delivered: the prototypes of the kept model's labels, saved and loaded as such
    from contrastext.methods.wcsbert.heads import saved_head

    assert model.chosen_head_ == model.head.kind == model.history_[0]["head"] == "prototypes"
    loaded = WCSBert.load(model.save(tmp_path / "saved"))
    assert loaded.head.kind == loaded.chosen_head_ == "prototypes" and loaded.predict(texts) == model.predict(texts)
    label_set, _, vectors = saved_head(tmp_path / "saved")  # what Serve primes the model's own labels with
    assert label_set.labels == tuple(labels) and np.array_equal(vectors, model.head.vectors)


def test_an_encoder_object_is_read_at_the_models_length(tiny_encoder_dir):
    """max_length governs the given encoder object as it governs a spec, so the untrained model (the round-0
    teacher and guard) reads what the trained rounds read; the caller's object keeps its own length."""
    from conftest import NEWS_DOCUMENTS

    from contrastext.models import TextEncoder

    given = TextEncoder.from_pretrained(tiny_encoder_dir)
    texts, labels = NEWS_DOCUMENTS * 2, ["Football", "Finance", "Phones"]
    # with two heads the guard scores the untrained model, and chooses its head, at the length asked
    untrained = WCSBert(given, rounds=0, heads=["prompts", "prototypes"], max_length=8).fit(texts, labels)
    assert untrained.encoder_.max_length == 8 and given.max_length == 64
    as_spec = WCSBert(str(tiny_encoder_dir), rounds=0, heads=["prompts", "prototypes"], max_length=8).fit(
        texts, labels)
    assert untrained.guard_round_0_ == as_spec.guard_round_0_ and untrained.chosen_head_ == as_spec.chosen_head_
    np.testing.assert_allclose(untrained.scores(texts), as_spec.scores(texts), atol=1e-5)


def test_wrong_use_is_refused():
    with pytest.raises(ValueError, match="rounds"):
        WCSBert(rounds=-1)
    with pytest.raises(ValueError, match="{label}"):
        WCSBert(template="no field")
    with pytest.raises(RuntimeError, match="fit"):
        WCSBert().predict(["a text"])
    with pytest.raises(ValueError, match="list of strings"):
        WCSBert(rounds=0).fit("one string", LABELS)


def test_with_no_round_a_pool_of_one_text_delivers_the_prompts(tiny_encoder_dir):
    # the guard needs two texts to choose a head: one text gives the plain zero-shot classifier, as before
    model = WCSBert(str(tiny_encoder_dir), rounds=0, max_length=32).fit(["one text about a match"], LABELS)
    assert model.chosen_head_ == "prompts" and model.guard_round_0_ is None and len(model.predict(["goal"])) == 1


def test_the_class_stops_its_rounds_with_its_own_settings(tiny_encoder_dir, monkeypatch):
    from contrastext.methods.wcsbert import model as model_module

    made = []

    class Spy(model_module.RoundStop):
        def __init__(self, *args, **kwargs):
            made.append(kwargs)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(model_module, "RoundStop", Spy)
    texts = ["a match and a goal", "the bank's interest rate", "a new phone", "the league's striker"]
    WCSBert(str(tiny_encoder_dir), rounds=0, max_length=32, still_learning=0.3, min_change=0.2).fit(texts, LABELS)
    assert made and made[0]["still_learning"] == 0.3 and made[0]["min_change"] == 0.2


NEWS_LABELS = ["Football", "Finance", "Phones"]
NEWS_KEYWORDS = [("striker", "league"), ("interest", "bank"), ("smartphone",)]


@pytest.fixture(scope="module")
def news_untrained():
    """MiniLM's zero-shot labels of the six news documents: each its own topic."""
    from conftest import NEWS_DOCUMENTS

    model = WCSBert(rounds=0, heads=["prompts"]).fit(NEWS_DOCUMENTS * 4, NEWS_LABELS)
    assert model.predict(NEWS_DOCUMENTS) == [label for label in NEWS_LABELS for _ in range(2)]
    return model


@pytest.mark.integration
@pytest.mark.ray
@pytest.mark.slow
def test_the_guard_rolls_back_a_round_that_makes_the_model_worse(ray_session, news_untrained, tmp_path):
    """A teacher that names every topic after the next one: the round learns the wrong names, its labels stop
    sitting nearest their own names, the guard falls and the round-0 model is kept; fitting stops there."""
    from conftest import NEWS_DOCUMENTS

    from contrastext.config import OptimizerConfig
    from contrastext.methods.wcsbert.config import round_train

    texts = NEWS_DOCUMENTS * 4
    shifted = KeywordTeacher(texts, NEWS_KEYWORDS[1:] + NEWS_KEYWORDS[:1])
    train = round_train().model_copy(update={"epochs": 4, "batch_size": 8, "optimizer": OptimizerConfig(lr=1e-4)})
    model = WCSBert(teacher=shifted, rounds=3, train=train, heads=["prompts"], work_dir=tmp_path).fit(
        texts, NEWS_LABELS)

    (record,) = model.history_  # no round after the one that lowered the guard
    assert model.guard_round_0_["guard_anchored"] == 1.0
    assert record["guard_anchored"] < 1.0 and record["guard"] < model.guard_round_0_["guard"]
    assert model.chosen_round_ == 0 and "round-0 model" in model.stop_reason_
    np.testing.assert_allclose(model.scores(texts), news_untrained.scores(texts), atol=1e-6)
    # the round's own model (kept in work_dir) did learn the wrong names
    degraded = WCSBert(record["model"], rounds=0, heads=["prompts"]).fit(texts, NEWS_LABELS).predict(NEWS_DOCUMENTS)
    right = sum(p == t for p, t in zip(degraded, news_untrained.predict(NEWS_DOCUMENTS)))
    assert right <= 3, degraded


def test_the_class_and_the_job_share_one_settings_object_and_its_defaults():
    from contrastext.methods.wcsbert.config import RoundsConfig, WCSBertConfig
    from contrastext.methods.wcsbert.teachers import PromptTeacher, PrototypeTeacher
    from contrastext.pipelines.wcsbert import method_of

    job = WCSBertConfig()
    assert WCSBert().config.model_dump(exclude={"text_positives"}) == job.rounds.model_dump(exclude={"text_positives"})
    assert WCSBert().config.text_positives == job.rounds.text_positives.resolved(plain_texts=True)  # texts in memory
    from_job = method_of(job)
    assert from_job.config.model_dump(exclude={"text_positives", "train"}) == \
        job.rounds.model_dump(exclude={"text_positives", "train"})
    assert isinstance(WCSBert().teacher, PrototypeTeacher) and isinstance(from_job.teacher, PrototypeTeacher)
    # both read, by default, what their texts' length asks for (the job settles it from its pool before the
    # class sees it); a round trains on fewer tokens in both
    assert job.encoder.max_length == WCSBert().max_length == "auto"
    settled = job.model_copy(update={"encoder": job.encoder.model_copy(update={"max_length": 512})})
    assert method_of(settled).max_length == 512
    assert from_job.train.encoder.max_length == job.rounds.train.encoder.max_length == 64
    # a keyword is one field of the settings; the whole block works the same
    assert isinstance(WCSBert(pseudo_labels="prompts").teacher, PromptTeacher)
    assert WCSBert(rounds=3, heads="prompts").config.heads == ["prompts"] == WCSBert(heads=("prompts",)).config.heads
    assert WCSBert(heads=None).config.heads == RoundsConfig().heads
    # None is a setting of its own where it turns a rule off: the guard alone between trained rounds
    assert WCSBert(still_learning=None).config.still_learning is None
    assert WCSBert().config.still_learning == RoundsConfig().still_learning == 0.15
    both = WCSBert(config=RoundsConfig(rounds=3), patience=2).config
    assert (both.rounds, both.patience) == (3, 2)
    calibrated = RoundsConfig(calibration={"enabled": False, "iterations": 7})
    assert WCSBert(config=calibrated, calibration=True).calibration.model_dump() == \
        calibrated.calibration.model_copy(update={"enabled": True}).model_dump()
    with pytest.raises(TypeError, match="unknown settings \\['round'\\].*'rounds'"):
        WCSBert(round=3)
    with pytest.raises(ValueError, match="rounds"):
        WCSBert(rounds=-1)


def test_auto_reads_128_tokens_of_short_texts_and_512_of_long_ones():
    """``max_length="auto"``, the default: the median text of the pool decides, with no label read; the model's
    limit holds."""
    from conftest import NEWS_DOCUMENTS

    from contrastext.methods.wcsbert.read_length import median_tokens
    from contrastext.models import TextEncoder

    minilm = TextEncoder.from_pretrained("bundled:minilm")
    labels = ["Football", "Finance", "Phones"]
    short = WCSBert(minilm, rounds=0, heads=["prompts"], max_length="auto").fit(NEWS_DOCUMENTS, labels)
    assert short.max_length_ == short.encoder_.max_length == 128
    long_texts = [" ".join([text] * 12) for text in NEWS_DOCUMENTS]  # about 200 tokens each
    assert median_tokens(long_texts, minilm.tokenizer) > 128 > median_tokens(NEWS_DOCUMENTS, minilm.tokenizer)
    long = WCSBert(minilm, rounds=0, heads=["prompts"]).fit(long_texts, labels)
    assert long.max_length_ == long.encoder_.max_length == 512 and minilm.max_length != 512
    # what is read shows in the scores: 512 tokens of a long text is not its first 128
    assert not np.allclose(long.scores(long_texts), short.scores(long_texts), atol=1e-3)
    for wrong in ("long", 0, -5):
        with pytest.raises(ValueError, match="max_length"):
            WCSBert(max_length=wrong)
