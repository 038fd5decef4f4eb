"""The real all-mpnet-base-v2, assembled from the part packages of the optional extra ``mpnet``."""

from __future__ import annotations

import importlib.metadata as metadata

import numpy as np
import pytest

from contrastext.models import TextEncoder, resolve_model_path
from contrastext.models.split_packages import MPNET, install_hint


def _parts_installed() -> bool:
    try:
        for part in MPNET.parts:
            metadata.distribution(part)
    except metadata.PackageNotFoundError:
        return False
    return True


pytestmark = [
    pytest.mark.integration, pytest.mark.slow,
    pytest.mark.skipif(not _parts_installed(),
                       reason=f"optional extra 'mpnet' not installed ({install_hint(MPNET)})"),
]

TEXTS = [
    "The striker scored twice as Chelsea beat Arsenal on Saturday.",
    "Manchester United won the derby with a late goal.",
    "The central bank raised interest rates as inflation climbed.",
]


@pytest.fixture(scope="module")
def mpnet() -> TextEncoder:
    return TextEncoder.from_pretrained("bundled:mpnet", device="cpu")


def test_settings_are_the_original_ones(mpnet):
    assert (mpnet.pooling, mpnet.normalize, mpnet.max_length, mpnet.embedding_dimension) == ("mean", True, 384, 768)


def test_embeddings_are_unit_vectors_that_group_topics(mpnet):
    vectors = mpnet.encode(TEXTS)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > similarity[0, 2] + 0.2


def test_embeddings_equal_sentence_transformers(mpnet):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    theirs = sentence_transformers.SentenceTransformer(str(resolve_model_path("bundled:mpnet")), device="cpu")
    np.testing.assert_allclose(mpnet.encode(TEXTS), theirs.encode(TEXTS, convert_to_numpy=True), atol=1e-5, rtol=0)


def test_its_int8_export_keeps_the_sensitive_feed_forward_projections_in_fp32(mpnet, tmp_path, monkeypatch):
    """Every MatMul in int8 fails the check (mean cosine 0.89); the export's steps reach a graph that passes, which
    then encodes within the check's cosine of torch."""
    from contrastext.models import onnx_backend, onnx_export, onnx_quality

    monkeypatch.setattr(onnx_export, "exports_root", lambda: tmp_path)  # a fresh export; the model stays cached
    monkeypatch.setattr(onnx_backend, "int8_cpu_reason", lambda: None)
    encoder = TextEncoder.from_pretrained("bundled:mpnet", device="cpu", backend="onnx-int8")
    got = encoder.encode(TEXTS)
    quality = onnx_export.read_meta(encoder.onnx_folder)["int8"]
    assert encoder.backend == "onnx-int8" and quality["mean_cosine"] >= onnx_quality.MIN_MEAN_COSINE
    assert all(t["mean_cosine"] < onnx_quality.MIN_MEAN_COSINE for t in quality["tries"][:-1])  # earlier steps fail
    assert quality["tries"][0]["mean_cosine"] < 0.95 and quality["kept_fp32"] != "nothing"
    assert 0 < quality["matmuls_kept_fp32"] < 72
    assert (got * mpnet.encode(TEXTS)).sum(axis=1).min() >= 0.97
