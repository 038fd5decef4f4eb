"""ServeConfig validation, the `contrastext serve` command's config handling, cluster/serve.yaml, cluster
summaries (no Ray needed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from pydantic import ValidationError

from contrastext.cli import main
from contrastext.serve.config import ServeConfig

REPO = Path(__file__).resolve().parents[2]


def test_defaults_are_local_and_closed():
    config = ServeConfig()
    assert config.host == "127.0.0.1" and config.allow_model_paths_from_requests is False
    assert config.default_model_name == "minilm" and config.models["minilm"].model == "bundled:minilm"
    assert config.models["minilm"].batching.enabled and config.zeroshot.template == "This topic is talk about {label}"
    assert config.topics.enabled and config.topics.model == "bundled:minilm" and config.topics.name == "uctopic"


@pytest.mark.parametrize("data, message", [
    ({"models": {}}, "at least one model"),
    ({"models": {"bad name": {}}}, "names must be"),
    ({"default_model": "other"}, "default_model 'other'"),
    ({"zeroshot": {"template": "no field"}}, "{label}"),
    ({"models": {"m": {"max_ongoing_requests": 4, "batching": {"max_batch_size": 8}}}}, "max_ongoing_requests"),
    ({"models": {"m": {"autoscaling": {"min_replicas": 3, "max_replicas": 2}}}}, "min_replicas"),
    ({"limits": {"max_texts_per_request": 0}}, "greater than or equal to 1"),
    ({"prot": 80}, "Extra inputs"),
    ({"topics": {"k_min": 6, "k_max": 4}}, "k_min"),
    ({"topics": {"name": "no spaces"}}, "topics.name"),
    ({"topics": {"model_path": "x"}}, "Extra inputs"),
    ({"limits": {"max_topics": 1}}, "greater than or equal to 2"),
])
def test_invalid_settings_are_refused(data, message):
    with pytest.raises(ValidationError, match=message.replace("{", r"\{").replace("}", r"\}")):
        ServeConfig.model_validate(data)


def test_serve_command_prints_its_config(capsys):
    assert main(["serve", "--set", "port=8123", "--set", "models.minilm.batching.enabled=false",
                 "--print-config"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["port"] == 8123 and printed["models"]["minilm"]["batching"]["enabled"] is False
    assert main(["serve", "--set", "port=99999", "--print-config"]) == 2
    assert "port" in capsys.readouterr().err


def test_cluster_serve_yaml_builds_the_application(monkeypatch):
    from ray.serve.schema import ServeDeploySchema

    from contrastext.serve.app import app_builder
    from contrastext.serve.auth import AuthConfigError, new_token

    data = yaml.safe_load((REPO / "cluster" / "serve.yaml").read_text())
    schema = ServeDeploySchema.model_validate(data)  # what `serve deploy` validates
    spec = schema.applications[0]
    module, _, attribute = spec.import_path.partition(":")
    assert (module, attribute) == ("contrastext.serve.app", "app_builder")
    config = ServeConfig.model_validate(spec.args)
    assert config.models["minilm"].use_gpu and config.models["minilm"].autoscaling.max_replicas == 4
    assert config.topics.enabled and config.topics.use_gpu and config.topics.model == "bundled:minilm"
    assert config.auth.tokens_env == "CONTRASTEXT_API_TOKENS" and config.ingress_replicas == 2
    monkeypatch.delenv("CONTRASTEXT_API_TOKENS", raising=False)
    with pytest.raises(AuthConfigError, match="refusing to serve"):  # the nodes' Secret is missing
        app_builder(dict(spec.args))
    monkeypatch.setenv("CONTRASTEXT_API_TOKENS", new_token("ops", "admin")[1])
    application = app_builder(dict(spec.args))
    assert type(application).__name__ == "Application"


def test_app_builder_reads_a_config_file_and_overrides(tmp_path, monkeypatch):
    from contrastext.serve.app import app_builder
    from contrastext.serve.auth import new_token

    monkeypatch.setenv("CONTRASTEXT_API_TOKENS", new_token("ops", "admin")[1])

    path = tmp_path / "serve.yaml"
    path.write_text("models:\n  small:\n    model: bundled:minilm\n    replicas: 2\n")
    assert type(app_builder({"config": str(path), "set": ["limits.max_texts_per_request=8"]})).__name__ == \
        "Application"
    with pytest.raises(ValidationError, match="Extra inputs"):
        app_builder({"config": str(path), "unknown_key": 1})


def test_class_tfidf_keywords_prefer_words_of_one_cluster():
    from contrastext.serve.clusters import class_tfidf_keywords

    texts = ["goal match team goal", "team match striker", "bank shares market", "market bank profit"]
    keywords = class_tfidf_keywords(texts, np.array([0, 0, 1, 1]), 2, top_n=2)
    assert keywords == [["goal", "match"], ["bank", "market"]]
    assert class_tfidf_keywords(["the a", "of and"], np.array([0, 1]), 2, 3) == [[], []]  # only stop words


def test_replicas_pin_malloc_thresholds_on_linux():
    import sys

    from contrastext.serve.deployments import pin_malloc_thresholds

    assert ServeConfig().models["minilm"].pin_malloc_thresholds
    if not sys.platform.startswith("linux"):
        pytest.skip("glibc's mallopt exists on Linux only")
    assert pin_malloc_thresholds() is True


def test_placement_settings_reach_serve():
    from contrastext.serve.app import _encoder_deployment

    config = ServeConfig.model_validate({"proxy_location": "HeadOnly",
                                         "models": {"m": {"replicas": 2, "max_replicas_per_node": 1}}})
    def per_node(application) -> int | None:
        return application._bound_deployment._replica_config.max_replicas_per_node

    assert per_node(_encoder_deployment("m", config)) == 1
    assert per_node(_encoder_deployment("minilm", ServeConfig())) is None
    with pytest.raises(ValidationError, match="proxy_location"):
        ServeConfig.model_validate({"proxy_location": "Nowhere"})


class _Answer:
    """A stand-in for a DeploymentResponse: awaiting it gives ``outcome`` (raised if an exception)."""

    def __init__(self, outcome):
        self.outcome = outcome

    def __await__(self):
        async def answer():
            if isinstance(self.outcome, BaseException):
                raise self.outcome
            return self.outcome
        return answer().__await__()

    def cancel(self) -> None:
        pass


class _Method:
    """A stand-in for a deployment handle's method: ``remote`` answers with the next outcome."""

    def __init__(self, *outcomes):
        self.outcomes, self.calls = list(outcomes), []

    def remote(self, *args):
        self.calls.append(args)
        return _Answer(self.outcomes.pop(0))


def test_a_call_whose_replica_was_lost_is_sent_once_more():
    import asyncio
    from types import SimpleNamespace

    from fastapi import HTTPException
    from ray.exceptions import ActorDiedError, ActorUnavailableError

    from contrastext.serve.app import Ingress
    from contrastext.serve.config import LimitsConfig

    ingress = object.__new__(Ingress.func_or_class)
    ingress.limits = LimitsConfig(request_timeout_s=5)
    request = SimpleNamespace(state=SimpleNamespace(request_id="r1"))

    def call(method: _Method):
        return asyncio.run(ingress._call(request, "m", method, ["a text"]))

    lost = _Method(ActorUnavailableError("RpcError: Socket closed", None), "answer")
    assert call(lost) == "answer" and lost.calls == [(["a text"],), (["a text"],)]
    failed = _Method(RuntimeError("the model failed"), "never asked")
    with pytest.raises(HTTPException) as error:
        call(failed)
    assert error.value.status_code == 500 and len(failed.calls) == 1  # a model error is not retried
    twice = _Method(ActorDiedError(), ActorDiedError(), "never asked")
    with pytest.raises(HTTPException) as error:
        call(twice)
    assert error.value.status_code == 503 and "again on the retry" in error.value.detail and len(twice.calls) == 2


# ---------------------------------------------------------------- authentication settings (serve.auth)
def test_a_token_is_accepted_by_its_entry_alone_and_scopes_nest():
    from contrastext.serve.auth import TokenTable, new_token, parse_entries

    token, entry = new_token("alice", "train")
    assert token.startswith("ctx_") and len(token) > 40 and token not in entry
    ((name, scope, digest),) = parse_entries(f"# the team's tokens\n{entry}  # alice's laptop\n", "tokens")
    table = TokenTable([(name, scope, digest)])
    alice = table.find(token)
    assert alice is not None and (alice.name, alice.scope) == ("alice", "train")
    assert [alice.allows(s) for s in ("read", "train", "admin")] == [True, True, False]
    assert table.find(token + "x") is None and table.find("") is None


@pytest.mark.parametrize("text, words", [
    ("alice:train:abc", "line 1: item 1 is not a token entry name:scope:sha256 (15 characters"),
    ("alice:root:" + "0" * 64, "is not a token entry"),
    ("a:read:{0},a:admin:{0}".format("0" * 64), "the token name 'a' appears twice"),
    ("# ops\nctx_abcdefabc", "line 2: item 1 is a token, not an entry"),  # pasted in place of its entry
])
def test_a_malformed_token_entry_is_an_error_naming_its_source_and_never_shows_the_secret(text, words):
    from contrastext.serve.auth import AuthConfigError, parse_entries

    with pytest.raises(AuthConfigError, match="CONTRASTEXT_API_TOKENS") as error:
        parse_entries(text, "$CONTRASTEXT_API_TOKENS")
    assert words in str(error.value) and "abc" not in str(error.value)


def test_without_tokens_only_loopback_is_served_and_auth_none_is_said_loudly(monkeypatch, caplog):
    import logging

    from contrastext.serve.app import with_token_entries
    from contrastext.serve.auth import AuthConfigError, new_token

    monkeypatch.delenv("CONTRASTEXT_API_TOKENS", raising=False)
    with caplog.at_level(logging.WARNING, logger="contrastext.serve.auth"):
        assert with_token_entries(ServeConfig(), "127.0.0.1").auth.entries == []  # open, on loopback only
        for host in ("0.0.0.0", "10.1.2.3", None):  # None: serve deploy, whose host is not known here
            with pytest.raises(AuthConfigError, match="without tokens: set auth.tokens_env or auth.tokens_file"):
                with_token_entries(ServeConfig(host=host or "0.0.0.0"), host)
        with pytest.raises(AuthConfigError, match="auth.mode is tokens but no token is configured"):
            with_token_entries(ServeConfig(auth={"mode": "tokens"}), "127.0.0.1")
        caplog.clear()
        assert with_token_entries(ServeConfig(host="0.0.0.0", auth={"mode": "none"}), "0.0.0.0").auth.entries == []
    assert [r.getMessage()[:11] for r in caplog.records] == ["AUTH IS OFF"]
    _, entry = new_token("ops", "admin")
    monkeypatch.setenv("CONTRASTEXT_API_TOKENS", entry)
    assert with_token_entries(ServeConfig(host="0.0.0.0"), "0.0.0.0").auth.entries == [tuple(entry.split(":"))]


def test_a_model_loaded_inside_a_request_takes_torch_for_auto():
    from contrastext.serve.config import ServedModelConfig

    assert ServedModelConfig(backend="auto").on_demand("/m").backend == "torch"
    assert ServedModelConfig(backend="onnx-int8").on_demand("/m").model_dump()["backend"] == "onnx-int8"
    assert ServedModelConfig(backend="auto").on_demand("/m").model == "/m"


def test_tokens_come_from_a_file_too(tmp_path, monkeypatch):
    from contrastext.serve.app import with_token_entries
    from contrastext.serve.auth import AuthConfigError, new_token

    monkeypatch.delenv("CONTRASTEXT_API_TOKENS", raising=False)
    (_, one), (_, two) = new_token("a", "read"), new_token("b", "admin")
    path = tmp_path / "tokens"
    path.write_text(f"{one}\n{two}\n")
    config = ServeConfig(host="0.0.0.0", auth={"tokens_file": str(path)})
    assert [name for name, _, _ in with_token_entries(config, None).auth.entries] == ["a", "b"]
    with pytest.raises(AuthConfigError, match="is not a file"):
        with_token_entries(ServeConfig(auth={"tokens_file": str(tmp_path / "missing")}), None)


def test_the_rate_limiter_lets_a_burst_pass_then_the_rate():
    from contrastext.serve.auth import RateLimiter

    limiter = RateLimiter(rate=1000.0, burst=3)
    assert [limiter.wait_s("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert 0 < limiter.wait_s("a") <= 0.001 and limiter.wait_s("b") == 0.0  # per key
    slow = RateLimiter(rate=0.5, burst=1)
    assert slow.wait_s("a") == 0.0 and slow.wait_s("a") == pytest.approx(2.0, abs=0.01)


def test_serve_on_every_interface_without_tokens_is_refused_before_ray_starts(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "CONTRASTEXT_API_TOKENS"}
    done = subprocess.run([sys.executable, "-m", "contrastext.cli", "serve", "--set", "host=0.0.0.0"], env=env,
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "refusing to serve on 0.0.0.0 without tokens: set auth.tokens_env" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "runs").exists()


def test_the_token_command_prints_a_token_and_its_entry():
    from contrastext.serve.auth import TokenTable, parse_entries

    done = subprocess.run([sys.executable, "-m", "contrastext.cli", "token", "--name", "ci-bot", "--scope", "read"],
                          capture_output=True, text=True, timeout=60)
    lines = done.stdout.splitlines()
    token, entry = lines[1], lines[3]
    assert done.returncode == 0 and TokenTable(parse_entries(entry, "stdout")).find(token).name == "ci-bot"
