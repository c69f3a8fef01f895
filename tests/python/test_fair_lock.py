"""Fair (FIFO) MongoLocker with real processes, on the server and on SQLite: waiters that
queued in a known order acquire in that order, and a waiter killed with SIGKILL costs
the others at most one ttl. The rules themselves run on a fake clock in
tests/unit/fair_lock_test.cpp."""

import asyncio
import os
import signal
import time
import uuid

import mongoelector
import mongoelector.aio
import pytest
from mongoelector import AcquireTimeout, MongoLocker
from mongoelector.aio import AsyncMongoLocker
from procs import check_no_overlap, finish, read_line, read_log, spawn

pytestmark = pytest.mark.slow

WORKER = os.path.join(os.path.dirname(__file__), "helpers", "fair_lock_worker.py")


@pytest.fixture(params=["server", "sqlite"])
def lock_db(request, tmp_path):
    """The `db` of the lockers of every process: a URI naming the server's test
    database, or an SQLite file."""
    if request.param == "sqlite":
        return f"sqlite://{tmp_path}/fair.db"
    _, uri = request.getfixturevalue("server_db")
    return uri


def waiter(db, key, name, log, ttl, hold=0.2):
    p = spawn(
        "wait",
        "--db",
        db,
        "--key",
        key,
        "--name",
        name,
        "--log",
        log,
        "--ttl",
        ttl,
        "--hold",
        hold,
        worker=WORKER,
    )
    line = read_line(p, timeout=30)
    assert line[0] == "queued" and int(line[1]) > 0, line
    return p, int(line[1])


def test_processes_acquire_in_the_order_they_queued(lock_db, tmp_path):
    key, log = "f-" + uuid.uuid4().hex[:8], tmp_path / "holds.log"
    holder = MongoLocker(key, lock_db, ttl=5, fair=True)
    holder.acquire(blocking=False)
    procs, tickets = [], []
    try:
        for i in range(5):  # each queues before the next starts: a known order
            p, ticket = waiter(lock_db, key, f"w{i}", log, ttl=5)
            procs.append(p)
            tickets.append(ticket)
        assert tickets == sorted(tickets), "tickets follow arrival"
        holder.release()
        for p in procs:
            assert p.wait(60) == 0, p.stderr.read()
    finally:
        finish(*procs)
        holder.close()
    rows = read_log(log)
    enters = [r[1] for r in rows if r[0] == "enter"]
    assert enters == [f"w{i}" for i in range(5)], rows
    by_name = {}
    for kind, name, t in rows:
        by_name.setdefault(name, {})[kind] = t
    check_no_overlap([(n, d["enter"], d["exit"]) for n, d in by_name.items()])


def test_a_killed_waiter_costs_at_most_one_ttl(lock_db, tmp_path):
    key, log, ttl = "f-" + uuid.uuid4().hex[:8], tmp_path / "holds.log", 3.0
    holder = MongoLocker(key, lock_db, ttl=ttl, fair=True)
    holder.acquire(blocking=False)
    procs = []
    try:
        dead, _ = waiter(lock_db, key, "dead", log, ttl=ttl)
        procs.append(dead)
        alive, _ = waiter(lock_db, key, "alive", log, ttl=ttl)
        procs.append(alive)
        dead.send_signal(signal.SIGKILL)
        dead.wait(10)
        killed = time.monotonic()
        holder.release()
        assert alive.wait(60) == 0, alive.stderr.read()
    finally:
        finish(*procs)
        holder.close()
    rows = read_log(log)
    assert [r[1] for r in rows if r[0] == "enter"] == ["alive"], rows
    entered = float(next(r[2] for r in rows if r[0] == "enter"))
    # The dead waiter's entry was renewed last before the kill: it stops counting at
    # most one ttl later; the next look of the live waiter comes within a few steps.
    assert entered - killed <= ttl + 1.0, "the dead waiter held its place past one ttl"


def test_fair_must_be_a_bool(tmp_path):
    db = f"sqlite://{tmp_path}/fair.db"
    for bad in ("yes", 1, None):
        with pytest.raises(TypeError, match="fair must be a bool"):
            MongoLocker("k", db, fair=bad)
        with pytest.raises(TypeError, match="fair must be a bool"):
            AsyncMongoLocker("k", db, fair=bad)
    assert MongoLocker("k", db).fair is False
    lock = MongoLocker("k", db, fair=True)
    assert lock.fair is True
    lock.close()


def _sync_give_up(db):
    quitter = MongoLocker("k", db, ttl=30, fair=True, timeparanoid=False)
    with pytest.raises(AcquireTimeout):
        quitter.acquire(timeout=0.3, step=0.05)
    assert quitter._core.queue_ticket == 0
    quitter.close()


def _async_give_up(db):
    async def give_up():
        quitter = AsyncMongoLocker("k", db, ttl=30, fair=True, timeparanoid=False)
        with pytest.raises(AcquireTimeout):
            await quitter.acquire(timeout=0.3, step=0.05)
        await quitter.close()

    asyncio.run(give_up())


@pytest.mark.parametrize("give_up", [_sync_give_up, _async_give_up], ids=["sync", "aio"])
def test_a_fair_waiter_that_times_out_leaves_the_queue(tmp_path, give_up):
    db = f"sqlite://{tmp_path}/fair.db"
    holder = MongoLocker("k", db, ttl=30, fair=True)
    holder.acquire(blocking=False)
    give_up(db)
    newcomer = MongoLocker("k", db, ttl=30, fair=True)
    holder.release()
    assert newcomer.acquire(blocking=False), "no entry left before the newcomer"
    holder.close()
    newcomer.close()


async def _queued(locker):
    while locker._core is None or locker._core.queue_ticket == 0:
        await asyncio.sleep(0.01)


def _next_is_served(db, holder, give_up):
    """After ``give_up()`` (a coroutine function: a waiter gives up) the next waiter is
    served when ``holder`` lets go, not one ttl (600 s) later."""

    async def body():
        await give_up()
        nxt = AsyncMongoLocker("k", db, ttl=600, fair=True, timeparanoid=False)
        waiter = asyncio.ensure_future(nxt.acquire(step=0.02))
        await asyncio.wait_for(_queued(nxt), 30)
        holder.release()
        assert await asyncio.wait_for(waiter, 30) is True
        await nxt.close()

    asyncio.run(body())


@pytest.fixture
def held(tmp_path):
    db = f"sqlite://{tmp_path}/fair.db"
    holder = MongoLocker("k", db, ttl=600, fair=True)
    holder.acquire(blocking=False)
    yield db, holder
    holder.close()


def test_a_cancelled_async_fair_waiter_leaves_the_queue(held):
    db, holder = held
    quitter = AsyncMongoLocker("k", db, ttl=600, fair=True, timeparanoid=False)

    async def cancel_a_waiter():
        task = asyncio.ensure_future(quitter.acquire(step=0.02))
        await asyncio.wait_for(_queued(quitter), 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    _next_is_served(db, holder, cancel_a_waiter)
    assert quitter._core is not None and not quitter._core.owned()
    asyncio.run(quitter.close())


def test_an_async_fair_lease_that_times_out_leaves_the_queue(held):
    """Its locker stays open (closing it would leave the queue too)."""
    db, holder = held
    lease = mongoelector.aio.lease(
        db, "k", ttl=600, timeout=0.3, step=0.05, fair=True, timeparanoid=False
    )

    async def time_out():
        with pytest.raises(AcquireTimeout):
            await lease.acquire()

    _next_is_served(db, holder, time_out)
    asyncio.run(lease.locker.close())
