"""/v1/classifiers over HTTP (tiny random encoder): self-train a classifier as a Ray job, poll it, classify
with it, list, restart the app, delete; every refused request; a failed training."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import requests

from conftest import NEWS_DOCUMENTS
from contrastext.serve.config import ServeConfig
from serve_harness import free_port, running_app

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TIMEOUT = 60
TRAINING_TIMEOUT_S = 600
LABELS = ["Football", "Finance", "Phones"]
# words of the texts: with them even the random model spreads the texts over the labels (with the label names
# alone it puts all six in one, and pairs that all share one positive give no gradient)
ALIASES = {"Football": ["striker", "Premier League"], "Finance": ["interest rates", "central bank"],
           "Phones": ["smartphone", "screen"]}
DEV_LABELS = ["Football", "Football", "Finance", "Finance", "Phones", "Phones"]  # NEWS_DOCUMENTS' topics
MIN_PER_LABEL = 3
MAX_TEXTS = 40


@pytest.fixture(scope="module")
def uploads(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("uploads")


@pytest.fixture(scope="module")
def served(ray_session, tiny_encoder_dir, tmp_path_factory, uploads):
    registry = tmp_path_factory.mktemp("registry")
    config = ServeConfig(
        port=free_port(), app_name="contrastext-classifiers", access_log=False,
        models={"tiny": {"model": str(tiny_encoder_dir), "num_cpus": 0.25, "torch_threads": 1, "precision": "fp32"}},
        topics={"enabled": False},
        limits={"max_texts_per_request": 16, "max_chars_per_text": 400, "max_labels_per_request": 5,
                "request_timeout_s": 60},
        classifiers={"storage_path": str(registry), "texts_uri_prefixes": [str(uploads)], "max_texts": MAX_TEXTS,
                     "min_texts_per_label": MIN_PER_LABEL, "max_dev_texts": 10, "max_concurrent_trainings": 1,
                     "retry_after_s": 30, "default_rounds": 1,
                     # a few steps at a high rate, so one round of a dozen pairs moves the random model
                     "batch_size": 4, "lr": 5e-3, "max_rounds": 2, "cpus_per_worker": 1,
                     "num_cpus": 0.25},
    )
    with running_app(config) as url:
        yield config, url, registry


def post(url: str, path: str, body) -> requests.Response:
    return requests.post(url + path, json=body, timeout=TIMEOUT)


def assert_error(response: requests.Response, status: int, *words: str) -> str:
    assert response.status_code == status, response.text
    text = str(response.json()["detail"]).lower()
    for word in words:
        assert word.lower() in text, text
    return text


def wait_until_done(url: str, name: str) -> dict:
    deadline = time.monotonic() + TRAINING_TIMEOUT_S
    while time.monotonic() < deadline:
        status = requests.get(f"{url}v1/classifiers/{name}", timeout=TIMEOUT).json()
        if status["state"] in ("ready", "failed"):
            return status
        time.sleep(1)
    raise AssertionError(f"classifier {name} still {status['state']} after {TRAINING_TIMEOUT_S} s: {status}")


def request(name: str, **changes) -> dict:
    return {"name": name, "labels": LABELS, "aliases": ALIASES, "texts": NEWS_DOCUMENTS * 4, **changes}


def scores(answer: dict) -> np.ndarray:
    return np.array([[result["scores"][label] for label in LABELS] for result in answer["results"]])


# ---------------------------------------------------------------- the whole flow
def test_create_poll_classify_list_restart_delete(served):
    from ray import serve

    from contrastext.serve.app import start_serve

    config, url, registry = served
    # without the guard, the round's model is served even if the label-free score says it got worse
    created = post(url, "v1/classifiers", request("news", rounds=1, guard=False,
                                                  dev={"texts": NEWS_DOCUMENTS, "labels": DEV_LABELS}))
    assert created.status_code == 202, created.text
    assert created.json()["state"] == "queued"
    assert created.headers["location"] == created.json()["status_url"] == f"{url}v1/classifiers/news"

    # while it trains: the name is taken, and the one training slot too
    assert_error(post(url, "v1/classifiers", request("news")), 409, "exists")
    busy = post(url, "v1/classifiers", request("other"))
    assert_error(busy, 429, "trainings are running")
    assert busy.headers["retry-after"] == "30"
    assert_error(post(url, "v1/classify", {"model": "news", "texts": ["x"]}), 409, "not ready")

    status = wait_until_done(url, "news")
    assert status["state"] == "ready", status
    assert status["round"] == 1 and status["version"] == 1 and status["texts"] == 24
    assert status["read_tokens"] == 128  # read_max_length=auto: short texts are read at 128
    (done,) = status["rounds_done"]
    assert set(done["kept_per_label"]) == set(LABELS) and sum(done["kept_per_label"].values()) == done["kept"] > 0
    assert 0 <= done["dev_accuracy"] <= 1 and 0 <= status["dev_accuracy_untrained"] <= 1
    assert status["created"] <= status["started"] <= status["finished"]
    assert status["chosen_round"] == 1 and status["stop_reason"] == "all rounds run" and done["guard"] is None
    manifest = (registry / "news" / "versions").glob("*/manifest.json")
    (manifest,) = list(manifest)
    assert (manifest.parent / "model" / "wcsbert.json").is_file()

    # classified at once, with its own labels and template, and with its own weights (not the base model's scores)
    texts = NEWS_DOCUMENTS
    trained = post(url, "v1/classify", {"model": "news", "texts": texts})
    assert trained.status_code == 200, trained.text
    assert trained.json()["template"] == "{label}" and trained.json()["model"] == "news"
    from contrastext import WCSBert  # the labels its saved folder gives (the predict job reads the same folder)

    saved = WCSBert.load(manifest.parent / "model")
    assert [r["label"] for r in trained.json()["results"]] == saved.predict(texts)
    np.testing.assert_allclose(scores(trained.json()), saved.scores(texts), atol=1e-5)
    base = post(url, "v1/classify", {"model": "tiny", "texts": texts, "labels": LABELS, "aliases": ALIASES,
                                     "template": "{label}"})
    assert base.status_code == 200, base.text
    assert not np.allclose(scores(trained.json()), scores(base.json()), atol=1e-2)
    assert_error(post(url, "v1/classify", {"model": "news", "texts": texts, "labels": ["A", "B"]}), 422,
                 "its own labels")

    listed = requests.get(url + "v1/classifiers", timeout=TIMEOUT).json()["classifiers"]
    assert [(c["name"], c["state"]) for c in listed] == [("news", "ready")]

    # a new app on the same registry serves it as it was
    serve.shutdown()
    assert start_serve(config) == url
    assert requests.get(url + "v1/classifiers/news", timeout=TIMEOUT).json()["state"] == "ready"
    again = post(url, "v1/classify", {"model": "news", "texts": texts})
    assert again.status_code == 200, again.text
    np.testing.assert_allclose(scores(again.json()), scores(trained.json()), atol=1e-5)

    deleted = requests.delete(url + "v1/classifiers/news", timeout=TIMEOUT)
    assert deleted.status_code == 200 and deleted.json() == {"name": "news", "deleted": True,
                                                             "training_stopped": False}
    assert not (registry / "news").exists()
    assert_error(requests.get(url + "v1/classifiers/news", timeout=TIMEOUT), 404, "no classifier")
    assert_error(post(url, "v1/classify", {"model": "news", "texts": texts}), 404, "unknown model")
    assert requests.get(url + "v1/classifiers", timeout=TIMEOUT).json() == {"classifiers": []}


def test_a_guarded_training_reports_its_guard_and_serves_the_round_it_chose(served):
    """The guard scores the base model and each round, each with its prompt, prototype and blend heads,
    without labels; the classifier serves the best of them (for the random test model that may be the base model
    itself, which the status then says)."""
    _, url, _ = served
    created = post(url, "v1/classifiers", request("guarded", rounds=1))
    assert created.status_code == 202, created.text
    status = wait_until_done(url, "guarded")
    assert status["state"] == "ready", status
    (done,) = status["rounds_done"]
    assert isinstance(status["guard_untrained"], float) and isinstance(done["guard"], float)
    better = done["guard"] > status["guard_untrained"]
    assert status["chosen_round"] == (1 if better else 0)
    served_scores = scores(post(url, "v1/classify", {"model": "guarded", "texts": NEWS_DOCUMENTS}).json())
    base_scores = scores(post(url, "v1/classify", {"model": "tiny", "texts": NEWS_DOCUMENTS, "labels": LABELS,
                                                   "aliases": ALIASES, "template": "{label}"}).json())
    # a trained round is delivered with the blend of its prompts and prototypes; the base model with its
    # prompts (then it classifies as the base model does) or its prototypes
    assert done["head"] == "blend"
    assert status["chosen_head"] in (("blend",) if status["chosen_round"] else ("prompts", "prototypes"))
    as_base = status["chosen_round"] == 0 and status["chosen_head"] == "prompts"
    assert np.allclose(served_scores, base_scores, atol=1e-5) == as_base
    assert requests.delete(url + "v1/classifiers/guarded", timeout=TIMEOUT).status_code == 200


def test_failed_training_is_failed_with_its_error_and_registers_nothing(served, uploads):
    _, url, registry = served
    texts = uploads / "too_many.txt"
    texts.write_text("\n".join(f"text number {i}" for i in range(MAX_TEXTS + 5)), encoding="utf-8")
    created = post(url, "v1/classifiers", {"name": "broken", "labels": LABELS, "texts_uri": str(texts)})
    assert created.status_code == 202, created.text
    status = wait_until_done(url, "broken")
    assert status["state"] == "failed"
    assert "ValueError" in status["reason"] and f"more than {MAX_TEXTS} texts" in status["reason"]
    assert status["finished"] and status["version"] is None
    assert not (registry / "broken" / "versions").exists()
    assert_error(post(url, "v1/classify", {"model": "broken", "texts": ["x"]}), 409, "failed")
    assert requests.delete(url + "v1/classifiers/broken", timeout=TIMEOUT).status_code == 200


def test_deleting_a_running_training_stops_it(served):
    from contrastext.serve import classifier_job

    _, url, registry = served
    assert post(url, "v1/classifiers", request("stopped")).status_code == 202
    deleted = requests.delete(url + "v1/classifiers/stopped", timeout=TIMEOUT)
    assert deleted.status_code == 200 and deleted.json()["training_stopped"] is True
    assert not (registry / "stopped").exists()
    deadline = time.monotonic() + 30
    while "stopped" in classifier_job.active() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert "stopped" not in classifier_job.active()


# ---------------------------------------------------------------- refused requests
@pytest.mark.parametrize("name", ["../etc", "..", "a/b", ".hidden", "x" * 65, "", "a b", "name;rm"])
def test_bad_names_are_refused(served, name):
    _, url, _ = served
    assert_error(post(url, "v1/classifiers", request(name)), 422, *(["not valid"] if len(name) < 65 else []))


@pytest.mark.parametrize("name", ["a..b", "na%20me", "x.json"])
def test_bad_names_in_the_path_are_refused(served, name):
    _, url, _ = served
    for method in (requests.get, requests.delete):
        assert_error(method(f"{url}v1/classifiers/{name}", timeout=TIMEOUT), 422, "not valid")


@pytest.mark.parametrize("changes, status, words", [
    ({"labels": ["Only"]}, 422, ["at least 2 labels", "['Only']"]),
    ({"labels": []}, 422, ["at least 2 labels"]),
    ({"labels": ["Sport", "Money", "Sport"]}, 422, ["distinct", "Sport"]),
    ({"texts": NEWS_DOCUMENTS[:5]}, 422, ["too few texts per label", "5 texts for 3 labels", "at least 9"]),
    ({"texts": ["a text"] * (MAX_TEXTS + 1)}, 413, [f"{MAX_TEXTS + 1} texts", f"at most {MAX_TEXTS}"]),
    ({"texts": ["x" * 401] * 9}, 413, ["texts[0] has 401 characters"]),
    ({"texts": None}, 422, ["exactly one"]),
    ({"texts_uri": "/etc/passwd"}, 422, ["exactly one"]),
    ({"template": "no field"}, 422, ["{label}"]),
    ({"aliases": {"Cooking": ["food"]}}, 422, ["not in the label list", "Cooking"]),
    ({"rounds": 3}, 422, ["rounds=3", "at most 2"]),
    ({"rounds": 0}, 422, []),
    ({"base_model": "nope"}, 422, ["base_model 'nope'", "served: ['tiny']"]),
    ({"name": "tiny"}, 409, ["served model"]),
    ({"dev": {"texts": ["a", "b"], "labels": ["Football"]}}, 422, ["2 texts and 1 labels"]),
    ({"dev": {"texts": ["a"], "labels": ["Cooking"]}}, 422, ["dev labels", "Cooking"]),
    ({"labels": [f"L{i}" for i in range(6)]}, 413, ["6 labels"]),
    ({"unknown_field": 1}, 422, []),
])
def test_bad_requests_are_refused_saying_why(served, changes, status, words):
    _, url, registry = served
    body = {**request("refused"), **changes}
    assert_error(post(url, "v1/classifiers", body), status, *words)
    assert not (registry / body["name"]).exists()


def test_texts_uri_outside_the_allowed_folders_is_refused(served, uploads):
    _, url, _ = served
    for uri in ("/etc/passwd", f"{uploads}/../secret.txt", f"{uploads}x/texts.txt"):
        assert_error(post(url, "v1/classifiers", request("refused", texts=None, texts_uri=uri)), 403, "must lie under")
    assert_error(post(url, "v1/classifiers", request("refused", texts=None, texts_uri=f"{uploads}/missing.txt")),
                 422, "is not a file")


def test_unknown_classifiers_are_404(served):
    _, url, _ = served
    assert_error(requests.get(url + "v1/classifiers/nothing", timeout=TIMEOUT), 404, "no classifier named")
    assert_error(requests.delete(url + "v1/classifiers/nothing", timeout=TIMEOUT), 404, "no classifier named")
    assert_error(post(url, "v1/classify", {"model": "tiny", "texts": ["x"]}), 422, "labels are needed")



def test_a_training_past_max_training_s_is_stopped_and_failed(served, tiny_encoder_dir):
    import asyncio

    import ray
    from ray.util.state import list_actors

    from contrastext.serve import classifier_job
    from contrastext.serve.classifiers import _current
    from contrastext.serve.registry import ClassifierRegistry, now

    config, url, root = served
    registry = ClassifierRegistry(root)
    spec = classifier_job.TrainingSpec(
        registry=str(root), name="overdue", labels=LABELS, aliases=ALIASES, template="{label}",
        texts=NEWS_DOCUMENTS * 4, max_texts=MAX_TEXTS, min_texts_per_label=MIN_PER_LABEL, rounds=1,
        base_model="tiny", base_model_spec=str(tiny_encoder_dir), max_length=64, batch_size=4, lr=1e-3,
        cpus_per_worker=1)
    registry.write_status("overdue", {"name": "overdue", "state": "queued", "labels": LABELS, "base_model": "tiny",
                                      "rounds": 1, "round": 0, "rounds_done": [], "created": now()})
    classifier_job.start(spec)
    assert asyncio.run(_current(registry, "overdue", max_training_s=3600))["state"] in ("queued", "running")
    # it trains in its own actor (train_in_process, the default), which therefore holds the training's CPUs
    actors = list_actors(address=ray.get_runtime_context().gcs_address, detail=True,
                         filters=[("name", "=", classifier_job.actor_name("overdue"))])
    assert [actor.required_resources.get("CPU") for actor in actors] == [1.0]
    time.sleep(1.5)
    status = asyncio.run(_current(registry, "overdue", max_training_s=1))
    assert status["state"] == "failed" and "classifiers.max_training_s" in status["reason"]
    assert "overdue" not in classifier_job.active()
    assert requests.get(url + "v1/classifiers/overdue", timeout=TIMEOUT).json()["state"] == "failed"
    assert not (root / "overdue" / "versions").exists()
    assert requests.delete(url + "v1/classifiers/overdue", timeout=TIMEOUT).status_code == 200
