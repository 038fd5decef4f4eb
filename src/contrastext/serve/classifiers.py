"""``/v1/classifiers``: self-train a zero-shot classifier on the user's texts, then serve it by name.

The routes check the request, record the classifier in the registry (``serve.registry``) and start its
training as a detached Ray actor (``serve.classifier_job``); they never train inside a request.
``ClassifierModels`` serves the registered versions: a replica loads one the first time a request names
it and keeps the most recently used (LRU), so a classifier is usable as soon as it is ready, with no
restart, on every replica.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections import OrderedDict
from datetime import datetime, timezone
from typing import Any

from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse
from ray import serve

from contrastext import storage
from contrastext.serve import classifier_job
from contrastext.serve.config import CLASSIFIER_NAME, ServedModelConfig, ZeroShotSettings
from contrastext.serve.registry import ACTIVE_STATES, ClassifierRegistry, now
from contrastext.serve.routing import request_id
from contrastext.serve.schemas import CreateClassifierRequest
from contrastext.zeroshot import LabelSet, validate_template

log = logging.getLogger(__name__)
DEFAULT_TEMPLATE = "{label}"  # WCSBert's: the label itself as the prompt
LOST_AFTER_S = 120  # a queued training whose actor is not seen by then was never started


@serve.deployment
class ClassifierModels:
    """Registered classifiers, loaded on first use by their version's folder (LRU)."""

    def __init__(self, template: dict[str, Any], zeroshot: dict[str, Any], max_models: int):
        self.template = ServedModelConfig.model_validate(template)
        self.zeroshot = ZeroShotSettings.model_validate(zeroshot)
        self.max_models = max_models
        self._models: OrderedDict[str, Any] = OrderedDict()
        self._copies: dict[str, str] = {}  # a remote version's local copy, removed when it is evicted
        self._loading = asyncio.Lock()

    def _load(self, location: str):
        from contrastext.serve.deployments import ModelRunner

        if storage.on_local_disk(location):
            local = storage.resolve(location)[1]
        else:
            local = str(storage.scratch_dir("contrastext-classifier-"))
            storage.copy_tree(location, local)
            self._copies[location] = local
        return ModelRunner(location, self.template.on_demand(local).model_copy(update={"max_length": None}),
                           self.zeroshot)

    async def _runner(self, location: str):
        async with self._loading:
            runner = self._models.get(location)
            if runner is None:
                runner = await asyncio.to_thread(self._load, location)
                self._models[location] = runner
                while len(self._models) > self.max_models:
                    evicted, _ = self._models.popitem(last=False)
                    copy = self._copies.pop(evicted, None)
                    if copy is not None:
                        shutil.rmtree(copy, ignore_errors=True)
            self._models.move_to_end(location)
            return runner

    async def classify(self, location: str, texts: list[str], labels: list[str], aliases: dict[str, list[str]],
                       template: str, threshold: float | None) -> dict[str, Any]:
        from contrastext.serve.deployments import EncodeJob

        runner = await self._runner(location)
        job = EncodeJob(list(texts), runner.classifier.label_set(labels, aliases, True), template)
        return runner.answer(await runner.submit(job), job.label_set, template, threshold)


def classifier_models_deployment(config) -> Any:
    settings = config.classifiers
    template = config.models[config.default_model_name]
    return ClassifierModels.options(
        name="classifier-models", num_replicas=settings.replicas,
        ray_actor_options={"num_cpus": settings.num_cpus, "num_gpus": 1 if template.use_gpu else 0},
    ).bind(template.model_dump(mode="json"), config.zeroshot.model_dump(mode="json"), settings.models_per_replica)


# ---------------------------------------------------------------- the ingress side
def registry_of(ingress: Any) -> ClassifierRegistry:
    if ingress.registry is None:
        raise HTTPException(404, "classifier training is off on this server: set classifiers.storage_path")
    return ingress.registry


def checked_name(name: str) -> str:
    if not CLASSIFIER_NAME.match(name):
        raise HTTPException(422, f"classifier name {name[:80]!r} is not valid: 1 to 64 letters, digits, '_' or "
                                 "'-', starting with a letter or digit (no paths, no '..')")
    return name


def status_out(status: dict[str, Any], request: Request) -> dict[str, Any]:
    return {**status, "status_url": str(request.url_for("get_classifier", name=status["name"]))}


def _checked_request(ingress: Any, body: CreateClassifierRequest) -> classifier_job.TrainingSpec:
    """The training the request asks for, or the 4xx saying what is wrong with it."""
    settings = ingress.config.classifiers
    limits = ingress.limits
    name = checked_name(body.name)
    if len(body.labels) < 2:
        raise HTTPException(422, f"a classifier needs at least 2 labels; got {len(body.labels)}: {body.labels}")
    if len(body.labels) > limits.max_labels_per_request:
        raise HTTPException(413, f"{len(body.labels)} labels; at most {limits.max_labels_per_request} are accepted")
    for label in [*body.labels, *(a for group in (body.aliases or {}).values() for a in group)]:
        if len(label) > limits.max_chars_per_label:
            raise HTTPException(413, f"label or alias of {len(label)} characters; at most "
                                     f"{limits.max_chars_per_label} are accepted")
    template = body.template or DEFAULT_TEMPLATE
    try:
        LabelSet.build(body.labels, body.aliases)
        validate_template(template)
    except ValueError as error:
        raise HTTPException(422, str(error)) from None
    if (body.texts is None) == (body.texts_uri is None):
        raise HTTPException(422, "give the training texts as either texts or texts_uri (exactly one of them)")
    needed = settings.min_texts_per_label * len(body.labels)
    if body.texts is not None:
        ingress._check_texts(body.texts, settings.max_texts)
        if len(body.texts) < needed:
            raise HTTPException(422, f"too few texts per label: {len(body.texts)} texts for {len(body.labels)} "
                                     f"labels; at least {needed} are needed ({settings.min_texts_per_label} per label)")
    else:
        _check_texts_uri(body.texts_uri, settings.texts_uri_prefixes)
    if body.dev is not None:
        dev = body.dev
        if len(dev.texts) != len(dev.labels):
            raise HTTPException(422, f"dev has {len(dev.texts)} texts and {len(dev.labels)} labels; one label per text")
        ingress._check_texts(dev.texts, settings.max_dev_texts)
        unknown = sorted(set(dev.labels) - set(body.labels))
        if unknown:
            raise HTTPException(422, f"dev labels not among the classifier's labels: {unknown[:10]}")
    rounds = body.rounds or settings.default_rounds
    if rounds > settings.max_rounds:
        raise HTTPException(422, f"rounds={rounds}; at most {settings.max_rounds} are accepted")
    base = body.base_model or ingress.config.default_model_name
    if base not in ingress.config.models:
        raise HTTPException(422, f"base_model {base!r} is not a served model; served: {sorted(ingress.config.models)}")
    if name in ingress.config.models or (ingress.config.topics.enabled and name == ingress.config.topics.name):
        raise HTTPException(409, f"{name!r} is the name of a served model; choose another")
    return classifier_job.TrainingSpec(
        registry=ingress.registry.root, name=name, labels=body.labels, aliases=body.aliases or {},
        template=template, texts=body.texts, texts_uri=body.texts_uri, max_texts=settings.max_texts,
        min_texts_per_label=settings.min_texts_per_label,
        dev=body.dev.model_dump() if body.dev is not None else None, rounds=rounds, base_model=base,
        base_model_spec=ingress.config.models[base].model, max_length=settings.max_length,
        read_max_length=settings.read_max_length,
        batch_size=settings.batch_size, lr=settings.lr,
        cpus_per_worker=settings.cpus_per_worker, in_process=settings.train_in_process, guard=body.guard)


def _check_texts_uri(uri: str, prefixes: list[str]) -> None:
    if not prefixes:
        raise HTTPException(403, "texts_uri is disabled by the server configuration (classifiers.texts_uri_prefixes); "
                                 "send the texts inline")
    if ".." in uri.split("/") or not any(uri.startswith(p.rstrip("/") + "/") for p in prefixes):
        raise HTTPException(403, f"texts_uri must lie under one of {prefixes}")
    try:
        found = storage.is_file(uri)
    except (OSError, ValueError) as error:
        raise HTTPException(422, f"texts_uri {uri} cannot be read: {error}") from None
    if not found:
        raise HTTPException(422, f"texts_uri {uri} is not a file")


_CREATING = asyncio.Lock()  # one create at a time on this replica, from the count of trainings to their start


async def create_route(ingress: Any, body: CreateClassifierRequest, request: Request) -> JSONResponse:
    registry = registry_of(ingress)
    spec = await asyncio.to_thread(_checked_request, ingress, body)
    async with _CREATING:
        return await _create(ingress, registry, spec, request)


async def _create(ingress: Any, registry: ClassifierRegistry, spec: Any, request: Request) -> JSONResponse:
    settings = ingress.config.classifiers
    active = await asyncio.to_thread(classifier_job.active)
    owners = await asyncio.to_thread(_owners, registry, active)
    # Under _CREATING, from the count above to the start below: two requests on this replica cannot both take
    # the last slot or the same name. Across ingress replicas two may (the limits are per replica there).
    if registry.status(spec.name) is not None or spec.name in active:
        raise HTTPException(409, f"a classifier named {spec.name!r} exists; delete it first or choose another name")
    if len(active) >= settings.max_concurrent_trainings:
        raise HTTPException(429, f"{len(active)} trainings are running (at most {settings.max_concurrent_trainings}); "
                                 f"try again later", headers={"Retry-After": str(settings.retry_after_s)})
    who = request.state.principal
    mine = [name for name in active if owners.get(name) == who.name]
    limit = ingress.config.auth.max_trainings_per_token
    if ingress.config.auth.entries and len(mine) >= limit:
        raise HTTPException(429, f"token {who.name!r} has {len(mine)} training(s) running ({', '.join(mine)}); at "
                                 f"most {limit} per token (auth.max_trainings_per_token)",
                            headers={"Retry-After": str(settings.retry_after_s)})
    status = {"name": spec.name, "state": "queued", "labels": spec.labels, "base_model": spec.base_model,
              "rounds": spec.rounds, "round": 0, "rounds_done": [], "created": now(), "owner": who.name}
    registry.write_status(spec.name, status)
    try:
        classifier_job.start(spec)
    except Exception as error:  # noqa: BLE001 -- recorded, then answered
        registry.update_status(spec.name, state="failed", reason=f"the training could not be started: {error}")
        raise HTTPException(503, f"the training of {spec.name!r} could not be started: {error}") from None
    _audit(registry, "create", spec.name, who.name, request_id=request_id(request), labels=spec.labels,
           rounds=spec.rounds)
    out = status_out(status, request)
    return JSONResponse(status_code=202, content=out, headers={"Location": out["status_url"]})


def _audit(registry: ClassifierRegistry, *args: Any, **details: Any) -> None:
    """The audit record of an operation that has happened: a failure to write it is logged, never answered."""
    try:
        registry.audit(*args, **details)
    except Exception:  # noqa: BLE001 -- the operation is done; the log keeps what the file could not
        log.exception("audit: could not record %s", args)


def _owners(registry: ClassifierRegistry, names) -> dict[str, str]:
    """The token name that started each of the trainings ``names``."""
    statuses = {name: registry.status(name) for name in names}
    return {name: status.get("owner", "") for name, status in statuses.items() if status is not None}


def age_s(status: dict[str, Any]) -> float:
    return (datetime.now(timezone.utc) - datetime.fromisoformat(status["created"])).total_seconds()


async def _current(registry: ClassifierRegistry, name: str, max_training_s: float) -> dict[str, Any] | None:
    """The status, with a training whose actor is gone (its process or node lost), or that has run past
    ``max_training_s`` (stopped here), recorded as failed."""
    status = await asyncio.to_thread(registry.status, name)
    if status is None or status.get("state") not in ACTIVE_STATES:
        return status
    if name in await asyncio.to_thread(classifier_job.active):
        if age_s(status) <= max_training_s:
            return status
        await asyncio.to_thread(classifier_job.stop, name)
        return await asyncio.to_thread(registry.update_status, name, state="failed", finished=now(),
                                       reason=f"stopped after {max_training_s:g} s (classifiers.max_training_s) "
                                              f"without a result")
    status = await asyncio.to_thread(registry.status, name)  # it may have finished meanwhile
    if status is None or status.get("state") not in ACTIVE_STATES:
        return status
    if status["state"] == "running" or age_s(status) > LOST_AFTER_S:
        status = await asyncio.to_thread(registry.update_status, name, state="failed", finished=now(),
                                         reason="the training ended without a result (its process was lost)")
    return status


async def get_route(ingress: Any, name: str, request: Request) -> dict[str, Any]:
    registry = registry_of(ingress)
    status = await _current(registry, checked_name(name), ingress.config.classifiers.max_training_s)
    if status is None:
        raise HTTPException(404, f"no classifier named {name!r}")
    return status_out(status, request)


async def list_route(ingress: Any, request: Request) -> dict[str, Any]:
    registry = registry_of(ingress)
    out = []
    for name in await asyncio.to_thread(registry.names):
        status = await _current(registry, name, ingress.config.classifiers.max_training_s)
        if status is not None:
            out.append(status_out(status, request))
    return {"classifiers": out}


async def delete_route(ingress: Any, name: str, request: Request) -> dict[str, Any]:
    registry = registry_of(ingress)
    status = await asyncio.to_thread(registry.status, checked_name(name))
    if status is None:
        raise HTTPException(404, f"no classifier named {name!r}")
    stopped = await asyncio.to_thread(classifier_job.stop, name)
    await asyncio.to_thread(registry.delete, name)
    await asyncio.to_thread(_audit, registry, "delete", name, request.state.principal.name,
                            request_id=request_id(request), training_stopped=stopped)
    return {"name": name, "deleted": True, "training_stopped": stopped}


async def ready_manifest(ingress: Any, name: str) -> dict[str, Any] | None:
    """The latest version of a ready classifier ``name``; None when no classifier has that name."""
    if ingress.registry is None or not CLASSIFIER_NAME.match(name):
        return None
    status = await asyncio.to_thread(ingress.registry.status, name)
    if status is None:
        return None
    if status.get("state") != "ready":
        raise HTTPException(409, f"classifier {name!r} is {status.get('state')}, not ready; see "
                                 f"GET /v1/classifiers/{name}")
    return await asyncio.to_thread(ingress.registry.latest, name)
