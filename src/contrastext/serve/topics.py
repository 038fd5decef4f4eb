"""``POST /v1/topics``: documents → phrase topics (UCTopic), with each phrase occurrence's topic.

``TopicsDeployment`` holds the operator's phrase-topic model (``topics.model``) and mines on one model
thread, off the replica's event loop. ``topics_route`` is the ingress side: limits, which model, and the
mapping of the model's answers to HTTP (documents that yield too few phrases → 422).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, Any

from fastapi import HTTPException, Request
from ray import serve

from contrastext.serve.config import LimitsConfig, TopicsSettings
from contrastext.serve.routing import looks_like_path, request_id
from contrastext.serve.schemas import TopicsRequest

if TYPE_CHECKING:
    from contrastext.methods.uctopic.model import PhraseTopicModel

log = logging.getLogger(__name__)


@serve.deployment
class TopicsDeployment:
    """Replicas of the phrase-topic model; with ``allow_paths``, also models named by a request (LRU)."""

    def __init__(self, settings: dict[str, Any], allow_paths: bool = False, max_path_models: int = 2):
        import torch

        self.settings = TopicsSettings.model_validate(settings)
        torch.set_num_threads(self.settings.torch_threads or max(1, int(self.settings.num_cpus)))
        self.device = "cuda" if self.settings.use_gpu and torch.cuda.is_available() else "cpu"
        if self.settings.use_gpu and self.device == "cpu":
            log.warning("topics: use_gpu is set but no GPU is visible; running on CPU")
        self.model = self._load(self.settings.model)
        self.allow_paths = allow_paths
        self.max_path_models = max_path_models
        self._path_models: OrderedDict[str, PhraseTopicModel] = OrderedDict()
        self._loading = asyncio.Lock()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="topics-model")
        self.requests = 0

    def _load(self, spec: str) -> PhraseTopicModel:
        from contrastext.methods.uctopic.model import PhraseTopicModel

        model = PhraseTopicModel.load(spec, device=self.device, max_length=self.settings.max_length,
                                      backend=self.settings.backend)
        model.encoder.prepare_backend()  # export (cached) now, not inside the first request
        return model

    async def _model(self, spec: str | None) -> PhraseTopicModel:
        if spec is None:
            return self.model
        if not self.allow_paths:
            raise PermissionError("loading a topics model by path from a request is disabled")
        async with self._loading:
            model = self._path_models.get(spec)
            if model is None:
                from contrastext.models import ModelNotFoundError

                try:
                    model = await asyncio.to_thread(self._load, spec)
                except ModelNotFoundError:
                    raise
                except Exception as error:  # a folder that is not a model: the request's fault
                    raise ModelNotFoundError(f"{spec!r} is not a loadable model ({type(error).__name__}: "
                                             f"{error})") from None
                self._path_models[spec] = model
                while len(self._path_models) > self.max_path_models:
                    self._path_models.popitem(last=False)
            self._path_models.move_to_end(spec)
            return model

    async def mine(self, spec: str | None, documents: list[str], n_topics: int | str, top_phrases: int,
                   seed: int) -> dict[str, Any]:
        """``{"result": TopicsResult as a dict}``, or ``{"rejected": why}`` when the documents cannot be
        mined (too few phrases, ...): ``PhraseTopicModel.mine`` raises ValueError only for its input."""
        self.requests += 1
        model = await self._model(spec)
        settings = self.settings
        work = partial(model.mine, documents, n_topics, k_min=settings.k_min, k_max=settings.k_max,
                       top_phrases=top_phrases, max_phrases=settings.max_phrases, seed=seed)
        try:
            result = await asyncio.get_running_loop().run_in_executor(self._executor, work)
        except ValueError as error:
            return {"rejected": str(error)}
        return {"result": dataclasses.asdict(result)}

    def info(self) -> dict[str, Any]:
        return {"name": self.settings.name, "model": self.settings.model,
                "max_length": int(self.model.encoder.max_length), "device": self.device,
                "backend": self.model.encoder.backend,
                "k_range": [self.settings.k_min, self.settings.k_max], "requests": self.requests}


def topics_deployment(settings: TopicsSettings, allow_paths: bool, max_path_models: int):
    """The bound deployment for ``build_app``."""
    return TopicsDeployment.options(
        name="topics", num_replicas=settings.replicas, max_ongoing_requests=settings.max_ongoing_requests,
        ray_actor_options={"num_cpus": settings.num_cpus, "num_gpus": 1 if settings.use_gpu else 0},
    ).bind(settings.model_dump(mode="json"), allow_paths, max_path_models)


def check_topics_request(body: TopicsRequest, limits: LimitsConfig) -> None:
    """413 for a request over the operator's limits."""
    documents = body.documents
    if len(documents) > limits.max_topic_documents:
        raise HTTPException(413, f"{len(documents)} documents in the request; at most "
                                 f"{limits.max_topic_documents} are accepted")
    for i, document in enumerate(documents):
        if len(document) > limits.max_chars_per_text:
            raise HTTPException(413, f"documents[{i}] has {len(document)} characters; at most "
                                     f"{limits.max_chars_per_text} are accepted")
    total = sum(len(d) for d in documents)
    if total > limits.max_topic_chars:
        raise HTTPException(413, f"{total} characters in all documents; at most {limits.max_topic_chars} "
                                 f"are accepted")
    if body.n_topics != "auto" and body.n_topics > limits.max_topics:
        raise HTTPException(413, f"n_topics={body.n_topics}; at most {limits.max_topics} topics are accepted")
    if body.top_phrases > limits.max_top_phrases:
        raise HTTPException(413, f"top_phrases={body.top_phrases}; at most {limits.max_top_phrases} are accepted")


async def topics_route(ingress: Any, body: TopicsRequest, request: Request) -> dict[str, Any]:
    """The ``/v1/topics`` handler of the ingress (``ingress._call`` turns model failures into 5xx)."""
    settings: TopicsSettings = ingress.config.topics
    if ingress.topics is None:
        raise HTTPException(404, "topic mining is not enabled on this server (topics.enabled is off)")
    check_topics_request(body, ingress.limits)
    name = body.model or settings.name
    spec = None
    if name != settings.name:
        if not ingress.config.allow_model_paths_from_requests:
            if looks_like_path(name):
                raise HTTPException(403, f"model {name!r} is not served, and loading a model by path from a "
                                         f"request is disabled by the server configuration; topics model: "
                                         f"{settings.name!r}")
            raise HTTPException(404, f"unknown topics model {name!r}; the topics model is {settings.name!r}")
        spec = name
    answer = await ingress._call(request, name, ingress.topics.mine, spec, body.documents, body.n_topics,
                                 body.top_phrases, body.seed)
    if "rejected" in answer:
        raise HTTPException(422, f"cannot mine topics from these documents: {answer['rejected']}")
    return {"request_id": request_id(request), "model": name, **answer["result"]}
