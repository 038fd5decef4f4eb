"""The zero-shot benchmark's runs are valid job configs that differ only by the option they measure, and the
shipped WC-SBERT configs load."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from contrastext.config import load_config
from contrastext.methods.wcsbert.config import WCSBertConfig

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))


@pytest.mark.parametrize("path", sorted((REPO / "configs").glob("wcsbert_*.yaml")), ids=lambda p: p.name)
def test_shipped_wcsbert_configs_are_valid(path):
    config = load_config(WCSBertConfig, path)
    assert config.labels.names


def test_readable_20ng_names_give_every_group_one_alias():
    config = load_config(WCSBertConfig, REPO / "configs" / "wcsbert_20ng_readable.yaml")
    assert len(config.labels.names) == 20 and set(config.labels.aliases) == set(config.labels.names)
    readable = [aliases[0] for aliases in config.labels.aliases.values()]
    assert config.labels.aliases["comp.sys.mac.hardware"] == ["Mac hardware"]
    assert len(set(readable)) == 20 and not any("." in name for name in readable)


def test_each_variant_changes_only_what_it_names():
    from zeroshot import DATASETS, SECOND_PROMPT, variant_overrides

    shipped = load_config(WCSBertConfig, DATASETS["agnews"])
    own = shipped.labels.template
    base = load_config(WCSBertConfig, DATASETS["agnews"], overrides=variant_overrides("base", [], own))
    # the baseline is every option off, the shipped settings' same-label pairs too
    assert _differences(shipped.model_dump(mode="json"), base.model_dump(mode="json")) == [
        "rounds.text_positives.same_label"]
    assert variant_overrides("default", ["crops"], own) == []
    for variant, changed in [("calibration", ["rounds.calibration.enabled"]),
                             ("crops", ["rounds.text_positives.crops"]),
                             ("same_label", ["rounds.text_positives.same_label"]),
                             ("templates", ["labels.template", "labels.templates"])]:
        config = load_config(WCSBertConfig, DATASETS["agnews"], overrides=variant_overrides(variant, [], own))
        assert _differences(base.model_dump(mode="json"), config.model_dump(mode="json")) == changed, variant
        if variant == "templates":  # the pairs still take the dataset's own prompt
            assert config.labels.prompts == (own, SECOND_PROMPT) and config.labels.pair_template == own
    untrained = load_config(WCSBertConfig, DATASETS["agnews"], overrides=variant_overrides("untrained", [], own))
    assert _differences(shipped.model_dump(mode="json"), untrained.model_dump(mode="json")) == [
        "rounds.heads", "rounds.rounds"]
    best = load_config(WCSBertConfig, DATASETS["agnews"],
                       overrides=variant_overrides("best", ["calibration", "crops", "same_label"], own))
    assert _differences(base.model_dump(mode="json"), best.model_dump(mode="json")) == [
        "rounds.calibration.enabled", "rounds.text_positives.crops", "rounds.text_positives.same_label"]


def _differences(a, b, prefix=""):
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for key in sorted(set(a) | set(b)) for d in _differences(a.get(key), b.get(key), f"{prefix}{key}.")]
    return [] if a == b else [prefix[:-1]]


def test_pool_label_quality_scores_the_teachers_labels_against_the_pools_gold_labels(tmp_path):
    import json

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from zeroshot import pool_label_quality

    from contrastext.data.h5store import write_shard

    texts = [f"text number {i} about {'sport' if i % 2 else 'money'}" for i in range(8)]
    data = tmp_path / "labelled.jsonl"
    data.write_text("".join(json.dumps({"text": t, "label": ["Business", "Sports"][i % 2]}) + "\n"
                            for i, t in enumerate(texts)))
    config = load_config(WCSBertConfig, overrides=[
        "labels.names=[Business, Sports]", "labels.aliases={}", f"pool.texts={{path: {data}}}", "pool.half=null",
        f"evaluation.texts={{path: {data}}}", "evaluation.half=null", "rounds.rounds=3"])
    run = tmp_path / "run"
    (run / "pool").mkdir(parents=True)
    pool = texts[2:]  # the pool: a sample, its page ids not in row order
    page_ids = [10, 12, 11, 15, 13, 14]
    pq.write_table(pa.table({"page_id": page_ids, "text": pool}), run / "pool" / "pages.parquet")
    shard = write_shard(run / "round_0" / "embeddings", 0, np.array(page_ids), np.zeros((6, 4)), {})
    (run / "round_0" / "embeddings" / "manifest.json").write_text(json.dumps(
        {"attributes": {"dimension": 4}, "shards": [shard]}))
    gold = np.array([i % 2 for i in range(2, 8)])  # by row
    wrong_two = gold.copy()
    wrong_two[[0, 5]] = 1 - wrong_two[[0, 5]]
    by_id = np.argsort(page_ids)  # the rows in the stored embeddings' order
    for r, labels, kept in [(1, wrong_two, [1, 2, 5]), (2, gold, [0, 1])]:
        (run / f"round_{r}").mkdir()
        np.save(run / f"round_{r}" / "pseudo_labels.npy", labels[by_id].astype(np.int16))
        anchors = [pool[i] for i in kept] + ["a crop of some text"]  # a crop is no pool item
        pq.write_table(pa.table({"anchor": anchors, "positive": ["Business"] * len(anchors)}),
                       run / f"round_{r}" / "pairs")
    assert pool_label_quality(run, config, rounds=2) == [
        {"round": 1, "pool_right": round(4 / 6, 4), "kept": 3, "kept_right": round(2 / 3, 4), "pool_matched": 1.0},
        {"round": 2, "pool_right": 1.0, "kept": 2, "kept_right": 1.0, "pool_matched": 1.0}]


def test_the_labelled_probe_learns_the_pools_gold_labels_and_scores_the_evaluation_set(tmp_path, tiny_encoder_dir):
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq
    from zeroshot import labelled_probe

    from contrastext.data.sources import load_texts

    words = {"Business": "shares bank profit market", "Sports": "goal match team season"}
    rows = [(f"{words[label]} {words[label].split()[i % 4]} report {i}", label)
            for i in range(40) for label in words]
    data = tmp_path / "labelled.jsonl"
    data.write_text("".join(json.dumps({"text": t, "label": label}) + "\n" for t, label in rows))
    config = load_config(WCSBertConfig, overrides=[
        "labels.names=[Business, Sports]", "labels.aliases={}", f"pool.texts={{path: {data}}}", "pool.half=first",
        f"evaluation.texts={{path: {data}}}", "evaluation.half=second", f"encoder.model={tiny_encoder_dir}",
        f"data_dir={tmp_path}"])
    first, _ = load_texts(config.evaluation.texts).split_halves(0)
    (tmp_path / "run" / "pool").mkdir(parents=True)
    pq.write_table(pa.table({"page_id": range(len(first.texts)), "text": first.texts}), tmp_path / "run" / "pool" / "pages.parquet")
    # misaligned texts and labels would score about 0.5
    assert labelled_probe(tmp_path / "run", config) == 1.0
