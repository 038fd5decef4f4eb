"""The UCTopic job's stages on the tiny random encoder: outputs, tables, reports, manifests, bad input."""

import json
from pathlib import Path

import numpy as np
import pytest
from uctopic_data import conll_text, pages_jsonl

from contrastext.config import load_config
from contrastext.errors import InputError
from contrastext.methods.uctopic.config import PhraseSource, UCTopicConfig
from contrastext.methods.uctopic.encoder import PhraseEncoder
from contrastext.methods.uctopic.mlm import MLM_HEAD_WEIGHTS
from contrastext.pipelines.uctopic import main, run_uctopic


def _conll(path: Path) -> Path:
    path.write_text(conll_text())
    return path


def _pages(path: Path) -> Path:
    path.write_text(pages_jsonl())
    return path


def _config(tmp_path: Path, model: str, stage: str, **sets) -> UCTopicConfig:
    overrides = [f"stage={stage}", f"model={model}", f"output.storage_path={tmp_path / 'runs'}",
                 "max_length=32", "train.batch_size=8", "train.log_every_steps=1"]
    overrides += [f"{k}={v}" for k, v in sets.items()]
    return load_config(UCTopicConfig, None, overrides)


@pytest.mark.ray
@pytest.mark.slow
def test_pretrain_then_finetune_write_models_reports_and_metrics(ray_session, tiny_encoder_dir, tmp_path,
                                                                  capsys):
    conll = _conll(tmp_path / "mini.conll")
    config = _config(tmp_path, str(tiny_encoder_dir), "pretrain", **{
        "pretrain.pages": str(_pages(tmp_path / "pages.jsonl")), "evaluation.conll": str(conll),
        "train.max_steps": 2, "train.loss.params.mlm_weight": 0.1})
    summary = run_uctopic(config)
    run_dir = Path(summary["run_dir"])
    assert run_dir.name == "uctopic-pretrain"
    assert summary["link_mentions"] == 24 and summary["pairs"] > 0 and summary["steps"] == 2
    assert 0.0 < summary["masked_share"] < 1.0
    for key in ("entity_clustering_before", "entity_clustering_after"):
        scores = summary[key]
        assert scores["k"] == 3 and scores["instances"] == 72
        # measured with the seeded tiny model (two steps do not move its clusters): 40 of 72 instances right
        # (NMI 0.236 with the span in context alone, 0.288 with the phrase alone added)
        assert scores["nmi"] == pytest.approx(0.288, abs=0.02) and scores["acc"] == pytest.approx(40 / 72)
    assert summary["mlm_weight"] == 0.1 and "MLM loss weight" in capsys.readouterr().out
    for name in ("metrics.json", "report.md", "manifest.json", "pairs.parquet", "model/phrase_encoder.json",
                 f"model/{MLM_HEAD_WEIGHTS}"):
        assert (run_dir / name).is_file(), name
    assert json.loads((run_dir / "model" / "phrase_encoder.json").read_text())["vectors"] == "in_context+alone"
    assert json.loads((run_dir / "manifest.json").read_text())["counts"]["steps"] == 2
    assert "positive pairs" in (run_dir / "report.md").read_text()

    finetune = _config(tmp_path, summary["model_path"], "finetune", **{
        "finetune.data.conll": str(conll), "finetune.central_fraction": 0.5, "train.max_steps": 2,
        "finetune.epochs": 1, "finetune.select_by": "last"})
    tuned = run_uctopic(finetune)
    assert tuned["k"] == 3 and tuned["steps"] == 2 and tuned["pairs"] > 0
    # the central half of each cluster gets a pseudo-label: 48 of the 72 instances, 42 of them right (measured)
    assert tuned["labelled_instances"] == 48 and tuned["pseudo_label_acc"] == pytest.approx(42 / 48)
    assert set(tuned["clustering_before"]) >= {"nmi", "acc"} and set(tuned["clustering_after"]) >= {"nmi", "acc"}
    assert [row["epoch"] for row in tuned["epochs"]] == [0, 1] and tuned["chosen_epoch"] == 1
    assert all(set(row) >= {"silhouette", "context_silhouette", "start_silhouette"} for row in tuned["epochs"])
    assert len(tuned["topics"]) == 3 and "## Topics" in (Path(tuned["run_dir"]) / "report.md").read_text()
    spans = [("John Smith met Ford .", 0, 10)]
    before = PhraseEncoder.from_pretrained(summary["model_path"]).encode(spans)
    after = PhraseEncoder.from_pretrained(tuned["model_path"]).encode(spans)
    assert not np.allclose(before, after)

    # a fit that learns nothing (every loss is under this min_loss) is left out: its model and checkpoints are
    # removed, the start model is delivered, and the steps it trained are still counted
    dropped = run_uctopic(_config(tmp_path / "dropped", summary["model_path"], "finetune", **{
        "finetune.data.conll": str(conll), "finetune.central_fraction": 0.5, "train.max_steps": 2,
        "finetune.epochs": 1, "finetune.min_loss": 100}))
    dropped_dir = Path(dropped["run_dir"])
    assert dropped["stopped"].startswith("epoch 1: its fit had nothing left to learn")
    assert [row["epoch"] for row in dropped["epochs"]] == [0] and dropped["chosen_epoch"] == 0
    assert dropped["dropped_fit"]["epoch"] == 1 and dropped["dropped_fit"]["steps"] == 2 and dropped["steps"] == 2
    assert dropped["pairs"] == dropped["dropped_fit"]["pairs"] > 0
    assert not (dropped_dir / "epochs" / "epoch_001").exists() and not (dropped_dir / "train" / "epoch_001").exists()
    assert (dropped_dir / "model" / "modules.json").is_file()

    # finished stages leave done.json: the same stage again is skipped
    assert (Path(tuned["run_dir"]) / "done.json").is_file()
    capsys.readouterr()
    saved = json.loads((Path(tuned["run_dir"]) / "metrics.json").read_text())
    assert run_uctopic(finetune) == {**saved, "run_dir": tuned["run_dir"]}
    assert "finetune: done in an earlier run with these settings, skipped" in capsys.readouterr().out


def test_only_the_fit_left_out_is_cleared(tmp_path):
    from contrastext.pipelines.uctopic import _clear_dropped_fit

    for part in ("epochs", "train"):
        for epoch in (1, 2):
            (tmp_path / part / f"epoch_{epoch:03d}" / "model").mkdir(parents=True)
    record = _clear_dropped_fit({"epoch": 2, "model": str(tmp_path / "epochs" / "epoch_002" / "model"), "steps": 3,
                                 "loss": 0.001}, str(tmp_path))
    assert record == {"epoch": 2, "steps": 3, "loss": 0.001}
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("*/*")) == ["epochs/epoch_001",
                                                                                      "train/epoch_001"]
    assert _clear_dropped_fit(None, str(tmp_path)) is None  # epochs that stopped with no fit leave all as it was
    assert len(list(tmp_path.glob("*/*"))) == 2


def test_mine_reads_a_folder_of_text_files(tiny_encoder_dir, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    topics = {"sport": "The striker scored a late goal and the football club won the league title.",
              "money": "The central bank raised interest rates and the stock market fell sharply.",
              "tech": "The new smartphone has a faster chip and the battery life is longer."}
    for i in range(6):
        for name, text in topics.items():
            (folder / f"{name}{i}.txt").write_text(text)
    (folder / "notes.bin").write_bytes(b"\x00")
    summary = run_uctopic(_config(tmp_path, str(tiny_encoder_dir), "mine", **{
        "mine.data.documents": str(folder), "mine.topics.k_max": 4}))
    assert summary["counts"]["documents"] == 18 and summary["counts"]["documents_skipped"] == {
        "file of unknown type": 1}
    assert summary["extractor"] == "ngram" and 2 <= summary["n_topics"] <= 4
    assert len(summary["topics"]) == summary["n_topics"]
    assert summary["topic_quality"]["informativeness"] > 0
    # word diversity: distinct words / all words of a topic's top phrases, averaged over the topics
    per_topic = [len(set(ws)) / len(ws) for ws in ([w for p in t["phrases"] for w in p.lower().split()]
                                                   for t in summary["topics"])]
    assert summary["topic_quality"]["diversity"] == pytest.approx(float(np.mean(per_topic)))
    assert "interest rates" in summary["phrase_topics"]
    run_dir = Path(summary["run_dir"])
    assert (run_dir / "topics_pca.png").is_file() and (run_dir / "manifest.json").is_file()


def test_main_takes_the_stage_as_a_sub_command(capsys, tmp_path):
    assert main(["mine", "--set", "mine.topics.k_max=5", "--print-config"]) == 0
    out = capsys.readouterr().out
    assert "stage: mine" in out and "k_max: 5" in out
    assert main(["finetune", "--set", "finetune.data.conll=a", "--set", "finetune.data.documents=b"]) == 2
    assert "either conll or documents" in capsys.readouterr().err


def test_missing_inputs_give_clear_errors(tiny_encoder_dir, tmp_path):
    with pytest.raises(ValueError, match="no phrase source"):
        run_uctopic(_config(tmp_path, str(tiny_encoder_dir), "mine"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        run_uctopic(_config(tmp_path, str(tiny_encoder_dir), "mine", **{"mine.data.documents": str(tmp_path / "no")}))
    with pytest.raises(ValueError, match="needs evaluation.conll"):
        run_uctopic(_config(tmp_path, str(tiny_encoder_dir), "evaluate"))
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(ValueError, match="no usable texts"):
        run_uctopic(_config(tmp_path, str(tiny_encoder_dir), "mine", **{"mine.data.documents": str(empty)}))


def test_documents_are_a_text_source_and_the_earlier_keys_still_read():
    assert PhraseSource(documents="d.jsonl").documents.path == "d.jsonl"
    earlier = PhraseSource(documents="d.jsonl", text_column="body", title_column="title", max_documents=5)
    assert earlier.documents.text_columns == ["body"] and earlier.documents.title_column == "title"
    assert earlier.documents.max_rows == 5  # the first documents, as before
    given = PhraseSource(documents={"path": "d.csv", "text_columns": ["a", "b"], "cleaning": "basic"})
    assert given.documents.text_columns == ["a", "b"] and given.documents.cleaning == "basic"


def test_finetune_without_epochs_delivers_the_start_model_and_scores_it(tiny_encoder_dir, tmp_path):
    conll = _conll(tmp_path / "mini.conll")
    summary = run_uctopic(_config(tmp_path, str(tiny_encoder_dir), "finetune", **{
        "finetune.data.conll": str(conll), "finetune.epochs": 0}))
    assert summary["chosen_epoch"] == 0 and summary["select_by"] == "anchored_silhouette"
    [start] = summary["epochs"]
    assert start["anchored_silhouette"] == pytest.approx(start["silhouette"])
    assert summary["clustering_delivered"] == summary["clustering_before"] and summary["steps"] == 0
    spans = [("John Smith met Ford .", 0, 10)]
    delivered = PhraseEncoder.from_pretrained(summary["model_path"]).encode(spans)
    assert np.allclose(delivered, PhraseEncoder.from_pretrained(str(tiny_encoder_dir)).encode(spans), atol=1e-5)
    assert "delivered (by anchored_silhouette) | epoch 0 (the start model)" in " ".join(
        (Path(summary["run_dir"]) / "report.md").read_text().split())


def test_finetune_scores_start_candidates_from_a_run_folder_and_names_an_empty_one(tiny_encoder_dir, tmp_path):
    import shutil

    run = tmp_path / "pretrain-run"
    for folder in ("model", "train/checkpoint_step000000004/model"):
        shutil.copytree(tiny_encoder_dir, run / folder)
    conll = _conll(tmp_path / "mini.conll")
    summary = run_uctopic(_config(tmp_path, str(tiny_encoder_dir), "finetune", **{
        "finetune.data.conll": str(conll), "finetune.epochs": 0, "finetune.start_candidates": [str(run)]}))
    rows = summary["start_candidates"]
    assert [row["model"] for row in rows] == [str(tiny_encoder_dir), str(run / "model"),
                                              str(run / "train/checkpoint_step000000004/model")]
    # the same weights score the same: the anchor, first, is kept on a tie, and CCL (no epoch here) starts there
    assert len({round(row["anchored_silhouette"], 6) for row in rows}) == 1
    assert summary["start_model"] == str(tiny_encoder_dir) == summary["epochs"][0]["model"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="empty holds no model"):
        run_uctopic(_config(tmp_path, str(tiny_encoder_dir), "finetune", **{
            "finetune.data.conll": str(conll), "finetune.epochs": 0,
            "finetune.start_candidates": [str(tmp_path / "empty")], "output.name": "other"}))


def test_start_candidates_expand_run_folders_to_their_models_only(tiny_encoder_dir, tmp_path):
    import shutil

    from contrastext.pipelines.uctopic import start_candidates

    run = tmp_path / "run"
    shutil.copytree(tiny_encoder_dir, run / "model")  # a sentence-transformers folder, modules inside
    hf = run / "train" / "hf"
    hf.mkdir(parents=True)
    (hf / "config.json").write_text("{}")  # a plain Hugging Face folder counts as a model too
    assert start_candidates([str(run), "bundled:minilm"]) == [str(run / "model"), str(hf), "bundled:minilm"]
    assert start_candidates([str(run / "model")]) == [str(run / "model")]
    # the stage's marker compares the models the folder stands for: a checkpoint added since runs it again
    from contrastext.pipelines.uctopic import training_stage

    config = _config(tmp_path, str(tiny_encoder_dir), "finetune", **{"finetune.start_candidates": [str(run)]})
    before = training_stage(config, str(tmp_path / "out")).settings
    shutil.copytree(tiny_encoder_dir, run / "checkpoint_step000000009" / "model")
    after = training_stage(config, str(tmp_path / "out")).settings
    assert len(after["finetune"]["start_candidates"]) == len(before["finetune"]["start_candidates"]) + 1
