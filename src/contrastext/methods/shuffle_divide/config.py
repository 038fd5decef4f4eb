"""Shuffle & Divide's settings, shared by ``ShuffleDivide`` (``config=``, or any field as a keyword) and the
``shuffle_divide`` job (their top-level keys), so each default is written once; and the job's config."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from contrastext.clustering import SphericalKMeans
from contrastext.config import EncoderConfig, LossConfig, OptimizerConfig, OutputConfig, RayConfig, ScalingSettings
from contrastext.config import Settings, TrainConfig
from contrastext.data.documents import ShuffleUnit
from contrastext.data.pair_builders import PairBuilder, ShuffleDividePairs, TfidfNeighbourPairs
from contrastext.data.paths import DATA_ENV
from contrastext.data.sources import TextSource
from contrastext.methods.epochs import SelectBy
from contrastext.methods.shuffle_divide.negatives import BatchNegatives, Negatives, OtherClusterNegatives

#: the clusters ``ShuffleDivide`` makes when neither ``k`` nor a clusterer says (the job: the labels' number)
DEFAULT_CLUSTERS = 8


def default_shuffle_divide_train() -> TrainConfig:
    """NT-Xent (temperature 0.1) at a constant 3e-5 after warm-up, batch 64, one epoch per fit, 2-core worker."""
    return TrainConfig(
        encoder=EncoderConfig(pooling="mean", max_length=128),
        optimizer=OptimizerConfig(lr=3e-5, schedule="constant", warmup_ratio=0.1),
        loss=LossConfig(name="ntxent", params={"temperature": 0.1}),
        scaling=ScalingSettings(num_workers=1, cpus_per_worker=2),
        epochs=1, batch_size=64, checkpoint_every_steps=50,
    )


class ShuffleDivideSettings(Settings):
    """What Shuffle & Divide does: its pairs, negatives, epochs, clustering and training."""

    pair_method: Literal["shuffle_divide", "tfidf"] = "shuffle_divide"
    shuffle_unit: ShuffleUnit = Field(
        "sentence", description="what Shuffle & Divide shuffles before cutting a document in half: sentence, "
                                "or word (each half a bag of words sampled from the whole document)")
    min_units: int = Field(4, ge=2, description="Shuffle & Divide trains on documents with at least this many "
                                                "units (words or sentences)")
    tfidf_chunk_rows: int = Field(1024, ge=1, description="rows of the TF-IDF similarity computed at once")
    negatives: Literal["batch", "other_clusters"] = Field(
        "batch", description="batch: every other document of the batch is a negative (the paper's 2N-2); "
        "other_clusters: documents that the previous epoch's clustering (no labels) put in the anchor's "
        "cluster are not negatives, so training stops pushing a topic's documents apart")
    epochs: int = Field(5, ge=0, description="training epochs after epoch 0 (the untrained encoder)")
    k: int | None = Field(None, ge=2, description="clusters; None: the number of distinct labels (the job), "
                                                  f"{DEFAULT_CLUSTERS} (ShuffleDivide)")
    select_by: SelectBy = Field(
        "tfidf_silhouette", description="label-free choice of the epoch: the clusters' cosine silhouette in the "
        "documents' TF-IDF space (fixed, so epochs compare fairly), in the epoch's own embedding space, or the "
        "last epoch")
    kmeans_niter: int = Field(25, ge=1)
    kmeans_nredo: int = Field(5, ge=1, description="k-means restarts; the tightest is kept")
    encode_max_length: int = Field(256, gt=0, description="tokens per document when encoding for clustering")
    encode_batch_size: int = Field(32, ge=1)
    train: TrainConfig = Field(default_factory=default_shuffle_divide_train)

    @model_validator(mode="after")
    def _one_epoch_per_fit(self) -> "ShuffleDivideSettings":
        if self.train.epochs != 1:
            raise ValueError("train.epochs must be 1: pairs are rebuilt every epoch, set `epochs` instead")
        if self.train.loss.name not in ("ntxent", "mnr"):
            raise ValueError("train.loss.name must be a pair loss (ntxent or mnr): the pairs have no labels")
        if self.negatives == "other_clusters" and self.train.loss.name != "ntxent":
            raise ValueError("negatives=other_clusters masks NT-Xent negatives: set train.loss.name to ntxent")
        return self

    def pair_builder(self) -> PairBuilder:
        if self.pair_method == "tfidf":
            return TfidfNeighbourPairs(chunk_rows=self.tfidf_chunk_rows)
        return ShuffleDividePairs(self.shuffle_unit, min_units=self.min_units, seed=self.train.seed)

    def negatives_rule(self) -> Negatives:
        return OtherClusterNegatives() if self.negatives == "other_clusters" else BatchNegatives()

    def clusterer(self, k: int) -> SphericalKMeans:
        return SphericalKMeans(k, seed=self.train.seed, niter=self.kmeans_niter, nredo=self.kmeans_nredo)


def _document_source(value: Any) -> Any:
    """The job's defaults for a document source given as a mapping: basic cleaning, documents under 10 words
    left out (see contrastext.data.sources)."""
    if isinstance(value, dict):
        return {"cleaning": "basic", "min_words": 10, **value}
    return value


class ShuffleDivideConfig(ShuffleDivideSettings):
    """Unsupervised document encoder (Shuffle & Divide or TF-IDF positives) + spherical k-means: the
    ``shuffle_divide`` job, the method's settings plus its documents, report and output."""

    data_dir: str | None = Field(None, description=f"where relative document paths live; None: ${DATA_ENV}, "
                                                   "else ../shared/data (contrastext.data.paths)")
    documents: TextSource = Field(default_factory=lambda: TextSource(
        path="bbcsport/bbcsport.jsonl", label_column="label", title_column="title", cleaning="basic",
        min_words=10), description="the documents to cluster; given as a mapping, unless it says otherwise: "
                                   "basic cleaning, documents under 10 words left out")
    train_documents: TextSource | None = Field(
        None, description="texts to train on (labels unused; defaults as documents); None: the documents that "
                          "are clustered")
    silhouette_sample_size: int | None = Field(5000, ge=2)
    projection: Literal["tsne", "pca"] = "tsne"
    keep_epoch_models: bool = Field(True, description="False: delete an epoch's model once the next exists, unless it "
                                                    "is the best so far by select_by")
    output: OutputConfig = Field(default_factory=lambda: OutputConfig(name="shuffle_divide"))
    ray: RayConfig = Field(default_factory=RayConfig)

    @field_validator("documents", "train_documents", mode="before")
    @classmethod
    def _document_defaults(cls, value: Any) -> Any:
        return _document_source(value)

    def settings(self) -> ShuffleDivideSettings:
        """The method's part of the job's config."""
        return ShuffleDivideSettings.model_validate(self.model_dump(include=set(ShuffleDivideSettings.model_fields)))
