"""Request and response bodies of the HTTP API (the OpenAPI document is generated from these).

Types and shapes are checked here (422); sizes are checked against the operator's limits by the
ingress (413), because the limits come from the configuration, not from the schema.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

ModelName = Field(None, description="a served model's name (GET /v1/models); none: the default model",
                  max_length=4096)


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())


class EmbedRequest(_Request):
    texts: list[str] = Field(..., min_length=1, description="texts to embed")
    model: str | None = ModelName


class EmbedResponse(BaseModel):
    model_config = ConfigDict(protected_namespaces=())
    request_id: str
    model: str
    dimension: int
    embeddings: list[list[float]]


class ClassifyRequest(_Request):
    texts: list[str] = Field(..., min_length=1)
    labels: list[str] | None = Field(
        None, min_length=1, description="candidate labels, distinct; none only for a trained classifier "
                                        "(POST /v1/classifiers), which classifies into its own labels")
    model: str | None = ModelName
    template: str | None = Field(None, max_length=1000,
                                 description="prompt with '{label}'; none: the server's default")
    aliases: dict[str, list[str]] | None = Field(
        None, description="extra names per label; a label scores the maximum over its names")
    auto_aliases: bool = Field(True, description="also split labels on '&' and '/' and at CamelCase")
    threshold: float | None = Field(None, ge=-1.0, le=1.0,
                                    description="multi-label: also return every label scoring at least this")


class TextPrediction(BaseModel):
    label: str
    scores: dict[str, float]
    labels: list[str] | None = Field(None, description="labels at or over the threshold, best first")


class ClassifyResponse(BaseModel):
    model_config = ConfigDict(protected_namespaces=())
    request_id: str
    model: str
    template: str
    results: list[TextPrediction]


class ClusterRequest(_Request):
    texts: list[str] = Field(..., min_length=3)
    k: Annotated[int, Field(ge=1, le=10_000)] | Literal["auto"] = Field(
        "auto", description="number of clusters, or 'auto' (the best silhouette over 2..10)")
    model: str | None = ModelName
    top_texts: int = Field(3, ge=1, le=20, description="most central texts returned per cluster")
    top_keywords: int = Field(5, ge=1, le=30)
    seed: int = Field(0, ge=0, le=2**31 - 1)


class CentralText(BaseModel):
    index: int
    text: str


class ClusterSummary(BaseModel):
    cluster: int
    size: int
    central: list[CentralText]
    keywords: list[str]


class ClusterResponse(BaseModel):
    model_config = ConfigDict(protected_namespaces=())
    request_id: str
    model: str
    k: int
    silhouette: dict[int, float] | None = Field(None, description="silhouette per k tried ('auto')")
    assignments: list[int]
    sizes: list[int]
    clusters: list[ClusterSummary]
    points: list[list[float]] = Field(..., description="2-D PCA projection of the embeddings, one per text")


class TopicsRequest(_Request):
    documents: list[str] = Field(..., min_length=1, description="documents to mine phrase topics from")
    n_topics: Annotated[int, Field(ge=2, le=10_000)] | Literal["auto"] = Field(
        "auto", description="number of topics, or 'auto' (the best silhouette over the server's k range)")
    top_phrases: int = Field(10, ge=1, le=100, description="phrases listed per topic, most typical first")
    seed: int = Field(0, ge=0, le=2**31 - 1)
    model: str | None = Field(None, max_length=4096,
                              description="the server's topics model name (GET /v1/models); none: that model")


class TopicPhraseOut(BaseModel):
    phrase: str
    score: float = Field(..., description="p(topic | phrase): the mean of its instances' topic distributions")
    count: int = Field(..., description="instances of the phrase in the documents")


class TopicOut(BaseModel):
    topic: int
    size: int = Field(..., description="phrase instances assigned to the topic")
    phrases: list[TopicPhraseOut]


class PhraseOccurrenceOut(BaseModel):
    document: int = Field(..., description="index into the request's documents")
    start: int = Field(..., description="character offset of the phrase in its document")
    end: int
    phrase: str
    topic: int
    score: float = Field(..., description="p(topic | this occurrence)")


class TopicsResponse(BaseModel):
    model_config = ConfigDict(protected_namespaces=())
    request_id: str
    model: str
    n_topics: int
    silhouette: float | None
    silhouette_by_k: dict[int, float] = Field(..., description="silhouette per topic count tried ('auto')")
    extractor: str = Field(..., description="how candidate phrases were found (spacy:<model> or ngram)")
    instances: int = Field(..., description="phrase instances encoded")
    topics: list[TopicOut]
    occurrences: list[PhraseOccurrenceOut]
    phrase_topics: dict[str, int] = Field(..., description="each distinct phrase (lower-cased) and its topic")


class TopicsModelInfo(BaseModel):
    model_config = ConfigDict(protected_namespaces=())
    name: str
    model: str
    max_length: int
    device: str
    backend: str = Field("torch", description="what the phrase encoder runs on: torch, onnx or onnx-int8")
    k_range: list[int] = Field(..., description="[k_min, k_max] tried for n_topics 'auto'")


class ModelInfo(BaseModel):
    model_config = ConfigDict(protected_namespaces=())
    name: str
    model: str
    dimension: int
    max_length: int
    normalize: bool
    device: str
    precision: str = Field(description="what forward passes run in: bf16 (autocast) or fp32")
    backend: str = Field("torch", description="what encode runs on: torch, onnx or onnx-int8")
    batching: dict
    replicas: int | str
    default: bool


class ModelsResponse(BaseModel):
    models: list[ModelInfo]
    default_model: str
    model_paths_from_requests: bool
    topics: TopicsModelInfo | None = Field(None, description="the /v1/topics model; none: topics are off")


class HealthResponse(BaseModel):
    status: Literal["ok"]
    models: list[str]


class DevSetIn(_Request):
    texts: list[str] = Field(..., min_length=1)
    labels: list[str] = Field(..., min_length=1, description="each dev text's true label, one of the labels")


class CreateClassifierRequest(_Request):
    name: str = Field(..., max_length=64, description="letters, digits, '_' and '-'; the model name to classify with")
    labels: list[str] = Field(..., description="the class names, at least 2, distinct")
    aliases: dict[str, list[str]] | None = Field(None, description="extra names per label")
    template: str | None = Field(None, max_length=1000, description="prompt with '{label}'; none: '{label}'")
    texts: list[str] | None = Field(None, description="unlabelled texts to self-train on (or texts_uri)")
    texts_uri: str | None = Field(None, max_length=4096,
                                  description="a text file on the server's storage, one text per line")
    dev: DevSetIn | None = Field(None, description="labelled texts scored after every round (never trained on)")
    rounds: int | None = Field(None, ge=1, description="self-training rounds; none: the server's default")
    base_model: str | None = Field(None, max_length=64, description="a served model to start from; none: the default")
    guard: bool = Field(True, description="after each round, score the model without labels (do its labels follow "
                                          "the texts' neighbourhoods?) and serve the best of the base model and the "
                                          "rounds, stopping when a round is worse")


class RoundOut(BaseModel):
    round: int
    kept: int = Field(..., description="texts kept as pseudo-labelled training examples")
    pairs: int
    kept_per_label: dict[str, int]
    labels_changed: float | None = Field(None, description="share of pseudo-labels changed since the last round")
    steps: int
    seconds: float
    dev_accuracy: float | None = None
    guard: float | None = Field(None, description="the label-free guard score of this round's model")
    head: Literal["prompts", "prototypes", "blend"] | None = Field(
        None, description="the head the guard chose for this round's model: its label prompts, the prototypes "
                          "of its own labels of the texts, or their blend")


class ClassifierStatus(BaseModel):
    model_config = ConfigDict(protected_namespaces=())
    name: str
    state: Literal["queued", "running", "ready", "failed"]
    reason: str | None = Field(None, description="why it failed")
    labels: list[str]
    base_model: str
    rounds: int
    round: int = Field(0, description="rounds finished")
    rounds_done: list[RoundOut] = Field(default_factory=list)
    texts: int | None = Field(None, description="texts self-trained on")
    read_tokens: int | None = Field(None, description="tokens of each text read to label and classify it "
                                                      "(read_max_length; auto settles it from the texts)")
    dev_accuracy_untrained: float | None = None
    guard_untrained: float | None = Field(None, description="the label-free guard score of the base model")
    chosen_round: int | None = Field(None, description="the round whose model is served (0: the base model's, "
                                                       "kept by the guard)")
    chosen_head: Literal["prompts", "prototypes", "blend"] | None = Field(
        None, description="what the served model classifies with: its label prompts' vectors, the prototypes "
                          "of its own labels of the texts, or their blend (chosen by the guard, without labels)")
    stop_reason: str | None = Field(None, description="why the rounds stopped (all run, or the guard kept an earlier "
                                                      "model), and why a round whose guard fell was kept")
    version: int | None = Field(None, description="the registered version, once ready")
    created: str
    started: str | None = None
    finished: str | None = None
    status_url: str


class ClassifierList(BaseModel):
    classifiers: list[ClassifierStatus]


class DeletedClassifier(BaseModel):
    name: str
    deleted: bool
    training_stopped: bool = Field(..., description="whether a running training was stopped")


class ErrorResponse(BaseModel):
    detail: str | list
    request_id: str
