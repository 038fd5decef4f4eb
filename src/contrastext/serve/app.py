"""The serving application: a FastAPI ingress in front of one deployment per served model.

    contrastext serve --set port=8123                  # local Ray, bundled MiniLM, http://127.0.0.1:8123/
    serve deploy cluster/serve.yaml                    # on a cluster (builder: app_builder)

A new endpoint is one more module with its route function and its deployment (like ``serve.topics``),
added to the ingress below and bound in ``build_app``.
"""

import asyncio
import logging
import time
import uuid
from importlib import resources
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from ray import serve
from ray.exceptions import RayActorError
from ray.serve.handle import DeploymentHandle
from ray.serve.schema import LoggingConfig
from starlette.exceptions import HTTPException as StarletteHTTPException

from contrastext.config import apply_overrides, load_config
from contrastext.serve import auth, classifiers
from contrastext.serve.config import LimitsConfig, ServeConfig
from contrastext.serve.deployments import EncoderDeployment, PathModelDeployment
from contrastext.serve.routing import REQUEST_ID_HEADER, looks_like_path, request_id
from contrastext.serve.schemas import (
    ClassifierList, ClassifierStatus, ClassifyRequest, ClassifyResponse, ClusterRequest, ClusterResponse, EmbedRequest, EmbedResponse,
    CreateClassifierRequest, DeletedClassifier, ErrorResponse, HealthResponse, ModelInfo, ModelsResponse, TopicsModelInfo, TopicsRequest, TopicsResponse,
)
from contrastext.serve.topics import topics_deployment, topics_route
from contrastext.zeroshot import LabelSet, validate_template

log = logging.getLogger(__name__)
_ERRORS = {401: {"model": ErrorResponse, "description": "no bearer token, or not a valid one (WWW-Authenticate)"},
           403: {"model": ErrorResponse, "description": "the token lacks the route's scope, or loading a model by "
                                                        "path is disabled"},
           429: {"model": ErrorResponse, "description": "the token is over its request rate; see Retry-After"},
           413: {"model": ErrorResponse, "description": "the request exceeds a configured limit"},
           404: {"model": ErrorResponse, "description": "unknown model"},
           422: {"model": ErrorResponse, "description": "malformed request"},
           500: {"model": ErrorResponse, "description": "the model failed; the message names the request id"},
           503: {"model": ErrorResponse, "description": "the model's replica was lost, and again on the retry"},
           504: {"model": ErrorResponse, "description": "the model did not answer in time"}}

# each route's scope (serve.auth): 401 / 403 / 429 before the route runs when a token is asked for
READ, TRAIN, ADMIN = ([Depends(auth.require(scope))] for scope in auth.SCOPES)

api = FastAPI(
    title="contrastext",
    description="Text embeddings, zero-shot classification, clustering and phrase topics with contrastive "
                "encoders.",
    version="1",
)


@api.middleware("http")
async def _request_id_and_size(request: Request, call_next):
    # Serve's proxy gives every request an id in this header (a client's own is kept)
    rid = request.headers.get(REQUEST_ID_HEADER) or uuid.uuid4().hex
    request.state.request_id = rid
    limits: LimitsConfig = getattr(request.app.state, "limits", None) or LimitsConfig()
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > limits.max_body_bytes):
        return JSONResponse(status_code=413, content={
            "detail": f"request body of {length} bytes; at most {limits.max_body_bytes} bytes are accepted",
            "request_id": rid})
    response = await call_next(request)
    if REQUEST_ID_HEADER not in request.headers:
        response.headers[REQUEST_ID_HEADER] = rid
    return response


@api.exception_handler(StarletteHTTPException)
async def _http_error(request: Request, error: StarletteHTTPException):
    status, detail = error.status_code, error.detail
    if status == 400:  # FastAPI's answer to a body it cannot decode (e.g. not UTF-8): malformed, like bad JSON
        status, detail = 422, f"the request body could not be read as JSON: {detail}"
    return JSONResponse(status_code=status, headers=getattr(error, "headers", None),
                        content={"detail": detail, "request_id": request_id(request)})


@api.exception_handler(RequestValidationError)
async def _validation_error(request: Request, error: RequestValidationError):
    return JSONResponse(status_code=422, content={"detail": jsonable_encoder(error.errors()),
                                                  "request_id": request_id(request)})


@api.exception_handler(Exception)
async def _unexpected_error(request: Request, error: Exception):
    log.exception("request %s failed", request_id(request))
    return JSONResponse(status_code=500, content={
        "detail": f"internal error ({type(error).__name__}) on request {request_id(request)}",
        "request_id": request_id(request)})


def _replica_lost(error: BaseException) -> bool:
    """Whether a model call failed because the replica holding it died or became unreachable, not the model."""
    return isinstance(error, RayActorError) or isinstance(getattr(error, "cause", None), RayActorError)


def _short(error: BaseException) -> str:
    cause = getattr(error, "cause", None) or error
    text = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[-1] if text else ''}"[:400]


def static_page() -> str:
    return resources.files("contrastext.serve").joinpath("static/index.html").read_text(encoding="utf-8")


@serve.deployment
@serve.ingress(api)
class Ingress:
    """HTTP front: checks limits, routes each request to its model deployment, shapes the answer."""

    def __init__(self, config: dict[str, Any], encoders: dict[str, DeploymentHandle],
                 path_models: DeploymentHandle | None = None, topics: DeploymentHandle | None = None,
                 classifier_models: DeploymentHandle | None = None):
        from contrastext.serve.registry import ClassifierRegistry

        self.config = ServeConfig.model_validate(config)
        self.limits = self.config.limits
        self.encoders = encoders
        self.path_models = path_models
        self.topics = topics
        self.classifier_models = classifier_models
        storage_path = self.config.classifiers.storage_path
        self.registry = ClassifierRegistry(storage_path) if storage_path else None
        api.state.limits = self.limits
        # the entries were settled when the application was built: none there means no token is asked for
        api.state.guard = auth.Guard.build(self.config.auth, required=bool(self.config.auth.entries))
        self.page = static_page()

    # ------------------------------------------------------------ helpers
    def _target(self, requested: str | None) -> tuple[str, DeploymentHandle, list[str]]:
        """(model name, handle, leading call arguments) for a request's ``model`` field."""
        name = requested or self.config.default_model_name
        if name in self.encoders:
            return name, self.encoders[name], []
        if self.path_models is not None:
            return name, self.path_models, [name]
        if looks_like_path(name):
            raise HTTPException(403, f"model {name!r} is not served, and loading a model by path from a request "
                                     f"is disabled by the server configuration; served: {sorted(self.encoders)}")
        raise HTTPException(404, f"unknown model {name!r}; served models: {sorted(self.encoders)}")

    def _check_texts(self, texts: list[str], max_count: int) -> None:
        if len(texts) > max_count:
            raise HTTPException(413, f"{len(texts)} texts in the request; at most {max_count} are accepted")
        limit = self.limits.max_chars_per_text
        for i, text in enumerate(texts):
            if len(text) > limit:
                raise HTTPException(413, f"texts[{i}] has {len(text)} characters; at most {limit} are accepted")

    def _check_labels(self, body: ClassifyRequest) -> None:
        limits = self.limits
        if body.labels is None:
            raise HTTPException(422, "labels are needed, except for a trained classifier (POST /v1/classifiers)")
        if len(body.labels) > limits.max_labels_per_request:
            raise HTTPException(413, f"{len(body.labels)} labels in the request; at most "
                                     f"{limits.max_labels_per_request} are accepted")
        names = [*body.labels, *(a for group in (body.aliases or {}).values() for a in group)]
        for name in names:
            if len(name) > limits.max_chars_per_label:
                raise HTTPException(413, f"label or alias of {len(name)} characters; at most "
                                         f"{limits.max_chars_per_label} are accepted")
        for label, group in (body.aliases or {}).items():
            if len(group) > limits.max_aliases_per_label:
                raise HTTPException(413, f"{len(group)} aliases for label {label!r}; at most "
                                         f"{limits.max_aliases_per_label} are accepted")
        try:
            LabelSet.build(body.labels, body.aliases, auto_aliases=body.auto_aliases)
            if body.template is not None:
                validate_template(body.template)
        except ValueError as error:
            raise HTTPException(422, str(error)) from None

    async def _call(self, request: Request, name: str, method: DeploymentHandle, *args: Any) -> Any:
        """``method.remote(*args)``'s answer within the request timeout; model failures become HTTP errors.

        Serve re-routes a call that no replica has accepted yet, but a call a replica holds fails when that
        replica dies (its node lost, its process killed). Every model call here is idempotent, so such a call
        is sent once more, within the same timeout: Serve routes it to a live replica.
        """
        rid = request_id(request)
        timeout = self.limits.request_timeout_s
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        response = method.remote(*args)
        try:
            try:
                return await asyncio.wait_for(response, timeout=timeout)
            except Exception as error:
                if not _replica_lost(error):
                    raise
                log.warning("request %s: the replica of model %s holding it was lost (%s); sending it again",
                            rid, name, _short(error))
                response = method.remote(*args)
                return await asyncio.wait_for(response, timeout=max(0.0, deadline - loop.time()))
        except asyncio.TimeoutError:
            response.cancel()
            raise HTTPException(504, f"model {name!r} did not answer within {timeout:g} s (request {rid})") \
                from None
        except FileNotFoundError as error:  # a request-named model that does not exist
            raise HTTPException(404, f"model {name!r} could not be loaded: {_short(error)}") from None
        except Exception as error:  # noqa: BLE001 -- any model failure becomes a 5xx naming the request
            log.error("request %s: model %s failed: %s", rid, name, _short(error))
            if _replica_lost(error):
                raise HTTPException(503, f"model {name!r} lost the replica holding request {rid}, and again on "
                                         f"the retry: {_short(error)}") from None
            raise HTTPException(500, f"model {name!r} failed on request {rid}: {_short(error)}") from None

    # ------------------------------------------------------------ routes
    @api.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page(self) -> HTMLResponse:
        return HTMLResponse(self.page)

    @api.get("/healthz", response_model=HealthResponse)
    async def healthz(self) -> dict[str, Any]:
        return {"status": "ok", "models": sorted(self.encoders)}

    @api.get("/v1/models", response_model=ModelsResponse, responses=_ERRORS, dependencies=READ)
    async def models(self, request: Request) -> dict[str, Any]:
        out = []
        for name, handle in self.encoders.items():
            info = await self._call(request, name, handle.info)
            served = self.config.models[name]
            replicas: int | str = served.replicas
            if served.autoscaling is not None:
                replicas = f"{served.autoscaling.min_replicas}-{served.autoscaling.max_replicas}"
            out.append(ModelInfo(name=name, model=served.model, dimension=info["dimension"],
                                 max_length=info["max_length"], normalize=info["normalize"], device=info["device"],
                                 precision=info["precision"], backend=info["backend"],
                                 batching=info["batching"], replicas=replicas,
                                 default=name == self.config.default_model_name))
        topics = None
        if self.topics is not None:
            info = await self._call(request, self.config.topics.name, self.topics.info)
            topics = TopicsModelInfo(**{k: info[k] for k in ("name", "model", "max_length", "device", "backend",
                                                             "k_range")})
        return {"models": out, "default_model": self.config.default_model_name,
                "model_paths_from_requests": self.path_models is not None, "topics": topics}

    @api.post("/v1/embed", response_model=EmbedResponse, responses=_ERRORS, dependencies=READ)
    async def embed(self, body: EmbedRequest, request: Request) -> dict[str, Any]:
        self._check_texts(body.texts, self.limits.max_texts_per_request)
        name, handle, lead = self._target(body.model)
        embeddings = await self._call(request, name, handle.encode, *lead, body.texts)
        return {"request_id": request_id(request), "model": name, "dimension": int(embeddings.shape[1]),
                "embeddings": embeddings.tolist()}

    @api.post("/v1/classify", response_model=ClassifyResponse, responses={
        **_ERRORS, 409: {"model": ErrorResponse, "description": "the named classifier is not ready"}},
        dependencies=READ)
    async def classify(self, body: ClassifyRequest, request: Request) -> dict[str, Any]:
        self._check_texts(body.texts, self.limits.max_texts_per_request)
        if body.model and body.model not in self.encoders:
            manifest = await classifiers.ready_manifest(self, body.model)
            if manifest is not None:
                return await self._classify_trained(body, request, manifest)
        if body.labels is None:
            self._target(body.model)  # an unknown model is 404 before the missing labels are 422
        self._check_labels(body)
        name, handle, lead = self._target(body.model)
        template = body.template or self.config.zeroshot.template
        answer = await self._call(request, name, handle.classify, *lead, body.texts, body.labels, body.aliases,
                                  body.auto_aliases, template, body.threshold)
        return {"request_id": request_id(request), "model": name, **answer}

    async def _classify_trained(self, body: ClassifyRequest, request: Request,
                                manifest: dict[str, Any]) -> dict[str, Any]:
        name = manifest["name"]
        if body.labels is not None and list(body.labels) != manifest["labels"]:
            raise HTTPException(422, f"classifier {name!r} classifies into its own labels {manifest['labels']}; "
                                     "leave labels out (or give exactly those)")
        if body.aliases is not None or body.template is not None:
            raise HTTPException(422, f"classifier {name!r} has its own aliases and template; leave them out")
        answer = await self._call(request, name, self.classifier_models.classify,
                                  self.registry.model_location(manifest), body.texts, manifest["labels"],
                                  manifest["aliases"], manifest["template"], body.threshold)
        return {"request_id": request_id(request), "model": name, **answer}

    # ------------------------------------------------------------ classifiers trained over HTTP
    @api.post("/v1/classifiers", status_code=202, response_model=ClassifierStatus,
              responses={**_ERRORS, 403: {"model": ErrorResponse, "description": "texts_uri is not allowed"},
                         404: {"model": ErrorResponse, "description": "classifier training is off"},
                         409: {"model": ErrorResponse, "description": "the name is taken"},
                         429: {"model": ErrorResponse, "description": "too many trainings running (or this "
                                                                      "token's), or over the request rate; see "
                                                                      "Retry-After"}},
              dependencies=TRAIN)
    async def create_classifier(self, body: CreateClassifierRequest, request: Request):
        """Start self-training a classifier on the texts (a Ray job); answers 202 with its status URL."""
        return await classifiers.create_route(self, body, request)

    @api.get("/v1/classifiers", response_model=ClassifierList, responses=_ERRORS, dependencies=READ)
    async def list_classifiers(self, request: Request) -> dict[str, Any]:
        return await classifiers.list_route(self, request)

    @api.get("/v1/classifiers/{name}", name="get_classifier", response_model=ClassifierStatus, responses=_ERRORS,
             dependencies=READ)
    async def get_classifier(self, name: str, request: Request) -> dict[str, Any]:
        """State (queued, running, ready, failed), rounds done, pseudo-labels kept per label, dev accuracy."""
        return await classifiers.get_route(self, name, request)

    @api.delete("/v1/classifiers/{name}", response_model=DeletedClassifier, responses=_ERRORS,
                dependencies=ADMIN)
    async def delete_classifier(self, name: str, request: Request) -> dict[str, Any]:
        """Stop its training if running, and remove it and its files."""
        return await classifiers.delete_route(self, name, request)

    @api.post("/v1/cluster", response_model=ClusterResponse, responses=_ERRORS, dependencies=READ)
    async def cluster(self, body: ClusterRequest, request: Request) -> dict[str, Any]:
        from contrastext.serve.clusters import cluster_texts

        self._check_texts(body.texts, self.limits.max_cluster_texts)
        if body.k != "auto":
            if body.k > self.limits.max_clusters:
                raise HTTPException(413, f"k={body.k}; at most {self.limits.max_clusters} clusters are accepted")
            if body.k > len(body.texts):
                raise HTTPException(422, f"k={body.k} is more than the {len(body.texts)} texts")
        name, handle, lead = self._target(body.model)
        embeddings = await self._call(request, name, handle.encode, *lead, body.texts)
        try:
            result = await asyncio.to_thread(cluster_texts, body.texts, embeddings, body.k,
                                             top_texts=body.top_texts, top_keywords=body.top_keywords,
                                             seed=body.seed)
        except ValueError as error:  # e.g. identical texts: no silhouette, no clusters to find
            raise HTTPException(422, f"cannot cluster these texts: {error}") from None
        return {"request_id": request_id(request), "model": name, **result}

    @api.post("/v1/topics", response_model=TopicsResponse, responses=_ERRORS, dependencies=READ)
    async def topics(self, body: TopicsRequest, request: Request) -> dict[str, Any]:
        return await topics_route(self, body, request)


# ---------------------------------------------------------------- building and running
def _encoder_deployment(name: str, config: ServeConfig):
    served = config.models[name]
    options: dict[str, Any] = {
        "name": f"encoder-{name}",
        "max_ongoing_requests": served.max_ongoing_requests,
        "ray_actor_options": {"num_cpus": served.num_cpus, "num_gpus": 1 if served.use_gpu else 0},
    }
    if served.autoscaling is not None:
        options["autoscaling_config"] = {
            "min_replicas": served.autoscaling.min_replicas, "max_replicas": served.autoscaling.max_replicas,
            "target_ongoing_requests": served.autoscaling.target_ongoing_requests}
    else:
        options["num_replicas"] = served.replicas
    if served.max_replicas_per_node is not None:
        options["max_replicas_per_node"] = served.max_replicas_per_node
    return EncoderDeployment.options(**options).bind(name, served.model_dump(mode="json"),
                                                     config.zeroshot.model_dump(mode="json"))


def build_app(config: ServeConfig, host: str | None = None):
    """The Serve application (ingress bound to one deployment per model) for ``serve.run``. ``host``: where
    it listens (None: not known here, as under ``serve deploy``); without tokens only loopback is served
    (``serve.auth.settle``), else an ``AuthConfigError`` names the setting."""
    config = with_token_entries(config, host)
    encoders = {name: _encoder_deployment(name, config) for name in config.models}
    path_models = None
    if config.allow_model_paths_from_requests:
        template = config.models[config.default_model_name]
        path_models = PathModelDeployment.options(
            name="path-models", ray_actor_options={"num_cpus": template.num_cpus,
                                                   "num_gpus": 1 if template.use_gpu else 0},
        ).bind(template.model_dump(mode="json"), config.zeroshot.model_dump(mode="json"),
               config.path_models_per_replica)
    topics = None
    if config.topics.enabled:
        topics = topics_deployment(config.topics, config.allow_model_paths_from_requests,
                                   config.path_models_per_replica)
    classifier_models = None
    if config.classifiers.storage_path:
        classifier_models = classifiers.classifier_models_deployment(config)
    spread = ({"max_replicas_per_node": config.ingress_max_replicas_per_node}
              if config.ingress_max_replicas_per_node else {})
    ingress = Ingress.options(num_replicas=config.ingress_replicas,
                              max_ongoing_requests=config.ingress_max_ongoing_requests,
                              ray_actor_options={"num_cpus": config.ingress_num_cpus}, **spread)
    return ingress.bind(config.model_dump(mode="json"), encoders, path_models, topics, classifier_models)


def with_token_entries(config: ServeConfig, host: str | None) -> ServeConfig:
    """``config`` with ``auth.entries`` read from its token sources (hashes only), or none when auth is off."""
    settings = config.auth
    entries = [] if settings.mode == "none" else auth.load_entries(settings.tokens_env, settings.tokens_file)
    required = auth.settle(settings.mode, entries, host)
    return config.model_copy(update={"auth": settings.model_copy(update={"entries": entries if required else []})})


def app_builder(args: dict[str, Any]):
    """Builder for ``serve deploy`` / ``serve run``: ``args`` holds ``config`` (a YAML path), ``set``
    (a list of ``key=value`` overrides) and/or ServeConfig fields inline."""
    args = dict(args or {})
    path = args.pop("config", None)
    overrides = args.pop("set", None) or []
    data = load_config(ServeConfig, path).model_dump(mode="python")
    data.update(args)
    return build_app(ServeConfig.model_validate(apply_overrides(data, list(overrides))))


def start_serve(config: ServeConfig) -> str:
    """Start Ray (or join it), Serve's HTTP proxy on config.host:port and the application; returns its URL."""
    from contrastext.runtime import init_ray

    # Beyond loopback, an unsafe auth setting is refused before Ray starts. On loopback it is settled once Ray
    # runs: a Serve already running keeps its own http_options (serve.start ignores new ones), so the host
    # the application will listen on is not known, and is taken as reachable.
    beyond_loopback = not auth.is_loopback(config.host)
    if beyond_loopback:
        application = build_app(config, config.host)
    init_ray(config.ray)
    if not beyond_loopback:
        application = build_app(config, None if serve.status().proxies else config.host)
    logging_config = LoggingConfig(enable_access_log=config.access_log)
    serve.start(proxy_location=config.proxy_location, http_options={"host": config.host, "port": config.port},
                logging_config=logging_config)
    serve.run(application, name=config.app_name, route_prefix=config.route_prefix,
              logging_config=logging_config)
    prefix = config.route_prefix.rstrip("/")
    return f"http://{config.host}:{config.port}{prefix}/"


def run_serve(config: ServeConfig) -> dict[str, Any]:
    """``contrastext serve``: serve until Ctrl-C, then print what each model answered."""
    from contrastext.report import format_table

    started = time.time()
    url = start_serve(config)
    rows = [[name, m.model, m.replicas if m.autoscaling is None else "autoscaling",
             "on" if m.batching.enabled else "off", "gpu" if m.use_gpu else "cpu", m.precision]
            for name, m in config.models.items()]
    if config.topics.enabled:
        t = config.topics
        rows.append([f"{t.name} (/v1/topics)", t.model, t.replicas, "-", "gpu" if t.use_gpu else "cpu", "fp32"])
    print(format_table(rows, headers=["model", "spec", "replicas", "batching", "device", "precision"]))
    print(f"serving on {url}  (OpenAPI: {url}docs) — Ctrl-C to stop")
    try:
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    summary = _summary(config, time.time() - started)
    serve.delete(config.app_name)
    if config.stats_path:
        from contrastext.manifest import write_json_atomic

        write_json_atomic(config.stats_path, summary)
        print(f"statistics written to {config.stats_path}")
    return summary


def _summary(config: ServeConfig, seconds: float) -> dict[str, Any]:
    from contrastext.report import format_table

    rows, stats = [], {}
    for name in config.models:
        try:
            info = serve.get_deployment_handle(f"encoder-{name}", config.app_name).info.remote().result(
                timeout_s=10)
        except Exception as error:  # noqa: BLE001 -- the summary must not hide the shutdown
            log.warning("no statistics from model %s: %s", name, error)
            continue
        stats[name] = {k: info[k] for k in ("requests", "batches", "batched_requests", "mean_batch_size",
                                            "batch_sizes", "busy_seconds", "rss_bytes", "label_cache")}
        rows.append([name, info["requests"], info["batches"], info["mean_batch_size"], info["rss_bytes"] / 2**20])
    print(format_table(rows, headers=["model", "requests (one replica)", "batches", "requests per batch",
                                      "replica RSS MiB"]))
    return {"seconds": seconds, "models": stats}
