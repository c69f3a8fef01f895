"""mongoelector.aio.AsyncMongoSemaphore: MongoSemaphore for asyncio.

On the in-process memory:// backend (no server) and on the real server through both
asyncio transports (a URI, a pymongo AsyncDatabase): the limit holds, acquire's blocking,
timeout and step behave as the synchronous semaphore's, release, ``async with`` and
``keep_alive``, and cancellation: a cancelled waiting acquire ends at once, and a slot
taken by an attempt still in flight when its task was cancelled is released. The outcome
of each acquire is counted once in the core's metrics.
"""

import asyncio
import logging
import time
import uuid

import pytest
from helpers.aio_util import (
    cancel_before_the_claim,
    cancel_once,
    run_on,
    slow_first_claim,
    wait_until,
)
from mongoelector import metrics, testing
from mongoelector.aio import AsyncMongoSemaphore, AsyncSemaphoreLease
from mongoelector.errors import AcquireTimeout, ClosedError, LockExists

TRANSPORTS = ["memory", "uri", "asyncdb"]


def _key(prefix="asem"):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_limit_blocking_timeout_release(transport, request):
    key = _key()

    async def body(db):
        a, b, c = (AsyncMongoSemaphore(key, db, limit=2, ttl=30) for _ in range(3))
        assert await a.acquire() is True and await b.acquire() is True
        assert a.owned and b.owned and a.fence < b.fence
        with pytest.raises(LockExists, match=f"{key}: all 2 slots held"):
            await c.acquire(blocking=False)
        t0 = time.monotonic()
        with pytest.raises(AcquireTimeout, match=f"Timeout acquiring semaphore {key}"):
            await c.acquire(timeout=0.3, step=0.05)
        assert 0.25 <= time.monotonic() - t0 < 3
        with pytest.raises(ValueError):
            await c.acquire(blocking=False, timeout=1)
        with pytest.raises(RuntimeError, match="already holds a slot"):
            await a.acquire()
        holders = await c.holders()
        assert sorted(h["uuid"] for h in holders) == sorted([a.uuid, b.uuid])
        doc = await c.get_current()
        assert doc["limit"] == 2
        # A blocking wait wins once a slot frees.
        waiter = asyncio.ensure_future(c.acquire(step=0.02))
        await asyncio.sleep(0.1)
        assert not waiter.done()
        await a.release()
        assert await asyncio.wait_for(waiter, 5) is True
        assert c.owned and not a.owned and c.fence > b.fence
        assert await c.touch() is not None and c.ts_expire is not None
        await a.release()  # not holding: not an error
        for s in (a, b, c):
            await s.close()
        assert c.closed and "closed=True" in repr(c)
        with pytest.raises(ClosedError):
            await c.acquire()
        # close() released what b and c held.
        d = AsyncMongoSemaphore(key, db, limit=2, ttl=30)
        assert await d.holders() == []
        await d.close()

    run_on(transport, request, body)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_async_with_and_keep_alive(transport, request):
    key = _key()

    async def body(db):
        sem = AsyncMongoSemaphore(key, db, limit=1, ttl=3)
        other = AsyncMongoSemaphore(key, db, limit=1, ttl=3)
        async with sem:
            assert sem.owned and sem.fence is not None
            with pytest.raises(LockExists):
                await other.acquire(blocking=False)
        assert not sem.owned
        async with other.keep_alive(timeout=5) as lease:
            assert isinstance(lease, AsyncSemaphoreLease)
            lease.check()
            assert lease.fence is not None and lease.fence > (sem.fence or 0)
            with pytest.raises(LockExists):
                await sem.acquire(blocking=False)
            with pytest.raises(AcquireTimeout):
                async with sem.keep_alive(timeout=0.2, step=0.05):
                    pass
            assert not await lease.wait_lost(0.05)
        assert await sem.acquire(blocking=False)
        await sem.close()
        await other.close()

    run_on(transport, request, body)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_cancelling_a_waiting_acquire(transport, request):
    key = _key("asem-cancel")

    async def body(db):
        holder = AsyncMongoSemaphore(key, db, limit=1, ttl=10)
        waiter = AsyncMongoSemaphore(key, db, limit=1, ttl=10)
        third = AsyncMongoSemaphore(key, db, limit=1, ttl=10)
        await holder.acquire()
        before = metrics.snapshot()
        task = asyncio.ensure_future(waiter.acquire(step=0.05))
        await asyncio.sleep(0.4)  # several attempts made, all refused
        assert not task.done()
        t0 = time.perf_counter()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        latency = time.perf_counter() - t0
        after = metrics.snapshot()
        # The whole wait is one acquire, counted once, as cancelled.
        assert after.acquires["cancelled"] - before.acquires["cancelled"] == 1
        assert after.acquire_latency_count - before.acquire_latency_count == 1
        await holder.release()
        await asyncio.sleep(0.1)  # an attempt still in flight would have landed by now
        assert not waiter.owned
        assert await third.acquire(blocking=False), "someone holds the slot after cancel"
        for s in (holder, waiter, third):
            await s.close()
        return latency

    assert run_on(transport, request, body) < 0.05


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_cancelled_before_the_claim_takes_no_slot(transport, request, monkeypatch):
    """The task is cancelled after its attempt was handed to a worker but before the
    claim was sent: the core's run is cancelled first, so the attempt claims nothing."""
    key = _key("asem-noclaim")

    async def body(db):
        sem = AsyncMongoSemaphore(key, db, limit=1, ttl=30)
        other = AsyncMongoSemaphore(key, db, limit=1, ttl=30)
        await sem.open()
        results = await cancel_before_the_claim(monkeypatch, AsyncMongoSemaphore, sem.acquire())
        assert results == [("cancelled", None)]
        assert await other.acquire(blocking=False)
        assert not sem.owned and other.owned
        await other.close()
        await sem.close()

    run_on(transport, request, body)


def test_cancelled_claim_in_flight_releases_the_slot_it_took(request, monkeypatch, caplog):
    """The task is cancelled while its claim is on the wire: the server applies it, the
    reply comes late (made slow here). The cancelled run releases that slot, fenced."""
    key = _key("asem-orphan")

    async def body(db):
        sem = AsyncMongoSemaphore(key, db, limit=1, ttl=30)
        other = AsyncMongoSemaphore(key, db, limit=1, ttl=30)
        await sem.open()
        claimed, landed, undo = slow_first_claim(monkeypatch)
        await cancel_once(sem.acquire(), claimed.is_set)
        await wait_until(lambda: landed, timeout=5, interval=0.005)
        undo()
        await wait_until(lambda: other.acquire(blocking=False), timeout=2, swallow=(LockExists,))
        assert not sem.owned and other.owned
        await other.close()
        await sem.close()

    with caplog.at_level(logging.INFO, logger="mongoelector"):
        run_on("asyncdb", request, body)
    assert any("taken by a cancelled acquire" in r.getMessage() for r in caplog.records)


def test_outcomes_counted_once_per_acquire():
    """A blocking acquire that waited (several refused attempts) is one acquire in the
    core's metrics; so is a timeout."""

    async def body():
        db = testing.memory_uri()
        key = _key()
        a = AsyncMongoSemaphore(key, db, limit=1, ttl=30)
        b = AsyncMongoSemaphore(key, db, limit=1, ttl=30)
        await a.acquire()
        before = metrics.snapshot()
        with pytest.raises(AcquireTimeout):
            await b.acquire(timeout=0.2, step=0.02)
        mid = metrics.snapshot()
        assert mid.acquires["timeout"] - before.acquires["timeout"] == 1
        assert mid.acquire_latency_count - before.acquire_latency_count == 1
        waiter = asyncio.ensure_future(b.acquire(step=0.02))
        await asyncio.sleep(0.1)
        await a.release()
        await asyncio.wait_for(waiter, 5)
        after = metrics.snapshot()
        assert after.acquires["acquired"] - mid.acquires["acquired"] == 1
        assert after.acquires["held"] == mid.acquires["held"]
        assert after.acquire_latency_count - mid.acquire_latency_count == 1
        await a.close()
        await b.close()

    asyncio.run(body())
