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
