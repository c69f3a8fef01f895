"""The embedded SQLite backend through the Python API: ``db="sqlite:///path"``.

No server needed (these tests never skip): the same locker and elector API as with a
MongoDB URI, fencing, the stored documents, bad paths, and two processes.
"""

import multiprocessing
import os
import time

import pytest
from mongoelector import LockExists, MongoLeaderElector, MongoLocker


@pytest.fixture
def sqlite_uri(tmp_path):
    return "sqlite://" + str(tmp_path / "locks.db")


def test_locker_acquires_releases_and_fences(sqlite_uri):
    a = MongoLocker("job", sqlite_uri, ttl=5)
    b = MongoLocker("job", sqlite_uri, ttl=5)
    assert a.acquire(blocking=False)
    first = a.fence
    assert a.owned() and a.locked()
    with pytest.raises(LockExists):
        b.acquire(blocking=False)
    doc = b.get_current()
    assert doc["_id"] == "job" and doc["locked"] is True and doc["fence"] == first
    a.release()
    assert b.acquire(blocking=False)
    assert b.fence > first
    assert b.touch()
    b.release()


def test_database_argument_is_ignored(sqlite_uri):
    with MongoLocker("k", sqlite_uri, ttl=5, database="whatever") as lock:
        assert lock.owned()


def test_elector_leads_and_reports_status(sqlite_uri):
    e = MongoLeaderElector("svc", sqlite_uri, ttl=2)
    e.start()
    try:
        deadline = time.monotonic() + 5
        while not e.is_leader and time.monotonic() < deadline:
            time.sleep(0.05)
        assert e.is_leader
        assert e.fence >= 1
        assert e.leader_exists
    finally:
        e.stop()


@pytest.mark.parametrize(
    "make_path, message",
    [
        (lambda d: d / "missing" / "locks.db", "does not exist"),
        (lambda d: d, "directory"),
    ],
)
def test_bad_paths_are_value_errors(tmp_path, make_path, message):
    with pytest.raises(ValueError, match=message):
        MongoLocker("k", "sqlite://" + str(make_path(tmp_path)), ttl=5)


def test_not_a_database_is_a_value_error(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("not a database " * 40)
    with pytest.raises(ValueError, match="not a SQLite database"):
        MongoLocker("k", "sqlite://" + str(path), ttl=5)


def test_relative_path_is_refused():
    with pytest.raises(ValueError, match="absolute"):
        MongoLocker("k", "sqlite://relative/locks.db", ttl=5)


def _hold(uri, log, n):
    lock = MongoLocker("shared", uri, ttl=5)
    for _ in range(n):
        lock.acquire(blocking=True, step=0.005)
        t0 = time.monotonic()
        time.sleep(0.002)
        t1 = time.monotonic()
        fence = lock.fence
        lock.release()
        with open(log, "a") as f:
            f.write("%d %.6f %.6f %d\n" % (os.getpid(), t0, t1, fence))


def test_two_processes_never_both_hold(sqlite_uri, tmp_path):
    log = str(tmp_path / "holds.log")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_hold, args=(sqlite_uri, log, 15)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    holds = sorted(tuple(float(x) for x in line.split()) for line in open(log))
    holds.sort(key=lambda h: h[1])
    assert len(holds) == 30
    for prev, cur in zip(holds, holds[1:]):
        assert cur[1] >= prev[2], "two holders at once"
        assert cur[3] > prev[3], "fences follow the hold order"
