"""Settings of the WC-SBERT job: corpus → category pretraining → encode → self-training rounds → evaluation."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from contrastext.config import (
    EncoderConfig,
    OptimizerConfig,
    OutputConfig,
    RayConfig,
    ReadLength,
    ScalingSettings,
    Settings,
    TrainConfig,
)
from contrastext.data.pairs import PairOptions
from contrastext.data.sources import TextSource, vital_articles
from contrastext.data.vital import TOPIC_ALIASES, TOPICS
from contrastext.methods.wcsbert.calibration import CalibrationConfig
from contrastext.methods.wcsbert.pseudo_labels import SelectionConfig
from contrastext.methods.wcsbert.teachers import PromptTeacher, PrototypeTeacher, Teacher
from contrastext.methods.wcsbert.text_positives import TextPositivesConfig
from contrastext.zeroshot import DEFAULT_TEMPLATE, validate_templates

Half = Literal["first", "second"]


class LabelsConfig(Settings):
    """The target label set L and how each label is put to the encoder."""

    names: list[str] = Field(default_factory=lambda: list(TOPICS), min_length=2,
                             description="default: the 11 topics of Wikipedia's Vital articles")
    aliases: dict[str, list[str]] = Field(
        default_factory=lambda: {k: list(v) for k, v in TOPIC_ALIASES.items()},
        description="label → strings embedded in its place; its score is the best of them")
    keep_label: bool = Field(False, description="also embed a label's own spelling beside its aliases")
    template: str = Field("{label}", description="prompt with {label}; \"{label}\": the label (or alias) alone, "
                                                 "best for the Vital topics; e.g. DEFAULT_TEMPLATE "
                                                 f"\"{DEFAULT_TEMPLATE}\" for AG News")
    templates: list[str] | None = Field(
        None, description="several prompts instead of `template`, ensembled: each label string stands for the "
                          "renormalised mean of its prompts' unit embeddings; training pairs take the first "
                          "(None: `template` alone)")

    @property
    def prompts(self) -> tuple[str, ...]:
        """The templates that score the labels (one, or the ensemble)."""
        return tuple(self.templates) if self.templates is not None else (self.template,)

    @property
    def pair_template(self) -> str:
        """The template of the training pairs' positives: the first of an ensemble."""
        return self.prompts[0]

    @model_validator(mode="after")
    def _aliases_name_labels(self) -> "LabelsConfig":
        unknown = sorted(set(self.aliases) - set(self.names))
        if unknown:
            raise ValueError(f"aliases given for labels not in names: {unknown}")
        if len(set(self.names)) != len(self.names):
            raise ValueError("label names must be distinct")
        return self

    @model_validator(mode="after")
    def _templates_valid(self) -> "LabelsConfig":
        # a dumped config carries the default template beside an ensemble: only another template conflicts
        if self.templates is not None and self.template != LabelsConfig.model_fields["template"].default:
            raise ValueError("give labels.template (one prompt) or labels.templates (an ensemble), not both")
        try:
            validate_templates(self.prompts)
        except ValueError as error:
            raise ValueError(f"labels.{'templates' if self.templates is not None else 'template'}: {error}") \
                from None
        return self


class CorpusStageConfig(Settings):
    """Wikipedia pages and category pairs (the build_corpus job); skipped for a plain-text pool."""

    dump: str | None = Field(None, description="pages-articles .xml.bz2; None: the real dump sample")
    index: str | None = Field(None, description="multistream index for parallel reading")
    pages_table: list[str] | None = Field(None, description="instead of a dump: page files or folders (HF "
                                                            "wikipedia layout, or pages with a categories column)")
    pairs: PairOptions = Field(default_factory=PairOptions)


#: the embedded default pretrains briefly (a full pass over the dump sample's 10k pairs takes ~5 min on 2
#: CPU cores and is used only if its dev MAP@3 improves); a real dump wants ``pretrain.train.max_steps: null``
PRETRAIN_DEFAULT_STEPS = 10


#: a worker and an encoder actor each take two cores: on a 2-core machine one stage uses the whole machine
DEFAULT_SCALING = ScalingSettings(num_workers=1, cpus_per_worker=2.0)


def _pretrain_train() -> TrainConfig:
    return TrainConfig(batch_size=128, epochs=1, max_steps=PRETRAIN_DEFAULT_STEPS, encoder=EncoderConfig(max_length=128),
                       optimizer=OptimizerConfig(lr=2e-5, warmup_ratio=0.1), no_duplicates=True,
                       checkpoint_every_steps=500, scaling=DEFAULT_SCALING.model_copy())


class PretrainConfig(Settings):
    """Stage 1: MNR on (category, category) pairs of the same page."""

    enabled: bool = True
    train: TrainConfig = Field(default_factory=_pretrain_train)
    dev_fraction: float = Field(0.001, ge=0, lt=1, description="pages with exactly 3 categories held out for "
                                                               "MAP@3")
    dev_min_pages: int = Field(10, ge=0, description="hold out at least this many such pages when there are")
    query_words: int = Field(20, ge=1, description="a dev query is the page's first words")
    use: Literal["always", "if_dev_improves"] = Field(
        "if_dev_improves", description="if_dev_improves: self-train from the pretrained model only when its dev MAP@3 "
                              "beats the untrained model's, else from the untrained model (a label-free rule)")


class PoolConfig(Settings):
    """What self-training reads without labels: Wikipedia pages (with categories) or plain texts."""

    source: Literal["wikipedia", "texts"] = Field("texts", description="default: the Vital articles' first half")
    texts: TextSource | None = Field(default_factory=lambda: vital_articles(labelled=False),
                                     description="source=texts: the texts (labels never read)")
    half: Half | None = Field("first", description="take one half of the texts (split by split_seed)")
    split_seed: int = 0
    max_rows: int | None = Field(2000, ge=1, description="source=texts: a seeded sample of this many texts "
                                                         "(None: all)")
    max_words: int = Field(200, ge=1, description="words of each page or text that are encoded")

    @model_validator(mode="after")
    def _texts_given(self) -> "PoolConfig":
        if self.source == "texts" and self.texts is None:
            raise ValueError("pool.source=texts needs pool.texts (a file of unlabelled texts)")
        return self


#: rounds train on a text's first 64 tokens (a lead's title and first sentence say its topic): half the
#: compute of 128, which the pool's encoding keeps
ROUND_MAX_LENGTH = 64
#: the tokens of each text read to label, score and predict it where the texts are short (``max_length="auto"``,
#: the default of the job, the class and Serve's classifiers; fewer where the model has fewer positions).
#: Long texts gain from 512 (20 Newsgroups: 0.706 delivered against 0.645), but the Vital leads lose (the quick
#: start delivered 0.821 and 0.835 at 512 against 0.838 and 0.855 at 128, two seeds). The job measures its pool
#: as it is encoded, cut at ``pool.max_words`` (200 words)
READ_MAX_LENGTH = 128


def round_train() -> TrainConfig:
    """A round's training: MNR, batch 32, one epoch, the first 64 tokens, one 2-core worker."""
    return TrainConfig(batch_size=32, epochs=1, encoder=EncoderConfig(max_length=ROUND_MAX_LENGTH),
                       optimizer=OptimizerConfig(lr=2e-5, warmup_ratio=0.1), no_duplicates=False,
                       checkpoint_every_steps=None, scaling=DEFAULT_SCALING.model_copy())


class RoundsConfig(Settings):
    """Stage 3: label the pool with the current model, train on the confident part, repeat. The same settings
    are ``WCSBert``'s (``WCSBert(config=...)`` or one keyword per field); ``init`` and ``reencode`` concern the
    job's pool on ``.h5`` shards only."""

    rounds: int = Field(2, ge=0)
    selection: SelectionConfig = Field(default_factory=SelectionConfig)
    max_pairs_per_label: int | None = Field(5000, ge=1, description="cap on pseudo-pairs per label (for each "
                                                                    "kind of pair on its own)")
    pseudo_labels: Literal["prompts", "prototypes"] = Field(
        "prototypes", description="prompts: each item's best label prompt; prototypes: its nearest label prototype "
                               "(prompt-labelled centroids refined by k-means on the pool, see methods.wcsbert.prototypes)")
    prototype_fraction: float = Field(0.5, gt=0, le=1, description="pseudo_labels=prototypes: share of each "
                                                                   "label's items that seed its prototype")
    prototype_iterations: int = Field(0, ge=0, description="pseudo_labels=prototypes: k-means refinements "
                                                           "(they drift from the labels when topics overlap)")
    calibration: CalibrationConfig = Field(
        default_factory=CalibrationConfig, description="label-prior calibration of the teacher's scores before "
                                                       "selection (methods.wcsbert.calibration; off by default)")
    text_positives: TextPositivesConfig = Field(
        default_factory=TextPositivesConfig, description="text–text pairs beside the (text, label prompt) ones: "
        "two word spans of a kept text (off by default), two kept texts of one pseudo-label (on by default "
        "for a plain-text pool, off for Wikipedia; methods.wcsbert.text_positives)")
    init: Literal["previous", "base"] = Field(
        "previous", description="round r trains from round r-1's model, or always from the stage-1 model")
    reencode: bool = Field(True, description="re-encode the pool with each round's model (False: score the "
                                             "stored embeddings again, faster, with the new label prompts)")
    train: TrainConfig = Field(default_factory=round_train)
    guard: bool = Field(True, description="label-free: keep the model whose pool labels best follow the pool's "
                                          "neighbourhoods under the round-0 model and stay nearest their own "
                                          "names (methods.wcsbert.guard), stop when a round lowers it; off: the last "
                                          "round is kept")
    guard_sample: int = Field(20_000, ge=10, description="pool items sampled for the guard's neighbourhoods")
    heads: list[Literal["prompts", "prototypes", "blend"]] = Field(
        ["prompts", "prototypes", "blend"], min_length=1,
        description="the heads the guard scores each model with: the label prompts, the prototypes of the "
                    "model's own labels of the guard's sample, and their blend (methods.wcsbert.heads); the first "
                    "head's score decides whether a round beats the round-0 model, the delivered head's whether it "
                    "beats an earlier round; a trained model is delivered with the blend where asked for, "
                    "else another head where it scores clearly better (methods.wcsbert.guard); the prompts alone with "
                    "reencode: false")
    guard_neighbours: int = Field(10, ge=1)
    patience: int = Field(1, ge=1, description="rounds without improvement of the stopping signal before stopping")
    min_change: float = Field(0.005, ge=0, description="stop when fewer than this share of pool labels change")
    still_learning: float | None = Field(
        0.15, ge=0, le=1, description="the trained round after the kept one is kept even where the blend's guard "
                                      "falls when at least this share of the pool's pseudo-labels changed between "
                                      "its teacher and the kept round's, and its prompt head still beats the "
                                      "round-0 model's (methods.wcsbert.stopping); None: the guard alone")

    def teacher(self) -> Teacher:
        """The teacher ``pseudo_labels`` names, with its settings."""
        if self.pseudo_labels == "prototypes":
            return PrototypeTeacher(fraction=self.prototype_fraction, iterations=self.prototype_iterations)
        return PromptTeacher()


class EvaluationConfig(Settings):
    texts: TextSource | None = Field(default_factory=vital_articles,
                                     description="labelled texts; skipped (and said so) when absent; given as a "
                                                 "mapping, its label column is `label` unless it says otherwise")
    half: Half | None = Field("second", description="evaluate on one half only (the other may be the pool)")
    split_seed: int = 0
    max_rows: int | None = Field(1000, ge=1, description="a seeded sample of this many rows (None: all)")
    baselines: bool = Field(True, description="also score the untrained model: labels only / prompt, "
                                              "labels as written / with aliases")
    label_mapping: bool = Field(False, description="also score query → nearest pseudo-labelled category → label")
    prototypes: bool = Field(True, description="also classify by label prototypes: the mean embedding of each "
                                               "label's most confident pool items (no gold label read)")
    prototype_fraction: float = Field(0.5, gt=0, le=1, description="share of each label's pool items averaged")
    prototype_iterations: int = Field(0, ge=0, description="k-means refinements of the prototypes on the pool")
    use_as_dev: bool = Field(False, description="choose the best round and stop early on this set's accuracy "
                                                "(off: the label-free signal decides)")

    @field_validator("texts", mode="before")
    @classmethod
    def _labelled_by_default(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {"label_column": "label", **value}
        return value

    @model_validator(mode="after")
    def _texts_have_labels(self) -> "EvaluationConfig":
        if self.texts is not None and self.texts.label_column is None:
            raise ValueError("evaluation.texts needs a label_column: the evaluation compares with its labels")
        return self


class EncodeStageConfig(Settings):
    batch_size: int = Field(64, ge=1)
    rows_per_shard: int = Field(10_000, ge=1)
    scaling: ScalingSettings = Field(default_factory=lambda: DEFAULT_SCALING.model_copy())
    dtype: Literal["float16", "float32"] = "float16"


class ReadEncoderConfig(EncoderConfig):
    """M_base, and the tokens of each text read to label, score and predict it. ``auto`` is settled from the pool
    when the job starts (``methods.wcsbert.read_length``), as ``WCSBert`` settles it from its texts."""

    max_length: ReadLength = Field(
        "auto", description="tokens read of each text at most; auto: 128 where the pool's median text (cut at "
        "pool.max_words) fits in 128 tokens, else 512 (fewer where the model has fewer positions)")

    def at_length(self, max_length: int) -> EncoderConfig:
        """These settings reading ``max_length`` tokens, as the plain encoder settings a training takes."""
        return EncoderConfig(**self.model_dump(exclude={"max_length"}), max_length=max_length)

    def load(self, model=None, *, max_length: int | None = None, device: str | None = None,
             backend: str | None = None):
        if max_length is None and self.max_length == "auto":
            raise ValueError("encoder.max_length is 'auto': settle it from the pool first "
                             "(methods.wcsbert.read_length.settle_read_length)")
        return super().load(model, max_length=max_length, device=device, backend=backend)


class WCSBertConfig(Settings):
    """Zero-shot text classification by WC-SBERT: Wikipedia categories, then self-training on a label set."""

    data_dir: str | None = Field(None, description="datasets folder for relative paths; None: $CONTRASTEXT_DATA, "
                                                   "else ../shared/data")
    encoder: ReadEncoderConfig = Field(default_factory=ReadEncoderConfig, description="M_base")
    labels: LabelsConfig = Field(default_factory=LabelsConfig)
    corpus: CorpusStageConfig = Field(default_factory=CorpusStageConfig)
    pretrain: PretrainConfig = Field(default_factory=PretrainConfig)
    pool: PoolConfig = Field(default_factory=PoolConfig)
    encode: EncodeStageConfig = Field(default_factory=EncodeStageConfig)
    rounds: RoundsConfig = Field(default_factory=RoundsConfig)
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    plots: bool = True
    output: OutputConfig = Field(default_factory=lambda: OutputConfig(name="wcsbert"))
    ray: RayConfig = Field(default_factory=RayConfig)

    @field_validator("encoder", mode="before")
    @classmethod
    def _plain_encoder_settings(cls, value: Any) -> Any:
        return value.model_dump() if isinstance(value, EncoderConfig) and not isinstance(value, ReadEncoderConfig) \
            else value

    def text_positives(self) -> TextPositivesConfig:
        """The rounds' text positives as this pool resolves them (same-label pairs on for a plain-text pool)."""
        return self.rounds.text_positives.resolved(plain_texts=self.pool.source == "texts")

    @model_validator(mode="after")
    def _text_positives_need_texts(self) -> "WCSBertConfig":
        positives = self.rounds.text_positives
        if self.pool.source != "texts" and (positives.crops or positives.same_label):
            raise ValueError("rounds.text_positives needs pool.source=texts: a Wikipedia pool's pairs are "
                             "categories, it has no kept texts to pair")
        return self
