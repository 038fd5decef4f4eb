"""The UCTopic job: ``pretrain`` (Wikipedia link pairs), ``finetune`` (CCL), ``mine`` (topics), ``evaluate``.

Every stage prints a table, writes ``metrics.json``, ``report.md`` and ``manifest.json`` into
``<output.storage_path>/<output.name>-<stage>``; the training stages also export the phrase encoder to
``model/`` there (the folder the next stage's ``model`` names). ``output.storage_path`` may be a local folder
or a URI (``s3://bucket/runs``), and so may every input file and model.

A finished training stage leaves ``done.json`` (the settings it ran with) beside its outputs: run again with
the same settings and the stage is skipped, its ``metrics.json`` returned; with other settings it runs again.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from collections import Counter
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from contrastext import storage
from contrastext.config import OutputConfig
from contrastext.errors import InputError
from contrastext.manifest import write_json_atomic, write_manifest
from contrastext.methods.uctopic.config import EntityEvalSettings, TopicSettings, UCTopicConfig
from contrastext.methods.uctopic.phrases import PhraseInstance
from contrastext.report import format_table
from contrastext.stages import Stage, Timings, say

log = logging.getLogger(__name__)
STAGES = ("pretrain", "finetune", "mine", "evaluate")
# settings that change how a training stage runs, not what it produces
_RUN_ONLY_TRAIN_SETTINGS = ("scaling", "max_failures", "keep_checkpoints", "log_every_steps")


def _say(message: str) -> None:
    say("uctopic", message)


def _stage_output(config: UCTopicConfig) -> OutputConfig:
    return config.output.model_copy(update={"name": f"{config.output.name}-{config.stage}"})


def _load_encoder(spec: str, config: UCTopicConfig):
    from contrastext.methods.uctopic.encoder import PhraseEncoder

    return PhraseEncoder.from_pretrained(spec, max_length=config.max_length, backend=config.train.encoder.backend,
                                         allow_download=config.train.encoder.allow_download,
                                         vectors=config.phrase_vectors)


def _encode(encoder, instances: Sequence[PhraseInstance], config: UCTopicConfig, what: str) -> np.ndarray:
    clock = Timings()
    with clock.measure(what):
        vectors = encoder.encode(instances, batch_size=config.encode_batch_size, show_progress=sys.stderr.isatty())
    _say(f"encoded {len(instances):,} {what} in {clock[what]:.1f}s")
    return vectors


# ------------------------------------------------------------------------------ entity clustering

def gold_scores(labels: Sequence[str], clusters: np.ndarray) -> dict[str, float]:
    from contrastext.metrics.clustering import ami, clustering_accuracy, nmi

    return {"nmi": nmi(labels, clusters), "acc": clustering_accuracy(labels, clusters), "ami": ami(labels, clusters)}


def entity_clustering(encoder, settings: EntityEvalSettings, config: UCTopicConfig,
                      instances: list[PhraseInstance] | None = None,
                      embeddings: np.ndarray | None = None) -> dict[str, Any]:
    """k-means (k = the number of gold types unless set) of entity vectors, scored against the gold types."""
    from contrastext.clustering import spherical_kmeans
    from contrastext.methods.uctopic.phrases import read_conll_entities
    from contrastext.methods.uctopic.sources import sample_instances

    if instances is None:
        found = read_conll_entities(settings.conll, settings.labels, documents=settings.conll_documents)
        instances = sample_instances(found, settings.max_instances, config.seed)
    if embeddings is None:
        embeddings = _encode(encoder, instances, config, "entities")
    labels = [inst.label for inst in instances]
    k = settings.k or len(set(labels))
    result = spherical_kmeans(embeddings, k, seed=config.seed, nredo=settings.nredo)
    return {**gold_scores(labels, result.assignments), "k": k, "instances": len(instances)}


# ------------------------------------------------------------------------------ topics report

def topic_report(topics_result, instances: Sequence[PhraseInstance]) -> tuple[list[dict], dict[str, float]]:
    """Per topic: its top phrases, their informativeness (sentence tf-idf) and word diversity; and means."""
    from contrastext.methods.uctopic.metrics import SentenceTfidf, word_diversity

    sentences = sorted({inst.sentence for inst in instances})
    tfidf = SentenceTfidf(sentences)
    contexts: dict[str, list[str]] = {}
    for inst in instances:
        contexts.setdefault(" ".join(inst.phrase.split()).lower(), []).append(inst.sentence)
    rows = []
    for topic in topics_result.topics:
        phrases = [p.phrase for p in topic.phrases]
        informativeness = [tfidf.phrase_informativeness(p, contexts.get(p.lower(), [])) for p in phrases]
        rows.append({"topic": topic.topic, "size": topic.size, "phrases": phrases,
                     "scores": [p.score for p in topic.phrases], "counts": [p.count for p in topic.phrases],
                     "informativeness": float(np.mean(informativeness)) if informativeness else 0.0,
                     "diversity": word_diversity(phrases)})
    all_top = [p for row in rows for p in row["phrases"]]
    summary = {"informativeness": float(np.mean([r["informativeness"] for r in rows])) if rows else 0.0,
               "diversity": float(np.mean([r["diversity"] for r in rows])) if rows else 0.0,
               "diversity_all_topics": word_diversity(all_top)}
    return rows, summary


def _topics_markdown(rows: list[dict]) -> list[str]:
    lines = ["| topic | instances | informativeness | diversity | top phrases |", "|---|---|---|---|---|"]
    for r in rows:
        phrases = ", ".join(r["phrases"]).replace("|", "\\|")
        lines.append(f"| {r['topic']} | {r['size']} | {r['informativeness']:.3f} | {r['diversity']:.3f} | {phrases} |")
    return lines


def _mine_topics(encoder, instances, embeddings, settings: TopicSettings, extractor: str, seed: int):
    from contrastext.methods.uctopic.model import PhraseTopicModel
    from contrastext.methods.uctopic.topics import cluster_phrases

    clock = Timings()
    with clock.measure("topics"):
        clustering = cluster_phrases(embeddings, settings.n_topics, k_min=settings.k_min, k_max=settings.k_max,
                                     seed=seed)
        model = PhraseTopicModel(encoder, temperature=settings.temperature)
        result = model.topics_of(instances, embeddings, clustering, top_phrases=settings.top_phrases,
                                 min_phrase_count=settings.min_phrase_count, extractor=extractor)
    _say(f"{clustering.k} topics (silhouette {clustering.silhouette}) in {clock['topics']:.1f}s")
    return clustering, result


# ------------------------------------------------------------------------------ stages

def run_pretrain(config: UCTopicConfig) -> dict[str, Any]:
    from contrastext.methods.uctopic.objective import PhraseObjective  # noqa: F401 -- registers the "phrase" objective
    from contrastext.runtime import init_ray
    from contrastext.train import fit

    timings = Timings()
    output = _stage_output(config)
    run_dir = output.run_dir()
    stage = training_stage(config, run_dir)
    done = finished_summary(stage)
    if done is not None:
        return done
    stage.begin(run_dir)  # the fit trains in the stage's folder: only an attempt with these settings resumes it
    settings = config.pretrain
    init_ray(config.ray)
    built, source = _pretraining_pairs(config)
    pairs = built.pairs
    if settings.max_pairs:
        pairs.context.execution_options.preserve_order = True  # the first max_pairs in pair id order
        pairs = pairs.limit(settings.max_pairs)
    pairs = pairs.materialize()  # in the object store: the pairs file, the count and the training read it
    link_mentions, rows = built.mentions.count(), pairs.count()
    if not rows:
        raise ValueError(f"{source}: no positive pairs (link mentions: {link_mentions}); pretraining needs "
                         f"pages whose links share targets")
    written = _write_pairs(pairs, storage.join(run_dir, "pairs.parquet"))
    keys = pairs.select_columns(["key"]).groupby("key", num_partitions=max(1, pairs.num_blocks())).count().count()
    masked = written.masked / (2 * rows)
    _say(f"{link_mentions:,} mentions → {rows:,} positive pairs from {keys:,} targets/mentions "
         f"({masked:.0%} of mentions masked)")
    timings["pairs"] = stage.seconds

    before = after = None
    if config.evaluation.conll and config.evaluation.before:
        with timings.measure("eval_before"):
            before = entity_clustering(_load_encoder(config.model, config), config.evaluation, config)
    with timings.measure("train"):
        result = fit(pairs, config.train_config(), output, rows=rows, export_model_to=storage.join(run_dir, "model"))
    if config.evaluation.conll and result.model_path:
        with timings.measure("eval_after"), storage.local_copy(result.model_path) as folder:
            after = entity_clustering(_load_encoder(str(folder), config), config.evaluation, config)
    timings["total"] = stage.seconds
    summary = {"stage": "pretrain", "source": source, "link_mentions": link_mentions, "pairs": rows,
               "pairs_by_source": dict(written.by_source),
               "masked_share": masked, "mlm_weight": config.train.loss.params.get("mlm_weight", 0.0),
               "steps": result.steps,
               "final_loss": result.last_loss, "rows_skipped": result.rows_skipped,
               "entity_clustering_before": before, "entity_clustering_after": after,
               "model_path": result.model_path, "timings_s": timings}
    rows_table = [["source", source], ["mentions in sentences (links or phrases)", link_mentions],
                  ["positive pairs", rows], ["mentions masked", f"{masked:.1%}"],
                  ["MLM loss weight", summary["mlm_weight"] or "off"], ["optimiser steps", result.steps],
                  ["final loss", summary["final_loss"] if summary["final_loss"] is not None else "-"],
                  ["rows skipped (malformed)", summary["rows_skipped"]]]
    rows_table += _entity_rows(before, after, config.evaluation)
    rows_table += [["time (s): train / total", f"{timings['train']:.1f} / {timings['total']:.1f}"],
                   ["model", result.model_path or "-"]]
    summary = _finish(config, run_dir, summary, rows_table, counts={"pairs": rows, "steps": result.steps},
                      timings=timings, inputs=_checksums([settings.dump, settings.pages, config.evaluation.conll]))
    stage.mark_done()
    return summary


def _pretraining_pairs(config: UCTopicConfig):
    """The positive pairs (lazy) and their mentions, from the text sources' repeated phrases or from the
    Wikipedia links; and where they come from."""
    from contrastext.data.sources import describe
    from contrastext.methods.uctopic.phrases import mention_pair_dataset, positive_pair_dataset
    from contrastext.methods.uctopic.sources import wiki_pages_dataset

    settings = config.pretrain
    if not settings.documents:
        pages, source = wiki_pages_dataset(settings)
        return positive_pair_dataset(pages, keep_probability=settings.keep_probability,
                                     max_pairs_per_key=settings.max_pairs_per_key, by_mention=settings.by_mention,
                                     seed=config.seed, min_sentence_words=settings.min_sentence_words), source
    from contrastext.data.paths import data_root
    from contrastext.methods.uctopic.text_mentions import (
        documents_dataset,
        fit_phrase_vocabulary,
        mentions_of_batch,
        sample_documents,
    )

    root = data_root(settings.data_dir)
    # the workers may not share the driver's working directory
    data_dir = root if isinstance(root, str) and storage.is_uri(root) else str(Path(root).expanduser().resolve())
    vocabulary = (fit_phrase_vocabulary(sample_documents(settings.documents, settings.vocabulary_documents, data_dir))
                  if settings.npmi_phrases else [])
    _say(f"phrases: named spans{f' and {len(vocabulary):,} NPMI phrases' if settings.npmi_phrases else ''}")
    documents = documents_dataset(settings.documents, data_dir)
    if settings.max_pages:
        documents = documents.limit(settings.max_pages)
    mentions = documents.map_batches(mentions_of_batch, batch_format="pyarrow", fn_kwargs={
        "vocabulary": vocabulary, "min_sentence_words": settings.min_sentence_words}).materialize()
    built = mention_pair_dataset(mentions, keep_probability=settings.keep_probability,
                                 max_pairs_per_key=settings.max_pairs_per_key, by_mention=False, seed=config.seed)
    return built, " + ".join(describe(s) for s in settings.documents)


def run_finetune(config: UCTopicConfig) -> dict[str, Any]:
    from contrastext.methods.epochs import run_epochs
    from contrastext.methods.uctopic.ccl import START_SCORE, CCLEpochs, choose_start
    from contrastext.methods.uctopic.sources import load_phrase_source
    from contrastext.methods.uctopic.topics import cluster_phrases
    from contrastext.runtime import init_ray

    timings = Timings()
    output = _stage_output(config)
    run_dir = output.run_dir()
    stage = training_stage(config, run_dir)
    done = finished_summary(stage)
    if done is not None:
        return done
    stage.begin(run_dir)  # the fits train in the stage's folder: only an attempt with these settings resumes them
    settings = config.finetune
    candidates = stage.settings["finetune"]["start_candidates"]  # resolved once, for the stage's marker
    loaded = load_phrase_source(settings.data, config.seed)
    instances = loaded.instances
    gold = [inst.label for inst in instances] if all(inst.label for inst in instances) else None
    encoded: dict[str, np.ndarray] = {}

    def encode(model: str) -> np.ndarray:
        if model not in encoded:  # `model`'s vectors (k, the start choice's anchor, epoch 0) and the latest
            with storage.local_copy(model) if storage.is_uri(model) else nullcontext(model) as folder:
                for other in [m for m in encoded if m != config.model]:
                    del encoded[other]
                encoded[model] = _encode(_load_encoder(str(folder), config), instances, config, "phrase instances")
        return encoded[model]

    topics = settings.topics
    k = topics.n_topics
    silhouette_by_k = None
    if k == "auto":
        clustering = cluster_phrases(encode(config.model), "auto", k_min=topics.k_min, k_max=topics.k_max,
                                     seed=config.seed, nredo=config.evaluation.nredo)
        k, silhouette_by_k = clustering.k, clustering.silhouette_by_k
    timings["cluster"] = stage.seconds
    start, start_rows = config.model, None
    if candidates:
        start, start_rows = choose_start(instances, list(dict.fromkeys([config.model, *candidates])),
                                         int(k), encode, gold=gold, seed=config.seed, nredo=config.evaluation.nredo)
        for row in start_rows:
            _say(_start_line(row, start))
        _say(f"CCL starts from {start} (best {START_SCORE} of {len(start_rows)} candidates, anchored to "
             f"{config.model})")
        timings["start_choice"] = stage.seconds - timings["cluster"]
    runner = CCLEpochs(instances, start, int(k), encode=encode, train=_ccl_trainer(config, run_dir),
                       make_pairs=_ccl_pair_maker(config, instances, gold), gold=gold, seed=config.seed,
                       nredo=config.evaluation.nredo, min_loss=settings.min_loss)
    if settings.epochs:
        init_ray(config.ray)
    with timings.measure("epochs"):
        outcome = run_epochs(runner, settings.epochs, settings.select_by)  # type: ignore[arg-type]
    epochs, chosen = outcome.rows, outcome.chosen
    for row in epochs:
        _say(_epoch_line(row, chosen))
    if outcome.stopped:
        _say(f"CCL stopped at {outcome.stopped}; the best of the epochs run is delivered")
    dropped = _clear_dropped_fit(outcome.dropped, run_dir)
    trained = [*epochs, dropped] if dropped else epochs  # what was trained, the fit left out included
    oracle = max(epochs, key=lambda r: r["gold_nmi"]) if gold else None
    delivered = _publish(chosen["model"], storage.join(run_dir, "model"), config)
    ran = len(epochs) - 1
    _say(f"delivers epoch {chosen['epoch']} (best {settings.select_by} of the start model and "
         f"{ran} CCL epoch{'s' * (ran != 1)}): {delivered}")
    before = _gold_row(epochs[0])
    after, chosen_scores = _gold_row(epochs[-1]), _gold_row(chosen)
    extra_before = extra_after = None
    same_eval = config.evaluation.conll and config.evaluation.conll == settings.data.conll
    if config.evaluation.conll and not same_eval and config.evaluation.before:
        extra_before = entity_clustering(_load_encoder(config.model, config), config.evaluation, config)
    with storage.local_copy(delivered) as folder:  # the published copy: a folder or a URI, never a spec
        tuned = _load_encoder(str(folder), config)
        if config.evaluation.conll and not same_eval:
            extra_after = entity_clustering(tuned, config.evaluation, config)
        _, mined = _mine_topics(tuned, instances, encode(chosen["model"]), topics.model_copy(update={"n_topics": k}),
                                loaded.extractor, config.seed)
    topic_rows, quality = topic_report(mined, instances)
    timings["total"] = stage.seconds
    last = epochs[-1]
    summary = {"stage": "finetune", "source": loaded.source, "counts": loaded.counts, "k": k,
               "silhouette_by_k": silhouette_by_k, "central_fraction": settings.central_fraction,
               "select_by": settings.select_by, "start_model": start,
               "start_candidates": [_json_row(r) for r in start_rows] if start_rows else None,
               "epochs": [_json_row(r) for r in epochs],
               "chosen_epoch": chosen["epoch"], "oracle_epoch": oracle["epoch"] if oracle else None,
               "stopped": outcome.stopped, "dropped_fit": dropped,
               "pairs": sum(r.get("pairs", 0) for r in trained), "steps": sum(r.get("steps", 0) for r in trained),
               "final_loss": last.get("last_loss"), "labelled_instances": last.get("labelled_instances", 0),
               "pseudo_label_acc": last.get("pseudo_label_acc"),
               "clustering_before": before, "clustering_after": after, "clustering_delivered": chosen_scores,
               "entity_clustering_before": extra_before, "entity_clustering_after": extra_after,
               "topics": topic_rows, "topic_quality": quality, "model_path": delivered, "timings_s": timings}
    table = [["phrase source", loaded.source], ["phrase instances", len(instances)], ["topics k", k],
             ["CCL epochs run / pairs / optimiser steps", f"{ran}{' (+1 fit left out)' if dropped else ''} / "
                                                          f"{summary['pairs']:,} / {summary['steps']}"],
             [f"delivered (by {settings.select_by})", f"epoch {chosen['epoch']}"
                                                     + (" (the start model)" if chosen["epoch"] == 0 else "")]]
    if before and after:
        for metric in ("nmi", "acc"):
            table.append([f"{metric.upper()} start → last epoch → delivered",
                          f"{before[metric]:.4f} → {after[metric]:.4f} → {chosen_scores[metric]:.4f}"])
    table += [[f"epoch {row['epoch']}", _epoch_line(row, chosen).split(", ", 1)[-1]] for row in epochs]
    table += _entity_rows(extra_before, extra_after, config.evaluation)
    table += [["informativeness / diversity", f"{quality['informativeness']:.3f} / {quality['diversity']:.3f}"],
              ["time (s): epochs / total", f"{timings['epochs']:.1f} / {timings['total']:.1f}"],
              ["model", delivered]]
    summary = _finish(config, run_dir, summary, table,
                      counts={"instances": len(instances), "pairs": summary["pairs"], "steps": summary["steps"]},
                      timings=timings, inputs=_checksums([settings.data.conll, config.evaluation.conll]),
                      topics=topic_rows)
    stage.mark_done()
    return summary


def _clear_dropped_fit(dropped: dict[str, Any] | None, run_dir: str) -> dict[str, Any] | None:
    """Removes the model and checkpoints of the CCL fit left out where the epochs stopped (nothing may deliver
    or start from it); returns its record for the summary."""
    if not dropped:
        return None
    checkpoints, model = _ccl_fit_folders(run_dir, dropped["epoch"])
    for folder in (checkpoints.run_dir(), storage.parent(model)):
        storage.delete(folder)
    return {key: value for key, value in dropped.items() if key != "model"}


def _ccl_fit_folders(run_dir: str, epoch: int) -> tuple[OutputConfig, str]:
    """Where epoch ``epoch``'s CCL fit keeps its checkpoints (``train/epoch_NNN``) and exports its model
    (``epochs/epoch_NNN/model``)."""
    name = f"epoch_{epoch:03d}"
    checkpoints = OutputConfig(storage_path=storage.join(run_dir, "train"), name=name)
    return checkpoints, storage.join(run_dir, "epochs", name, "model")


def _ccl_pair_maker(config: UCTopicConfig, instances: Sequence[PhraseInstance], gold: Sequence[str] | None):
    """``(epoch, embeddings, clusters) -> (rows, stats)``: the central instances' pseudo labels and CCL pairs."""
    from contrastext.methods.uctopic.topics import ccl_pairs, ccl_pseudo_labels

    settings = config.finetune

    def make_pairs(epoch: int, embeddings: np.ndarray, clusters) -> tuple[list[dict], dict[str, Any]]:
        pseudo = ccl_pseudo_labels(instances, embeddings, clusters, settings.central_fraction)
        rows = ccl_pairs(instances, pseudo, pairs_per_instance=settings.pairs_per_instance,
                         positives=settings.positives, mask_keep_probability=settings.mask_keep_probability,
                         seed=config.seed + epoch)
        labelled = pseudo.instance_topics >= 0
        stats = {"pairs": len(rows), "labelled_instances": int(labelled.sum()),
                 "labelled_mentions": pseudo.labelled_mentions}
        if gold is not None and labelled.any():
            stats["pseudo_label_acc"] = gold_scores([g for g, m in zip(gold, labelled) if m],
                                                    pseudo.instance_topics[labelled])["acc"]
        return rows, stats

    return make_pairs


def _ccl_trainer(config: UCTopicConfig, run_dir: str):
    """``(epoch, start model, rows) -> (model, record)``: one CCL fit on Ray Train, its checkpoints under
    ``train/epoch_NNN`` and its model in ``epochs/epoch_NNN/model``."""
    import pyarrow as pa
    import ray.data

    from contrastext.methods.uctopic.objective import PhraseObjective  # noqa: F401 -- registers the "phrase" objective
    from contrastext.train import fit

    def train(epoch: int, start_model: str, rows: list[dict]) -> tuple[str, dict[str, Any]]:
        train_config = config.model_copy(update={"model": start_model}).train_config()
        output, model = _ccl_fit_folders(run_dir, epoch)
        result = fit(ray.data.from_arrow(pa.Table.from_pylist(rows)), train_config, output, rows=len(rows),
                     export_model_to=model)
        return result.model_path, {"steps": result.steps, "loss": result.mean_loss, "last_loss": result.last_loss,
                                   "train_s": result.seconds}

    return train


MODEL_FILES = ("modules.json", "config.json")  # a sentence-transformers folder, or a plain Hugging Face one


def start_candidates(entries: Sequence[str]) -> list[str]:
    """The models of ``finetune.start_candidates``: a model as given (a spec or a model folder), or a run
    folder's model and checkpoints (every folder under it holding a model), in path order."""
    models = []
    for entry in entries:
        if not storage.is_dir(entry) or any(storage.is_file(storage.join(entry, name)) for name in MODEL_FILES):
            models.append(entry)
            continue
        st_models = {storage.folder_of(f) for f in storage.list_files(entry, "modules.json", recursive=True)}
        hf_models = {folder for folder in (storage.folder_of(f) for f in storage.list_files(entry, "config.json",
                                                                                              recursive=True))
                     if not any(folder == m or folder.startswith(m.rstrip("/") + "/") for m in st_models)}
        found = sorted(st_models | hf_models)  # a module's config.json inside a model folder is not a model
        if not found:
            raise InputError(f"finetune.start_candidates: {entry} holds no model (no modules.json or config.json "
                             "under it)")
        models += found
    return list(dict.fromkeys(models))


def _start_line(row: dict[str, Any], chosen: str) -> str:
    gold = f", gold NMI {row['gold_nmi']:.3f}" if "gold_nmi" in row else ""
    mark = "  <- starts CCL" if row["model"] == chosen else ""
    return (f"start candidate {row['candidate']} {row['model']}: silhouette {row['silhouette']:.3f}, "
            f"anchored {row['anchored_silhouette']:.3f}{gold}{mark}")


def _publish(model: str, destination: str, config: UCTopicConfig) -> str:
    """The delivered model into the stage's ``model/`` (the start model too, so the next stage names one folder),
    saved with the phrase vectors it was scored with."""
    from contrastext.models.resolve import resolve_model_path

    source = model if storage.is_uri(model) else str(
        resolve_model_path(model, allow_download=config.train.encoder.allow_download))
    storage.copy_tree(source, destination)
    _stamp_phrase_vectors(destination, config)
    return destination


def _stamp_phrase_vectors(model_folder: str, config: UCTopicConfig) -> None:
    """A stage's model folder says the phrase vectors the stage scored it with (later stages, ``predict`` and
    Serve read them from there)."""
    from contrastext.methods.uctopic.encoder import PHRASE_CONFIG, phrase_layout

    storage.write_json(storage.join(model_folder, PHRASE_CONFIG), phrase_layout(config.phrase_vectors))


def _gold_row(row: dict[str, Any]) -> dict[str, float] | None:
    return {m: row[f"gold_{m}"] for m in ("nmi", "acc", "ami")} if "gold_nmi" in row else None


def _json_row(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "model"} | {"model": row["model"]}


def _epoch_line(row: dict[str, Any], chosen: dict[str, Any]) -> str:
    from contrastext.methods.uctopic.ccl import SCORE_KEYS

    parts = [f"epoch {row['epoch']}" + (" (delivered)" if row is chosen else "")]
    if row.get("loss") is not None:
        parts.append(f"loss {row['loss']:.4f}")
    parts += [f"{key} {row[key]:.4f}" for key in SCORE_KEYS if row.get(key) is not None]
    if row.get("start_agreement") is not None and row["epoch"] > 0:
        parts.append(f"agreement with the start's clusters (ARI) {row['start_agreement']:.3f}")
    if "gold_nmi" in row:
        parts.append(f"NMI {row['gold_nmi']:.4f} (gold, reported only)")
    return ", ".join(parts)


def run_mine(config: UCTopicConfig) -> dict[str, Any]:
    from contrastext.methods.uctopic.sources import load_phrase_source

    timings = Timings()
    run_dir = _stage_output(config).run_dir()
    settings = config.mine
    with timings.measure("extract"):
        loaded = load_phrase_source(settings.data, config.seed)
    _say(f"{loaded.counts.get('instances', 0):,} phrase instances ({loaded.extractor}) from {loaded.source}")
    encoder = _load_encoder(config.model, config)
    with timings.measure("encode"):
        embeddings = _encode(encoder, loaded.instances, config, "phrase instances")
    with timings.measure("cluster"):
        clustering, mined = _mine_topics(encoder, loaded.instances, embeddings, settings.topics, loaded.extractor,
                                         config.seed)
    topic_rows, quality = topic_report(mined, loaded.instances)
    if settings.plot:
        from contrastext import plots

        sample = np.random.default_rng(config.seed).permutation(len(embeddings))[:3000]
        points = plots.project_2d(embeddings[sample], "pca", seed=config.seed)
        _write_figure(run_dir, "topics_pca.png", lambda path: plots.scatter_2d(
            points, clustering.result.assignments[sample], path, f"phrase instances by topic (k={clustering.k})"))
    timings.total()
    summary = {"stage": "mine", "source": loaded.source, "model": config.model, "extractor": loaded.extractor,
               "counts": loaded.counts, "n_topics": clustering.k, "silhouette": clustering.silhouette,
               "silhouette_by_k": clustering.silhouette_by_k, "topics": topic_rows, "topic_quality": quality,
               "phrase_topics": mined.phrase_topics, "timings_s": timings}
    distinct = loaded.counts.get("distinct_phrases", "-")
    table = [["documents", loaded.source], ["phrase instances / distinct", f"{len(loaded.instances):,} / {distinct}"],
             ["phrase extractor", loaded.extractor], ["topics (k)", clustering.k],
             ["silhouette", clustering.silhouette if clustering.silhouette is not None else "-"],
             ["informativeness (mean tf-idf)", quality["informativeness"]],
             ["word diversity (per topic / all topics)",
              f"{quality['diversity']:.3f} / {quality['diversity_all_topics']:.3f}"],
             ["time (s): encode / total", f"{timings['encode']:.1f} / {timings['total']:.1f}"]]
    return _finish(config, run_dir, summary, table, counts={"instances": len(loaded.instances),
                                                            "topics": clustering.k},
                   timings=timings, inputs=_checksums([settings.data.documents.path if settings.data.documents else None,
                                                      settings.data.conll]),
                   topics=topic_rows)


def run_evaluate(config: UCTopicConfig) -> dict[str, Any]:
    timings = Timings()
    if not config.evaluation.conll:
        raise ValueError("stage 'evaluate' needs evaluation.conll (a CoNLL-style file)")
    run_dir = _stage_output(config).run_dir()
    scores = entity_clustering(_load_encoder(config.model, config), config.evaluation, config)
    timings.total()
    summary = {"stage": "evaluate", "model": config.model, "conll": config.evaluation.conll,
               "labels": config.evaluation.labels, "entity_clustering": scores, "timings_s": timings}
    table = [["model", config.model], ["entities", scores["instances"]], ["k", scores["k"]],
             ["NMI", scores["nmi"]], ["ACC", scores["acc"]], ["AMI", scores["ami"]]]
    return _finish(config, run_dir, summary, table, counts={"instances": scores["instances"]}, timings=timings,
                   inputs=_checksums([config.evaluation.conll]))


RUNNERS = {"pretrain": run_pretrain, "finetune": run_finetune, "mine": run_mine, "evaluate": run_evaluate}


def run_uctopic(config: UCTopicConfig) -> dict[str, Any]:
    return RUNNERS[config.stage](config)


# ------------------------------------------------------------------------------ helpers

@dataclass
class WrittenPairs:
    masked: int = 0  # masked mentions, two per pair
    by_source: Counter = field(default_factory=Counter)  # pairs by what they share: target, mention


def _write_pairs(pairs, location: str) -> WrittenPairs:
    """The pairs dataset into one parquet file, a batch at a time, with what the report says about them.

    Written under a temporary name, then moved into place.
    """
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    filesystem, path = storage.resolve(location)
    filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
    temporary = f"{path}.tmp-{time.time_ns()}"
    written = WrittenPairs()
    writer = None
    try:
        for batch in pairs.iter_batches(batch_size=8192, batch_format="pyarrow"):
            writer = writer or pq.ParquetWriter(temporary, batch.schema, filesystem=filesystem)
            writer.write_table(batch)
            written.masked += sum(pc.sum(batch.column(c)).as_py() or 0 for c in ("anchor_mask", "positive_mask"))
            sources = pc.list_element(pc.split_pattern(batch.column("key"), ":", max_splits=1), 0)
            for count in pc.value_counts(sources).to_pylist():
                written.by_source[count["values"]] += count["counts"]
    finally:
        if writer is not None:
            writer.close()
    filesystem.move(temporary, path)
    return written


def _checksums(paths: Sequence[str | None]) -> dict[str, str]:
    """sha256 of each local input file; size and modification time of one on a store."""
    return {p: storage.file_signature(p) for p in dict.fromkeys(paths) if p and storage.is_file(p)}


def _write_figure(run_dir: str, name: str, draw) -> None:
    """``draw(local_path)`` into the run folder; for a URI run folder, into a temporary file then uploaded."""
    if not storage.is_uri(run_dir):
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        draw(Path(run_dir) / name)
        return
    with tempfile.TemporaryDirectory(prefix="uctopic-plot-") as tmp:
        local = Path(tmp) / name
        draw(local)
        storage.upload_file(local, storage.join(run_dir, name))


def _stage_settings(config: UCTopicConfig) -> dict[str, Any]:
    """What a training stage's outputs depend on: the model, its own settings, training, evaluation."""
    dumped = config.model_dump(mode="json")
    train = {k: v for k, v in dumped["train"].items() if k not in _RUN_ONLY_TRAIN_SETTINGS}
    stage = dumped[config.stage]
    if config.stage == "finetune" and config.finetune.start_candidates:
        # the models a run folder stands for now: a checkpoint added since makes the stage run again
        stage = {**stage, "start_candidates": start_candidates(config.finetune.start_candidates)}
    return {"model": config.model, "max_length": config.max_length, "seed": config.seed,
            config.stage: stage, "train": train, "evaluation": dumped["evaluation"]}


def training_stage(config: UCTopicConfig, run_dir: str) -> Stage:
    """The stage ``config.stage`` writing into ``run_dir``: its marker compares the settings its outputs depend on."""
    return Stage("uctopic", config.stage, run_dir, _stage_settings(config))


def finished_summary(stage: Stage) -> dict[str, Any] | None:
    """The summary of this stage when an earlier run finished it with the same settings; None: run it."""
    metrics = storage.join(stage.folder, "metrics.json")
    if not (storage.is_file(stage.marker) and storage.is_file(metrics)) or stage.finished() is None:
        return None
    summary = storage.read_json(metrics)
    summary["run_dir"] = stage.folder
    return summary


def _entity_rows(before: dict | None, after: dict | None, settings: EntityEvalSettings) -> list[list[Any]]:
    if not before and not after:
        return []
    name = storage.name(settings.conll) if settings.conll else "entities"
    rows = []
    for metric in ("nmi", "acc"):
        b = f"{before[metric]:.4f}" if before else "-"
        a = f"{after[metric]:.4f}" if after else "-"
        rows.append([f"{name} entity {metric.upper()} (k={(before or after)['k']}) before → after", f"{b} → {a}"])
    return rows


def _finish(config: UCTopicConfig, run_dir: str, summary: dict[str, Any], table_rows: list[list[Any]], *,
            counts: dict[str, Any], timings: dict[str, float], inputs: dict[str, str],
            topics: list[dict] | None = None) -> dict[str, Any]:
    table = format_table(table_rows, headers=[f"uctopic {config.stage}", "value"])
    write_json_atomic(storage.join(run_dir, "metrics.json"), summary)
    lines = [f"# UCTopic {config.stage}", "", "```", table, "```", ""]
    if topics:
        lines += ["## Topics", ""] + _topics_markdown(topics) + [""]
    storage.write_bytes(storage.join(run_dir, "report.md"), "\n".join(lines).encode("utf-8"))
    write_manifest(run_dir, job=f"uctopic.{config.stage}", config=config, counts=counts, timings=timings,
                   inputs=inputs)
    print(table)
    if topics:
        print()
        print(format_table([[r["topic"], r["size"], ", ".join(r["phrases"])] for r in topics],
                           headers=["topic", "instances", "top phrases"]))
    summary["run_dir"] = run_dir
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    """``jobs/uctopic.py STAGE [--config x.yaml] [--set key=value ...] [--print-config]``."""
    from contrastext.cli import add_config_args, run_job

    parser = argparse.ArgumentParser(prog="jobs/uctopic", description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=STAGES, nargs="?", help="what to run (default: the config's stage)")
    add_config_args(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args.overrides = list(args.overrides) + ([f"stage={args.stage}"] if args.stage else [])
    return run_job("uctopic", args)
