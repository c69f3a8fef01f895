"""close() of lockers and electors (issue #15).

close() releases what this instance holds (fenced), frees the native object and, for a
URI, the connections once no other locker or elector of the process uses that URI; a
pymongo Database or a mongoelector.Client stays the caller's. Idempotent; any other use
afterwards raises ClosedError (a RuntimeError). ``with locker:`` keeps acquiring and
releasing (the original's contract); contextlib.closing() closes.

Connections are counted as the kernel sees them, in a child process that has no other
client (pymongo's monitors would open sockets at any time in this one): its TCP sockets
connected to the test server's port (/proc/self/fd and /proc/self/net/tcp*).
"""

import contextlib
import gc
import json
import os
import subprocess
import sys
import threading
import time
import uuid

import mongoelector
import mongomock
import pymongo
import pytest
from mongoelector import Client, ClosedError, MongoLeaderElector, MongoLocker, _transport, lease

# ------------------------------------------------------------------ helpers --


def own_uri(uri):
    """The same server and database, as a URI no other test uses (its own client)."""
    return uri + ("&" if "?" in uri else "?") + "appname=close-" + uuid.uuid4().hex[:10]


def server_port(uri):
    hostport = uri.split("://", 1)[1].split("/", 1)[0].split(",")[0]
    return int(hostport.rsplit(":", 1)[1]) if ":" in hostport else 27017


def wait_until(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def uses_of(uri):
    """Native clients cached for ``uri`` (any database)."""
    return [k for k in _transport._shared_clients if k[0] == uri]


def assert_closed(obj, calls):
    for name, call in calls:
        with pytest.raises(ClosedError, match="is closed"):
            call()
            pytest.fail(f"{name} did not raise ClosedError")
    assert isinstance(ClosedError("x"), RuntimeError)
    assert isinstance(ClosedError("x"), mongoelector.MongoElectorError)
    assert obj.closed


def locker_calls(lock):
    return [
        ("acquire", lock.acquire),
        ("acquire(blocking=False)", lambda: lock.acquire(blocking=False)),
        ("release", lock.release),
        ("touch", lock.touch),
        ("locked", lock.locked),
        ("owned", lock.owned),
        ("get_current", lock.get_current),
        ("status", lambda: lock.status),
        ("fence", lambda: lock.fence),
        ("ts_expire", lambda: lock.ts_expire),
        ("with", lambda: lock.__enter__()),
    ]


# ------------------------------------------------------------------ lockers --


def test_close_is_idempotent_and_later_use_raises_closed_error(backend):
    lock = MongoLocker("closed-use", backend.db, ttl=30)
    assert lock.acquire()
    lock.close()
    lock.close()  # idempotent
    assert_closed(lock, locker_calls(lock))
    assert "closed=True" in repr(lock) and "owned=False" in repr(lock)
    assert lock.key == "closed-use" and lock.uuid  # plain attributes stay readable
    # The hold was released at close.
    assert MongoLocker("closed-use", backend.db, ttl=30).acquire(blocking=False)


def test_close_of_a_lock_held_by_another_leaves_it_alone(backend):
    holder = MongoLocker("not-mine", backend.db, ttl=30)
    assert holder.acquire()
    bystander = MongoLocker("not-mine", backend.db, ttl=30)
    assert bystander.locked() and not bystander.owned()
    bystander.close()
    assert holder.owned()
    doc = backend.raw["mongolocker"].find_one({"_id": "not-mine"})
    assert doc is not None and doc["uuid"] == holder.uuid
    holder.release()


def test_close_after_release_and_never_acquired(backend):
    a = MongoLocker("idle", backend.db, ttl=30)
    a.close()  # never acquired: nothing to release
    b = MongoLocker("idle", backend.db, ttl=30)
    with b:
        assert b.owned()
    b.close()
    assert not MongoLocker("idle", backend.db, ttl=30).locked()


def test_a_uri_client_is_forgotten_when_its_last_user_closes(server_db):
    _, base = server_db
    uri = own_uri(base)
    a = MongoLocker("users-a", uri, ttl=30)
    b = MongoLocker("users-b", uri, ttl=30)
    elector = MongoLeaderElector("users-e", uri, ttl=30)
    dropped = MongoLocker("users-gc", uri, ttl=30)
    assert a.acquire(blocking=False) and b.acquire(blocking=False)
    assert len(uses_of(uri)) == 1  # one native client for all of them
    del dropped  # garbage without close(): its use ends with it
    gc.collect()
    a.close()
    assert len(uses_of(uri)) == 1 and b.touch() is not None  # b still uses it
    b.close()
    elector.poll()
    assert elector.is_leader and len(uses_of(uri)) == 1
    elector.close()  # the last user
    assert uses_of(uri) == []
    c = MongoLocker("users-a", uri, ttl=30)  # a new locker connects afresh
    assert c.acquire(blocking=False) and len(uses_of(uri)) == 1
    c.close()
    assert uses_of(uri) == []


def test_a_failed_construction_does_not_keep_its_client():
    uri = "mongodb://127.0.0.1:1/db?serverSelectionTimeoutMS=200&appname=" + uuid.uuid4().hex
    with pytest.raises(mongoelector.StorageUnavailable):
        MongoLocker("k", uri, ttl=5)
    assert uses_of(uri) == []


def test_a_pymongo_database_stays_open(server_db):
    db, _ = server_db
    lock = MongoLocker("pymongo-close", db, ttl=60)
    assert lock.acquire()
    lock.close()
    assert MongoLocker("pymongo-close", db, ttl=60).acquire(blocking=False)  # released
    # The user's client is not closed (pymongo raises InvalidOperation once it is).
    assert db.command("ping")["ok"] == 1


def test_a_mongoelector_client_stays_open(server_db):
    _, base = server_db
    client = Client(own_uri(base))
    lock = MongoLocker("client-close", client, ttl=60)
    assert lock.acquire()
    lock.close()
    again = MongoLocker("client-close", client, ttl=60)
    assert again.acquire(blocking=False)  # released, and the client still serves
    again.release()


def test_contextlib_closing_around_with(server_db):
    db, base = server_db
    uri = own_uri(base)
    with contextlib.closing(MongoLocker("closing", uri, ttl=60)) as lock, lock:
        assert lock.owned()  # `with lock` acquired, as in the original
    assert lock.closed and uses_of(uri) == []
    assert MongoLocker("closing", db, ttl=60).acquire(blocking=False)

    # Closing inside the block: the release on leaving the block has nothing to do but
    # is a use after close, so it raises ClosedError (put closing() outermost).
    with pytest.raises(ClosedError):
        with MongoLocker("closing-2", db, ttl=60) as inner:
            inner.close()


def test_a_failed_release_is_raised_after_closing():
    from flaky import FlakyDatabase

    db = FlakyDatabase(mongomock.MongoClient().testdb)
    lock = MongoLocker("flaky", db, ttl=30)
    assert lock.acquire()
    boom = pymongo.errors.AutoReconnect("network is down")
    db.fail(boom)
    with pytest.raises(pymongo.errors.AutoReconnect) as info:
        lock.close()
    assert info.value is boom
    assert lock.closed  # closed all the same
    lock.close()  # and a second close does nothing
    with pytest.raises(ClosedError):
        lock.release()
    db.heal()
    # The hold stays on the server until its lease ends (fenced writers stay safe).
    other = MongoLocker("flaky", db, ttl=30)
    with pytest.raises(mongoelector.LockExists):
        other.acquire(blocking=False)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts fds through /proc")
def test_sqlite_uri_locker_closes_its_database_file(tmp_path):
    path = tmp_path / "locks.db"
    uri = "sqlite://" + str(path)

    def open_fds():
        n = 0
        for fd in os.listdir("/proc/self/fd"):
            try:
                if os.readlink(f"/proc/self/fd/{fd}").startswith(str(path)):
                    n += 1
            except OSError:
                pass
        return n

    lock = MongoLocker("file", uri, ttl=30)
    assert lock.acquire(blocking=False)
    assert open_fds() > 0
    lock.close()
    assert open_fds() == 0
    again = MongoLocker("file", uri, ttl=30)
    assert again.acquire(blocking=False)  # released at close
    again.close()


def test_lease_locker_close(server_db):
    _, base = server_db
    uri = own_uri(base)
    with lease(uri, "lease-close", ttl=10, timeout=5) as held:
        held.check()
    held.locker.close()  # the lease's locker owns the URI's client
    assert uses_of(uri) == []
    with pytest.raises(ClosedError):
        held.locker.owned()
    unused = mongoelector.Lease(uri, "lease-close-2", ttl=10)
    unused.locker.close()
    with pytest.raises(ClosedError):
        unused.acquire()
    assert uses_of(uri) == []


# ----------------------------------------------------------------- electors --


def test_elector_close_releases_leadership_and_is_final(server_db):
    db, base = server_db
    uri = own_uri(base)
    events = []
    elector = MongoLeaderElector(
        "close-e",
        uri,
        ttl=60,
        on_leader=lambda: events.append("leader"),
        on_leader_loss=lambda: events.append("loss"),
    )
    elector.start()
    assert wait_until(lambda: elector.is_leader and events == ["leader"], 10)
    with pytest.raises(RuntimeError, match="close the elector"):
        elector.mlock.close()  # the elector's lock is closed with the elector

    elector.close()
    elector.close()  # idempotent
    assert events == ["leader", "loss"]
    assert uses_of(uri) == []
    # Leadership was released: another node takes the 60 s lease at once.
    follower = MongoLeaderElector("close-e", db, ttl=60)
    follower.poll()
    assert follower.is_leader
    follower.close()

    assert_closed(
        elector,
        [
            ("start", elector.start),
            ("stop", elector.stop),
            ("poll", elector.poll),
            ("release", elector.release),
            ("running", lambda: elector.running),
            ("is_leader", lambda: elector.is_leader),
            ("fence", lambda: elector.fence),
            ("leader_exists", lambda: elector.leader_exists),
            ("node_status", lambda: elector.node_status),
            ("cluster_detail", lambda: elector.cluster_detail),
            ("poll_wait", lambda: elector.poll_wait),
            ("with", lambda: elector.__enter__()),
        ],
    )
    assert_closed(elector.mlock, locker_calls(elector.mlock))
    elector.mlock.close()  # closed with the elector: nothing to do
    assert "closed" in repr(elector)


def test_elector_closed_from_its_own_callback(server_db):
    db, base = server_db
    uri = own_uri(base)
    events = []

    def on_leader():
        events.append("leader")
        elector.close()  # from the loop thread: must neither deadlock nor crash
        events.append("closed")

    elector = MongoLeaderElector(
        "close-cb", uri, ttl=5, on_leader=on_leader, on_leader_loss=lambda: events.append("loss")
    )
    runner = threading.Thread(target=elector.start, kwargs={"blocking": True})
    runner.start()
    runner.join(15)
    assert not runner.is_alive(), "start(blocking=True) did not return after close()"
    assert events == ["leader", "loss", "closed"]
    assert elector.closed and uses_of(uri) == []
    assert MongoLocker("close-cb", db, ttl=5, dbcollection="elector.locks").acquire(
        blocking=False
    )  # leadership was released


def test_closed_elector_is_forgotten_by_the_lifecycle(backend):
    from mongoelector import _lifecycle

    elector = MongoLeaderElector("lifecycle", backend.db, ttl=5)
    elector.start()
    assert elector in _lifecycle._running
    elector.close()
    assert elector not in _lifecycle._running
    _lifecycle.sweep()  # must not trip over the closed elector
    MongoLeaderElector("lifecycle-2", backend.db, ttl=5).close()


# -------------------------------------------------------------- connections --

# Runs in a child process: its only connections to the server are the ones counted.
PROBE = r"""
import contextlib, json, os, sys, threading, time
from mongoelector import Client, MongoLeaderElector, MongoLocker

base, port = sys.argv[1], int(sys.argv[2])
serial = [0]


def own_uri():
    serial[0] += 1
    return base + ("&" if "?" in base else "?") + "appname=probe-%d-%d" % (os.getpid(), serial[0])


def sockets():
    # Inodes of this process's TCP sockets whose peer is the server's port.
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    found = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with open(table) as f:
            for row in f.read().splitlines()[1:]:
                fields = row.split()
                if int(fields[2].rsplit(":", 1)[1], 16) == port and fields[9] in inodes:
                    found.add(fields[9])
    return found


def timed_close(obj):
    t0 = time.monotonic()
    obj.close()
    return round((time.monotonic() - t0) * 1000, 1)


out = {}
checker = Client(own_uri())  # checks releases; connected before anything is counted
MongoLocker("warm-up", checker, ttl=60).locked()


def released(key, collection="mongolocker"):
    return MongoLocker(key, checker, ttl=60, dbcollection=collection).acquire(blocking=False)


# A locker holding its lock.
before = sockets()
lock = MongoLocker("probe-lock", own_uri(), ttl=60)
lock.acquire(blocking=False)
opened = sockets() - before
ms = timed_close(lock)
out["locker"] = dict(opened=len(opened), open_after_close=len(opened & sockets()),
                     close_ms=ms, released=released("probe-lock"))

# Three users of one URI: the connections stay until the last one is closed.
uri = own_uri()
before = sockets()
a, b = MongoLocker("probe-a", uri, ttl=60), MongoLocker("probe-b", uri, ttl=60)
e = MongoLeaderElector("probe-e", uri, ttl=60)
a.acquire(blocking=False)
b.acquire(blocking=False)
e.poll()
opened = sockets() - before
shared = dict(opened=len(opened))
a.close()
shared["open_after_a"] = len(opened & sockets())
shared["b_touched"] = b.touch() is not None
b.close()
shared["open_after_b"] = len(opened & sockets())
e.poll()
shared["e_leads"] = e.is_leader
shared["close_ms"] = timed_close(e)
shared["open_after_e"] = len(opened & sockets())
out["shared"] = shared

# contextlib.closing around `with lock:`.
before = sockets()
with contextlib.closing(MongoLocker("probe-closing", own_uri(), ttl=60)) as lk, lk:
    held = lk.owned()
    opened = sockets() - before
out["closing"] = dict(held=held, opened=len(opened), open_after=len(opened & sockets()),
                      released=released("probe-closing"))

# A running elector, leading.
events = []
before = sockets()
el = MongoLeaderElector("probe-elector", own_uri(), ttl=60,
                        on_leader=lambda: events.append("leader"),
                        on_leader_loss=lambda: events.append("loss"))
el.start()
deadline = time.monotonic() + 10
while not (el.is_leader and events) and time.monotonic() < deadline:
    time.sleep(0.02)
opened = sockets() - before
ms = timed_close(el)
out["elector"] = dict(events=events, opened=len(opened), open_after_close=len(opened & sockets()),
                      close_ms=ms, released=released("probe-elector", "elector.locks"))

# An elector closed from its own callback while start(blocking=True) waits.
events5, seen = [], {}
before = sockets()


def on_leader():
    events5.append("leader")
    seen["opened"] = sockets() - before
    el5.close()
    events5.append("closed")


el5 = MongoLeaderElector("probe-callback", own_uri(), ttl=60, on_leader=on_leader,
                         on_leader_loss=lambda: events5.append("loss"))
runner = threading.Thread(target=el5.start, kwargs={"blocking": True}, daemon=True)
runner.start()
runner.join(15)
opened = seen.get("opened", set())
t0 = time.monotonic()
while opened & sockets() and time.monotonic() - t0 < 5:  # a native reaper frees it
    time.sleep(0.01)
out["from_callback"] = dict(returned=not runner.is_alive(), events=events5, opened=len(opened),
                            open_after=len(opened & sockets()),
                            released=released("probe-callback", "elector.locks"))
print(json.dumps(out))
"""


@pytest.mark.skipif(
    not os.path.exists("/proc/self/net/tcp"), reason="counts sockets through Linux's /proc"
)
def test_connections_are_closed(server_db):
    """The kernel's view: the sockets a URI locker or elector opened are closed when
    close() returns (or, closed from a callback, once the loop has ended), and not while
    another user of the URI remains; what they held is free at once for another client."""
    _, base = server_db
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, base, str(server_port(base))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    print(json.dumps(out, indent=1))

    assert out["locker"]["opened"] >= 1
    assert out["locker"]["open_after_close"] == 0
    assert out["locker"]["released"]

    shared = out["shared"]
    assert shared["opened"] >= 1
    assert shared["open_after_a"] >= 1 and shared["b_touched"]
    assert shared["open_after_b"] >= 1 and shared["e_leads"]
    assert shared["open_after_e"] == 0

    assert out["closing"]["held"] and out["closing"]["opened"] >= 1
    assert out["closing"]["open_after"] == 0 and out["closing"]["released"]

    assert out["elector"]["events"] == ["leader", "loss"]
    assert out["elector"]["opened"] >= 1 and out["elector"]["open_after_close"] == 0
    assert out["elector"]["released"]

    cb = out["from_callback"]
    assert cb["returned"] and cb["events"] == ["leader", "loss", "closed"]
    assert cb["opened"] >= 1 and cb["open_after"] == 0 and cb["released"]
