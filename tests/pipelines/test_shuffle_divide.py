"""The shuffle_divide job end to end: tiny random encoder on generated documents, local Ray."""

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from contrastext.config import EncoderConfig, OutputConfig, TrainConfig, load_config
from contrastext.data.paths import resolve_data_path
from contrastext.methods.shuffle_divide.config import ShuffleDivideConfig
from contrastext.pipelines.shuffle_divide import (
    _training_groups,
    method_of,
    load_source,
    run_shuffle_divide,
)

TOPICS = {
    "sport": "football match goal striker league keeper penalty stadium referee season coach",
    "space": "rocket orbit launch satellite astronaut moon telescope planet mission gravity probe",
    "food": "recipe flour butter oven bake sugar dough kitchen pastry chocolate cream",
}


def _write_documents(path, per_topic=8, seed=0):
    rng = np.random.default_rng(seed)
    with open(path, "w", encoding="utf-8") as f:
        for label, words in TOPICS.items():
            vocab = words.split()
            for i in range(per_topic):
                sentences = [" ".join(rng.choice(vocab, size=6)).capitalize() + "." for _ in range(5 + i % 3)]
                f.write(json.dumps({"id": f"{label}-{i}", "text": " ".join(sentences), "topic": label}) + "\n")
        f.write("{broken line\n")
    return path


def _config(tmp_path, model_dir, **changes):
    docs = _write_documents(tmp_path / "docs.jsonl")
    base = dict(
        data_dir=str(tmp_path),
        documents=dict(path="docs.jsonl", label_column="topic"),
        epochs=1, projection="pca", kmeans_nredo=2, shuffle_unit="word",
        encode_max_length=48,
        train=TrainConfig(encoder=EncoderConfig(model=str(model_dir), max_length=32, pooling="mean"),
                          loss={"name": "ntxent", "params": {"temperature": 0.1}},
                          optimizer={"lr": 1e-4, "schedule": "constant"}, batch_size=8,
                          checkpoint_every_steps=None, log_every_steps=1),
        output=OutputConfig(storage_path=str(tmp_path / "runs"), name="sd"),
    )
    assert docs.is_file()
    return ShuffleDivideConfig(**{**base, **changes})


@pytest.mark.ray
@pytest.mark.slow
def test_job_trains_clusters_reports_and_resumes(ray_session, tiny_encoder_dir, tmp_path, capsys):
    config = _config(tmp_path, tiny_encoder_dir)
    summary = run_shuffle_divide(config)
    run_dir = tmp_path / "runs" / "sd"

    assert summary["documents"]["count"] == 24 and summary["documents"]["skipped"] == {"malformed JSON line": 1}
    assert summary["k"] == 3 and summary["pairs"]["pairs"] == 24  # every document has ≥ 4 words
    assert summary["pairs"]["unit"] == "word" and summary["pairs"]["median_units"] >= 30
    epochs = summary["epochs"]
    assert [r["epoch"] for r in epochs] == [0, 1]
    assert epochs[1]["steps"] == 3 and epochs[1]["pairs"] == 24 and epochs[1]["loss"] > 0
    for row in epochs:
        assert {"silhouette", "tfidf_silhouette", "acc", "nmi", "ami"} <= set(row)
        # three topics with disjoint vocabularies: every epoch must find them exactly (chance is near 1/3)
        assert row["acc"] == 1.0 and row["nmi"] == pytest.approx(1.0), row
        # the same exact clusters score the same in the fixed TF-IDF space (0.903 on this seed)
        assert row["tfidf_silhouette"] == pytest.approx(0.903, abs=0.01), row
    by_embedding = max(epochs, key=lambda r: (r["silhouette"], -r["epoch"]))
    assert summary["best_by_silhouette"]["epoch"] == by_embedding["epoch"]
    best = max(epochs, key=lambda r: (r["tfidf_silhouette"], -r["epoch"]))
    assert summary["selected_by"] == "tfidf_silhouette" and summary["selected"]["epoch"] == best["epoch"]
    lost = summary["best_by_acc"]["acc"] - best["acc"]
    assert summary["acc_lost_by_label_free_selection"] == pytest.approx(lost)

    table = pq.read_table(run_dir / "assignments.parquet").to_pydict()
    assert set(table) == {"id", "cluster", "label"} and len(table["id"]) == 24
    assert set(table["cluster"]) <= {0, 1, 2} and table["label"][0] == "sport"
    best_assignments = np.load(run_dir / "epochs" / f"epoch_{best['epoch']:03d}" / "assignments.npy")
    assert table["cluster"] == best_assignments.tolist()
    assert (run_dir / "epochs" / "epoch_001" / "model" / "modules.json").is_file()
    assert (run_dir / "model" / "modules.json").is_file() == (best["epoch"] == 1)
    if best["epoch"] == 1:  # the published model carries its clusters: new documents join them
        from contrastext import ShuffleDivide

        documents = [json.loads(line)["text"] for line in (tmp_path / "docs.jsonl").read_text().splitlines()
                     if line.startswith("{\"")]
        assert ShuffleDivide.load(run_dir / "model").predict(documents).tolist() == table["cluster"]
    assert json.loads((run_dir / "metrics.json").read_text())["k"] == 3
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["job"] == "shuffle_divide" and manifest["counts"]["documents"] == 24
    assert manifest["inputs"][str(tmp_path / "docs.jsonl")].startswith("sha256:")
    report = (run_dir / "report.md").read_text()
    for figure in ("metrics_per_epoch.png", "clusters_2d.png", "labels_2d.png"):
        assert (run_dir / "plots" / figure).stat().st_size > 0 and f"plots/{figure}" in report
    printed = capsys.readouterr().out
    assert "silhouette" in printed and "epoch" in printed

    # a finished epoch is not redone; one stopped after its training (no marker) is scored without retraining
    checkpoints = sorted((run_dir / "train" / "epoch_001").glob("checkpoint_*"))
    trained_at = json.loads((run_dir / "epochs" / "epoch_001" / "train.json").read_text())["trained_at"]
    (run_dir / "epochs" / "epoch_001" / "done.json").unlink()
    again = run_shuffle_divide(config)
    assert "epoch 0: done in an earlier run" in capsys.readouterr().out
    assert sorted((run_dir / "train" / "epoch_001").glob("checkpoint_*")) == checkpoints
    assert again["epochs"][1]["steps"] == 3 and again["epochs"][1]["trained_at"] == trained_at
    for key in ("silhouette", "tfidf_silhouette", "acc", "nmi"):
        assert again["epochs"][1][key] == pytest.approx(epochs[1][key], abs=1e-6)

    # how the epoch is chosen is no epoch's setting: nothing runs again
    third = run_shuffle_divide(config.model_copy(update={"select_by": "silhouette"}))
    out = capsys.readouterr().out
    assert "epoch 0: done in an earlier run" in out and "epoch 1: done in an earlier run" in out
    assert third["selected"]["epoch"] == third["best_by_silhouette"]["epoch"]

    # a changed training setting trains that epoch again from the start, not from the other fit's checkpoints
    train = config.train.model_copy(update={"optimizer": config.train.optimizer.model_copy(update={"lr": 5e-5})})
    left_by_the_other_fit = run_dir / "train" / "epoch_001" / "left_by_the_other_fit"
    left_by_the_other_fit.write_text("")
    fourth = run_shuffle_divide(config.model_copy(update={"train": train}))
    out = capsys.readouterr().out
    assert "epoch 0: done in an earlier run" in out and "epoch 1: " in out and "other settings (train.optimizer.lr)" in out
    # the other fit's folder was removed before training (a fit in process can end within the same second, so
    # the training time alone cannot tell)
    assert not left_by_the_other_fit.exists() and fourth["epochs"][1]["steps"] == 3
    assert json.loads((run_dir / "train" / "epoch_001" / "history.jsonl").read_text().splitlines()[0])[
        "resumed_from_step"] == 0
    assert json.loads((run_dir / "epochs" / "epoch_001" / "attempt.json").read_text())["settings"]["train"][
        "optimizer"]["lr"] == 5e-5


@pytest.mark.ray
@pytest.mark.slow
def test_cluster_aware_negatives_come_from_the_previous_epochs_clusters(ray_session, tiny_encoder_dir, tmp_path):
    _write_documents(tmp_path / "train.jsonl", per_topic=6, seed=1)
    config = _config(tmp_path, tiny_encoder_dir, epochs=2, negatives="other_clusters",
                     train_documents=dict(path="train.jsonl"))
    summary = run_shuffle_divide(config)
    run_dir = tmp_path / "runs" / "sd"
    train_docs, _ = load_source(config.train_documents, config.data_dir, config.train.seed)
    for epoch in (1, 2):
        row = summary["epochs"][epoch]
        groups = np.load(run_dir / "epochs" / f"epoch_{epoch:03d}" / "train_groups.npy")
        assert groups.shape == (len(train_docs),) == (18,) and set(groups.tolist()) <= {0, 1, 2}
        # every training document is paired, so each of its clusters gives negatives
        assert row["steps"] == 3 and row["negative_groups"] == len(set(groups.tolist()))
        assert np.isfinite(row["loss"])
    # clustering the training documents themselves: the groups are the previous epoch's clusters
    same = config.model_copy(update={"train_documents": None})
    docs, _ = load_source(same.documents, same.data_dir, same.train.seed)
    expected = np.load(run_dir / "epochs" / "epoch_001" / "assignments.npy")
    (run_dir / "epochs" / "epoch_002" / "train_groups.npy").unlink()  # as the stage does when settings change
    assert _training_groups(2, "unused", docs, method_of(same, 3), run_dir, same).tolist() == expected.tolist()


def test_config_errors_name_the_setting(tmp_path, tiny_encoder_dir):
    with pytest.raises(ValidationError, match="train.epochs must be 1"):
        load_config(ShuffleDivideConfig, overrides=["train.epochs=2"])
    with pytest.raises(ValidationError, match="pair loss"):
        load_config(ShuffleDivideConfig, overrides=["train.loss.name=supcon"])
    with pytest.raises(ValidationError, match="masks NT-Xent negatives"):
        load_config(ShuffleDivideConfig, overrides=["negatives=other_clusters", "train.loss.name=mnr"])
    with pytest.raises(FileNotFoundError, match="set `data_dir`"):
        resolve_data_path("bbcsport/bbcsport.jsonl", str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match="set `k`"):
        run_shuffle_divide(_config(tmp_path, tiny_encoder_dir, documents=dict(path="docs.jsonl"),
                                   epochs=0))


def test_data_dir_comes_from_the_environment(tmp_path, monkeypatch):
    (tmp_path / "set").mkdir()
    (tmp_path / "set" / "d.jsonl").write_text("{}\n")
    monkeypatch.setenv("CONTRASTEXT_DATA", str(tmp_path))
    assert resolve_data_path("set/d.jsonl", None) == tmp_path / "set" / "d.jsonl"
    assert resolve_data_path(str(tmp_path / "set" / "d.jsonl"), "/elsewhere") == tmp_path / "set" / "d.jsonl"


def test_untrained_encoder_only_with_epochs_zero_and_no_labels(tiny_encoder_dir, tmp_path):
    config = _config(tmp_path, tiny_encoder_dir, documents=dict(path="docs.jsonl", max_documents=12),
                     epochs=0, k=2)
    summary = run_shuffle_divide(config)
    assert [r["epoch"] for r in summary["epochs"]] == [0]
    assert set(summary["epochs"][0]) >= {"silhouette"} and "acc" not in summary["epochs"][0]
    assert summary["best_by_acc"] is None and summary["model_path"] == str(tiny_encoder_dir)
    table = pq.read_table(tmp_path / "runs" / "sd" / "assignments.parquet")
    assert table.column_names == ["id", "cluster"] and table.num_rows == 12


@pytest.mark.parametrize("path", sorted((Path(__file__).parents[2] / "configs").glob("shuffle_divide*.yaml")),
                         ids=lambda p: p.name)
def test_shipped_configs_are_valid(path):
    config = load_config(ShuffleDivideConfig, path)
    assert config.pair_method == "shuffle_divide" and config.documents.label_column == "label"
