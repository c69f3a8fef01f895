"""mongoelector.observe(): the stream of leader changes (core LeaderObserver), and the
hand-over (transfer / resign) through every backend's Storage::hand_over.

Backends: memory:// and sqlite:/// always; a pymongo Database (PyMongoStorage) and a
mongodb:// URI (libmongoc) on the real server (MONGOELECTOR_TEST_URI, skipped without).
Real processes: the electors of tests/python/test_handover.py (Cluster), observed from
this process; on SQLite they also check that leaderships never overlap.

No assertion depends on a short delay: waits are generous deadlines, and what is
asserted is the order and content of what was observed.
"""

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import mongoelector
import pytest
from conftest import make_backend
from mongoelector import (
    ClosedError,
    LeaderObserver,
    LeaderState,
    LeaderStatus,
    MongoLeaderElector,
    observe,
    testing,
)
from mongoelector.aio import AsyncMongoLeaderElector
from test_handover import TTL, Cluster

WAIT = 20.0  # generous: nothing here should take more than a few seconds


def next_state(changes, timeout=WAIT):
    state = changes.get(timeout)
    assert state is not None, f"no change observed within {timeout} s"
    assert isinstance(state, LeaderState)
    return state


def next_leader(changes, timeout=WAIT):
    """The next state with a leader; the states skipped may only be "no leader"."""
    deadline = time.monotonic() + timeout
    while True:
        state = next_state(changes, max(0.01, deadline - time.monotonic()))
        if state.has_leader:
            return state


def wait_for(pred, timeout=WAIT, what="condition"):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def assert_no_leader(state):
    assert state.has_leader is False
    assert (state.uuid, state.host, state.pid, state.fence) == (None, None, None, None)
    assert state.status is LeaderStatus.NONE and state.expires is None
    assert state.handover_uuid is None and state.handover_fence is None


def next_after_handover(changes, target, fence):
    """The state after a transfer() to `target`: the hand-over pending (nobody leads, the
    target named with the next token) until the target has taken it, then the target.
    A poll may miss the pending state when the target takes it within one interval."""
    state = next_state(changes)
    if state.status is LeaderStatus.PENDING:
        assert state.has_leader is False and state.uuid is None, state
        assert (state.handover_uuid, state.handover_fence) == (target, fence), state
        assert state.handover_host and state.handover_pid, state
        assert state.expires > state.server_time, state
        state = next_state(changes)
    assert state.status is LeaderStatus.LEADER, state
    assert state.expires > state.server_time and state.handover_uuid is None, state
    return state


def uuid_of(elector):
    return elector.node_status["uuid"]


def wait_member(elector, member):
    """Until `member`'s status document is in (transfer() needs it)."""
    uid = uuid_of(member)
    wait_for(
        lambda: any(m.get("uuid") == uid for m in elector.cluster_detail["member_detail"]),
        what="the target's status document",
    )
    return uid


@pytest.fixture(params=["memory", "sqlite", "pymongo", "uri"])
def hdb(request, tmp_path):
    """What the electors and the observer get as `db`, on every backend."""
    if request.param == "memory":
        return testing.memory_uri()
    if request.param == "sqlite":
        return "sqlite://" + str(tmp_path / "locks.db")
    return make_backend(request.param, request).db


def elector(db, key, **kw):
    kw.setdefault("ttl", 3)
    kw.setdefault("handover_poll", 0.1)
    return MongoLeaderElector(key, db, **kw)


# ------------------------------------------------------- the whole story ----


def test_observer_sees_leader_transfer_resign_and_no_leader(hdb):
    """A leads; transfer to B (B's token one above A's, no leaderless state in between:
    the hand-over is one write); A stops (nothing changes); B resigns (no leader during
    its hold-off), leads again (a new, higher token); B stops (no leader)."""
    a, b = elector(hdb, "svc"), elector(hdb, "svc")
    try:
        with observe(hdb, "svc", interval=0.05) as changes:
            assert_no_leader(next_state(changes))  # first: the current state
            a.start()
            s_a = next_state(changes)
            assert s_a.has_leader and s_a.uuid == uuid_of(a)
            status = a.node_status
            assert (s_a.host, s_a.pid) == (status["host"], status["pid"])
            wait_for(lambda: a.fence is not None, what="A's term")
            assert s_a.fence == a.fence

            b.start()
            to = wait_member(a, b)
            a.transfer(to)
            s_b = next_after_handover(changes, to, s_a.fence + 1)
            assert s_b.has_leader and s_b.uuid == to and s_b.fence == s_a.fence + 1
            wait_for(lambda: b.is_leader, what="B to take the hand-over")
            assert b.fence == s_b.fence and not a.is_leader
            doc = b.mlock.get_current()
            assert doc["uuid"] == to and doc["handover_from"] == uuid_of(a)
            assert s_b.server_time >= s_a.server_time

            a.stop()  # a follower: the lock does not change
            assert changes.get(0.5) is None

            assert b.resign(hold_off=1.0) is True
            assert not b.is_leader
            assert_no_leader(next_state(changes))
            s_b2 = next_state(changes)  # after the hold-off B is the only candidate
            assert s_b2.has_leader and s_b2.uuid == to and s_b2.fence > s_b.fence

            b.stop()
            assert_no_leader(next_state(changes))
            assert changes.get(0.3) is None
    finally:
        a.close()
        b.close()


def test_transfer_refusals_and_resign_to_another_member(hdb):
    """The hand-over paths every backend implements: refused transfers change nothing;
    a resign lets the other member lead with a higher token."""
    a, b = elector(hdb, "k2"), elector(hdb, "k2")
    try:
        a.start()
        wait_for(lambda: a.is_leader, what="A to lead")
        b.start()
        to = wait_member(a, b)
        with pytest.raises(ValueError, match="not the leader"):
            b.transfer(uuid_of(a))
        with pytest.raises(ValueError, match="not a member"):
            a.transfer("nobody-here")
        with pytest.raises(ValueError, match="this node"):
            a.transfer(uuid_of(a))
        assert a.is_leader
        first = a.fence
        hold_off_end = time.monotonic() + 3.0
        assert a.resign(hold_off=3.0) is True
        wait_for(lambda: b.is_leader, what="B to lead after A resigned")
        assert b.fence > first and not a.is_leader
        assert b.mlock.get_current()["uuid"] == to
        # And handed back by transfer (once A's hold-off, which refuses hand-overs too,
        # is over): token one above B's.
        time.sleep(max(0.0, hold_off_end - time.monotonic()) + 0.1)
        fence_b = b.fence
        b.transfer(uuid_of(a))
        wait_for(lambda: a.is_leader, what="A to take the hand-over")
        assert a.fence == fence_b + 1 and not b.is_leader
    finally:
        a.close()
        b.close()


# ----------------------------------------------------- iterator behaviour ----


def test_close_from_another_thread_ends_a_blocking_iteration():
    db = testing.memory_uri()
    changes = observe(db, "idle", interval=0.05)
    seen = []
    closer = threading.Timer(0.5, changes.close)
    closer.start()
    t0 = time.monotonic()
    for state in changes:  # blocks after the first item until close()
        seen.append(state)
    assert time.monotonic() - t0 < 10
    assert len(seen) == 1 and not seen[0].has_leader
    assert changes.closed
    with pytest.raises(ClosedError):
        changes.get(0)
    assert list(changes) == []
    changes.close()  # idempotent


def test_close_ends_a_blocked_get_with_closed_error():
    changes = observe(testing.memory_uri(), "idle", interval=0.05)
    assert not next_state(changes).has_leader
    result = []

    def consume():
        try:
            result.append(changes.get())
        except ClosedError as ex:
            result.append(ex)

    t = threading.Thread(target=consume)
    t.start()
    time.sleep(0.2)
    assert t.is_alive()
    changes.close()
    t.join(10)
    assert not t.is_alive() and isinstance(result[0], ClosedError)


def test_blocking_wait_releases_the_gil():
    changes = observe(testing.memory_uri(), "idle", interval=0.05)
    try:
        assert not next_state(changes).has_leader
        ended = []

        def wait():
            with pytest.raises(ClosedError):
                changes.get(10.0)
            ended.append(True)

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.05)
        # Pure-Python work on this thread runs while the other waits natively.
        t0 = time.monotonic()
        n = 0
        while time.monotonic() - t0 < 0.5:
            n += 1
        assert time.monotonic() - t0 < 5.0 and waiter.is_alive()
        assert n > 1000
    finally:
        changes.close()
    waiter.join(10)
    assert ended == [True]


CTRL_C_SCRIPT = textwrap.dedent(r"""
    import faulthandler, signal
    import mongoelector
    from mongoelector import testing
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # diagnostics if it hangs
    # Python's own handler, also when started with SIGINT ignored (testserver.sh runs
    # the suite as a background job, which ignores it: a Ctrl-C would never arrive).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    changes = mongoelector.observe(testing.memory_uri(), "k", interval=0.05)
    try:
        for state in changes:
            print("state", state.has_leader, flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
""")


def test_ctrl_c_ends_a_blocking_iteration():
    p = subprocess.Popen(
        [sys.executable, "-c", CTRL_C_SCRIPT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stdout.readline().split() == ["state", "False"]
        time.sleep(0.2)  # blocked in the native wait by now (or about to be)
        p.send_signal(signal.SIGINT)
        try:
            out, err = p.communicate(timeout=3 * WAIT)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGUSR1)  # every thread's stack to stderr
            time.sleep(1)
            p.kill()
            out, err = p.communicate()
            pytest.fail(f"still running {3 * WAIT} s after SIGINT; stdout {out!r}, stderr:\n{err}")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert out.split() == ["interrupted"], err
    assert p.returncode == 0, err


def test_get_times_out_with_none():
    with observe(testing.memory_uri(), "idle", interval=0.05) as changes:
        assert not next_state(changes).has_leader
        t0 = time.monotonic()
        assert changes.get(0.3) is None
        assert time.monotonic() - t0 >= 0.25
    assert changes.closed


def test_async_iteration_does_not_block_the_event_loop():
    db = testing.memory_uri()
    el = MongoLeaderElector("svc", db, ttl=3)

    async def main():
        loop = asyncio.get_running_loop()
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        tick_task = asyncio.create_task(ticker())
        seen = []
        async with observe(db, "svc", interval=0.05) as changes:
            async for state in changes:
                seen.append((state, ticks))
                if len(seen) == 1:
                    loop.call_later(1.0, el.start)  # a leader a second later
                if state.has_leader:
                    break
        tick_task.cancel()
        return seen, changes

    seen, changes = asyncio.run(asyncio.wait_for(main(), WAIT))
    try:
        assert [s.has_leader for s, _ in seen] == [False, True]
        assert seen[1][0].uuid == uuid_of(el)
        # The loop kept running while the iteration waited (about 100 ticks; none if
        # the wait blocked it).
        assert seen[1][1] - seen[0][1] >= 10
        assert changes.closed  # async with closed it
    finally:
        el.close()


def test_async_iteration_ends_when_closed_from_a_task_or_a_thread():
    async def consume(changes):
        return [s async for s in changes]

    async def main():
        a = observe(testing.memory_uri(), "x", interval=0.05)
        b = observe(testing.memory_uri(), "x", interval=0.05)
        ta = asyncio.create_task(consume(a))
        tb = asyncio.create_task(consume(b))
        await asyncio.sleep(0.3)
        assert not ta.done() and not tb.done()
        await a.aclose()
        threading.Timer(0.1, b.close).start()
        got_a, got_b = await asyncio.wait_for(asyncio.gather(ta, tb), WAIT)
        assert [s.has_leader for s in got_a] == [False]
        assert [s.has_leader for s in got_b] == [False]
        with pytest.raises(StopAsyncIteration):
            await a.__anext__()

    asyncio.run(main())


def test_elector_observe_convenience(tmp_path):
    db = "sqlite://" + str(tmp_path / "locks.db")
    el = MongoLeaderElector("svc", db, ttl=3)
    try:
        with el.observe(interval=0.05) as changes:
            assert isinstance(changes, LeaderObserver) and changes.key == "svc"
            assert not next_state(changes).has_leader
            el.start()
            assert next_state(changes).uuid == uuid_of(el)
    finally:
        el.close()


def test_leader_state_is_a_frozen_value():
    with observe(testing.memory_uri(), "v", interval=0.05) as changes:
        s = next_state(changes)
    with pytest.raises(AttributeError):
        s.has_leader = True
    # Built from the first six fields (code written before the others existed): equal.
    assert s == LeaderState(
        *[getattr(s, f) for f in ("has_leader", "uuid", "host", "pid", "fence", "server_time")]
    )
    assert s.same_leader(LeaderState(False, None, None, None, None, s.server_time))
    assert s.server_time.tzinfo is not None
    assert LeaderState(True, "u", "h", 1, 2, s.server_time).status is LeaderStatus.LEADER
    pending = LeaderState(
        False, None, None, None, None, s.server_time, "pending", handover_uuid="u", handover_fence=3
    )
    assert pending.status is LeaderStatus.PENDING and pending.status == "pending"
    assert not pending.same_leader(s)
    assert not pending.same_leader(
        LeaderState(
            False,
            None,
            None,
            None,
            None,
            s.server_time,
            LeaderStatus.PENDING,
            handover_uuid="u",
            handover_fence=4,
        )
    )


@contextlib.contextmanager
def a_leads_on_a_fake_clock(key):
    """A fake clock, a memory:// backend on it, elector A (ttl 5) leading `key` and an
    observer that has reported it: yields (clock, db, a, changes, the state naming A)."""
    clock = testing.FakeClock()
    db = testing.memory_uri(clock=clock)
    a = elector(db, key, ttl=5, handover_poll=0.5)
    try:
        with observe(db, key, interval=0.05) as changes:
            assert_no_leader(next_state(changes))
            a.start()
            clock.advance(0.1)
            led = next_state(changes)
            assert led.status is LeaderStatus.LEADER and led.uuid == uuid_of(a)
            assert led.expires is not None
            yield clock, db, a, changes, led
    finally:
        a.close()


def test_a_transfer_to_a_dead_target_is_pending_never_a_leader():
    """The target never takes the hand-over (its process is gone): the observer shows the
    hand-over pending, never the target leading, then nobody once it expires."""
    with a_leads_on_a_fake_clock("dead") as (clock, db, a, changes, led):
        b = elector(db, "dead", ttl=5, handover_poll=0.5)
        b.start()
        clock.advance(0.1)
        to = uuid_of(b)
        b.close()  # a follower: nothing to release; its status document stays
        a.transfer(to)
        clock.advance(0.1)
        handed = next_state(changes)
        assert handed.status is LeaderStatus.PENDING and not handed.has_leader
        assert (handed.handover_uuid, handed.handover_fence) == (to, led.fence + 1)
        clock.advance(4.0)
        assert changes.get(0.2) is None, "still pending"
        clock.advance(1.5)
        gone = next_state(changes)
        assert gone.status in (LeaderStatus.NONE, LeaderStatus.LEADER), gone
        assert gone.uuid != to


def test_unknown_once_the_lease_ends_while_reads_fail():
    """The database stops answering: the observer says "unknown" at the instant the
    leader's lease ends on its estimate (no read needed), carrying that end; once the
    database answers again, the state after it."""
    with a_leads_on_a_fake_clock("svc") as (clock, db, a, changes, led):
        with testing.unavailable(db):
            # The leader cannot renew either: its lease ends where the observer last saw
            # it end.
            left = led.expires.timestamp() - clock.time()
            assert 0 < left <= 5
            clock.advance(left - 0.1)
            assert changes.get(0.2) is None, "the lease still runs"
            clock.advance(0.2)
            gone = next_state(changes)
            assert gone.status is LeaderStatus.UNKNOWN and gone.has_leader is False
            assert gone.uuid is None and gone.expires == led.expires
            a.stop()  # its release fails: the lock stays, expired
        clock.advance(1.0)
        assert_no_leader(next_state(changes))


FORK_SCRIPT = textwrap.dedent(r"""
    import os, sys, mongoelector
    from mongoelector import testing
    db = testing.memory_uri()
    changes = mongoelector.observe(db, "svc", interval=0.05)
    assert changes.get(10).has_leader is False
    pid = os.fork()
    if pid == 0:
        # The parent's thread is not here: the observer is closed, iteration ends at once.
        assert changes.closed and list(changes) == []
        changes.close()
        with mongoelector.observe(testing.memory_uri(), "c", interval=0.05) as mine:
            assert mine.get(10).has_leader is False
        print("child-ok", flush=True)
        sys.exit(0)
    _, status = os.waitpid(pid, 0)
    el = mongoelector.MongoLeaderElector("svc", db, ttl=3)
    el.start()
    print("child-status", status, "parent-sees", changes.get(10).has_leader, flush=True)
    el.stop()
    # Exits with `changes` open: closed at exit.
""")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_fork_abandons_the_parents_observers():
    r = subprocess.run(
        [sys.executable, "-c", FORK_SCRIPT], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["child-ok", "child-status 0 parent-sees True"]
    assert "Fatal Python error" not in r.stderr and "terminate" not in r.stderr, r.stderr


GC_SCRIPT = textwrap.dedent(r"""
    import gc, os, time, mongomock, mongoelector
    db = mongomock.MongoClient().db     # reads take the GIL on the observer's thread
    threads = lambda: len(os.listdir("/proc/self/task"))
    before = threads()

    class Holder:                       # cyclic garbage: freed by whichever thread collects
        def __init__(self):
            self.me = self
            self.changes = mongoelector.observe(db, "k", interval=0.001)

    gc.set_threshold(1, 1, 1)           # collect on (almost) every allocation, any thread
    for i in range(200):
        Holder()
    gc.collect()
    deadline = time.monotonic() + 20
    while threads() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    print("threads", threads() - before, flush=True)
""")


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc")
def test_observers_dropped_without_close_stop_their_threads():
    """An observer collected as garbage (possibly on its own thread) stops its thread."""
    r = subprocess.run(
        [sys.executable, "-c", GC_SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["threads", "0"], r.stdout + r.stderr


# ------------------------------------------------------------ arguments ----


@pytest.mark.parametrize(
    "args, kwargs, exc, match",
    [
        ((42, "k"), {}, TypeError, "Database"),
        (("mongodb://h:1", "k"), {}, ValueError, "names no database"),
        (("memory://x", 42), {}, TypeError, "key must be a str"),
        (("memory://x", ""), {}, ValueError, "key must not be empty"),
        (("memory://x", "k"), {"interval": "1"}, TypeError, "interval must be a number"),
        (("memory://x", "k"), {"interval": True}, TypeError, "interval must be a number"),
        (("memory://x", "k"), {"interval": None}, TypeError, "interval must be a number"),
        (("memory://x", "k"), {"interval": 0}, ValueError, "interval"),
        (("memory://x", "k"), {"interval": -1}, ValueError, "interval"),
        (("memory://x", "k"), {"interval": float("nan")}, ValueError, "interval"),
        (("memory://x", "k"), {"interval": float("inf")}, ValueError, "interval"),
        (("memory://x", "k"), {"collection": 7}, TypeError, "collection must be a str"),
        (("memory://x", "k"), {"collection": "a$b"}, ValueError, "collection"),
        (("memory://x", "k"), {"op_timeout": "5"}, TypeError, "op_timeout"),
        (("memory://x", "k"), {"op_timeout": 0}, ValueError, "op_timeout"),
    ],
)
def test_wrong_arguments_raise(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        observe(*args, **kwargs)


def test_bare_client_is_refused():
    import pymongo

    client = pymongo.MongoClient("mongodb://127.0.0.1:1", connect=False)
    try:
        with pytest.raises(TypeError, match="bare MongoClient"):
            observe(client, "k")
    finally:
        client.close()


def test_get_timeout_is_checked():
    with observe(testing.memory_uri(), "k", interval=0.05) as changes:
        with pytest.raises(TypeError, match="timeout"):
            changes.get("1")
        with pytest.raises(ValueError, match="timeout"):
            changes.get(-1)


@pytest.mark.parametrize(
    "value, exc",
    [
        ("1", TypeError),
        (True, TypeError),
        ([1], TypeError),
        (-0.5, ValueError),
        (float("nan"), ValueError),
        (float("inf"), ValueError),
        (2e9, ValueError),
    ],
)
def test_handover_poll_is_validated(value, exc):
    with pytest.raises(exc, match="handover_poll"):
        MongoLeaderElector("k", testing.memory_uri(), ttl=3, handover_poll=value)
    with pytest.raises(exc, match="handover_poll"):
        AsyncMongoLeaderElector("k", testing.memory_uri(), ttl=3, handover_poll=value)


@pytest.mark.parametrize("value", [None, 0, 1, 0.25])
def test_handover_poll_accepts_seconds_and_none(value):
    MongoLeaderElector("k", testing.memory_uri(), ttl=3, handover_poll=value).close()


@pytest.mark.parametrize("follower_poll", [0.2, 0])
def test_handover_poll_is_how_soon_a_follower_notices_a_resign(follower_poll):
    """A leads (ttl 20 s: the default peek would be every 5 s); B follows with
    handover_poll 0.2 s (takes over at once) or 0 (off: waits for A's lease, 13..20 s
    after its last read); A resigns."""
    db = testing.memory_uri()
    a = MongoLeaderElector("hp", db, ttl=20)
    b = MongoLeaderElector("hp", db, ttl=20, handover_poll=follower_poll)
    try:
        with observe(db, "hp", interval=0.05) as changes:
            a.start()
            next_leader(changes)
            b.start()
            wait_member(a, b)  # B has polled (and read A's fresh lease)
            a.resign(hold_off=60)
            deadline = time.monotonic() + 3.0
            while not b.is_leader and time.monotonic() < deadline:
                time.sleep(0.02)
            if follower_poll:
                assert b.is_leader, "B did not take over within 3 s"
                assert next_leader(changes).uuid == uuid_of(b)
            else:
                assert not b.is_leader
                assert_no_leader(next_state(changes))
                assert changes.get(0.3) is None  # and still nobody leads
    finally:
        a.close()
        b.close()


# --------------------------------------------------------- real processes ----


def test_observer_follows_electors_in_other_processes(server_db):
    """Electors in three processes (libmongoc URI); the observer in this process reads
    through a pymongo Database (PyMongoStorage)."""
    db, uri = server_db
    c = Cluster(uri, 3)
    try:
        with observe(db, c.key, interval=0.05) as changes:
            old = c.start()
            uuids = {p.uuid: n for n, p in c.procs.items()}
            first = next_leader(changes)
            assert uuids[first.uuid] == old

            target = next(n for n in c.procs if n != old)
            c.procs[old].send("transfer " + c.procs[target].uuid)
            moved = next_after_handover(changes, c.procs[target].uuid, first.fence + 1)
            assert moved.has_leader and uuids[moved.uuid] == target
            assert moved.fence == first.fence + 1
            c.wait(lambda e: e["ev"] == "leader" and e["who"] == target)

            c.procs[target].send(f"resign {3 * TTL}")
            after = next_leader(changes)
            assert uuids[after.uuid] not in (target,) and after.fence > moved.fence

            c.close()  # every process stops: released
            last = None
            while True:
                s = changes.get(1.5 if last is not None else WAIT)
                if s is None:
                    break
                last = s
            assert last is not None
            assert_no_leader(last)
    finally:
        c.close()


def test_sqlite_transfer_and_resign_between_processes(tmp_path):
    """The SQLite backend's hand-over between processes (no server): transfer and
    resign, with leaderships that never overlap (checked by Cluster.close())."""
    uri = "sqlite://" + str(tmp_path / "locks.db")
    c = Cluster(uri, 3)
    try:
        with observe(uri, c.key, interval=0.05) as changes:
            old = c.start()
            first = next_leader(changes)
            assert first.uuid == c.procs[old].uuid
            target = next(n for n in c.procs if n != old)
            c.procs[old].send("transfer " + c.procs[target].uuid)
            new = c.wait(lambda e: e["ev"] in ("leader", "error"))
            assert new["ev"] == "leader" and new["who"] == target, new
            moved = next_after_handover(changes, c.procs[target].uuid, first.fence + 1)
            assert moved.uuid == c.procs[target].uuid and moved.fence == first.fence + 1

            c.procs[target].send(f"resign {3 * TTL}")
            new = c.wait(lambda e: e["ev"] == "leader")
            assert new["who"] != target
            after = next_leader(changes)
            assert after.uuid == c.procs[new["who"]].uuid and after.fence > moved.fence
    finally:
        c.close()


def test_package_exports():
    assert mongoelector.observe is observe
    for name in ("observe", "LeaderObserver", "LeaderState", "LeaderStatus"):
        assert name in mongoelector.__all__
