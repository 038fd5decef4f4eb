"""ServeConfig validation, the `contrastext serve` command's config handling, cluster/serve.yaml, cluster
summaries (no Ray needed)."""

from __future__ import annotations

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


def test_cluster_serve_yaml_builds_the_application():
    from ray.serve.schema import ServeDeploySchema

    from contrastext.serve.app import app_builder

    data = yaml.safe_load((REPO / "cluster" / "serve.yaml").read_text())
    schema = ServeDeploySchema.model_validate(data)  # what `serve deploy` validates
    spec = schema.applications[0]
    module, _, attribute = spec.import_path.partition(":")
    assert (module, attribute) == ("contrastext.serve.app", "app_builder")
    config = ServeConfig.model_validate(spec.args)
    assert config.models["minilm"].use_gpu and config.models["minilm"].autoscaling.max_replicas == 4
    assert config.topics.enabled and config.topics.use_gpu and config.topics.model == "bundled:minilm"
    application = app_builder(dict(spec.args))
    assert type(application).__name__ == "Application"


def test_app_builder_reads_a_config_file_and_overrides(tmp_path):
    from contrastext.serve.app import app_builder

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
