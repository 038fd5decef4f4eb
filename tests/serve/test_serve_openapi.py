"""The API's contract over real HTTP, on an application that asks for tokens: the OpenAPI schema fuzzed with
schemathesis with a token and without (no 5xx, no hang); every route without a token, with a wrong one, with
one lacking its scope and with the right one; per-token request rates and trainings with their audit lines;
and the default policy that a request cannot make the server load a model by path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import requests

from contrastext.serve.auth import new_token
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
TOKENS = {scope: new_token(f"{scope}-user", scope) for scope in ("read", "train", "admin")}  # (token, entry)


def bearer(scope: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[scope][0]}"} if scope else {}


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
        auth={"requests_per_s": None},  # the fuzz sends requests as fast as it can
    )
    os.environ["CONTRASTEXT_API_TOKENS"] = ",".join(entry for _, entry in TOKENS.values())
    try:
        with running_app(config) as url:
            yield url
    finally:
        del os.environ["CONTRASTEXT_API_TOKENS"]


EXAMPLES_PER_OPERATION = 12


def _fuzz(app: str, scope: str | None) -> dict[str, set[int]]:
    """The status codes of valid and invalid requests generated for every operation, sent with a token of
    ``scope`` (None: none); each answer is checked against the schema (no 5xx, documented codes and bodies)."""
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
                case.headers = {**(case.headers or {}), **bearer(scope)}
                response = case.call(timeout=REQUEST_TIMEOUT)
                seen.setdefault(operation.label, set()).add(response.status_code)
                case.validate_response(response, checks=[not_a_server_error, status_code_conformance,
                                                         response_schema_conformance])

            check()
    return seen


def test_fuzzed_requests_never_get_a_5xx(app):
    """With an admin token every generated request reaches its handler: accepted ones and rejected ones."""
    seen = _fuzz(app, "admin")
    # 404 (unknown model) and 413 (over a limit) come from inside the handler: the token let them through
    assert seen["POST /v1/classify"] & {200, 404, 413} and 422 in seen["POST /v1/classify"]
    assert 200 in seen["POST /v1/embed"] and 422 in seen["POST /v1/embed"]
    assert 200 in seen["POST /v1/cluster"] and 200 in seen["GET /v1/models"]
    assert 422 in seen["POST /v1/topics"]  # generated documents rarely hold enough phrases to mine
    assert 422 in seen["POST /v1/classifiers"] and seen["GET /v1/classifiers"] == {200}
    assert {404, 422} <= seen["GET /v1/classifiers/{name}"] | seen["DELETE /v1/classifiers/{name}"]


def test_fuzzed_requests_without_a_token_are_all_401_but_the_health_check(app):
    seen = _fuzz(app, None)
    assert seen.pop("GET /healthz") == {200}
    # a body that is not JSON, or too large, is refused before the token is read (413 / 422): nothing passes
    assert seen and all(401 in codes and codes <= {401, 413, 422} for codes in seen.values()), seen


# every route behind a token: (method, path, body, the scope it needs); the bodies pass the checks when the
# token does, or fail them with a 4xx that is not about the token
ROUTES = [("GET", "v1/models", None, "read"), ("POST", "v1/embed", {"texts": ["x"]}, "read"),
          ("POST", "v1/classify", {"texts": ["x"], "labels": ["a", "b"]}, "read"),
          ("POST", "v1/cluster", {"texts": ["a b", "c d", "e f"], "k": 2}, "read"),
          ("POST", "v1/topics", {"documents": ["The central bank raised interest rates."]}, "read"),
          ("GET", "v1/classifiers", None, "read"), ("GET", "v1/classifiers/nobody", None, "read"),
          ("POST", "v1/classifiers", {"name": "x", "labels": ["a", "b"], "texts": ["x"]}, "train"),
          ("DELETE", "v1/classifiers/nobody", None, "admin")]


@pytest.mark.parametrize("method, path, body, scope", ROUTES, ids=[f"{m} {p}" for m, p, _, _ in ROUTES])
def test_each_route_answers_by_the_token_it_is_given(app, method, path, body, scope):
    def send(headers):
        return requests.request(method, app + path, json=body, headers=headers, timeout=REQUEST_TIMEOUT)

    missing = send({})
    assert missing.status_code == 401 and "needs a bearer token with scope " + scope in missing.json()["detail"]
    assert missing.headers["www-authenticate"].startswith("Bearer ")
    wrong = send({"Authorization": "Bearer ctx_not-a-token"})
    assert wrong.status_code == 401 and 'error="invalid_token"' in wrong.headers["www-authenticate"]
    for lower in ("read", "train")[:("read", "train", "admin").index(scope)]:
        refused = send(bearer(lower))
        assert refused.status_code == 403, refused.text
        assert f"token '{lower}-user' has scope {lower}; this route needs scope {scope}" in refused.json()["detail"]
    for enough in ("read", "train", "admin")[("read", "train", "admin").index(scope):]:
        answered = send(bearer(enough))
        assert answered.status_code not in (401, 403) and answered.status_code < 500, answered.text


def test_joining_a_running_serve_without_tokens_is_refused_whatever_the_host_setting(app, monkeypatch):
    """A running Serve keeps its own http_options (this one's proxy could listen beyond loopback)."""
    from contrastext.serve.app import start_serve
    from contrastext.serve.auth import AuthConfigError

    monkeypatch.delenv("CONTRASTEXT_API_TOKENS")
    with pytest.raises(AuthConfigError, match="refusing to serve on the interfaces http_options names"):
        start_serve(ServeConfig(host="127.0.0.1", app_name="contrastext-joined", route_prefix="/joined"))
    assert requests.get(app + "joined/healthz", timeout=REQUEST_TIMEOUT).status_code == 404  # nothing deployed


def test_the_page_health_check_and_openapi_document_need_no_token(app):
    for path in ("", "healthz", "openapi.json"):
        assert requests.get(app + path, timeout=REQUEST_TIMEOUT).status_code == 200
    schemes = requests.get(app + "openapi.json", timeout=REQUEST_TIMEOUT).json()["components"]["securitySchemes"]
    assert [s["scheme"] for s in schemes.values()] == ["bearer"]


def test_per_token_request_rate_and_trainings_and_the_audit_lines(app, tiny_encoder_dir, tmp_path):
    """A second application on the same server with tight per-token limits and classifier training on."""
    from ray import serve

    from contrastext.serve.app import build_app
    from contrastext.serve.registry import ClassifierRegistry

    registry = tmp_path / "registry"
    config = ServeConfig(
        app_name="contrastext-limited", route_prefix="/limited", access_log=False,
        models={"tiny": {"model": str(tiny_encoder_dir), "num_cpus": 0.25, "torch_threads": 1}},
        topics={"enabled": False},
        classifiers={"storage_path": str(registry), "max_texts": 40, "min_texts_per_label": 2,
                     "max_concurrent_trainings": 4, "retry_after_s": 7, "default_rounds": 1, "batch_size": 4,
                     "cpus_per_worker": 1, "num_cpus": 0.25},
        auth={"requests_per_s": 0.05, "burst": 4, "max_trainings_per_token": 1})
    serve.run(build_app(config, "127.0.0.1"), name=config.app_name, route_prefix=config.route_prefix)
    url = app + "limited/"
    texts = ["the striker scored a goal", "the bank raised rates", "the match ended in a draw",
             "shares fell on the market"]
    try:
        # requests per second: a burst of 4 passes, the 5th waits; another token is not held back
        answers = [requests.get(url + "v1/classifiers", headers=bearer("read"), timeout=REQUEST_TIMEOUT)
                   for _ in range(5)]
        assert [a.status_code for a in answers] == [200, 200, 200, 200, 429], [a.text for a in answers]
        assert int(answers[-1].headers["retry-after"]) >= 10 and "read-user" in answers[-1].json()["detail"]
        # trainings per token: a second one by the same token waits; another token's is started
        body = {"labels": ["Sports", "Business"], "texts": texts, "rounds": 1}
        first = requests.post(url + "v1/classifiers", json={"name": "first", **body}, headers=bearer("train"),
                              timeout=REQUEST_TIMEOUT)
        assert first.status_code == 202, first.text
        second = requests.post(url + "v1/classifiers", json={"name": "second", **body}, headers=bearer("train"),
                               timeout=REQUEST_TIMEOUT)
        assert second.status_code == 429 and second.headers["retry-after"] == "7", second.text
        assert "token 'train-user' has 1 training(s) running (first)" in second.json()["detail"]
        third = requests.post(url + "v1/classifiers", json={"name": "third", **body}, headers=bearer("admin"),
                              timeout=REQUEST_TIMEOUT)
        assert third.status_code == 202, third.text
        for name in ("first", "third"):
            deleted = requests.delete(url + f"v1/classifiers/{name}", headers=bearer("admin"),
                                      timeout=REQUEST_TIMEOUT)
            assert deleted.status_code == 200, deleted.text
        events = ClassifierRegistry(registry).audit_events()
        assert [(e["action"], e["classifier"], e["token"]) for e in events] == [
            ("create", "first", "train-user"), ("create", "third", "admin-user"),
            ("delete", "first", "admin-user"), ("delete", "third", "admin-user")]
        assert all(e["time"] and e["request_id"] for e in events)
        assert not any(token in str(events) for token, _ in TOKENS.values())  # names only, never a token
    finally:
        serve.delete(config.app_name)


def test_requests_cannot_load_models_by_path_by_default(app, tiny_encoder_dir):
    models = requests.get(app + "v1/models", headers=bearer("read"), timeout=REQUEST_TIMEOUT).json()
    assert models["model_paths_from_requests"] is False
    assert models["topics"]["name"] == "uctopic"
    for name in (str(tiny_encoder_dir), "/etc/passwd", "../models", "bundled:minilm", "~/model"):
        for path, body in (("v1/embed", {"texts": ["x"]}),
                           ("v1/classify", {"texts": ["x"], "labels": ["a"]}),
                           ("v1/cluster", {"texts": ["a", "b", "c"], "k": 2}),
                           ("v1/topics", {"documents": ["The central bank raised interest rates."] * 3})):
            response = requests.post(app + path, json={**body, "model": name}, headers=bearer("read"),
                                     timeout=REQUEST_TIMEOUT)
            assert response.status_code == 403, response.text
            assert "disabled by the server configuration" in response.json()["detail"]
    unknown = requests.post(app + "v1/embed", json={"texts": ["x"], "model": "nope"}, headers=bearer("read"),
                            timeout=REQUEST_TIMEOUT)
    assert unknown.status_code == 404 and "served models: ['tiny']" in unknown.json()["detail"]
    unknown = requests.post(app + "v1/topics", json={"documents": ["x"], "model": "tiny"}, headers=bearer("read"),
                            timeout=REQUEST_TIMEOUT)
    assert unknown.status_code == 404 and "the topics model is 'uctopic'" in unknown.json()["detail"]


def test_access_log_off_writes_no_line_per_request(app):
    import ray._private.worker

    for _ in range(3):
        assert requests.post(app + "v1/embed", json={"texts": ["hello"]}, headers=bearer("read"),
                             timeout=REQUEST_TIMEOUT).status_code == 200
    logs = Path(ray._private.worker._global_node.get_session_dir_path()) / "logs" / "serve"
    replica_logs = sorted(logs.glob(f"replica_{APP_NAME}_*.log"))
    assert replica_logs, f"no replica logs of {APP_NAME} under {logs}"
    text = "".join(path.read_text(errors="replace") for path in replica_logs)
    assert "POST /v1/embed" not in text and "POST /v1/classify" not in text
