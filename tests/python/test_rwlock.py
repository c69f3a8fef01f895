"""mongoelector.MongoReadWriteLock: many readers OR one writer on one key.

API behaviour on every transport (mongomock, a pymongo Database and the native URI
transport on the real server, the embedded SQLite backend): readers together up to
max_readers, a writer alone, refusals that name the holder, tokens that increase (a
writer's above every earlier one), writer preference on and off, bad input refused by
name. Time on the testing kit's FakeClock (no sleeps): a writer's timeout drops its
waiting mark, holds kept alive over many ttls, a hold cut off is lost at its deadline.
Then real processes on the real server and on one SQLite file: reader processes overlap
while a writer process never overlaps with anyone, tokens ordered; a writer killed with
SIGKILL frees the key at its expiry.

    bash tests/servers/testserver.sh run java -- <venv python> -m pytest tests/python/test_rwlock.py -s
"""

import os
import threading
import time
import uuid

import pytest
from mongoelector import (
    LeaseLost,
    MongoLocker,
    MongoReadWriteLock,
    MongoSemaphore,
    RwLockLease,
    testing,
)
from mongoelector.errors import AcquireTimeout, ClosedError, LockExists
from procs import check_tokens_ordered, finish, kill_holder, max_overlap, spawn, wait_all

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "helpers", "semaphore_worker.py")


def new_key():
    return "rw-" + uuid.uuid4().hex[:8]


@pytest.fixture
def rdb(any_db):
    """What MongoReadWriteLock takes as `db`, on each transport."""
    return any_db


def locks(key, db, n, **kw):
    kw.setdefault("ttl", 30)
    return [MongoReadWriteLock(key, db, **kw) for _ in range(n)]


def close(*rws):
    for rw in rws:
        rw.close()


def wait_until(pred, timeout=10.0):
    """Polls ``pred`` (a condition another thread makes true) until it holds."""
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, "the condition never held"
        time.sleep(0.01)


# ----------------------------------------------------------------- API ----------


def test_readers_hold_together_and_a_writer_is_alone(rdb):
    key = new_key()
    r1, r2, r3, w = locks(key, rdb, 4, max_readers=2)
    assert r1.acquire("read") is True and r2.acquire("read") is True
    assert r1.side == r2.side == "read" and r1.owned and r2.fence > r1.fence
    reader_fences = [r1.fence, r2.fence]
    with pytest.raises(LockExists, match=f"{key}: all 2 read slots held"):
        r3.acquire("read", blocking=False)
    with pytest.raises(LockExists, match=f"{key}: held for reading by {r1.host} pid {r1.pid}"):
        w.acquire("write", blocking=False)
    with pytest.raises(AcquireTimeout):
        w.acquire("write", timeout=0.2, step=0.05)
    held = w.holders()
    assert [h["uuid"] for h in held["readers"]] == [r1.uuid, r2.uuid]
    assert [h["fence"] for h in held["readers"]] == reader_fences
    assert held["writer"] is None and held["waiting_writer"] is None
    r1.release()
    r2.release()
    assert r1.side is None and r1.fence is None and not r1.owned
    assert w.acquire("write", blocking=False) is True
    assert w.side == "write" and w.fence > max(reader_fences)
    with pytest.raises(LockExists, match=f"{key}: held for writing by {w.host} pid {w.pid}"):
        r3.acquire("read", blocking=False)
    with pytest.raises(LockExists, match="held for writing"):
        r1.acquire("write", blocking=False)
    held = r3.holders()
    assert held["readers"] == [] and held["writer"]["uuid"] == w.uuid
    assert held["writer"]["fence"] == w.fence
    assert held["writer"]["ts_expire"] > held["writer"]["ts_created"]
    doc = w.get_current()
    assert doc["_id"] == key and doc["kind"] == "rwlock" and doc["limit"] == 2
    assert len(doc["slots"]) == 4  # two readers, the writer, the waiting mark
    old = w.ts_expire
    new = w.touch()
    assert new is not None and new >= old and w.ts_expire == new
    assert "side='write'" in repr(w) and "max_readers=2" in repr(w)
    w.release()
    assert w.side is None and w.touch() is None and "side=None" in repr(w)
    assert r3.acquire("read", blocking=False)
    close(r1, r2, r3, w)


def test_tokens_increase_and_a_writers_is_above_every_earlier_one(rdb):
    key = new_key()
    readers = locks(key, rdb, 3, max_readers=3)
    (writer,) = locks(key, rdb, 1, max_readers=3)
    tokens = []
    for _ in range(3):
        for r in readers:
            r.acquire("read", blocking=False)
            tokens.append(r.fence)
        for r in readers:
            r.release()
        writer.acquire("write", blocking=False)
        assert writer.fence > max(tokens)
        tokens.append(writer.fence)
        writer.release()
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)
    close(writer, *readers)


@pytest.mark.parametrize("preference", [True, False], ids=["preference", "no-preference"])
def test_a_waiting_writer_stops_new_readers_only_with_writer_preference(rdb, preference):
    key = new_key()
    reader, writer, late = locks(key, rdb, 3, writer_preference=preference)
    reader.acquire("read")
    outcome = []
    waiting = threading.Thread(
        target=lambda: outcome.append(writer.acquire("write", timeout=30, step=0.02))
    )
    waiting.start()
    try:
        if preference:
            wait_until(lambda: reader.holders()["waiting_writer"] is not None)
            mark = reader.holders()["waiting_writer"]
            assert mark["uuid"] == writer.uuid and mark["fence"] > reader.fence
            with pytest.raises(
                LockExists,
                match=rf"{key}: a writer is waiting \({writer.host} pid {writer.pid}\), "
                "new readers wait for it",
            ):
                late.acquire("read", blocking=False)
        else:
            # Readers keep entering while the writer tries (every 20 ms), and no mark.
            for _ in range(5):
                assert late.acquire("read", blocking=False)
                assert late.holders()["waiting_writer"] is None
                late.release()
                time.sleep(0.03)
        assert not outcome, "the writer entered next to a reader"
        reader.release()
        waiting.join(30)
        assert outcome == [True] and writer.side == "write"
        held = late.holders()
        assert held["writer"]["uuid"] == writer.uuid
        assert held["waiting_writer"] is None  # the writer's claim emptied its mark
    finally:
        waiting.join(30)
        close(reader, writer, late)


def test_keep_alive_context_managers(rdb):
    key = new_key()
    rw, other = locks(key, rdb, 2)
    with rw.read(timeout=5) as hold:
        assert isinstance(hold, RwLockLease) and hold.side == "read"
        assert hold.fence == rw.fence and rw.side == "read" and not hold.lost.is_set()
        hold.check()
        with other.read(blocking=False) as second:
            assert second.fence > hold.fence
        with pytest.raises(LockExists, match="held for reading"):
            with other.write(blocking=False):
                pass
        with pytest.raises(RuntimeError, match="already holds"):
            with rw.write():
                pass
    assert rw.side is None
    with other.write() as hold:
        assert other.side == "write" and hold.fence > 0
        with pytest.raises(LockExists, match="held for writing"):
            rw.acquire("read", blocking=False)
        assert "write" in repr(hold) and "held" in repr(hold)
    assert rw.acquire("read", blocking=False)
    close(rw, other)


def test_max_readers_is_fixed_by_the_key(rdb):
    key = new_key()
    (a,) = locks(key, rdb, 1, max_readers=3)
    a.acquire("read")
    (b,) = locks(key, rdb, 1, max_readers=5)
    with pytest.raises(ValueError, match=r"read-write lock '.*' has max_readers 3 .* asks for 5"):
        b.acquire("write")
    with pytest.raises(ValueError, match="has max_readers 3"):
        b.holders()
    assert not b.owned and len(a.holders()["readers"]) == 1
    close(a, b)


def test_bad_arguments_are_refused_by_name(rdb):
    key = new_key()
    for bad in (0, -1, 1001):
        with pytest.raises(ValueError, match=f"max_readers must be between 1 and 1000, not {bad}"):
            MongoReadWriteLock(key, rdb, max_readers=bad)
    for bad in ("3", 2.0, True, None):
        with pytest.raises(TypeError, match="max_readers must be an int"):
            MongoReadWriteLock(key, rdb, max_readers=bad)  # type: ignore[arg-type]
    for bad in (0, -1, "30"):
        with pytest.raises(ValueError, match="ttl must be a positive number"):
            MongoReadWriteLock(key, rdb, ttl=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty read-write lock key"):
        MongoReadWriteLock("", rdb)
    with pytest.raises(TypeError, match="read-write lock key must be a str"):
        MongoReadWriteLock(3, rdb)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        MongoReadWriteLock(key, None)  # type: ignore[arg-type]
    (rw,) = locks(key, rdb, 1)
    with pytest.raises(ValueError, match="side must be 'read' or 'write', not 'shared'"):
        rw.acquire("shared")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="side must be 'read' or 'write'"):
        rw.acquire(1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Cannot set timeout if blocking is False"):
        rw.acquire("read", blocking=False, timeout=1)
    with pytest.raises(ValueError, match="Cannot set timeout if blocking is False"):
        rw.write(blocking=False, timeout=1)
    rw.acquire("read")
    with pytest.raises(RuntimeError, match=f"already holds '{key}' for reading"):
        rw.acquire("write", blocking=False)
    assert rw.side == "read"  # nothing lost
    rw.close()
    assert "closed=True" in repr(rw)
    with pytest.raises(ClosedError):
        rw.acquire("read")
    with pytest.raises(ClosedError):
        rw.read().acquire()
    rw.close()  # idempotent
    (free,) = locks(key, rdb, 1)
    assert free.acquire("write", blocking=False), "close() released the read hold"
    free.close()


def test_a_key_holding_another_kinds_document_is_refused_by_name(rdb):
    """A read-write lock on a key whose document (in its collection) is a semaphore's or
    a lock's is refused with ValueError naming what the key holds; the other holder keeps
    its hold and nothing is written."""
    key = new_key()
    sem = MongoSemaphore(key, rdb, limit=2, ttl=30, dbcollection="mongorwlock")
    sem.acquire()
    (rw,) = locks(key, rdb, 1)
    with pytest.raises(ValueError, match="holds a semaphore's document, not a read-write lock's"):
        rw.acquire("read", blocking=False)
    with pytest.raises(ValueError, match="holds a semaphore's document"):
        rw.holders()
    assert not rw.owned and len(sem.holders()) == 1
    assert sem.get_current()["fence"] == sem.fence
    if not (isinstance(rdb, str) and rdb.startswith("sqlite")):  # tables per kind there
        lock = MongoLocker(key + "-lock", rdb, ttl=30, dbcollection="mongorwlock")
        lock.acquire()
        (on_lock,) = locks(key + "-lock", rdb, 1)
        with pytest.raises(ValueError, match=r"holds a document without slots \(a lock's"):
            on_lock.acquire("write", blocking=False)
        assert lock.owned
        close(on_lock)
        lock.close()
    close(rw, sem)


# ------------------------------------------------------------ fake time ----------


def test_a_writers_timeout_drops_its_mark_on_the_fake_clock():
    clock = testing.FakeClock()
    db = clock.memory_uri()
    reader, writer, late = locks("k", db, 3, ttl=600)
    reader.acquire("read")
    outcome = []

    def wait_to_write():
        try:
            writer.acquire("write", timeout=30, step=1)
            outcome.append("acquired")
        except AcquireTimeout as e:
            outcome.append(str(e))

    clock.settle()
    idle = clock.waiters
    waiting = threading.Thread(target=wait_to_write)
    waiting.start()
    clock.block_until_waiters(idle + 1)  # refused once, its mark written; sleeps on the clock
    assert reader.holders()["waiting_writer"]["uuid"] == writer.uuid
    with pytest.raises(LockExists, match="a writer is waiting"):
        late.acquire("read", blocking=False)
    clock.advance(29)
    assert waiting.is_alive() and not outcome, "30 s of fake time have not passed"
    clock.advance(2)
    waiting.join(10)
    assert outcome == ["Timeout acquiring read-write lock k after 30.000 seconds"]
    assert reader.holders()["waiting_writer"] is None, "the mark outlived the wait"
    assert late.acquire("read", blocking=False)
    close(reader, writer, late)


@pytest.mark.parametrize("side", ["read", "write"])
def test_holds_are_kept_alive_over_many_ttls_on_the_fake_clock(side):
    clock = testing.FakeClock()
    db = clock.memory_uri()
    rw, other = locks("k", db, 2, ttl=10)
    take = rw.read if side == "read" else rw.write
    with take(blocking=False) as hold:
        clock.advance(3600)  # 360 ttls
        assert not hold.lost.is_set() and rw.owned
        hold.check()
        with pytest.raises(LockExists):
            other.acquire("write", blocking=False)
        if side == "write":
            with pytest.raises(LockExists, match="held for writing"):
                other.acquire("read", blocking=False)
    assert other.acquire("write", blocking=False) and other.fence > hold.fence
    close(rw, other)


def test_a_hold_cut_off_is_lost_at_its_deadline_on_the_fake_clock():
    clock = testing.FakeClock()
    db = clock.memory_uri()
    (rw,) = locks("k", db, 1, ttl=10)
    with pytest.raises(LeaseLost, match="write hold of read-write lock 'k'"):
        with rw.write(blocking=False) as hold:
            with testing.unavailable(db):
                clock.advance(8.9)
                assert not hold.lost.is_set(), "inside its renew deadline (ttl - ttl/10)"
                clock.advance(0.2)
                assert hold.lost.is_set() and hold.wait_lost(0)
                with pytest.raises(LeaseLost):
                    hold.check()
    rw.close()


# ------------------------------------------------------- real processes -----------


@pytest.mark.slow
@pytest.mark.parametrize("where", ["server", "sqlite"])
def test_reader_processes_overlap_and_a_writer_process_is_alone(where, request, tmp_path):
    """Four reader processes and two writer processes contend (``rw.read()`` /
    ``rw.write()``, half through pymongo and half through the URI transport on the
    server); the shared log of "enter"/"exit" instants on the host's monotonic clock
    shows readers together, every writer alone, and tokens in the order of holds."""
    if where == "server":
        _, uri = request.getfixturevalue("server_db")
    else:
        uri = f"sqlite://{tmp_path}/rw.db"
    key, log = new_key(), tmp_path / "holds.log"
    plan = [("read", 8, 0.05)] * 4 + [("write", 4, 0.02)] * 2
    start = time.monotonic()
    common = ("--uri", uri, "--key", key, "--log", log, "--limit", 4, "--ttl", 10, "--step", 0.01)
    procs = []
    for i, (side, rounds, hold) in enumerate(plan):
        transport = "pymongo" if where == "server" and i % 2 else "uri"
        args = ("--name", f"{side[0]}{i}", "--side", side, "--transport", transport)
        more = ("--rounds", rounds, "--hold", hold)
        procs.append(spawn("rw-contend", *common, *args, *more, worker=WORKER))
    wait_all(procs)
    wall = time.monotonic() - start
    rows = [line.split() for line in log.read_text().splitlines() if line.strip()]
    enters = [r for r in rows if r[0] == "enter"]
    exits = [r for r in rows if r[0] == "exit"]
    assert len(enters) == len(exits) == sum(rounds for _, rounds, _ in plan)
    # Pair each process's enters and exits in order: its holds.
    holds = []
    by_name = {}
    for r in rows:
        by_name.setdefault(r[1], []).append(r)
    for name, lines in by_name.items():
        for enter, leave in zip(lines[0::2], lines[1::2]):
            assert enter[0] == "enter" and leave[0] == "exit", lines
            holds.append(
                (enter[2], float(enter[3]), float(leave[3]), int(enter[4]), float(enter[5]))
            )
    for side, s, e, fence, _ in holds:
        if side != "write":
            continue
        for side2, s2, e2, fence2, _ in holds:
            if fence2 != fence:
                assert e <= s2 or e2 <= s, (
                    f"writer (fence {fence}) held [{s}, {e}] while a {side2}er (fence "
                    f"{fence2}) held [{s2}, {e2}]"
                )
    readers = [(s, e) for side, s, e, _, _ in holds if side == "read"]
    most = max_overlap([s for s, _ in readers], [e for _, e in readers])
    assert 2 <= most <= 4, f"{most} readers at once"
    check_tokens_ordered([(req, s, fence) for _, s, _, fence, req in holds])
    print(
        f"\nread-write lock on {where}: 4 reader processes x 8 holds of 50 ms and 2 writer "
        f"processes x 4 holds of 20 ms in {wall:.2f} s wall (process start-up included): "
        f"up to {most} readers at once, every writer alone, tokens unique and ordered"
    )


@pytest.mark.slow
def test_a_killed_writer_frees_the_key_at_its_expiry(server_db):
    _, uri = server_db
    key, ttl = new_key(), 2.0
    args = ("--uri", uri, "--key", key, "--side", "write", "--ttl", ttl, "--limit", 4)
    holder = spawn("rw-hold", *args, worker=WORKER)
    try:
        fence, before, after = kill_holder(holder)
        (reader,) = locks(key, uri, 1, ttl=ttl, max_readers=4)
        with pytest.raises(LockExists, match="held for writing by"):
            reader.acquire("read", blocking=False)  # the dead writer's lease still runs
        reader.acquire("read", timeout=10, step=0.02)
        took = time.monotonic()
        print(
            f"\nwriter killed with SIGKILL: a reader entered {took - after:.3f} s after the "
            f"writer held (ttl {ttl} s)"
        )
        assert took - before >= ttl - 0.05  # not before the writer's lease could end
        assert took - after <= ttl + 1.0  # not much after
        assert reader.fence > fence
        reader.close()
    finally:
        finish(holder)
