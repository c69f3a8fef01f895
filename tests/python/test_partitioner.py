"""mongoelector.Partitioner: on the fake clock kit (moves, the order of on_revoked and
on_assigned, bad input, the hash every binding must reproduce) and with REAL PROCESSES
on the test server and on a SQLite file (3 -> 5 -> 2 members and a kill -9 of an owner:
never two processes believing they own one partition, every partition owned once the
membership settles, a join moves only the joiners' share)."""

import json
import logging
import queue
import subprocess
import sys
import threading
import time
import uuid

import mongoelector
import pytest
from mongoelector import MongoLeaderElector, Partitioner, testing

TTL = 6
N = 16

M64 = (1 << 64) - 1


def _key(u):  # the rendezvous hash, written again (core/partition/rendezvous.h)
    h = 0xCBF29CE484222325
    for b in u.encode():
        h = ((h ^ b) * 0x100000001B3) & M64
    return h


def _mix(z):
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & M64
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def _score(u, p):
    return _mix(_key(u) ^ _mix((p + 0x9E3779B97F4A7C15) & M64))


def _owner(members, p):
    return min(members, key=lambda u: (-_score(u, p), u)) if members else None


def test_the_hash_is_the_documented_one():
    from mongoelector import _native

    assert _native.rendezvous_score("a", 0) == 0x223510DE0DD4615F == _score("a", 0)
    assert _native.rendezvous_score("b", 7) == 0x9517775F2632C4F3 == _score("b", 7)
    members = [str(uuid.UUID(int=i)) for i in range(1, 6)]
    for p in range(200):
        assert _native.rendezvous_owner(members, p) == _owner(members, p)
    assert _native.rendezvous_owner([], 0) is None


class Recorder:
    """Every callback of every member, in the order they ran (one sequence, one lock)."""

    def __init__(self, clock=None):
        self.clock = clock
        self.lock = threading.Lock()
        self.events = []

    def member(self, name, db, *, partitions=N, start=True, **kw):
        def assigned(p, token):
            self._add(name, "assigned", p, token)

        def revoked(p):
            self._add(name, "revoked", p, None)

        part = Partitioner(
            "jobs",
            db,
            partitions=partitions,
            ttl=TTL,
            on_assigned=assigned,
            on_revoked=revoked,
            **kw,
        )
        part.name = name
        if start:
            part.start()
        return part

    def _add(self, name, what, p, token):
        with self.lock:
            self.events.append((name, what, p, token))

    def check_order(self):
        """Per partition: assigned/revoked alternate per owner, a new owner is assigned
        only after the previous owner's on_revoked returned, tokens increase."""
        holder, last = {}, {}
        with self.lock:
            for name, what, p, token in self.events:
                if what == "assigned":
                    assert p not in holder, f"{name} assigned {p} before {holder.get(p)} revoked"
                    assert token > last.get(p, 0)
                    holder[p], last[p] = name, token
                else:
                    assert holder.pop(p, None) == name, f"{name} revoked {p} it was not told"


def _settled(members):
    uuids = sorted(m.uuid for m in members)
    for p in range(N):
        owners = [m for m in members if m.token(p) is not None]
        if len(owners) != 1 or owners[0].uuid != _owner(uuids, p):
            return False
    return True


def _no_two_believers(members):
    for p in range(N):
        assert sum(m.token(p) is not None for m in members) <= 1, f"partition {p}"


def _run(clock, seconds, members, step=0.25):
    for _ in range(int(seconds / step)):
        clock.advance(step)
        _no_two_believers(members)


def test_members_join_and_leave_moving_only_their_share_in_order():
    clock = testing.FakeClock()
    db = clock.memory_uri()
    rec = Recorder(clock)
    a = rec.member("a", db)
    _run(clock, TTL, [a])
    assert len(a.owned()) == N and _settled([a])
    b, c = rec.member("b", db), rec.member("c", db)
    _run(clock, TTL + 2, [a, b, c])
    assert _settled([a, b, c])
    before = {p: m.name for m in (a, b, c) for p in m.owned()}
    d = rec.member("d", db)
    _run(clock, TTL + 2, [a, b, c, d])
    assert _settled([a, b, c, d])
    after = {p: m.name for m in (a, b, c, d) for p in m.owned()}
    moved = {p for p in range(N) if before[p] != after[p]}
    assert moved == set(d.owned()), "only the joiner's share moves"
    assert 1 <= len(moved) <= N // 2
    assert a.assignment() == {p: m.uuid for m in (a, b, c, d) for p in m.owned()}
    assert a.members() == sorted(m.uuid for m in (a, b, c, d))
    status = a.status()
    assert status["settled"] and status["partitions"] == N
    assert sum(m["owned"] for m in status["members"]) == N
    assert {o["owner"] for o in status["owners"]} == {m.uuid for m in (a, b, c, d)}
    b.stop()  # a graceful leave: its partitions go to the others
    assert b.owned() == {}
    _run(clock, TTL + 2, [a, c, d])
    assert _settled([a, c, d])
    rec.check_order()
    for m in (a, b, c, d):
        m.close()
    with pytest.raises(mongoelector.ClosedError):
        a.owned()


def test_a_cut_off_member_is_revoked_before_its_lease_can_expire():
    clock = testing.FakeClock()
    db = clock.memory_uri()
    rec = Recorder(clock)
    a, b = rec.member("a", db), rec.member("b", db)
    _run(clock, TTL + 2, [a, b])
    assert _settled([a, b])
    had = a.owned()
    with testing.unavailable(db):  # both cut off: each steps down by its renew deadline
        _run(clock, TTL, [a, b])
        assert a.owned() == {} and b.owned() == {}
    _run(clock, 2 * TTL, [a, b])
    assert _settled([a, b])
    for p, token in had.items():
        assert a.token(p) > token, "taken back with a new, greater token"
    rec.check_order()
    a.close()
    b.close()


def test_bad_input_is_refused_before_any_io():
    db = testing.memory_uri()
    for bad in (0, -1, 100001):
        with pytest.raises(ValueError, match="partitions must be"):
            Partitioner("g", db, partitions=bad)
    for bad in (True, 2.0, "4", None):
        with pytest.raises(TypeError, match="partitions must be an int"):
            Partitioner("g", db, partitions=bad)
    with pytest.raises(ValueError):
        Partitioner("", db, partitions=4)
    with pytest.raises(TypeError):
        Partitioner(3, db, partitions=4)
    with pytest.raises(ValueError, match="poll"):
        Partitioner("g", db, partitions=4, ttl=10, poll=6)
    with pytest.raises(ValueError, match="ttl"):
        Partitioner("g", db, partitions=4, ttl=0)
    with pytest.raises(TypeError, match="callable"):
        Partitioner("g", db, partitions=4, on_assigned=5)
    with pytest.raises(ValueError, match="two collections"):
        Partitioner("g", db, partitions=4, collection="x", members_collection="x")
    with pytest.raises(TypeError):
        Partitioner("g", object(), partitions=4)


def test_another_kind_of_document_under_the_group_is_refused_and_kept():
    clock = testing.FakeClock()
    db = clock.memory_uri()
    # An elector of key "jobs" reports into the collection given as the members'.
    el = MongoLeaderElector("jobs", db, ttl=TTL)
    el.start()
    clock.advance(1)
    part = Partitioner(
        "jobs", db, partitions=4, ttl=TTL, members_collection="elector.leader_status"
    )
    with pytest.raises(ValueError, match="another kind of document"):
        part.start()
    assert not part.running
    assert el.cluster_detail["member_detail"][0]["key"] == "jobs"  # untouched
    part.close()
    el.close()


def test_a_member_with_another_partition_count_is_refused():
    clock = testing.FakeClock()
    db = clock.memory_uri()
    a = Partitioner("jobs", db, partitions=8, ttl=TTL)
    a.start()
    clock.advance(1)
    b = Partitioner("jobs", db, partitions=9, ttl=TTL)
    with pytest.raises(ValueError, match="runs with 8 partitions, not 9"):
        b.start()
    clock.advance(TTL)
    assert len(a.owned()) == 8
    a.close()
    b.close()


def test_callback_errors_are_logged_and_the_member_goes_on(caplog):
    clock = testing.FakeClock()
    db = clock.memory_uri()

    def boom(p, token):
        raise RuntimeError("boom %d" % p)

    with caplog.at_level(logging.ERROR, logger="mongoelector"):
        with Partitioner("jobs", db, partitions=3, ttl=TTL, on_assigned=boom) as a:
            clock.advance(TTL)
            assert len(a.owned()) == 3
    assert any("on_assigned" in r.getMessage() for r in caplog.records)
    a.close()


def test_fenced_writes_follow_the_partition(tmp_path):
    pytest.importorskip("mongomock")
    import mongomock

    clock = testing.FakeClock()
    db = clock.memory_uri()
    data = mongomock.MongoClient().db.data
    a = Partitioner("jobs", db, partitions=2, ttl=TTL)
    a.start()
    clock.advance(TTL)
    fenced = mongoelector.FencedCollection(data, lambda: a.token(0))
    fenced.update_one({"_id": "p0"}, {"$set": {"v": 1}}, upsert=True)
    a.stop()
    with pytest.raises((TypeError, ValueError, mongoelector.StaleFence)):
        fenced.update_one({"_id": "p0"}, {"$set": {"v": 2}}, upsert=True)
    a.close()


def test_partition_status_without_joining():
    clock = testing.FakeClock()
    db = clock.memory_uri()
    with Partitioner("jobs", db, partitions=5, ttl=TTL) as a:
        clock.advance(TTL)
        st = mongoelector.partition_status("jobs", db)
        assert st["partitions"] == 5 and st["settled"]
        assert [o["owner"] for o in st["owners"]] == [a.uuid] * 5
        assert all(o["token"] == a.token(o["partition"]) for o in st["owners"])
    a.close()


def test_asyncio_callbacks_run_on_the_loop_and_are_awaited():
    import asyncio

    from mongoelector.aio import AsyncPartitioner

    async def main():
        clock = testing.FakeClock()
        db = clock.memory_uri()
        loop_thread = threading.get_ident()
        events = []

        async def assigned(p, token):
            assert threading.get_ident() == loop_thread
            await asyncio.sleep(0)
            events.append(("assigned", p))

        async def revoked(p):
            await asyncio.sleep(0)  # awaited to the end before the release
            events.append(("revoked", p))

        async with AsyncPartitioner(
            "jobs", db, partitions=4, ttl=TTL, on_assigned=assigned, on_revoked=revoked
        ) as a:
            await asyncio.to_thread(clock.advance, TTL)
            assert len(a.owned()) == 4
            assert (await a.status())["settled"]
        assert a.owned() == {}
        assert sorted(events) == sorted(
            [("assigned", p) for p in range(4)] + [("revoked", p) for p in range(4)]
        )
        await a.close()

    asyncio.run(main())


# ---- real processes ---------------------------------------------------------------------

PTTL = 4.0
PN = 16

CHILD = r"""
import json, sys, threading, time, mongoelector
uri, group, n, ttl = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
out = threading.Lock()
def now():
    return time.clock_gettime(time.CLOCK_MONOTONIC)  # one clock for every process
def emit(ev, **kw):
    kw.setdefault("t", now())
    kw["ev"] = ev
    with out:
        sys.stdout.write(json.dumps(kw) + "\n"); sys.stdout.flush()
part = None
def revoked(p):
    lost = part.token(p) is None  # a graceful revoke still holds the lease meanwhile
    time.sleep(0.05)
    emit("revoked", p=p, lost=lost)
part = mongoelector.Partitioner(group, uri, partitions=n, ttl=ttl,
    on_assigned=lambda p, token: emit("assigned", p=p, token=token), on_revoked=revoked)
part.start()
emit("ready", uuid=part.uuid)
def watch():  # beliefs, sampled: held at some instant in [t0, t1] of each sample
    while True:
        t0 = now()
        owned = part.owned()
        emit("owned", t0=t0, t1=now(), owned={str(p): tok for p, tok in owned.items()})
        time.sleep(0.02)
threading.Thread(target=watch, daemon=True).start()
for line in sys.stdin:
    if line.strip() == "stop":
        part.stop(); emit("stopped"); break
part.close()
"""


class Member:
    def __init__(self, uri, group, events, name):
        self.name = name
        self.p = subprocess.Popen(
            [sys.executable, "-c", CHILD, uri, group, str(PN), str(PTTL)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.uuid = None
        self.ready = threading.Event()
        self.events = events
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            ev = json.loads(line)
            ev["who"] = self.name
            if ev["ev"] == "ready":
                self.uuid = ev["uuid"]
                self.ready.set()
            self.events.put(ev)

    def send(self, cmd):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()


class Group:
    def __init__(self, uri):
        self.uri = uri
        self.group = "p-" + uuid.uuid4().hex[:8]
        self.events = queue.Queue()
        self.log = []
        self.members = {}
        self.killed = set()

    def add(self, *names):
        for n in names:
            self.members[n] = Member(self.uri, self.group, self.events, n)
        for n in names:
            assert self.members[n].ready.wait(60), f"{n} did not start"

    def live(self):
        return {n: m for n, m in self.members.items() if m.p.poll() is None}

    def wait_settled(self, names, timeout):
        """Until the documents show every partition held by the member rendezvous picks
        among `names`; returns {partition: owner name}."""
        uuids = sorted(self.members[n].uuid for n in names)
        by_uuid = {self.members[n].uuid: n for n in names}
        end = time.monotonic() + timeout
        st = None
        while time.monotonic() < end:
            st = mongoelector.partition_status(self.group, self.uri, partitions=PN)
            owners = [o["owner"] for o in st["owners"]]
            if all(owners[p] == _owner(uuids, p) for p in range(PN)):
                return {p: by_uuid[owners[p]] for p in range(PN)}
            time.sleep(0.2)
        raise AssertionError(f"not settled on {names} after {timeout} s: {st}")

    def drain(self):
        while True:
            try:
                self.log.append(self.events.get_nowait())
            except queue.Empty:
                return

    def close(self):
        for m in self.live().values():
            try:
                m.send("stop")
            except BrokenPipeError:
                pass
        for m in self.members.values():
            try:
                m.p.wait(30)
            except subprocess.TimeoutExpired:
                m.p.kill()
        time.sleep(0.1)
        self.drain()

    def check(self):
        """Beliefs of one partition never overlap between processes: one hold (member,
        partition, token) was believed throughout [t1 of its first sample, t0 of its
        last], an interval inside the true one. On a graceful move the old owner's
        on_revoked returned before the new owner's on_assigned ran."""
        spans = {}  # (who, p, token) -> [start, end]
        for ev in self.log:
            if ev["ev"] != "owned":
                continue
            for p, token in ev["owned"].items():
                k = (ev["who"], int(p), token)
                if k in spans:
                    spans[k][0] = min(spans[k][0], ev["t1"])
                    spans[k][1] = max(spans[k][1], ev["t0"])
                else:
                    spans[k] = [ev["t1"], ev["t0"]]
        by_p = {}
        for (who, p, _token), (a, b) in spans.items():
            if a < b:  # seen at least twice: surely believed in between
                by_p.setdefault(p, []).append((a, b, who))
        assert sorted(by_p) == list(range(PN)), "some partition was never seen owned"
        assert {"a", "b"} <= {w for ivs in by_p.values() for _, _, w in ivs}
        for p, ivs in by_p.items():
            ivs.sort()
            for i, (a1, b1, w1) in enumerate(ivs):
                for a2, b2, w2 in ivs[i + 1 :]:
                    if a2 >= b1:
                        break
                    assert w1 == w2, f"partition {p}: {w1} [{a1}, {b1}] and {w2} [{a2}, {b2}]"
        holder = {}
        events = (e for e in self.log if e["ev"] in ("assigned", "revoked"))
        for ev in sorted(events, key=lambda e: e["t"]):
            p = ev["p"]
            if ev["ev"] == "assigned":
                prev = holder.get(p)
                assert prev is None or prev[0] in self.killed or prev[1], (
                    f"{ev['who']} assigned {p} before {prev}'s on_revoked returned"
                )
                holder[p] = (ev["who"], False)
            elif holder.get(p, ("",))[0] == ev["who"]:
                if ev["lost"]:
                    holder[p] = (ev["who"], True)  # a loss: no order is promised
                else:
                    del holder[p]
        self.assigned = [e for e in self.log if e["ev"] == "assigned"]


def _scenario(uri):
    g = Group(uri)
    try:
        g.add("a", "b", "c")
        three = g.wait_settled(["a", "b", "c"], timeout=8 * PTTL)
        g.add("d", "e")
        five = g.wait_settled(["a", "b", "c", "d", "e"], timeout=8 * PTTL)
        moved = {p for p in range(PN) if three[p] != five[p]}
        assert all(five[p] in ("d", "e") for p in moved), (
            "a join moved a partition between old members"
        )
        assert moved == {p for p in range(PN) if five[p] in ("d", "e")}
        # 5 -> 2: two leave gracefully, an owner dies (kill -9).
        victim = next(n for n in ("c", "d", "e") if n in five.values())
        for n in ("c", "d", "e"):
            if n != victim:
                g.members[n].send("stop")
        g.killed.add(victim)
        g.members[victim].p.kill()
        g.members[victim].p.wait(10)
        g.wait_settled(["a", "b"], timeout=8 * PTTL)
    finally:
        g.close()
    g.check()


@pytest.mark.slow
def test_processes_on_the_server(server_db):
    _scenario(server_db[1])


@pytest.mark.slow
def test_processes_on_a_sqlite_file(tmp_path):
    _scenario("sqlite:///" + str(tmp_path / "partitions.db"))
