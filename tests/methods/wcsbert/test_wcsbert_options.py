"""WCSBert's prompt ensembles and label-prior calibration: what a round is given to train on (the training
itself is replaced by one that records its rows and hands the start model back)."""

from types import SimpleNamespace

import numpy as np
import pytest

from contrastext import WCSBert
from contrastext.methods.wcsbert.calibration import CalibrationConfig

LABELS = ["World", "Sports", "Business", "Tech"]
TEMPLATES = ["A news article about {label}.", "{label}"]
PER_GROUP, CLOSE = 15, 11


def _swallowed_scores() -> np.ndarray:
    """Group g's rows score 0.6 for label g; label 0 wins CLOSE rows of every other group by 0.01 (80%)."""
    scores = np.full((4 * PER_GROUP, 4), 0.4, dtype=np.float32)
    for row in range(len(scores)):
        group, i = divmod(row, PER_GROUP)
        scores[row, group] = 0.6
        if group and i < CLOSE:
            scores[row, group], scores[row, 0] = 0.52, 0.53
    return scores


class FixedTeacher:
    def scores(self, embeddings, prompt_scores, label_vectors):
        assert len(embeddings) == len(prompt_scores) == 4 * PER_GROUP
        return _swallowed_scores()


TEXTS = [f"report {row} of group {row // PER_GROUP}" for row in range(4 * PER_GROUP)]


@pytest.fixture
def trained_rows(monkeypatch, tiny_encoder_dir):
    """Every round's training rows; the 'trained' model is the start model."""
    class Recorded(list):
        configs: list = []  # each round's training settings

    rows = Recorded()

    def fit_rows(round_rows, config, work_dir, name, **where):
        rows.append(round_rows)
        rows.configs.append(config)
        return SimpleNamespace(model_path=str(tiny_encoder_dir), steps=0)

    monkeypatch.setattr("contrastext.methods.wcsbert.model.fit_rows", fit_rows)
    return rows


def _fit(tiny_encoder_dir, tmp_path, **options) -> WCSBert:
    """A round of prompt pairs only, unless ``options`` ask for text pairs."""
    from contrastext.methods.wcsbert.text_positives import TextPositivesConfig

    options.setdefault("text_positives", TextPositivesConfig(same_label=False))
    return WCSBert(str(tiny_encoder_dir), teacher=FixedTeacher(), rounds=1, guard=False, work_dir=tmp_path,
                   **options).fit(TEXTS, LABELS)


def test_calibration_trains_every_group_under_its_own_label(trained_rows, tiny_encoder_dir, tmp_path):
    plain = _fit(tiny_encoder_dir, tmp_path, templates=TEMPLATES)
    calibrated = _fit(tiny_encoder_dir, tmp_path, templates=TEMPLATES, calibration=True)
    assert calibrated.calibration == CalibrationConfig(enabled=True)
    # the selection's balance cap leaves label 0 its clearest rows and the others their two best
    assert plain.history_[0]["kept_per_label"] == {"World": 4, "Sports": 2, "Business": 2, "Tech": 2}
    assert calibrated.history_[0]["kept_per_label"] == {"World": 7, "Sports": 7, "Business": 7, "Tech": 7}
    assert list(calibrated.history_[0]["teacher_shares"].values()) == pytest.approx([0.8, 1 / 15, 1 / 15, 1 / 15])
    plain_rows, calibrated_rows = trained_rows
    assert len(plain_rows) == 10 and len(calibrated_rows) == 28
    for row in calibrated_rows:  # every text is paired with its own group's label, in the first template
        group = int(row["anchor"].rsplit(" ", 1)[1])
        assert row["positive"] == f"A news article about {LABELS[group]}."


def test_an_ensemble_scores_by_the_mean_prompt_and_pairs_take_the_first(trained_rows, tiny_encoder_dir, tmp_path):
    from contrastext.zeroshot import LabelSet, ZeroShotClassifier

    model = _fit(tiny_encoder_dir, tmp_path, templates=TEMPLATES)
    assert model.template == TEMPLATES[0] and model.prompts == tuple(TEMPLATES)
    assert {row["positive"] for row in trained_rows[0]} <= {f"A news article about {label}." for label in LABELS}
    encoder = model.encoder_
    texts = TEXTS[:5]
    unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    ensemble = unit(sum(unit(np.asarray(encoder.encode([t.format(label=label) for label in LABELS]), np.float64))
                        for t in TEMPLATES))
    want = unit(np.asarray(encoder.encode(texts), np.float64)) @ ensemble.T
    np.testing.assert_allclose(model.scores(texts), want, atol=1e-5)
    single = ZeroShotClassifier(encoder, template=TEMPLATES[0]).scores(texts, LABELS, auto_aliases=False)
    assert np.abs(model.scores(texts) - single).max() > 1e-3
    # saved and loaded, the ensemble is kept
    loaded = WCSBert.load(model.save(tmp_path / "saved"))
    assert loaded.templates == tuple(TEMPLATES) and loaded.template == TEMPLATES[0]
    np.testing.assert_allclose(loaded.scores(texts), model.scores(texts), atol=1e-6)
    assert LabelSet.build(LABELS).labels == tuple(loaded.labels)


def test_defaults_are_one_template_and_no_calibration():
    model = WCSBert()
    assert model.prompts == ("{label}",) and model.templates is None
    assert model.calibration.enabled is False


def test_wrong_options_are_refused():
    with pytest.raises(ValueError, match="not both"):
        WCSBert(template="About {label}", templates=TEMPLATES)
    with pytest.raises(ValueError, match="must contain '\\{label\\}'"):
        WCSBert(templates=["{label}", "no field"])
    with pytest.raises(ValueError, match="At least one"):
        WCSBert(templates=[])


def test_text_positives_add_text_pairs_to_what_a_round_trains(trained_rows, tiny_encoder_dir, tmp_path):
    from contrastext.methods.wcsbert.text_positives import TextPositivesConfig

    # every word of a text its own, so a span names the text it came from
    texts = [f"{text} " + " ".join(f"w{row}x{k}" for k in range(6)) for row, text in enumerate(TEXTS)]
    fit = lambda **options: WCSBert(str(tiny_encoder_dir), teacher=FixedTeacher(), rounds=1, guard=False,  # noqa: E731
                                    work_dir=tmp_path, calibration=True, **options).fit(texts, LABELS)
    plain = fit(text_positives=TextPositivesConfig(same_label=False))
    both = fit(text_positives=TextPositivesConfig(crops=True, same_label=True, min_words=4))
    plain_rows, both_rows = trained_rows
    assert plain.history_[0]["text_pairs"] == 0 and len(plain_rows) == 28
    # with text pairs, pairs of one pseudo-label are not each other's negatives
    assert [config.group_column for config in trained_rows.configs] == [None, "label"]
    assert all(row["label"] == row_label for row, row_label in
               ((r, LABELS.index(r["positive"])) for r in both_rows if r["positive"] in LABELS))
    # 28 kept texts: 28 crop pairs and 28 same-label pairs beside the same 28 prompt pairs
    assert both.history_[0]["text_pairs"] == 56 and len(both_rows) == 84
    assert {tuple(r.values()) for r in plain_rows} < {tuple(r.values()) for r in both_rows}
    prompts = {f"{label}" for label in LABELS}
    text_rows = [r for r in both_rows if r["positive"] not in prompts]
    group = {text: row // PER_GROUP for row, text in enumerate(texts)}
    crops = [r for r in text_rows if r["anchor"] not in group]
    same = [r for r in text_rows if r["anchor"] in group]
    assert len(crops) == len(same) == 28
    for row in crops:  # two different spans of one text
        source = [t for t in texts if set(row["anchor"].split()) | set(row["positive"].split()) <= set(t.split())]
        assert len(source) == 1 and row["anchor"] != row["positive"]
    for row in same:  # two different texts of one group (calibrated: each group under its own label)
        assert row["positive"] in group and row["anchor"] != row["positive"]
        assert group[row["anchor"]] == group[row["positive"]]
