"""The shuffle_divide job with its run folder and its documents on an S3 bucket (moto server, local Ray)."""

import io
import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from contrastext import storage
from contrastext.config import EncoderConfig, OutputConfig, TrainConfig
from contrastext.methods.shuffle_divide.config import ShuffleDivideConfig
from contrastext.pipelines.shuffle_divide import run_shuffle_divide
from contrastext.storage import StorageError

TOPICS = {
    "sport": "football match goal striker league keeper penalty stadium referee season coach",
    "space": "rocket orbit launch satellite astronaut moon telescope planet mission gravity probe",
    "food": "recipe flour butter oven bake sugar dough kitchen pastry chocolate cream",
}


def _documents(per_topic: int = 6, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    lines = []
    for label, words in TOPICS.items():
        vocab = words.split()
        for i in range(per_topic):
            sentences = [" ".join(rng.choice(vocab, size=6)).capitalize() + "." for _ in range(5 + i % 3)]
            lines.append(json.dumps({"id": f"{label}-{i}", "text": " ".join(sentences), "topic": label}))
    return ("\n".join(lines) + "\n").encode("utf-8")


def _config(bucket: str, model_dir, **changes) -> ShuffleDivideConfig:
    base = dict(
        data_dir=f"{bucket}/data",
        documents=dict(path="docs.jsonl", label_column="topic"),
        epochs=1, projection="pca", kmeans_nredo=2, shuffle_unit="word", encode_max_length=48,
        train=TrainConfig(encoder=EncoderConfig(model=str(model_dir), max_length=32, pooling="mean"),
                          loss={"name": "ntxent", "params": {"temperature": 0.1}},
                          optimizer={"lr": 1e-4, "schedule": "constant"}, batch_size=8,
                          checkpoint_every_steps=None, log_every_steps=1),
        output=OutputConfig(storage_path=f"{bucket}/runs", name="sd"),
    )
    return ShuffleDivideConfig(**{**base, **changes})


def _array(location: str) -> np.ndarray:
    return np.load(io.BytesIO(storage.read_bytes(location)))


def _relative(files: list[str], run_dir: str) -> set[str]:
    return {f[len(run_dir) + 1:] for f in files}


@pytest.mark.ray
@pytest.mark.slow
def test_job_writes_its_run_to_a_bucket_and_skips_finished_epochs_there(
        ray_session, s3_bucket, tiny_encoder_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # a relative local folder written by mistake would appear here
    storage.write_bytes(f"{s3_bucket}/data/docs.jsonl", _documents())
    config = _config(s3_bucket, tiny_encoder_dir)
    summary = run_shuffle_divide(config)
    run_dir = f"{s3_bucket}/runs/sd"

    assert summary["documents"] == {"path": f"{s3_bucket}/data/docs.jsonl", "count": 18, "skipped": {}}
    assert [r["epoch"] for r in summary["epochs"]] == [0, 1] and summary["epochs"][1]["steps"] == 3
    assert summary["epochs"][1]["model"] == f"{run_dir}/epochs/epoch_001/model"

    files = _relative(storage.list_files(run_dir, recursive=True), run_dir)
    for name in ("metrics.json", "manifest.json", "report.md", "pairs.json", "assignments.parquet",
                 "plots/metrics_per_epoch.png", "plots/clusters_2d.png", "plots/labels_2d.png",
                 "epochs/epoch_000/done.json", "epochs/epoch_000/embeddings.npy",
                 "epochs/epoch_000/assignments.npy", "epochs/epoch_001/done.json",
                 "epochs/epoch_001/train.json", "epochs/epoch_001/model/modules.json",
                 "train/epoch_001/history.jsonl"):
        assert name in files, name
    assert any(f.startswith("train/epoch_001/checkpoint_") for f in files)
    best = summary["selected"]["epoch"]
    assert ("model/modules.json" in files) == (best == 1)
    assert summary["model_path"] == (f"{run_dir}/model" if best == 1 else str(tiny_encoder_dir))

    metrics = storage.read_json(f"{run_dir}/metrics.json")
    assert metrics["k"] == 3 and metrics["selected"]["epoch"] == best
    manifest = storage.read_json(f"{run_dir}/manifest.json")
    assert manifest["job"] == "shuffle_divide" and manifest["counts"]["documents"] == 18
    assert manifest["inputs"][f"{s3_bucket}/data/docs.jsonl"].startswith("size:")
    fs, path = storage.resolve(f"{run_dir}/assignments.parquet")
    table = pq.read_table(path, filesystem=fs).to_pydict()
    assert len(table["id"]) == 18 and set(table["cluster"]) <= {0, 1, 2}
    embeddings = _array(f"{run_dir}/epochs/epoch_001/embeddings.npy")
    assert embeddings.shape[0] == 18
    assert "plots/labels_2d.png" in storage.read_text(f"{run_dir}/report.md")
    assert not (tmp_path / "runs").exists() and not list(tmp_path.iterdir())

    # run again: both epochs come from their markers on the bucket, nothing is retrained
    checkpoints = [f for f in files if f.startswith("train/epoch_001/checkpoint_")]
    train_json = storage.read_bytes(f"{run_dir}/epochs/epoch_001/train.json")
    capsys.readouterr()
    again = run_shuffle_divide(config)
    printed = capsys.readouterr().out
    assert "epoch 0: done in an earlier run" in printed and "epoch 1: done in an earlier run" in printed
    assert again["epochs"] == summary["epochs"]
    files_after = _relative(storage.list_files(run_dir, recursive=True), run_dir)
    assert [f for f in files_after if f.startswith("train/epoch_001/checkpoint_")] == checkpoints
    assert storage.read_bytes(f"{run_dir}/epochs/epoch_001/train.json") == train_json

    # an epoch stopped after its training (no marker) is scored again from its model on the bucket, not trained
    storage.delete(f"{run_dir}/epochs/epoch_001/done.json")
    third = run_shuffle_divide(config)
    assert "epoch 1: done in an earlier run" not in capsys.readouterr().out
    assert storage.is_file(f"{run_dir}/epochs/epoch_001/done.json")
    assert storage.read_bytes(f"{run_dir}/epochs/epoch_001/train.json") == train_json
    for key in ("silhouette", "tfidf_silhouette", "acc", "nmi"):
        assert third["epochs"][1][key] == pytest.approx(summary["epochs"][1][key], abs=1e-6)
    assert not list(tmp_path.iterdir())


@pytest.mark.ray
@pytest.mark.slow
def test_cluster_aware_negatives_and_stale_models_on_a_bucket(ray_session, s3_bucket, tiny_encoder_dir):
    storage.write_bytes(f"{s3_bucket}/data/docs.jsonl", _documents())
    storage.write_bytes(f"{s3_bucket}/data/train.jsonl", _documents(per_topic=4, seed=1))
    config = _config(s3_bucket, tiny_encoder_dir, epochs=2, negatives="other_clusters", keep_epoch_models=False,
                     train_documents=dict(path=f"{s3_bucket}/data/train.jsonl"))
    summary = run_shuffle_divide(config)
    run_dir = f"{s3_bucket}/runs/sd"
    for epoch in (1, 2):
        assert summary["epochs"][epoch]["steps"] == 2 and 1 <= summary["epochs"][epoch]["negative_groups"] <= 3
        groups = _array(f"{run_dir}/epochs/epoch_{epoch:03d}/train_groups.npy")
        assert groups.shape == (12,) and set(groups.tolist()) <= {0, 1, 2}
    # epoch 2 trained from epoch 1's model on the bucket; a model neither chosen nor last is removed
    kept = {e for e in (1, 2) if storage.is_file(f"{run_dir}/epochs/epoch_{e:03d}/model/modules.json")}
    assert 2 in kept and kept <= {2, summary["selected"]["epoch"]}


def test_a_missing_bucket_or_document_names_the_location(s3_bucket, tiny_encoder_dir):
    with pytest.raises(StorageError, match="does not exist"):
        run_shuffle_divide(_config(s3_bucket, tiny_encoder_dir,
                                   output=OutputConfig(storage_path="s3://no-such-bucket-here/runs", name="sd")))
    with pytest.raises(FileNotFoundError, match=f"{s3_bucket}/data/docs.jsonl not found"):
        run_shuffle_divide(_config(s3_bucket, tiny_encoder_dir))
