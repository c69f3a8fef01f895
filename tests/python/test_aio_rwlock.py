"""mongoelector.aio.AsyncMongoReadWriteLock: MongoReadWriteLock for asyncio.

On the in-process memory:// backend (no server) and on the real server through both
asyncio transports (a URI, a pymongo AsyncDatabase): readers together, a writer alone,
refusals naming the holder, the timeout, writer preference on and off, ``async with
rw.read()`` / ``rw.write()`` (kept alive: across many ttls on the testing kit's
FakeClock), bad input, and cancellation: a cancelled waiting writer leaves neither a hold
nor its waiting mark, a hold taken by an attempt still in flight when its task was
cancelled is released, and the acquire is counted once in the core's metrics.
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
from mongoelector import LeaseLost, metrics, testing
from mongoelector.aio import AsyncMongoReadWriteLock, AsyncRwLockLease
from mongoelector.errors import AcquireTimeout, ClosedError, LockExists

TRANSPORTS = ["memory", "uri", "asyncdb"]


def _key(prefix="arw"):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _locks(key, db, n, **kw):
    kw.setdefault("ttl", 30)
    return [AsyncMongoReadWriteLock(key, db, **kw) for _ in range(n)]


async def _close(*rws):
    for rw in rws:
        await rw.close()


async def _mark(rw):
    """The uuid of the writer waiting with its mark, or None."""
    mark = (await rw.holders())["waiting_writer"]
    return None if mark is None else mark["uuid"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_readers_together_a_writer_alone_and_the_timeout(transport, request):
    key = _key()

    async def body(db):
        r1, r2, r3, w = _locks(key, db, 4, max_readers=2)
        assert await r1.acquire("read") is True and await r2.acquire("read") is True
        assert r1.side == r2.side == "read" and r2.fence > r1.fence
        with pytest.raises(LockExists, match=f"{key}: all 2 read slots held"):
            await r3.acquire("read", blocking=False)
        with pytest.raises(LockExists, match=f"{key}: held for reading by {r1.host} pid"):
            await w.acquire("write", blocking=False)
        t0 = time.monotonic()
        with pytest.raises(AcquireTimeout, match=f"Timeout acquiring read-write lock {key}"):
            await w.acquire("write", timeout=0.3, step=0.05)
        assert 0.25 <= time.monotonic() - t0 < 3
        assert await _mark(r1) is None, "the writer's mark outlived its wait"
        held = await w.holders()
        assert [h["uuid"] for h in held["readers"]] == [r1.uuid, r2.uuid]
        readers_top = r2.fence
        await r1.release()
        await r2.release()
        assert await w.acquire("write", blocking=False) and w.side == "write"
        assert w.fence > readers_top
        with pytest.raises(LockExists, match=f"{key}: held for writing by {w.host} pid"):
            await r3.acquire("read", blocking=False)
        assert (await r3.holders())["writer"]["fence"] == w.fence
        doc = await w.get_current()
        assert doc["kind"] == "rwlock" and doc["limit"] == 2 and len(doc["slots"]) == 4
        assert await w.touch() is not None and w.ts_expire is not None
        assert "side='write'" in repr(w)
        await _close(r1, r2, r3, w)
        assert w.closed and "closed=True" in repr(w)
        with pytest.raises(ClosedError):
            await w.acquire("read")
        (free,) = _locks(key, db, 1, max_readers=2)
        assert (await free.holders())["writer"] is None, "close() released the write hold"
        await free.close()

    run_on(transport, request, body)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("preference", [True, False], ids=["preference", "no-preference"])
def test_a_waiting_writer_stops_new_readers_only_with_writer_preference(
    transport, preference, request
):
    key = _key("arw-pref")

    async def body(db):
        reader, writer, late = _locks(key, db, 3, writer_preference=preference)
        await reader.acquire("read")
        waiting = asyncio.ensure_future(writer.acquire("write", step=0.02))
        if preference:
            await wait_until(lambda: _mark(reader), timeout=5)
            assert await _mark(reader) == writer.uuid
            with pytest.raises(LockExists, match="a writer is waiting"):
                await late.acquire("read", blocking=False)
        else:
            for _ in range(5):  # readers keep entering while the writer tries
                assert await late.acquire("read", blocking=False)
                assert await _mark(late) is None
                await late.release()
                await asyncio.sleep(0.03)
        assert not waiting.done()
        await reader.release()
        assert await asyncio.wait_for(waiting, 10) is True
        assert writer.side == "write" and await _mark(late) is None
        await _close(reader, writer, late)

    run_on(transport, request, body)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_read_and_write_keep_alive_context_managers(transport, request):
    key = _key("arw-ka")

    async def body(db):
        rw, other = _locks(key, db, 2, ttl=3)
        async with rw.read(timeout=5) as hold:
            assert isinstance(hold, AsyncRwLockLease) and hold.side == "read"
            assert hold.fence == rw.fence and rw.side == "read"
            hold.check()
            async with other.read(blocking=False) as second:
                assert second.fence > hold.fence
            with pytest.raises(LockExists, match="held for reading"):
                async with other.write(blocking=False):
                    pass
            with pytest.raises(AcquireTimeout):
                async with other.write(timeout=0.2, step=0.05):
                    pass
            with pytest.raises(RuntimeError, match="already holds"):
                async with rw.write():
                    pass
            assert not await hold.wait_lost(0.05)
        assert rw.side is None and await _mark(other) is None
        async with other.write() as hold:
            assert other.side == "write"
            with pytest.raises(LockExists, match="held for writing"):
                await rw.acquire("read", blocking=False)
        assert await rw.acquire("read", blocking=False)
        await _close(rw, other)

    run_on(transport, request, body)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("kept_alive", [False, True], ids=["acquire", "write()"])
def test_a_cancelled_waiting_writer_leaves_no_hold_and_no_mark(transport, kept_alive, request):
    key = _key("arw-cancel")

    async def body(db):
        reader, writer, late = _locks(key, db, 3, ttl=10)
        await reader.acquire("read")
        before = metrics.snapshot()
        if kept_alive:
            task = asyncio.ensure_future(writer.write(step=0.05).acquire())
        else:
            task = asyncio.ensure_future(writer.acquire("write", step=0.05))
        await wait_until(lambda: _mark(reader), timeout=5)
        t0 = time.perf_counter()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        latency = time.perf_counter() - t0
        after = metrics.snapshot()
        # The whole wait is one acquire, counted once, as cancelled.
        assert after.acquires["cancelled"] - before.acquires["cancelled"] == 1
        await wait_until(lambda: late.acquire("read", blocking=False), 5, swallow=(LockExists,))
        assert await _mark(reader) is None and not writer.owned
        await reader.release()
        await late.release()
        await asyncio.sleep(0.1)  # an attempt still in flight would have landed by now
        assert not writer.owned
        (third,) = _locks(key, db, 1, ttl=10)
        assert await third.acquire("write", blocking=False), "someone holds after cancel"
        await _close(reader, writer, late, third)
        return latency

    assert run_on(transport, request, body) < 0.05


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_cancelled_before_the_claim_takes_no_hold(transport, request, monkeypatch):
    """The task is cancelled after its attempt was handed to a worker but before the
    claim was sent: the core's run is cancelled first, so the attempt claims nothing."""
    key = _key("arw-noclaim")

    async def body(db):
        rw, other = _locks(key, db, 2)
        await rw.open()
        results = await cancel_before_the_claim(
            monkeypatch, AsyncMongoReadWriteLock, rw.acquire("write")
        )
        assert results == [("cancelled", None)]
        assert await other.acquire("write", blocking=False)
        assert not rw.owned and other.owned
        await _close(other, rw)

    run_on(transport, request, body)


def test_cancelled_claim_in_flight_releases_the_hold_it_took(request, monkeypatch, caplog):
    """The task is cancelled while its claim is on the wire: the server applies it, the
    reply comes late (made slow here). The cancelled run releases that hold, fenced."""
    key = _key("arw-orphan")

    async def body(db):
        rw, other = _locks(key, db, 2)
        await rw.open()
        claimed, landed, undo = slow_first_claim(monkeypatch)
        await cancel_once(rw.acquire("write"), claimed.is_set)
        await wait_until(lambda: landed, timeout=5, interval=0.005)
        undo()
        await wait_until(
            lambda: other.acquire("write", blocking=False), timeout=2, swallow=(LockExists,)
        )
        assert not rw.owned and other.owned
        await _close(other, rw)

    with caplog.at_level(logging.INFO, logger="mongoelector"):
        run_on("asyncdb", request, body)
    assert any("taken by a cancelled acquire" in r.getMessage() for r in caplog.records)


def test_bad_arguments_are_refused_by_name():
    async def body():
        db = testing.memory_uri()
        with pytest.raises(ValueError, match="max_readers must be between 1 and 1000, not 0"):
            AsyncMongoReadWriteLock("k", db, max_readers=0)
        with pytest.raises(TypeError, match="max_readers must be an int, not str"):
            AsyncMongoReadWriteLock("k", db, max_readers="2")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="ttl must be a positive number"):
            AsyncMongoReadWriteLock("k", db, ttl=-1)
        with pytest.raises(TypeError):
            AsyncMongoReadWriteLock("k", None)  # type: ignore[arg-type]
        (rw,) = _locks("k", db, 1)
        with pytest.raises(ValueError, match="side must be 'read' or 'write', not 'both'"):
            await rw.acquire("both")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="side must be 'read' or 'write'"):
            await rw.acquire(None)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="Cannot set timeout if blocking is False"):
            await rw.acquire("write", blocking=False, timeout=1)
        await rw.acquire("read")
        with pytest.raises(RuntimeError, match="already holds 'k' for reading"):
            await rw.acquire("write")
        await rw.close()

    asyncio.run(body())


def test_holds_are_kept_alive_over_many_ttls_on_the_fake_clock():
    async def body():
        clock = testing.FakeClock()
        db = clock.memory_uri()
        rw, other = _locks("k", db, 2, ttl=10)
        with pytest.raises(LeaseLost, match="write hold of read-write lock 'k'"):
            async with rw.write(blocking=False) as hold:
                await asyncio.to_thread(clock.advance, 3600)  # 360 ttls
                assert not hold.lost.is_set() and rw.owned
                with pytest.raises(LockExists, match="held for writing"):
                    await other.acquire("read", blocking=False)
                with testing.unavailable(db):  # cut off: lost at its renew deadline
                    await asyncio.to_thread(clock.advance, 9.1)
                assert await hold.wait_lost(1)
        await asyncio.to_thread(clock.advance, 2)  # past the lost hold's expiry
        assert await other.acquire("read", blocking=False) and other.fence > hold.fence
        await _close(rw, other)

    asyncio.run(body())
