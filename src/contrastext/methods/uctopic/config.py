"""Configuration of the UCTopic job: one model, four stages (pretrain, finetune, mine, evaluate)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from contrastext.config import (
    EncoderConfig,
    LossConfig,
    OptimizerConfig,
    OutputConfig,
    RayConfig,
    Settings,
    TrainConfig,
)
from contrastext.data.sources import TextSource
from contrastext.models.resolve import DEFAULT_MODEL

Stage = Literal["pretrain", "finetune", "mine", "evaluate"]
#: the label-free score that picks CCL's delivered epoch (contrastext.methods.uctopic.ccl says what each measures)
CCLSelectBy = Literal["anchored_silhouette", "context_silhouette", "start_silhouette", "silhouette", "last"]
TopicCount = int | Literal["auto"]
#: what a phrase's vector is: the mean of its span's token states in its sentence (``in_context``), or that
#: plus the phrase encoded on its own as a text (``in_context+alone``: the name carries the entity's kind where
#: the sentence does not, e.g. in a sports table; each part unit length, their sum renormalised)
PhraseVectors = Literal["in_context", "in_context+alone"]
DEFAULT_PHRASE_VECTORS: PhraseVectors = "in_context+alone"
#: ``train.loss.params`` entry through which ``UCTopicConfig.train_config`` tells the phrase objective the
#: vectors to train (absent: what the start model's folder says)
PHRASE_VECTORS_PARAM = "phrase_vectors"


class PretrainSettings(Settings):
    """Pairs of sentences whose links point to the same page (or carry the same anchor text); or, with
    ``documents``, pairs of sentences that mention the same phrase (contrastext.methods.uctopic.text_mentions)."""

    documents: list[TextSource] | None = Field(
        None, description="text sources (contrastext.data.sources) to mine repeated phrases from, instead of a "
                          "Wikipedia dump's links; each source is read by a Ray task of its own")
    data_dir: str | None = Field(None, description="documents: the folder relative paths are read under (local or a "
                                                   "URI); None: $CONTRASTEXT_DATA, else ../shared/data")
    npmi_phrases: bool = Field(True, description="documents: NPMI phrases beside the named spans")
    vocabulary_documents: int = Field(2000, ge=1, description="documents: the NPMI vocabulary is fitted on the first "
                                                              "this many documents of each source")

    dump: str | None = Field(None, description="Wikipedia XML dump (.xml, .bz2, .gz); None: the sample dump "
                                               "found by contrastext.data.samples")
    pages: str | None = Field(None, description="instead of a dump: parquet/jsonl pages with 'text' and 'links' "
                                                "(build_corpus with links: true)")
    max_pages: int | None = Field(None, ge=1)
    keep_probability: float = Field(0.5, ge=0, le=1, description="chance that one mention of a pair stays unmasked")
    max_pairs_per_key: int = Field(20, ge=1, description="pairs per link target / anchor text (frequent pages "
                                                         "would otherwise dominate)")
    by_mention: bool = Field(True, description="also pair sentences whose links share the anchor text")
    max_pairs: int | None = Field(None, ge=1)
    min_sentence_words: int = Field(4, ge=1, description="shorter 'sentences' (headings, list items) are skipped")


class EntityEvalSettings(Settings):
    """Entity clustering on a CoNLL-style file: k-means of the entity vectors against their gold types."""

    conll: str | None = Field(None, description="CoNLL-2003-style file; None: no entity clustering evaluation")
    labels: list[str] = Field(default_factory=lambda: ["PER", "LOC", "ORG"])
    conll_documents: tuple[int, int] | None = Field(
        None, description="[first, end): only the entities of these documents (counted by -DOCSTART-)")
    k: int | None = Field(None, ge=2, description="clusters; None: the number of labels")
    max_instances: int | None = Field(None, ge=2, description="a seeded sample of the entities")
    nredo: int = Field(3, ge=1, description="k-means restarts (the best inertia is kept)")
    before: bool = Field(True, description="training stages: also score the starting model")


class NgramSettingsConfig(Settings):
    max_n: int = Field(3, ge=1, le=6)
    min_count: int = Field(2, ge=1)
    min_npmi: float = Field(0.3, ge=-1, le=1)
    max_vocabulary: int = Field(5000, ge=1)


class PhraseSource(Settings):
    """Phrase instances of a target collection: CoNLL entities, or candidate phrases of documents."""

    replaced_whole = True  # a YAML file's source is read as given, never merged with the default one

    conll: str | None = Field(None, description="CoNLL-style file: its entities are the phrases")
    labels: list[str] = Field(default_factory=lambda: ["PER", "LOC", "ORG"], description="CoNLL types kept")
    conll_documents: tuple[int, int] | None = Field(
        None, description="[first, end): only the entities of these CoNLL documents (counted by -DOCSTART-)")
    documents: TextSource | None = Field(
        None, description="a text source (contrastext.data.sources): a file (jsonl/csv/parquet; txt: one document a "
                          "line) or a folder of such files (each .txt/.md file one document); a path alone is a "
                          "source with the defaults")
    extractor: Literal["auto", "spacy", "ngram"] = Field(
        "auto", description="auto: spaCy noun chunks + entities when a model package is installed, else n-grams")
    spacy_model: str = "en_core_web_sm"
    ngram: NgramSettingsConfig = Field(default_factory=NgramSettingsConfig)
    max_instances: int | None = Field(None, ge=2, description="a seeded sample of the instances")

    @model_validator(mode="before")
    @classmethod
    def _earlier_document_keys(cls, data: Any) -> Any:
        """``text_column``, ``title_column`` and ``max_documents`` beside ``documents`` (as this block had them
        before documents became a text source) still read: they go into the source."""
        earlier = {"text_column": "text_columns", "title_column": "title_column", "max_documents": "max_rows"}
        if not isinstance(data, dict) or not earlier.keys() & data.keys():
            return data
        data = dict(data)
        moved = {new: data.pop(old) for old, new in earlier.items() if old in data}
        if "text_columns" in moved:
            moved["text_columns"] = [moved["text_columns"]]
        documents = data.get("documents")
        if documents is not None:
            documents = {"path": documents} if isinstance(documents, str) else dict(documents)
            data["documents"] = {**moved, **documents}
        return data

    @field_validator("documents", mode="before")
    @classmethod
    def _path_alone(cls, value: Any) -> Any:
        return {"path": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_source(self) -> "PhraseSource":
        if self.conll and self.documents:
            raise ValueError("give either conll or documents, not both")
        return self


class TopicSettings(Settings):
    n_topics: TopicCount = Field("auto", description="a number, or auto: the best silhouette in k_min..k_max")
    k_min: int = Field(2, ge=2)
    k_max: int = Field(10, ge=2)
    top_phrases: int = Field(10, ge=1)
    min_phrase_count: int = Field(2, ge=1, description="top phrases are drawn from phrases seen this often "
                                                       "(all phrases when a topic has none)")
    temperature: float = Field(0.05, gt=0, description="softmax temperature of p(topic | instance)")


class FinetuneSettings(Settings):
    """Cluster-assisted contrastive learning (CCL) on the target collection."""

    data: PhraseSource = Field(default_factory=PhraseSource)
    topics: TopicSettings = Field(default_factory=lambda: TopicSettings(n_topics=3))
    epochs: int = Field(3, ge=0, description="CCL epochs: each clusters with the previous epoch's model, "
                                             "pseudo-labels and trains one fit (train.epochs passes) from it")
    min_loss: float | None = Field(
        0.01, ge=0, description="an epoch whose CCL fit ends with a mean loss below this stops the epochs and is "
                                "left out: the pseudo-labels it trained on were already apart, and such a fit only "
                                "drifts from the start model (null: run every epoch)")
    select_by: CCLSelectBy = Field(
        "anchored_silhouette", description="the label-free score that picks the delivered model among the "
                                          "start model (epoch 0) and the epochs (see contrastext.methods.uctopic.ccl)")
    start_candidates: list[str] = Field(
        default_factory=list, description="other start models scored beside `model` before CCL (a pretraining "
        "run's folder stands for its model and every checkpoint it kept): the best by anchored_silhouette, "
        "anchored to `model`, is the one CCL starts from (contrastext.methods.uctopic.ccl.choose_start)")
    central_fraction: float = Field(0.2, gt=0, le=1, description="t: the share of each cluster closest to its "
                                                                 "centroid that gets a pseudo label")
    pairs_per_instance: int = Field(1, ge=1)
    positives: Literal["mention", "topic"] = Field(
        "topic", description="topic: instances of two mentions with the same pseudo label; mention: two "
                             "instances of one mention (UCTopic's; with the phrase alone in each vector such a pair "
                             "is alike from the start and teaches little)")
    mask_keep_probability: float | None = Field(
        None, ge=0, le=1, description="mask the mentions as in pretraining, one kept visible with this "
                                      "probability; None: no masking")


class MineSettings(Settings):
    data: PhraseSource = Field(default_factory=PhraseSource)
    topics: TopicSettings = Field(default_factory=TopicSettings)
    plot: bool = Field(True, description="a 2-D map of the phrase instances coloured by topic")


def _default_train() -> TrainConfig:
    return TrainConfig(objective="phrase", batch_size=32, epochs=1, checkpoint_every_steps=None,
                       optimizer=OptimizerConfig(lr=5e-5, warmup_ratio=0.1),
                       loss=LossConfig(name="mnr", params={"temperature": 0.05}), log_every_steps=10,
                       encoder=EncoderConfig(max_length=64))


class UCTopicConfig(Settings):
    """``stage`` picks the work; ``model`` is the phrase encoder it starts from (pretrain, finetune) or uses."""

    stage: Stage = "mine"
    model: str = Field(DEFAULT_MODEL, description="bundled:minilm, a folder written by pretrain/finetune, or any "
                                                  "encoder folder; sets train.encoder.model")
    max_length: int = Field(64, gt=0, description="tokens per sentence; sets train.encoder.max_length")
    phrase_vectors: PhraseVectors = Field(
        DEFAULT_PHRASE_VECTORS, description="a phrase's vector: its span in context (in_context), or that plus the "
        "phrase encoded alone (in_context+alone); every stage encodes with it and saves it with the model")
    encode_batch_size: int = Field(64, ge=1)
    seed: int = 0
    pretrain: PretrainSettings = Field(default_factory=PretrainSettings)
    finetune: FinetuneSettings = Field(default_factory=FinetuneSettings)
    mine: MineSettings = Field(default_factory=MineSettings)
    evaluation: EntityEvalSettings = Field(default_factory=EntityEvalSettings)
    train: TrainConfig = Field(default_factory=_default_train)
    output: OutputConfig = Field(default_factory=lambda: OutputConfig(name="uctopic"))
    ray: RayConfig = Field(default_factory=RayConfig)

    @model_validator(mode="after")
    def _consistent(self) -> "UCTopicConfig":
        if self.train.objective != "phrase":
            raise ValueError("train.objective must be 'phrase' for UCTopic")
        from contrastext.methods.uctopic.mlm import MLMSettings

        MLMSettings.split_loss_params(self.train.loss.params)  # refuses bad mlm_* settings before any work
        for name in ("finetune", "mine"):
            topics = getattr(self, name).topics
            if topics.k_max < topics.k_min:
                raise ValueError(f"{name}.topics: k_max ({topics.k_max}) < k_min ({topics.k_min})")
        return self

    def train_config(self) -> TrainConfig:
        """The fits' settings: this model and token limit, and the phrase vectors the stages encode with (the
        phrase objective reads them from ``loss.params``)."""
        encoder = self.train.encoder.model_copy(update={"model": self.model, "max_length": self.max_length})
        loss = self.train.loss.model_copy(update={"params": {**self.train.loss.params,
                                                             PHRASE_VECTORS_PARAM: self.phrase_vectors}})
        return self.train.model_copy(update={"encoder": encoder, "loss": loss})
