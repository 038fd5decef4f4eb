"""The ``wcsbert_selftrain`` job's rounds (a ``methods.wcsbert.rounds.RoundRunner``): the pool on ``.h5``
shards, each round's pseudo-labels from the job's ``WCSBert``, pairs written to storage for the training
workers, the pool encoded again by Ray Data, the guard over a sample of the stored embeddings; each round is a
stage (a finished one is read back), evaluated and shown as a table. ``WCSBert.fit`` runs the same loop on
texts in memory."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from contrastext import storage
from contrastext.methods.wcsbert.category_votes import write_category_pairs
from contrastext.methods.wcsbert.config import WCSBertConfig
from contrastext.methods.wcsbert.evaluation import scored
from contrastext.methods.wcsbert.guard import TRAINED_PROTOTYPE_MARGIN, guard_text
from contrastext.methods.wcsbert.heads import BLEND_WEIGHT
from contrastext.methods.wcsbert.job_run import JOB, JobRun
from contrastext.methods.wcsbert.prototypes import pool_embeddings
from contrastext.methods.wcsbert.pseudo_pairs import label_prompts, text_pairs
from contrastext.methods.wcsbert.report import round_table
from contrastext.methods.wcsbert.round_pairs import pairs_files, write_pairs
from contrastext.methods.wcsbert.rounds import RoundsOutcome, run_rounds
from contrastext.methods.wcsbert.scoring import changed_share, embed_label_strings, label_prompt_vectors, score_pool
from contrastext.methods.wcsbert.stopping import RoundStop
from contrastext.methods.wcsbert.text_positives import combined
from contrastext.stages import Stage, Timings, fingerprint, say

# how many rounds to run and when to stop do not change what a finished round made
_NOT_PART_OF_A_ROUND = ("rounds", "patience", "min_change", "still_learning", "guard", "guard_sample",
                        "guard_neighbours", "heads")


def round_settings(config: WCSBertConfig, start_model: str, start_made_with: str | None = None) -> dict[str, Any]:
    """What a round's outputs depend on (its done-marker compares them); ``start_made_with``: the fingerprint
    of the settings that made ``start_model`` (None: a named model), so a round whose start model was made
    again with other settings runs again."""
    rounds = {k: v for k, v in config.rounds.model_dump(mode="json").items() if k not in _NOT_PART_OF_A_ROUND}
    rounds["text_positives"] = config.text_positives().model_dump(mode="json")
    return {"rounds": rounds, "labels": config.labels.model_dump(mode="json"), "from": start_model,
            "from_made_with": start_made_with, "pool": config.pool.model_dump(mode="json"),
            "read_max_length": config.encoder.max_length}  # the tokens read to score the pool label it


def self_train(run: JobRun, model_0: str, made_with: str | None) -> tuple[RoundsOutcome, Any]:
    """Stage 3: the rounds from M_0 (made with the settings ``made_with`` fingerprints; None: a named model)
    until the stopping rule says so (``methods.wcsbert.rounds``); returns what they kept and the guard's scores of
    M_0 (None without the guard)."""
    config = run.config
    start = StoredModel(model_0, run.path("round_0", "embeddings"))
    # with no round the guard still chooses the head the untrained model is delivered with (as WCSBert does;
    # where the pool is not re-encoded the guard scores the prompts alone, see StoredGuard.heads)
    chooses_head = run.method.chooses_head and config.rounds.reencode
    guard = (stored_guard(config, model_0, start.embeddings, run.label_set)
             if config.rounds.guard and (config.rounds.rounds or chooses_head) else None)
    guard_0 = guard.score() if guard else None
    if guard_0 is not None:
        say(JOB, f"guard: round-0 model {guard_text(guard_0)}")
    stop = round_stop(config, guard_0.value if guard_0 is not None else None)
    runner = StoredRounds(run, model_0, made_with, guard.key if guard is not None else None)
    outcome = run_rounds(runner, start, config.rounds.rounds, stop, guard, guard_0)
    return outcome, guard_0


@dataclass(frozen=True)
class StoredModel:
    """A round's model as the job keeps it: its folder and the pool's embeddings under it."""

    model: str
    embeddings: str


class StoredRounds:
    """The job's rounds (``methods.wcsbert.rounds.RoundRunner``): the pool on ``.h5`` shards, pairs written by Ray
    Data, each round a stage (a finished one is read back), evaluated and shown as a table."""

    def __init__(self, run: JobRun, model_0: str, made_with: str | None, guard_key: str | None):
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


def _round_evaluated(run: JobRun, record: dict[str, Any], stage: Stage) -> dict[str, Any]:
    """The round's model on the evaluation set (a stage of its own: the evaluation set may change while the
    round stays done)."""
    if run.eval_set is None:
        return record
    measured = Timings()
    with measured.measure("evaluate"):
        evaluated = scored(run, "round", stage.folder, record["model"], stage.settings, title=stage.name)
    seconds = dict(record.get("seconds", {}))
    seconds.setdefault("evaluate", measured["evaluate"])  # a finished round keeps the times it was made in
    return record | {"eval_accuracy": evaluated["accuracy"], "eval_macro_f1": evaluated["macro_f1"],
                     "seconds": seconds}


def round_stop(config: WCSBertConfig, guard_0: float | None) -> RoundStop:
    """The job's stopping rule (methods.wcsbert.stopping): a dev set's accuracy when the user gives one
    (``evaluation.use_as_dev``), else the label-free guard, else the last round."""
    return RoundStop(config.rounds.rounds, patience=config.rounds.patience, min_change=config.rounds.min_change,
                     use_dev=config.evaluation.use_as_dev, guard_0=guard_0,
                     still_learning=config.rounds.still_learning)


@dataclass
class StoredGuard:
    reference: Any  # methods.wcsbert.guard.GuardReference
    config: WCSBertConfig
    label_set: Any

    @property
    def key(self) -> str:
        """What a round's guard scores depend on beyond the round itself: the sample and its neighbourhoods."""
        rounds = self.config.rounds
        return fingerprint({"sample": rounds.guard_sample, "neighbours": rounds.guard_neighbours,
                            "seed": rounds.train.seed, "margin": TRAINED_PROTOTYPE_MARGIN,
                            "blend": BLEND_WEIGHT})

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
        return self.reference.score_heads(embeddings, label_embeddings, self.heads, trained=True)

    @property
    def heads(self) -> list[str]:
        """The heads asked for; the prompts alone where the pool is not re-encoded: its stored embeddings are
        then an earlier model's, not the space the round's prototypes would be applied in."""
        return list(self.config.rounds.heads) if self.config.rounds.reencode else ["prompts"]


def stored_guard(config: WCSBertConfig, model_0: str, embeddings_dir: str, label_set) -> StoredGuard:
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
    return StoredGuard(reference, config, label_set)


def _self_training_round(run: JobRun, r: int, folder: str, model: str, model_0: str, embeddings_dir: str,
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
        data = storage.parquet_dataset(pairs_files(pairs.location), columns=run.method.pair_columns)
        result = run.method.train_round(data, init, r, output=storage.join(folder, "fit"), export_to=new_model,
                                        rows=len(pairs))

    # the new model's ONNX export, made once here (cached by its weights) so the encode actors only load it
    seconds["export"] = export_for_inference(config.encoder, new_model)

    new_embeddings = embeddings_dir
    with seconds.measure("encode"):
        if config.rounds.reencode:
            new_embeddings = storage.join(folder, "embeddings")
            run.encode_pool(new_model, new_embeddings, made_with)

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


def _round_pairs(run: JobRun, r: int, folder: str, model: str, embeddings_dir: str):
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
        pairs = write_pairs(combined(prompt_pairs, extra), storage.join(folder, "pairs"), len(label_set.labels),
                             seed=seed, text_pairs=len(extra))
    if not len(pairs):
        raise ValueError(f"round {r}: no pseudo-pairs (kept {len(pseudo.kept)} items); lower "
                         "rounds.selection.threshold or raise top_fraction")
    say(JOB, f"round {r}: {len(pseudo.kept)} of {len(pool.ids)} items kept, {len(pairs)} pairs; training")
    return pool, calibrated, pseudo, pairs
