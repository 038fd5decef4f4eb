"""The OpenAPI schema fuzzed with schemathesis against the running application (no 5xx, no hang), and the
default policy: a request cannot make the server load a model by path."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

from contrastext.serve.config import ServeConfig
from serve_harness import free_port, running_app

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is not installed (pip install schemathesis)")
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    response_schema_conformance, status_code_conformance,
)

pytestmark = [pytest.mark.ray, pytest.mark.slow]

REQUEST_TIMEOUT = 30  # a hang fails the case instead of the whole run
APP_NAME = "contrastext-fuzz"


@pytest.fixture(scope="module")
def app(ray_session, tiny_encoder_dir, tmp_path_factory):
    config = ServeConfig(
        port=free_port(), app_name=APP_NAME, access_log=False,
        models={"tiny": {"model": str(tiny_encoder_dir), "num_cpus": 0.25, "torch_threads": 1,
                         "batching": {"max_batch_size": 8, "batch_wait_timeout_s": 0.005}}},
        topics={"model": str(tiny_encoder_dir), "num_cpus": 0.25, "torch_threads": 1, "k_max": 4,
                "max_phrases": 200},
        limits={"max_texts_per_request": 16, "max_chars_per_text": 300, "max_labels_per_request": 8,
                "max_cluster_texts": 16, "max_clusters": 8, "request_timeout_s": 20,
                "max_topic_documents": 16, "max_topics": 8, "max_top_phrases": 10},
        # a generated request that passes every check starts a real (small) training
        classifiers={"storage_path": str(tmp_path_factory.mktemp("registry")), "max_texts": 16,
                     "min_texts_per_label": 2, "max_dev_texts": 8, "max_concurrent_trainings": 1,
                     "default_rounds": 1, "max_rounds": 2, "batch_size": 4, "cpus_per_worker": 1,
                     "num_cpus": 0.25},
    )
    with running_app(config) as url:
        yield url


EXAMPLES_PER_OPERATION = 12


def test_fuzzed_requests_never_get_a_5xx(app):
    """Valid and invalid requests generated from the OpenAPI document, for every operation."""
    from hypothesis import given

    schema = schemathesis.openapi.from_url(app + "openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.path for op in operations} >= {"/v1/embed", "/v1/classify", "/v1/cluster", "/v1/topics", "/v1/models",
                                              "/healthz", "/v1/classifiers", "/v1/classifiers/{name}"}
    seen: dict[str, set[int]] = {}
    for operation in operations:
        # an operation without parameters or body has no invalid form
        has_input = operation.method.upper() == "POST"
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE) if has_input else (GenerationMode.POSITIVE,):
            @given(case=operation.as_strategy(mode))
            @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, derandomize=True, database=None,
                      suppress_health_check=list(HealthCheck))
            def check(case):
                response = case.call(timeout=REQUEST_TIMEOUT)
                seen.setdefault(operation.label, set()).add(response.status_code)
                case.validate_response(response, checks=[not_a_server_error, status_code_conformance,
                                                         response_schema_conformance])

            check()
    # the generated requests reached the handlers: accepted ones and rejected ones
    assert 200 in seen["POST /v1/classify"] and 422 in seen["POST /v1/classify"]
    assert 200 in seen["POST /v1/embed"] and 422 in seen["POST /v1/embed"]
    assert 422 in seen["POST /v1/topics"]  # generated documents rarely hold enough phrases to mine
    assert 422 in seen["POST /v1/classifiers"] and seen["GET /v1/classifiers"] == {200}
    assert {404, 422} <= seen["GET /v1/classifiers/{name}"] | seen["DELETE /v1/classifiers/{name}"]


def test_requests_cannot_load_models_by_path_by_default(app, tiny_encoder_dir):
    models = requests.get(app + "v1/models", timeout=REQUEST_TIMEOUT).json()
    assert models["model_paths_from_requests"] is False
    assert models["topics"]["name"] == "uctopic"
    for name in (str(tiny_encoder_dir), "/etc/passwd", "../models", "bundled:minilm", "~/model"):
        for path, body in (("v1/embed", {"texts": ["x"]}),
                           ("v1/classify", {"texts": ["x"], "labels": ["a"]}),
                           ("v1/cluster", {"texts": ["a", "b", "c"], "k": 2}),
                           ("v1/topics", {"documents": ["The central bank raised interest rates."] * 3})):
            response = requests.post(app + path, json={**body, "model": name}, timeout=REQUEST_TIMEOUT)
            assert response.status_code == 403, response.text
            assert "disabled by the server configuration" in response.json()["detail"]
    unknown = requests.post(app + "v1/embed", json={"texts": ["x"], "model": "nope"}, timeout=REQUEST_TIMEOUT)
    assert unknown.status_code == 404 and "served models: ['tiny']" in unknown.json()["detail"]
    unknown = requests.post(app + "v1/topics", json={"documents": ["x"], "model": "tiny"}, timeout=REQUEST_TIMEOUT)
    assert unknown.status_code == 404 and "the topics model is 'uctopic'" in unknown.json()["detail"]


def test_access_log_off_writes_no_line_per_request(app):
    import ray._private.worker

    for _ in range(3):
        assert requests.post(app + "v1/embed", json={"texts": ["hello"]}, timeout=REQUEST_TIMEOUT).status_code == 200
    logs = Path(ray._private.worker._global_node.get_session_dir_path()) / "logs" / "serve"
    replica_logs = sorted(logs.glob(f"replica_{APP_NAME}_*.log"))
    assert replica_logs, f"no replica logs of {APP_NAME} under {logs}"
    text = "".join(path.read_text(errors="replace") for path in replica_logs)
    assert "POST /v1/embed" not in text and "POST /v1/classify" not in text
