"""predict with its input, its model and its output on S3 (a real S3 API: the moto server)."""

import json

import numpy as np
import pytest

from contrastext import storage
from contrastext.pipelines.predict import run_predict
from contrastext.predict.config import PredictConfig

pytestmark = [pytest.mark.ray]


def test_predict_reads_and_writes_a_bucket_and_resumes_there(ray_session, s3_bucket, tiny_encoder_dir):
    from contrastext.models import TextEncoder

    texts = [f"document number {i} about {'rivers' if i % 2 else 'markets'}" for i in range(90)]
    for part in range(3):
        body = "".join(json.dumps({"id": f"p{part}-{i}", "text": texts[part * 30 + i]}) + "\n" for i in range(30))
        storage.write_text(f"{s3_bucket}/docs/part-{part}.jsonl", body)
    storage.write_text(f"{s3_bucket}/docs/other.jsonl", json.dumps({"id": "x", "text": "not this one"}) + "\n")
    model = storage.copy_tree(tiny_encoder_dir, f"{s3_bucket}/models/tiny")  # no actor reads the driver's disk
    config = PredictConfig(model=model, input={"path": f"{s3_bucket}/docs/part-"}, chunk_rows=20, max_length=32,
                           output={"storage_path": f"{s3_bucket}/predictions", "name": "emb"},
                           scaling={"cpus_per_actor": 1})
    summary = run_predict(config)

    run = f"{s3_bucket}/predictions/emb"
    table = storage.read_parquet(storage.list_files(f"{run}/predictions", ".parquet"))
    ids = table.column("id").to_pylist()
    expected_ids = [f"p{part}-{i}" for part in range(3) for i in range(30)]
    assert sorted(ids) == sorted(expected_ids) and len(ids) == len(set(ids))  # the prefix, each row once
    got = dict(zip(ids, np.array(table.column("embedding").to_pylist(), np.float32)))
    direct = TextEncoder.from_pretrained(tiny_encoder_dir, max_length=32).encode(texts)
    assert max(float(np.abs(got[i] - direct[k]).max()) for k, i in enumerate(expected_ids)) <= 1e-5
    assert summary["files"] == 3 and summary["chunks"] == 6 and storage.exists(f"{run}/manifest.json")

    # a lost chunk file is written again by the next run, and only it
    storage.delete(f"{run}/predictions/part-000001-00000.parquet")
    storage.delete(f"{run}/done.json")
    again = run_predict(config)
    assert again["chunks_kept"] == 5 and again["rows_predicted"] == 20 and again["rows_out"] == 90
