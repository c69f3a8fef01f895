"""MongoLeaderElector: the contract of mongoelector 1.0 (every backend), plus the
step-down guarantee and the native loop's behaviour with callbacks."""

import logging
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone

import mongomock
import pytest
from mongoelector import MongoLeaderElector, MongoLocker

UTC = timezone.utc


def new_key():
    return "svc-" + uuid.uuid4().hex[:8]


def wait_for(cond, timeout=10.0, step=0.02):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return cond()


class Recorder:
    """Callbacks that record (name, thread, time) in order."""

    def __init__(self):
        self.events = []
        self.lock = threading.Lock()

    def cb(self, name, also=None):
        def fn():
            with self.lock:
                self.events.append((name, threading.get_ident(), time.monotonic()))
            if also:
                also()

        return fn

    def names(self):
        with self.lock:
            return [e[0] for e in self.events]


@pytest.fixture
def electors():
    made = []
    yield made
    for e in made:
        e.stop()


# ------------------------------------------------------------ construction ---


def test_construction_indexes_and_attributes(backend):
    key = new_key()
    e = MongoLeaderElector(key, backend.db, ttl=7)
    assert (e.key, e.db, e.ttl) == (key, backend.db, 7)
    assert isinstance(e.mlock, MongoLocker)
    assert (e.mlock.key, e.mlock._ttl, e.mlock.timeparanoid) == (key, 7, True)
    status = backend.raw["elector.leader_status"].index_information()
    keys = {tuple(v["key"]): v for v in status.values()}
    assert keys[(("timestamp", 1),)]["expireAfterSeconds"] == 7
    assert (("key", 1),) in keys
    locks = backend.raw["elector.locks"].index_information()
    assert any(
        v["key"] == [("ts_expire", 1)] and v["expireAfterSeconds"] == 0 for v in locks.values()
    )
    assert not e.running and not e.is_leader


@pytest.mark.parametrize("bad", [None, mongomock.MongoClient()])
def test_bad_db_is_a_type_error(bad):
    with pytest.raises(TypeError):
        MongoLeaderElector("k", bad)


def test_bad_key_and_ttl(backend):
    with pytest.raises(ValueError):
        MongoLeaderElector("", backend.db)
    with pytest.raises(ValueError):
        MongoLeaderElector("k", backend.db, ttl="15")
    with pytest.raises(ValueError):
        MongoLeaderElector("k", backend.db, ttl=0)


# -------------------------------------------------------------- manual poll ---


def test_poll_leader_and_follower(backend):
    key = new_key()
    ra, rb = Recorder(), Recorder()
    a = MongoLeaderElector(
        key,
        backend.db,
        ttl=10,
        on_leader=ra.cb("leader"),
        on_leader_loss=ra.cb("loss"),
        on_loop=ra.cb("loop"),
    )
    b = MongoLeaderElector(
        key,
        backend.db,
        ttl=10,
        on_leader=rb.cb("leader"),
        on_leader_loss=rb.cb("loss"),
        on_loop=rb.cb("loop"),
    )
    assert not a.leader_exists and a.poll_wait == 10
    a.poll()
    assert ra.names() == ["leader", "loop"]
    assert a.is_leader and a.leader_exists and a.poll_wait == 5.0
    assert a.mlock.owned()
    b.poll()
    assert rb.names() == ["loop"]
    assert not b.is_leader and b.leader_exists and b.poll_wait == 10
    a.poll()  # renewal: no new callback but on_loop
    assert ra.names() == ["leader", "loop", "loop"]
    a.release()
    assert ra.names()[-1] == "loss" and not a.is_leader and not a.mlock.locked()
    b.poll()
    assert rb.names() == ["loop", "leader", "loop"] and b.is_leader


def test_callbacks_run_in_the_calling_thread_on_poll(backend):
    r = Recorder()
    e = MongoLeaderElector(new_key(), backend.db, ttl=10, on_leader=r.cb("leader"))
    e.poll()
    assert r.events[0][1] == threading.get_ident()


def test_release_when_not_leader_fires_nothing(backend):
    r = Recorder()
    e = MongoLeaderElector(new_key(), backend.db, on_leader_loss=r.cb("loss"))
    e.release()
    assert r.names() == []


def test_node_status_and_report(backend):
    key = new_key()
    e = MongoLeaderElector(key, backend.db, ttl=10, app_version="2.3.4")
    st = e.node_status
    assert set(st) == {
        "uuid",
        "key",
        "ttl",
        "timestamp",
        "host",
        "pid",
        "lock_owned",
        "lock_created",
        "lock_expires",
        "_id",
        "is_leader",
        "elector_running",
        "last_poll",
        "app_version",
    }
    assert st["_id"] == st["uuid"] == e.mlock.uuid
    assert (st["key"], st["ttl"], st["app_version"]) == (key, 10, "2.3.4")
    assert (st["is_leader"], st["lock_owned"], st["elector_running"]) == (False, False, False)
    assert st["last_poll"] is None and st["lock_created"] is None
    e.poll()
    st = e.node_status
    assert st["is_leader"] is True and st["lock_owned"] is True
    assert st["lock_expires"] - st["lock_created"] == timedelta(seconds=10)
    assert isinstance(st["last_poll"], datetime) and st["last_poll"].tzinfo is not None
    assert abs(st["timestamp"] - datetime.now(UTC)) < timedelta(seconds=5)
    doc = backend.raw["elector.leader_status"].find_one({"_id": e.mlock.uuid})
    assert doc["key"] == key and doc["is_leader"] is True and doc["app_version"] == "2.3.4"
    assert "app_version" not in MongoLeaderElector(key, backend.db).node_status


def test_report_status_false_writes_nothing(backend):
    e = MongoLeaderElector(new_key(), backend.db, report_status=False)
    e.poll()
    assert e.is_leader
    assert backend.raw["elector.leader_status"].count_documents({"_id": e.mlock.uuid}) == 0


def test_cluster_detail(backend):
    key = new_key()
    a = MongoLeaderElector(key, backend.db, ttl=10)
    b = MongoLeaderElector(key, backend.db, ttl=10)
    a.poll()
    time.sleep(0.01)
    b.poll()
    cd = b.cluster_detail
    assert set(cd) == {"member_detail", "leader", "timestamp"}
    members = cd["member_detail"]
    assert [m["uuid"] for m in members] == [b.mlock.uuid, a.mlock.uuid]  # newest first
    assert all("_id" not in m for m in members)
    assert cd["leader"] == {"host": a.mlock.host, "process_id": a.mlock.pid, "uuid": a.mlock.uuid}
    assert cd["timestamp"].tzinfo is not None
    a.release()
    assert b.cluster_detail["leader"] is None


def test_repr(backend):
    key = new_key()
    e = MongoLeaderElector(key, backend.db, ttl=10)
    assert repr(e) == f"MongoLeaderElector(key='{key}', follower, stopped, uuid='{e.mlock.uuid}')"
    e.poll()
    assert repr(e) == f"MongoLeaderElector(key='{key}', leader, stopped, uuid='{e.mlock.uuid}')"


# ------------------------------------------------------------- the loop ---


def test_start_stop_and_context_manager(backend, electors):
    key = new_key()
    r = Recorder()
    e = MongoLeaderElector(
        key,
        backend.db,
        ttl=2,
        on_leader=r.cb("leader"),
        on_leader_loss=r.cb("loss"),
        on_loop=r.cb("loop"),
    )
    electors.append(e)
    e.start()
    assert e.running and "running" in repr(e)
    assert wait_for(lambda: e.is_leader)
    # is_leader reads the hold; on_leader runs on the elector thread right after it won,
    # so it may still be on its way when is_leader turns true (as in the original).
    assert wait_for(lambda: len(r.names()) >= 2)
    assert r.names()[:2] == ["leader", "loop"]
    assert r.events[0][1] != threading.get_ident()  # callbacks run on the elector thread
    assert wait_for(lambda: r.names().count("loop") >= 3, timeout=5)  # polls every ttl/2
    assert e.is_leader  # renewed meanwhile
    e.stop()
    assert not e.running and not e.is_leader and r.names()[-1] == "loss"
    assert not e.mlock.locked()
    with MongoLeaderElector(key, backend.db, ttl=2) as e2:
        assert e2.running
        assert wait_for(lambda: e2.is_leader)
    assert not e2.running and not e2.mlock.locked()
    e.start()  # restartable
    assert wait_for(lambda: e.is_leader)
    e.stop()


def test_only_one_leader_and_handover(backend, electors):
    key = new_key()
    a = MongoLeaderElector(key, backend.db, ttl=1)
    b = MongoLeaderElector(key, backend.db, ttl=1)
    electors += [a, b]
    a.start()
    assert wait_for(lambda: a.is_leader)
    b.start()
    end = time.monotonic() + 2
    while time.monotonic() < end:
        assert not (a.is_leader and b.is_leader)
        time.sleep(0.01)
    assert a.is_leader and not b.is_leader and b.leader_exists
    a.stop()
    assert wait_for(lambda: b.is_leader, timeout=3)  # a released: b takes over within ~ttl


def test_callback_exception_is_logged_and_loop_goes_on(backend, electors, caplog):
    calls = []

    def bad():
        calls.append(1)
        raise RuntimeError("callback failure")

    caplog.set_level(logging.ERROR, logger="mongoelector")
    e = MongoLeaderElector(new_key(), backend.db, ttl=1, on_leader=bad, on_loop=bad)
    electors.append(e)
    e.start()
    assert wait_for(lambda: len(calls) >= 4, timeout=5)
    assert e.running and e.is_leader
    recs = [r for r in caplog.records if r.name.startswith("mongoelector")]
    msgs = {r.getMessage() for r in recs}
    assert {"Error in on_leader callback", "Error in on_loop callback"} <= msgs
    assert all(r.exc_info and "callback failure" in str(r.exc_info[1]) for r in recs)


def test_stop_from_a_callback_does_not_deadlock(backend):
    holder = {}
    r = Recorder()
    e = MongoLeaderElector(
        new_key(),
        backend.db,
        ttl=2,
        on_leader_loss=r.cb("loss"),
        on_leader=r.cb("leader", also=lambda: holder["e"].stop()),
    )
    holder["e"] = e
    e.start()
    assert wait_for(lambda: not e.running, timeout=5)
    assert r.names() == ["leader", "loss"]
    assert not e.mlock.locked()
    e.stop()  # again, from outside: harmless


def test_release_from_a_callback(backend, electors):
    holder = {"n": 0}
    r = Recorder()

    def on_loop():
        holder["n"] += 1
        if holder["n"] == 1:
            holder["e"].release()

    e = MongoLeaderElector(
        new_key(),
        backend.db,
        ttl=1,
        on_leader=r.cb("leader"),
        on_leader_loss=r.cb("loss"),
        on_loop=on_loop,
    )
    holder["e"] = e
    electors.append(e)
    e.start()
    assert wait_for(lambda: r.names().count("leader") >= 2, timeout=5)  # re-elected later
    assert r.names()[:3] == ["leader", "loss", "leader"]


def test_start_blocking_returns_after_stop(backend):
    holder = {}
    e = MongoLeaderElector(new_key(), backend.db, ttl=2, on_leader=lambda: holder["e"].stop())
    holder["e"] = e
    t0 = time.monotonic()
    e.start(blocking=True)
    assert not e.running and time.monotonic() - t0 < 5


def test_callbacks_can_be_reassigned(backend, electors):
    r = Recorder()
    e = MongoLeaderElector(new_key(), backend.db, ttl=1)
    electors.append(e)
    assert e.callback_on_loop is None
    e.start()
    assert wait_for(lambda: e.is_leader)
    e.callback_on_loop = r.cb("loop")
    assert wait_for(lambda: "loop" in r.names(), timeout=3)
    e.callback_on_loop = None
    n = len(r.names())
    time.sleep(1.2)
    assert len(r.names()) == n


def test_leader_steps_down_before_takeover(db_backend, electors):
    """Weakness 3 of the original: a leader that cannot reach the database steps down
    (is_leader False, on_leader_loss) before another node can take its lease."""
    import pymongo
    from flaky import FlakyDatabase

    key = new_key()
    flaky = FlakyDatabase(db_backend.db)
    ra, rb = Recorder(), Recorder()
    a = MongoLeaderElector(key, flaky, ttl=2, on_leader_loss=ra.cb("loss"))
    b = MongoLeaderElector(key, db_backend.db, ttl=2, on_leader=rb.cb("leader"))
    electors += [a, b]
    a.start()
    assert wait_for(lambda: a.is_leader)
    b.start()
    time.sleep(0.3)
    flaky.fail(pymongo.errors.AutoReconnect("partitioned"))
    t_fail = time.monotonic()
    assert wait_for(lambda: rb.names() == ["leader"], timeout=6)
    loss_t = ra.events[0][2]
    lead_t = rb.events[0][2]
    assert ra.names() == ["loss"] and loss_t < lead_t
    assert loss_t - t_fail < 2  # within one lease of the last renewal
    assert not a.is_leader and b.is_leader


def test_core_log_messages_reach_logging(backend, caplog):
    from mongoelector import _native

    key = new_key()
    caplog.set_level(logging.INFO, logger="mongoelector")
    e = MongoLeaderElector(key, backend.db, ttl=5)
    e.poll()
    e.release()
    _native.flush_log()  # the bridge delivers from its own thread
    msgs = [r.getMessage() for r in caplog.records if r.name == "mongoelector"]
    assert f"became leader of {key}" in msgs and f"lost leadership of {key}" in msgs
