"""The WC-SBERT job with a prompt ensemble, label-prior calibration and same-label text pairs (tiny random
encoder, plain-text pool): the round's pseudo-labels are the calibrated ones, its prompt pairs' positives the
first template's prompts, and its text pairs join kept texts of one pseudo-label."""

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from contrastext.config import load_config
from contrastext.methods.wcsbert.calibration import calibrate, prior_shift
from contrastext.methods.wcsbert.config import WCSBertConfig
from contrastext.methods.wcsbert.pseudo_labels import select
from contrastext.methods.wcsbert.scoring import score_pool
from contrastext.methods.wcsbert.evaluation import label_scheme
from contrastext.pipelines.wcsbert import run_wcsbert

pytestmark = [pytest.mark.ray, pytest.mark.slow]

NEWS = [("Sports", "the team won the football match and the cup final"),
        ("Business", "shares fell as the company reported lower profits and sales"),
        ("World", "the president met foreign ministers to discuss the war and peace talks"),
        ("Sci/Tech", "a space probe sent back images of the planet to scientists")]
TEMPLATES = ["A news article about {label}.", "{label}"]


def test_an_ensemble_and_calibration_decide_what_the_round_trains_on(ray_session, tiny_encoder_dir, tmp_path):
    pool = tmp_path / "pool.jsonl"
    pool.write_text("".join(json.dumps({"text": f"{text} (report {i})"}) + "\n"
                            for i in range(8) for _, text in NEWS), encoding="utf-8")
    config = load_config(WCSBertConfig, overrides=[
        "labels.names=[World, Sports, Business, Sci/Tech]", "labels.aliases={Sci/Tech: [Science, Technology]}",
        f"labels.templates=[{', '.join(repr(t) for t in TEMPLATES)}]",
        "rounds.calibration.enabled=true", "rounds.calibration.temperature=0.01",
        "rounds.text_positives.same_label=true",
        f"encoder.model={tiny_encoder_dir}", f"output.storage_path={tmp_path / 'runs'}", "output.name=options",
        "pretrain.enabled=false", "pool.source=texts", f"pool.texts={{path: {pool}}}", "pool.half=null",
        "pool.max_rows=null", "rounds.rounds=1", "rounds.guard=false", "rounds.pseudo_labels=prompts",
        "rounds.train.max_steps=2", "rounds.train.batch_size=8", "encode.batch_size=16", "evaluation.texts=null",
        "plots=false"])
    summary = run_wcsbert(config)
    (record,) = summary["rounds"]
    assert summary["templates"] == TEMPLATES and summary["template"] == TEMPLATES[0]
    assert label_scheme(config).template == tuple(TEMPLATES)

    # the round's pseudo-labels, recomputed: the ensemble's prompt scores, calibrated, then selected
    run = Path(summary["final_model"]).parents[1]
    label_set = label_scheme(config).label_set(config.labels.names)
    encoder = config.encoder.load(max_length=summary["read_tokens"]["tokens"])
    scores = score_pool(run / "round_0" / "embeddings", encoder, label_set, config.labels.prompts)
    counts = np.bincount(scores.scores.argmax(axis=1), minlength=4)
    assert list(record["teacher_shares"].values()) == pytest.approx((counts / counts.sum()).tolist(), abs=1e-6)
    shift = prior_shift(counts, 0.01)
    assert list(record["calibration_shift"].values()) == pytest.approx(shift.tolist(), abs=1e-6)
    calibrated = select(calibrate(scores.scores, config.rounds.calibration).scores, config.rounds.selection)
    plain = select(scores.scores, config.rounds.selection)
    names = config.labels.names
    assert record["kept_per_label"] == dict(zip(names, calibrated.kept_per_label(4).tolist()))
    assert record["kept_per_label"] != dict(zip(names, plain.kept_per_label(4).tolist()))

    pairs = pq.read_table(run / "round_1" / "pairs").to_pylist()
    first = {TEMPLATES[0].format(label=a) for a in ("World", "Sports", "Business", "Science", "Technology")}
    prompt_pairs = [p for p in pairs if p["positive"] in first]
    text_pairs = [p for p in pairs if p["positive"] not in first]
    assert prompt_pairs and len(text_pairs) == record["text_pairs"] == len(pairs) - len(prompt_pairs)
    kept = calibrated.kept_per_label(4)
    assert np.bincount([p["label"] for p in prompt_pairs], minlength=4).tolist() == kept.tolist()
    # a same-label pair for every kept text of a label that kept two or more
    assert len(text_pairs) == int(kept[kept >= 2].sum())
    pool_texts = {f"{text} (report {i})" for i in range(8) for _, text in NEWS}
    label_of = dict(zip(sorted(pool_texts), [None] * len(pool_texts)))
    for p in prompt_pairs:
        label_of[p["anchor"]] = p["label"]
    for p in text_pairs:
        assert p["anchor"] != p["positive"] and label_of[p["anchor"]] == label_of[p["positive"]] == p["label"]
    assert "2 prompts ensembled" in (run / "report.md").read_text(encoding="utf-8")
