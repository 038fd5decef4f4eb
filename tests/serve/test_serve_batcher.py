"""DynamicBatcher on a plain event loop: how batches form, results and errors reach the right caller."""

from __future__ import annotations

import asyncio

import pytest

from contrastext.serve.batcher import DynamicBatcher


class SlowDoubler:
    """A batch handler that takes ``seconds`` per batch and records the batches it saw."""

    def __init__(self, seconds: float = 0.05):
        self.seconds = seconds
        self.batches: list[list[int]] = []

    async def __call__(self, items: list[int]) -> list[int | Exception]:
        self.batches.append(list(items))
        await asyncio.sleep(self.seconds)
        return [ValueError(f"bad item {i}") if i < 0 else 2 * i for i in items]


def run(coroutine):
    return asyncio.run(coroutine)


def test_requests_arriving_during_a_batch_form_the_next_one():
    async def scenario():
        handler = SlowDoubler(0.1)
        batcher = DynamicBatcher(handler, max_batch_size=16, batch_wait_timeout_s=0.0)
        first = asyncio.create_task(batcher.submit(0))
        await asyncio.sleep(0.02)  # the first batch (one item, no waiting) is running now
        rest = [asyncio.create_task(batcher.submit(i)) for i in range(1, 8)]
        results = await asyncio.gather(first, *rest)
        return handler, batcher, results

    handler, batcher, results = run(scenario())
    assert results == [2 * i for i in range(8)]
    # the seven that queued behind the running batch went together, not one batch each
    assert handler.batches == [[0], [1, 2, 3, 4, 5, 6, 7]]
    assert batcher.stats.as_dict()["batch_sizes"] == {1: 1, 7: 1}
    assert batcher.stats.busy_seconds >= 0.2


def test_an_idle_model_waits_for_company_at_most_the_timeout():
    async def scenario():
        handler = SlowDoubler(0.0)
        batcher = DynamicBatcher(handler, max_batch_size=8, batch_wait_timeout_s=0.2)
        loop = asyncio.get_running_loop()
        start = loop.time()
        tasks = [asyncio.create_task(batcher.submit(1))]
        await asyncio.sleep(0.05)
        tasks.append(asyncio.create_task(batcher.submit(2)))
        await asyncio.gather(*tasks)
        waited = loop.time() - start
        alone_start = loop.time()
        await batcher.submit(3)
        return handler, waited, loop.time() - alone_start

    handler, waited, alone = run(scenario())
    assert handler.batches == [[1, 2], [3]]
    assert 0.15 <= waited < 1.0 and 0.15 <= alone < 1.0  # the timeout, from the first arrival


def test_a_full_batch_goes_without_waiting_and_the_size_is_capped():
    async def scenario():
        handler = SlowDoubler(0.0)
        batcher = DynamicBatcher(handler, max_batch_size=3, batch_wait_timeout_s=5.0)
        loop = asyncio.get_running_loop()
        start = loop.time()
        results = await asyncio.gather(*(batcher.submit(i) for i in range(6)))
        return handler, results, loop.time() - start

    handler, results, seconds = run(scenario())
    assert results == [0, 2, 4, 6, 8, 10]
    assert handler.batches == [[0, 1, 2], [3, 4, 5]] and seconds < 2.0


def test_errors_reach_only_their_caller_and_a_failing_handler_reaches_all():
    async def per_item():
        batcher = DynamicBatcher(SlowDoubler(0.0), max_batch_size=4, batch_wait_timeout_s=0.05)
        return await asyncio.gather(batcher.submit(1), batcher.submit(-1), batcher.submit(3),
                                    return_exceptions=True)

    ok, bad, also_ok = run(per_item())
    assert (ok, also_ok) == (2, 6) and isinstance(bad, ValueError) and "bad item -1" in str(bad)

    async def broken(items):
        raise RuntimeError(f"model down ({len(items)} items)")

    async def whole_batch():
        batcher = DynamicBatcher(broken, max_batch_size=4, batch_wait_timeout_s=0.05)
        results = await asyncio.gather(batcher.submit(1), batcher.submit(2), return_exceptions=True)
        # the batcher keeps serving after a failed batch
        batcher.handler = SlowDoubler(0.0)
        return results, await batcher.submit(5)

    results, after = run(whole_batch())
    assert all(isinstance(r, RuntimeError) and "model down (2 items)" in str(r) for r in results)
    assert after == 10


def test_a_cancelled_caller_is_left_out_of_its_batch():
    async def scenario():
        handler = SlowDoubler(0.1)
        batcher = DynamicBatcher(handler, max_batch_size=8, batch_wait_timeout_s=0.0)
        first = asyncio.create_task(batcher.submit(0))
        await asyncio.sleep(0.02)
        gone = asyncio.create_task(batcher.submit(1))
        kept = asyncio.create_task(batcher.submit(2))
        await asyncio.sleep(0.01)
        gone.cancel()
        return handler, await first, await kept, gone

    handler, first, kept, gone = run(scenario())
    assert (first, kept) == (0, 4) and gone.cancelled()
    assert handler.batches == [[0], [2]]


def test_wrong_result_count_and_bad_settings_are_errors():
    async def short(items):
        return items[:-1]

    async def scenario():
        batcher = DynamicBatcher(short, max_batch_size=2, batch_wait_timeout_s=0.05)
        return await asyncio.gather(batcher.submit(1), batcher.submit(2), return_exceptions=True)

    assert all(isinstance(r, RuntimeError) and "1 results for 2 items" in str(r) for r in run(scenario()))
    with pytest.raises(ValueError, match="max_batch_size"):
        DynamicBatcher(short, max_batch_size=0, batch_wait_timeout_s=0.0)
    with pytest.raises(ValueError, match="batch_wait_timeout_s"):
        DynamicBatcher(short, max_batch_size=1, batch_wait_timeout_s=-1)
