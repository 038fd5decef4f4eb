"""Dynamic batching for a model that runs one batch at a time.

Concurrent ``submit`` calls are gathered into one call of the batch handler. The next batch is formed
only when the previous one has finished, from everything that queued meanwhile (up to
``max_batch_size``): a busy model therefore gets full batches. ``batch_wait_timeout_s`` counts from the
oldest queued request's arrival, so an idle model waits at most that long for company, and requests
that already waited through a forward pass go at once.

(``ray.serve.batch`` seals a batch when its wait timeout ends and queues it behind the running one, so
with a busy model every batch holds only what arrived within the timeout — about one request.)
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Generic, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")

BatchHandler = Callable[[list[T]], Awaitable[Sequence["R | BaseException"]]]


@dataclass
class BatchStats:
    batches: int = 0
    items: int = 0
    sizes: Counter = field(default_factory=Counter)  # batch size -> batches of that size
    busy_seconds: float = 0.0  # time spent inside the handler

    def as_dict(self) -> dict[str, Any]:
        return {"batches": self.batches, "batched_requests": self.items,
                "mean_batch_size": self.items / self.batches if self.batches else 0.0,
                "batch_sizes": {int(k): int(v) for k, v in sorted(self.sizes.items())},
                "busy_seconds": self.busy_seconds}


class DynamicBatcher(Generic[T, R]):
    """``await batcher.submit(item)`` → this item's result from ``handler(items)``.

    ``handler`` gets the items of one batch and returns one result per item, in order; an exception
    object in that list is raised to that item's caller only. If ``handler`` raises, every caller of the
    batch gets the error. A caller cancelled while queued (e.g. a timeout) is left out of its batch.
    """

    def __init__(self, handler: BatchHandler, *, max_batch_size: int, batch_wait_timeout_s: float):
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1, got {max_batch_size}")
        if batch_wait_timeout_s < 0:
            raise ValueError(f"batch_wait_timeout_s must be >= 0, got {batch_wait_timeout_s}")
        self.handler = handler
        self.max_batch_size = max_batch_size
        self.batch_wait_timeout_s = batch_wait_timeout_s
        self.stats = BatchStats()
        self._queue: deque[tuple[T, asyncio.Future, float]] = deque()
        self._arrived: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._worker: asyncio.Task | None = None

    async def submit(self, item: T) -> R:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop, self._arrived = loop, asyncio.Event()
        elif self._loop is not loop:
            raise RuntimeError("DynamicBatcher.submit called from a second event loop")
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._run())
        future: asyncio.Future = loop.create_future()
        self._queue.append((item, future, loop.time()))
        self._arrived.set()
        return await future

    def queued(self) -> int:
        return sum(1 for _, future, _ in self._queue if not future.done())

    async def _next_batch(self) -> list[tuple[T, asyncio.Future, float]]:
        loop = asyncio.get_running_loop()
        while True:
            while self._queue and self._queue[0][1].done():  # cancelled while queued
                self._queue.popleft()
            if not self._queue:
                self._arrived.clear()
                await self._arrived.wait()
                continue
            deadline = self._queue[0][2] + self.batch_wait_timeout_s
            while self.queued() < self.max_batch_size and loop.time() < deadline:
                self._arrived.clear()
                try:
                    await asyncio.wait_for(self._arrived.wait(), deadline - loop.time())
                except asyncio.TimeoutError:
                    break
            batch = []
            while self._queue and len(batch) < self.max_batch_size:
                entry = self._queue.popleft()
                if not entry[1].done():
                    batch.append(entry)
            if batch:
                return batch

    async def _run(self) -> None:
        while True:
            batch = await self._next_batch()
            started = time.perf_counter()
            try:
                results = list(await self.handler([item for item, _, _ in batch]))
                if len(results) != len(batch):
                    raise RuntimeError(f"batch handler returned {len(results)} results for {len(batch)} items")
            except Exception as error:  # noqa: BLE001 -- handed to every caller of this batch
                results = [error] * len(batch)
            finally:
                self.stats.busy_seconds += time.perf_counter() - started
            self.stats.batches += 1
            self.stats.items += len(batch)
            self.stats.sizes[len(batch)] += 1
            for (_, future, _), result in zip(batch, results):
                if future.done():
                    continue
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)
