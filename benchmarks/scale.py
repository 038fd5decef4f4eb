"""The WC-SBERT chain from 100k to 1M synthetic Wikipedia pages: time per page and memory, stage by stage.

    python benchmarks/scale.py --pages 100000 --pages 1000000 --out scale.json
    python benchmarks/scale.py --stages encode --pages 100000 --use-gpu

A synthetic corpus (see ``synthetic_wiki.py``, cached under ``--root``) goes through the real pipeline,
``run_wcsbert`` with a 2-layer, 32-wide random BERT (MiniLM's tokenizer): build category pairs from the page
table → pretrain a fixed number of steps → encode the pool → one self-training round (fixed steps, pool
re-encoded) → evaluation with pool prototypes; then the round and evaluation again with the other teacher
(``rounds.pseudo_labels`` prompts, then prototypes; the corpus, pretraining and pool encoding are reused).

Stage boundaries come from timing wrappers around the pipeline's stage functions; a thread samples every
0.2 s the RSS of this process (the driver) and of every Ray worker process under it. Each ``--pages`` runs in
a process of its own, so no run inherits another's memory. Stages:

- all: generate (if not cached) + the chain; generate: the corpus only; encode: the corpus encoded once
  (``run_encode_corpus``, what the pool stage runs), ``--use-gpu`` puts the encoder actor on a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import ray  # noqa: F401, I001 -- puts Ray's bundled psutil on the path
import psutil  # noqa: I001

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic_wiki import generate

DEFAULT_ROOT = Path("/tmp/contrastext-scale")
STAGE_CHOICES = ("all", "generate", "chain", "encode")
TEACHERS = ("prompts", "prototypes")
MIB = 1024 * 1024
# the label-free guard of the rounds (where the pipeline has it): a reference after the pool encode,
# a score after each round
GUARDED = "guard" in __import__("contrastext.methods.wcsbert.config", fromlist=["RoundsConfig"]).RoundsConfig.model_fields


# ------------------------------------------------------------------------------------------- memory
class MemorySampler:
    """RSS of this process and of the Ray worker processes under it, every ``interval`` seconds."""

    def __init__(self, interval: float = 0.2):
        self.interval = interval
        # (time, driver rss, driver rss less shared pages, largest worker rss)
        self.samples: list[tuple[float, int, int, int]] = []
        self._me = psutil.Process()
        self._workers: dict[int, psutil.Process] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="rss-sampler")

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        self._thread.join()

    def _is_worker(self, process: psutil.Process) -> bool:
        """Task and actor processes: ``ray::<task>`` once started (Ray's own agents excluded)."""
        try:
            args = process.cmdline()
        except psutil.Error:
            return False
        if len(args) > 1 and args[1].endswith("default_worker.py"):
            return True
        return bool(args) and args[0].startswith("ray::") and not args[0].rstrip().endswith("Agent")

    def _largest_worker(self) -> int:
        try:
            children = self._me.children(recursive=True)
        except psutil.Error:
            return 0
        live = {}
        for child in children:
            known = self._workers.get(child.pid)
            if known is not None or self._is_worker(child):
                live[child.pid] = known or child
        self._workers = live
        largest = 0
        for process in live.values():
            try:
                largest = max(largest, process.memory_info().rss)
            except psutil.Error:
                continue
        return largest

    def sample(self) -> None:
        # shared pages are mostly the object store's memory (/dev/shm), mapped by every Ray process
        driver = self._me.memory_info()
        self.samples.append((time.perf_counter(), driver.rss, driver.rss - driver.shared, self._largest_worker()))

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def peaks(self, spans: list[tuple[float, float]]) -> tuple[float, float, float]:
        """Peak driver RSS, driver RSS less shared pages and largest worker RSS (MiB) inside ``spans``."""
        inside = [s for s in self.samples if any(a <= s[0] <= b for a, b in spans)]
        if not inside:  # a span shorter than the interval: the nearest sample
            inside = [min(self.samples, key=lambda s: abs(s[0] - spans[0][0]))]
        return tuple(max(s[k] for s in inside) / MIB for k in (1, 2, 3))


# ------------------------------------------------------------------------------------------- stages
@dataclass
class Interval:
    name: str
    start: float
    end: float = 0.0


@dataclass
class Timeline:
    """Start and end of each call of the wrapped functions, in call order (nested calls included)."""

    intervals: list[Interval] = field(default_factory=list)

    def wrap(self, name: str, fn: Callable) -> Callable:
        def timed(*args, **kwargs):
            interval = Interval(name, time.perf_counter())
            self.intervals.append(interval)
            try:
                return fn(*args, **kwargs)
            finally:
                interval.end = time.perf_counter()
        return timed

    def first(self, name: str, within: Interval | None = None, outside: Interval | None = None,
              after: Interval | None = None) -> Interval | None:
        for i in self.intervals:
            if i.name != name:
                continue
            if within is not None and not (within.start <= i.start and i.end <= within.end):
                continue
            if outside is not None and outside.start <= i.start <= outside.end:
                continue
            if after is not None and i.start < after.end:
                continue
            return i
        return None


@contextmanager
def stage_timing(timeline: Timeline) -> Iterator[None]:
    """Wrap the pipeline's stage functions (module globals, looked up at call time) for the duration."""
    from contrastext import train
    from contrastext.methods.wcsbert import evaluation, stored_rounds
    from contrastext.pipelines import wcsbert

    targets = [(wcsbert, "_stage_corpus", "corpus"), (wcsbert, "pretrain_stage", "pretrain"),
               (wcsbert, "_encode_pool", "encode"), (stored_rounds, "_self_training_round", "round"),
               (evaluation, "evaluate", "evaluate"), (evaluation, "final_prototypes", "prototypes"),
               (train, "fit", "fit")]
    originals = [(module, attr, getattr(module, attr)) for module, attr, _ in targets]
    for module, attr, name in targets:
        setattr(module, attr, timeline.wrap(name, getattr(module, attr)))
    try:
        yield
    finally:
        for module, attr, original in originals:
            setattr(module, attr, original)


@dataclass
class Stage:
    name: str
    spans: list[tuple[float, float]]
    rows: int
    unit: str
    per_row: bool

    @property
    def seconds(self) -> float:
        return sum(b - a for a, b in self.spans)


def chain_stages(timeline: Timeline, run: Interval, run_dir: Path, pages: int, teacher: str,
                 settings: ChainSettings, eval_rows: int, first: bool) -> list[Stage]:
    """The measured stages of one ``run_wcsbert`` call; after the ``first``, only its round and evaluation."""
    stages: list[Stage] = []
    corpus = timeline.first("corpus", within=run)
    if first:
        timings = json.loads((run_dir / "corpus" / "summary.json").read_text())["timings_s"]
        split = corpus.start + timings["read"]
        stages += [Stage("corpus: read page table", [(corpus.start, split)], pages, "pages", True),
                   Stage("corpus: category pairs", [(split, corpus.end)], pages, "pages", True)]
    pretrain = timeline.first("pretrain", within=run)
    if first:
        fit = timeline.first("fit", within=pretrain)
        assert corpus is not None and pretrain is not None and fit is not None
        stages += [Stage("pretrain: dev pages, pair count, dev MAP", [(pretrain.start, fit.start),
                                                                      (fit.end, pretrain.end)], pages, "pages", True),
                   Stage(f"pretrain: fit ({settings.pretrain_steps} steps)", [(fit.start, fit.end)],
                         settings.pretrain_steps * settings.pretrain_batch, "pairs", False)]
    round_ = timeline.first("round", within=run)
    assert round_ is not None
    encode = timeline.first("encode", within=run, outside=round_)
    if first:
        assert encode is not None
        stages.append(Stage("encode pool (M_0)", [(encode.start, encode.end)], pages, "pages", True))
        if GUARDED:
            stages.append(Stage("guard reference (round 0)", [(encode.end, round_.start)], pages, "pages", True))
    fit = timeline.first("fit", within=round_)
    reencode = timeline.first("encode", within=round_)
    evaluate = timeline.first("evaluate", within=run, after=round_)  # the round's model, once it is scored
    assert fit is not None and reencode is not None and evaluate is not None
    prefix = f"round 1, {teacher}"
    stages += [Stage(f"{prefix}: score + select", [(round_.start, fit.start)], pages, "pages", True),
               Stage(f"{prefix}: fit ({settings.round_steps} steps)", [(fit.start, fit.end)],
                     settings.round_steps * settings.round_batch, "pairs", False),
               Stage(f"{prefix}: re-encode pool", [(reencode.start, reencode.end)], pages, "pages", True),
               Stage(f"{prefix}: evaluate", [(evaluate.start, evaluate.end)], eval_rows, "texts", False),
               Stage(f"{'guard, ' if GUARDED else ''}final evaluation, pool prototypes ({teacher})",
                     [(round_.end, evaluate.start), (evaluate.end, run.end)], pages, "pages", True)]
    return stages


# -------------------------------------------------------------------------------------------- chain
@dataclass
class ChainSettings:
    pretrain_steps: int = 30
    pretrain_batch: int = 64
    round_steps: int = 20
    round_batch: int = 32
    max_words: int = 32
    max_length: int = 32
    encode_batch: int = 256
    rows_per_shard: int = 10_000
    encode_cpus: float = 2.0
    use_gpu: bool = False
    encoder: str = "tiny"


def tiny_encoder(root: Path) -> str:
    """A random-weight 2-layer BERT, hidden 32, with MiniLM's tokenizer (made once under ``root``)."""
    from transformers import BertConfig

    from contrastext.models import TextEncoder

    path = root / "tiny-encoder"
    if not (path / "modules.json").is_file():
        config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                            intermediate_size=64, max_position_embeddings=128)
        TextEncoder.from_config(config, pooling="mean", normalize=False, max_length=64).save(path)
    return str(path)


def encoder_model(settings: ChainSettings, root: Path) -> str:
    return tiny_encoder(root) if settings.encoder == "tiny" else settings.encoder


def chain_config(corpus: dict[str, Any], model: str, run_root: Path, teacher: str, settings: ChainSettings):
    from contrastext.config import EncoderConfig, OutputConfig, ScalingSettings, TrainConfig
    from contrastext.data.sources import TextSource
    from contrastext.methods.wcsbert.config import (
        CorpusStageConfig,
        EncodeStageConfig,
        EvaluationConfig,
        LabelsConfig,
        PoolConfig,
        PretrainConfig,
        RoundsConfig,
        WCSBertConfig,
    )
    from contrastext.methods.wcsbert.pseudo_labels import SelectionConfig

    encoder = EncoderConfig(model=model, max_length=settings.max_length)

    def train(batch: int, steps: int) -> TrainConfig:
        return TrainConfig(batch_size=batch, max_steps=steps, encoder=encoder, checkpoint_every_steps=None,
                           log_every_steps=10)

    return WCSBertConfig(
        encoder=encoder,
        labels=LabelsConfig(names=corpus["labels"], aliases={}),
        corpus=CorpusStageConfig(pages_table=[corpus["pages_dir"]]),
        pretrain=PretrainConfig(train=train(settings.pretrain_batch, settings.pretrain_steps), use="always"),
        pool=PoolConfig(source="wikipedia", texts=None, half=None, max_words=settings.max_words),
        encode=EncodeStageConfig(batch_size=settings.encode_batch, rows_per_shard=settings.rows_per_shard,
                                 scaling=ScalingSettings(num_workers=1, cpus_per_worker=settings.encode_cpus,
                                                         use_gpu=settings.use_gpu)),
        # no label balance: a random encoder puts nearly every page under one label, and the balance would then
        # keep a handful of pages, where a trained one keeps about top_fraction of the pool
        rounds=RoundsConfig(rounds=1, pseudo_labels=teacher, prototype_iterations=2,
                            selection=SelectionConfig(max_label_ratio=None),
                            train=train(settings.round_batch, settings.round_steps)),
        evaluation=EvaluationConfig(texts=TextSource(path=corpus["eval"], label_column="label"), half=None, max_rows=None,
                                    baselines=False, prototypes=True, prototype_iterations=1, use_as_dev=False),
        plots=False,
        output=OutputConfig(storage_path=str(run_root), name="chain"))


def run_chain(corpus: dict[str, Any], root: Path, settings: ChainSettings, sampler: MemorySampler) -> list[Stage]:
    """Both teachers through ``run_wcsbert`` in one fresh run folder; the second reuses the shared stages."""
    from contrastext.pipelines.wcsbert import run_wcsbert

    run_root = root / str(corpus["pages"]) / "runs"
    shutil.rmtree(run_root, ignore_errors=True)
    model = encoder_model(settings, root)
    stages: list[Stage] = []
    for n, teacher in enumerate(TEACHERS):
        # the round is run again (its settings differ); its re-encode must not find the last teacher's shards
        shutil.rmtree(run_root / "chain" / "round_1", ignore_errors=True)
        timeline = Timeline()
        with stage_timing(timeline):
            run = Interval("run", time.perf_counter())
            run_wcsbert(chain_config(corpus, model, run_root, teacher, settings))
            run.end = time.perf_counter()
        stages += chain_stages(timeline, run, run_root / "chain", corpus["pages"], teacher, settings,
                               corpus["eval_rows"], first=n == 0)
    return stages


def run_encode(corpus: dict[str, Any], root: Path, settings: ChainSettings) -> list[Stage]:
    """The corpus encoded once by ``run_encode_corpus``, as the pool stage runs it."""
    from contrastext.config import EncoderConfig, OutputConfig, ScalingSettings
    from contrastext.pipelines.corpus import EncodeCorpusConfig, run_encode_corpus

    out = root / str(corpus["pages"]) / "encode-only"
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    summary = run_encode_corpus(EncodeCorpusConfig(
        pages=corpus["pages_dir"], encoder=EncoderConfig(model=encoder_model(settings, root),
                                                         max_length=settings.max_length),
        max_words=settings.max_words, rows_per_shard=settings.rows_per_shard, batch_size=settings.encode_batch,
        scaling=ScalingSettings(num_workers=1, cpus_per_worker=settings.encode_cpus, use_gpu=settings.use_gpu),
        output=OutputConfig(storage_path=str(out.parent), name=out.name)))
    name = f"encode pool ({'GPU' if settings.use_gpu else 'CPU'}, {settings.encoder})"
    return [Stage(name, [(started, time.perf_counter())], summary["rows"], "pages", True)]


# -------------------------------------------------------------------------------------------- report
def stage_row(stage: Stage, sampler: MemorySampler) -> dict[str, Any]:
    driver, private, worker = sampler.peaks(stage.spans)
    return {"stage": stage.name, "seconds": stage.seconds, "rows": stage.rows, "unit": stage.unit,
            "rows_per_s": stage.rows / stage.seconds if stage.seconds > 0 else None,
            "us_per_row": 1e6 * stage.seconds / stage.rows if stage.rows else None, "per_row": stage.per_row,
            "driver_peak_rss_mib": driver, "driver_peak_private_mib": private, "worker_peak_rss_mib": worker}


def measure(pages: int, stages: set[str], root: Path, settings: ChainSettings) -> dict[str, Any]:
    """Generate (or reuse) the corpus and run the chosen stages under one sampler; Ray must be started."""
    result: dict[str, Any] = {"pages": pages, "settings": settings.__dict__, "cpus": os.cpu_count(),
                              "load_before": os.getloadavg()}
    measured: list[Stage] = []
    with MemorySampler() as sampler:
        sampler.sample()
        result["driver_rss_start_mib"] = sampler.samples[0][1] / MIB
        started = time.perf_counter()
        corpus = generate(pages, root)
        if corpus["generated"]:
            measured.append(Stage("generate synthetic corpus", [(started, time.perf_counter())], pages, "pages",
                                  False))
        chain_started = time.perf_counter()
        if stages & {"all", "chain"}:
            measured += run_chain(corpus, root, settings, sampler)
        if "encode" in stages:
            measured += run_encode(corpus, root, settings)
        sampler.sample()
        chain_spans = [(chain_started, time.perf_counter())]
        (result["driver_peak_rss_mib"], result["driver_peak_private_mib"],
         result["worker_peak_rss_mib"]) = sampler.peaks(chain_spans)
    result["corpus"] = corpus
    result["stages"] = [stage_row(s, sampler) for s in measured]
    result["load_after"] = os.getloadavg()
    return result


def table(results: list[dict[str, Any]]) -> str:
    from contrastext.report import format_table

    rows = []
    for result in results:
        for s in result["stages"]:
            rows.append([f"{result['pages']:,}", s["stage"], f"{s['seconds']:.1f}",
                         f"{s['rows_per_s']:,.0f} {s['unit']}/s", f"{s['driver_peak_rss_mib']:.0f}",
                         f"{s['driver_peak_private_mib']:.0f}", f"{s['worker_peak_rss_mib']:.0f}"])
        rows.append([f"{result['pages']:,}", "whole chain (peak)", "", "", f"{result['driver_peak_rss_mib']:.0f}",
                     f"{result['driver_peak_private_mib']:.0f}", f"{result['worker_peak_rss_mib']:.0f}"])
    return format_table(rows, headers=["pages", "stage", "s", "rate", "driver RSS MiB", "driver private MiB",
                                       "worker RSS MiB"])


def compare(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Largest over smallest corpus: driver peak RSS ratio and, per stage, the ratio of time per row."""
    small, large = min(results, key=lambda r: r["pages"]), max(results, key=lambda r: r["pages"])
    base = {s["stage"]: s for s in small["stages"]}
    per_stage = {s["stage"]: s["us_per_row"] / base[s["stage"]]["us_per_row"]
                 for s in large["stages"] if s["stage"] in base and s["per_row"] and base[s["stage"]]["us_per_row"]}
    fixed = {s["stage"]: s["seconds"] / base[s["stage"]]["seconds"]
             for s in large["stages"] if s["stage"] in base and not s["per_row"]}
    return {"pages": [small["pages"], large["pages"]],
            "driver_peak_ratio": large["driver_peak_rss_mib"] / small["driver_peak_rss_mib"],
            "driver_peak_mib": large["driver_peak_rss_mib"],
            "driver_private_peak_ratio": large["driver_peak_private_mib"] / small["driver_peak_private_mib"],
            "time_per_row_ratio": per_stage,
            "fixed_stage_time_ratio": fixed}


# ---------------------------------------------------------------------------------------------- CLI
def parse_stages(text: str) -> set[str]:
    stages = {s.strip() for s in text.split(",") if s.strip()}
    unknown = stages - set(STAGE_CHOICES)
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown stages {sorted(unknown)}; choose from {', '.join(STAGE_CHOICES)}")
    return stages


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, action="append", help="corpus size; repeat for several (default 100000)")
    parser.add_argument("--stages", type=parse_stages, default={"all"}, help="all | generate | chain | encode, "
                                                                             "comma-separated")
    parser.add_argument("--use-gpu", action="store_true", help="encoder actors on a GPU")
    parser.add_argument("--encoder", default="tiny", help="tiny (random 2-layer BERT), bundled:minilm or a folder")
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="scratch folder: corpora and runs")
    parser.add_argument("--pretrain-steps", type=int, default=ChainSettings.pretrain_steps)
    parser.add_argument("--round-steps", type=int, default=ChainSettings.round_steps)
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    return parser.parse_args(argv)


def settings_from(args: argparse.Namespace) -> ChainSettings:
    return ChainSettings(pretrain_steps=args.pretrain_steps, round_steps=args.round_steps, use_gpu=args.use_gpu,
                         encoder=args.encoder, encode_cpus=1.0 if args.use_gpu else ChainSettings.encode_cpus)


def run_one(args: argparse.Namespace) -> dict[str, Any]:
    from contrastext.config import RayConfig
    from contrastext.runtime import init_ray

    init_ray(RayConfig(), verbose=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    return measure(args.pages[0], args.stages, args.root, settings_from(args))


def run_each_in_own_process(args: argparse.Namespace, argv: list[str]) -> list[dict[str, Any]]:
    results = []
    for pages in args.pages:
        out = args.root / f"result-{pages}.json"
        rest = [a for i, a in enumerate(argv) if a != "--pages" and (i == 0 or argv[i - 1] != "--pages")
                and a != "--out" and (i == 0 or argv[i - 1] != "--out")]
        subprocess.run([sys.executable, __file__, *rest, "--pages", str(pages), "--out", str(out)], check=True)
        results.append(json.loads(out.read_text())["results"][0])
    return results


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = arguments(argv)
    args.pages = args.pages or [100_000]
    args.root.mkdir(parents=True, exist_ok=True)
    results = run_each_in_own_process(args, argv) if len(args.pages) > 1 else [run_one(args)]
    output: dict[str, Any] = {"results": results}
    if len(results) > 1:
        output["comparison"] = compare(results)
    print(table(results))
    if "comparison" in output:
        print(json.dumps(output["comparison"], indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(output, indent=2))
        print(f"written to {args.out}")


if __name__ == "__main__":
    main()
