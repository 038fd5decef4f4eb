"""Every endpoint over HTTP on 127.0.0.1 (tiny random encoder): answers, limits, bad input, concurrency, errors."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import requests
from conftest import NEWS_DOCUMENTS
from serve_harness import free_port, running_app

from contrastext.methods.uctopic.model import PhraseTopicModel
from contrastext.models import TextEncoder
from contrastext.serve.config import ServeConfig
from contrastext.zeroshot import ZeroShotClassifier

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TIMEOUT = 60
MAX_CHARS = 400


@pytest.fixture(scope="module")
def app(ray_session, tiny_encoder_dir):
    small = {"model": str(tiny_encoder_dir), "num_cpus": 0.25, "torch_threads": 1}
    config = ServeConfig(
        port=free_port(),
        models={
            # fp32, so answers can be compared with the local encoder to 1e-5
            "tiny": {**small, "precision": "fp32", "batching": {"max_batch_size": 32, "batch_wait_timeout_s": 0.05}},
            # max_length above the model's 128 positions: a real forward-pass failure on long texts; bf16
            "broken": {**small, "max_length": 512, "precision": "bf16",
                       "batching": {"max_batch_size": 8, "batch_wait_timeout_s": 0.2}},
            "tiny_onnx": {**small, "backend": "onnx"},  # the same weights on onnxruntime
        },
        limits={"max_texts_per_request": 40, "max_chars_per_text": MAX_CHARS, "max_labels_per_request": 5,
                "max_cluster_texts": 40, "max_clusters": 6, "max_body_bytes": 8192, "request_timeout_s": 30,
                "max_topic_documents": 12, "max_topic_chars": 2000, "max_topics": 5, "max_top_phrases": 10},
        # max_length above the model's 128 positions: a long sentence makes mining fail for real
        topics={**small, "model": str(tiny_encoder_dir), "max_length": 512, "k_max": 4},
        allow_model_paths_from_requests=True,  # (the default, off, is tested in test_serve_openapi.py)
    )
    with running_app(config) as url:
        yield url


@pytest.fixture(scope="module")
def local(tiny_encoder_dir) -> TextEncoder:
    return TextEncoder.from_pretrained(tiny_encoder_dir, device="cpu")


def post(url: str, path: str, body, **kwargs) -> requests.Response:
    return requests.post(url + path, json=body, timeout=TIMEOUT, **kwargs)


def assert_error(response: requests.Response, status: int, *words: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["request_id"] == response.headers["x-request-id"]
    text = str(body["detail"]).lower()
    for word in words:
        assert word.lower() in text, text
    return body


# ---------------------------------------------------------------- the happy paths
def test_health_and_models(app, local, tiny_encoder_dir):
    health = requests.get(app + "healthz", timeout=TIMEOUT)
    assert health.status_code == 200 and health.json() == {"status": "ok", "models": ["broken", "tiny", "tiny_onnx"]}
    models = requests.get(app + "v1/models", timeout=TIMEOUT).json()
    assert models["default_model"] == "tiny"
    by_name = {m["name"]: m for m in models["models"]}
    assert by_name["tiny"]["dimension"] == local.embedding_dimension == 32
    assert by_name["tiny"]["default"] and not by_name["broken"]["default"]
    assert by_name["tiny"]["batching"]["enabled"] and by_name["tiny"]["device"] == "cpu"
    assert by_name["tiny"]["precision"] == "fp32" and by_name["broken"]["precision"] == "bf16"
    assert by_name["broken"]["max_length"] == 512
    assert by_name["tiny"]["backend"] == "torch" and by_name["tiny_onnx"]["backend"] == "onnx"
    assert models["topics"] == {"name": "uctopic", "model": str(tiny_encoder_dir), "max_length": 512,
                                "device": "cpu", "backend": "torch", "k_range": [2, 4]}


def test_page_and_openapi(app):
    page = requests.get(app, timeout=TIMEOUT)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'id="classify-run"' in page.text and 'id="cluster-run"' in page.text and "v1/classify" in page.text
    assert 'id="topics-run"' in page.text and "v1/topics" in page.text
    spec = requests.get(app + "openapi.json", timeout=TIMEOUT).json()
    assert {"/v1/embed", "/v1/classify", "/v1/cluster", "/v1/topics", "/v1/models", "/healthz"} <= set(spec["paths"])


def test_embed_matches_the_encoder(app, local):
    texts = ["A cat sat on the mat.", "Stocks fell on Monday.", ""]
    response = post(app, "v1/embed", {"texts": texts})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model"] == "tiny" and body["dimension"] == 32
    assert body["request_id"] == response.headers["x-request-id"]
    np.testing.assert_allclose(np.array(body["embeddings"]), local.encode(texts), atol=1e-5)


def test_an_onnx_model_embeds_as_the_torch_encoder(app, local):
    texts = ["A cat sat on the mat.", "Stocks fell on Monday.", "The striker scored twice."]
    response = post(app, "v1/embed", {"texts": texts, "model": "tiny_onnx"})
    assert response.status_code == 200, response.text
    np.testing.assert_allclose(np.array(response.json()["embeddings"]), local.encode(texts), atol=1e-4)


def test_bf16_model_embeds_close_to_fp32(app, local):
    texts = ["A cat sat on the mat.", "Stocks fell on Monday.", "The striker scored twice."]
    response = post(app, "v1/embed", {"texts": texts, "model": "broken"})
    assert response.status_code == 200, response.text
    got, want = np.array(response.json()["embeddings"]), local.encode(texts)
    cosine = (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    assert cosine.min() > 0.99 and not np.allclose(got, want, atol=1e-6)  # bf16 did run, and stayed close


def test_access_log_writes_a_line_per_request_by_default(app):
    import ray._private.worker

    assert post(app, "v1/embed", {"texts": ["logged"]}).status_code == 200
    logs = Path(ray._private.worker._global_node.get_session_dir_path()) / "logs" / "serve"
    text = "".join(p.read_text(errors="replace") for p in logs.glob("replica_contrastext_Ingress_*.log"))
    assert "POST /v1/embed 200" in text


def test_classify_matches_the_classifier(app, local):
    texts = ["The striker scored twice.", "The central bank raised rates.", "A new chip doubles speed."]
    labels = ["Sports", "Business & Finance", "SciTech"]
    response = post(app, "v1/classify", {"texts": texts, "labels": labels, "threshold": -1.0})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["template"] == "This topic is talk about {label}"
    expected = ZeroShotClassifier(local).classify(texts, labels)
    for got, want in zip(body["results"], expected):
        assert got["label"] == want.label
        assert got["scores"].keys() == set(labels)
        np.testing.assert_allclose([got["scores"][lb] for lb in labels], [want.scores[lb] for lb in labels],
                                   atol=1e-5)
        assert got["label"] == max(got["scores"], key=got["scores"].get)
        # threshold -1 keeps every label, best first
        assert got["labels"] == sorted(labels, key=lambda lb: -got["scores"][lb])


def test_classify_aliases_and_template(app, local):
    texts = ["An election was held in the capital."]
    template = "News about {label}."
    body = post(app, "v1/classify", {"texts": texts, "labels": ["World", "Sports"], "template": template,
                                     "aliases": {"World": ["politics", "elections"]},
                                     "auto_aliases": False}).json()
    assert body["template"] == template and body["results"][0]["labels"] is None
    classifier = ZeroShotClassifier(local, template=template, auto_aliases=False)
    alias_scores = classifier.scores(texts, ["World", "politics", "elections"])[0]
    assert body["results"][0]["scores"]["World"] == pytest.approx(float(alias_scores.max()), abs=1e-5)


def test_cluster_with_fixed_and_automatic_k(app):
    texts = [f"football match goal team {i}" for i in range(5)] + [f"bank shares profit market {i}" for i in range(5)]
    body = post(app, "v1/cluster", {"texts": texts, "k": 2, "top_texts": 2, "top_keywords": 3}).json()
    assert body["k"] == 2 and body["silhouette"] is None
    assert len(body["assignments"]) == len(texts) and sum(body["sizes"]) == len(texts)
    assert len(body["points"]) == len(texts) and all(len(p) == 2 for p in body["points"])
    for cluster in body["clusters"]:
        assert cluster["size"] == body["assignments"].count(cluster["cluster"])
        assert len(cluster["central"]) == min(2, cluster["size"]) and len(cluster["keywords"]) <= 3
        for central in cluster["central"]:
            assert body["assignments"][central["index"]] == cluster["cluster"]
            assert central["text"] == texts[central["index"]]
        members = " ".join(texts[i] for i, a in enumerate(body["assignments"]) if a == cluster["cluster"])
        assert all(word in members for word in cluster["keywords"])
    auto = post(app, "v1/cluster", {"texts": texts, "k": "auto"}).json()
    assert sorted(int(k) for k in auto["silhouette"]) == list(range(2, 10))
    assert auto["silhouette"][str(auto["k"])] == max(auto["silhouette"].values())


def test_topics_match_the_phrase_topic_model(app, tiny_encoder_dir):
    response = post(app, "v1/topics", {"documents": NEWS_DOCUMENTS, "n_topics": 3, "top_phrases": 4, "seed": 1})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model"] == "uctopic" and body["request_id"] == response.headers["x-request-id"]
    assert body["n_topics"] == 3 and len(body["topics"]) == 3 and body["extractor"] == "ngram"
    assert sum(t["size"] for t in body["topics"]) == len(body["occurrences"]) == body["instances"]
    for occurrence in body["occurrences"]:
        assert NEWS_DOCUMENTS[occurrence["document"]][occurrence["start"]:occurrence["end"]] == occurrence["phrase"]
        assert 0 <= occurrence["topic"] < 3
    for topic in body["topics"]:
        assert 1 <= len(topic["phrases"]) <= 4
        assert all(body["phrase_topics"][p["phrase"].lower()] == topic["topic"] for p in topic["phrases"])
    # the same answer as the model in this process (same weights, settings and seed)
    local = PhraseTopicModel.load(str(tiny_encoder_dir), max_length=512).mine(
        NEWS_DOCUMENTS, 3, k_min=2, k_max=4, top_phrases=4, max_phrases=2000, seed=1)
    assert [(o.document, o.start, o.end) for o in local.occurrences] == \
        [(o["document"], o["start"], o["end"]) for o in body["occurrences"]]
    assert body["phrase_topics"] == local.phrase_topics

    auto = post(app, "v1/topics", {"documents": NEWS_DOCUMENTS}).json()
    assert set(int(k) for k in auto["silhouette_by_k"]) == {2, 3, 4}  # the server's k range
    assert auto["silhouette"] == pytest.approx(max(auto["silhouette_by_k"].values()))
    # a request may name the server's topics model, or (allowed here) a model folder
    named = post(app, "v1/topics", {"documents": NEWS_DOCUMENTS, "n_topics": 2, "model": str(tiny_encoder_dir)})
    assert named.status_code == 200 and named.json()["model"] == str(tiny_encoder_dir)
    assert post(app, "v1/topics", {"documents": NEWS_DOCUMENTS, "model": "uctopic"}).status_code == 200


def test_topics_bad_input_and_model_failure(app, tiny_encoder_dir):
    assert_error(post(app, "v1/topics", {"documents": []}), 422, "at least 1")
    assert_error(post(app, "v1/topics", {"documents": NEWS_DOCUMENTS, "n_topics": 1}), 422, "n_topics")
    assert_error(post(app, "v1/topics", {"documents": NEWS_DOCUMENTS, "n_topics": "many"}), 422, "n_topics")
    assert_error(post(app, "v1/topics", {"documents": ["Hello."]}), 422, "cannot mine topics", "too few phrases")
    assert_error(post(app, "v1/topics", {"documents": ["", "  "]}), 422, "no document has any text")
    assert_error(post(app, "v1/topics", {"documents": NEWS_DOCUMENTS * 3}), 413, "18 documents", "12")
    assert_error(post(app, "v1/topics", {"documents": ["x" * (MAX_CHARS + 1)]}), 413, "documents[0]")
    assert_error(post(app, "v1/topics", {"documents": ["word " * 70] * 6}), 413, "2100 characters", "2000")
    assert_error(post(app, "v1/topics", {"documents": NEWS_DOCUMENTS, "n_topics": 6}), 413, "at most 5 topics")
    assert_error(post(app, "v1/topics", {"documents": NEWS_DOCUMENTS, "top_phrases": 11}), 413, "top_phrases=11")
    assert_error(post(app, "v1/topics", {"documents": NEWS_DOCUMENTS, "model": str(tiny_encoder_dir) + "-missing"}),
                 404, "could not be loaded")
    # a sentence longer than the model's positions: the model fails, the answer names the request
    long_document = "Stock markets " + "x " * 180 + "and bank rates fell."
    failed = assert_error(post(app, "v1/topics", {"documents": [*NEWS_DOCUMENTS, long_document], "n_topics": 2}),
                          500, "model 'uctopic' failed", "RuntimeError")
    assert failed["request_id"] in failed["detail"]
    assert post(app, "v1/topics", {"documents": NEWS_DOCUMENTS, "n_topics": 2}).status_code == 200


# ---------------------------------------------------------------- bad input
def test_bad_input_gets_a_4xx_that_says_why(app):
    assert_error(post(app, "v1/embed", {"texts": []}), 422, "at least 1")
    assert_error(post(app, "v1/embed", {"texts": "not a list"}), 422, "list")
    assert_error(post(app, "v1/embed", {"texts": [1, 2]}), 422, "string")
    assert_error(post(app, "v1/embed", {"texts": ["x"], "colour": "red"}), 422, "extra")
    assert_error(requests.post(app + "v1/embed", data="{not json", timeout=TIMEOUT,
                               headers={"content-type": "application/json"}), 422, "json")
    assert_error(post(app, "v1/embed", {"texts": ["x" * (MAX_CHARS + 1)]}), 413, "texts[0]", str(MAX_CHARS))
    assert_error(post(app, "v1/embed", {"texts": ["x"] * 41}), 413, "41 texts", "40")
    assert_error(post(app, "v1/embed", {"texts": ["x" * 300] * 40}), 413, "bytes", "8192")
    assert_error(post(app, "v1/classify", {"texts": ["x"], "labels": list("abcdef")}), 413, "6 labels")
    assert_error(post(app, "v1/classify", {"texts": ["x"], "labels": ["a", "a"]}), 422, "distinct")
    assert_error(post(app, "v1/classify", {"texts": ["x"], "labels": ["a"], "aliases": {"b": ["c"]}}),
                 422, "not in the label list")
    assert_error(post(app, "v1/classify", {"texts": ["x"], "labels": ["a"], "template": "no field"}),
                 422, "{label}")
    assert_error(post(app, "v1/classify", {"texts": ["x"], "labels": ["a"], "threshold": "high"}), 422)
    assert_error(post(app, "v1/cluster", {"texts": ["a", "b", "c"], "k": 4}), 422, "more than the 3 texts")
    assert_error(post(app, "v1/cluster", {"texts": ["a", "b"] * 5, "k": 7}), 413, "at most 6")
    assert_error(post(app, "v1/cluster", {"texts": ["a", "b"], "k": 2}), 422)
    assert_error(post(app, "v1/cluster", {"texts": ["same"] * 4, "k": "auto"}), 422, "cannot cluster")


def test_unknown_model_and_model_paths_when_allowed(app, tiny_encoder_dir, local):
    models = requests.get(app + "v1/models", timeout=TIMEOUT).json()
    assert models["model_paths_from_requests"] is True
    assert_error(post(app, "v1/embed", {"texts": ["x"], "model": "nope"}), 404, "nope", "could not be loaded")
    # the operator allows it here: a request may name a model folder, which is loaded on demand
    response = post(app, "v1/embed", {"texts": ["hello there"], "model": str(tiny_encoder_dir)})
    assert response.status_code == 200, response.text
    np.testing.assert_allclose(response.json()["embeddings"], local.encode(["hello there"]), atol=1e-5)
    classified = post(app, "v1/classify", {"texts": ["x"], "labels": ["a", "b"], "model": str(tiny_encoder_dir)})
    assert classified.status_code == 200 and classified.json()["results"][0]["label"] in {"a", "b"}
    assert_error(post(app, "v1/embed", {"texts": ["x"], "model": str(tiny_encoder_dir) + "-missing"}),
                 404, "could not be loaded")
    assert_error(post(app, "v1/embed", {"texts": ["x"], "model": str(tiny_encoder_dir / "1_Pooling")}),
                 404, "could not be loaded")  # a folder, but not a model


# ---------------------------------------------------------------- concurrency and model errors
def test_concurrent_requests_are_batched_and_answered_correctly(app, local):
    from ray import serve

    texts = [f"request number {i} about topic {i % 7}" for i in range(32)]
    handle = serve.get_deployment_handle("encoder-tiny", "contrastext")
    before = handle.info.remote().result(timeout_s=TIMEOUT)
    with ThreadPoolExecutor(32) as pool:
        responses = list(pool.map(lambda t: post(app, "v1/embed", {"texts": [t]}), texts))
    assert [r.status_code for r in responses] == [200] * 32
    assert len({r.json()["request_id"] for r in responses}) == 32
    got = np.array([r.json()["embeddings"][0] for r in responses])
    np.testing.assert_allclose(got, local.encode(texts), atol=1e-5)  # each answer is its own text's
    after = handle.info.remote().result(timeout_s=TIMEOUT)
    requests_served = after["batched_requests"] - before["batched_requests"]
    batches = after["batches"] - before["batches"]
    assert requests_served == 32 and batches < 32  # some requests shared a forward pass


def test_model_error_is_a_5xx_naming_the_request_and_spares_its_batch(app):
    long_text = "w " * 199  # 201 tokens > the model's 128 positions, within the character limit
    bodies = [{"texts": [long_text], "model": "broken"}] + [{"texts": [f"short {i}"], "model": "broken"}
                                                            for i in range(4)]
    with ThreadPoolExecutor(len(bodies)) as pool:
        responses = list(pool.map(lambda b: post(app, "v1/embed", b), bodies))
    failed = assert_error(responses[0], 500, "model 'broken' failed", "RuntimeError")
    assert failed["request_id"] in failed["detail"]
    assert [r.status_code for r in responses[1:]] == [200] * 4
    # the replica still serves after the failure
    assert post(app, "v1/classify", {"texts": ["ok"], "labels": ["a"], "model": "broken"}).status_code == 200
