"""ShuffleDivide: a document encoder trained without labels, then clustered.

    model = ShuffleDivide(n_clusters=5)
    clusters = model.fit_predict(documents)

The epochs run through the loop the job runs (``contrastext.methods.epochs``), on documents
held in memory: the pair builder gives the epoch's positive pairs (default: each document's sentences
shuffled and cut in half), the negatives rule says which other documents of a batch NT-Xent pushes away, one
epoch of ``contrastext.train.fit`` trains from the previous epoch's model, and the documents are clustered and
scored without labels. The best epoch (epoch 0: the encoder before training) is the one kept. Three parts are
pluggable:

- ``pairs``: any object with ``prepare(texts, labels=)`` and ``pairs(epoch, ids=, groups=)``
  (``contrastext.data.pair_builders``: ``ShuffleDividePairs``, ``TfidfNeighbourPairs``);
- ``negatives``: ``BatchNegatives`` or ``OtherClusterNegatives`` (``contrastext.methods.shuffle_divide.negatives``);
- ``clusterer``: any object with ``fit_predict(embeddings) -> cluster ids`` (default: spherical k-means).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from contrastext.clustering import Clusterer, SphericalKMeans, result_of_assignments
from contrastext.config import EncoderConfig, LossConfig, OptimizerConfig, ScalingSettings, TrainConfig
from contrastext.data.documents import ShuffleUnit, tfidf_matrix
from contrastext.data.pair_builders import PairBuilder, ShuffleDividePairs
from contrastext.methods.epochs import (
    EpochRow,
    SelectBy,
    run_epochs,
    score_epoch,
    stale_epochs,
    training_groups,
)
from contrastext.methods.shuffle_divide.negatives import BatchNegatives, Negatives
from contrastext.methods.training import (
    checked_texts,
    encoder_spec,
    fit_rows,
    kept_path,
    load_text_encoder,
    work_folder,
)
from contrastext.models.resolve import DEFAULT_MODEL
from contrastext.vectors import unit_rows

MANIFEST = "shuffle_divide.json"
CENTROIDS = "centroids.npy"


def save_clusters(folder: str, centroids: np.ndarray, *, max_length: int, batch_size: int) -> None:
    """Write the clusters beside a saved encoder (a local folder or a URI): ``ShuffleDivide.load`` and the
    ``predict`` job assign documents to them."""
    from contrastext import storage
    from contrastext.manifest import write_json_atomic

    storage.write_npy(storage.join(folder, CENTROIDS), np.asarray(centroids, np.float32))
    write_json_atomic(storage.join(folder, MANIFEST), {"n_clusters": int(len(centroids)), "max_length": max_length,
                                                       "batch_size": batch_size})


def default_shuffle_divide_train() -> TrainConfig:
    """NT-Xent (temperature 0.1) at a constant 3e-5 after warm-up, batch 64, one epoch per fit, 2-core worker."""
    return TrainConfig(
        encoder=EncoderConfig(pooling="mean", max_length=128),
        optimizer=OptimizerConfig(lr=3e-5, schedule="constant", warmup_ratio=0.1),
        loss=LossConfig(name="ntxent", params={"temperature": 0.1}),
        scaling=ScalingSettings(num_workers=1, cpus_per_worker=2),
        epochs=1, batch_size=64, checkpoint_every_steps=50,
    )


def epoch_train_config(base: TrainConfig, model: str, epoch: int) -> TrainConfig:
    """Epoch ``epoch``'s fit (1-based): from ``model``, seeded by the epoch, warm-up only in the first."""
    train = base.model_copy(deep=True)
    train.encoder.model = model
    train.seed = base.seed + epoch
    if epoch > 1:
        train.optimizer.warmup_ratio = 0.0
    return train


class ShuffleDivide:
    """``fit(documents)`` trains the encoder; ``transform`` embeds; ``fit_predict`` also clusters.

    ``clusterer``: default ``SphericalKMeans(n_clusters)``; any object with ``fit_predict`` instead (then
    ``n_clusters`` is its business). ``epochs``: training epochs, each with fresh pairs.
    ``pairs``: the pair builder; default ``ShuffleDividePairs(shuffle_unit, min_units=min_units, seed=seed)``
    (``shuffle_unit`` "sentence" and ``min_units`` 4 unless given; with ``pairs`` they are the builder's).
    ``negatives``: default ``BatchNegatives()``; ``OtherClusterNegatives()`` clusters the documents with
    the previous epoch's model (by ``clusterer`` unless it has its own) before each epoch.
    ``select_by``: which epoch ``fit`` keeps, without labels (``tfidf_silhouette``: its clusters' silhouette
    in the documents' TF-IDF space, as the job; ``silhouette``: in its own embedding space; ``last``).
    ``history_`` has a row per epoch, epoch 0 the encoder before training; ``chosen_epoch_`` is the one kept.
    ``work_dir``: where the epochs' checkpoints and models are kept (``history_[i]["model"]``); without one
    they go to a temporary folder removed at the end of ``fit``.
    """

    def __init__(self, encoder: Any = DEFAULT_MODEL, *, n_clusters: int = 8, clusterer: Clusterer | None = None,
                 epochs: int = 1, shuffle_unit: ShuffleUnit | None = None, min_units: int | None = None,
                 pairs: PairBuilder | None = None, negatives: Negatives | None = None,
                 train: TrainConfig | None = None, max_length: int = 256, batch_size: int = 32, seed: int = 0,
                 select_by: SelectBy = "tfidf_silhouette", work_dir: str | os.PathLike[str] | None = None):
        if epochs < 0:
            raise ValueError(f"epochs must be ≥ 0, got {epochs}")
        self.encoder = encoder
        self.n_clusters = n_clusters
        self.clusterer: Clusterer = clusterer if clusterer is not None else SphericalKMeans(n_clusters, seed=seed)
        self.epochs = epochs
        if pairs is not None and (shuffle_unit is not None or min_units is not None):
            raise ValueError("shuffle_unit and min_units set the default pair builder: with pairs=, give them to "
                             "it (ShuffleDividePairs(unit, min_units=...))")
        self.pairs = pairs if pairs is not None else ShuffleDividePairs(
            shuffle_unit or "sentence", min_units=4 if min_units is None else min_units, seed=seed)
        self.negatives: Negatives = negatives if negatives is not None else BatchNegatives()
        self.train = train or default_shuffle_divide_train()
        if self.train.loss.name not in ("ntxent", "mnr"):
            raise ValueError("train.loss.name must be a pair loss (ntxent or mnr): the pairs have no labels")
        if self.negatives.group_column and self.train.loss.name != "ntxent":
            raise ValueError("these negatives mask NT-Xent's in-batch negatives: set train.loss.name to ntxent")
        self.max_length = max_length
        self.batch_size = batch_size
        if select_by not in ("tfidf_silhouette", "silhouette", "last"):
            raise ValueError(f"select_by must be tfidf_silhouette, silhouette or last, got {select_by!r}")
        self.select_by = select_by
        self.seed = seed
        self.work_dir = work_dir
        self.encoder_ = None
        self.centroids_: np.ndarray | None = None
        self.pair_stats_: dict[str, Any] = {}
        self.history_: list[dict[str, Any]] = []
        self.chosen_epoch_: int | None = None
        self.embeddings_: np.ndarray | None = None  # the fitted documents under the kept epoch's model

    def fit(self, documents: Sequence[str]) -> "ShuffleDivide":
        documents = checked_texts(documents, "documents")
        self.pair_stats_ = self.pairs.prepare(documents) if self.epochs else {}
        with work_folder(self.work_dir, "shuffle-divide") as folder:
            epochs = _EpochsInMemory(self, documents, folder)
            outcome = run_epochs(epochs, self.epochs, self.select_by)
            chosen = outcome.chosen["epoch"]
            self.encoder_ = epochs.encoders[chosen]
        self.embeddings_ = epochs.embeddings[chosen]
        self.chosen_epoch_ = chosen
        self.history_ = [{**row, "model": kept_path(row["model"], self.work_dir)} for row in outcome.rows]
        return self

    def train_epoch(self, pairs: Sequence[Mapping[str, Any]], model: str, epoch: int, work_dir: Path | None = None,
                    *, output: str | None = None, export_to: str | None = None):
        """One epoch of training from ``model`` on ``pairs`` (``anchor``, ``positive``, and ``group`` where the
        negatives rule groups documents: pairs of one group are not each other's negatives); returns the
        fit's result, its ``model_path`` the new model. ``output`` / ``export_to``: the folder or URI to train
        in and where the model goes (the job's, so an interrupted epoch resumes); else a new folder under
        ``work_dir``."""
        train = epoch_train_config(self.train, model, epoch)
        if self.negatives.group_column:
            train = train.model_copy(update={"group_column": self.negatives.group_column})
        columns = ["anchor", "positive"] + ([train.group_column] if train.group_column else [])
        missing = [column for column in columns if pairs and column not in pairs[0]]
        if missing:
            raise KeyError(f"the pairs have no {missing} (they have {sorted(pairs[0])}): the pair builder must "
                           "give anchor and positive, and the groups it is handed as `group`")
        rows = [{column: pair[column] for column in columns} for pair in pairs]
        return fit_rows(rows, train, work_dir, f"epoch_{epoch:03d}", output=output, export_to=export_to)

    def transform(self, documents: Sequence[str]) -> np.ndarray:
        if self.encoder_ is None:
            raise RuntimeError("call fit(documents) first")
        return self.encoder_.encode(checked_texts(documents, "documents"), batch_size=self.batch_size)

    def fit_predict(self, documents: Sequence[str]) -> np.ndarray:
        """Train on ``documents``, then cluster their embeddings under the kept epoch's model: one cluster id
        per document. The clusters' centroids are kept (``centroids_``), so ``predict`` and a saved model
        assign new documents to them."""
        return self.cluster(self.fit(documents).embeddings_)

    def cluster(self, embeddings: np.ndarray) -> np.ndarray:
        """Cluster embeddings by ``clusterer`` and keep the centroids: the clusterer's own where it has them
        (spherical k-means), else each cluster's unit mean (then ``predict`` may move a few border documents)."""
        assignments = np.asarray(self.clusterer.fit_predict(embeddings))
        result = getattr(self.clusterer, "result_", None)
        if result is None or getattr(result, "centroids", None) is None:
            if np.issubdtype(assignments.dtype, np.number) and (assignments < 0).any():
                self.centroids_ = None  # noise rows (HDBSCAN's -1): ids returned as given, nothing to assign to
                return assignments
            result = result_of_assignments(embeddings, assignments)  # ids renumbered 0..k-1 in sorted order
            assignments = result.assignments
        self.centroids_ = np.asarray(result.centroids, np.float32)
        return assignments

    def embed_and_predict(self, documents: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Embeddings, nearest-centroid cluster ids and their cosines, from one forward pass."""
        if self.centroids_ is None:
            raise RuntimeError("no clusters yet: call fit_predict(documents), or ShuffleDivide.load(folder)")
        embeddings = self.transform(documents)
        similarity = unit_rows(embeddings) @ self.centroids_.T
        clusters = similarity.argmax(axis=1)
        return embeddings, clusters, similarity[np.arange(len(clusters)), clusters]

    def predict(self, documents: Sequence[str]) -> np.ndarray:
        """Each document's nearest cluster centroid (cosine): new documents join the clusters ``fit_predict``
        found."""
        return self.embed_and_predict(documents)[1]

    def save(self, path: str | os.PathLike[str]) -> Path:
        """The trained encoder in sentence-transformers format (``ShuffleDivide(path)`` starts from it), plus
        the clusters' centroids when there are any (``shuffle_divide.json``, ``centroids.npy``)."""
        if self.encoder_ is None:
            raise RuntimeError("call fit(documents) first")
        target = Path(self.encoder_.save(path))
        if self.centroids_ is not None:
            save_clusters(str(target), self.centroids_, max_length=self.max_length, batch_size=self.batch_size)
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str], **kwargs) -> "ShuffleDivide":
        """A saved model with its clusters: ``predict`` assigns documents to them; ``kwargs`` win over the
        saved settings."""
        manifest_file = Path(path) / MANIFEST
        if not manifest_file.is_file():
            raise FileNotFoundError(f"{path} has no {MANIFEST}: it holds an encoder but no clusters (save a "
                                    "model after fit_predict)")
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
        settings = {"n_clusters": manifest["n_clusters"], "max_length": manifest["max_length"],
                    "batch_size": manifest["batch_size"], **kwargs}
        model = cls(str(path), **settings)
        model.encoder_ = load_text_encoder(str(path), model.max_length)
        model.centroids_ = np.load(Path(path) / CENTROIDS).astype(np.float32)
        return model


class _EpochsInMemory:
    """The epoch loop's runner for documents in memory: models in the work folder; the encoder, embeddings
    and clusters of the best epoch so far and of the last one in memory."""

    def __init__(self, method: ShuffleDivide, documents: list[str], folder: Path):
        self.method, self.documents, self.folder = method, documents, folder
        self.encoders: dict[int, Any] = {}
        self.embeddings: dict[int, np.ndarray] = {}
        self.assignments: dict[int, np.ndarray] = {}

    def run_epoch(self, epoch: int, previous: EpochRow | None) -> EpochRow:
        method = self.method
        row: EpochRow = {"epoch": epoch}
        if previous is None:
            model = encoder_spec(method.encoder, self.folder / "start")
            encoder = load_text_encoder(method.encoder, method.max_length)
        else:
            groups = training_groups(method.negatives, method.clusterer, self.assignments[previous["epoch"]],
                                     lambda: self.embeddings[previous["epoch"]])
            pairs = method.pairs.pairs(epoch, groups=groups)
            result = method.train_epoch(pairs, previous["model"], epoch, self.folder)
            model = result.model_path
            encoder = load_text_encoder(model, method.max_length)
            row |= {"pairs": len(pairs), "steps": result.steps, "loss": result.mean_loss}
        embeddings = encoder.encode(self.documents, batch_size=method.batch_size)
        assignments, scores = None, {}
        if method.epochs:  # with no training there is no epoch to choose, nor groups to give
            assignments, scores = score_epoch(embeddings, method.clusterer, reference=self._reference,
                                              seed=method.seed)
        self.encoders[epoch], self.embeddings[epoch], self.assignments[epoch] = encoder, embeddings, assignments
        return row | scores | {"model": model}

    def epoch_finished(self, rows: list[EpochRow], select_by: SelectBy) -> None:
        for epoch in stale_epochs(rows, select_by):  # at most two encoders in memory: the best so far, the last
            for kept in (self.encoders, self.embeddings, self.assignments):
                kept.pop(epoch, None)

    @cached_property
    def _reference(self):
        """The documents' TF-IDF rows, the space the default choice scores in (built once)."""
        return tfidf_matrix(self.documents)
