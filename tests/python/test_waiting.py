"""``waiting()``: the fair waiters still in line for a key, on MongoLocker and
MongoSemaphore (asyncio: ``await waiting()`` on AsyncMongoLocker and AsyncMongoSemaphore),
on the server and on an SQLite file. Empty before anyone queues; a blocking fair acquire
that finds the key taken is listed (its uuid, a ticket, an expiry to come), in the shape
``holders()["waiting"]`` lists a read-write lock's; empty again once it was served."""

import asyncio
import threading
import time
import uuid
from datetime import datetime, timezone

import pytest
from helpers.aio_util import wait_until
from mongoelector import MongoLocker, MongoReadWriteLock, MongoSemaphore
from mongoelector.aio import AsyncMongoLocker, AsyncMongoSemaphore

KINDS = {
    "locker": lambda key, db: MongoLocker(key, db, ttl=60, fair=True),
    "semaphore": lambda key, db: MongoSemaphore(key, db, limit=1, ttl=60, fair=True),
}
ASYNC_KINDS = {
    "locker": lambda key, db: AsyncMongoLocker(key, db, ttl=60, fair=True),
    "semaphore": lambda key, db: AsyncMongoSemaphore(key, db, limit=1, ttl=60, fair=True),
}


@pytest.fixture(params=["server", "sqlite"])
def db(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite://{tmp_path}/waiting.db"
    return request.getfixturevalue("server_db")[1]


def _check_entry(entry, waiter_uuid):
    assert set(entry) == {"uuid", "ticket", "ts_expire"}
    assert entry["uuid"] == waiter_uuid
    assert isinstance(entry["ticket"], int) and entry["ticket"] > 0
    assert entry["ts_expire"].tzinfo is not None
    assert entry["ts_expire"] > datetime.now(timezone.utc)


def _owns(holder):
    # MongoLocker.owned() is a method (the original's); MongoSemaphore.owned a property.
    return holder.owned() if isinstance(holder, MongoLocker) else holder.owned


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_queued_fair_waiter_is_listed(kind, db):
    key = f"waiting-{kind}-{uuid.uuid4().hex[:8]}"
    holder, waiter = KINDS[kind](key, db), KINDS[kind](key, db)
    assert holder.waiting() == [], "no document yet"
    holder.acquire(blocking=False)
    assert holder.waiting() == [], "held, nobody waiting"
    t = threading.Thread(target=waiter.acquire, kwargs={"timeout": 60, "step": 0.05})
    t.start()
    until = time.monotonic() + 30
    while not (line := holder.waiting()):  # listed once queued
        assert t.is_alive(), "the waiter did not wait"
        assert time.monotonic() < until, "the fair waiter was never listed"
        time.sleep(0.02)
    assert len(line) == 1, line
    _check_entry(line[0], waiter.uuid)
    assert waiter.waiting() == line, "any instance of the key reads the same line"
    holder.release()
    t.join(60)
    assert not t.is_alive() and _owns(waiter), "the listed waiter was served"
    assert holder.waiting() == []
    waiter.release()
    holder.close()
    waiter.close()


def test_the_rwlock_lists_its_waiters_in_the_same_shape(db):
    """A fair semaphore's ``waiting()`` and a fair read-write lock's
    ``holders()["waiting"]`` come from one reading and one conversion."""
    key = f"waiting-rw-{uuid.uuid4().hex[:8]}"
    holder = MongoReadWriteLock(key, db, ttl=60, fair=True)
    waiter = MongoReadWriteLock(key, db, ttl=60, fair=True)
    holder.acquire("write", blocking=False)
    t = threading.Thread(
        target=waiter.acquire, args=("write",), kwargs={"timeout": 60, "step": 0.05}
    )
    t.start()
    until = time.monotonic() + 30
    while not (line := holder.holders()["waiting"]):
        assert t.is_alive() and time.monotonic() < until, "the writer was never listed"
        time.sleep(0.02)
    _check_entry(line[0], waiter.uuid)
    holder.release()
    t.join(60)
    assert not t.is_alive()
    waiter.release()
    holder.close()
    waiter.close()


@pytest.mark.parametrize("kind", sorted(ASYNC_KINDS))
def test_a_queued_fair_waiter_is_listed_asyncio(kind, db):
    key = f"awaiting-{kind}-{uuid.uuid4().hex[:8]}"

    async def body():
        holder, waiter = ASYNC_KINDS[kind](key, db), ASYNC_KINDS[kind](key, db)
        assert await holder.waiting() == []
        await holder.acquire(blocking=False)
        assert await holder.waiting() == []
        task = asyncio.ensure_future(waiter.acquire(timeout=60, step=0.05))

        async def listed():
            assert not task.done(), "the waiter did not wait"
            return bool(await holder.waiting())

        await wait_until(listed, timeout=30)
        line = await holder.waiting()
        assert len(line) == 1, line
        _check_entry(line[0], waiter.uuid)
        await holder.release()
        assert await asyncio.wait_for(task, 60) is True
        assert await holder.waiting() == []
        await waiter.release()
        await holder.close()
        await waiter.close()

    asyncio.run(body())
