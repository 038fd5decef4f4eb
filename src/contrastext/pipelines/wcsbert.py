"""WC-SBERT end to end: Wikipedia category pairs → pretraining → encoded pool → self-training rounds →
zero-shot evaluation → report.

Every stage writes its output under ``<output.storage_path>/<output.name>/`` and a ``done.json`` marker
last (``contrastext.stages``); a stage whose marker is there (and whose settings match) is skipped, so an
interrupted run goes on from the first unfinished stage, and the training and encoding stages also resume
inside themselves.

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

import hashlib
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from contrastext import storage
from contrastext.config import OutputConfig
from contrastext.data.paths import data_root
from contrastext.data.sources import LabelledTexts, describe, load_texts
from contrastext.evaluators.zeroshot_accuracy import LabelScheme, ZeroShotEvaluator, ZeroShotResult
from contrastext.manifest import write_json_atomic, write_manifest
from contrastext.methods.wcsbert.category_votes import PairsWritten, write_category_pairs
from contrastext.methods.wcsbert.config import PretrainConfig, WCSBertConfig
from contrastext.methods.wcsbert.guard import TRAINED_PROTOTYPE_MARGIN, guard_fields, guard_text
from contrastext.methods.wcsbert.heads import head_kind
from contrastext.methods.wcsbert.prototypes import (
    classify_by_prototypes,
    label_prototypes,
    pool_embeddings,
    refine_prototypes,
)
from contrastext.methods.wcsbert.pseudo_pairs import PseudoPairs, label_prompts, text_pairs
from contrastext.methods.wcsbert.rounds import RoundsOutcome, run_rounds
from contrastext.methods.wcsbert.scoring import changed_share, embed_label_strings, label_prompt_vectors, score_pool
from contrastext.methods.wcsbert.stopping import RoundStop
from contrastext.methods.wcsbert.text_positives import TextPositivesConfig, combined
from contrastext.report import format_table
from contrastext.runtime import init_ray
from contrastext.stages import Stage, Timings, fingerprint, say
from contrastext.vectors import unit_rows

# ---------------------------------------------------------------------------------------- stage state
# how many rounds to run and when to stop do not change what a finished round made
_NOT_PART_OF_A_ROUND = ("rounds", "patience", "min_change", "guard", "guard_sample", "guard_neighbours", "heads")
JOB = "wcsbert"


def _say(message: str) -> None:
    say(JOB, message)


def round_settings(config: WCSBertConfig, start_model: str, start_made_with: str | None = None) -> dict[str, Any]:
    """What a round's outputs depend on (its done-marker compares them); ``start_made_with``: the fingerprint
    of the settings that made ``start_model`` (None: a named model), so a round whose start model was made
    again with other settings runs again."""
    rounds = {k: v for k, v in config.rounds.model_dump(mode="json").items() if k not in _NOT_PART_OF_A_ROUND}
    rounds["text_positives"] = _text_positives(config).model_dump(mode="json")
    return {"rounds": rounds, "labels": config.labels.model_dump(mode="json"), "from": start_model,
            "from_made_with": start_made_with, "pool": config.pool.model_dump(mode="json")}


def _text_positives(config: WCSBertConfig) -> TextPositivesConfig:
    return config.rounds.text_positives.resolved(plain_texts=config.pool.source == "texts")


def method_of(config: WCSBertConfig):
    """The job's ``WCSBert``: its teacher, calibration, selection, prompts and a round's training from the
    config. The job runs each round's pseudo-labelling and training through it, around the pool on ``.h5``
    shards and the pairs that Ray Data writes (the class holds its texts in memory)."""
    from contrastext.methods.wcsbert.model import WCSBert

    rounds = config.rounds
    settings = rounds.model_copy(update={
        "text_positives": _text_positives(config),
        "train": rounds.train.model_copy(update={"encoder": config.encoder.model_copy(
            update={"max_length": rounds.train.encoder.max_length})})})
    return WCSBert(config.encoder.model, config=settings, templates=config.labels.prompts,
                   batch_size=config.encode.batch_size)


# ---------------------------------------------------------------------------------------- evaluation
@dataclass
class EvalSet:
    evaluator: ZeroShotEvaluator
    rows: int
    source: str


def _scheme(config: WCSBertConfig) -> LabelScheme:
    labels = config.labels
    return LabelScheme("prompt + aliases", labels.prompts, labels.aliases, labels.keep_label)


def load_eval_set(config: WCSBertConfig, root: Path) -> tuple[EvalSet | None, str]:
    ev = config.evaluation
    if ev.texts is None:
        return None, "no evaluation set configured"
    try:
        data = load_texts(ev.texts, root)
    except FileNotFoundError as error:
        return None, f"evaluation set not found ({error})"
    if ev.half is not None:
        first, second = data.split_halves(ev.split_seed)
        data = first if ev.half == "first" else second
    if ev.max_rows is not None and len(data) > ev.max_rows:
        rows = np.random.default_rng(ev.split_seed + 1).choice(len(data), ev.max_rows, replace=False)
        data = data.subset(sorted(rows))
    unknown = sorted(set(data.label_names) - set(config.labels.names))
    if unknown:
        raise ValueError(f"the evaluation set has labels {unknown} that are not in labels.names")
    label_ids = [config.labels.names.index(label) for label in data.labels or []]
    evaluator = ZeroShotEvaluator(data.texts, label_ids, config.labels.names, _scheme(config))
    half = f", {ev.half} half (seed {ev.split_seed})" if ev.half else ""
    # the fingerprint keeps evaluations stored by an earlier run from being reused for other texts
    fingerprint = hashlib.sha256("\n".join(data.texts).encode("utf-8")).hexdigest()[:12]
    return EvalSet(evaluator, len(data), f"{describe(ev.texts)}{half}, {len(data)} rows, texts {fingerprint}"), ""


def baseline_schemes(config: WCSBertConfig) -> list[LabelScheme]:
    """The untrained comparisons, each once: labels only or in the prompt; as written or with aliases."""
    labels = config.labels
    prompt = "prompt" if len(labels.prompts) == 1 else f"{len(labels.prompts)} prompts"
    only_labels = labels.prompts == ("{label}",)
    as_written = [LabelScheme(f"labels only, {len(labels.names)} labels", "{label}"),
                  LabelScheme(f"{prompt}, {len(labels.names)} labels", labels.prompts)]
    if not any(labels.aliases.values()):
        return as_written if not only_labels else as_written[:1]
    strings = len(_scheme(config).label_set(labels.names).flat()[0])
    with_aliases = [LabelScheme(f"labels only, {len(labels.names)} labels as {strings} strings", "{label}",
                                labels.aliases, labels.keep_label),
                    LabelScheme(f"{prompt}, {len(labels.names)} labels as {strings} strings", labels.prompts,
                                labels.aliases, labels.keep_label)]
    schemes = [as_written[0], with_aliases[0], as_written[1], with_aliases[1]]
    return schemes if not only_labels else schemes[:2]


#: an evaluation's text embeddings, kept beside its scores: the final evaluation of the same model reads them
EVAL_EMBEDDINGS = "eval_embeddings.npy"


def _evaluate(eval_set: EvalSet, encoder, out: str, name: str) -> ZeroShotResult:
    embeddings = eval_set.evaluator.embed(encoder)
    storage.write_npy(storage.join(out, EVAL_EMBEDDINGS), embeddings)
    result = eval_set.evaluator.score(encoder, embeddings)
    write_json_atomic(storage.join(out, f"eval_{name}.json"), _result_json(result, eval_set.evaluator.labels, eval_set.source))
    return result


def _evaluation(run: "_Run", name: str, folder: str, model: str, made_with: Any,
                compute: Callable[[str], Any], title: str | None = None) -> Any:
    """An evaluation as a stage in ``folder/evaluation``: ``compute(folder)`` runs unless an earlier run made
    it with the same model (``made_with``: the settings of the stage that made it), encoder settings, labels
    and evaluation texts; returns its result."""
    config = run.config
    stage = Stage(JOB, f"{title or name} evaluation", storage.join(folder, "evaluation"), {
        "model": model, "made_with": made_with, "encoder": config.encoder.model_dump(mode="json"),
        "labels": config.labels.model_dump(mode="json"),
        "evaluation": config.evaluation.model_dump(mode="json", include={"texts", "half", "split_seed", "max_rows"}),
        "source": run.eval_set.source})
    done = stage.finished()
    if done is not None:
        return done["result"]
    result = stage.mark_done(compute(stage.folder))
    # only what this run wrote: an interrupted attempt with other settings may have left its own file
    run.evaluated[model] = storage.join(stage.folder, EVAL_EMBEDDINGS)
    return result


def _scored(run: "_Run", name: str, folder: str, model: str, made_with: Any,
            title: str | None = None) -> dict[str, Any]:
    """``model`` on the evaluation set with the job's prompts and aliases (``eval_<name>.json``)."""
    def compute(out: str) -> dict[str, Any]:
        result = _evaluate(run.eval_set, run.config.encoder.load(model), out, name)
        return _result_json(result, run.config.labels.names, run.eval_set.source)

    return _evaluation(run, name, folder, model, made_with, compute, title)


def _result_json(result: ZeroShotResult, labels: list[str], source: str) -> dict[str, Any]:
    return {"source": source, "accuracy": result.accuracy, "macro_f1": result.macro_f1,
            "per_label_accuracy": result.per_label_accuracy, "labels": labels,
            "confusion": result.confusion.tolist()}


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


def _dev_pages(config: WCSBertConfig, pages_dir: str) -> tuple[list[str], list[list[str]], set[int]]:
    """Held-out dev queries: pages with exactly 3 categories (their first words → their categories).

    The candidates are chosen by id and categories alone; only the chosen pages' texts are read.
    """
    from contrastext.evaluators.category_retrieval import first_words
    from contrastext.methods.wcsbert.pool import iter_pages, page_columns

    pre = config.pretrain
    # ids only, 8 bytes each: the candidates are a fifth of all pages, their category lists would grow with
    # the corpus
    candidates = np.frombuffer(array("q", (row["page_id"] for row in iter_pages(pages_dir, ["page_id", "categories"])
                                           if len(set(row["categories"] or ())) == 3)), np.int64)
    wanted = min(len(candidates), max(int(round(pre.dev_fraction * len(candidates))), pre.dev_min_pages))
    rng = np.random.default_rng(pre.train.seed)
    ids = candidates[np.sort(rng.choice(len(candidates), wanted, replace=False))] if wanted else np.zeros(0, np.int64)
    categories = page_columns(pages_dir, ids, "categories") if len(ids) else []
    chosen = [(int(i), list(dict.fromkeys(c))) for i, c in zip(ids, categories)]
    texts = page_columns(pages_dir, ids, "text") if len(ids) else []
    kept = [(c, t) for c, t in zip(chosen, texts) if (t or "").strip()]
    return ([first_words(t, pre.query_words) for _, t in kept], [cats for (_, cats), _ in kept],
            {page_id for (page_id, _), _ in kept})


def pretrain_settings(config: WCSBertConfig) -> dict[str, Any]:
    """What the pretrained model depends on (its stage's marker compares them)."""
    return {"pretrain": config.pretrain.model_dump(mode="json"), "encoder": config.encoder.model_dump()}


def _stage_pretrain(config: WCSBertConfig, run: str) -> dict[str, Any]:
    from contrastext.evaluators.category_retrieval import CategoryRetrievalEvaluator
    from contrastext.train import fit

    train = config.pretrain.train.model_copy(update={"encoder": config.encoder.model_copy(
        update={"max_length": config.pretrain.train.encoder.max_length})})
    stage = Stage(JOB, "pretrain", storage.join(run, "pretrain"), pretrain_settings(config))
    done = stage.finished()
    if done is not None:
        return done["result"]
    corpus = storage.join(run, "corpus")
    queries, query_categories, dev_ids = _dev_pages(config, storage.join(corpus, "pages"))
    pair_files = storage.list_files(storage.join(corpus, "pairs"), ".parquet")
    if not pair_files:
        raise ValueError(f"{storage.join(corpus, 'pairs')} holds no category pairs: nothing to pretrain on")
    # the pairs stream from storage to the training workers: none of them passes through the driver
    dataset = storage.parquet_dataset(pair_files, columns=["anchor", "positive", "page_id"])
    if dev_ids:
        dataset = dataset.map_batches(_drop_pages, batch_format="pyarrow",
                                      fn_kwargs={"held": pa.array(sorted(dev_ids), pa.int64())})
    dataset = dataset.select_columns(["anchor", "positive"])
    rows = pairs_left(pair_files, dev_ids)
    if rows == 0:
        raise ValueError(f"{storage.join(corpus, 'pairs')} holds no category pairs: nothing to pretrain on")
    # read a chunk at a time as it scores: the list of every category is never held, here or on rank 0
    evaluator = CategoryRetrievalEvaluator(queries, query_categories, storage.join(corpus, "category_counts.parquet"))
    base = train.encoder.load()
    before = evaluator(base) if queries else {}
    del base
    stage.say(f"{rows} category pairs, {len(queries)} dev pages held out; MAP@3 before "
              f"{before.get('map@3', float('nan')):.3f}")
    model = storage.join(stage.folder, "model")
    stage.begin("fit", "model")  # an interrupted fit with these settings resumes; another one's is deleted
    storage.delete(storage.join(stage.folder, "evaluation"))  # measured on the model made before
    clock = Timings()
    with clock.measure("fit"):
        result = fit(dataset, train, OutputConfig(storage_path=stage.folder, name="fit"),
                     eval_fn=evaluator if queries else None, rows=rows, export_model_to=model)
        after = evaluator(train.encoder.load(model)) if queries else {}
    out = {"pairs": rows, "dev_pages": len(queries), "steps": result.steps,
           "loss": result.mean_loss, "dev_before": before, "dev_after": after,
           "seconds": clock["fit"], "model": model}
    return stage.mark_done(out)


def pairs_left(pair_files: list[str], held: set[int]) -> int:
    """Pairs the pretraining reads: the files' row counts (parquet footers) less the held-out pages' pairs.

    Only ``page_id`` is read, and only with pages held out; ``Dataset.count()`` would read and filter every
    pair, texts included, once more before the training reads them.
    """
    import pyarrow.compute as pc

    rows = sum(storage.parquet_file(f).metadata.num_rows for f in pair_files)
    if held:
        value_set = pa.array(sorted(held), pa.int64())
        for f in pair_files:
            for batch in storage.parquet_file(f).iter_batches(columns=["page_id"], batch_size=65_536):
                rows -= pc.sum(pc.is_in(batch.column(0), value_set=value_set)).as_py() or 0
    return rows


def _drop_pages(batch: pa.Table, held: pa.Array) -> pa.Table:
    import pyarrow.compute as pc

    return batch.filter(pc.invert(pc.is_in(batch.column("page_id"), value_set=held)))


def _pretrained_model_is_used(settings: PretrainConfig, result: dict[str, Any]) -> bool:
    if settings.use == "always":
        return True
    before, after = result["dev_before"].get("map@3"), result["dev_after"].get("map@3")
    if before is None or after is None:  # no dev pages: nothing says it did not help
        return True
    return after > before


#: fewer pool texts than this per label leave some label without confident items to train on
MIN_POOL_TEXTS_PER_LABEL = 5


def _pool_pages(config: WCSBertConfig, run: str, root: Path) -> tuple[str, int]:
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
        pages=str(pages), encoder=enc.model_copy(update={"model": model}), max_words=config.pool.max_words,
        rows_per_shard=config.encode.rows_per_shard, batch_size=config.encode.batch_size,
        scaling=config.encode.scaling, dtype=config.encode.dtype,
        output=OutputConfig(storage_path=storage.parent(out), name=storage.name(out)), ray=config.ray), table=False)
    return stage.mark_done({"rows": summary["rows"], "seconds": summary["timings_s"]["total"]})


def _write_pairs(pairs: PseudoPairs, location: str, n_labels: int, seed: int, text_pairs: int = 0) -> PairsWritten:
    """The pairs in a seeded random order (the training reads the file as it is: pairs come grouped by
    confidence, batches must mix labels)."""
    table = pa.table({"anchor": pairs.anchors, "positive": pairs.positives,
                      "label": pa.array(pairs.labels, pa.int32())})
    order = np.random.default_rng(seed).permutation(len(pairs))
    storage.delete(location)
    storage.write_parquet(table.take(pa.array(order)), storage.join(location, "part-0.parquet"))
    return PairsWritten(location, pairs.per_label(n_labels), pairs.conflicts, text_pairs)


def _pairs_files(location: str) -> list[str]:
    return storage.list_files(location, ".parquet") if storage.is_dir(location) else []


# ---------------------------------------------------------------------------------------- the job
@dataclass
class _Run:
    """What the stages of one run share: the settings, the run's folder, the label set, the pool's pages and
    the evaluation set (None when absent)."""

    config: WCSBertConfig
    folder: str
    label_set: Any
    pages: str
    eval_set: EvalSet | None
    timings: Timings
    method: Any  # methods.wcsbert.WCSBert: each round's pseudo-labels and training
    #: model → where its evaluation, made in this run, kept the evaluation texts' embeddings
    evaluated: dict[str, str] = field(default_factory=dict)

    def path(self, *parts: str) -> str:
        return storage.join(self.folder, *parts)


def run_wcsbert(config: WCSBertConfig) -> dict[str, Any]:
    """Run every stage (skipping finished ones) and return the summary (also in ``metrics.json``)."""
    timings = Timings()
    folder = config.output.run_dir()
    storage.check_writable(folder)
    root = data_root(config.data_dir)
    init_ray(config.ray)
    label_set = _scheme(config).label_set(config.labels.names)
    pages, pool_texts = _pool_pages(config, folder, root)  # a bad pool fails here, before any training
    if pool_texts >= 0:
        _say(f"pool: {pool_texts} texts (labels never read)")
    eval_set, eval_missing = load_eval_set(config, root)
    _say(f"evaluation skipped: {eval_missing}" if eval_set is None else f"evaluation set: {eval_set.source}")
    run = _Run(config, folder, label_set, pages, eval_set, timings, method=method_of(config))

    evaluations = _untrained_evaluations(run)
    corpus, pretrain, model_0 = _corpus_and_pretraining(run, evaluations)
    made_with = fingerprint(pretrain_settings(config)) if pretrain and pretrain["used"] else None
    with timings.measure("encode"):
        encoded = _encode_pool(config, pages, model_0, run.path("round_0", "embeddings"), made_with)
    _say(f"pool: {encoded['rows']} items encoded with {model_0}")
    with timings.measure("rounds"):
        outcome, guard_0 = _self_training(run, model_0, made_with)
    rounds, stop, head = outcome.records, outcome.stop, outcome.head
    best_round, final_model = outcome.chosen_round, outcome.model.model
    delivered = _deliver(run, final_model, head)
    final = None
    if eval_set is not None:
        with timings.measure("final_evaluation"):
            final = _final_evaluation(run, final_model, rounds, best_round, head)
    timings.total()
    labels = config.labels
    summary = {
        "evaluation_set": eval_set.source if eval_set else None, "evaluation_skipped": eval_missing or None,
        "labels": labels.names, "template": labels.pair_template, "templates": list(labels.prompts),
        "pool": config.pool.source,
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


def _untrained_evaluations(run: _Run) -> list[dict[str, Any]]:
    """The untrained model under each baseline label scheme (a stage: reused while model and labels match)."""
    config, eval_set = run.config, run.eval_set
    if eval_set is None or not config.evaluation.baselines:
        return []

    def compute(out: str) -> list[dict[str, Any]]:
        base = config.encoder.load()
        embeddings = eval_set.evaluator.embed(base)
        storage.write_npy(storage.join(out, EVAL_EMBEDDINGS), embeddings)
        results = []
        for scheme in baseline_schemes(config):
            result = eval_set.evaluator.score(base, embeddings, scheme)
            results.append({"stage": "untrained", "scheme": scheme.name, "accuracy": result.accuracy,
                            "macro_f1": result.macro_f1})
        write_json_atomic(storage.join(out, "eval_untrained.json"), {"source": eval_set.source, "results": results})
        return results

    with run.timings.measure("baselines"):
        results = _evaluation(run, "untrained", run.path("untrained"), config.encoder.model,
                              config.encoder.model_dump(mode="json"), compute)
    for result in results:
        _say(f"untrained, {result['scheme']}: accuracy {result['accuracy']:.4f}")
    return list(results)


def _corpus_and_pretraining(run: _Run, evaluations: list[dict[str, Any]]) -> tuple[Any, Any, str]:
    """Stage 1: the corpus (when pretraining or a Wikipedia pool needs it) and MNR pretraining on category
    pairs; returns the corpus and pretraining summaries and M_0, the model self-training starts from."""
    config = run.config
    corpus = pretrain = None
    if config.pretrain.enabled or config.pool.source == "wikipedia":
        with run.timings.measure("corpus"):
            corpus = _stage_corpus(config, run.folder)
    model_0 = config.encoder.model
    if not config.pretrain.enabled:
        return corpus, pretrain, model_0
    with run.timings.measure("pretrain"):
        pretrain = _stage_pretrain(config, run.folder)
    pretrain["used"] = _pretrained_model_is_used(config.pretrain, pretrain)
    if pretrain["used"]:
        model_0 = pretrain["model"]
    else:
        _say(f"pretrain: dev MAP@3 {pretrain['dev_after'].get('map@3', float('nan')):.3f} does not beat the "
             f"untrained {pretrain['dev_before'].get('map@3', float('nan')):.3f}; self-training starts from "
             f"{config.encoder.model} (pretrain.use=if_dev_improves)")
    if run.eval_set is not None and pretrain["used"]:
        stored = _scored(run, "pretrained", run.path("pretrain"), model_0, pretrain_settings(config))
        evaluations.append({"stage": "pretrained", "scheme": _scheme(config).name,
                            "accuracy": stored["accuracy"], "macro_f1": stored["macro_f1"]})
        _say(f"after pretraining: accuracy {stored['accuracy']:.4f}")
    return corpus, pretrain, model_0


def _self_training(run: _Run, model_0: str, made_with: str | None) -> tuple[RoundsOutcome, Any]:
    """Stage 3: the rounds from M_0 (made with the settings ``made_with`` fingerprints; None: a named model)
    until the stopping rule says so (``methods.wcsbert.rounds``); returns what they kept and the guard's scores of
    M_0 (None without the guard)."""
    config = run.config
    start = StoredModel(model_0, run.path("round_0", "embeddings"))
    # with no round the guard still chooses the head the untrained model is delivered with (as WCSBert does;
    # where the pool is not re-encoded the guard scores the prompts alone, see _Guard.heads)
    chooses_head = run.method.chooses_head and config.rounds.reencode
    guard = (_guard_reference(config, model_0, start.embeddings, run.label_set)
             if config.rounds.guard and (config.rounds.rounds or chooses_head) else None)
    guard_0 = guard.score() if guard else None
    if guard_0 is not None:
        _say(f"guard: round-0 model {guard_text(guard_0)}")
    stop = round_stop(config, guard_0.value if guard_0 is not None else None)
    runner = _StoredRounds(run, model_0, made_with, guard.key if guard is not None else None)
    outcome = run_rounds(runner, start, config.rounds.rounds, stop, guard, guard_0)
    return outcome, guard_0


@dataclass(frozen=True)
class StoredModel:
    """A round's model as the job keeps it: its folder and the pool's embeddings under it."""

    model: str
    embeddings: str


class _StoredRounds:
    """The job's rounds (``methods.wcsbert.rounds.RoundRunner``): the pool on ``.h5`` shards, pairs written by Ray
    Data, each round a stage (a finished one is read back), evaluated and shown as a table."""

    def __init__(self, run: _Run, model_0: str, made_with: str | None, guard_key: str | None):
        self.run, self.model_0 = run, model_0
        self.made_with = made_with  # the fingerprint of the settings that made the next round's start model
        self.guard_key = guard_key  # a finished round's guard scores are kept only if made on the same sample
        self.stage: Stage | None = None
        self.new = False  # whether the round was trained by this run (its marker still to be written)
        self.previous_labels: np.ndarray | None = None

    def train(self, r: int, model: StoredModel) -> tuple[dict[str, Any], StoredModel]:
        run = self.run
        self.stage = Stage(JOB, f"round {r}", run.path(f"round_{r}"),
                           round_settings(run.config, model.model, self.made_with))
        done = self.stage.finished()
        self.new = done is None
        if self.new:
            self.stage.begin("fit", "model")  # an interrupted fit with these settings resumes; another's is deleted
            storage.delete(storage.join(self.stage.folder, "evaluation"))  # measured on the model made before
            record = _self_training_round(run, r, self.stage.folder, model.model, self.model_0, model.embeddings,
                                          self.previous_labels, fingerprint(self.stage.settings))
        else:
            record = done["result"]
            if record.get("guard_key") != self.guard_key:  # scored on another sample: scored again
                record = {key: value for key, value in record.items() if not key.startswith("guard")}
        return record, StoredModel(record["model"], record["embeddings"])

    def finish(self, record: dict[str, Any], model: StoredModel) -> dict[str, Any]:
        stage = self.stage
        record = _round_evaluated(self.run, record, stage) | {"guard_key": self.guard_key}
        if self.new:
            stage.mark_done(record)
        print(round_table(record, self.run.config.labels.names), flush=True)
        self.previous_labels = storage.read_npy(storage.join(stage.folder, "pseudo_labels.npy"))
        self.made_with = fingerprint(stage.settings)
        return record


def _round_evaluated(run: _Run, record: dict[str, Any], stage: Stage) -> dict[str, Any]:
    """The round's model on the evaluation set (a stage of its own: the evaluation set may change while the
    round stays done)."""
    if run.eval_set is None:
        return record
    measured = Timings()
    with measured.measure("evaluate"):
        evaluated = _scored(run, "round", stage.folder, record["model"], stage.settings, title=stage.name)
    seconds = dict(record.get("seconds", {}))
    seconds.setdefault("evaluate", measured["evaluate"])  # a finished round keeps the times it was made in
    return record | {"eval_accuracy": evaluated["accuracy"], "eval_macro_f1": evaluated["macro_f1"],
                     "seconds": seconds}


def _deliver(run: _Run, final_model: str, head) -> str:
    """The kept model as a ``WCSBert`` folder at ``final/model``: the encoder, its labels and prompts and the
    head it predicts with (``head``: the guard's choice; None: the prompts'); what ``contrastext predict``,
    Serve and ``WCSBert.load`` read."""
    target = run.path("final", "model")
    label_set, prompts = run.label_set, list(run.config.labels.prompts)
    stage = Stage(JOB, "deliver", folder=run.path("final"), settings={
        "model": final_model, "labels": list(label_set.labels), "aliases": [list(a) for a in label_set.aliases],
        "prompts": prompts, "max_length": run.config.encoder.max_length,
        "head": head_kind(head)})
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


def _final_evaluation(run: _Run, final_model: str, rounds: list[dict[str, Any]], best_round: int,
                      head) -> dict[str, Any]:
    """Stage 4: the kept model on the evaluation set (its prompts, and the delivered ``head`` when the guard
    chose one), also through pool prototypes and label mapping."""
    config, eval_set = run.config, run.eval_set
    labels = config.labels
    encoder = config.encoder.load(final_model)
    stored = run.evaluated.get(final_model)  # the kept model was evaluated as its round: not encoded again
    eval_embeddings = (storage.read_npy(stored) if stored and storage.is_file(stored)
                       else eval_set.evaluator.embed(encoder))
    result = eval_set.evaluator.score(encoder, eval_embeddings)
    final = _result_json(result, labels.names, eval_set.source)
    final["backend"] = encoder.backend  # what the encodes ran on once settled (int8, or the fp32 fallback)
    delivered = result if head is None else eval_set.evaluator.result(head.labels(eval_embeddings))
    final["delivered"] = {"head": head_kind(head), "accuracy": delivered.accuracy,
                          "macro_f1": delivered.macro_f1}
    final_embeddings = (run.path("round_0", "embeddings") if not best_round else
                        rounds[best_round - 1]["embeddings"] if config.rounds.reencode else None)
    if config.evaluation.prototypes and final_embeddings is not None:
        prototypes = _prototypes(config, encoder, final_embeddings, run.label_set, run.folder)
        by_prototype = eval_set.evaluator.result(classify_by_prototypes(eval_embeddings, prototypes))
        final["prototypes"] = _result_json(by_prototype, labels.names, eval_set.source)
        _say(f"final model with pool prototypes: accuracy {by_prototype.accuracy:.4f}")
    write_json_atomic(run.path("eval_final.json"), final)
    if config.evaluation.label_mapping and rounds and config.pool.source == "wikipedia":
        final["label_mapping_accuracy"] = _label_mapping_accuracy(eval_set, encoder, run.folder, best_round)
    return final


def round_stop(config: WCSBertConfig, guard_0: float | None) -> RoundStop:
    """The job's stopping rule (methods.wcsbert.stopping): a dev set's accuracy when the user gives one
    (``evaluation.use_as_dev``), else the label-free guard, else the last round."""
    return RoundStop(config.rounds.rounds, patience=config.rounds.patience, min_change=config.rounds.min_change,
                     use_dev=config.evaluation.use_as_dev, guard_0=guard_0)


@dataclass
class _Guard:
    reference: Any  # methods.wcsbert.guard.GuardReference
    config: WCSBertConfig
    label_set: Any

    @property
    def key(self) -> str:
        """What a round's guard scores depend on beyond the round itself: the sample and its neighbourhoods."""
        rounds = self.config.rounds
        return fingerprint({"sample": rounds.guard_sample, "neighbours": rounds.guard_neighbours,
                            "seed": rounds.train.seed, "margin": TRAINED_PROTOTYPE_MARGIN})

    def score(self, model: StoredModel | None = None) -> Any:
        """The guard's scores (methods.wcsbert.guard.HeadScores) of each head's labels of the sampled pool items under
        ``model``, their embeddings read from its stored pool (None: the round-0 model, from the embeddings
        its reference holds: nothing is loaded or encoded again)."""
        from contrastext.data.h5store import H5Corpus

        if model is None:
            return self.reference.score_heads(self.reference.embeddings, self.reference.label_embeddings, self.heads)
        encoder = self.config.encoder.load(model.model)
        label_embeddings = embed_label_strings(encoder, self.label_set, self.config.labels.prompts)
        embeddings = H5Corpus(model.embeddings).lookup(self.reference.ids)
        return self.reference.score_heads(embeddings, label_embeddings, self.heads, TRAINED_PROTOTYPE_MARGIN)

    @property
    def heads(self) -> list[str]:
        """The heads asked for; the prompts alone where the pool is not re-encoded: its stored embeddings are
        then an earlier model's, not the space the round's prototypes would be applied in."""
        return list(self.config.rounds.heads) if self.config.rounds.reencode else ["prompts"]


def _guard_reference(config: WCSBertConfig, model_0: str, embeddings_dir: str, label_set) -> _Guard:
    """A seeded sample of the pool, its neighbourhoods and the label strings under the round-0 model
    (see methods.wcsbert.guard); only the sample's rows are read."""
    from contrastext.data.h5store import H5Corpus
    from contrastext.methods.wcsbert.guard import guard_reference, sample_positions

    corpus = H5Corpus(embeddings_dir)
    if len(corpus) < 2:
        raise ValueError(f"{embeddings_dir}: the guard needs at least two pool items")
    ids = corpus.ids_at(sample_positions(len(corpus), config.rounds.guard_sample, config.rounds.train.seed))
    encoder = config.encoder.load(model_0)
    label_embeddings = embed_label_strings(encoder, label_set, config.labels.prompts)
    _, owner = label_set.flat()
    reference = guard_reference(ids, corpus.lookup(ids), label_embeddings, owner, len(label_set.labels),
                                config.rounds.guard_neighbours)
    return _Guard(reference, config, label_set)


def _self_training_round(run: _Run, r: int, folder: str, model: str, model_0: str, embeddings_dir: str,
                         previous_labels: np.ndarray | None, made_with: str) -> dict[str, Any]:
    """Round ``r`` from ``model``: pseudo-pairs, a fit, the pool encoded again (``made_with``: the round's
    settings' fingerprint, so embeddings of a round made before with other settings are not reused);
    returns the round's record."""
    config = run.config
    seconds = Timings()
    with seconds.measure("select"):
        pool, calibrated, pseudo, pairs = _round_pairs(run, r, folder, model, embeddings_dir)

    init = model if config.rounds.init == "previous" else model_0
    new_model = storage.join(folder, "model")
    with seconds.measure("train"):
        # the workers read the pairs from storage: the driver never holds them as rows
        data = storage.parquet_dataset(_pairs_files(pairs.location), columns=run.method.pair_columns)
        result = run.method.train_round(data, init, r, output=storage.join(folder, "fit"), export_to=new_model,
                                        rows=len(pairs))

    # the new model's ONNX export, made once here (cached by its weights) so the encode actors only load it
    seconds["export"] = export_for_inference(config.encoder, new_model)

    new_embeddings = embeddings_dir
    with seconds.measure("encode"):
        if config.rounds.reencode:
            new_embeddings = storage.join(folder, "embeddings")
            _encode_pool(config, run.pages, new_model, new_embeddings, made_with)

    names = config.labels.names
    record: dict[str, Any] = {
        "round": r, "pool": int(len(pool.ids)), "pseudo_labels": config.rounds.pseudo_labels,
        "kept": int(len(pseudo.kept)),
        "kept_per_label": dict(zip(names, pseudo.kept_per_label(len(names)).tolist())),
        "pairs": len(pairs), "pairs_per_label": dict(zip(names, pairs.per_label.tolist())),
        "category_conflicts": pairs.conflicts, "text_pairs": pairs.text_pairs,
        "labels_changed": changed_share(previous_labels, pseudo.label),
        "teacher_shares": dict(zip(names, np.round(calibrated.shares, 6).tolist())),
        "calibration_shift": (dict(zip(names, np.round(calibrated.shift, 6).tolist()))
                              if config.rounds.calibration.enabled else None),
        "mean_confidence_kept": float(pseudo.confidence[pseudo.kept].mean()) if len(pseudo.kept) else None,
        "loss": result.mean_loss, "steps": result.steps, "model": new_model,
        "embeddings": new_embeddings,
        "seconds": dict(seconds),
    }
    return record


def export_for_inference(encoder: Any, model: str) -> float:
    """Export ``model`` for ``encoder``'s (an ``EncoderConfig``) ONNX backend before it encodes anything;
    the seconds it took (0 for torch, or an export already cached)."""
    return encoder.load(model, device="cpu").prepare_backend() if encoder.backend != "torch" else 0.0


def _round_pairs(run: _Run, r: int, folder: str, model: str, embeddings_dir: str):
    """The pool scored by ``model``, pseudo-labelled by the job's ``WCSBert`` (teacher, calibration, selection)
    and written as pseudo-pairs under ``folder/pairs``; returns the pool's scores, the calibration, the
    pseudo-labels and the pairs written."""
    from contrastext.methods.wcsbert.pool import page_columns

    config, label_set, labels = run.config, run.label_set, run.config.labels
    scorer = config.encoder.load(model)
    pool = score_pool(embeddings_dir, scorer, label_set, labels.prompts)
    # the teacher reads the stored embeddings (streamed, a chunk at a time) only if it needs them
    pseudo, calibrated = run.method.pseudo_labels(pool_embeddings(embeddings_dir, pool.ids), pool.scores,
                                                  pool.alias, label_prompt_vectors(scorer, label_set, labels.prompts))
    del scorer
    storage.write_npy(storage.join(folder, "pseudo_labels.npy"), pseudo.label)
    seed = config.rounds.train.seed + r
    if config.pool.source == "wikipedia":
        # Ray Data's workers tally the categories: their number grows with the pool
        pairs = write_category_pairs(run.pages, pool.ids, pseudo, label_prompts(label_set, labels.pair_template),
                                     config.rounds.max_pairs_per_label, storage.join(folder, "pairs"), seed=seed)
    else:
        texts = page_columns(run.pages, pool.ids[pseudo.kept], "text")
        full_texts = [""] * len(pool.ids)
        for i, text in zip(pseudo.kept, texts):
            full_texts[i] = " ".join(text.split()[: config.pool.max_words])
        prompt_pairs = text_pairs(full_texts, pseudo, label_set, labels.pair_template,
                                  config.rounds.max_pairs_per_label)
        extra = run.method.text_positive_pairs(full_texts, pseudo, r)
        pairs = _write_pairs(combined(prompt_pairs, extra), storage.join(folder, "pairs"), len(label_set.labels),
                             seed=seed, text_pairs=len(extra))
    if not len(pairs):
        raise ValueError(f"round {r}: no pseudo-pairs (kept {len(pseudo.kept)} items); lower "
                         "rounds.selection.threshold or raise top_fraction")
    _say(f"round {r}: {len(pseudo.kept)} of {len(pool.ids)} items kept, {len(pairs)} pairs; training")
    return pool, calibrated, pseudo, pairs


def _prototypes(config: WCSBertConfig, encoder, embeddings_dir: str, label_set, run: str) -> np.ndarray:
    """Label prototypes of the final model from its own pool embeddings; saved beside the report."""
    pool = score_pool(embeddings_dir, encoder, label_set, config.labels.prompts)
    stored = pool_embeddings(embeddings_dir, pool.ids)
    prototypes = label_prototypes(stored, pool.scores, config.evaluation.prototype_fraction,
                                  fallback=label_prompt_vectors(encoder, label_set, config.labels.prompts))
    prototypes = refine_prototypes(stored, prototypes, config.evaluation.prototype_iterations)
    storage.write_npy(storage.join(run, "label_prototypes.npy"), prototypes)
    write_json_atomic(storage.join(run, "label_prototypes.json"), {"labels": config.labels.names,
                                                      "fraction": config.evaluation.prototype_fraction,
                                                      "iterations": config.evaluation.prototype_iterations,
                                                      "embeddings": embeddings_dir})
    return prototypes


def _label_mapping_accuracy(eval_set: EvalSet, encoder, run: str, round_index: int) -> float | None:
    """The paper's comparison: each query → its nearest pseudo-labelled category → that category's label."""
    pairs_files = _pairs_files(storage.join(run, f"round_{round_index}", "pairs"))
    if not pairs_files:
        return None
    table = storage.read_parquet(pairs_files, columns=["anchor", "label"])
    categories, labels = table.column("anchor").to_pylist(), np.asarray(table.column("label").to_pylist())
    q = eval_set.evaluator.embed(encoder)
    c = encoder.encode(categories, batch_size=128)
    predicted = labels[(unit_rows(q) @ unit_rows(c).T).argmax(axis=1)]
    return eval_set.evaluator.result(predicted).accuracy


# ---------------------------------------------------------------------------------------- tables
def round_table(record: dict[str, Any], names: list[str]) -> str:
    rows = [["items kept / pool", f"{record['kept']} / {record['pool']}"],
            ["kept per label (fewest … most)", _spread(record["kept_per_label"])],
            ["pairs (per label, fewest … most)", f"{record['pairs']} ({_spread(record['pairs_per_label'])})"],
            ["pseudo-labels changed", "-" if record["labels_changed"] is None else f"{record['labels_changed']:.4f}"],
            ["mean loss / steps", f"{record['loss']:.4f} / {record['steps']}" if record.get("loss") is not None
             else f"- / {record['steps']}"],
            ["time s (select / train / export / encode)",
             " / ".join(f"{record['seconds'].get(k, 0):.0f}" for k in ("select", "train", "export", "encode"))]]
    if record.get("guard") is not None:
        parts = (f" = kappa {record['guard_kappa']:.4f} × anchored {record['guard_anchored']:.2f}"
                 if record.get("guard_anchored") is not None else "")
        rows.append(["guard (label-free)", f"{record['guard']:.4f}{parts}"])
        if len(record.get("guard_heads") or {}) > 1:
            rows.append(["guard per head (delivers)", ", ".join(
                f"{kind} {value:.4f}" for kind, value in record["guard_heads"].items()) + f" ({record['head']})"])
    if record.get("eval_accuracy") is not None:
        rows.append(["evaluation accuracy", f"{record['eval_accuracy']:.4f}"])
    return format_table(rows, headers=[f"round {record['round']}", "value"])


def _spread(per_label: dict[str, int]) -> str:
    """``fewest (label) … most (label)``: one line however many labels (every count is in the JSON)."""
    if not per_label:
        return "-"
    low, high = min(per_label, key=per_label.get), max(per_label, key=per_label.get)
    return f"{per_label[low]} ({low}) … {per_label[high]} ({high})"


def summary_table(summary: dict[str, Any]) -> str:
    rows: list[list[Any]] = []
    for e in summary["evaluations"]:
        rows.append([f"{e['stage']}: {e['scheme']}", f"{e['accuracy']:.4f}"])
    for r in summary["rounds"]:
        acc = r.get("eval_accuracy")
        guard = f", guard {r['guard']:.4f}" if r.get("guard") is not None else ""
        rows.append([f"round {r['round']}: pairs {r['pairs']}{guard}", "-" if acc is None else f"{acc:.4f}"])
    if summary["final"]:
        delivered = summary["final"].get("delivered") or {"head": "prompts", "accuracy": summary["final"]["accuracy"]}
        rows.append([f"delivered (round {summary['chosen_round']}, {delivered['head']} head)",
                     f"{delivered['accuracy']:.4f}"])
        if delivered["head"] != "prompts":
            rows.append(["final, prompts head", f"{summary['final']['accuracy']:.4f}"])
        if summary["final"].get("prototypes"):
            rows.append(["final, pool prototypes (evaluation)", f"{summary['final']['prototypes']['accuracy']:.4f}"])
        if summary["final"].get("label_mapping_accuracy") is not None:
            rows.append(["final, label mapping via categories", f"{summary['final']['label_mapping_accuracy']:.4f}"])
    rows.append(["stopped", summary["stop_reason"]])
    asked, used = summary.get("backend", "torch"), (summary["final"] or {}).get("backend")
    rows.append(["backend", asked if used in (None, asked) else f"{asked} ({used})"])
    rows.append(["evaluation", summary["evaluation_set"] or summary["evaluation_skipped"]])
    rows.append(["time s: " + ", ".join(summary["timings_s"]), ", ".join(f"{v:.0f}" for v in summary["timings_s"].values())])
    return format_table(rows, headers=["wcsbert", "accuracy"])
