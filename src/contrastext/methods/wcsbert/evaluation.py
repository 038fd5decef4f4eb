"""The ``wcsbert_selftrain`` job's zero-shot evaluation: the labelled evaluation set, the untrained baselines'
label schemes, each model scored as a stage (reused while the model, labels and texts match), and the kept
model's final scores under its prompts, its delivered head, pool prototypes and label mapping."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from contrastext import storage
from contrastext.data.sources import describe, load_texts
from contrastext.evaluators.zeroshot_accuracy import (
    LabelScheme,
    ZeroShotEvaluator,
    ZeroShotResult,
)
from contrastext.manifest import write_json_atomic
from contrastext.methods.wcsbert.config import WCSBertConfig
from contrastext.methods.wcsbert.heads import head_kind
from contrastext.methods.wcsbert.job_run import JOB, EvalSet, JobRun
from contrastext.methods.wcsbert.prototypes import (
    classify_by_prototypes,
    label_prototypes,
    pool_embeddings,
    refine_prototypes,
)
from contrastext.methods.wcsbert.round_pairs import pairs_files
from contrastext.methods.wcsbert.scoring import label_prompt_vectors, score_pool
from contrastext.stages import Stage, say
from contrastext.vectors import unit_rows


def label_scheme(config: WCSBertConfig) -> LabelScheme:
    """The job's labels as it scores them: its prompts, with aliases."""
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
    evaluator = ZeroShotEvaluator(data.texts, label_ids, config.labels.names, label_scheme(config))
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
    strings = len(label_scheme(config).label_set(labels.names).flat()[0])
    with_aliases = [LabelScheme(f"labels only, {len(labels.names)} labels as {strings} strings", "{label}",
                                labels.aliases, labels.keep_label),
                    LabelScheme(f"{prompt}, {len(labels.names)} labels as {strings} strings", labels.prompts,
                                labels.aliases, labels.keep_label)]
    schemes = [as_written[0], with_aliases[0], as_written[1], with_aliases[1]]
    return schemes if not only_labels else schemes[:2]


#: an evaluation's text embeddings, kept beside its scores: the final evaluation of the same model reads them
EVAL_EMBEDDINGS = "eval_embeddings.npy"


def evaluate(eval_set: EvalSet, encoder, out: str, name: str) -> ZeroShotResult:
    embeddings = eval_set.evaluator.embed(encoder)
    storage.write_npy(storage.join(out, EVAL_EMBEDDINGS), embeddings)
    result = eval_set.evaluator.score(encoder, embeddings)
    write_json_atomic(storage.join(out, f"eval_{name}.json"), result_json(result, eval_set.evaluator.labels, eval_set.source))
    return result


def untrained_evaluations(run: JobRun) -> list[dict[str, Any]]:
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
        results = evaluation_stage(run, "untrained", run.path("untrained"), config.encoder.model,
                              config.encoder.model_dump(mode="json"), compute)
    for result in results:
        say(JOB, f"untrained, {result['scheme']}: accuracy {result['accuracy']:.4f}")
    return list(results)


def evaluation_stage(run: JobRun, name: str, folder: str, model: str, made_with: Any,
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


def scored(run: JobRun, name: str, folder: str, model: str, made_with: Any,
            title: str | None = None) -> dict[str, Any]:
    """``model`` on the evaluation set with the job's prompts and aliases (``eval_<name>.json``)."""
    def compute(out: str) -> dict[str, Any]:
        result = evaluate(run.eval_set, run.config.encoder.load(model), out, name)
        return result_json(result, run.config.labels.names, run.eval_set.source)

    return evaluation_stage(run, name, folder, model, made_with, compute, title)


def result_json(result: ZeroShotResult, labels: list[str], source: str) -> dict[str, Any]:
    return {"source": source, "accuracy": result.accuracy, "macro_f1": result.macro_f1,
            "per_label_accuracy": result.per_label_accuracy, "labels": labels,
            "confusion": result.confusion.tolist()}


def final_evaluation(run: JobRun, final_model: str, rounds: list[dict[str, Any]], best_round: int,
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
    final = result_json(result, labels.names, eval_set.source)
    final["backend"] = encoder.backend  # what the encodes ran on once settled (int8, or the fp32 fallback)
    delivered = result if head is None else eval_set.evaluator.result(head.labels(eval_embeddings))
    final["delivered"] = {"head": head_kind(head), "accuracy": delivered.accuracy,
                          "macro_f1": delivered.macro_f1}
    final_embeddings = (run.path("round_0", "embeddings") if not best_round else
                        rounds[best_round - 1]["embeddings"] if config.rounds.reencode else None)
    if config.evaluation.prototypes and final_embeddings is not None:
        prototypes = final_prototypes(config, encoder, final_embeddings, run.label_set, run.folder)
        by_prototype = eval_set.evaluator.result(classify_by_prototypes(eval_embeddings, prototypes))
        final["prototypes"] = result_json(by_prototype, labels.names, eval_set.source)
        say(JOB, f"final model with pool prototypes: accuracy {by_prototype.accuracy:.4f}")
    write_json_atomic(run.path("eval_final.json"), final)
    if config.evaluation.label_mapping and rounds and config.pool.source == "wikipedia":
        final["label_mapping_accuracy"] = label_mapping_accuracy(eval_set, encoder, run.folder, best_round)
    return final


def final_prototypes(config: WCSBertConfig, encoder, embeddings_dir: str, label_set, run: str) -> np.ndarray:
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


def label_mapping_accuracy(eval_set: EvalSet, encoder, run: str, round_index: int) -> float | None:
    """The paper's comparison: each query → its nearest pseudo-labelled category → that category's label."""
    files = pairs_files(storage.join(run, f"round_{round_index}", "pairs"))
    if not files:
        return None
    table = storage.read_parquet(files, columns=["anchor", "label"])
    categories, labels = table.column("anchor").to_pylist(), np.asarray(table.column("label").to_pylist())
    q = eval_set.evaluator.embed(encoder)
    c = encoder.encode(categories, batch_size=128)
    predicted = labels[(unit_rows(q) @ unit_rows(c).T).argmax(axis=1)]
    return eval_set.evaluator.result(predicted).accuracy
