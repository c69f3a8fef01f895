"""Scheduler semantics (issue #16, item 2): min_hold, once per window, the singleton
decorator; in-process on every backend, then with real processes on the real server."""

import asyncio
import logging
import subprocess
import sys
import textwrap
import time
import uuid
from datetime import datetime, timezone

import mongoelector
import pytest
from mongoelector import LeaseLost, MongoLocker, once_per, singleton


def key():
    return "sched-" + uuid.uuid4().hex[:10]


# ---- min_hold ------------------------------------------------------------------------


def test_release_min_hold_keeps_the_lock_taken(backend):
    k = key()
    a = MongoLocker(k, backend.db, ttl=30)
    b = MongoLocker(k, backend.db, ttl=30)
    assert a.acquire(blocking=False)
    created = backend.raw["mongolocker"].find_one({"_id": k})["ts_created"]
    frees_at = a.release(min_hold=1.0)
    assert isinstance(frees_at, datetime) and frees_at.tzinfo is not None
    created = created if created.tzinfo else created.replace(tzinfo=timezone.utc)
    # Never early; late by at most a round trip and the clock sample's uncertainty.
    assert 0 <= (frees_at - created).total_seconds() - 1.0 < 0.1, "acquire + min_hold"
    assert "owned=False" in repr(a), "the holder let go locally"
    assert a.locked(), "while the lock stays taken (under its name) until min_hold"
    with pytest.raises(mongoelector.LockExists):
        b.acquire(blocking=False)
    assert b.acquire(timeout=5, step=0.05)
    assert datetime.now(timezone.utc) >= frees_at - (frees_at - created) * 0.1
    b.release()


def test_release_min_hold_past_the_hold_is_a_plain_release(backend):
    k = key()
    a = MongoLocker(k, backend.db, ttl=30)
    assert a.acquire(blocking=False)
    assert a.release(min_hold=0) is None
    assert MongoLocker(k, backend.db, ttl=30).acquire(blocking=False)


def test_release_min_hold_refuses_bad_values(db_backend):
    a = MongoLocker(key(), db_backend.db, ttl=30)
    assert a.acquire(blocking=False)
    with pytest.raises(TypeError):
        a.release(min_hold="5")
    with pytest.raises(TypeError):
        a.release(min_hold=True)
    with pytest.raises(ValueError):
        a.release(force=True, min_hold=5)
    with pytest.raises(ValueError):
        a.release(min_hold=-1)
    assert a.owned(), "a refused call keeps the hold"
    a.release()


def test_lease_min_hold(db_backend):
    k = key()
    with mongoelector.lease(db_backend.db, k, ttl=30, min_hold=60) as held:
        assert held.fence
    other = MongoLocker(k, db_backend.db, ttl=30)
    with pytest.raises(mongoelector.LockExists):
        other.acquire(blocking=False)
    doc = (db_backend.raw if db_backend.raw is not None else db_backend.db)["mongolocker"].find_one(
        {"_id": k}
    )
    assert doc["locked"] is True
    remaining = (doc["ts_expire"] - doc["ts_created"]).total_seconds()
    assert 0 <= remaining - 60 < 0.1, "ts_expire = acquire + min_hold, never early"
    with pytest.raises(ValueError):
        mongoelector.Lease(db_backend.db, key(), min_hold=-2)


def test_a_min_hold_that_cannot_be_kept_raises_lease_lost(db_backend):
    # The lock was taken from its holder (here by force; a write that lands after the hold
    # expired is the same): the minimum hold is not kept, and the caller is told so.
    k = key()
    a = MongoLocker(k, db_backend.db, ttl=30)
    b = MongoLocker(k, db_backend.db, ttl=30)
    assert a.acquire(blocking=False)
    assert b.acquire(force=True)
    with pytest.raises(LeaseLost, match="minimum hold"):
        a.release(min_hold=60)
    assert a.release(min_hold=60) is None, "reported once: nothing left to retry"
    assert b.owned(), "the taker's hold is untouched"
    b.release()

    held = mongoelector.lease(db_backend.db, k, ttl=30, min_hold=60)
    held.acquire()
    assert b.acquire(force=True)
    with pytest.raises(LeaseLost):
        held.release()
    assert b.owned()
    b.release()


def test_singleton_logs_a_min_hold_it_cannot_keep_and_returns(db_backend, caplog):
    # The job ran: its result stands (raising could make a task queue run it again); the
    # broken promise about the next run is logged.
    k = key()

    @singleton(k, db_backend.db, ttl=30, min_hold=60)
    def job():
        MongoLocker(k, db_backend.db, ttl=30).acquire(force=True)
        return "ran"

    with caplog.at_level(logging.WARNING, logger="mongoelector"):
        assert job() == "ran"
    assert "may be taken again before its minimum hold ends" in caplog.text


# ---- once per window -------------------------------------------------------------------


def test_a_window_is_claimed_once(backend):
    k = key()
    a = MongoLocker(k, backend.db, ttl=30)
    b = MongoLocker(k, backend.db, ttl=30)
    start = a.claim_window(3600)
    assert isinstance(start, datetime)
    assert start.minute == 0 and start.second == 0 and start.microsecond == 0, (
        "an hour window starts on the hour (server clock, UTC)"
    )
    assert b.claim_window(3600) is None
    assert a.claim_window(3600) is None
    assert once_per(backend.db, k, 3600) is None
    assert isinstance(once_per(backend.db, k + "-other", 3600), datetime)
    # The key's own lock does not see the window claims.
    assert a.acquire(blocking=False)
    a.release()
    with pytest.raises(TypeError):
        a.claim_window("1h")
    with pytest.raises(ValueError):
        a.claim_window(0)


# ---- the decorator ---------------------------------------------------------------------


def test_singleton_skips_while_another_holds_it(db_backend, caplog):
    k = key()
    calls = []

    @singleton(k, db_backend.db, ttl=30)
    def job(x):
        calls.append(x)
        return x * 2

    assert job(21) == 42
    holder = MongoLocker(k, db_backend.db, ttl=30)
    assert holder.acquire(blocking=False)
    with caplog.at_level(logging.INFO, logger="mongoelector"):
        assert job(1) is None
    assert calls == [21]
    assert "skipped, the lock is held" in caplog.text
    holder.release()
    assert job(2) == 4
    assert calls == [21, 2]
    assert job.__name__ == "job"


def test_singleton_once_per_and_min_hold(db_backend):
    k = key()
    runs = []

    @singleton(k, db_backend.db, ttl=30, once_per=3600, min_hold=30, lease=True)
    def job(lease):
        lease.check()
        runs.append(lease.fence)

    assert job() is None
    assert len(runs) == 1 and runs[0] > 0
    # min_hold: still taken after the job returned.
    with pytest.raises(mongoelector.LockExists):
        MongoLocker(k, db_backend.db, ttl=30).acquire(blocking=False)
    MongoLocker(k, db_backend.db, ttl=30).release(force=True)
    # once_per: free lock, but this hour had its run.
    assert job() is None
    assert len(runs) == 1
    assert MongoLocker(k, db_backend.db, ttl=30).acquire(blocking=False), (
        "a skipped window releases the lock at once (no min_hold: nothing ran)"
    )


def test_singleton_exception_releases_and_propagates(db_backend):
    k = key()

    @singleton(k, db_backend.db, ttl=30)
    def job():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        job()
    assert MongoLocker(k, db_backend.db, ttl=30).acquire(blocking=False)


def test_singleton_async(db_backend):
    k = key()

    @singleton(k, db_backend.db, ttl=30, once_per=3600)
    async def job():
        await asyncio.sleep(0)
        return "ran"

    assert asyncio.run(job()) == "ran"
    assert asyncio.run(job()) is None


def test_singleton_lost_lease_raises(db_backend):
    k = key()

    @singleton(k, db_backend.db, ttl=1.5, lease=True)  # renewed every 0.5 s
    def job(lease):
        MongoLocker(k, db_backend.db, ttl=30).acquire(force=True)
        assert lease.wait_lost(10)
        return "finished"

    with pytest.raises(LeaseLost):
        job()


def test_singleton_refuses_bad_arguments(db_backend):
    with pytest.raises(TypeError):
        singleton("k", db_backend.db, min_hold="5")
    with pytest.raises(ValueError):
        singleton("k", db_backend.db, once_per=0)
    with pytest.raises(ValueError):
        singleton("k", db_backend.db, timeout=5)  # without wait=True


# ---- real processes --------------------------------------------------------------------

WORKER = textwrap.dedent("""
    import os, sys, time
    import pymongo, mongoelector
    uri, dbname, key, barrier, name = sys.argv[1:6]
    db = pymongo.MongoClient(uri)[dbname]

    @mongoelector.singleton(key, db, ttl=10, once_per=3600, min_hold=2)
    def job():
        db.runs.insert_one({"name": name, "t": time.time()})
        time.sleep(0.2)
        return "ran"

    while not os.path.exists(barrier):
        time.sleep(0.005)
    print(job() or "skipped", flush=True)
""")


def run_workers(server_uri, dbname, k, n, tmp_path):
    barrier = tmp_path / ("go-" + uuid.uuid4().hex[:6])
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, server_uri, dbname, k, str(barrier), f"w{i}"],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(n)
    ]
    time.sleep(1.5)  # imported and waiting at the barrier
    barrier.touch()
    return [p.communicate(timeout=60)[0].strip() for p in procs]


def test_processes_run_a_job_once_per_window(real_backend, server_uri, tmp_path):
    k = key()
    dbname = real_backend.raw.name
    outcomes = run_workers(server_uri, dbname, k, 5, tmp_path)
    assert sorted(outcomes) == ["ran"] + ["skipped"] * 4, outcomes
    assert real_backend.raw.runs.count_documents({}) == 1
    # Later in the same window (and past min_hold): still nobody runs it again.
    time.sleep(2.2)
    outcomes = run_workers(server_uri, dbname, k, 3, tmp_path)
    assert outcomes == ["skipped"] * 3, outcomes
    assert real_backend.raw.runs.count_documents({}) == 1
