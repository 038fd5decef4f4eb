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

from contrastext.clustering import Clusterer, result_of_assignments
from contrastext.config import TrainConfig
from contrastext.data.documents import tfidf_matrix
from contrastext.data.pair_builders import PairBuilder
from contrastext.methods.epochs import (
    EpochRow,
    SelectBy,
    run_epochs,
    score_epoch,
    stale_epochs,
    training_groups,
)
from contrastext.methods.shuffle_divide.config import (
    DEFAULT_CLUSTERS,
    ShuffleDivideConfig,
    ShuffleDivideSettings,
)
from contrastext.methods.shuffle_divide.negatives import Negatives
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


def epoch_train_config(base: TrainConfig, model: str, epoch: int) -> TrainConfig:
    """Epoch ``epoch``'s fit (1-based): from ``model``, seeded by the epoch, warm-up only in the first."""
    train = base.model_copy(deep=True)
    train.encoder.model = model
    train.seed = base.seed + epoch
    if epoch > 1:
        train.optimizer.warmup_ratio = 0.0
    return train


#: keywords ``ShuffleDivide`` took before it shared the job's settings → their names now
RENAMED = {"max_length": "encode_max_length", "batch_size": "encode_batch_size", "seed": "train.seed"}


def settings_with(config: ShuffleDivideSettings | None, settings: dict[str, Any]) -> ShuffleDivideSettings:
    """``config`` (default: the job's defaults; a job config gives its method settings) with ``settings``
    over it, validated; a keyword that is not a setting is a TypeError that names the settings."""
    base = config.settings() if isinstance(config, ShuffleDivideConfig) else config or ShuffleDivideSettings()
    renamed = {key: RENAMED[key] for key in settings if key in RENAMED}
    if renamed:
        raise TypeError("ShuffleDivide's settings now have the job's names: " +
                        ", ".join(f"{old} is {new}" for old, new in renamed.items()))
    ShuffleDivideSettings.refuse_unknown(settings, "ShuffleDivide")
    return ShuffleDivideSettings.model_validate(base.model_dump() | settings)


class ShuffleDivide:
    """``fit(documents)`` trains the encoder; ``transform`` embeds; ``fit_predict`` also clusters.

    Settings: ``config`` (a ``ShuffleDivideSettings``, or the job's ``ShuffleDivideConfig``; default the job's
    defaults) with any of its fields given as a keyword over it (``epochs``, ``shuffle_unit``, ``min_units``,
    ``pair_method``, ``negatives``, ``select_by``, ``encode_max_length``, ``encode_batch_size``, ``train``, …).
    ``n_clusters`` is the settings' ``k`` (default 8). Three parts plug in as objects instead:
    ``clusterer`` (default spherical k-means with ``k`` clusters; any object with ``fit_predict``, then the
    number of clusters is its business), ``pairs`` (default the settings' builder:
    ``ShuffleDividePairs(shuffle_unit, min_units=...)`` or ``TfidfNeighbourPairs``; with ``pairs`` those
    settings are the builder's) and ``negatives`` (default the settings' rule; ``OtherClusterNegatives()``
    clusters the documents with the previous epoch's model, by ``clusterer`` unless it has its own, before
    each epoch). ``select_by``: which epoch ``fit`` keeps, without labels (``tfidf_silhouette``: its clusters'
    silhouette in the documents' TF-IDF space; ``silhouette``: in its own embedding space; ``last``).
    ``history_`` has a row per epoch, epoch 0 the encoder before training; ``chosen_epoch_`` is the one kept.
    ``work_dir``: where the epochs' checkpoints and models are kept (``history_[i]["model"]``); without one
    they go to a temporary folder removed at the end of ``fit``.
    """

    def __init__(self, encoder: Any = DEFAULT_MODEL, *, config: ShuffleDivideSettings | None = None,
                 n_clusters: int | None = None, clusterer: Clusterer | None = None, pairs: PairBuilder | None = None,
                 negatives: Negatives | str | None = None, work_dir: str | os.PathLike[str] | None = None,
                 **settings: Any):
        if isinstance(negatives, str):  # the settings' name of a rule ("batch", "other_clusters")
            settings["negatives"], negatives = negatives, None
        if n_clusters is not None and "k" in settings:
            raise TypeError("give n_clusters or k, not both (they are one setting)")
        if n_clusters is not None and clusterer is None:  # with a clusterer of one's own, its business
            settings["k"] = n_clusters
        if pairs is not None and {"shuffle_unit", "min_units"} & set(settings):
            raise ValueError("shuffle_unit and min_units set the default pair builder: with pairs=, give them to "
                             "it (ShuffleDividePairs(unit, min_units=...))")
        self.config = settings_with(config, settings)
        self.encoder = encoder
        self.n_clusters = n_clusters if n_clusters is not None else self.config.k or DEFAULT_CLUSTERS
        self.clusterer: Clusterer = clusterer if clusterer is not None else self.config.clusterer(self.n_clusters)
        self.pairs = pairs if pairs is not None else self.config.pair_builder()
        self.negatives: Negatives = negatives if negatives is not None else self.config.negatives_rule()
        if self.negatives.group_column and self.train.loss.name != "ntxent":
            raise ValueError("these negatives mask NT-Xent's in-batch negatives: set train.loss.name to ntxent")
        self.work_dir = work_dir
        self.encoder_ = None
        self.centroids_: np.ndarray | None = None
        self.pair_stats_: dict[str, Any] = {}
        self.history_: list[dict[str, Any]] = []
        self.chosen_epoch_: int | None = None
        self.embeddings_: np.ndarray | None = None  # the fitted documents under the kept epoch's model

    # the settings the methods below read, by their names in ``config``
    epochs = property(lambda self: self.config.epochs)
    select_by = property(lambda self: self.config.select_by)
    train = property(lambda self: self.config.train)
    max_length = property(lambda self: self.config.encode_max_length)
    batch_size = property(lambda self: self.config.encode_batch_size)
    seed = property(lambda self: self.config.train.seed)

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
        settings = {"encode_max_length": manifest["max_length"], "encode_batch_size": manifest["batch_size"], **kwargs}
        model = cls(str(path), **settings)
        model.n_clusters = manifest["n_clusters"]  # the saved clusters' number (one, from a user's clusterer, too)
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
