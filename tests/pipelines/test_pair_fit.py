"""The contrastive-fit job end to end on the embedded demo pairs (tiny random encoder, local Ray)."""

import json

import pytest

from contrastext.config import EncoderConfig, FitJobConfig, OutputConfig, TrainConfig
from contrastext.pipelines.pair_fit import run_pair_fit

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_fit_job_writes_model_metrics_and_manifest(ray_session, tiny_encoder_dir, tmp_path, capsys):
    config = FitJobConfig(
        max_rows=80, eval_fraction=0.25,
        train=TrainConfig(encoder=EncoderConfig(model=str(tiny_encoder_dir), max_length=32), batch_size=16,
                          checkpoint_every_steps=None, log_every_steps=1),
        output=OutputConfig(storage_path=str(tmp_path), name="job"),
    )
    summary = run_pair_fit(config)

    run_dir = tmp_path / "job"
    assert summary["source"] == "embedded demo pairs"
    assert summary["train_pairs"] + summary["eval_pairs"] == 80 and summary["eval_pairs"] > 0
    assert summary["steps"] == 4 and summary["pairs_per_s"] > 0
    assert set(summary["before"]) == set(summary["after"]) == {"acc@1", "acc@5", "mrr"}
    assert (run_dir / "model" / "modules.json").is_file()
    assert json.loads((run_dir / "metrics.json").read_text())["steps"] == 4
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["job"] == "pair_fit" and manifest["seed"] == 42
    assert manifest["counts"]["train_pairs"] == summary["train_pairs"]
    assert {"torch", "ray", "transformers"} <= set(manifest["versions"])
    assert manifest["config"]["train"]["batch_size"] == 16
    printed = capsys.readouterr().out
    assert "held-out acc@1: before → after" in printed and "optimiser steps" in printed


def test_pairs_file_with_other_column_names(ray_session, tiny_encoder_dir, tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"q": f"question {i}", "a": f"answer {i}"}) + "\n" for i in range(24)))
    config = FitJobConfig(
        pairs=str(pairs), eval_fraction=0,
        train=TrainConfig(encoder=EncoderConfig(model=str(tiny_encoder_dir), max_length=16), batch_size=8,
                          columns=("q", "a"), checkpoint_every_steps=None),
        output=OutputConfig(storage_path=str(tmp_path), name="file"),
    )
    summary = run_pair_fit(config)
    assert summary["train_pairs"] == 24 and summary["steps"] == 3 and summary["before"] == {}
    manifest = json.loads((tmp_path / "file" / "manifest.json").read_text())
    assert manifest["inputs"][str(pairs)].startswith("sha256:")


def test_outputs_go_to_a_storage_uri(ray_session, tiny_encoder_dir, tmp_path):
    config = FitJobConfig(
        max_rows=24, eval_fraction=0.25,
        train=TrainConfig(encoder=EncoderConfig(model=str(tiny_encoder_dir), max_length=16), batch_size=8,
                          checkpoint_every_steps=None),
        output=OutputConfig(storage_path=f"file://{tmp_path}/remote", name="uri"),
    )
    summary = run_pair_fit(config)
    run_dir = tmp_path / "remote" / "uri"
    assert summary["model_path"] == f"file://{tmp_path}/remote/uri/model"
    assert (run_dir / "model" / "modules.json").is_file()
    assert {"metrics.json", "manifest.json", "history.jsonl"} <= {p.name for p in run_dir.iterdir()}
    assert set(summary["after"]) == {"acc@1", "acc@5", "mrr"}
