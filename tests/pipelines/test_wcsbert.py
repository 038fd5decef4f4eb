"""The WC-SBERT job on a local Ray with the tiny random encoder: a plain-text pool split in halves, and the
job's refusals. The whole chain on the dump sample (every stage, a second run that skips them) is
``test_wcsbert_chain.py``, on several nodes and object storage."""

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from wcsbert_tiny import labelled_file, tiny_settings

from contrastext.config import load_config
from contrastext.data.sources import TextSource, load_texts
from contrastext.methods.wcsbert.config import WCSBertConfig
from contrastext.pipelines.wcsbert import run_wcsbert
from contrastext.stages import fingerprint
from contrastext.vectors import unit_rows


@pytest.mark.ray
@pytest.mark.slow
def test_text_pool_trains_only_on_its_half(ray_session, tiny_encoder_dir, tmp_path):
    pool_file = labelled_file(tmp_path / "pool.jsonl", copies=6)
    config = load_config(WCSBertConfig, overrides=[
        *tiny_settings(model=tiny_encoder_dir, storage_path=tmp_path / "runs", name="texts", evaluation=pool_file),
        "pretrain.enabled=false", "rounds.rounds=1", "pool.source=texts", "pool.half=first", "pool.split_seed=0",
        f"pool.texts={{path: {pool_file}, label_column: label}}", "pool.max_rows=null", "evaluation.half=second",
        "evaluation.baselines=false", "rounds.pseudo_labels=prototypes", "evaluation.prototype_iterations=3"])
    summary = run_wcsbert(config)
    assert summary["rounds"][0]["pseudo_labels"] == "prototypes"
    assert json.loads((tmp_path / "runs" / "texts" / "label_prototypes.json").read_text())["iterations"] == 3
    data = load_texts(TextSource(path=str(pool_file), label_column="label"))
    first, second = data.split_halves(0)
    # the final model's pool prototypes, as saved, classify the evaluation half with the reported accuracy
    prototypes = unit_rows(np.load(tmp_path / "runs" / "texts" / "label_prototypes.npy"))
    # the job read what encoder.max_length=auto settles for these short texts
    read = summary["read_tokens"]
    assert read["asked"] == "auto" and read["median_tokens"] <= 128 and read["tokens"] == 128
    final = config.encoder.load(summary["final_model"], max_length=summary["read_tokens"]["tokens"])
    nearest = (unit_rows(final.encode(second.texts)) @ prototypes.T).argmax(axis=1)
    by_prototypes = np.mean([config.labels.names[i] == label for i, label in zip(nearest, second.labels)])
    assert summary["final"]["prototypes"]["accuracy"] == pytest.approx(float(by_prototypes), abs=1e-9)
    assert summary["corpus"] is None and summary["pretrain"] is None
    assert summary["pool_rows"] == len(first) and f"{len(second)} rows" in summary["evaluation_set"]
    pairs = pq.read_table(tmp_path / "runs" / "texts" / "round_1" / "pairs").to_pylist()
    assert pairs and {p["anchor"] for p in pairs} <= set(first.texts)
    assert not {p["anchor"] for p in pairs} & set(second.texts)

    # a round setting changed: the round trains again, and the pool's embeddings and the evaluation in its
    # folder are made again from the new model (same paths, another model: neither earlier one is reused)
    selection = config.rounds.selection.model_copy(update={"top_fraction": 0.2})
    again = run_wcsbert(config.model_copy(update={"rounds": config.rounds.model_copy(update={"selection": selection})}))
    folder = tmp_path / "runs" / "texts" / "round_1"
    settings = json.loads((folder / "done.json").read_text())["settings"]
    assert settings["rounds"]["selection"]["top_fraction"] == 0.2
    assert again["rounds"][0]["kept"] < summary["rounds"][0]["kept"]
    assert json.loads((folder / "embeddings" / "done.json").read_text())["settings"]["made_with"] == fingerprint(settings)
    assert json.loads((folder / "evaluation" / "done.json").read_text())["settings"]["made_with"] == settings


def test_missing_evaluation_set_is_reported_not_fatal(tmp_path):
    from contrastext.methods.wcsbert.evaluation import load_eval_set

    config = load_config(WCSBertConfig, overrides=[f"evaluation.texts.path={tmp_path / 'absent.csv'}"])
    eval_set, reason = load_eval_set(config, tmp_path)
    assert eval_set is None and "not found" in reason


def test_config_rejects_text_pool_without_texts_and_unknown_aliases():
    with pytest.raises(ValueError, match="pool.texts"):
        load_config(WCSBertConfig, overrides=["pool.source=texts", "pool.texts=null"])
    with pytest.raises(ValueError, match="not in names"):
        load_config(WCSBertConfig, overrides=["labels.aliases={Nope: [x]}"])
