"""mongoelector.aio: AsyncMongoLocker, AsyncMongoLeaderElector and ``async with lease()``.

Against the real server through both asyncio transports:
  uri      the native transport ("mongodb://host/dbname"): core calls on worker threads;
  asyncdb  a pymongo AsyncDatabase (pymongo's asyncio API): the core drives a synchronous
           facade whose calls run the AsyncDatabase's coroutines on the event loop.
Plus the embedded SQLite backend (no server). pytest-asyncio is not needed: each test runs
its coroutine with asyncio.run().
"""

import asyncio
import datetime
import gc
import logging
import os
import tempfile
import threading
import time
import uuid

import mongoelector
import pymongo
import pytest
from helpers.aio_util import BlockingCallsOnLoop, LagProbe, delay_attempts, wait_until
from mongoelector import AcquireTimeout, LeaseLost, LockExists, MongoLeaderElector, MongoLocker, aio
from mongoelector.aio import AsyncLease, AsyncMongoLeaderElector, AsyncMongoLocker
from mongoelector.aio._facade import AsyncDatabaseFacade, is_async_database

TRANSPORTS = ["uri", "asyncdb"]


def _key(prefix="aio"):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def run_with_db(server_db, transport, body):
    """asyncio.run(body(db)) with ``db`` the URI or an AsyncDatabase on the test server
    (its AsyncMongoClient made and closed inside the loop)."""
    raw, uri = server_db

    async def main():
        if transport == "uri":
            return await body(uri)
        client = pymongo.AsyncMongoClient(uri, serverSelectionTimeoutMS=5000)
        try:
            return await body(client[raw.name])
        finally:
            await client.close()

    return asyncio.run(main())


# ------------------------------------------------------------------ basics ----


def test_exports_and_transport_checks():
    assert mongoelector.aio is aio
    assert (
        aio.lease(  # no I/O before first use
            "mongodb://127.0.0.1:1/db", "k"
        ).locker.closed
        is False
    )
    client = pymongo.AsyncMongoClient("mongodb://127.0.0.1:1/db", connect=False)
    adb = client.db
    assert is_async_database(adb)
    # The synchronous classes keep refusing a raw AsyncDatabase...
    with pytest.raises(TypeError, match="asyncio"):
        MongoLocker("k", adb)
    with pytest.raises(TypeError, match="asyncio"):
        MongoLeaderElector("k", adb)
    # ...the facade is a synchronous Database for them.
    facade = AsyncDatabaseFacade(adb, 1.0)
    assert not is_async_database(facade)
    mongoelector._transport.check_db(facade)
    # The synchronous classes' argument checks, at construction.
    with pytest.raises(ValueError):
        AsyncMongoLocker("", adb)
    with pytest.raises(TypeError):
        AsyncMongoLocker(42, adb)
    with pytest.raises(ValueError):
        AsyncMongoLocker("k", adb, ttl=0)
    with pytest.raises(TypeError, match="database="):
        AsyncMongoLocker("k", adb, database="other")
    with pytest.raises(ValueError, match="names no database"):
        AsyncMongoLocker("k", "mongodb://127.0.0.1:1")
    with pytest.raises(TypeError):
        AsyncMongoLeaderElector("k", "not a uri")
    with pytest.raises(ValueError):
        aio.lease(adb, "k", blocking=False, timeout=1)


def test_facade_refuses_the_loop_thread():
    """A core call through the facade on the loop's own thread would wait for itself."""

    async def main():
        client = pymongo.AsyncMongoClient("mongodb://127.0.0.1:1/db", connect=False)
        facade = AsyncDatabaseFacade(client.db, 1.0)
        facade.bind(asyncio.get_running_loop())
        with pytest.raises(RuntimeError, match="deadlock"):
            facade.command("ping")
        with pytest.raises(RuntimeError, match="deadlock"):
            facade["c"].find_one({})
        await client.close()

    asyncio.run(main())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_locker_api(server_db, transport):
    key = _key()

    async def body(db):
        lock = AsyncMongoLocker(key, db, ttl=5)
        other = AsyncMongoLocker(key, db, ttl=5)
        assert lock.fence is None and lock.ts_expire is None
        await lock.open()
        assert lock.host and lock.pid == os.getpid()
        assert await lock.acquire() is True
        fence = lock.fence
        assert isinstance(fence, int) and fence > 0
        assert isinstance(lock.ts_expire, datetime.datetime)
        assert await lock.locked() and await lock.owned()
        assert not await other.owned()
        current = await lock.get_current()
        assert current["uuid"] == lock.uuid and current["fence"] == fence
        status = await lock.status()
        assert status["lock_owned"] is True and status["ttl"] == 5
        expires = await lock.touch()
        assert isinstance(expires, datetime.datetime)
        with pytest.raises(LockExists, match=key):
            await other.acquire(blocking=False)
        t0 = time.monotonic()
        with pytest.raises(AcquireTimeout):
            await other.acquire(timeout=0.3, step=0.05)
        assert 0.25 < time.monotonic() - t0 < 2
        with pytest.raises(ValueError):
            await other.acquire(blocking=False, timeout=1)
        await lock.release()
        assert not await lock.locked() and lock.fence is None
        async with other as held:
            assert held is other and other.fence > fence
        assert not await other.locked()
        # force takes a held lock.
        await lock.acquire()
        assert await other.acquire(blocking=False, force=True)
        assert not await lock.owned() and await other.owned()
        await other.release()
        await lock.close()
        await lock.close()  # idempotent
        assert lock.closed and "closed=True" in repr(lock)
        with pytest.raises(mongoelector.ClosedError):
            await lock.acquire()
        await other.close()

    run_with_db(server_db, transport, body)


def test_sqlite_uri():
    path = os.path.join(tempfile.mkdtemp(), "locks.db")
    uri = f"sqlite:///{path}"

    async def main():
        a = AsyncMongoLocker("k", uri, ttl=5)
        b = AsyncMongoLocker("k", uri, ttl=5)
        async with a:
            with pytest.raises(LockExists):
                await b.acquire(blocking=False)
        assert await b.acquire(blocking=False)
        await b.release()
        async with aio.lease(uri, "k2", ttl=2, timeout=2) as held:
            assert held.fence > 0
        await a.close()
        await b.close()

    asyncio.run(main())


def test_dropped_async_lease_is_released():
    """An AsyncLease dropped without release() is closed when collected, as a synchronous
    lease is: its native lease must not be kept alive by its own on_lost callback (which
    refers to ``lease.lost``, which reads the native lease), or it renews forever and the
    lock is never freed."""
    path = os.path.join(tempfile.mkdtemp(), "locks.db")
    uri = f"sqlite:///{path}"

    async def main():
        held = aio.lease(uri, "dropped", ttl=30, timeout=2)
        await held.acquire()
        other = AsyncMongoLocker("dropped", uri, ttl=30)
        with pytest.raises(LockExists):
            await other.acquire(blocking=False)
        locker = held.locker
        del held
        gc.collect()
        try:
            assert await other.acquire(blocking=False)  # released by the collected lease
            await other.release()
        finally:
            await other.close()
            await locker.close()

    asyncio.run(main())


# ----------------------------------------------- contention and loop lag ----


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_contention_never_blocks_the_loop(server_db, transport):
    """50 tasks contend for one lock (acquire, hold ~5 ms, release; 3 rounds each): never
    two holders at once, fencing tokens increase hold after hold, and nothing that can
    block the event loop runs on it: no native call but the acquire run's steps, no
    sleep, no blocking socket I/O (BlockingCallsOnLoop). A waiter that made a round trip
    or slept on the loop would show up there, on a quiet machine or a loaded one. The
    loop's lag is printed (it depends on the machine)."""
    tasks, rounds, hold, step = 50, 3, 0.005, 0.1
    acquisitions = tasks * rounds

    async def body(db):
        key = _key("contend")
        lockers = [AsyncMongoLocker(key, db, ttl=10) for _ in range(tasks)]
        await asyncio.gather(*(lk.open() for lk in lockers))
        holders = 0
        max_holders = 0
        fences = []

        async def contender(lock):
            nonlocal holders, max_holders
            for _ in range(rounds):
                await lock.acquire(step=step)
                holders += 1
                max_holders = max(max_holders, holders)
                fences.append(lock.fence)
                await asyncio.sleep(hold)
                holders -= 1
                await lock.release()

        async with LagProbe() as probe, BlockingCallsOnLoop() as calls:
            started = time.perf_counter()
            await asyncio.gather(*(contender(lk) for lk in lockers))
            elapsed = time.perf_counter() - started
        await asyncio.gather(*(lk.close() for lk in lockers))
        return max_holders, fences, elapsed, probe, calls

    max_holders, fences, elapsed, probe, calls = run_with_db(server_db, transport, body)
    print(
        f"\n[{transport}] {tasks} tasks x {rounds} rounds: {acquisitions} acquisitions "
        f"in {elapsed:.2f} s = {acquisitions / elapsed:.0f}/s; {probe.report()}"
    )
    assert max_holders == 1
    assert len(fences) == acquisitions and len(set(fences)) == acquisitions
    assert fences == sorted(fences), "fencing tokens must increase hold after hold"
    assert calls.found == [], f"blocking calls on the event loop: {sorted(set(calls.found))}"


# ------------------------------------------------------------ cancellation ----


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_cancelling_a_waiting_acquire(server_db, transport):
    key = _key("cancel")

    async def body(db):
        holder = AsyncMongoLocker(key, db, ttl=10)
        waiter = AsyncMongoLocker(key, db, ttl=10)
        third = AsyncMongoLocker(key, db, ttl=10)
        await holder.acquire()
        task = asyncio.ensure_future(waiter.acquire(step=0.05))
        await asyncio.sleep(0.5)  # several attempts made, all refused
        assert not task.done()
        t0 = time.perf_counter()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        cancel_latency = time.perf_counter() - t0
        await holder.release()
        await asyncio.sleep(0.1)  # an attempt still in flight would have landed by now
        assert not await waiter.owned()
        assert await third.acquire(blocking=False), "someone holds the lock after cancel"
        await third.release()
        for lk in (holder, waiter, third):
            await lk.close()
        return cancel_latency

    latency = run_with_db(server_db, transport, body)
    print(f"\n[{transport}] CancelledError {latency * 1000:.2f} ms after cancel()")
    assert latency < 0.05


def test_asyncdb_default_cycle_is_two_commands_and_keeps_the_document(server_db):
    """The asyncio lock takes its token at acquire, so by default it keeps its document on
    release (as C, Go and Rust): a cycle is one findAndModify (the claim, token included)
    and one update (the release), and the tokens still rise. delete_on_release=True sends
    the original's cycle: an insert where the document is gone, its token's two writes,
    and the delete."""
    raw, uri = server_db
    names = []

    class Listener(pymongo.monitoring.CommandListener):
        def started(self, event):
            if event.command_name in ("insert", "findAndModify", "update", "delete"):
                names.append(event.command_name)

        def succeeded(self, event):
            pass

        def failed(self, event):
            pass

    async def cycles(lock, n):
        tokens = []
        for _ in range(n):
            await lock.acquire()
            tokens.append(lock.fence)
            await lock.release()
        return tokens

    async def main():
        client = pymongo.AsyncMongoClient(uri, event_listeners=[Listener()])
        try:
            db = client[raw.name]
            key = _key("cycle")
            lock = AsyncMongoLocker(key, db, ttl=30)
            first = await cycles(lock, 1)  # creates the document: its token's writes too
            names.clear()
            tokens = await cycles(lock, 3)
            assert names == ["findAndModify", "update"] * 3, names
            assert tokens == sorted(set(tokens)) and tokens[0] > first[0], tokens
            doc = await db["mongolocker"].find_one({"_id": key})
            assert doc is not None and doc["locked"] is False
            await lock.close()

            deleting = AsyncMongoLocker(_key("cycle-del"), db, ttl=30, delete_on_release=True)
            await cycles(deleting, 1)
            names.clear()
            await cycles(deleting, 1)
            assert names == ["insert", "findAndModify", "update", "delete"], names
            await deleting.close()
        finally:
            await client.close()

    asyncio.run(main())


class _Started(pymongo.monitoring.CommandListener):
    """Calls ``on(event)`` for every command started (on the thread that sends it), and
    ``on_reply(event)`` for every command that succeeded (as its reply is read)."""

    def __init__(self):
        self.on = lambda event: None
        self.on_reply = lambda event: None

    def started(self, event):
        self.on(event)

    def succeeded(self, event):
        self.on_reply(event)

    def failed(self, event):
        pass


def run_with_listener(server_db, body):
    """asyncio.run(body(db, listener)) on an AsyncDatabase whose client reports to
    ``listener`` (a _Started)."""
    raw, uri = server_db
    listener = _Started()

    async def main():
        client = pymongo.AsyncMongoClient(
            uri, serverSelectionTimeoutMS=5000, event_listeners=[listener]
        )
        try:
            return await body(client[raw.name], listener)
        finally:
            await client.close()

    return asyncio.run(main())


def test_asyncdb_operations_await_pymongo_on_the_loop(server_db, monkeypatch):
    """With an AsyncDatabase, once a locker has made its first claim (the server's facts,
    a clock sample), acquire, touch, owned, locked, get_current and release await
    pymongo on the loop itself: no call goes to a worker thread, and each is one command.
    A stale clock sample sends the next operation to a worker again (its sample is a
    round trip)."""
    from mongoelector.aio import _pool

    submitted = []
    real_submit = _pool.Pool.submit

    def counting(self, fn):
        submitted.append(fn)
        return real_submit(self, fn)

    monkeypatch.setattr(_pool.Pool, "submit", counting)

    async def body(db, listener):
        names = []
        lock = AsyncMongoLocker(_key("on-loop"), db, ttl=30)
        await lock.acquire()  # the first claim's round trips run on a worker
        await lock.release()
        assert submitted, "the first acquire ran on a worker"
        submitted.clear()
        listener.on = lambda event: names.append(event.command_name)
        for _ in range(3):
            await lock.acquire()
            assert lock.fence is not None
            assert await lock.touch() is not None
            assert await lock.owned() and await lock.locked()
            assert (await lock.get_current())["uuid"] == lock.uuid
            await lock.release()
            assert not await lock.locked()
        assert submitted == []
        assert names == ["findAndModify", "update", "find", "find", "find", "update", "find"] * 3
        await lock.close()

    run_with_listener(server_db, body)


@pytest.mark.parametrize("moment", ["sent", "reply"])
def test_cancelled_claim_on_the_loop_is_released(server_db, caplog, moment):
    """The task is cancelled while its claim, awaited on the loop, is on the wire ("sent")
    or as its reply is read ("reply": the claim's own task, shielded, runs on to its
    outcome before the cancelled task resumes). The write is not cut short (it would land
    unknown to anyone); the hold it took reaches nobody and is released at once, fenced
    by its token, not left until its lease runs out. The locker is usable again."""
    key = _key("cancel-on-loop-" + moment)

    async def body(db, listener):
        lock = AsyncMongoLocker(key, db, ttl=30)
        other = AsyncMongoLocker(key, db, ttl=30)
        await lock.acquire()
        await lock.release()
        task = None
        seen = []

        def cancel_at(event):
            if event.command_name == "findAndModify" and task is not None and not seen:
                seen.append(event)
                task.cancel()  # on the loop's thread

        if moment == "sent":
            listener.on = cancel_at
        else:
            listener.on_reply = cancel_at
        task = asyncio.ensure_future(lock.acquire())
        with pytest.raises(asyncio.CancelledError):
            await task
        assert seen, "cancelled at the claim"
        listener.on = listener.on_reply = lambda event: None
        await wait_until(lambda: other.acquire(blocking=False), timeout=5, swallow=(LockExists,))
        assert await other.owned() and not await lock.owned()
        assert lock.fence is None
        await other.release()
        await lock.acquire(blocking=False)  # and the cancelled locker is usable again
        await lock.close()
        await other.close()

    with caplog.at_level(logging.INFO, logger="mongoelector"):
        run_with_listener(server_db, body)
    assert any("taken by a cancelled acquire" in r.getMessage() for r in caplog.records)


def test_refused_non_blocking_claim_on_the_loop_names_the_holder(server_db):
    key = _key("held-on-loop")

    async def body(db, listener):
        holder = AsyncMongoLocker(key, db, ttl=30)
        lock = AsyncMongoLocker(key, db, ttl=30)
        await lock.acquire()
        await lock.release()
        await holder.acquire()
        with pytest.raises(LockExists, match=f"{key} owned by .* pid {os.getpid()}"):
            await lock.acquire(blocking=False)
        with pytest.raises(AcquireTimeout):
            await lock.acquire(timeout=0.3, step=0.05)
        await holder.release()
        await lock.acquire(timeout=5)
        assert await lock.owned()
        await lock.close()
        await holder.close()

    run_with_listener(server_db, body)


def test_cancelled_attempt_in_flight_releases_what_it_took(server_db, monkeypatch, caplog):
    """The task is cancelled while its claim is on the wire: the claim is applied at the
    server, its reply comes late (made slow here, after the server applied it). The
    core's acquire run, cancelled meanwhile, releases that hold, fenced by its token:
    the cancelled acquire leaves no holder."""
    from mongoelector.aio import _facade

    key = _key("orphan")
    real = _facade._FacadeCollection.find_one_and_update
    claimed = threading.Event()
    landed = []

    def slow_reply(self, *args, **kwargs):  # on the worker, in the attempt's claim
        doc = real(self, *args, **kwargs)
        if doc is not None and "uuid" in doc and not claimed.is_set():  # the claim's reply
            claimed.set()
            time.sleep(0.2)  # the task is cancelled meanwhile
            landed.append(doc)
        return doc

    async def body(db):
        lock = AsyncMongoLocker(key, db, ttl=30)
        other = AsyncMongoLocker(key, db, ttl=30)
        await lock.open()
        monkeypatch.setattr(_facade._FacadeCollection, "find_one_and_update", slow_reply)
        task = asyncio.ensure_future(lock.acquire())
        await wait_until(claimed.is_set, timeout=5, interval=0.005)
        t0 = time.perf_counter()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert time.perf_counter() - t0 < 0.05
        # The claim took the free lock (its reply is the new document)...
        await wait_until(lambda: landed, timeout=5, interval=0.005)
        assert landed[0] is not None and landed[0]["uuid"] == lock.uuid
        monkeypatch.setattr(_facade._FacadeCollection, "find_one_and_update", real)
        # ...and that hold is released by the cancelled run at once.
        await wait_until(lambda: other.acquire(blocking=False), timeout=2, swallow=(LockExists,))
        assert not await lock.owned() and await other.owned()
        assert lock.fence is None
        await other.release()
        await lock.close()
        await other.close()

    with caplog.at_level(logging.INFO, logger="mongoelector"):
        run_with_db(server_db, "asyncdb", body)
    assert any("taken by a cancelled acquire" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_cancelled_before_the_claim_sends_none(server_db, transport, monkeypatch):
    """The task is cancelled after its attempt was handed to a worker but before the
    claim was sent: the core's run is cancelled first, so the attempt makes no claim."""
    key = _key("no-claim")

    async def body(db):
        lock = AsyncMongoLocker(key, db, ttl=30)
        await lock.open()
        started, results, _ = delay_attempts(monkeypatch, AsyncMongoLocker)
        task = asyncio.ensure_future(lock.acquire())
        await wait_until(started.is_set, timeout=5, interval=0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await wait_until(lambda: results, timeout=5, interval=0.005)
        assert results == [("cancelled", None)]
        assert not await lock.locked()  # nothing was written
        await lock.close()

    run_with_db(server_db, transport, body)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_close_ends_a_waiting_acquire(server_db, transport):
    """close() while another task waits in acquire(): that acquire ends (ClosedError) and
    takes nothing, even if the lock is freed meanwhile."""
    key = _key("close")

    async def body(db):
        holder = AsyncMongoLocker(key, db, ttl=10)
        waiter = AsyncMongoLocker(key, db, ttl=10)
        await holder.acquire()
        task = asyncio.ensure_future(waiter.acquire(step=0.02))
        await asyncio.sleep(0.2)
        await waiter.close()
        await holder.release()
        with pytest.raises(mongoelector.ClosedError):
            await asyncio.wait_for(task, 2)
        assert not await holder.locked()
        await holder.close()

    run_with_db(server_db, transport, body)


def test_result_delivered_then_cancelled_goes_to_the_clean_up():
    """The other race: the core call's result is delivered, then the task is cancelled
    before it resumes; the result (a hold) must not be dropped either."""
    from mongoelector.aio._common import call as _call

    async def main():
        go = threading.Event()
        orphaned = []

        def core_call():
            go.wait(5)
            return 42

        task = asyncio.ensure_future(_call(core_call, orphan=orphaned.append))
        await asyncio.sleep(0.01)  # submitted; the worker waits for `go`
        go.set()
        time.sleep(0.2)  # blocks the loop: the result is queued for it meanwhile
        asyncio.get_running_loop().call_soon(task.cancel)  # runs after the delivery
        with pytest.raises(asyncio.CancelledError):
            await task
        await wait_until(lambda: orphaned, timeout=2)
        assert orphaned == [42]

    asyncio.run(main())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_cancelling_a_waiting_lease(server_db, transport):
    key = _key("lease-cancel")

    async def body(db):
        holder = AsyncMongoLocker(key, db, ttl=10)
        await holder.acquire()
        waiting = aio.lease(db, key, ttl=10, step=0.05)
        task = asyncio.ensure_future(waiting.acquire())
        await asyncio.sleep(0.3)
        t0 = time.perf_counter()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        latency = time.perf_counter() - t0
        await holder.release()
        await asyncio.sleep(0.1)
        assert not await waiting.locker.owned()
        assert await holder.acquire(blocking=False)
        await holder.close()
        await waiting.locker.close()
        return latency

    assert run_with_db(server_db, transport, body) < 0.05


# ------------------------------------------------------------------- lease ----


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_async_with_lease(server_db, transport):
    key, ttl = _key("lease"), 1

    async def body(db):
        async with aio.lease(db, key, ttl=ttl, timeout=5) as held:
            assert isinstance(held, AsyncLease)
            fence = held.fence
            assert fence > 0
            assert isinstance(held.lost, asyncio.Event) and not held.lost.is_set()
            await asyncio.sleep(2.5 * ttl)  # renewed by the native renewer meanwhile
            held.check()
            assert await held.locker.owned()
            assert not await held.wait_lost(0.01)
            other = AsyncMongoLocker(key, db, ttl=ttl)
            with pytest.raises(LockExists):
                await other.acquire(blocking=False)
            with pytest.raises(AcquireTimeout):
                async with aio.lease(db, key, ttl=ttl, timeout=0.3, step=0.05):
                    pass
            with pytest.raises(LockExists):
                async with aio.lease(db, key, ttl=ttl, blocking=False):
                    pass
        # Released on exit: the next holder gets it at once, with a greater token.
        async with aio.lease(db, key, ttl=ttl, blocking=False) as again:
            assert again.fence > fence
        # Lost when taken: lost is set on the loop, check() and the exit raise.
        with pytest.raises(LeaseLost, match="lost while the block ran"):
            async with aio.lease(db, key, ttl=ttl, timeout=5) as doomed:
                assert await other.acquire(blocking=False, force=True)
                assert await doomed.wait_lost(3 * ttl), "loss not noticed"
                assert doomed.lost.is_set() and doomed.reason
                with pytest.raises(LeaseLost, match=key):
                    doomed.check()
        assert await other.owned()  # a lost lease is not released
        await other.release()
        await other.close()

    run_with_db(server_db, transport, body)


# ---------------------------------------------------------------- elector ----


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_elector_with_coroutine_callbacks(server_db, transport):
    key, ttl = _key("elect"), 2

    async def body(db):
        loop_thread = threading.get_ident()
        events = []
        threads = set()
        loops = 0

        async def on_leader():
            threads.add(threading.get_ident())
            await asyncio.sleep(0.02)  # a real await: the next callback waits for it
            events.append("leader")

        def on_leader_loss():
            threads.add(threading.get_ident())
            events.append("loss")

        async def on_loop():
            nonlocal loops
            threads.add(threading.get_ident())
            loops += 1

        elector = AsyncMongoLeaderElector(
            key, db, ttl=ttl, on_leader=on_leader, on_leader_loss=on_leader_loss, on_loop=on_loop
        )
        follower = AsyncMongoLeaderElector(key, db, ttl=ttl)
        assert not elector.running and not elector.is_leader and elector.fence is None
        async with LagProbe() as probe, BlockingCallsOnLoop() as calls:
            await elector.start()
            assert elector.running
            await wait_until(lambda: events == ["leader"], timeout=10)
            assert elector.is_leader and isinstance(elector.fence, int)
            await follower.start()
            await asyncio.sleep(ttl)  # a few polls of both
            assert not follower.is_leader and follower.fence is None
        assert await elector.leader_exists()
        status = await elector.node_status()
        assert status["is_leader"] is True and status["key"] == key
        detail = await elector.cluster_detail()
        assert detail["leader"] is not None
        assert detail["leader"]["uuid"] == status["_id"]
        await elector.stop()
        # stop() returns once the callbacks it fired have run.
        assert events == ["leader", "loss"]
        assert not elector.running and not elector.is_leader
        assert loops >= 1
        assert threads == {loop_thread}, "callbacks must run on the event loop"
        # The follower takes over about one poll later (the leader released).
        await wait_until(lambda: follower.is_leader, timeout=3 * ttl)
        await follower.close()
        await elector.close()
        assert elector.closed
        return probe, calls

    probe, calls = run_with_db(server_db, transport, body)
    print(f"\n[{transport}] loop lag while electing: max {probe.max * 1000:.2f} ms")
    # The election loop is the native thread: on the event loop its waits and round trips
    # would stall it for seconds (the lag is printed: it depends on the machine).
    assert calls.found == [], f"blocking calls on the event loop: {sorted(set(calls.found))}"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_elector_callback_may_stop_it(server_db, transport):
    """A coroutine callback that awaits stop() of its own elector does not deadlock; a
    plain callback that raises is logged and the loop goes on."""
    key = _key("elect-stop")

    async def body(db):
        events = []
        elector = None

        def on_loop():
            events.append("loop")
            raise RuntimeError("a failing callback")

        async def on_leader():
            events.append("leader")
            await elector.stop()
            events.append("stopped")

        elector = AsyncMongoLeaderElector(
            key,
            db,
            ttl=2,
            on_leader=on_leader,
            on_loop=on_loop,
            on_leader_loss=lambda: events.append("loss"),
        )
        await asyncio.wait_for(elector.start(blocking=True), 10)
        # The callbacks stop() fired run after the one that called it (one at a time).
        await wait_until(lambda: "loss" in events, timeout=5)
        assert events.index("leader") < events.index("stopped") < events.index("loss")
        assert not elector.running
        await elector.close()

    run_with_db(server_db, transport, body)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_elector_poll_and_release_run_their_callbacks(server_db, transport):
    key = _key("elect-poll")

    async def body(db):
        events = []

        async def on_leader():
            await asyncio.sleep(0.01)
            events.append("leader")

        elector = AsyncMongoLeaderElector(
            key, db, ttl=5, on_leader=on_leader, on_leader_loss=lambda: events.append("loss")
        )
        await elector.poll()  # no loop thread: this poll takes the lead
        assert elector.is_leader and events == ["leader"]
        elector.callback_on_leader = None
        await elector.release()
        assert not elector.is_leader and events == ["leader", "loss"]
        await elector.poll()
        assert elector.is_leader and events == ["leader", "loss"]  # on_leader unset
        await elector.close()
        assert events == ["leader", "loss", "loss"]

    run_with_db(server_db, transport, body)


def test_elector_used_from_a_second_loop(server_db):
    """An elector (URI transport) outlives one asyncio.run(): its callbacks then run on
    the loop that uses it now."""
    _, uri = server_db
    events = []
    elector = AsyncMongoLeaderElector(
        _key("two-loops"),
        uri,
        ttl=5,
        on_leader=lambda: events.append(("leader", id(asyncio.get_running_loop()))),
        on_leader_loss=lambda: events.append(("loss", id(asyncio.get_running_loop()))),
    )

    async def first():
        await elector.poll()
        return id(asyncio.get_running_loop())

    async def second():
        await elector.close()
        return id(asyncio.get_running_loop())

    one = asyncio.run(first())
    two = asyncio.run(second())
    assert events == [("leader", one), ("loss", two)]
