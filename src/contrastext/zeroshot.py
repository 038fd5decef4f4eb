"""Zero-shot classification by label prompts: texts and labels in one embedding space, best cosine wins.

A label may have aliases ("Sci/Tech" → "Science", "Technology"); each alias is put into the prompt
template and embedded, and the score of a label is the maximum over its aliases. Several templates may be
given at once (an ensemble): an alias then stands for the renormalised mean of its prompts' unit
embeddings (``mean_prompt_embeddings``). Label-set embeddings are cached (LRU), so a classifier serving
the same labels again only embeds the texts.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Mapping, Protocol, Sequence, Union

import numpy as np

from contrastext.vectors import unit_rows

DEFAULT_TEMPLATE = "This topic is talk about {label}"
DEFAULT_SEPARATORS = ("&", "/")
#: one prompt template, or several whose embeddings are averaged (an ensemble)
Templates = Union[str, Sequence[str]]
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


class Encoder(Protocol):
    def encode(self, texts: Sequence[str], batch_size: int = ...) -> np.ndarray: ...


# ---------------------------------------------------------------- alias helpers
def split_on_separators(label: str, separators: Sequence[str] = DEFAULT_SEPARATORS) -> list[str]:
    """``"Science & Technology"`` → ``["Science", "Technology"]``; a label without separators → ``[]``."""
    parts = [label]
    for separator in separators:
        parts = [piece for part in parts for piece in part.split(separator)]
    parts = [p.strip() for p in parts if p.strip()]
    return parts if len(parts) > 1 else []


def split_camel_case(label: str) -> str | None:
    """``"SciTech"`` → ``"Sci Tech"``, ``"HTMLParser"`` → ``"HTML Parser"``; None when nothing splits."""
    spaced = _CAMEL_BOUNDARY.sub(" ", label)
    return spaced if spaced != label else None


def automatic_aliases(label: str, separators: Sequence[str] = DEFAULT_SEPARATORS) -> list[str]:
    """The label's own spelling first, then its parts (on separators) and their CamelCase splits."""
    aliases = [label.strip()]
    camel = split_camel_case(label.strip())
    if camel:
        aliases.append(camel)
    for part in split_on_separators(label, separators):
        aliases.append(part)
        camel = split_camel_case(part)
        if camel:
            aliases.append(camel)
    return _unique(aliases)


def _unique(items: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = item.strip()
        if key and key not in seen:
            seen.add(key)
            out.append(key)
    return out


@dataclass(frozen=True)
class LabelSet:
    """Labels and, per label, the alias strings that stand for it (the label itself included)."""

    labels: tuple[str, ...]
    aliases: tuple[tuple[str, ...], ...]

    @classmethod
    def build(cls, labels: Sequence[str], aliases: Mapping[str, Sequence[str]] | None = None, *,
              auto_aliases: bool = True, separators: Sequence[str] = DEFAULT_SEPARATORS) -> "LabelSet":
        labels = [str(label) for label in labels]
        if not labels:
            raise ValueError("At least one label is needed.")
        stripped = [label.strip() for label in labels]
        if any(not label for label in stripped):
            raise ValueError("Labels must not be empty or blank.")
        duplicates = sorted({label for label in stripped if stripped.count(label) > 1})
        if duplicates:
            raise ValueError(f"Labels must be distinct; repeated: {duplicates}.")
        aliases = dict(aliases or {})
        unknown = sorted(set(aliases) - set(labels))
        if unknown:
            raise ValueError(f"Aliases given for labels that are not in the label list: {unknown}.")
        per_label = []
        for label in labels:
            own = automatic_aliases(label, separators) if auto_aliases else [label.strip()]
            per_label.append(tuple(_unique([*own, *aliases.get(label, [])])))
        return cls(tuple(labels), tuple(per_label))

    def flat(self) -> tuple[list[str], np.ndarray]:
        """All alias strings in order, and for each the index of the label it belongs to."""
        strings = [a for group in self.aliases for a in group]
        owner = np.repeat(np.arange(len(self.labels)), [len(g) for g in self.aliases])
        return strings, owner


@dataclass
class Prediction:
    label: str
    scores: dict[str, float]
    labels: list[str] = field(default_factory=list)  # multi-label: labels at or over the threshold, best first


def validate_template(template: str) -> str:
    if "{label}" not in template:
        raise ValueError(f"The prompt template must contain '{{label}}': {template!r}.")
    try:
        template.format(label="x")
    except (KeyError, IndexError, ValueError) as error:
        raise ValueError(f"The prompt template may hold only the '{{label}}' field: {template!r} ({error}).") \
            from None
    return template


def validate_templates(templates: Templates) -> tuple[str, ...]:
    """One template or an ensemble of them as a tuple, each checked; an empty or repeating ensemble is an error."""
    if isinstance(templates, str):
        return (validate_template(templates),)
    templates = tuple(templates)
    if not templates:
        raise ValueError("At least one prompt template is needed.")
    repeated = sorted({t for t in templates if templates.count(t) > 1})
    if repeated:
        raise ValueError(f"Prompt templates must be distinct; repeated: {repeated}.")
    return tuple(validate_template(t) for t in templates)


def mean_prompt_embeddings(per_template: np.ndarray) -> np.ndarray:
    """[templates, strings, D] → [strings, D]: the renormalised mean of each string's unit prompt embeddings.

    One template's embeddings are returned as they are (what a single prompt always gave)."""
    if len(per_template) == 1:
        return per_template[0]
    return unit_rows(np.stack([unit_rows(e) for e in per_template]).mean(axis=0))


def label_scores(text_embeddings: np.ndarray, alias_embeddings: np.ndarray, owner: np.ndarray,
                 n_labels: int) -> np.ndarray:
    """Cosine of every text with every alias, reduced to [N, labels] by the maximum over each label's aliases."""
    return label_scores_and_aliases(text_embeddings, alias_embeddings, owner, n_labels)[0]


def label_scores_and_aliases(text_embeddings: np.ndarray, alias_embeddings: np.ndarray, owner: np.ndarray,
                             n_labels: int) -> tuple[np.ndarray, np.ndarray]:
    """``label_scores`` and, per text and label, which of the label's aliases gave the score (its index)."""
    sims = unit_rows(np.asarray(text_embeddings, dtype=np.float32)) @ unit_rows(alias_embeddings).T
    scores = np.full((sims.shape[0], n_labels), -np.inf, dtype=np.float32)
    best_alias = np.zeros((sims.shape[0], n_labels), dtype=np.int64)
    for label in range(n_labels):
        own = sims[:, owner == label]
        best_alias[:, label] = own.argmax(axis=1)
        scores[:, label] = own.max(axis=1)
    return scores, best_alias


class ZeroShotClassifier:
    """Classify texts into labels nobody trained on, with an encoder and a prompt template (or several,
    ensembled: see ``alias_embeddings``).

    ``model_key`` names the encoder in cache keys (e.g. its path), so one cache may serve several
    classifiers safely; by default it is the encoder object's identity.
    """

    def __init__(self, encoder: Encoder, *, template: Templates = DEFAULT_TEMPLATE, model_key: str | None = None,
                 cache_size: int = 128, auto_aliases: bool = True,
                 separators: Sequence[str] = DEFAULT_SEPARATORS, batch_size: int = 64):
        self.encoder = encoder
        templates = validate_templates(template)
        self.template: Templates = template if isinstance(template, str) else templates
        self.model_key = model_key or f"encoder@{id(encoder):x}"
        self.auto_aliases = auto_aliases
        self.separators = tuple(separators)
        self.batch_size = batch_size
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._primed: dict[tuple, np.ndarray] = {}  # saved heads: never evicted, they are not prompts
        self._lock = threading.Lock()
        self.cache_hits = 0
        self.cache_misses = 0

    def label_set(self, labels: Sequence[str], aliases: Mapping[str, Sequence[str]] | None = None,
                  auto_aliases: bool | None = None) -> LabelSet:
        auto = self.auto_aliases if auto_aliases is None else auto_aliases
        return LabelSet.build(labels, aliases, auto_aliases=auto, separators=self.separators)

    def alias_embeddings(self, label_set: LabelSet, template: Templates | None = None) -> np.ndarray:
        """Embeddings of every alias prompt of ``label_set`` (cached by model, templates and label set); with
        several templates, each alias's renormalised mean over them."""
        templates = validate_templates(template or self.template)
        key = (self.model_key, templates, label_set.labels, label_set.aliases)
        with self._lock:
            cached = self._primed.get(key)
            if cached is not None:
                self.cache_hits += 1
                return cached
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                self.cache_hits += 1
                return cached
        strings, _ = label_set.flat()
        prompts = [t.replace("{label}", alias) for t in templates for alias in strings]
        embeddings = np.asarray(self.encoder.encode(prompts, batch_size=self.batch_size), dtype=np.float32)
        embeddings = mean_prompt_embeddings(embeddings.reshape(len(templates), len(strings), -1))
        embeddings.setflags(write=False)
        with self._lock:
            self.cache_misses += 1
            self._cache[key] = embeddings
            self._cache.move_to_end(key)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return embeddings

    def prime(self, label_set: LabelSet, template: Templates, embeddings: np.ndarray) -> None:
        """Take ``embeddings`` as the vectors of ``label_set``'s strings under ``template`` (a saved model's head:
        its prompts or its prototypes), so requests for exactly those labels score with them; kept apart from
        the prompt cache, so no number of other label sets evicts them."""
        key = (self.model_key, validate_templates(template), label_set.labels, label_set.aliases)
        vectors = np.array(embeddings, dtype=np.float32)
        vectors.setflags(write=False)
        with self._lock:
            self._primed[key] = vectors

    def score_embeddings(self, text_embeddings: np.ndarray, label_set: LabelSet,
                         template: Templates | None = None) -> np.ndarray:
        """[N, labels] scores for texts already embedded by this classifier's encoder."""
        return self.score_embeddings_with_aliases(text_embeddings, label_set, template)[0]

    def score_embeddings_with_aliases(self, text_embeddings: np.ndarray, label_set: LabelSet,
                                      template: Templates | None = None) -> tuple[np.ndarray, np.ndarray]:
        """[N, labels] scores and, per text and label, the index of the alias that scored best."""
        _, owner = label_set.flat()
        return label_scores_and_aliases(text_embeddings, self.alias_embeddings(label_set, template), owner,
                                        len(label_set.labels))

    def scores(self, texts: Sequence[str], labels: Sequence[str],
               aliases: Mapping[str, Sequence[str]] | None = None, *, template: Templates | None = None,
               auto_aliases: bool | None = None) -> np.ndarray:
        label_set = self.label_set(labels, aliases, auto_aliases)
        embeddings = self.encoder.encode(list(texts), batch_size=self.batch_size)
        return self.score_embeddings(embeddings, label_set, template)

    def predict(self, texts: Sequence[str], labels: Sequence[str],
                aliases: Mapping[str, Sequence[str]] | None = None, *, template: Templates | None = None,
                auto_aliases: bool | None = None) -> list[str]:
        """The best label of every text."""
        scores = self.scores(texts, labels, aliases, template=template, auto_aliases=auto_aliases)
        return [labels[i] for i in scores.argmax(axis=1)]

    def classify(self, texts: Sequence[str], labels: Sequence[str],
                 aliases: Mapping[str, Sequence[str]] | None = None, *, template: Templates | None = None,
                 auto_aliases: bool | None = None, threshold: float | None = None) -> list[Prediction]:
        """Best label and every label's score per text (and, with ``threshold``, every label over it)."""
        label_set = self.label_set(labels, aliases, auto_aliases)
        embeddings = self.encoder.encode(list(texts), batch_size=self.batch_size)
        return predictions(self.score_embeddings(embeddings, label_set, template), label_set.labels, threshold)


def predictions(scores: np.ndarray, labels: Sequence[str], threshold: float | None = None) -> list[Prediction]:
    out = []
    for row in scores:
        best = int(row.argmax())
        over = np.flatnonzero(row >= threshold) if threshold is not None else np.array([], dtype=int)
        chosen = [labels[i] for i in over[np.argsort(-row[over], kind="stable")]]
        out.append(Prediction(label=labels[best], scores={label: float(s) for label, s in zip(labels, row)},
                              labels=chosen))
    return out
