"""Model deployments: replicas that hold encoders and answer embed / classify calls from the ingress.

``EncoderDeployment`` serves one configured model, with dynamic batching (``serve.batcher``): the texts
of concurrent requests are encoded in one forward pass and their label scores computed in the same call
on the model thread. ``PathModelDeployment`` exists only when the operator allows requests to name a
model folder; it loads such models on demand (LRU, no batching).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from ray import serve

from contrastext.serve.batcher import DynamicBatcher
from contrastext.serve.config import ServedModelConfig, ZeroShotSettings
from contrastext.zeroshot import LabelSet, ZeroShotClassifier, predictions

log = logging.getLogger(__name__)


def process_rss_bytes() -> int:
    """Resident memory of this process (Linux /proc; elsewhere the peak from getrusage)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        import resource
        import sys

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


@dataclass
class EncodeJob:
    """One request's work for a model: embed ``texts`` and, with a label set, score them against it."""

    texts: list[str]
    label_set: LabelSet | None = None
    template: str | None = None


@dataclass
class JobResult:
    embeddings: np.ndarray
    scores: np.ndarray | None = None


def pin_malloc_thresholds(mmap_threshold: int = 1 << 16, trim_threshold: int = 1 << 20) -> bool:
    """Fix glibc's mmap and trim thresholds (Linux); returns whether they were set.

    By default glibc raises its mmap threshold each time a large block is freed, after which the
    activation tensors of batches of varying shape are carved from the heap and fragment it: a replica's
    memory then creeps up request after request. With fixed thresholds large blocks go back to the system.
    """
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    return bool(libc.mallopt(m_mmap_threshold, mmap_threshold)) and bool(libc.mallopt(m_trim_threshold,
                                                                                      trim_threshold))


class ModelRunner:
    """One loaded encoder, its zero-shot classifier and the single thread its forward passes run on.

    One thread per model keeps forward passes from competing for the replica's CPU threads and keeps
    the replica's event loop free for health checks and for gathering the next batch. A batch of jobs
    is one call on that thread: one forward pass over all their texts, then each job's label scores.
    """

    def __init__(self, name: str, config: ServedModelConfig, zeroshot: ZeroShotSettings):
        import torch

        from contrastext.models import TextEncoder, cpu_has_native_bf16, resolve_model_path
        from contrastext.models.encoder import model_token_limit

        self.name = name
        self.config = config
        if config.pin_malloc_thresholds:
            pin_malloc_thresholds()
        threads = config.torch_threads or max(1, int(config.num_cpus))
        torch.set_num_threads(threads)
        device = "cuda" if config.use_gpu and torch.cuda.is_available() else "cpu"
        if config.use_gpu and device == "cpu":
            log.warning("model %s: use_gpu is set but no GPU is visible; running on CPU", name)
        self.path = str(resolve_model_path(config.model, allow_download=config.allow_download))
        self.encoder = TextEncoder.from_pretrained(self.path, max_length=config.max_length,
                                                   normalize=config.normalize, device=device,
                                                   backend=config.backend)
        self.encoder.prepare_backend()  # export (cached) at start, not inside the first request
        self.encoder.pad_to_multiple_of = config.pad_to_multiple_of
        self.encoder.bf16_on_gpu = config.precision != "fp32"
        if device == "cpu" and self.encoder.backend == "torch" and (config.precision == "bf16" or (config.precision == "auto"
                                                               and cpu_has_native_bf16())):
            # bf16 weights, not autocast: autocast would cast every weight again on every forward pass
            self.encoder.transformer.to(torch.bfloat16)
        limit = model_token_limit(self.encoder.transformer, self.encoder.tokenizer)
        if limit and self.encoder.max_length > limit:
            log.warning("model %s: max_length %d exceeds the model's limit of %d tokens; long texts will fail",
                        name, self.encoder.max_length, limit)
        self.classifier = ZeroShotClassifier(self.encoder, template=zeroshot.template, model_key=self.path,
                                             cache_size=zeroshot.label_cache_size,
                                             batch_size=config.encode_batch_size)
        from contrastext.methods.wcsbert.heads import saved_head

        saved = saved_head(self.path)  # a WC-SBERT model: its own labels score with its saved head
        if saved is not None:
            self.classifier.prime(*saved)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"model-{name}")

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    # ------------------------------------------------------------ on the model thread
    def process(self, jobs: Sequence[EncodeJob]) -> list[JobResult | Exception]:
        """Results of ``jobs`` in order; a job that fails gets its exception, the others their results."""
        flat = [text for job in jobs for text in job.texts]
        try:
            embeddings = self.encoder.encode(flat, self.config.encode_batch_size)
        except Exception:
            if len(jobs) == 1:
                raise
            # find the job(s) at fault, so the others still get answers
            return [self._process_alone(job) for job in jobs]
        bounds = np.cumsum([0] + [len(job.texts) for job in jobs])
        return [self._finish(job, embeddings[a:b]) for job, a, b in zip(jobs, bounds[:-1], bounds[1:])]

    def _process_alone(self, job: EncodeJob) -> JobResult | Exception:
        try:
            return self.process([job])[0]
        except Exception as error:  # noqa: BLE001 -- handed back to that job's caller, raised there
            return error

    def _finish(self, job: EncodeJob, embeddings: np.ndarray) -> JobResult | Exception:
        if job.label_set is None:
            return JobResult(embeddings)
        try:  # a label set not in the cache costs one forward pass over its prompts
            return JobResult(embeddings, self.classifier.score_embeddings(embeddings, job.label_set, job.template))
        except Exception as error:  # noqa: BLE001 -- this job's failure only
            return error

    # ------------------------------------------------------------ from the event loop, unbatched
    async def submit(self, job: EncodeJob) -> JobResult:
        result = (await self.run(self.process, [job]))[0]
        if isinstance(result, Exception):
            raise result
        return result

    def classify_job(self, texts: Sequence[str], labels: Sequence[str],
                     aliases: Mapping[str, Sequence[str]] | None, auto_aliases: bool,
                     template: str | None) -> EncodeJob:
        return EncodeJob(list(texts), self.classifier.label_set(labels, aliases, auto_aliases),
                         template or self.classifier.template)

    def answer(self, result: JobResult, label_set: LabelSet, template: str,
               threshold: float | None) -> dict[str, Any]:
        results = predictions(result.scores, label_set.labels, threshold)
        return {"template": template,
                "results": [{"label": p.label, "scores": p.scores,
                             "labels": p.labels if threshold is not None else None} for p in results]}

    def info(self) -> dict[str, Any]:
        return {"name": self.name, "model": self.config.model, "path": self.path,
                "dimension": self.encoder.embedding_dimension, "max_length": self.encoder.max_length,
                "normalize": self.encoder.normalize, "device": str(self.encoder.device),
                "precision": self.precision, "backend": self.encoder.backend}

    @property
    def precision(self) -> str:
        """What forward passes run in: bf16 (autocast on GPU, bf16 weights on CPU) or fp32."""
        import torch

        if self.encoder.device.type == "cuda":
            return "bf16" if self.encoder.bf16_on_gpu else "fp32"
        return "bf16" if next(self.encoder.transformer.parameters()).dtype == torch.bfloat16 else "fp32"


@serve.deployment
class EncoderDeployment:
    """Replicas of one served model; with batching on, concurrent requests share forward passes."""

    def __init__(self, name: str, model: dict[str, Any], zeroshot: dict[str, Any]):
        config = ServedModelConfig.model_validate(model)
        self.runner = ModelRunner(name, config, ZeroShotSettings.model_validate(zeroshot))
        self.batching = config.batching
        self.batcher: DynamicBatcher[EncodeJob, JobResult] | None = None
        if config.batching.enabled:
            self.batcher = DynamicBatcher(self._run_batch, max_batch_size=config.batching.max_batch_size,
                                          batch_wait_timeout_s=config.batching.batch_wait_timeout_s)
        self.requests = 0

    async def _run_batch(self, jobs: list[EncodeJob]) -> list[JobResult | Exception]:
        return await self.runner.run(self.runner.process, jobs)

    async def _submit(self, job: EncodeJob) -> JobResult:
        self.requests += 1
        if self.batcher is None:
            return await self.runner.submit(job)
        return await self.batcher.submit(job)

    async def encode(self, texts: list[str]) -> np.ndarray:
        return (await self._submit(EncodeJob(texts))).embeddings

    async def classify(self, texts: list[str], labels: list[str], aliases: dict[str, list[str]] | None,
                       auto_aliases: bool, template: str | None, threshold: float | None) -> dict[str, Any]:
        job = self.runner.classify_job(texts, labels, aliases, auto_aliases, template)
        result = await self._submit(job)
        return self.runner.answer(result, job.label_set, job.template, threshold)

    def info(self) -> dict[str, Any]:
        classifier = self.runner.classifier
        stats = self.batcher.stats.as_dict() if self.batcher is not None else {
            "batches": 0, "batched_requests": 0, "mean_batch_size": 0.0, "batch_sizes": {}, "busy_seconds": 0.0}
        return {**self.runner.info(), "batching": self.batching.model_dump(), "pid": os.getpid(),
                "rss_bytes": process_rss_bytes(), "requests": self.requests, **stats,
                "label_cache": {"hits": classifier.cache_hits, "misses": classifier.cache_misses}}


@serve.deployment
class PathModelDeployment:
    """Models named by path in requests (only deployed when the operator allows it)."""

    def __init__(self, template: dict[str, Any], zeroshot: dict[str, Any], max_models: int):
        self.template = ServedModelConfig.model_validate(template)
        self.zeroshot = ZeroShotSettings.model_validate(zeroshot)
        self.max_models = max_models
        self._models: OrderedDict[str, ModelRunner] = OrderedDict()
        self._loading = asyncio.Lock()

    async def _runner(self, spec: str) -> ModelRunner:
        async with self._loading:
            runner = self._models.get(spec)
            if runner is None:
                from contrastext.models import ModelNotFoundError

                config = self.template.on_demand(spec)
                try:
                    runner = await asyncio.to_thread(ModelRunner, spec, config, self.zeroshot)
                except ModelNotFoundError:
                    raise
                except Exception as error:  # a folder that is not a model: the request's fault, not the server's
                    raise ModelNotFoundError(f"{spec!r} is not a loadable model ({type(error).__name__}: "
                                             f"{error})") from None
                self._models[spec] = runner
                while len(self._models) > self.max_models:
                    self._models.popitem(last=False)
            self._models.move_to_end(spec)
            return runner

    async def encode(self, spec: str, texts: list[str]) -> np.ndarray:
        return (await (await self._runner(spec)).submit(EncodeJob(texts))).embeddings

    async def classify(self, spec: str, texts: list[str], labels: list[str], aliases: dict[str, list[str]] | None,
                       auto_aliases: bool, template: str | None, threshold: float | None) -> dict[str, Any]:
        runner = await self._runner(spec)
        job = runner.classify_job(texts, labels, aliases, auto_aliases, template)
        return runner.answer(await runner.submit(job), job.label_set, job.template, threshold)

    async def info(self, spec: str) -> dict[str, Any]:
        return (await self._runner(spec)).info()
