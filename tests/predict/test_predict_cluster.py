"""predict on a cluster of several nodes loses one mid-run and still writes every id exactly once."""

import json

import pytest

from contrastext import storage
from contrastext.pipelines.predict import run_predict
from contrastext.predict.config import PredictConfig

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.multinode]


def test_predict_finishes_after_losing_a_node_with_every_id_once(fresh_cluster, s3_bucket, tiny_encoder_dir):
    words = "rivers mountains towns wizards boxing judges foxes dogs bridges markets".split()
    for part in range(6):
        body = "".join(json.dumps({"id": f"{part}-{i}", "text": " ".join(words[(i + k) % 10] for k in range(40))})
                       + "\n" for i in range(400))
        storage.write_text(f"{s3_bucket}/docs/part-{part}.jsonl", body)
    model = storage.copy_tree(tiny_encoder_dir, f"{s3_bucket}/models/tiny")
    run = f"{s3_bucket}/predictions/labels"
    config = PredictConfig(model=model, input={"path": f"{s3_bucket}/docs/"}, chunk_rows=50, max_length=32,
                           batch_size=16, output={"storage_path": f"{s3_bucket}/predictions", "name": "labels"},
                           scaling={"actors": 2, "cpus_per_actor": 1})
    killer = fresh_cluster.remove_worker_once(lambda: len(storage.list_files(f"{run}/predictions", ".parquet")))
    summary = run_predict(config)
    killer.join(timeout=5)
    removed = killer.record
    assert removed, "the job finished before a node could be removed"
    assert removed["files_before"] < 48, "every chunk was written before the node was lost"

    table = storage.read_parquet(storage.list_files(f"{run}/predictions", ".parquet"))
    ids = table.column("id").to_pylist()
    assert len(ids) == len(set(ids)) == 2400 and set(ids) == {f"{p}-{i}" for p in range(6) for i in range(400)}
    assert summary["chunks"] == 48 and summary["rows_out"] == 2400
    assert not storage.list_temporary(f"{run}/predictions")
    print(f"\npredict: node removed after {removed['after_s']:.1f} s with {removed['files_before']}/48 chunks "
          f"written; finished with {summary['rows_out']} rows in {summary['timings_s']['total']:.1f} s")
