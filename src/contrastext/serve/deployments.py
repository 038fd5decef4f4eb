"""Model deployments: replicas that hold encoders and answer embed / classify calls from the ingress.

``EncoderDeployment`` serves one configured model, with dynamic batching (``@serve.batch``): the texts
of concurrent requests are encoded in one forward pass. ``PathModelDeployment`` exists only when the
operator allows requests to name a model folder; it loads such models on demand (LRU, no batching).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from ray import serve

from contrastext.serve.config import ServedModelConfig, ZeroShotSettings
from contrastext.zeroshot import ZeroShotClassifier, predictions

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


class ModelRunner:
    """One loaded encoder, its zero-shot classifier and the single thread its forward passes run on.

    One thread per model keeps forward passes from competing for the replica's CPU threads and keeps
    the replica's event loop free for health checks and for gathering the next batch.
    """

    def __init__(self, name: str, config: ServedModelConfig, zeroshot: ZeroShotSettings):
        import torch

        from contrastext.models import TextEncoder, resolve_model_path

        self.name = name
        self.config = config
        threads = config.torch_threads or max(1, int(config.num_cpus))
        torch.set_num_threads(threads)
        device = "cuda" if config.use_gpu and torch.cuda.is_available() else "cpu"
        if config.use_gpu and device == "cpu":
            log.warning("model %s: use_gpu is set but no GPU is visible; running on CPU", name)
        self.path = str(resolve_model_path(config.model, allow_download=config.allow_download))
        self.encoder = TextEncoder.from_pretrained(self.path, max_length=config.max_length,
                                                   normalize=config.normalize, device=device)
        positions = getattr(self.encoder.transformer.config, "max_position_embeddings", None)
        if positions and self.encoder.max_length > positions:
            log.warning("model %s: max_length %d exceeds the model's %d positions; long texts will fail",
                        name, self.encoder.max_length, positions)
        self.classifier = ZeroShotClassifier(self.encoder, template=zeroshot.template, model_key=self.path,
                                             cache_size=zeroshot.label_cache_size,
                                             batch_size=config.encode_batch_size)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"model-{name}")

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def encode(self, texts: Sequence[str]) -> np.ndarray:
        return await self.run(self.encoder.encode, list(texts), self.config.encode_batch_size)

    async def classify(self, text_embeddings: np.ndarray, labels: Sequence[str],
                       aliases: Mapping[str, Sequence[str]] | None, auto_aliases: bool, template: str | None,
                       threshold: float | None) -> dict[str, Any]:
        label_set = self.classifier.label_set(labels, aliases, auto_aliases)
        # a cached label set costs no forward pass; a new one is embedded on the model thread
        scores = await self.run(self.classifier.score_embeddings, text_embeddings, label_set, template)
        results = predictions(scores, label_set.labels, threshold)
        return {"template": template or self.classifier.template,
                "results": [{"label": p.label, "scores": p.scores,
                             "labels": p.labels if threshold is not None else None} for p in results]}

    def info(self) -> dict[str, Any]:
        return {"name": self.name, "model": self.config.model, "path": self.path,
                "dimension": self.encoder.embedding_dimension, "max_length": self.encoder.max_length,
                "normalize": self.encoder.normalize, "device": str(self.encoder.device)}


@serve.deployment
class EncoderDeployment:
    """Replicas of one served model."""

    def __init__(self, name: str, model: dict[str, Any], zeroshot: dict[str, Any]):
        config = ServedModelConfig.model_validate(model)
        self.runner = ModelRunner(name, config, ZeroShotSettings.model_validate(zeroshot))
        self.batching = config.batching
        self._encode_batched.set_max_batch_size(config.batching.max_batch_size)
        self._encode_batched.set_batch_wait_timeout_s(config.batching.batch_wait_timeout_s)
        self.requests = 0
        self.batches = 0
        self.batched_requests = 0

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.01)
    async def _encode_batched(self, requests: list[list[str]]) -> list[np.ndarray | Exception]:
        self.batches += 1
        self.batched_requests += len(requests)
        flat = [text for texts in requests for text in texts]
        try:
            embeddings = await self.runner.encode(flat)
        except Exception:  # noqa: BLE001 -- find the request(s) at fault, so the others still get answers
            if len(requests) == 1:
                raise
            return [await self._encode_alone(texts) for texts in requests]
        bounds = np.cumsum([0] + [len(texts) for texts in requests])
        return [embeddings[a:b] for a, b in zip(bounds[:-1], bounds[1:])]

    async def _encode_alone(self, texts: list[str]) -> np.ndarray | Exception:
        try:
            return await self.runner.encode(texts)
        except Exception as error:  # noqa: BLE001 -- handed back to that request's caller, raised there
            return error

    async def encode(self, texts: list[str]) -> np.ndarray:
        self.requests += 1
        if not self.batching.enabled:
            return await self.runner.encode(texts)
        result = await self._encode_batched(texts)
        if isinstance(result, Exception):
            raise result
        return result

    async def classify(self, texts: list[str], labels: list[str], aliases: dict[str, list[str]] | None,
                       auto_aliases: bool, template: str | None, threshold: float | None) -> dict[str, Any]:
        embeddings = await self.encode(texts)
        return await self.runner.classify(embeddings, labels, aliases, auto_aliases, template, threshold)

    def info(self) -> dict[str, Any]:
        classifier = self.runner.classifier
        return {**self.runner.info(), "batching": self.batching.model_dump(), "pid": os.getpid(),
                "rss_bytes": process_rss_bytes(), "requests": self.requests, "batches": self.batches,
                "batched_requests": self.batched_requests,
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

                config = self.template.model_copy(update={"model": spec})
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
        return await (await self._runner(spec)).encode(texts)

    async def classify(self, spec: str, texts: list[str], labels: list[str], aliases: dict[str, list[str]] | None,
                       auto_aliases: bool, template: str | None, threshold: float | None) -> dict[str, Any]:
        runner = await self._runner(spec)
        embeddings = await runner.encode(texts)
        return await runner.classify(embeddings, labels, aliases, auto_aliases, template, threshold)

    async def info(self, spec: str) -> dict[str, Any]:
        return (await self._runner(spec)).info()
