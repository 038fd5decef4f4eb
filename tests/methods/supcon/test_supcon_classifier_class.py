"""SupConClassifier on the tiny random encoder: three classes of texts drawn from disjoint vocabularies.
Before training the head guesses; after focal + supervised NT-Xent every held-out text is right and the
classes sit apart in the embedding space."""

import numpy as np
import pytest

from contrastext import SupConClassifier
from contrastext.methods.supcon.settings import default_classify_train
from contrastext.metrics.clustering import silhouette

VOCABULARY = {
    "sport": "striker goal match league coach referee stadium penalty keeper season".split(),
    "money": "bank rates inflation shares market bond profit loan budget tax".split(),
    "tech": "phone screen battery chip software laptop camera app cloud robot".split(),
}


def _texts(per_class: int, seed: int) -> tuple[list[str], list[str]]:
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for label, words in VOCABULARY.items():
        for _ in range(per_class):
            texts.append(" ".join(rng.choice(words, size=6)))
            labels.append(label)
    return texts, labels


def _accuracy(predicted, gold) -> float:
    return float(np.mean(np.array(predicted) == np.array(gold)))


@pytest.fixture(scope="module")
def trained(ray_session, tiny_encoder_dir, tmp_path_factory):
    texts, labels = _texts(24, seed=0)
    train = default_classify_train().model_copy(update={"batch_size": 12, "log_every_steps": 1})
    model = SupConClassifier(str(tiny_encoder_dir), ntxent_weight=1.0, epochs=4, lr=1e-3, head_lr=0.05,
                             train=train, work_dir=tmp_path_factory.mktemp("supcon"))
    return model.fit(texts, labels)


@pytest.mark.ray
@pytest.mark.slow
def test_training_separates_held_out_texts_of_three_classes(trained, tiny_encoder_dir):
    import torch

    from contrastext.models.classifier import TextClassifier

    texts, gold = _texts(10, seed=1)
    classes = sorted(VOCABULARY)
    torch.manual_seed(0)  # the new head's initial weights
    untrained = TextClassifier.from_pretrained(str(tiny_encoder_dir), num_labels=3)
    before = _accuracy([classes[i] for i in untrained.predict(texts).labels], gold)
    assert trained.classes_ == classes
    assert _accuracy(trained.predict(texts), gold) == 1.0
    assert before < 0.7, before
    # supervised NT-Xent pulls each class together in the embedding space the head reads
    codes = [classes.index(g) for g in gold]
    assert silhouette(trained.transform(texts), codes) > silhouette(untrained.encoder.encode(texts), codes) + 0.2


@pytest.mark.ray
@pytest.mark.slow
def test_probabilities_save_and_load(trained, tmp_path):
    texts, _ = _texts(3, seed=2)
    proba = trained.predict_proba(texts)
    assert proba.shape == (9, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-5)
    assert [trained.classes_[i] for i in proba.argmax(axis=1)] == trained.predict(texts)
    loaded = SupConClassifier.load(trained.save(tmp_path / "model"))
    assert loaded.classes_ == trained.classes_
    np.testing.assert_allclose(loaded.predict_proba(texts), proba, atol=1e-5)


def test_wrong_use_is_refused():
    with pytest.raises(ValueError, match="2 texts but 1 labels"):
        SupConClassifier().fit(["a", "b"], ["x"])
    with pytest.raises(ValueError, match="two distinct labels"):
        SupConClassifier().fit(["a", "b"], ["x", "x"])
    with pytest.raises(ValueError, match=r"labels not among classes: \['y'\]"):
        SupConClassifier().fit(["a", "b"], ["x", "y"], classes=["x", "z"])
    with pytest.raises(ValueError, match="two distinct labels"):
        SupConClassifier().fit(["a", "b"], ["x", "y"], classes=["x", "y", "x"])
    with pytest.raises(RuntimeError, match="fit"):
        SupConClassifier().predict(["a"])
    with pytest.raises(ValueError, match="both 0"):
        SupConClassifier(ntxent_weight=0, focal_weight=0)


def test_zero_epochs_or_rates_are_refused_not_replaced_by_the_defaults():
    from pydantic import ValidationError

    for setting, value in (("epochs", 0), ("lr", 0.0), ("head_lr", 0.0)):
        with pytest.raises(ValidationError, match=setting):
            SupConClassifier(**{setting: value}).train_config(3, "m")
    given = SupConClassifier(epochs=3, lr=1e-4, head_lr=1e-3).train_config(3, "m")
    assert (given.epochs, given.optimizer.lr, given.classifier.head_lr) == (3, 1e-4, 1e-3)
    default = default_classify_train()
    plain = SupConClassifier().train_config(3, "m")
    assert (plain.epochs, plain.optimizer.lr) == (default.epochs, default.optimizer.lr)


def test_the_class_and_the_jobs_variants_share_one_settings_object_and_its_defaults():
    from contrastext.methods.supcon.settings import ClassifyLoss, SupConSettings
    from contrastext.methods.supcon.config import SupconClassifyConfig, VariantConfig
    from contrastext.pipelines.supcon_classify import variant_model

    # a variant that sets nothing trains as the class does by default
    assert SupConClassifier().config == SupConSettings() == SupConSettings.given(VariantConfig(name="v"), {})
    assert SupConClassifier().loss == ClassifyLoss() and not SupConClassifier().reset_head
    given = SupConClassifier(ntxent_weight=2.0, gamma=1.0, epochs=3, reset_head=True)
    assert (given.loss.ntxent_weight, given.loss.gamma, given.loss.focal_weight, given.epochs, given.reset_head) == (
        2.0, 1.0, 1.0, 3, True)
    variant = VariantConfig(name="head", loss=ClassifyLoss(ntxent_weight=1.0), freeze_encoder=True, head_lr=0.01)
    model = variant_model(SupconClassifyConfig(variants=[variant]), variant, None)
    assert model.config == SupConSettings.given(variant, {}) and model.freeze_encoder and model.head_lr == 0.01
    assert SupConClassifier(config=variant, lr=1e-4).config.loss.ntxent_weight == 1.0  # keywords go over it
    assert SupConClassifier(loss=ClassifyLoss(gamma=0.5), focal_weight=2.0).loss == ClassifyLoss(gamma=0.5,
                                                                                                 focal_weight=2.0)
    with pytest.raises(TypeError, match="unknown settings .'layers'.*ntxent_weight"):
        SupConClassifier(layers=2)
    with pytest.raises(ValueError, match="trains nothing"):
        SupConClassifier(freeze_encoder=True, focal_weight=0.0, ntxent_weight=1.0)

