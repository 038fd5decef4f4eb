"""The ``predict`` job's settings."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from contrastext.config import BackendName, OutputConfig, RayConfig, Settings, backend_field
from contrastext.data.sources import TextSource

Task = Literal["auto", "classify", "cluster", "topics", "embed"]


class PredictInput(TextSource):
    """Which texts to label: ``path`` is a file, a folder (every visible file below it), a glob
    (``docs/*.jsonl``, ``s3://bucket/docs/**/*.parquet``) or a URI prefix (``s3://bucket/docs/part-``), in
    parquet, JSON lines, CSV/TSV or plain text (a ``.txt`` file given alone holds a text a line; a ``.txt``
    file found in a folder, glob or prefix is one text). Text columns, join, title, id and cleaning are read
    as every job reads a text source (``contrastext.data.sources``)."""

    path: str = Field(..., description="file, folder, glob or URI prefix of the texts")
    on_unreadable: Literal["error", "skip"] = Field(
        "error", description="a file that cannot be read: stop with an error naming it, or count it and go on")

    @model_validator(mode="after")
    def _no_dataset(self) -> "PredictInput":
        if self.dataset is not None or self.label_column is not None or self.max_documents is not None:
            raise ValueError("predict reads plain files: dataset, label_column and max_documents do not apply")
        return self


class PredictScaling(Settings):
    actors: int = Field(1, ge=1, description="model actors (each loads the model once)")
    max_actors: int | None = Field(None, ge=1, description="let the pool grow up to this many actors "
                                                           "(autoscaling); None: a fixed pool of `actors`")
    cpus_per_actor: float = Field(2.0, gt=0)
    gpus_per_actor: float = Field(0.0, ge=0, description="fractional values share a GPU (0.25: four actors a GPU)")
    read_cpus: float = Field(0.0, ge=0, description="CPUs a read task holds: 0 (reading is mostly I/O) lets the "
                                                    "re-reads that replace chunks lost with a node run while the "
                                                    "actors hold every CPU (with any CPUs they would wait forever)")
    torch_threads: int | None = Field(None, ge=1, description="None: the actor's CPUs (at least 1)")

    @model_validator(mode="after")
    def _pool(self) -> "PredictScaling":
        if self.max_actors is not None and self.max_actors < self.actors:
            raise ValueError(f"scaling.max_actors ({self.max_actors}) < scaling.actors ({self.actors})")
        return self


class PredictConfig(Settings):
    """``contrastext predict``: label, cluster, assign topics to or embed every text of a corpus."""

    model: str = Field(..., description="a folder saved by WCSBert, SupConClassifier, ShuffleDivide or "
                                        "PhraseTopicModel (local or URI; a wcsbert_selftrain run's "
                                        "`final/model`), or any encoder spec (bundled:minilm) for embeddings")
    task: Task = Field("auto", description="auto: what the model folder is (an encoder alone: embed)")
    input: PredictInput
    output: OutputConfig = Field(default_factory=lambda: OutputConfig(name="predict"))
    top_k: int = Field(3, ge=1, description="classify: labels kept per text with their probabilities")
    include_embedding: bool = Field(False, description="add each text's embedding (always there for embed)")
    max_length: int | None = Field(None, ge=8, description="tokens per text; None: what the model was saved with")
    batch_size: int = Field(64, ge=1, description="texts per forward pass")
    backend: BackendName = backend_field(
        "what the model's encoder runs on (models.onnx_backend): every method's predictions read its "
        "embeddings or, for PhraseTopicModel, its token states")
    chunk_rows: int = Field(2048, ge=1, description="input rows per output file (the unit of resuming)")
    rows_per_unit: int = Field(200_000, ge=1, description="a parquet file is read in row ranges of about this "
                                                          "many rows, so one large file spreads over the actors")
    scaling: PredictScaling = Field(default_factory=PredictScaling)
    overwrite: bool = Field(False, description="replace an output made with other settings (else refused)")
    ray: RayConfig = Field(default_factory=RayConfig)
