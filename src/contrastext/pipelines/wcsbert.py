"""WC-SBERT end to end: Wikipedia category pairs → pretraining → encoded pool → self-training rounds →
zero-shot evaluation → report.

Every stage writes its output under ``<output.storage_path>/<output.name>/`` and a ``done.json`` marker
last (``contrastext.stages``); a stage whose marker is there (and whose settings match) is skipped, so an
interrupted run goes on from the first unfinished stage, and the training and encoding stages also resume
inside themselves. The stages are the method's (``contrastext.methods.wcsbert``: ``category_pretraining``,
``stored_rounds``, ``evaluation``, ``report``); this module builds the corpus and encodes the pool through the
corpus job, and puts the stages in order.

    corpus/                  pages + category pairs (build_corpus)            [Wikipedia pretraining or pool]
    pretrain/model/          M_0: M_base after MNR on category pairs          [pretrain.enabled]
    pool/pages.parquet       a plain-text pool in the pages layout            [pool.source=texts]
    round_0/embeddings/      the pool encoded by M_0 (.h5 shards)
    round_<r>/pairs/         pseudo-pairs chosen with M_<r-1> (parquet files)
    round_<r>/model/         M_r
    round_<r>/embeddings/    the pool encoded by M_r                          [rounds.reencode]
    <untrained, pretrain, round_<r>>/evaluation/   eval_<name>.json: a model on the evaluation set
    eval_final.json, metrics.json, manifest.json, report.md, plots/
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from contrastext import storage
from contrastext.config import OutputConfig
from contrastext.data.paths import data_root
from contrastext.data.sources import LabelledTexts, load_texts
from contrastext.manifest import write_json_atomic, write_manifest
from contrastext.methods.wcsbert.category_pretraining import (
    pretrain_settings,
    pretrain_stage,
    pretrained_model_is_used,
)
from contrastext.methods.wcsbert.config import WCSBertConfig
from contrastext.methods.wcsbert.evaluation import (
    final_evaluation,
    label_scheme,
    load_eval_set,
    scored,
    untrained_evaluations,
)
from contrastext.methods.wcsbert.guard import guard_fields
from contrastext.methods.wcsbert.heads import BLEND_WEIGHT, head_kind
from contrastext.methods.wcsbert.job_run import JOB, JobRun
from contrastext.methods.wcsbert.read_length import settle_read_length
from contrastext.methods.wcsbert.report import summary_table
from contrastext.methods.wcsbert.stored_rounds import self_train
from contrastext.runtime import init_ray
from contrastext.stages import Stage, Timings, fingerprint, say


def _say(message: str) -> None:
    say(JOB, message)


def method_of(config: WCSBertConfig):
    """The job's ``WCSBert``: its teacher, calibration, selection, prompts and a round's training from the
    config. The job runs each round's pseudo-labelling and training through it, around the pool on ``.h5``
    shards and the pairs that Ray Data writes (the class holds its texts in memory)."""
    from contrastext.methods.wcsbert.model import WCSBert

    rounds = config.rounds
    settings = rounds.model_copy(update={
        "text_positives": config.text_positives(),
        "train": rounds.train.model_copy(update={"encoder": config.encoder.at_length(
            rounds.train.encoder.max_length)})})
    return WCSBert(config.encoder.model, config=settings, templates=config.labels.prompts,
                   max_length=config.encoder.max_length, batch_size=config.encode.batch_size)


# ---------------------------------------------------------------------------------------- stages
def _stage_corpus(config: WCSBertConfig, run: str) -> dict[str, Any]:
    from contrastext.pipelines.corpus import BuildCorpusConfig, run_build_corpus

    stage = Stage(JOB, "corpus", storage.join(run, "corpus"), config.corpus.model_dump(mode="json"))
    done = stage.finished()
    if done is not None:
        return done["result"]
    summary = run_build_corpus(BuildCorpusConfig(
        dump=config.corpus.dump, index=config.corpus.index, pages_table=config.corpus.pages_table,
        pairs=config.corpus.pairs,
        output=OutputConfig(storage_path=run, name="corpus"), ray=config.ray), table=False)
    stage.say(f"{summary['pages']} pages, {summary['pages_with_2_categories']} with 2+ categories, "
              f"{summary['pairs_written']} category pairs")
    keep = ("pages", "pages_with_2_categories", "distinct_categories", "pairs_written")
    return stage.mark_done({k: summary[k] for k in keep} | {"input": summary["input"]})


#: fewer pool texts than this per label leave some label without confident items to train on
MIN_POOL_TEXTS_PER_LABEL = 5


def _pool_pages(config: WCSBertConfig, run: str, root: Path) -> tuple[str, int]:
    """The job's pool as a pages table and its size: the corpus's pages for a Wikipedia pool (size -1: known once
    encoded), else ``pool.texts`` (its half and sample; labels never read) written under ``run/pool``."""
    from contrastext.methods.wcsbert.pool import write_text_pool

    if config.pool.source == "wikipedia":
        return storage.join(run, "corpus", "pages"), -1
    assert config.pool.texts is not None
    texts_config = config.pool.texts.model_copy(update={"label_column": None})  # labels are never read
    data: LabelledTexts = load_texts(texts_config, root)
    if config.pool.half is not None:
        first, second = data.split_halves(config.pool.split_seed)
        data = first if config.pool.half == "first" else second
    if config.pool.max_rows is not None and len(data) > config.pool.max_rows:
        rows = np.random.default_rng(config.pool.split_seed + 2).choice(len(data), config.pool.max_rows, replace=False)
        data = data.subset(sorted(rows))
    check_pool_size(len(data), len(config.labels.names))
    return write_text_pool(data.texts, storage.join(run, "pool", "pages.parquet")), len(data)


def check_pool_size(texts: int, labels: int) -> None:
    """Fail, naming what to change, when the pool is too small for the labels."""
    needed = MIN_POOL_TEXTS_PER_LABEL * labels
    if texts < needed:
        raise ValueError(f"the pool has {texts} texts for {labels} labels: self-training needs at least {needed} "
                         f"({MIN_POOL_TEXTS_PER_LABEL} per label); give pool.texts more rows or raise pool.max_rows")


def _encode_pool(config: WCSBertConfig, pages: str, model: str, out: str,
                 made_with: str | None = None) -> dict[str, Any]:
    """The pool encoded by ``model`` into ``out`` (a stage; ``made_with``: the fingerprint of the settings
    that made the model, None for a named one)."""
    from contrastext.pipelines.corpus import EncodeCorpusConfig, run_encode_corpus

    stage = Stage(JOB, f"{storage.name(storage.parent(out))} embeddings", out, {
        "model": model, "made_with": made_with, "pages": str(pages), "max_words": config.pool.max_words,
        "encode": config.encode.model_dump(mode="json"), "max_length": config.encoder.max_length})
    done = stage.finished()
    if done is not None:
        return done["result"]
    storage.delete(out)  # shards of another model or plan must not be mixed in
    enc = config.encoder
    summary = run_encode_corpus(EncodeCorpusConfig(
        pages=str(pages), encoder=enc.at_length(enc.max_length).model_copy(update={"model": model}),
        max_words=config.pool.max_words,
        rows_per_shard=config.encode.rows_per_shard, batch_size=config.encode.batch_size,
        scaling=config.encode.scaling, dtype=config.encode.dtype,
        output=OutputConfig(storage_path=storage.parent(out), name=storage.name(out)), ray=config.ray), table=False)
    return stage.mark_done({"rows": summary["rows"], "seconds": summary["timings_s"]["total"]})


def run_wcsbert(config: WCSBertConfig) -> dict[str, Any]:
    """Run every stage (skipping finished ones) and return the summary (also in ``metrics.json``)."""
    timings = Timings()
    folder = config.output.run_dir()
    storage.check_writable(folder)
    root = data_root(config.data_dir)
    init_ray(config.ray)
    label_set = label_scheme(config).label_set(config.labels.names)
    pages, pool_texts = _pool_pages(config, folder, root)  # a bad pool fails here, before any training
    if pool_texts >= 0:
        _say(f"pool: {pool_texts} texts (labels never read)")
    corpus = None
    if config.pretrain.enabled or config.pool.source == "wikipedia":  # a Wikipedia pool is the corpus's pages
        with timings.measure("corpus"):
            corpus = _stage_corpus(config, folder)
    config, read_tokens = settle_read_length(config, pages)
    if read_tokens["asked"] == "auto":
        _say(f"reading {read_tokens['tokens']} tokens of each text (encoder.max_length=auto: the pool's median "
             f"text is {read_tokens['median_tokens']:.0f} tokens)")
    eval_set, eval_missing = load_eval_set(config, root)
    _say(f"evaluation skipped: {eval_missing}" if eval_set is None else f"evaluation set: {eval_set.source}")
    run = JobRun(config, folder, label_set, pages, eval_set, timings, method=method_of(config),
                 encode_pool=partial(_encode_pool, config, pages))

    evaluations = untrained_evaluations(run)
    pretrain, model_0 = _pretraining(run, evaluations)
    made_with = fingerprint(pretrain_settings(config)) if pretrain and pretrain["used"] else None
    with timings.measure("encode"):
        encoded = _encode_pool(config, pages, model_0, run.path("round_0", "embeddings"), made_with)
    _say(f"pool: {encoded['rows']} items encoded with {model_0}")
    with timings.measure("rounds"):
        outcome, guard_0 = self_train(run, model_0, made_with)
    rounds, stop, head = outcome.records, outcome.stop, outcome.head
    best_round, final_model = outcome.chosen_round, outcome.model.model
    delivered = _deliver(run, final_model, head)
    final = None
    if eval_set is not None:
        with timings.measure("final_evaluation"):
            final = final_evaluation(run, final_model, rounds, best_round, head)
    timings.total()
    labels = config.labels
    summary = {
        "evaluation_set": eval_set.source if eval_set else None, "evaluation_skipped": eval_missing or None,
        "labels": labels.names, "template": labels.pair_template, "templates": list(labels.prompts),
        "pool": config.pool.source, "read_tokens": read_tokens,
        "corpus": corpus, "pretrain": pretrain, "pool_rows": encoded["rows"], "evaluations": evaluations,
        "rounds": rounds, "stop_reason": stop.reason, "chosen_round": best_round, "final_model": final_model,
        "chosen_head": head_kind(head),
        "delivered": delivered, "backend": config.encoder.backend,
        "guard_round_0": guard_0.value if guard_0 is not None else None,
        "guard_round_0_parts": guard_fields(guard_0) if guard_0 is not None else None,
        "final": final, "timings_s": run.timings,
    }
    write_json_atomic(run.path("metrics.json"), summary)
    write_manifest(folder, job="wcsbert_selftrain", config=config, timings=run.timings,
                   counts={"pool_rows": encoded["rows"], "rounds": len(rounds),
                           "pairs": [r["pairs"] for r in rounds]})
    from contrastext.methods.wcsbert.report import write_report

    write_report(folder, summary, plots=config.plots)
    print(summary_table(summary), flush=True)
    return summary


def _pretraining(run: JobRun, evaluations: list[dict[str, Any]]) -> tuple[Any, str]:
    """Stage 1: MNR pretraining on the corpus's category pairs; returns its summary and M_0, the model
    self-training starts from."""
    config = run.config
    pretrain = None
    model_0 = config.encoder.model
    if not config.pretrain.enabled:
        return pretrain, model_0
    with run.timings.measure("pretrain"):
        pretrain = pretrain_stage(config, run.folder)
    pretrain["used"] = pretrained_model_is_used(config.pretrain, pretrain)
    if pretrain["used"]:
        model_0 = pretrain["model"]
    else:
        _say(f"pretrain: dev MAP@3 {pretrain['dev_after'].get('map@3', float('nan')):.3f} does not beat the "
             f"untrained {pretrain['dev_before'].get('map@3', float('nan')):.3f}; self-training starts from "
             f"{config.encoder.model} (pretrain.use=if_dev_improves)")
    if run.eval_set is not None and pretrain["used"]:
        stored = scored(run, "pretrained", run.path("pretrain"), model_0, pretrain_settings(config))
        evaluations.append({"stage": "pretrained", "scheme": label_scheme(config).name,
                            "accuracy": stored["accuracy"], "macro_f1": stored["macro_f1"]})
        _say(f"after pretraining: accuracy {stored['accuracy']:.4f}")
    return pretrain, model_0


def _deliver(run: JobRun, final_model: str, head) -> str:
    """The kept model as a ``WCSBert`` folder at ``final/model``: the encoder, its labels and prompts and the
    head it predicts with (``head``: the guard's choice; None: the prompts'); what ``contrastext predict``,
    Serve and ``WCSBert.load`` read."""
    target = run.path("final", "model")
    label_set, prompts = run.label_set, list(run.config.labels.prompts)
    stage = Stage(JOB, "deliver", folder=run.path("final"), settings={
        "model": final_model, "labels": list(label_set.labels), "aliases": [list(a) for a in label_set.aliases],
        "prompts": prompts, "max_length": run.config.encoder.max_length,
        "head": head_kind(head), "blend_weight": BLEND_WEIGHT if head_kind(head) == "blend" else None})
    if stage.finished() is not None:
        return target
    method = run.method
    method.encoder_ = run.config.encoder.load(final_model)
    method.label_set_ = label_set
    method.aliases_ = {label: list(aliases) for label, aliases in zip(label_set.labels, label_set.aliases)}
    method.head_ = head
    if storage.on_local_disk(target):
        method.save(storage.resolve(target)[1])
    else:
        local = storage.scratch_dir("contrastext-deliver-")
        try:
            storage.copy_tree(method.save(local / "model"), target)
        finally:
            storage.remove_local(local)
    stage.mark_done()
    stage.say(f"{target} (from {final_model}, {method.head.kind} head); label a corpus with it: "
              f"contrastext predict --set model={target} --set input.path=...")
    return target
