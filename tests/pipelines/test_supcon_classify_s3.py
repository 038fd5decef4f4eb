"""supcon_classify with its data and its run on a bucket (moto's S3): the variant trains, its model, metrics
and report land on the bucket, and a second run finds the variant there and does not train it again."""

import gzip
import json

import pytest

from contrastext import storage
from contrastext.config import ClassifierConfig, EncoderConfig, LossConfig, OutputConfig, TrainConfig
from contrastext.methods.supcon.config import LabelledTextData, SupconClassifyConfig, VariantConfig
from contrastext.pipelines.supcon_classify import run_supcon_classify

pytestmark = [pytest.mark.ray, pytest.mark.slow]

WORDS = {"sci.space": "orbit rocket launch", "rec.autos": "engine wheel brake"}


def _upload(bucket: str, split: str, n: int) -> None:
    lines = [json.dumps({"label": label, "text": f"Subject: {i}\n\n{words} {split} {i}"})
             for label, words in WORDS.items() for i in range(n)]
    storage.write_bytes(f"{bucket}/data/{split}.jsonl.gz", gzip.compress("\n".join(lines).encode("utf-8")))


def test_data_and_run_on_a_bucket(ray_session, s3_bucket, tiny_encoder_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _upload(s3_bucket, "train", 8)
    _upload(s3_bucket, "test", 3)
    config = SupconClassifyConfig(
        data=LabelledTextData(root=f"{s3_bucket}/data", train_file="train.jsonl.gz", test_file="test.jsonl.gz"),
        variants=[VariantConfig(name="focal")],
        train=TrainConfig(objective="classify", loss=LossConfig(name="focal"), batch_size=8, epochs=1,
                          encoder=EncoderConfig(model=str(tiny_encoder_dir), pooling="mean", normalize=False,
                                                max_length=16),
                          classifier=ClassifierConfig(samples_per_class=4), checkpoint_every_steps=None),
        tsne_rows=10, output=OutputConfig(storage_path=f"{s3_bucket}/runs", name="supcon"))
    comparison = run_supcon_classify(config)
    run_dir = f"{s3_bucket}/runs/supcon"
    assert comparison["data"]["train_label_counts"] == {"rec.autos": 8, "sci.space": 8}
    assert comparison["variants"]["focal"]["steps"] == 2  # 16 rows in batches of 8
    files = {f[len(run_dir) + 1:] for f in storage.list_files(run_dir, recursive=True)}
    assert {"focal/metrics.json", "focal/model/modules.json", "comparison.json", "report.md", "manifest.json",
            "plots/tsne_focal.png"} <= files
    inputs = storage.read_json(f"{run_dir}/manifest.json")["inputs"]
    assert set(inputs) == {f"{s3_bucket}/data/train.jsonl.gz", f"{s3_bucket}/data/test.jsonl.gz"}
    capsys.readouterr()
    run_supcon_classify(config)
    assert "focal: done in an earlier run with these settings, skipped" in capsys.readouterr().out
    assert not list(tmp_path.iterdir())  # nothing written beside the working directory
