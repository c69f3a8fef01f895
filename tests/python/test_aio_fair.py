"""Fair (FIFO) queueing in asyncio: ``fair=True`` on AsyncMongoSemaphore and on
AsyncMongoReadWriteLock's writers, on the in-process memory:// backend and on the real
server through both asyncio transports. Waiters are served in the order they joined the
queue (each one's entry is seen in the document before the next one starts); a waiter
that times out or whose task is cancelled leaves the queue (its ttl is long: only leaving
empties it). (Bad values: test_fair.py.)"""

import asyncio
import functools
import uuid

import pytest
from helpers.aio_util import run_on, wait_until
from mongoelector.aio import AsyncMongoReadWriteLock, AsyncMongoSemaphore
from mongoelector.errors import AcquireTimeout, LockExists

TRANSPORTS = ["memory", "uri", "asyncdb"]


def _key(prefix="afair"):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def _queue(handle):
    return ((await handle.get_current()) or {}).get("queue", [])


async def _join_in_order(watcher, names, wait):
    """Starts ``wait(name)`` as a task per name, each once the previous one's entry is in
    the key's queue: the order of ``names`` is the order of arrival. Returns the tasks."""
    tasks = []
    for i, name in enumerate(names):
        tasks.append(asyncio.ensure_future(wait(name)))
        await wait_until(lambda n=i + 1: _has(watcher, n), timeout=30)
    return tasks


async def _has(watcher, n):
    return len(await _queue(watcher)) >= n


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_semaphore_waiters_are_served_in_arrival_order(transport, request):
    key = _key()

    async def body(db):
        holder = AsyncMongoSemaphore(key, db, limit=1, ttl=30, fair=True)
        await holder.acquire(blocking=False)
        sems = {n: AsyncMongoSemaphore(key, db, limit=1, ttl=30, fair=True) for n in "abcd"}
        granted = []

        async def wait(name):
            await sems[name].acquire(step=0.02)
            granted.append(name)
            await sems[name].release()

        tasks = await _join_in_order(holder, "abcd", wait)
        tickets = [e["ticket"] for e in await _queue(holder)]
        assert tickets == sorted(tickets) and len(tickets) == 4
        barger = AsyncMongoSemaphore(key, db, limit=1, ttl=30)
        await holder.release()
        with pytest.raises(LockExists):  # the slot is free, but the queue is live
            await barger.acquire(blocking=False)
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
        assert granted == list("abcd")
        assert await _queue(holder) == []
        assert await barger.acquire(blocking=False), "the queue is empty: served"
        for s in [holder, barger, *sems.values()]:
            await s.close()

    run_on(transport, request, body)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_fair_writers_are_served_in_arrival_order(transport, request):
    key = _key("afair-rw")

    async def body(db):
        reader = AsyncMongoReadWriteLock(key, db, ttl=30, fair=True)
        await reader.acquire("read")
        writers = {n: AsyncMongoReadWriteLock(key, db, ttl=30, fair=True) for n in "xyz"}
        granted = []

        async def wait(name):
            async with writers[name].write(step=0.02):
                granted.append(name)

        tasks = await _join_in_order(reader, "xyz", wait)
        late = AsyncMongoReadWriteLock(key, db, ttl=30)
        with pytest.raises(LockExists):  # writer preference: the queue stops new readers
            await late.acquire("read", blocking=False)
        await reader.release()
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
        assert granted == list("xyz")
        assert await late.acquire("read", blocking=False)
        for w in [reader, late, *writers.values()]:
            await w.close()

    run_on(transport, request, body)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("kind", ["semaphore", "writer"])
def test_a_waiter_that_times_out_or_is_cancelled_leaves_the_queue(transport, kind, request):
    key = _key("afair-leave")

    async def body(db):
        if kind == "semaphore":
            holder, quitter, cancelled, nxt = (
                AsyncMongoSemaphore(key, db, limit=1, ttl=600, fair=True) for _ in range(4)
            )
            take = AsyncMongoSemaphore.acquire
        else:
            holder, quitter, cancelled, nxt = (
                AsyncMongoReadWriteLock(key, db, ttl=600, fair=True) for _ in range(4)
            )
            take = functools.partial(AsyncMongoReadWriteLock.acquire, side="write")
        await take(holder, blocking=False)
        # A timeout: the acquire leaves the queue before it raises.
        with pytest.raises(AcquireTimeout):
            await take(quitter, timeout=0.3, step=0.02)
        assert await _queue(holder) == []
        # A cancelled task: its entry leaves in the background, not one ttl (600 s) later.
        task = asyncio.ensure_future(take(cancelled, step=0.02))
        await wait_until(lambda: _has(holder, 1), timeout=30)
        (entry,) = await _queue(holder)
        assert entry["uuid"] == cancelled.uuid
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await wait_until(lambda: _empty(holder), timeout=30)
        # Nobody waits: the next one is served as soon as the holder lets go.
        waiter = asyncio.ensure_future(take(nxt, step=0.02))
        await wait_until(lambda: _has(holder, 1), timeout=30)
        await holder.release()
        assert await asyncio.wait_for(waiter, 30) is True
        assert not cancelled.owned and not quitter.owned
        for h in (holder, quitter, cancelled, nxt):
            await h.close()

    run_on(transport, request, body)


async def _empty(watcher):
    return await _queue(watcher) == []


def test_fair_is_reported():
    from mongoelector import testing

    async def body():
        db = testing.memory_uri()
        s = AsyncMongoSemaphore("pool", db, limit=2, fair=True)
        rw = AsyncMongoReadWriteLock("k", db)
        assert s.fair is True and rw.fair is False
        await s.close()
        await rw.close()

    asyncio.run(body())
