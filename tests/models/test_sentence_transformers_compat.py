"""The bundled MiniLM against sentence-transformers itself: same vectors, and each loads the other's folders."""

import numpy as np
import pytest

from contrastext.models import DEFAULT_MODEL, TextEncoder, resolve_model_path

sentence_transformers = pytest.importorskip("sentence_transformers")
pytestmark = pytest.mark.integration

TEXTS = [
    "Zero-shot text classification with Wikipedia categories.",
    "The 1998 FIFA World Cup was held in France.",
    "Photosynthesis converts light energy into chemical energy.",
    "",
    "x",
    "Stock markets fell sharply after the central bank raised interest rates by half a point, "
    "the largest increase in two decades, citing persistent inflation. " * 8,
]


@pytest.fixture(scope="module")
def ours():
    return TextEncoder.from_pretrained(DEFAULT_MODEL, device="cpu")


@pytest.fixture(scope="module")
def theirs():
    return sentence_transformers.SentenceTransformer(str(resolve_model_path(DEFAULT_MODEL)), device="cpu")


def test_bundled_model_settings_come_from_its_folder(ours):
    assert (ours.pooling, ours.normalize, ours.max_length, ours.embedding_dimension) == ("mean", True, 256, 384)


@pytest.mark.parametrize("batch_size", [1, 4, 32])
def test_embeddings_equal_sentence_transformers_within_1e_5(ours, theirs, batch_size):
    expected = theirs.encode(TEXTS, batch_size=batch_size, convert_to_numpy=True)
    np.testing.assert_allclose(ours.encode(TEXTS, batch_size=batch_size), expected, atol=1e-5, rtol=0)


def test_sentence_transformers_loads_what_we_save(ours, tmp_path):
    ours.save(tmp_path / "ours")
    loaded = sentence_transformers.SentenceTransformer(str(tmp_path / "ours"), device="cpu")
    np.testing.assert_allclose(loaded.encode(TEXTS), ours.encode(TEXTS), atol=1e-5, rtol=0)


def test_we_load_what_sentence_transformers_saves(theirs, tmp_path):
    theirs.save(str(tmp_path / "theirs"))
    loaded = TextEncoder.load(tmp_path / "theirs")
    assert (loaded.pooling, loaded.normalize) == ("mean", True)
    np.testing.assert_allclose(loaded.encode(TEXTS), theirs.encode(TEXTS), atol=1e-5, rtol=0)



def test_equal_to_sentence_transformers_on_real_news_texts(ours, theirs):
    import csv

    from conftest import shared_data

    with open(shared_data("ag_news/test.csv"), newline="", encoding="utf-8") as f:
        texts = [f"{title}. {body}" for _, title, body in list(csv.reader(f))[:96]]
    np.testing.assert_allclose(ours.encode(texts, batch_size=32), theirs.encode(texts, batch_size=32),
                               atol=1e-5, rtol=0)
