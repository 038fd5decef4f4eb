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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from contrastext import storage
from contrastext.config import OutputConfig
from contrastext.manifest import write_json_atomic, write_manifest
from contrastext.report import format_table
from contrastext.stages import Stage, Timings, say
from contrastext.uctopic.config import EntityEvalSettings, TopicSettings, UCTopicConfig
from contrastext.uctopic.phrases import PhraseInstance

log = logging.getLogger(__name__)
STAGES = ("pretrain", "finetune", "mine", "evaluate")
# settings that change how a training stage runs, not what it produces
_RUN_ONLY_TRAIN_SETTINGS = ("scaling", "max_failures", "keep_checkpoints", "log_every_steps")


def _say(message: str) -> None:
    say("uctopic", message)


def _stage_output(config: UCTopicConfig) -> OutputConfig:
    return config.output.model_copy(update={"name": f"{config.output.name}-{config.stage}"})


def _load_encoder(spec: str, config: UCTopicConfig):
    from contrastext.uctopic.encoder import PhraseEncoder

    return PhraseEncoder.from_pretrained(spec, max_length=config.max_length, backend=config.train.encoder.backend,
                                         allow_download=config.train.encoder.allow_download)


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
    from contrastext.uctopic.sources import sample_instances
    from contrastext.uctopic.phrases import read_conll_entities

    if instances is None:
        instances = sample_instances(read_conll_entities(settings.conll, settings.labels), settings.max_instances,
                            config.seed)
    if embeddings is None:
        embeddings = _encode(encoder, instances, config, "entities")
    labels = [inst.label for inst in instances]
    k = settings.k or len(set(labels))
    result = spherical_kmeans(embeddings, k, seed=config.seed, nredo=settings.nredo)
    return {**gold_scores(labels, result.assignments), "k": k, "instances": len(instances)}


# ------------------------------------------------------------------------------ topics report

def topic_report(topics_result, instances: Sequence[PhraseInstance]) -> tuple[list[dict], dict[str, float]]:
    """Per topic: its top phrases, their informativeness (sentence tf-idf) and word diversity; and means."""
    from contrastext.uctopic.metrics import SentenceTfidf, word_diversity

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
    from contrastext.uctopic.service import PhraseTopicModel
    from contrastext.uctopic.topics import cluster_phrases

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
    from contrastext.runtime import init_ray
    from contrastext.train import fit
    from contrastext.uctopic.objective import PhraseObjective  # noqa: F401 -- registers the "phrase" objective
    from contrastext.uctopic.phrases import positive_pair_dataset
    from contrastext.uctopic.sources import wiki_pages_dataset

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
    pages, source = wiki_pages_dataset(settings)
    built = positive_pair_dataset(pages, keep_probability=settings.keep_probability,
                                  max_pairs_per_key=settings.max_pairs_per_key, by_mention=settings.by_mention,
                                  seed=config.seed, min_sentence_words=settings.min_sentence_words)
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
    _say(f"{link_mentions:,} link mentions → {rows:,} positive pairs from {keys:,} targets/mentions "
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
    rows_table = [["Wikipedia source", source], ["link mentions in sentences", link_mentions],
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


def run_finetune(config: UCTopicConfig) -> dict[str, Any]:
    import pyarrow as pa
    import ray.data

    from contrastext.clustering import spherical_kmeans
    from contrastext.runtime import init_ray
    from contrastext.train import fit
    from contrastext.uctopic.objective import PhraseObjective  # noqa: F401 -- registers the "phrase" objective
    from contrastext.uctopic.sources import load_phrase_source
    from contrastext.uctopic.topics import ccl_pairs, ccl_pseudo_labels, cluster_phrases

    timings = Timings()
    output = _stage_output(config)
    run_dir = output.run_dir()
    stage = training_stage(config, run_dir)
    done = finished_summary(stage)
    if done is not None:
        return done
    stage.begin(run_dir)  # the fit trains in the stage's folder: only an attempt with these settings resumes it
    settings = config.finetune
    loaded = load_phrase_source(settings.data, config.seed)
    instances = loaded.instances
    gold = [inst.label for inst in instances] if all(inst.label for inst in instances) else None
    encoder = _load_encoder(config.model, config)
    embeddings = _encode(encoder, instances, config, "phrase instances")
    topics = settings.topics
    clustering = cluster_phrases(embeddings, topics.n_topics, k_min=topics.k_min, k_max=topics.k_max,
                                 seed=config.seed, nredo=config.evaluation.nredo)
    k = clustering.k
    before = {**gold_scores(gold, clustering.result.assignments), "k": k} if gold else None
    pseudo = ccl_pseudo_labels(instances, embeddings, clustering.result, settings.central_fraction)
    rows = ccl_pairs(instances, pseudo, pairs_per_instance=settings.pairs_per_instance,
                     positives=settings.positives, mask_keep_probability=settings.mask_keep_probability,
                     seed=config.seed)
    if not rows:
        raise ValueError("no pseudo-labelled mentions to fine-tune on")
    labelled = pseudo.instance_topics >= 0
    pseudo_acc = (gold_scores([g for g, m in zip(gold, labelled) if m], pseudo.instance_topics[labelled])["acc"]
                  if gold else None)
    _say(f"k={k}: {pseudo.central:,} central instances → {pseudo.labelled_mentions:,} labelled mentions, "
         f"{int(labelled.sum()):,} instances, {len(rows):,} CCL pairs")
    timings["cluster"] = stage.seconds
    del encoder
    extra_before = None
    same_eval = config.evaluation.conll and config.evaluation.conll == settings.data.conll
    if config.evaluation.conll and config.evaluation.before and not same_eval:
        extra_before = entity_clustering(_load_encoder(config.model, config), config.evaluation, config)

    init_ray(config.ray)
    with timings.measure("train"):
        result = fit(ray.data.from_arrow(pa.Table.from_pylist(rows)), config.train_config(), output,
                     rows=len(rows), export_model_to=storage.join(run_dir, "model"))
    with storage.local_copy(result.model_path) as folder:
        tuned = _load_encoder(str(folder), config)
        after_embeddings = _encode(tuned, instances, config, "phrase instances")
        # each instance's topic: its nearest centroid among k on the fine-tuned vectors
        final = spherical_kmeans(after_embeddings, k, seed=config.seed, nredo=config.evaluation.nredo)
        after = {**gold_scores(gold, final.assignments), "k": k} if gold else None
        extra_after = (entity_clustering(tuned, config.evaluation, config)
                       if config.evaluation.conll and not same_eval else None)
        _, mined = _mine_topics(tuned, instances, after_embeddings, topics.model_copy(update={"n_topics": k}),
                                loaded.extractor, config.seed)
    topic_rows, quality = topic_report(mined, instances)
    timings["total"] = stage.seconds
    summary = {"stage": "finetune", "source": loaded.source, "counts": loaded.counts, "k": k,
               "silhouette_by_k": clustering.silhouette_by_k, "central_fraction": settings.central_fraction,
               "central_instances": pseudo.central, "labelled_mentions": pseudo.labelled_mentions,
               "labelled_instances": int(labelled.sum()), "pseudo_label_acc": pseudo_acc, "pairs": len(rows),
               "steps": result.steps, "final_loss": result.last_loss,
               "clustering_before": before, "clustering_after": after,
               "entity_clustering_before": extra_before, "entity_clustering_after": extra_after,
               "topics": topic_rows, "topic_quality": quality, "model_path": result.model_path,
               "timings_s": timings}
    table = [["phrase source", loaded.source], ["phrase instances", len(instances)], ["topics k", k],
             [f"pseudo-labelled instances (t={settings.central_fraction})", int(labelled.sum())],
             ["CCL pairs / optimiser steps", f"{len(rows):,} / {result.steps}"],
             ["final loss", summary["final_loss"] if summary["final_loss"] is not None else "-"]]
    if pseudo_acc is not None:
        table.append(["pseudo-label accuracy (labelled instances)", pseudo_acc])
    if before and after:
        for metric in ("nmi", "acc"):
            table.append([f"{metric.upper()} before → after CCL", f"{before[metric]:.4f} → {after[metric]:.4f}"])
    table += _entity_rows(extra_before, extra_after, config.evaluation)
    table += [["informativeness / diversity", f"{quality['informativeness']:.3f} / {quality['diversity']:.3f}"],
              ["time (s): train / total", f"{timings['train']:.1f} / {timings['total']:.1f}"],
              ["model", result.model_path or "-"]]
    summary = _finish(config, run_dir, summary, table,
                      counts={"instances": len(instances), "pairs": len(rows), "steps": result.steps},
                      timings=timings, inputs=_checksums([settings.data.conll, config.evaluation.conll]),
                      topics=topic_rows)
    stage.mark_done()
    return summary


def run_mine(config: UCTopicConfig) -> dict[str, Any]:
    from contrastext.uctopic.sources import load_phrase_source

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
    return {"model": config.model, "max_length": config.max_length, "seed": config.seed,
            config.stage: dumped[config.stage], "train": train, "evaluation": dumped["evaluation"]}


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
