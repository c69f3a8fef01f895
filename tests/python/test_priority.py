"""Priority leaders (MongoLeaderElector(priority=..., priority_stability=...)) on the fake
clock kit: the leader hands over to a running member of strictly higher priority after
the stability delay, not before; a tie moves nothing; off by default; bad options are
refused by name before any I/O."""

import asyncio
import math

import pytest
from mongoelector import MongoLeaderElector, testing
from mongoelector.aio import AsyncMongoLeaderElector

TTL = 8


def _leaders(*electors):
    return [e for e in electors if e.is_leader]


def _first_leader(**options):
    """A fake clock, its memory:// database and a started elector leading it."""
    clock = testing.FakeClock()
    db = clock.memory_uri()
    a = MongoLeaderElector("svc", db, ttl=TTL, **options)
    a.start()
    clock.advance(0)
    assert a.is_leader
    return clock, db, a


def test_hands_over_to_a_higher_member_after_the_delay_not_before():
    # The delay is the leader's priority_stability.
    clock, db, a = _first_leader(priority=1, priority_stability=5)
    b = MongoLeaderElector("svc", db, ttl=TTL, priority=5, priority_stability=5)
    b.start()
    try:
        for _ in range(19):  # 4.75 s: the delay has not passed
            clock.advance(0.25)
            assert _leaders(a, b) == [a]
        clock.advance(TTL / 3 + TTL / 4 + 2)  # a's poll at the end of the delay, b's peek
        assert _leaders(a, b) == [b]
        detail = a.cluster_detail
        assert sorted(m.get("priority") for m in detail["member_detail"]) == [1, 5]
        clock.advance(5 * TTL)
        assert _leaders(a, b) == [b], "nobody hands back to a lower member"
    finally:
        a.close()
        b.close()


def test_a_tie_never_moves_leadership_and_off_is_the_default():
    clock, db, a = _first_leader(priority=3, priority_stability=0)
    b = MongoLeaderElector("svc", db, ttl=TTL, priority=3, priority_stability=0)
    c = MongoLeaderElector("svc", db, ttl=TTL)  # no priority: never a candidate
    b.start()
    c.start()
    try:
        clock.advance(10 * TTL)
        assert _leaders(a, b, c) == [a]
        status = {m["uuid"]: m for m in a.cluster_detail["member_detail"]}
        assert "priority" not in status[c.node_status["uuid"]]
    finally:
        for e in (a, b, c):
            e.close()


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(priority="high"), TypeError, "priority must be a number or None, not str"),
        (dict(priority=True), TypeError, "priority must be a number or None, not bool"),
        (dict(priority=math.nan), ValueError, "priority must be a finite number"),
        (dict(priority=1, priority_stability=-1), ValueError, "priority_stability must be"),
        (dict(priority=1, priority_stability=math.nan), ValueError, "priority_stability"),
        (dict(priority=1, priority_stability="5s"), TypeError, "priority_stability must be"),
        (dict(priority=1, report_status=False), ValueError, "priority needs report_status"),
    ],
)
def test_bad_options_are_refused_by_name(kwargs, error, words):
    db = testing.memory_uri()
    with pytest.raises(error, match=words):
        MongoLeaderElector("svc", db, ttl=TTL, **kwargs)
    if "report_status" not in kwargs:
        with pytest.raises(error, match=words):
            AsyncMongoLeaderElector("svc", db, ttl=TTL, **kwargs)


def test_asyncio_elector_hands_over_by_priority():
    async def scenario():
        clock = testing.FakeClock()
        db = clock.memory_uri()
        a = AsyncMongoLeaderElector("svc", db, ttl=TTL, priority=0, priority_stability=1)
        await a.start()
        await asyncio.to_thread(clock.advance, 0)
        first = a.is_leader
        b = AsyncMongoLeaderElector("svc", db, ttl=TTL, priority=2, priority_stability=1)
        await b.start()
        await asyncio.to_thread(clock.advance, 1 + TTL / 3 + TTL / 4 + 2)
        result = (first, a.is_leader, b.is_leader)
        await a.stop()
        await b.stop()
        return result

    assert asyncio.run(scenario()) == (True, False, True)


# ---- real processes -------------------------------------------------------------------
# Three elector processes of priorities 0, 1 and 2, started lowest first, on the real
# server and on SQLite: eventually the priority-2 process leads, leaderships never
# overlap (each process reports on_leader / on_leader_loss with CLOCK_MONOTONIC, one
# clock for every process of the host: a hand-over's loss is reported before its fenced
# write, the next leader's start after it), and the fences of the terms increase.
# Generous timeouts, no assertion on how long anything took.

PROC_TTL = 4.0  # as test_handover.py: a host stalled for most of a ttl would "lead" twice

PRIORITY_CHILD = r"""
import json, sys, time, mongoelector
uri, key, ttl, priority = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
el = None
def emit(ev, **kw):
    kw.update(ev=ev, t=time.clock_gettime(time.CLOCK_MONOTONIC))
    sys.stdout.write(json.dumps(kw) + "\n"); sys.stdout.flush()
el = mongoelector.MongoLeaderElector(
    key, uri, ttl=ttl, priority=priority, priority_stability=0.5,
    on_leader=lambda: emit("leader", fence=el.fence),
    on_leader_loss=lambda: emit("loss"))
el.start()
emit("ready")
sys.stdin.readline()  # anything (or EOF): stop
el.close()
emit("closed")
"""


class _PriorityProc:
    def __init__(self, uri, key, priority, events):
        import subprocess
        import sys
        import threading

        self.name = f"p{priority}"
        self.p = subprocess.Popen(
            [sys.executable, "-c", PRIORITY_CHILD, uri, key, str(PROC_TTL), str(priority)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.events = events
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        import json

        for line in self.p.stdout:
            ev = json.loads(line)
            ev["who"] = self.name
            self.events.put(ev)

    def stop(self):
        import subprocess

        if self.p.poll() is None:
            try:
                self.p.stdin.write("stop\n")
                self.p.stdin.flush()
            except BrokenPipeError:
                pass
        try:
            self.p.wait(30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(10)


def _leader_intervals(log):
    """[(start, end, who, fence)] of every leadership, in start order (end inf: open)."""
    intervals, open_ = [], {}
    for ev in sorted(log, key=lambda e: e["t"]):
        if ev["ev"] == "leader":
            open_[ev["who"]] = (ev["t"], ev["fence"])
        elif ev["ev"] == "loss" and ev["who"] in open_:
            start, fence = open_.pop(ev["who"])
            intervals.append((start, ev["t"], ev["who"], fence))
    intervals += [(s, math.inf, w, f) for w, (s, f) in open_.items()]
    return sorted(intervals)


@pytest.fixture(params=["server", "sqlite"])
def process_uri(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite://{tmp_path}/priority.db"
    return request.getfixturevalue("server_db")[1]


def test_processes_the_highest_priority_leads_never_two_at_once(process_uri):
    import queue
    import time
    import uuid

    key = "prio-" + uuid.uuid4().hex[:8]
    events = queue.Queue()
    log = []
    procs = []

    def wait(pred, timeout):
        """Until pred(log), reading the events as they come."""
        end = time.monotonic() + timeout
        while not pred(log):
            left = end - time.monotonic()
            assert left > 0, f"timed out; events: {log}"
            try:
                log.append(events.get(timeout=min(left, 1.0)))
            except queue.Empty:
                pass

    def seen(ev, who):
        return lambda log: any(e["ev"] == ev and e["who"] == who for e in log)

    try:
        for priority in (0, 1, 2):  # lowest first: each one joins a running leader
            procs.append(_PriorityProc(process_uri, key, priority, events))
            wait(seen("ready", f"p{priority}"), 60)
            if priority == 0:
                wait(seen("leader", "p0"), 60)
        wait(seen("leader", "p2"), 120)
    finally:
        for p in procs:
            p.stop()
        while True:
            try:
                log.append(events.get_nowait())
            except queue.Empty:
                break
    intervals = _leader_intervals(log)
    for (s1, e1, w1, _), (s2, _, w2, _) in zip(intervals, intervals[1:]):
        assert s2 >= e1, f"{w1} led until {e1}, {w2} from {s2}: two leaders"
    # (None: the term's renew deadline had passed when on_leader read it, on a loaded host.)
    fences = [f for *_, f in intervals if f is not None]
    assert fences == sorted(fences) and len(set(fences)) == len(fences), intervals
    assert intervals[0][2] == "p0" and "p2" in [w for _, _, w, _ in intervals]
