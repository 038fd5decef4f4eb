"""WCSBert: zero-shot classification by self-training on the user's own unlabelled texts.

    model = WCSBert().fit(texts, labels=["World", "Sports", "Business", "Science"])
    model.predict(["The striker scored twice."])  # ["Sports"]

Each round is the job's round (``methods.wcsbert.stored_rounds``; both run ``methods.wcsbert.rounds.run_rounds``)
on texts held in memory: the current model scores the texts against the label prompts, the teacher turns
those scores into pseudo-labels, the most confident share of each label (``selection``) pairs its texts with
the label's best prompt, and MNR training on those pairs (``contrastext.train.fit``) gives the next round's
model. No label of a text is ever read: ``labels`` are the names of the classes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import ValidationError
from scipy.special import softmax

from contrastext.methods.training import (
    checked_texts,
    encoder_spec,
    fit_rows,
    kept_path,
    load_text_encoder,
    work_folder,
)
from contrastext.methods.wcsbert.calibration import CalibrationConfig, calibrate
from contrastext.methods.wcsbert.config import READ_MAX_LENGTH, RoundsConfig
from contrastext.methods.wcsbert.guard import TextGuard, guard_fields
from contrastext.methods.wcsbert.heads import LabelHead, head_kind
from contrastext.methods.wcsbert.pseudo_labels import select
from contrastext.methods.wcsbert.pseudo_pairs import text_pairs
from contrastext.methods.wcsbert.read_length import auto_read_length
from contrastext.methods.wcsbert.rounds import run_rounds
from contrastext.methods.wcsbert.scoring import changed_share, label_prompt_vectors
from contrastext.methods.wcsbert.stopping import RoundStop
from contrastext.methods.wcsbert.teachers import Teacher
from contrastext.methods.wcsbert.text_positives import combined, text_positive_pairs
from contrastext.models.resolve import DEFAULT_MODEL
from contrastext.zeroshot import LabelSet, ZeroShotClassifier, validate_template, validate_templates

MANIFEST = "wcsbert.json"


class WCSBert:
    """``fit(texts, labels, aliases)`` self-trains ``encoder`` for the label names; ``predict`` then classifies.

    **Settings.** The class and the ``wcsbert_selftrain`` job share one settings object,
    :class:`~contrastext.methods.wcsbert.config.RoundsConfig` (the job's ``rounds:`` block), so every default is
    the job's: pass ``config=RoundsConfig(...)``, or any of its fields as a keyword (``rounds=3``,
    ``pseudo_labels="prompts"``, ``selection=SelectionConfig(...)``, ``calibration=True`` for its default
    settings); an unknown keyword is an error that lists the fields. ``init`` and ``reencode`` concern the job's
    pool on ``.h5`` shards only.

    ``teacher``: what labels the texts (default: the one ``pseudo_labels`` names, the prototype teacher: each
    text's nearest label prototype); a ``PromptTeacher`` (each text's best label prompt) or any object with their
    ``scores`` method. ``template`` puts a label (or alias) into the prompt (default "{label}"); ``templates``
    instead gives several, ensembled: a label string stands for the renormalised mean of its prompts' unit
    embeddings, in scoring and predicting alike, and the training pairs' positives are the first template's
    prompts (``methods.wcsbert.pseudo_pairs``). ``max_length``: tokens read of each text to label, score and
    predict it, an encoder object given included (fewer where the model has fewer positions; a round trains on
    ``train.encoder.max_length``). The default, ``"auto"``, reads 128 where the median text fits in 128 tokens,
    else 512 (``methods.wcsbert.read_length``; the job settles its ``encoder.max_length`` the same way from its
    pool); a number reads that many. ``max_length_`` is the length read.
    ``predict_proba`` is a softmax of the label scores (cosines) over ``temperature``.

    ``guard`` (on by default, as in the job): the label-free check of ``methods.wcsbert.guard`` over a seeded
    sample of ``guard_sample`` texts; the model kept is the round's (or the round-0 model's) whose labels best
    follow the texts' neighbourhoods under the round-0 model and stay nearest their own names, and fitting
    stops after ``patience`` rounds that do not raise it. ``heads``: the heads each model is scored with:
    the label prompts, the prototypes of its own labels of the sampled texts, and their blend
    (``methods.wcsbert.heads``); the first head's score decides whether a round beats the untrained model, the
    score of the head a trained round is delivered with whether it beats an earlier round, unless its teacher still
    changed ``still_learning`` of the texts' labels (``methods.wcsbert.stopping``); a trained model is delivered
    with the blend, and the untrained one with its prototypes where they score clearly better than its prompts.
    ``chosen_round_``, ``chosen_head_`` and ``stop_reason_`` say what happened, each ``history_`` record has the
    round's ``guard`` score and ``head``. Off: the last round is kept, with its prompt head.

    ``work_dir``: where
    the rounds' checkpoints and models are kept (``history_[i]["model"]``); without one they go to a
    temporary folder removed at the end of ``fit``.
    """

    def __init__(self, encoder: Any = DEFAULT_MODEL, *, config: RoundsConfig | None = None,
                 teacher: Teacher | None = None, template: str | None = None, templates: Sequence[str] | None = None,
                 max_length: int | Literal["auto"] | None = None, batch_size: int = 64, temperature: float = 0.05,
                 work_dir: str | os.PathLike[str] | None = None, **settings: Any):
        if template is not None and templates is not None:
            raise ValueError("give template (one prompt) or templates (an ensemble), not both")
        base_calibration = config.calibration if config is not None else CalibrationConfig()
        if isinstance(settings.get("calibration"), bool):  # on or off, with the given block's other settings
            settings["calibration"] = base_calibration.model_copy(update={"enabled": settings["calibration"]})
        if isinstance(settings.get("heads"), str):
            settings["heads"] = [settings["heads"]]
        elif settings.get("heads") is not None:
            settings["heads"] = list(settings["heads"])
        RoundsConfig.refuse_unknown(settings, "WCSBert")
        base = (config or RoundsConfig()).model_dump()
        try:
            # None stands for the default, except where None is a setting of its own (no cap on pairs, the guard
            # alone between rounds)
            given = {k: v for k, v in settings.items()
                     if v is not None or k in ("max_pairs_per_label", "still_learning")}
            self.config = RoundsConfig.model_validate({**base, **given})
        except ValidationError as error:
            raise ValueError(str(error)) from None
        # same_label=None settles to on for texts in memory: the settings show what runs
        self.config = self.config.model_copy(update={"text_positives": self.config.text_positives.resolved()})
        config = self.config
        self.encoder = encoder
        self.teacher: Teacher = teacher if teacher is not None else config.teacher()
        self.rounds = config.rounds
        self.templates = validate_templates(templates) if templates is not None else None
        self.template = self.templates[0] if self.templates else validate_template(template or "{label}")
        self.calibration = config.calibration
        self.selection = config.selection
        self.text_positives = config.text_positives
        self.train = config.train
        self.max_pairs_per_label = config.max_pairs_per_label
        if max_length is not None and max_length != "auto" and not (isinstance(max_length, int) and max_length > 0):
            raise ValueError(f"max_length must be a positive number of tokens or 'auto', not {max_length!r}")
        self.max_length = max_length or "auto"
        self.max_length_: int | None = None  # the tokens read, settled by fit (``auto``: from the texts)
        self.batch_size = batch_size
        self.temperature = temperature
        self.guard = config.guard
        self.guard_sample = config.guard_sample
        self.guard_neighbours = config.guard_neighbours
        self.heads = tuple(config.heads)
        self.patience = config.patience
        self.work_dir = work_dir
        self.encoder_ = None
        self.head_: LabelHead | None = None
        self.chosen_round_: int = 0
        self.chosen_head_: str = "prompts"
        self.stop_reason_: str | None = None
        self.guard_round_0_: dict[str, object] | None = None  # the round-0 model's guard_fields
        self.label_set_: LabelSet | None = None
        self.aliases_: dict[str, list[str]] = {}
        self.history_: list[dict[str, Any]] = []

    @property
    def chooses_head(self) -> bool:
        """Whether the guard chooses the head (it is on and a head other than the prompts is asked for)."""
        return self.guard and any(head != "prompts" for head in self.heads)

    @property
    def prompts(self) -> tuple[str, ...]:
        """The templates that score the labels: ``templates``, or ``template`` alone."""
        return self.templates or (self.template,)

    # ------------------------------------------------------------------ training
    def fit(self, texts: Sequence[str], labels: Sequence[str],
            aliases: Mapping[str, Sequence[str]] | None = None,
            on_round: Callable[[dict[str, Any], Any], None] | None = None) -> "WCSBert":
        """``on_round(entry, encoder)`` is called after each round with its history entry and the round's model."""
        texts = checked_texts(texts)
        self.label_set_ = LabelSet.build(labels, aliases)
        self.aliases_ = {label: list(strings) for label, strings in (aliases or {}).items()}
        if self.max_length == "auto":
            encoder = load_text_encoder(self.encoder)
            encoder = load_text_encoder(encoder, auto_read_length(texts, encoder, seed=self.train.seed))
        else:
            encoder = load_text_encoder(self.encoder, self.max_length)
        self.max_length_ = int(encoder.max_length)
        self.history_, self.chosen_round_, self.stop_reason_, self.guard_round_0_ = [], 0, None, None
        self.chosen_head_, head = "prompts", None
        # with no round the guard still chooses the untrained model's head, given the two texts it needs
        if self.rounds or (self.chooses_head and len(texts) >= 2):
            with work_folder(self.work_dir, "wcsbert") as folder:
                encoder, head = self._self_train(encoder, texts, folder, on_round)
        self.encoder_ = encoder
        self.head_ = head  # the guard's choice; None: the delivered model's prompt vectors, made on first use
        return self

    def _self_train(self, encoder, texts: list[str], folder: Path,
                    on_round: Callable[[dict[str, Any], Any], None] | None = None):
        """The rounds from ``encoder`` (``methods.wcsbert.rounds``); returns the kept round's encoder (in memory) and
        the head the guard chose for it (None without the guard)."""
        guard = (TextGuard.build(encoder, texts, self.label_set_, self.prompts, sample=self.guard_sample,
                                 neighbours=self.guard_neighbours, seed=self.train.seed, batch_size=self.batch_size,
                                 heads=self.heads)
                 if self.guard else None)
        guard_0 = guard.score() if guard is not None else None
        self.guard_round_0_ = guard_fields(guard_0) if guard_0 is not None else None
        stop = RoundStop(self.rounds, patience=self.patience, min_change=self.config.min_change,
                         guard_0=guard_0.value if guard_0 is not None else None,
                         still_learning=self.config.still_learning)
        runner = _RoundsInMemory(self, texts, folder, encoder, on_round)
        outcome = run_rounds(runner, encoder, self.rounds, stop, guard, guard_0)
        self.chosen_round_, self.stop_reason_ = outcome.chosen_round, stop.reason
        self.chosen_head_ = head_kind(outcome.head)
        return outcome.model, outcome.head

    def _pseudo_pairs(self, encoder, texts: list[str], r: int):
        """The round's pseudo-labels, its pairs, each label's share of the teacher's argmaxes, and how many of
        the pairs are text–text pairs."""
        embeddings = encoder.encode(texts, batch_size=self.batch_size)
        prompt_scores, alias = ZeroShotClassifier(encoder, template=self.prompts).score_embeddings_with_aliases(
            embeddings, self.label_set_)
        pseudo, calibrated = self.pseudo_labels(embeddings, prompt_scores, alias,
                                                label_prompt_vectors(encoder, self.label_set_, self.prompts))
        pairs = text_pairs(texts, pseudo, self.label_set_, self.template, self.max_pairs_per_label)
        extra = self.text_positive_pairs(texts, pseudo, r)
        return pseudo, combined(pairs, extra), calibrated.shares, len(extra)

    # ------------------------------------------------------------------ a round's steps (the job's too)
    def pseudo_labels(self, embeddings, prompt_scores: np.ndarray, alias: np.ndarray, label_vectors: np.ndarray):
        """A round's pseudo-labels: the teacher's scores of the texts (``embeddings``: an array or a
        re-iterable of chunks, in the order of ``prompt_scores``' rows), corrected by ``calibration``, then
        the confident share of each label selected. Returns the ``PseudoLabels`` and the calibration."""
        scores = self.teacher.scores(embeddings, prompt_scores, label_vectors)
        calibrated = calibrate(scores, self.calibration)
        return select(calibrated.scores, self.selection, alias), calibrated

    def text_positive_pairs(self, texts: Sequence[str], pseudo, r: int):
        """Round ``r``'s text–text pairs over the kept ``texts`` (none unless ``text_positives`` asks)."""
        return text_positive_pairs(texts, pseudo, self.text_positives, seed=self.train.seed + r,
                                   max_pairs_per_label=self.max_pairs_per_label)

    def train_round(self, pairs, model: str, r: int, work_dir: Path | None = None, *, output: str | None = None,
                    export_to: str | None = None, rows: int | None = None):
        """Round ``r``'s training from ``model`` on ``pairs`` (``pair_columns``): a list of dicts, or a Ray
        Dataset the workers read (``rows`` its length); with text pairs, pairs of one pseudo-label are not each
        other's negatives (MNR grouped by ``label``). ``output`` / ``export_to``: the folder or URI to
        train in and where the model goes (the job's, so an interrupted round resumes); else a new folder
        under ``work_dir``. Returns the fit's result, its ``model_path`` the round's model."""
        update: dict[str, Any] = {"encoder": self.train.encoder.model_copy(update={"model": model})}
        if self.text_positives.enabled:
            # a text pair and its label's prompt pairs belong together: pairs of one label are not negatives
            update["group_column"] = "label"
        return fit_rows(pairs, self.train.model_copy(update=update), work_dir, f"round_{r}", output=output,
                        export_to=export_to, count=rows)

    @property
    def pair_columns(self) -> list[str]:
        """The columns of the pairs a round trains on (``label``: each pair's pseudo-label, with text pairs)."""
        return ["anchor", "positive"] + (["label"] if self.text_positives.enabled else [])

    # ------------------------------------------------------------------ inference
    @property
    def labels(self) -> list[str]:
        self._check_fitted()
        return list(self.label_set_.labels)

    @property
    def head(self) -> LabelHead:
        """What the model predicts with (saved with it): the head the guard chose, else the label prompts'
        vectors under the delivered model."""
        self._check_fitted()
        if self.head_ is None:
            self.head_ = LabelHead.from_prompts(self.encoder_, self.label_set_, self.prompts, self.batch_size)
        return self.head_

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """The delivered model's embeddings of ``texts`` (what the head scores)."""
        self._check_fitted()
        return self.encoder_.encode(checked_texts(texts), batch_size=self.batch_size)

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        """[N, labels] cosine of each text to each label's best vector in the head: its best prompt (or ensemble of
        prompts), its prototype, or their blend."""
        return self.head.scores(self.embed(texts))

    def probabilities(self, scores: np.ndarray) -> np.ndarray:
        """``scores`` as probabilities: a softmax over ``temperature``."""
        return softmax(np.asarray(scores, np.float64) / self.temperature, axis=1).astype(np.float32)

    def embed_and_predict_proba(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Embeddings and label probabilities of ``texts`` from one forward pass (``predict``'s columns)."""
        embeddings = self.embed(texts)
        return embeddings, self.probabilities(self.head.scores(embeddings))

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        return self.probabilities(self.scores(texts))

    def predict(self, texts: Sequence[str]) -> list[str]:
        labels = self.labels
        return [labels[i] for i in self.scores(texts).argmax(axis=1)]

    def _check_fitted(self) -> None:
        if self.encoder_ is None or self.label_set_ is None:
            raise RuntimeError("call fit(texts, labels) first, or WCSBert.load(folder)")

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | os.PathLike[str]) -> Path:
        """The model in sentence-transformers format plus ``wcsbert.json`` (labels, aliases, templates) and
        its head (``head.json``, ``head_vectors.npy``)."""
        self._check_fitted()
        target = self.encoder_.save(path)
        self.head.save(target)
        manifest = {"labels": list(self.label_set_.labels), "aliases": self.aliases_, "template": self.template,
                    "templates": list(self.templates) if self.templates else None, "head": self.head.kind,
                    "temperature": self.temperature,
                    "max_length": int(self.encoder_.max_length)}
        (target / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str], **kwargs) -> "WCSBert":
        """The saved model, its labels and prompts; ``kwargs`` are ``WCSBert``'s settings and win over the
        saved ones (``template`` or ``templates`` replace the saved prompts, ``temperature`` its own)."""
        manifest = json.loads((Path(path) / MANIFEST).read_text(encoding="utf-8"))
        saved = ({"templates": manifest["templates"]} if manifest.get("templates")
                 else {"template": manifest["template"]})
        new_prompts = kwargs.get("template") is not None or kwargs.get("templates") is not None
        if new_prompts:
            saved = {}
        # a folder saved before the length was recorded read the default then
        saved["max_length"] = manifest.get("max_length") or READ_MAX_LENGTH
        start = kwargs.pop("encoder", str(path))  # what a later fit starts from; predictions use the saved model
        model = cls(start, **{**saved, "temperature": manifest["temperature"], **kwargs})
        # "auto" asked of a loaded model settles at the next fit; the saved model reads what it was fitted at
        model.encoder_ = load_text_encoder(str(path), saved["max_length"] if model.max_length == "auto"
                                           else model.max_length)
        model.max_length_ = int(model.encoder_.max_length)
        model.label_set_ = LabelSet.build(manifest["labels"], manifest["aliases"])
        model.aliases_ = manifest["aliases"]
        # a head is the saved model's own unless other prompts were asked for (then made from them on first use)
        model.head_ = None if new_prompts else LabelHead.load(path)
        model.chosen_head_ = model.head_.kind if model.head_ is not None else "prompts"
        return model


class _RoundsInMemory:
    """``WCSBert``'s rounds over texts held in memory: pairs as a list, each round's model in ``folder``."""

    def __init__(self, method: WCSBert, texts: list[str], folder: Path, encoder, on_round=None):
        self.method, self.texts, self.folder, self.on_round = method, texts, folder, on_round
        self.backend = getattr(encoder, "backend_requested", "torch")  # the rounds' models run where the first did
        self.model = encoder_spec(method.encoder, folder / "start") if method.rounds else None  # what round 1 trains
        self.previous: np.ndarray | None = None

    def train(self, r: int, encoder):
        method = self.method
        pseudo, pairs, shares, text_pairs_made = method._pseudo_pairs(encoder, self.texts, r)
        if not len(pairs):
            raise ValueError(f"round {r}: no text was kept for training; raise selection.top_fraction or "
                             "lower selection.threshold")
        order = np.random.default_rng(method.train.seed + r).permutation(len(pairs))
        rows = [{"anchor": pairs.anchors[i], "positive": pairs.positives[i], "label": pairs.labels[i]}
                for i in order]
        result = method.train_round(rows, self.model, r, self.folder)
        self.model = result.model_path
        encoder = load_text_encoder(self.model, method.max_length_).set_backend(self.backend)
        export_seconds = encoder.prepare_backend()  # the new weights exported before they encode
        labels = method.label_set_.labels
        record = {"round": r, "kept": int(len(pseudo.kept)), "pairs": len(pairs),
                  "kept_per_label": dict(zip(labels, pseudo.kept_per_label(len(labels)).tolist())),
                  "teacher_shares": dict(zip(labels, shares.tolist())),
                  "text_pairs": text_pairs_made,
                  "labels_changed": changed_share(self.previous, pseudo.label), "steps": result.steps,
                  "export_seconds": export_seconds,
                  "model": kept_path(self.model, method.work_dir)}
        self.previous = pseudo.label
        return record, encoder

    def finish(self, record: dict[str, Any], encoder) -> dict[str, Any]:
        self.method.history_.append(record)
        if self.on_round is not None:
            self.on_round(record, encoder)
        return record
