"""Graceful handover with real processes on a real server: resign() and transfer()
between elector processes, leaderless time measured on CLOCK_MONOTONIC (one clock for
every process of the host), and never two leaders at once (each process reports its
on_leader / on_leader_loss with the time; the intervals must not overlap)."""

import json
import queue
import subprocess
import sys
import threading
import time
import uuid

import pytest

TTL = 4.0

CHILD = r"""
import json, sys, time, mongoelector
uri, key, ttl = sys.argv[1], sys.argv[2], float(sys.argv[3])
def emit(ev, **kw):
    kw.update(ev=ev, t=time.clock_gettime(time.CLOCK_MONOTONIC))
    sys.stdout.write(json.dumps(kw) + "\n"); sys.stdout.flush()
el = mongoelector.MongoLeaderElector(key, uri, ttl=ttl,
                                     on_leader=lambda: emit("leader"),
                                     on_leader_loss=lambda: emit("loss"))
el.start()
emit("ready", uuid=el.node_status["uuid"])
for line in sys.stdin:
    cmd = line.split()
    try:
        if cmd[0] == "resign":
            emit("resigned", was=el.resign(float(cmd[1])))
        elif cmd[0] == "transfer":
            el.transfer(cmd[1]); emit("transferred")
        elif cmd[0] == "leader?":
            emit("is_leader", value=el.is_leader)
        elif cmd[0] == "stop":
            el.stop(); break
    except Exception as ex:
        emit("error", kind=type(ex).__name__, what=str(ex))
el.close()
"""


class Proc:
    def __init__(self, uri, key, events, name):
        self.name = name
        self.p = subprocess.Popen(
            [sys.executable, "-c", CHILD, uri, key, str(TTL)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.uuid = None
        self.events = events
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            ev = json.loads(line)
            ev["who"] = self.name
            if ev["ev"] == "ready":
                self.uuid = ev["uuid"]
            self.events.put(ev)

    def send(self, cmd):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()


class Cluster:
    def __init__(self, uri, n):
        self.key = "h-" + uuid.uuid4().hex[:8]
        self.events = queue.Queue()
        self.log = []  # every event, in arrival order
        self.procs = {n: Proc(uri, self.key, self.events, n) for n in "abc"[:n]}

    def wait(self, pred, timeout=4 * TTL):
        end = time.monotonic() + timeout
        while True:
            ev = self.events.get(timeout=max(0.01, end - time.monotonic()))
            self.log.append(ev)
            if pred(ev):
                return ev

    def start(self):
        ready, leader = set(), None
        while len(ready) < len(self.procs) or leader is None:
            ev = self.wait(lambda e: e["ev"] in ("ready", "leader"))
            if ev["ev"] == "ready":
                ready.add(ev["who"])
            else:
                leader = ev["who"]
        time.sleep(1.5)  # every member's first status report is in
        return leader

    def close(self):
        for p in self.procs.values():
            if p.p.poll() is None:
                try:
                    p.send("stop")
                except BrokenPipeError:
                    pass
        for p in self.procs.values():
            try:
                p.p.wait(10)
            except subprocess.TimeoutExpired:
                p.p.kill()
        # Drain what is left, then check that leaderships never overlapped.
        while True:
            try:
                self.log.append(self.events.get_nowait())
            except queue.Empty:
                break
        check_no_overlap(self.log)


def check_no_overlap(log):
    """Leadership intervals [leader, loss) of different processes never overlap."""
    intervals, open_ = [], {}
    for ev in sorted(log, key=lambda e: e["t"]):
        if ev["ev"] == "leader":
            open_[ev["who"]] = ev["t"]
        elif ev["ev"] == "loss" and ev["who"] in open_:
            intervals.append((open_.pop(ev["who"]), ev["t"], ev["who"]))
    intervals += [(s, float("inf"), w) for w, s in open_.items()]
    intervals.sort()
    for (s1, e1, w1), (s2, e2, w2) in zip(intervals, intervals[1:]):
        assert s2 >= e1, f"{w1} led until {e1}, {w2} from {s2}"


@pytest.fixture
def cluster(server_db):
    made = []

    def make(n=3):
        c = Cluster(server_db[1], n)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def test_resign_hands_over_within_a_peek_and_holds_off(cluster):
    c = cluster(3)
    old = c.start()
    c.procs[old].send(f"resign {3 * TTL}")
    loss = c.wait(lambda e: e["who"] == old and e["ev"] == "loss")
    new = c.wait(lambda e: e["ev"] == "leader")
    assert new["who"] != old
    gap = new["t"] - loss["t"]
    assert gap < TTL / 4 + 1.0, f"leaderless for {gap:.3f} s"
    # The resigned node stays a member but does not lead during its hold-off.
    resigned = [e for e in c.log if e["ev"] == "resigned"]
    resigned = resigned[0] if resigned else c.wait(lambda e: e["ev"] == "resigned")
    assert resigned["was"] is True
    c.procs[old].send("leader?")
    assert c.wait(lambda e: e["ev"] == "is_leader")["value"] is False


def test_transfer_to_a_named_member_takes_about_a_peek(cluster):
    c = cluster(3)
    old = c.start()
    target = next(n for n in c.procs if n != old)
    c.procs[old].send("transfer " + c.procs[target].uuid)
    loss = c.wait(lambda e: e["who"] == old and e["ev"] == "loss")
    new = c.wait(lambda e: e["ev"] in ("leader", "error"))
    assert new["ev"] == "leader", new
    assert new["who"] == target
    gap = new["t"] - loss["t"]
    assert gap < TTL / 4 + 1.0, f"leaderless for {gap:.3f} s"
    # And back again: tokens and the no-overlap check cover a chain of hand-overs.
    c.procs[target].send("transfer " + c.procs[old].uuid)
    new = c.wait(lambda e: e["ev"] in ("leader", "error") and e["who"] != target)
    assert new["ev"] == "leader" and new["who"] == old


def test_transfer_is_refused_by_a_follower_and_for_a_stranger(cluster):
    c = cluster(2)
    leader = c.start()
    follower = next(n for n in c.procs if n != leader)
    c.procs[follower].send("transfer " + c.procs[leader].uuid)
    err = c.wait(lambda e: e["ev"] == "error")
    assert err["kind"] == "ValueError" and "not the leader" in err["what"]
    c.procs[leader].send("transfer nobody-" + uuid.uuid4().hex)
    err = c.wait(lambda e: e["ev"] == "error")
    assert err["kind"] == "ValueError" and "not a member" in err["what"]
    c.procs[leader].send("leader?")
    assert c.wait(lambda e: e["ev"] == "is_leader")["value"] is True


def test_transfer_to_a_killed_member_costs_one_ttl(cluster):
    c = cluster(3)
    old = c.start()
    target = next(n for n in c.procs if n != old)
    c.procs[target].p.kill()
    c.procs[target].p.wait(10)
    c.procs[old].send("transfer " + c.procs[target].uuid)
    loss = c.wait(lambda e: e["who"] == old and e["ev"] == "loss")
    new = c.wait(lambda e: e["ev"] == "leader")
    gap = new["t"] - loss["t"]
    assert TTL * 0.9 <= gap < TTL + TTL / 4 + 1.5, f"leaderless for {gap:.3f} s"
