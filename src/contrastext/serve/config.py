"""Settings of the serving application: where it listens, which encoders it serves, what a request may ask."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator

from contrastext.config import BackendName, RayConfig, ReadLength, Settings, backend_field
from contrastext.models.resolve import DEFAULT_MODEL
from contrastext.zeroshot import DEFAULT_TEMPLATE, validate_template

_MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class BatchingConfig(Settings):
    enabled: bool = Field(True, description="dynamic batching: concurrent requests share one forward pass")
    max_batch_size: int = Field(16, ge=1, description="requests gathered into one forward pass")
    batch_wait_timeout_s: float = Field(0.01, ge=0, description="longest wait for a batch to fill")


class AutoscalingSettings(Settings):
    min_replicas: int = Field(1, ge=0)
    max_replicas: int = Field(1, ge=1)
    target_ongoing_requests: float = Field(8.0, gt=0, description="requests in flight per replica to aim at")

    @model_validator(mode="after")
    def _ordered(self) -> "AutoscalingSettings":
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas ({self.min_replicas}) > max_replicas ({self.max_replicas})")
        return self


class ServedModelConfig(Settings):
    """One encoder the application serves under a name."""

    def on_demand(self, model: str) -> "ServedModelConfig":
        """These settings for ``model``, loaded inside a request (a trained classifier, a model path): ``auto``
        means torch there, since an ONNX export (about 10 s for MiniLM) inside the request could outlast its
        timeout; a backend named outright is kept."""
        backend = "torch" if self.backend == "auto" else self.backend
        return self.model_copy(update={"model": model, "backend": backend})

    model: str = Field(DEFAULT_MODEL, description="bundled:minilm, a local folder, or an HF id in the local cache")
    backend: BackendName = backend_field("what the model runs on (models.onnx_backend)")
    max_length: int | None = Field(None, gt=0, description="tokens per text; None: what the model folder says")
    normalize: bool | None = Field(None, description="None: what the model folder says")
    replicas: int = Field(1, ge=1, description="fixed replica count (ignored when autoscaling is set)")
    max_replicas_per_node: int | None = Field(
        None, ge=1, description="at most this many replicas on one node (1: each on its own node, so losing a "
                                "node loses one replica); None: no limit")
    autoscaling: AutoscalingSettings | None = None
    batching: BatchingConfig = Field(default_factory=BatchingConfig)
    encode_batch_size: int = Field(64, ge=1, description="texts per forward pass inside a replica")
    use_gpu: bool = False
    precision: Literal["auto", "fp32", "bf16"] = Field(
        "auto", description="auto: bf16 on GPU (autocast), and on CPUs with native bf16 (AVX512-BF16, AMX: "
                        "bf16 weights); fp32: full precision everywhere")
    pad_to_multiple_of: int | None = Field(
        16, ge=1, description="round each batch's token length up to a multiple of this: few distinct shapes, "
                              "so kernels built per shape (oneDNN on CPU) do not pile up in memory")
    num_cpus: float = Field(1.0, ge=0, description="CPUs reserved per replica")
    torch_threads: int | None = Field(None, ge=1, description="None: max(1, num_cpus)")
    max_ongoing_requests: int = Field(64, ge=1)
    allow_download: bool = Field(False, description="let the Hugging Face hub be contacted for a missing model")
    pin_malloc_thresholds: bool = Field(
        True, description="fix glibc's mmap/trim thresholds in the replica, so memory does not creep (Linux)")

    @model_validator(mode="after")
    def _batch_fits(self) -> "ServedModelConfig":
        if self.batching.enabled and self.max_ongoing_requests < self.batching.max_batch_size:
            raise ValueError(f"max_ongoing_requests ({self.max_ongoing_requests}) must be at least "
                             f"batching.max_batch_size ({self.batching.max_batch_size}), or batches never fill")
        return self


class LimitsConfig(Settings):
    max_texts_per_request: int = Field(256, ge=1)
    max_chars_per_text: int = Field(20_000, ge=1)
    max_labels_per_request: int = Field(64, ge=1)
    max_chars_per_label: int = Field(200, ge=1, description="also bounds each alias")
    max_aliases_per_label: int = Field(16, ge=0)
    max_cluster_texts: int = Field(2_000, ge=3, description="texts per /v1/cluster request")
    max_clusters: int = Field(50, ge=2)
    max_topic_documents: int = Field(200, ge=1, description="documents per /v1/topics request")
    max_topic_chars: int = Field(200_000, ge=1, description="characters of all documents of a /v1/topics request")
    max_topics: int = Field(30, ge=2, description="n_topics a /v1/topics request may ask for")
    max_top_phrases: int = Field(30, ge=1, description="top phrases per topic a /v1/topics request may ask for")
    max_body_bytes: int = Field(8 * 2**20, ge=1024, description="larger request bodies get 413 unread")
    request_timeout_s: float = Field(60.0, gt=0, description="a model call taking longer answers 504")


class ZeroShotSettings(Settings):
    template: str = Field(DEFAULT_TEMPLATE, description="default prompt; '{label}' is replaced by each alias")
    label_cache_size: int = Field(256, ge=1, description="label sets whose embeddings a replica keeps")

    @model_validator(mode="after")
    def _template(self) -> "ZeroShotSettings":
        validate_template(self.template)
        return self


class TopicsSettings(Settings):
    """The phrase-topic model behind /v1/topics (one per application)."""

    enabled: bool = Field(True, description="serve /v1/topics (off: it answers 404)")
    name: str = Field("uctopic", description="the name requests and /v1/models use for it")
    model: str = Field(DEFAULT_MODEL, description="a folder from `uctopic` pretrain/finetune, or an encoder spec")
    max_length: int = Field(128, gt=0, description="tokens per sentence")
    backend: BackendName = backend_field("what the phrase encoder runs on (models.onnx_backend)")
    k_min: int = Field(2, ge=2, description="smallest topic count tried for n_topics 'auto'")
    k_max: int = Field(10, ge=2, description="largest topic count tried for n_topics 'auto'")
    max_phrases: int = Field(2000, ge=2, description="phrase instances encoded per request (a sample above it)")
    replicas: int = Field(1, ge=1)
    use_gpu: bool = False
    num_cpus: float = Field(1.0, ge=0, description="CPUs reserved per replica")
    torch_threads: int | None = Field(None, ge=1, description="None: max(1, num_cpus)")
    max_ongoing_requests: int = Field(8, ge=1, description="requests a replica holds; they are mined one by one")

    @model_validator(mode="after")
    def _valid(self) -> "TopicsSettings":
        if not _MODEL_NAME.match(self.name):
            raise ValueError(f"topics.name must be letters, digits, '_', '.', '-' (≤ 64 chars): {self.name!r}")
        if self.k_min > self.k_max:
            raise ValueError(f"topics.k_min ({self.k_min}) > topics.k_max ({self.k_max})")
        return self


CLASSIFIER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


class ClassifiersSettings(Settings):
    """Classifiers trained over HTTP (/v1/classifiers): where they are kept, what a training may ask."""

    storage_path: str | None = Field(
        None, description="registry folder or URI shared by every replica (a bucket on a cluster); None: "
                          "/v1/classifiers answers 404")
    texts_uri_prefixes: list[str] = Field(
        default_factory=list, description="folders or URIs a request's texts_uri may point into; empty: "
                                          "texts_uri is refused (403), so a request cannot read server files")
    max_texts: int = Field(5_000, ge=2, description="texts a training may self-train on (inline or texts_uri)")
    min_texts_per_label: int = Field(5, ge=1, description="a training needs at least this many texts per label")
    max_dev_texts: int = Field(1_000, ge=1)
    max_concurrent_trainings: int = Field(1, ge=1, description="more answer 429 with Retry-After")
    retry_after_s: int = Field(60, ge=1, description="the Retry-After of a 429")
    max_training_s: float = Field(
        6 * 3600, gt=0, description="a training still queued or running this long after it was asked for is "
                                    "stopped and failed (e.g. one waiting for CPUs the cluster never frees)")
    default_rounds: int = Field(2, ge=1)
    max_rounds: int = Field(5, ge=1)
    cpus_per_worker: float = Field(2.0, gt=0, description="CPUs a training reserves and trains on")
    train_in_process: bool = Field(
        True, description="each round trains in the training's own actor, which reserves cpus_per_worker "
                          "(train.in_process: ~8 s less per round); false: a Ray Train worker group per round")
    max_length: int = Field(64, gt=0, description="tokens per text while training (the job's round default)")
    read_max_length: ReadLength = Field(
        "auto", description="tokens per text read to label and classify it; auto (as the job and WCSBert): 128 where "
                            "the median training text fits in 128 tokens, else 512")
    batch_size: int = Field(32, ge=2, description="pairs per training step (the job's round default)")
    lr: float = Field(2e-5, gt=0, description="peak learning rate of a round (the job's round default)")
    models_per_replica: int = Field(4, ge=1, description="trained classifiers a serving replica keeps (LRU)")
    num_cpus: float = Field(1.0, ge=0, description="CPUs reserved per serving replica of trained classifiers")
    replicas: int = Field(1, ge=1)

    @model_validator(mode="after")
    def _rounds(self) -> "ClassifiersSettings":
        if self.default_rounds > self.max_rounds:
            raise ValueError(f"classifiers.default_rounds ({self.default_rounds}) > max_rounds ({self.max_rounds})")
        return self


class AuthSettings(Settings):
    """Bearer tokens (serve.auth): where their entries come from, and the per-token limits."""

    mode: Literal["auto", "tokens", "none"] = Field(
        "auto", description="auto: tokens when any are configured; with none, open on loopback only and "
                            "refused beyond it. tokens: refuse to start without one. none: no authentication")
    tokens_env: str | None = Field("CONTRASTEXT_API_TOKENS", description="environment variable holding token "
                                   "entries name:scope:sha256 (a Kubernetes Secret's key)")
    tokens_file: str | None = Field(None, description="file of token entries on the nodes (a mounted Secret)")
    requests_per_s: float | None = Field(50.0, gt=0, description="requests per second per token on each "
                                         "ingress replica (more answer 429 with Retry-After); None: no limit")
    burst: int = Field(100, ge=1, description="requests a token may send at once before requests_per_s applies")
    max_trainings_per_token: int = Field(1, ge=1, description="classifier trainings one token may have queued "
                                         "or running (more answer 429)")
    entries: list[tuple[str, str, str]] = Field(
        default_factory=list, description="filled when the application is built (names, scopes and hashes, "
                                          "never tokens): not a setting")


class ServeConfig(Settings):
    """``contrastext serve``: Ray Serve endpoints (embed, classify, cluster, topics) and a web page."""

    host: str = Field("127.0.0.1", description="0.0.0.0 to listen on every interface")
    proxy_location: Literal["EveryNode", "HeadOnly"] = Field(
        "EveryNode", description="HTTP proxies on every node with a replica (a load balancer in front checks "
                                 "/-/healthz), or one on the head node only")
    port: int = Field(8000, ge=1, le=65535)
    app_name: str = "contrastext"
    route_prefix: str = Field("/", pattern=r"^/")
    models: dict[str, ServedModelConfig] = Field(default_factory=lambda: {"minilm": ServedModelConfig()})
    default_model: str | None = Field(None, description="model used when a request names none; None: the first")
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    zeroshot: ZeroShotSettings = Field(default_factory=ZeroShotSettings)
    topics: TopicsSettings = Field(default_factory=TopicsSettings)
    classifiers: ClassifiersSettings = Field(default_factory=ClassifiersSettings)
    allow_model_paths_from_requests: bool = Field(
        False, description="let a request name a model folder or spec that is not in `models` (loads it)")
    path_models_per_replica: int = Field(2, ge=1, description="request-loaded models a replica keeps (LRU)")
    ingress_replicas: int = Field(1, ge=1)
    ingress_max_replicas_per_node: int | None = Field(
        None, ge=1, description="1: each ingress replica on its own node, so losing a node keeps the API")
    ingress_num_cpus: float = Field(0.0, ge=0)
    ingress_max_ongoing_requests: int = Field(
        256, ge=1, description="requests one ingress replica holds at once; bounds how full batches get")
    stats_path: str | None = Field(None, description="JSON file for the request statistics printed at exit")
    access_log: bool = Field(True, description="Serve's per-request log lines (proxy and replicas); off saves "
                                               "CPU under heavy load (cluster: logging_config in serve.yaml)")
    auth: AuthSettings = Field(default_factory=AuthSettings)
    ray: RayConfig = Field(default_factory=RayConfig)

    @model_validator(mode="after")
    def _models(self) -> "ServeConfig":
        if not self.models:
            raise ValueError("models: at least one model must be served")
        bad = [name for name in self.models if not _MODEL_NAME.match(name)]
        if bad:
            raise ValueError(f"models: names must be letters, digits, '_', '.', '-' (≤ 64 chars): {bad}")
        if self.default_model is not None and self.default_model not in self.models:
            raise ValueError(f"default_model {self.default_model!r} is not one of models: {sorted(self.models)}")
        return self

    @property
    def default_model_name(self) -> str:
        return self.default_model or next(iter(self.models))
