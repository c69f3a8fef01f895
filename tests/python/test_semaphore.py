"""mongoelector.semaphore.MongoSemaphore: N holders of one key.

API behaviour on every transport (mongomock, a pymongo Database and the native URI
transport on the real server, the embedded SQLite backend), then real processes on the
real server: 12 processes contending for limit=3 never exceed 3 holders (a shared file of
"enter"/"exit" instants on the host's monotonic clock), tokens strictly increase in the
order of holds, a holder killed with SIGKILL frees its slot at its expiry (not before, not
much after), round trips counted by pymongo's command monitoring, limit mismatch refused,
non-atomic servers refused.

    bash tests/servers/testserver.sh run java -- <venv python> -m pytest tests/python/test_semaphore.py -s
"""

import datetime
import os
import subprocess
import sys
import time
import uuid

import pymongo
import pytest
from conftest import TEST_SERVER
from mongoelector import testing
from mongoelector.errors import AcquireTimeout, ClosedError, LeaseLost, LockExists
from mongoelector.semaphore import MongoSemaphore, SemaphoreLease
from procs import check_tokens_ordered, finish, kill_holder, max_overlap, wait_all
from pymongo import monitoring

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "helpers", "semaphore_worker.py")


def new_key():
    return "s-" + uuid.uuid4().hex[:8]


@pytest.fixture
def sdb(any_db):
    """What MongoSemaphore takes as `db`, on each transport."""
    return any_db


# ----------------------------------------------------------------- API ----------


def test_at_most_limit_holders_then_lock_exists_and_timeout(sdb):
    key = new_key()
    a, b, c, d = (MongoSemaphore(key, sdb, limit=3, ttl=30) for _ in range(4))
    assert a.acquire() is True and b.acquire() is True and c.acquire() is True
    with pytest.raises(LockExists, match=f"{key}: all 3 slots held"):
        d.acquire(blocking=False)
    start = time.monotonic()
    with pytest.raises(AcquireTimeout):
        d.acquire(timeout=0.3, step=0.05)
    assert time.monotonic() - start >= 0.29  # the core counts whole milliseconds
    assert d.fence is None and not d.owned
    b.release()
    assert b.fence is None
    assert d.acquire(timeout=2) is True
    assert d.fence > c.fence > a.fence
    for s in (a, c, d):
        s.close()


def test_fences_strictly_increase_across_holders_releases_and_expiry(sdb):
    key = new_key()
    sems = [MongoSemaphore(key, sdb, limit=2, ttl=0.5) for _ in range(3)]
    last = 0
    for i in range(12):
        s = sems[i % 3]
        if s.owned:
            s.release()
        if i % 4 == 3:
            time.sleep(0.6)  # everything held has expired
        s.acquire(timeout=5, step=0.02)
        assert s.fence > last, f"acquisition {i}"
        last = s.fence
    for s in sems:
        s.close()


def test_context_manager_holders_touch_and_document(sdb):
    key = new_key()
    a = MongoSemaphore(key, sdb, limit=2, ttl=30)
    b = MongoSemaphore(key, sdb, limit=2, ttl=30)
    assert a.holders() == []
    with a:
        assert a.owned and a.fence
        with b:
            holders = a.holders()
            assert [h["uuid"] for h in holders] == [a.uuid, b.uuid]
            assert [h["fence"] for h in holders] == [a.fence, b.fence]
            assert holders[0]["host"] == a.host and holders[0]["pid"] == os.getpid()
            assert holders[0]["ts_expire"] > holders[0]["ts_created"]
            old = a.ts_expire
            time.sleep(0.01)
            new = a.touch()
            assert new is not None and new >= old and a.ts_expire == new
        assert [h["uuid"] for h in a.holders()] == [a.uuid]
        doc = a.get_current()
        assert doc["_id"] == key and doc["limit"] == 2 and len(doc["slots"]) == 2
    assert not a.owned and a.touch() is None
    assert a.holders() == []
    assert "owned=False" in repr(a) and "limit=2" in repr(a)
    a.close()
    b.close()
    assert "closed=True" in repr(a)
    with pytest.raises(ClosedError):
        a.acquire()
    a.close()  # idempotent


def test_limit_mismatch_is_refused_and_writes_nothing(sdb):
    key = new_key()
    a = MongoSemaphore(key, sdb, limit=3, ttl=30)
    a.acquire()
    b = MongoSemaphore(key, sdb, limit=5, ttl=30)
    with pytest.raises(ValueError, match=r"semaphore '.*' has limit 3 .* asks for 5"):
        b.acquire()
    with pytest.raises(ValueError, match="has limit 3"):
        b.holders()
    assert not b.owned
    assert len(a.holders()) == 1
    a.close()
    b.close()


def test_a_read_write_locks_document_is_refused_by_name(sdb):
    """A key that holds a read-write lock's document (kind "rwlock", two more slots) is
    refused by a semaphore with a message naming what the key holds; nothing is
    written."""
    if isinstance(sdb, str):
        pytest.skip("the document is written through pymongo")
    key = new_key()
    epoch = datetime.datetime(1970, 1, 1)
    empty = {"uuid": "", "host": "", "pid": 0, "fence": 0, "ts_created": epoch, "ts_expire": epoch}
    sdb["mongosemaphore"].insert_one(
        {"_id": key, "kind": "rwlock", "limit": 2, "fence": 1, "slots": [dict(empty)] * 4}
    )
    s = MongoSemaphore(key, sdb, limit=2, ttl=30)
    with pytest.raises(ValueError, match="a read-write lock's document, not a semaphore's"):
        s.acquire(blocking=False)
    assert sdb["mongosemaphore"].find_one({"_id": key})["fence"] == 1
    s.close()


def test_one_slot_per_instance_and_argument_checks(sdb):
    key = new_key()
    a = MongoSemaphore(key, sdb, limit=2, ttl=30)
    a.acquire()
    with pytest.raises(RuntimeError, match="already holds a slot"):
        a.acquire(blocking=False)
    with pytest.raises(ValueError, match="timeout"):
        a.acquire(blocking=False, timeout=1)
    a.close()
    for bad in (0, 1001, -1):
        with pytest.raises(ValueError, match="limit"):
            MongoSemaphore(key, sdb, limit=bad)
    with pytest.raises(TypeError):
        MongoSemaphore(key, sdb, limit="3")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        MongoSemaphore("", sdb, limit=2)
    with pytest.raises(ValueError):
        MongoSemaphore(key, sdb, limit=2, ttl=0)
    with pytest.raises(TypeError):
        MongoSemaphore(key, None, limit=2)  # type: ignore[arg-type]


def test_keep_alive_keeps_the_slot_past_its_ttl():
    """On the fake clock (renewals are due at fixed instants, whatever the load): after
    two and a half ttl the slot is still the lease's, with its fence, and others are
    refused; leaving the block releases it."""
    clock = testing.FakeClock()
    db = clock.memory_uri()
    key = new_key()
    a = MongoSemaphore(key, db, limit=1, ttl=1)
    b = MongoSemaphore(key, db, limit=1, ttl=1)
    with a.keep_alive(timeout=5) as lease:
        assert isinstance(lease, SemaphoreLease) and lease.fence
        fence = lease.fence
        clock.advance(2.5)  # two and a half ttl: renewed by the native renewer
        lease.check()
        assert lease.fence == fence
        (held,) = b.holders()
        assert held["fence"] == fence and held["ts_expire"].timestamp() > clock.time()
        with pytest.raises(LockExists):
            b.acquire(blocking=False)
    assert b.acquire(blocking=False) and b.fence > fence
    b.close()
    a.close()


def test_keep_alive_renews_through_each_transport(sdb):
    """On every transport: the native renewer's renewals land (the stored expiry moves
    later, the fence stays) and others are refused meanwhile. How long the slot lasts is
    checked on the fake clock above; here the ttl leaves room for a loaded machine."""
    key = new_key()
    a = MongoSemaphore(key, sdb, limit=1, ttl=3)
    b = MongoSemaphore(key, sdb, limit=1, ttl=3)
    with a.keep_alive(timeout=5) as lease:
        (first,) = b.holders()
        assert first["uuid"] == a.uuid and first["fence"] == lease.fence
        until = time.monotonic() + 60
        while True:  # a renewal is due every ttl/3
            (now,) = b.holders()
            if now["ts_expire"] > first["ts_expire"]:
                break
            assert time.monotonic() < until, "no renewal landed"
            time.sleep(0.05)
        assert now["uuid"] == a.uuid and now["fence"] == first["fence"]
        with pytest.raises(LockExists):
            b.acquire(blocking=False)
        fence = lease.fence
    assert b.acquire(blocking=False) and b.fence > fence
    b.close()
    a.close()


def test_keep_alive_loss_is_reported(sdb):
    if isinstance(sdb, str) and sdb.startswith("sqlite"):
        pytest.skip("the slot is emptied through a Database object")
    db = sdb if not isinstance(sdb, str) else make_db_from_uri(sdb)
    key = new_key()
    a = MongoSemaphore(key, sdb, limit=1, ttl=1)
    with pytest.raises(LeaseLost):
        with a.keep_alive() as lease:
            # Someone empties the slot behind its back (an operator's clean-up).
            db["mongosemaphore"].update_one({"_id": key}, {"$set": {"slots.0.uuid": "x"}})
            assert lease.lost.wait(3), "the loss was not announced"
    a.close()


def make_db_from_uri(uri):
    return pymongo.MongoClient(uri).get_default_database()


# ------------------------------------------------------- real processes -----------


def spawn(*args):
    return subprocess.Popen(
        [sys.executable, WORKER, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_twelve_processes_never_exceed_limit_three(server_db, tmp_path):
    _, uri = server_db
    key, log, procs_n, rounds = new_key(), tmp_path / "holds.log", 12, 10
    start = time.monotonic()
    # Half of them through pymongo, half through the native URI transport.
    procs = [
        spawn(
            "contend",
            "--uri",
            uri,
            "--key",
            key,
            "--log",
            log,
            "--name",
            f"w{i}",
            "--transport",
            "pymongo" if i % 2 else "uri",
            "--limit",
            3,
            "--ttl",
            10,
            "--rounds",
            rounds,
            "--hold",
            0.02,
            "--step",
            0.01,
        )
        for i in range(procs_n)
    ]
    wait_all(procs)
    wall = time.monotonic() - start
    rows = [line.split() for line in log.read_text().splitlines() if line.strip()]
    enters = [(float(r[2]), r[1], int(r[3])) for r in rows if r[0] == "enter"]
    exits = [(float(r[2]), r[1]) for r in rows if r[0] == "exit"]
    assert len(enters) == len(exits) == procs_n * rounds
    # Every instant: holders = enters - exits so far (an exit first on a tie).
    max_inside = max_overlap([t for t, _, _ in enters], [t for t, _ in exits])
    assert max_inside <= 3, f"{max_inside} holders at once"
    check_tokens_ordered([(float(r[4]), float(r[2]), int(r[3])) for r in rows if r[0] == "enter"])
    busy = max(t for t, _ in exits) - min(t for t, _, _ in enters)
    print(
        f"\nsemaphore contention: {procs_n} processes (6 pymongo, 6 URI) x {rounds} = "
        f"{len(enters)} acquisitions of limit 3 (holds of 20 ms) in {wall:.2f} s wall "
        f"including process start-up, {busy:.2f} s from the first enter to the last exit "
        f"({len(enters) / busy:.0f} acquisitions/s); max {max_inside} holders observed "
        f"at once; tokens unique and ordered"
    )
    assert max_inside >= 2, "the semaphore never admitted two holders at once"


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["pymongo", "uri"])
def test_killed_holder_frees_its_slot_at_expiry(server_db, transport):
    db, uri = server_db
    key, ttl = new_key(), 2.0
    other = MongoSemaphore(key, db, limit=2, ttl=60)  # the other slot: a live holder
    other.acquire()
    holder = spawn(
        "hold", "--uri", uri, "--key", key, "--limit", 2, "--ttl", ttl, "--transport", transport
    )
    try:
        fence, before, after = kill_holder(holder)
        taker = MongoSemaphore(key, db, limit=2, ttl=ttl)
        with pytest.raises(LockExists):
            taker.acquire(blocking=False)  # the dead process's slot is still leased
        taker.acquire(timeout=10, step=0.02)
        took = time.monotonic()
        print(
            f"\nholder killed with SIGKILL ({transport}): slot taken "
            f"{took - before:.3f} s after the holder started acquiring, "
            f"{took - after:.3f} s after it held (ttl {ttl} s)"
        )
        # Not before: the slot's expiry is at least ttl after the claim was sent.
        assert took - before >= ttl - 0.05
        # Not much after.
        assert took - after <= ttl + 1.0
        assert taker.fence > fence > other.fence
        taker.close()
    finally:
        finish(holder)
        other.close()


# --------------------------------------------------------------- round trips ------


class Commands(monitoring.CommandListener):
    def __init__(self):
        self.names = []

    def started(self, event):
        self.names.append(event.command_name)

    def succeeded(self, event):
        pass

    def failed(self, event):
        pass

    def take(self):
        names, self.names = self.names, []
        return [n for n in names if n in ("find", "insert", "update", "findAndModify", "delete")]


def test_round_trips_of_an_uncontended_acquire(server_db, server_uri):
    db, _ = server_db
    listener = Commands()
    client = pymongo.MongoClient(server_uri, event_listeners=[listener])
    try:
        cdb = client[db.name]
        key = new_key()
        a = MongoSemaphore(key, cdb, limit=3, ttl=15)
        a.acquire()  # first use: read, epoch, insert (plus time check and server facts)
        assert listener.take() == ["find", "findAndModify", "insert"]
        a.release()
        assert listener.take() == ["update"]
        a.acquire()  # its copy is current: one compare-and-set
        assert listener.take() == ["update"]
        a.release()
        listener.take()
        b = MongoSemaphore(key, cdb, limit=3, ttl=15)
        b.acquire()  # a new instance: a read, then the compare-and-set
        assert listener.take() == ["find", "update"]
        assert b.touch() is not None
        assert listener.take() == ["update"]
        print(
            "\nsemaphore round trips: 1 (update) with a current copy, 2 (find + update) "
            "for a new instance, 3 on first use of a key"
        )
        a.close()
        b.close()
    finally:
        client.close()


# -------------------------------------------------------------- unsafe servers -----


@pytest.mark.ferretdb
@pytest.mark.skipif(TEST_SERVER != "ferretdb", reason="MONGOELECTOR_TEST_SERVER is not ferretdb")
@pytest.mark.parametrize("transport", ["pymongo", "uri"])
def test_ferretdb_is_refused_unless_allowed(server_db, transport):
    from mongoelector import UnsafeServerError

    db, uri = server_db
    sdb = db if transport == "pymongo" else uri
    key = new_key()
    with pytest.raises(UnsafeServerError, match="not run single-document updates atomically"):
        MongoSemaphore(key, sdb, limit=2, timeparanoid=False).acquire()
    s = MongoSemaphore(key, sdb, limit=2, timeparanoid=False, allow_unsafe_server=True)
    assert s.acquire(blocking=False) and s.fence
    s.close()
