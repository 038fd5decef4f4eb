"""Every method's predictions on the ONNX backend equal torch's: SupConClassifier's head and PhraseTopicModel's
span pooling read the session's embeddings and token states (no Ray: the predictor a `predict` actor holds)."""

import json

import numpy as np
import pytest

from contrastext.predict.predictors import Predictor, model_kind
from tests.conftest import NEWS_DOCUMENTS


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CONTRASTEXT_CACHE", str(tmp_path / "cache"))


def _tables(folder, **settings):
    kind = model_kind(str(folder))
    made = {backend: Predictor(kind, str(folder), top_k=2, include_embedding=True, max_length=None,
                               batch_size=4, backend=backend, **settings) for backend in ("torch", "onnx")}
    assert made["onnx"].backend == "onnx" and made["torch"].backend == "torch"
    ids = [str(i) for i in range(len(NEWS_DOCUMENTS))]
    return kind, {b: p.table(ids, NEWS_DOCUMENTS).to_pydict() for b, p in made.items()}


def _close(a, b, tolerance):
    return np.abs(np.asarray(a, np.float32) - np.asarray(b, np.float32)).max() <= tolerance


def test_a_supcon_classifiers_head_reads_the_onnx_embeddings(tiny_encoder_dir, tmp_path):
    import torch

    from contrastext.methods.supcon.model import MANIFEST
    from contrastext.models.classifier import TextClassifier

    torch.manual_seed(0)
    labels = ["sport", "money", "phones"]
    folder = TextClassifier.from_pretrained(tiny_encoder_dir, num_labels=3, labels=labels).save(tmp_path / "clf")
    (folder / MANIFEST).write_text(json.dumps({"classes": labels}))
    kind, tables = _tables(folder)
    assert kind.method == "SupConClassifier"
    assert _close(tables["onnx"]["embedding"], tables["torch"]["embedding"], 1e-4)
    assert _close(tables["onnx"]["top_scores"], tables["torch"]["top_scores"], 1e-4)


def test_phrase_topics_read_the_onnx_token_states(tiny_encoder_dir, tmp_path):
    from contrastext import PhraseTopicModel

    model = PhraseTopicModel(str(tiny_encoder_dir), extractor="ngram").fit(NEWS_DOCUMENTS * 3, n_topics=2,
                                                                           max_phrases=200)
    folder = model.save(tmp_path / "topics")
    kind, tables = _tables(folder)
    assert kind.method == "PhraseTopicModel"
    assert _close(tables["onnx"]["embedding"], tables["torch"]["embedding"], 1e-4)
    assert tables["onnx"]["topic"] == tables["torch"]["topic"]
