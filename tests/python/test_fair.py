"""Fair (FIFO) queueing: ``fair=True`` on MongoSemaphore and on MongoReadWriteLock's
writers (core/hold/fair_queue.h). On the testing kit's FakeClock (no sleeps): blocking
waiters are served in the order they arrived, an unfair claimant does not barge past the
queue, a waiter that times out leaves it at once, a waiter that stops (its process died)
holds the others up until its entry expires; bad values are refused by name before any
I/O (asyncio classes too). With real processes on the server and on a SQLite file: six
waiters are served in the order they arrived, and a SIGKILLed waiter's entry expires at
most one ttl after the kill, the next waiter served after it."""

import os
import signal
import threading
import time
import uuid
from datetime import datetime, timezone

import pytest
from mongoelector import MongoReadWriteLock, MongoSemaphore, testing
from mongoelector.aio import AsyncMongoReadWriteLock, AsyncMongoSemaphore
from mongoelector.errors import AcquireTimeout, LockExists
from procs import read_line, spawn, wait_all

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "helpers", "fair_worker.py")


def _wait_in_order(clock, names, take):
    """Starts one thread per name, each blocking in ``take(name)`` once the previous one
    sleeps on the clock (so arrival order is the order of ``names``); returns the grant
    order list (filled as they are served) and the threads."""
    granted = []
    threads = []
    for name in names:
        clock.settle()
        idle = clock.waiters

        def run(name=name):
            take(name)
            granted.append(name)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        clock.block_until_waiters(idle + 1)  # refused once, queued, sleeping on the clock
        threads.append(t)
    return granted, threads


def _advance_until(clock, done, step=0.25, most=400):
    """Advances the clock by ``step`` until ``done()``. When a step lets a thread's
    blocking call return (one fewer thread waits on the clock), that thread is given the
    time to record it: this loop, which takes and releases the GIL at every step, would
    otherwise keep it from the GIL."""
    for _ in range(most):
        if done():
            return
        waiting = clock.waiters
        clock.advance(step)
        clock.settle()
        if clock.waiters < waiting:
            until = time.monotonic() + 30
            while not done() and time.monotonic() < until:
                time.sleep(0.001)
    raise AssertionError("not done within the fake time allowed")


def _served_in_order(clock, names, granted, threads, release):
    """Each of ``names`` (waiting in that order, ``_wait_in_order``) is served in turn,
    then ``release(name)`` lets the next one in."""
    for i, name in enumerate(names):
        _advance_until(clock, lambda i=i: len(granted) > i)
        assert granted == list(names)[: i + 1]
        release(name)
    for t in threads:
        t.join(10)


def _claimed_at(sem, ttl):
    """The fake (server) time of the claim of the slot ``sem`` holds."""
    return sem.ts_expire.timestamp() - ttl


def test_semaphore_waiters_are_served_in_arrival_order_and_nobody_barges():
    clock = testing.FakeClock()
    db = clock.memory_uri()
    holder = MongoSemaphore("pool", db, limit=1, ttl=30, fair=True)
    holder.acquire(blocking=False)
    sems = {n: MongoSemaphore("pool", db, limit=1, ttl=30, fair=True) for n in "abcd"}

    def take(name):
        sems[name].acquire(step=0.25)

    granted, threads = _wait_in_order(clock, "abcd", take)
    barger = MongoSemaphore("pool", db, limit=1, ttl=30)
    with pytest.raises(LockExists):
        barger.acquire(blocking=False)  # the queue is live: no barging
    holder.release()
    _served_in_order(clock, "abcd", granted, threads, lambda name: sems[name].release())
    assert barger.acquire(blocking=False), "the queue is empty: served"
    barger.release()
    for s in [holder, barger, *sems.values()]:
        s.close()


def test_fair_writers_are_served_in_arrival_order():
    clock = testing.FakeClock()
    db = clock.memory_uri()
    reader = MongoReadWriteLock("k", db, ttl=30, fair=True)
    reader.acquire("read")
    writers = {n: MongoReadWriteLock("k", db, ttl=30, fair=True) for n in "xyz"}

    def take(name):
        writers[name].acquire("write", step=0.25)

    granted, threads = _wait_in_order(clock, "xyz", take)
    with pytest.raises(LockExists):
        MongoReadWriteLock("k", db, ttl=30).acquire("read", blocking=False)
    reader.release()
    _served_in_order(clock, "xyz", granted, threads, lambda name: writers[name].release())
    for w in [reader, *writers.values()]:
        w.close()


def test_a_waiter_that_times_out_leaves_the_queue_at_once():
    clock = testing.FakeClock()
    db = clock.memory_uri()
    holder = MongoSemaphore("pool", db, limit=1, ttl=600, fair=True)
    holder.acquire(blocking=False)
    quitter = MongoSemaphore("pool", db, limit=1, ttl=600, fair=True)
    nxt = MongoSemaphore("pool", db, limit=1, ttl=600, fair=True)
    outcome = []

    def give_up(name):
        try:
            quitter.acquire(timeout=5, step=0.25)
        except AcquireTimeout:
            outcome.append("timeout")

    def take(name):
        nxt.acquire(step=0.25)

    granted, threads = _wait_in_order(clock, ["q"], give_up)
    more, more_threads = _wait_in_order(clock, ["n"], take)
    _advance_until(clock, lambda: outcome == ["timeout"])
    assert [e["uuid"] for e in holder.get_current()["queue"]] == [nxt.uuid]
    holder.release()
    released = clock.time()
    _advance_until(clock, lambda: more == ["n"])
    # Served at its next look or the one after: the quitter's place was given up, not
    # left to expire (600 s).
    assert released <= _claimed_at(nxt, 600) <= released + 1.0
    for t in threads + more_threads:
        t.join(10)
    for s in [holder, quitter, nxt]:
        s.close()


def test_a_waiter_that_stops_holds_the_queue_up_for_one_ttl():
    """A waiter whose process stops (kill -9, a pause) renews its entry no more: the
    waiters behind it are held up until that entry expires, one ttl after its last
    write, and served then."""
    ttl = 30
    clock = testing.FakeClock()
    db = clock.memory_uri()
    holder = MongoSemaphore("pool", db, limit=1, ttl=ttl, fair=True)
    holder.acquire(blocking=False)
    dead = MongoSemaphore("pool", db, limit=1, ttl=ttl, fair=True)
    run = dead._core.start_acquire(True, None, 0.25)  # one attempt, then never driven
    assert run.next()[0] == "try" and run.attempt()[0] == "wait"
    (entry,) = holder.get_current()["queue"]
    assert entry["uuid"] == dead.uuid
    expire = entry["ts_expire"].timestamp()
    assert expire == pytest.approx(clock.time() + ttl, abs=1)
    nxt = MongoSemaphore("pool", db, limit=1, ttl=ttl, fair=True)
    granted, threads = _wait_in_order(clock, ["n"], lambda name: nxt.acquire(step=0.25))
    holder.release()
    while clock.time() < expire:  # the dead entry is live: nobody passes it
        assert granted == [], f"served {expire - clock.time():.2f} s before it expired"
        clock.advance(0.25)
        clock.settle()
    _advance_until(clock, lambda: granted == ["n"])
    # Served at its first look after the expiry (every 2 steps: one entry ahead).
    assert expire <= _claimed_at(nxt, ttl) <= expire + 0.5
    assert [e["uuid"] for e in holder.get_current().get("queue", [])] == []
    for t in threads:
        t.join(10)
    for s in [holder, dead, nxt]:
        s.close()


@pytest.mark.parametrize("bad", ["yes", 1, None])
@pytest.mark.parametrize(
    "cls", [MongoSemaphore, MongoReadWriteLock, AsyncMongoSemaphore, AsyncMongoReadWriteLock]
)
def test_fair_must_be_a_bool_refused_before_any_io(cls, bad):
    # An unreachable server: a refusal by name, not a connection error.
    uri = "mongodb://127.0.0.1:1/db?serverSelectionTimeoutMS=1"
    kw = {"limit": 1} if "Semaphore" in cls.__name__ else {}
    with pytest.raises(TypeError, match="fair must be a bool"):
        cls("pool", uri, fair=bad, **kw)


def test_fair_is_reported():
    clock = testing.FakeClock()
    db = clock.memory_uri()
    s = MongoSemaphore("pool", db, limit=2, fair=True)
    rw = MongoReadWriteLock("k", db)
    assert s.fair is True and rw.fair is False
    s.close()
    rw.close()


# ------------------------------------------------------------ real processes ----------


def _uri_of(where, request, tmp_path):
    if where == "server":
        return request.getfixturevalue("server_db")[1]
    return f"sqlite://{tmp_path}/fair.db"


def _setup(where, request, tmp_path):
    """The URI, a fresh key, the workers' log file, and a fair holder of the key's one
    slot (until released: the workers queue behind it)."""
    uri, key = _uri_of(where, request, tmp_path), "fair-" + uuid.uuid4().hex[:8]
    holder = MongoSemaphore(key, uri, limit=1, ttl=120, fair=True)
    holder.acquire(blocking=False)
    return uri, key, tmp_path / "log", holder


def _queue(sem):
    return (sem.get_current() or {}).get("queue", [])


def _spawn_waiter(uri, key, name, log, ttl, watcher):
    """A worker process that waits in the queue of ``key``; returns once its entry is
    there (``watcher`` reads the document), so the workers arrive in spawn order."""
    queued = len(_queue(watcher))
    p = spawn(
        "wait",
        "--uri",
        uri,
        "--key",
        key,
        "--name",
        name,
        "--log",
        log,
        "--ttl",
        ttl,
        worker=WORKER,
    )
    assert read_line(p, timeout=60) == ["ready"]
    until = time.monotonic() + 60
    while len(_queue(watcher)) <= queued:
        assert time.monotonic() < until, f"{name} did not join the queue"
        time.sleep(0.02)
    return p


def _enters(log):
    rows = [line.split() for line in log.read_text().splitlines() if line.strip()]
    return [(r[1], float(r[2]), int(r[3])) for r in rows if r[0] == "enter"]


@pytest.mark.parametrize("where", ["server", "sqlite"])
def test_processes_are_served_in_arrival_order(where, request, tmp_path):
    uri, key, log, holder = _setup(where, request, tmp_path)
    names = [f"w{i}" for i in range(6)]
    procs = [_spawn_waiter(uri, key, n, log, 10, holder) for n in names]
    tickets = [e["ticket"] for e in _queue(holder)]
    assert len(tickets) == 6 and tickets == sorted(tickets)
    holder.release()
    wait_all(procs, timeout=120)
    enters = _enters(log)
    assert [n for n, _, _ in enters] == names, "grants follow arrival order"
    fences = [f for _, _, f in enters]
    assert fences == sorted(fences) and len(set(fences)) == len(fences)
    assert _queue(holder) == [], "each waiter left the queue with its grant"
    holder.close()


@pytest.mark.parametrize("where", ["server", "sqlite"])
def test_a_killed_waiter_costs_at_most_one_ttl(where, request, tmp_path):
    ttl = 3.0
    uri, key, log, holder = _setup(where, request, tmp_path)
    first = _spawn_waiter(uri, key, "first", log, ttl, holder)
    dead = _spawn_waiter(uri, key, "dead", log, ttl, holder)
    last = _spawn_waiter(uri, key, "last", log, ttl, holder)
    dead_entry = _queue(holder)[1]
    dead.send_signal(signal.SIGKILL)
    dead.wait(10)
    killed = time.time()
    # Its entry now never moves again: it expires at most one ttl after the kill. (The
    # first read may come after a renewal it made before the kill: read it again.)
    left = [e for e in _queue(holder) if e["uuid"] == dead_entry["uuid"]]
    if left:
        dead_entry = left[0]
        assert dead_entry["ts_expire"].timestamp() <= killed + ttl
    holder.release()
    wait_all([first, last], timeout=120)  # served: not held up forever
    enters = _enters(log)
    assert [n for n, _, _ in enters] == ["first", "last"]
    # "last" was not served before the dead entry expired (nobody passes a live entry).
    assert enters[1][1] >= dead_entry["ts_expire"].timestamp()
    assert _queue(holder) == [], "the dead entry was removed by the claim that passed it"
    holder.close()


@pytest.mark.parametrize("where", ["server", "sqlite"])
def test_holders_list_the_queued_writers_in_line(where, request, tmp_path):
    """``holders()["waiting"]``: the fair writers queued in the document, first in line
    first; empty once nobody waits."""
    uri, key = _uri_of(where, request, tmp_path), "fair-rw-" + uuid.uuid4().hex[:8]
    holder = MongoReadWriteLock(key, uri, ttl=120, fair=True)
    holder.acquire("write", blocking=False)
    assert holder.holders()["waiting"] == []
    waiters = [MongoReadWriteLock(key, uri, ttl=120, fair=True) for _ in range(2)]
    threads = []
    for n, w in enumerate(waiters, start=1):
        t = threading.Thread(
            target=w.acquire, args=("write",), kwargs={"timeout": 60, "step": 0.05}
        )
        t.start()
        threads.append(t)
        until = time.monotonic() + 60
        while len(_queue(holder)) < n:  # its entry is in the document
            assert time.monotonic() < until, "the waiter did not queue"
            time.sleep(0.02)
    queue = _queue(holder)
    waiting = holder.holders()["waiting"]
    assert [e["uuid"] for e in waiting] == [w.uuid for w in waiters]
    assert waiting == sorted(queue, key=lambda e: e["ticket"])
    assert all(e["ts_expire"] > datetime.now(timezone.utc) for e in waiting)
    holder.release()
    for t, w in zip(threads, waiters):
        t.join(60)
        assert not t.is_alive()
        w.release()
    assert holder.holders()["waiting"] == []
    for rw in [holder, *waiters]:
        rw.close()
