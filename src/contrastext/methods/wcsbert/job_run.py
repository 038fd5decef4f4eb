"""What the stages of one ``wcsbert_selftrain`` run share (``contrastext.pipelines.wcsbert``): the settings,
the run's folder, the label set, the pool, the evaluation set and how the pool is encoded."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from contrastext import storage
from contrastext.evaluators.zeroshot_accuracy import ZeroShotEvaluator
from contrastext.methods.wcsbert.config import WCSBertConfig
from contrastext.stages import Timings

#: the job's name in its console lines and stage markers
JOB = "wcsbert"


@dataclass
class EvalSet:
    """The labelled texts a run is scored on (never trained on): the evaluator, its size and a description."""

    evaluator: ZeroShotEvaluator
    rows: int
    source: str


#: ``encode_pool(model, out, made_with)``: the pool encoded by ``model`` into ``out`` as ``.h5`` shards (a stage;
#: ``made_with`` fingerprints the settings that made the model); returns the stage's result (``rows``)
PoolEncoder = Callable[[str, str, "str | None"], dict[str, Any]]


@dataclass
class JobRun:
    """One run's shared state; ``encode_pool`` is the job's (Ray Data, ``pipelines.corpus``), so the method's
    parts never import a pipeline."""

    config: WCSBertConfig
    folder: str
    label_set: Any
    pages: str
    eval_set: EvalSet | None
    timings: Timings
    method: Any  # methods.wcsbert.WCSBert: each round's pseudo-labels and training
    encode_pool: PoolEncoder
    #: model → where its evaluation, made in this run, kept the evaluation texts' embeddings
    evaluated: dict[str, str] = field(default_factory=dict)

    def path(self, *parts: str) -> str:
        return storage.join(self.folder, *parts)
