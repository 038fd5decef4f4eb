"""The shuffle_divide job on real BBCSport documents with the bundled MiniLM (no training: epoch 0)."""

import json

import pyarrow.parquet as pq
import pytest

from contrastext.pipelines.shuffle_divide import DocumentSource, ShuffleDivideConfig, run_shuffle_divide

from conftest import shared_data

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_minilm_clusters_bbcsport_sports_before_training(tmp_path):
    path = shared_data("bbcsport/bbcsport.jsonl")
    config = ShuffleDivideConfig.model_validate({
        "documents": DocumentSource(path=str(path), label_column="label", title_column="title",
                                    max_documents=150).model_dump(),
        "epochs": 0, "encode_max_length": 128, "projection": "pca",
        "output": {"storage_path": str(tmp_path), "name": "bbc"},
    })
    summary = run_shuffle_divide(config)
    row = summary["epochs"][0]
    assert summary["k"] == 5 and summary["documents"]["count"] == 150
    assert row["acc"] >= 0.8 and row["nmi"] >= 0.6 and row["silhouette"] > 0
    table = pq.read_table(tmp_path / "bbc" / "assignments.parquet").to_pydict()
    assert len(set(table["cluster"])) == 5
    assert json.loads((tmp_path / "bbc" / "metrics.json").read_text())["best_by_acc"]["epoch"] == 0
