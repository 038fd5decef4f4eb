"""Shuffle & Divide: train a document encoder without labels, cluster with spherical k-means every epoch.

Epoch 0 is the encoder before training. Every later epoch builds fresh positive pairs (Shuffle & Divide
re-shuffles each document's sentences or words; TF-IDF pairs stay fixed), runs one epoch of the shared
Ray Train loop from the previous epoch's model, encodes every document, clusters, and scores. The epoch
with the best silhouette (no labels needed; by default measured in the documents' TF-IDF space, which
training does not move, so epochs compare fairly) gives the final model and assignments. Each epoch is a
:class:`~contrastext.stages.Stage`: its ``done.json`` records the settings its outputs depend on and the model
it started from, so a stopped run picks up where it was, and a changed setting runs that epoch and the ones
after it again.

Every output goes through :mod:`contrastext.storage`: ``output.storage_path`` may be a local folder or a URI
(``s3://bucket/runs``), and so may the document files (and ``data_dir``).

``negatives=other_clusters`` feeds the previous epoch's clusters back into training: NT-Xent then takes
only documents of other clusters as negatives. Plain NT-Xent (the paper's 2N-2 negatives) also pushes
apart documents of the same topic, which on an encoder that already clusters well (MiniLM) splits topics
into document-specific clumps.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from contrastext import storage
from contrastext.clustering import result_of_assignments
from contrastext.data.documents import tfidf_matrix
from contrastext.data.sources import LabelledTexts, TextSource, load_texts, locate
from contrastext.manifest import write_json_atomic, write_manifest
from contrastext.methods.epochs import (
    EpochsOutcome,
    best_epoch,
    run_epochs,
    score_epoch,
    stale_epochs,
    training_groups,
)
from contrastext.methods.shuffle_divide.config import ShuffleDivideConfig
from contrastext.methods.shuffle_divide.model import save_clusters
from contrastext.report import format_table
from contrastext.stages import Stage, Timings, say

JOB = "shuffle_divide"
_SCORE_KEYS = ("silhouette", "tfidf_silhouette", "acc", "nmi", "ami")


# ---------------------------------------------------------------- inputs

def load_source(source: TextSource, data_dir: str | None, seed: int) -> tuple[LabelledTexts, Path | str]:
    path = locate(source, data_dir, what="document file")
    return load_texts(source.model_copy(update={"path": str(path)}), seed=seed), path


# ---------------------------------------------------------------- one epoch's steps

def _epoch_dir(run_dir: Path | str, epoch: int) -> str:
    return storage.join(run_dir, "epochs", f"epoch_{epoch:03d}")


def _fit_dir(run_dir: Path | str, epoch: int) -> str:
    """Where an epoch's fit keeps its checkpoints (the fit's run folder)."""
    return storage.join(run_dir, "train", f"epoch_{epoch:03d}")


def method_of(config: ShuffleDivideConfig, k: int):
    """The job's ``ShuffleDivide``: the same settings, ``k`` clusters. The job drives it an epoch at a time
    (each epoch's outputs kept, so a stopped run resumes)."""
    from contrastext.methods.shuffle_divide.model import ShuffleDivide

    return ShuffleDivide(config.train.encoder.model, config=config, n_clusters=k)


def _encode(model: str, texts: list[str], config: ShuffleDivideConfig) -> np.ndarray:
    encoder = config.train.encoder.load(model, max_length=config.encode_max_length)
    return encoder.encode(texts, batch_size=config.encode_batch_size, show_progress=True)


def _prepare_training(train_docs: LabelledTexts, method, timings: Timings,
                      config: ShuffleDivideConfig) -> dict[str, Any]:
    """The pair builder reads the training texts once (labels only measure the pairs), and Ray starts;
    returns the pair stats."""
    from contrastext.runtime import init_ray

    with timings.measure("pairs"):
        stats = method.pairs.prepare(train_docs.texts, labels=train_docs.labels)
    say(JOB, f"pairs: {stats}")
    init_ray(config.ray)
    return stats


def _training_groups(epoch: int, previous_model: str, train_docs: LabelledTexts, method, run_dir: Path | str,
                     config: ShuffleDivideConfig) -> np.ndarray | None:
    """Each training document's group under the previous epoch's model, where the method's negatives rule
    groups documents (None: plain in-batch negatives): the previous epoch's saved clusters when the clustered
    documents are the training documents, else the training documents encoded with the previous model and
    grouped by the rule. Saved in the epoch's folder, so a resumed epoch trains on the same groups."""
    if not method.negatives.group_column:
        return None
    path = storage.join(_epoch_dir(run_dir, epoch), "train_groups.npy")
    if not storage.is_file(path):
        previous = (storage.read_npy(storage.join(_epoch_dir(run_dir, epoch - 1), "assignments.npy"))
                    if config.train_documents is None else None)
        groups = training_groups(method.negatives, method.clusterer, previous,
                                 lambda: _encode(previous_model, train_docs.texts, config))
        storage.write_npy(path, groups)
    return storage.read_npy(path)


def _train_epoch(epoch: int, previous_model: str, pairs: list[dict[str, Any]], run_dir: str,
                 method) -> dict[str, Any]:
    """The epoch's fit, through ``ShuffleDivide.train_epoch``: checkpoints under ``train/``, the model in the
    epoch's folder."""
    result = method.train_epoch(pairs, previous_model, epoch, output=_fit_dir(run_dir, epoch),
                                export_to=storage.join(_epoch_dir(run_dir, epoch), "model"))
    row = {"loss": result.mean_loss, "steps": result.steps, "pairs": len(pairs), "rows_skipped": result.rows_skipped,
           "train_s": result.seconds, "trained_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if method.negatives.group_column:
        sizes = np.bincount([p["group"] for p in pairs if p["group"] >= 0])
        row["negative_groups"] = int((sizes > 0).sum())
    return row


#: training settings that change how an epoch runs, not what it makes (the start model is in ``start``)
_HOW_NOT_WHAT = {"encoder": {"model"}, "scaling": True, "checkpoint_every_steps": True, "keep_checkpoints": True,
                 "eval_every_steps": True, "log_every_steps": True, "max_failures": True}


def epoch_settings(config: ShuffleDivideConfig, epoch: int, k: int, docs_path: Path | str, train_path: Path | str,
                   start: dict[str, Any]) -> dict[str, Any]:
    """What an epoch's outputs depend on, for its done-marker: the documents, k and how they are clustered and
    scored, the model it starts from (with when that model was trained, so an epoch trained again invalidates
    the ones after it) and, for a training epoch, how its pairs and negatives are made and the training.
    How the final epoch is chosen (``select_by``) and which models are kept are not among them."""
    settings: dict[str, Any] = {
        "documents": {"path": str(docs_path), **config.documents.model_dump(mode="json", exclude={"path"})},
        "k": k, "kmeans": {"niter": config.kmeans_niter, "nredo": config.kmeans_nredo, "seed": config.train.seed},
        "encode_max_length": config.encode_max_length, "silhouette_sample_size": config.silhouette_sample_size,
        "start": start}
    if epoch > 0:
        train_documents = config.train_documents.model_dump(mode="json", exclude={"path"}) if config.train_documents else None
        settings |= {"train_documents": {"path": str(train_path), **(train_documents or {})},
                     "pair_method": config.pair_method, "shuffle_unit": config.shuffle_unit,
                     "min_units": config.min_units, "negatives": config.negatives,
                     "train": config.train.model_dump(mode="json", exclude=_HOW_NOT_WHAT)}
    return settings


# ---------------------------------------------------------------- the job

def run_shuffle_divide(config: ShuffleDivideConfig) -> dict[str, Any]:
    """Run (or resume) the job; returns the summary also written to ``metrics.json``.

    ``output.storage_path`` is a local folder or a URI; everything the run writes goes there.
    """
    timings = Timings()
    run_dir = config.output.run_dir()  # a local folder (absolute) or a URI
    storage.check_writable(run_dir)

    with timings.measure("load"):
        docs, docs_path = load_source(config.documents, config.data_dir, config.train.seed)
        if config.train_documents is not None:
            train_docs, train_path = load_source(config.train_documents, config.data_dir, config.train.seed)
        else:
            train_docs, train_path = docs, docs_path
        k = config.k or (len(set(docs.labels)) if docs.labels is not None else None)
        if k is None:
            raise ValueError("set `k`: the documents have no label column to count clusters from")
        if k >= len(docs):
            raise ValueError(f"k={k} needs more than {len(docs)} documents")
    say(JOB, f"{len(docs)} documents to cluster from {docs_path} (skipped: {dict(docs.skipped) or 'none'}); "
             f"{len(train_docs)} to train on; k={k}")

    method = method_of(config, k)
    pairs_file = storage.join(run_dir, "pairs.json")
    pair_stats: dict[str, Any] = storage.read_json(pairs_file) if storage.is_file(pairs_file) else {}

    epochs = _StoredEpochs(config, run_dir, method, docs, train_docs, k, docs_path, train_path, timings)
    outcome = run_epochs(epochs, config.epochs, config.select_by)
    pair_stats = epochs.pair_stats or pair_stats
    summary = _finish(outcome, docs, docs_path, train_path, train_docs, k, pair_stats, run_dir, config, timings)
    return summary


class _StoredEpochs:
    """The epoch loop's runner for the job: each epoch a :class:`~contrastext.stages.Stage` in
    ``epochs/epoch_NNN`` (model, embeddings, clusters), so a stopped run resumes where it was."""

    def __init__(self, config: ShuffleDivideConfig, run_dir: str, method, docs: LabelledTexts,
                 train_docs: LabelledTexts, k: int, docs_path: Path | str, train_path: Path | str, timings: Timings):
        self.config, self.run_dir, self.method, self.docs, self.train_docs = config, run_dir, method, docs, train_docs
        self.k, self.docs_path, self.train_path, self.timings = k, docs_path, train_path, timings
        self.pair_stats: dict[str, Any] | None = None  # set when this run prepares the pairs

    def run_epoch(self, epoch: int, previous: dict[str, Any] | None) -> dict[str, Any]:
        config, run_dir = self.config, self.run_dir
        start = ({"model": config.train.encoder.model, "trained_at": None} if previous is None
                 else {"model": previous["model"], "trained_at": previous.get("trained_at")})
        epoch_dir = _epoch_dir(run_dir, epoch)
        stage = Stage(JOB, f"epoch {epoch}", epoch_dir,
                      epoch_settings(config, epoch, self.k, self.docs_path, self.train_path, start))
        done = stage.finished()
        if done is not None:
            row = done["result"]
        else:
            row = {"epoch": epoch}
            if previous is not None:
                with self.timings.measure(f"train_{epoch}"):
                    row.update(self._train(epoch, start["model"], stage))
            scoring = Timings()
            epoch_model = storage.join(epoch_dir, "model") if epoch > 0 else start["model"]
            with scoring.measure("encode_cluster"):
                embeddings = _encode(epoch_model, self.docs.texts, config)
                assignments, scores = score_epoch(embeddings, self.method.clusterer, labels=self.docs.labels,
                                                  reference=self._reference,
                                                  sample_size=config.silhouette_sample_size, seed=config.train.seed)
            row.update(scores, model=epoch_model, encode_cluster_s=scoring["encode_cluster"])
            storage.write_npy(storage.join(epoch_dir, "embeddings.npy"), embeddings)
            storage.write_npy(storage.join(epoch_dir, "assignments.npy"), assignments)
            stage.mark_done(row)  # last: the marker says the epoch's outputs are all there
        stage.say(", ".join(f"{key} {row[key]:.4f}" for key in ("loss", *_SCORE_KEYS) if row.get(key) is not None))
        return row

    def _train(self, epoch: int, previous_model: str, stage: Stage) -> dict[str, Any]:
        """The epoch's fit, unless a stopped attempt with these settings trained it already (then it is only
        scored); what another attempt left is deleted."""
        epoch_dir = _epoch_dir(self.run_dir, epoch)
        train_file = storage.join(epoch_dir, "train.json")
        stage.begin("model", "train.json", "train_groups.npy", _fit_dir(self.run_dir, epoch))
        trained = storage.is_file(storage.join(epoch_dir, "model", "modules.json"))
        if not (trained and storage.is_file(train_file)):
            if self.pair_stats is None:
                self.pair_stats = _prepare_training(self.train_docs, self.method, self.timings, self.config)
                write_json_atomic(storage.join(self.run_dir, "pairs.json"), self.pair_stats)
            groups = _training_groups(epoch, previous_model, self.train_docs, self.method, self.run_dir, self.config)
            pairs = self.method.pairs.pairs(epoch, ids=self.train_docs.ids, groups=groups)
            write_json_atomic(train_file, _train_epoch(epoch, previous_model, pairs, self.run_dir, self.method))
        return storage.read_json(train_file)

    def epoch_finished(self, rows: list[dict[str, Any]], select_by: str) -> None:
        if self.config.keep_epoch_models:
            return
        for epoch in stale_epochs(rows, select_by):
            if epoch > 0:
                storage.delete(storage.join(_epoch_dir(self.run_dir, epoch), "model"))

    @cached_property
    def _reference(self):
        """The documents' TF-IDF rows, built on first use (a run whose epochs are all scored skips it)."""
        return tfidf_matrix(self.docs.texts)


def _publish_model(source: str, destination: str) -> None:
    """Copy the chosen epoch's model to the run's ``model/`` (locally through a temporary folder and a rename)."""
    if storage.is_uri(destination):
        storage.copy_tree(source, destination)
        return
    target = Path(destination)
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(source, tmp)
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)


def _finish(outcome: EpochsOutcome, docs: LabelledTexts, docs_path: Path | str, train_path: Path | str,
            train_docs: LabelledTexts, k: int, pair_stats: dict[str, Any], run_dir: str,
            config: ShuffleDivideConfig, timings: Timings) -> dict[str, Any]:
    import pyarrow as pa

    from contrastext import plots

    report = Stage(JOB, "report")  # its clock: the model published, the assignments and figures written
    rows, best = outcome.rows, outcome.chosen
    best_acc = best_epoch(rows, "acc")
    best_silhouette = best_epoch(rows, "silhouette") or rows[-1]
    best_dir = _epoch_dir(run_dir, best["epoch"])
    if best["epoch"] > 0 and not storage.is_file(storage.join(best_dir, "model", "modules.json")):
        raise FileNotFoundError(
            f"select_by={config.select_by} chooses epoch {best['epoch']}, whose model an earlier run with "
            f"keep_epoch_models: false deleted when it chose another epoch; run with that run's select_by, or "
            f"delete {best_dir} and the epochs after it to train them again")
    embeddings = storage.read_npy(storage.join(best_dir, "embeddings.npy"))
    assignments = storage.read_npy(storage.join(best_dir, "assignments.npy"))

    model_dir = storage.join(run_dir, "model")
    if best["epoch"] > 0:
        # the clusters go with the model (written before it is published, so it never appears without them):
        # ShuffleDivide.load(model).predict and `predict` assign new documents to them
        clusters = result_of_assignments(embeddings, assignments)
        assignments = clusters.assignments  # ids as the centroids are numbered (k-means' own unless one is empty)
        save_clusters(storage.join(best_dir, "model"), clusters.centroids, max_length=config.encode_max_length,
                      batch_size=config.encode_batch_size)
        _publish_model(storage.join(best_dir, "model"), model_dir)
    else:
        storage.delete(model_dir)  # training did not beat the untrained encoder

    table = {"id": docs.ids, "cluster": assignments.astype(np.int32)}
    if docs.labels is not None:
        table["label"] = docs.labels
    storage.write_parquet(pa.table(table), storage.join(run_dir, "assignments.parquet"))

    # figures are drawn into a local folder: the run's own, or a temporary one uploaded to a URI run folder
    remote = storage.is_uri(run_dir)
    plot_dir = Path(tempfile.mkdtemp(prefix="shuffle-divide-plots-")) if remote else Path(run_dir) / "plots"
    try:
        keys = [key for key in _SCORE_KEYS if any(r.get(key) is not None for r in rows)]
        metrics_png = plots.metric_lines(rows, "epoch", keys, plot_dir / "metrics_per_epoch.png",
                                         "Clustering scores per epoch (epoch 0: before training)")
        points = plots.project_2d(embeddings, config.projection, seed=config.train.seed)
        clusters_png = plots.scatter_2d(points, [f"cluster {c}" for c in assignments], plot_dir / "clusters_2d.png",
                                        f"Epoch {best['epoch']} embeddings ({config.projection}), by cluster")
        labels_png = None
        if docs.labels is not None:
            labels_png = plots.scatter_2d(points, docs.labels, plot_dir / "labels_2d.png",
                                          f"Epoch {best['epoch']} embeddings ({config.projection}), by label")
        if remote:
            for figure in (metrics_png, clusters_png, labels_png):
                if figure is not None:
                    storage.upload_file(figure, storage.join(run_dir, "plots", Path(figure).name))
    finally:
        if remote:
            shutil.rmtree(plot_dir, ignore_errors=True)
    timings["report"] = report.seconds
    timings.total()

    summary = {
        "documents": {"path": str(docs_path), "count": len(docs), "skipped": dict(docs.skipped)},
        "train_documents": {"path": str(train_path), "count": len(train_docs),
                            "skipped": dict(train_docs.skipped)},
        "k": k,
        "pairs": pair_stats,
        "epochs": rows,
        "selected_by": config.select_by,
        "selected": {"epoch": best["epoch"], **{key: best.get(key) for key in _SCORE_KEYS}},
        "best_by_silhouette": {"epoch": best_silhouette["epoch"],
                               **{key: best_silhouette.get(key) for key in _SCORE_KEYS}},
        "best_by_acc": ({"epoch": best_acc["epoch"], **{key: best_acc.get(key) for key in _SCORE_KEYS}}
                        if best_acc else None),
        "model_path": model_dir if best["epoch"] > 0 else config.train.encoder.model,
        "timings_s": timings,
    }
    if best_acc is not None:
        summary["acc_lost_by_label_free_selection"] = best_acc["acc"] - best["acc"]
    write_json_atomic(storage.join(run_dir, "metrics.json"), summary)
    inputs = {str(p): storage.file_signature(p) for p in {docs_path, train_path} if storage.is_file(p)}
    write_manifest(run_dir, job="shuffle_divide", config=config, inputs=inputs, timings=timings,
                   counts={"documents": len(docs), "train_documents": len(train_docs),
                           "pairs_per_epoch": pair_stats.get("pairs"), "epochs": len(rows) - 1,
                           "documents_skipped": sum(docs.skipped.values())})
    text = summary_table(summary)
    _write_report(run_dir, summary, text, metrics_png, clusters_png, labels_png)
    print(text)
    return summary


def summary_table(summary: dict[str, Any]) -> str:
    keys = [key for key in _SCORE_KEYS if any(r.get(key) is not None for r in summary["epochs"])]
    rows = []
    for r in summary["epochs"]:
        chosen = "*" if r["epoch"] == summary["selected"]["epoch"] else ""
        rows.append([r["epoch"], chosen, r.get("loss") if r.get("loss") is not None else "-",
                     *[r.get(key) if r.get(key) is not None else "-" for key in keys]])
    return format_table(rows, headers=["epoch", "chosen", "train loss", *keys])


def _write_report(run_dir: str, summary: dict[str, Any], table: str, *figures: Path | None) -> None:
    best, best_acc = summary["selected"], summary["best_by_acc"]
    lines = [
        "# Shuffle & Divide clustering", "",
        f"- documents: {summary['documents']['count']} from `{summary['documents']['path']}` "
        f"(skipped: {summary['documents']['skipped'] or 'none'})",
        f"- trained on: {summary['train_documents']['count']} documents from "
        f"`{summary['train_documents']['path']}`; pairs: {summary['pairs']}",
        f"- k = {summary['k']}; epoch chosen by {summary['selected_by']}: {best['epoch']} (column `chosen`); "
        f"best by embedding silhouette: {summary['best_by_silhouette']['epoch']}",
    ]
    if best_acc is not None:
        lines.append(f"- best epoch by ACC: {best_acc['epoch']} (ACC {best_acc['acc']:.4f}); label-free "
                     f"selection loses {summary['acc_lost_by_label_free_selection']:.4f} ACC")
    lines += ["", "```", table, "```", ""]
    lines += [f"![{Path(f).stem}](plots/{Path(f).name})" for f in figures if f is not None]
    storage.write_text(storage.join(run_dir, "report.md"), "\n".join(lines) + "\n")
