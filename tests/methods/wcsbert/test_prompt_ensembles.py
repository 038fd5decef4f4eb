"""Several prompt templates per label: each label string is the renormalised mean of its prompts' unit
embeddings, everywhere labels are scored; training pairs take the first template."""

import numpy as np
import pytest
from pydantic import ValidationError

from contrastext.methods.wcsbert.config import LabelsConfig, WCSBertConfig
from contrastext.methods.wcsbert.pseudo_labels import PseudoLabels
from contrastext.methods.wcsbert.pseudo_pairs import label_prompts, text_pairs
from contrastext.methods.wcsbert.scoring import embed_label_strings, label_prompt_vectors, scan_pool
from contrastext.models import TextEncoder
from contrastext.zeroshot import LabelSet, ZeroShotClassifier, validate_templates

TEMPLATES = ["{label}", "A news article about {label}.", "This topic is talk about {label}"]
LABEL_SET = LabelSet(("World", "Sci/Tech"), (("World",), ("Science", "Technology")))


@pytest.fixture(scope="module")
def encoder(tiny_encoder_dir):
    return TextEncoder.from_pretrained(tiny_encoder_dir, device="cpu")


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _direct(encoder, templates, strings) -> np.ndarray:
    """Each string's prompts embedded one template at a time, unit-normalised, averaged, renormalised."""
    per_template = [_unit(np.asarray(encoder.encode([t.replace("{label}", s) for s in strings]), np.float64))
                    for t in templates]
    return _unit(np.mean(per_template, axis=0))


def test_an_ensembles_label_vector_is_the_renormalised_mean_of_its_prompts(encoder):
    strings, _ = LABEL_SET.flat()
    got = embed_label_strings(encoder, LABEL_SET, TEMPLATES)
    np.testing.assert_allclose(got, _direct(encoder, TEMPLATES, strings), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
    # it is neither template alone
    for template in TEMPLATES:
        alone = _unit(embed_label_strings(encoder, LABEL_SET, template))
        assert np.abs(got - alone).max() > 1e-3
    # a label's prompt vector is the mean over its aliases' ensembles
    vectors = label_prompt_vectors(encoder, LABEL_SET, TEMPLATES)
    np.testing.assert_allclose(vectors[1], got[1:].mean(axis=0), atol=1e-6)


def test_one_template_is_embedded_as_before(encoder):
    strings, _ = LABEL_SET.flat()
    raw = np.asarray(encoder.encode([f"News about {s}." for s in strings]), np.float32)
    for template in ("News about {label}.", ["News about {label}."]):
        np.testing.assert_allclose(embed_label_strings(encoder, LABEL_SET, template), raw, atol=1e-6)


def test_scores_are_cosines_to_the_ensemble_best_alias_wins(encoder):
    texts = ["the striker scored twice", "a new phone chip", "peace talks in the capital"]
    embeddings = np.asarray(encoder.encode(texts), np.float32)
    classifier = ZeroShotClassifier(encoder, template=TEMPLATES)
    scores = classifier.score_embeddings(embeddings, LABEL_SET)
    ensemble = _direct(encoder, TEMPLATES, LABEL_SET.flat()[0])
    cosines = _unit(embeddings.astype(np.float64)) @ ensemble.T
    want = np.stack([cosines[:, 0], cosines[:, 1:].max(axis=1)], axis=1)
    np.testing.assert_allclose(scores, want, atol=1e-5)
    # the pool scan (the job's scoring) gives the same scores
    pool = scan_pool([(np.arange(3), embeddings)], embed_label_strings(encoder, LABEL_SET, TEMPLATES),
                     LABEL_SET.flat()[1], 2)
    np.testing.assert_allclose(pool.scores, scores, atol=1e-6)
    # cached per template list: the same ensemble again embeds nothing
    misses = classifier.cache_misses
    classifier.alias_embeddings(LABEL_SET)
    assert classifier.cache_misses == misses and classifier.cache_hits >= 1


def test_pairs_under_an_ensemble_take_the_first_templates_prompt():
    config = LabelsConfig(names=["World", "Sci/Tech"], aliases={"Sci/Tech": ["Science", "Technology"]},
                          templates=["A news article about {label}.", "{label}"])
    assert config.prompts == ("A news article about {label}.", "{label}")
    assert config.pair_template == "A news article about {label}."
    alias = np.array([[0, 1], [0, 0], [0, 1]])
    pseudo = PseudoLabels(label=np.array([1, 0, 1]), score=np.ones(3), confidence=np.array([0.9, 0.8, 0.7]),
                          alias=alias, kept=np.arange(3))
    pairs = text_pairs(["t0", "t1", "t2"], pseudo, LABEL_SET, config.pair_template)
    assert pairs.positives == ["A news article about Technology.", "A news article about World.",
                               "A news article about Technology."]
    assert label_prompts(LABEL_SET, config.pair_template) == [
        ["A news article about World."], ["A news article about Science.", "A news article about Technology."]]


def test_the_job_scores_and_evaluates_with_the_ensemble():
    from contrastext.methods.wcsbert.evaluation import baseline_schemes, label_scheme

    config = WCSBertConfig(labels=LabelsConfig(names=["World", "Sports"], aliases={}, templates=TEMPLATES[:2]))
    assert label_scheme(config).template == tuple(TEMPLATES[:2])
    schemes = baseline_schemes(config)
    assert [(s.name, s.template) for s in schemes] == [("labels only, 2 labels", "{label}"),
                                                       ("2 prompts, 2 labels", tuple(TEMPLATES[:2]))]
    # one template, as before
    single = WCSBertConfig(labels=LabelsConfig(names=["World", "Sports"], aliases={}, template=TEMPLATES[2]))
    assert single.labels.prompts == (TEMPLATES[2],) and single.labels.pair_template == TEMPLATES[2]
    assert [s.name for s in baseline_schemes(single)] == ["labels only, 2 labels", "prompt, 2 labels"]
    assert LabelsConfig().prompts == ("{label}",)


def test_templates_are_checked():
    with pytest.raises(ValidationError, match=r"labels.templates: .*must contain '\{label\}'.*'About it'"):
        LabelsConfig(templates=["{label}", "About it"])
    with pytest.raises(ValidationError, match=r"labels.template: .*must contain '\{label\}'"):
        LabelsConfig(template="no field")
    with pytest.raises(ValidationError, match="not both"):
        LabelsConfig(template="About {label}", templates=["{label}", "On {label}"])
    with pytest.raises(ValidationError, match="At least one"):
        LabelsConfig(templates=[])
    with pytest.raises(ValidationError, match="repeated"):
        LabelsConfig(templates=["{label}", "{label}"])
    with pytest.raises(ValidationError, match="only the '\\{label\\}' field"):
        LabelsConfig(templates=["{label} in {year}"])
    assert validate_templates("On {label}") == ("On {label}",)
