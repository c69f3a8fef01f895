"""Several processes on the real server: mutual exclusion, takeover of a killed holder,
elector failover, callback order, Ctrl-C and interpreter exit."""

import signal
import subprocess
import sys
import time
import uuid

import pytest
from procs import check_no_overlap, read_line, read_log, run, spawn, wait_log

pytestmark = pytest.mark.slow


def new_key():
    return "p-" + uuid.uuid4().hex[:8]


def finish(*procs):
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(10)


def test_two_processes_never_both_hold(server_db, tmp_path):
    _, uri = server_db
    key, log = new_key(), tmp_path / "holds.log"
    # One process through pymongo, one through the native URI transport.
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
            name,
            "--transport",
            transport,
            "--rounds",
            25,
            "--ttl",
            5,
        )
        for name, transport in (("a", "pymongo"), ("b", "uri"))
    ]
    try:
        for p in procs:
            assert p.wait(120) == 0, p.stderr.read()
    finally:
        finish(*procs)
    rows = read_log(log)
    assert len(rows) == 50
    check_no_overlap(rows)
    assert {r[0].split(":")[0] for r in rows} == {"a", "b"}


@pytest.mark.parametrize("transport", ["pymongo", "uri"])
def test_killed_holder_is_taken_over_within_ttl_plus_1s(server_db, transport):
    from mongoelector import MongoLocker

    db, uri = server_db
    key, ttl = new_key(), 2
    holder = spawn("hold", "--uri", uri, "--key", key, "--ttl", ttl, "--transport", transport)
    try:
        _, before, after = read_line(holder)
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        lock = MongoLocker(key, db, ttl=ttl)
        with pytest.raises(Exception):  # noqa: B017 (any refusal: the dead holder's lock)
            lock.acquire(blocking=False)  # still held by the dead process
        lock.acquire(step=0.05)
        took = time.monotonic()
    finally:
        finish(holder)
    assert took >= float(before) + ttl - 0.1, "taken over before the lease expired"
    assert took <= float(after) + ttl + 1.0, f"takeover {took - float(after):.2f}s after the hold"


@pytest.mark.parametrize("transport", ["pymongo", "uri"])
def test_elector_fails_over_after_leader_is_killed(server_db, tmp_path, transport):
    _, uri = server_db
    key, ttl, log = new_key(), 2, tmp_path / "elect.log"
    a = spawn(
        "elect",
        "--uri",
        uri,
        "--key",
        key,
        "--ttl",
        ttl,
        "--log",
        log,
        "--name",
        "a",
        "--transport",
        transport,
    )
    b = None
    try:
        wait_log(log, lambda rows: ["a", "leader"] in [r[:2] for r in rows])
        b = spawn(
            "elect",
            "--uri",
            uri,
            "--key",
            key,
            "--ttl",
            ttl,
            "--log",
            log,
            "--name",
            "b",
            "--transport",
            transport,
        )
        wait_log(log, lambda rows: ["b", "started"] in [r[:2] for r in rows])
        time.sleep(1.5)  # b is a settled follower
        assert ["b", "leader"] not in [r[:2] for r in read_log(log)]
        a.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        rows = wait_log(log, lambda rows: ["b", "leader"] in [r[:2] for r in rows], timeout=10)
    finally:
        finish(a, *(p for p in (b,) if p))
    became = float(next(r[2] for r in rows if r[:2] == ["b", "leader"]))
    assert became - killed <= ttl + 1.0, f"failover took {became - killed:.2f}s"


def test_callbacks_fire_in_order_on_graceful_handover(server_db, tmp_path):
    _, uri = server_db
    key, log = new_key(), tmp_path / "elect.log"
    a = spawn("elect", "--uri", uri, "--key", key, "--ttl", 2, "--log", log, "--name", "a")
    b = None
    try:
        wait_log(log, lambda rows: ["a", "leader"] in [r[:2] for r in rows])
        b = spawn(
            "elect",
            "--uri",
            uri,
            "--key",
            key,
            "--ttl",
            2,
            "--log",
            log,
            "--name",
            "b",
            "--transport",
            "uri",
        )
        wait_log(log, lambda rows: ["b", "started"] in [r[:2] for r in rows])
        time.sleep(0.5)
        a.send_signal(signal.SIGTERM)  # stop(): releases, on_leader_loss
        rows = wait_log(log, lambda rows: ["b", "leader"] in [r[:2] for r in rows], timeout=10)
        b.send_signal(signal.SIGTERM)
        rows = wait_log(log, lambda rows: ["b", "stopped"] in [r[:2] for r in rows])
        assert a.wait(10) == 0 and b.wait(10) == 0
    finally:
        finish(a, *(p for p in (b,) if p))
    events = [(r[0], r[1]) for r in sorted(rows, key=lambda r: float(r[2])) if r[1] != "started"]
    assert events == [
        ("a", "leader"),
        ("a", "loss"),
        ("a", "stopped"),
        ("b", "leader"),
        ("b", "loss"),
        ("b", "stopped"),
    ]


@pytest.mark.parametrize("native", [False, True], ids=["python-loop", "native-acquire"])
def test_ctrl_c_interrupts_a_blocking_acquire(server_db, native):
    from mongoelector import MongoLocker

    db, uri = server_db
    key = new_key()
    MongoLocker(key, db, ttl=60).acquire()
    args = ["block-acquire", "--uri", uri, "--key", key, "--ttl", 60, "--transport", "uri"]
    if native:
        args.append("--native")
    p = spawn(*args)
    try:
        assert read_line(p) == ["waiting"]
        time.sleep(0.5)
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        word, when = read_line(p, timeout=5)
        assert word == "interrupted" and float(when) - sent < 1.0
        assert p.wait(10) == 0
    finally:
        finish(p)


@pytest.mark.parametrize(
    "transport,exit_how,slow",
    [
        ("pymongo", "return", False),
        ("uri", "return", False),
        ("uri", "sys.exit", False),
        ("pymongo", "drop", False),
        ("pymongo", "return", True),
        ("mongomock", "return", False),
    ],
)
def test_interpreter_exit_with_a_running_elector(request, transport, exit_how, slow):
    """Neither hangs nor crashes; leadership is released on the way out."""
    key = new_key()
    args = ["exit-running", "--key", key, "--ttl", 2, "--transport", transport, "--exit", exit_how]
    db = None
    if transport != "mongomock":
        db, uri = request.getfixturevalue("server_db")
        args += ["--uri", uri]
    if slow:
        args.append("--slow-callback")
    t0 = time.monotonic()
    r = run(*args, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["leader"]
    assert "Fatal Python error" not in r.stderr and "terminate" not in r.stderr, r.stderr
    assert time.monotonic() - t0 < 15
    if db is not None:
        # Released on the way out: deleted (delete_on_release, the default) or marked free.
        doc = db["elector.locks"].find_one({"_id": key})
        assert doc is None or doc["locked"] is False, doc


FORK_SCRIPT = r"""
import os, sys, time, mongomock
from mongoelector import MongoLeaderElector, MongoLocker
db = mongomock.MongoClient().db
e = MongoLeaderElector("k", db, ttl=1)
e.start()
while not e.is_leader:
    time.sleep(0.01)
pid = os.fork()
if pid == 0:
    try:
        e.is_leader
    except RuntimeError as ex:
        print("child-inherited", "fork()" in str(ex), flush=True)
    e2 = MongoLeaderElector("k2", db, ttl=1)
    e2.start()
    while not e2.is_leader:
        time.sleep(0.01)
    print("child-leads", flush=True)
    sys.exit(0)  # exits with e2 running: stopped at exit
_, status = os.waitpid(pid, 0)
print("child-status", status, flush=True)
print("parent-leads", e.is_leader, flush=True)
"""


def test_fork_while_an_elector_runs():
    """A child forked from a process with a running elector can exit and run its own
    electors; the parent's keeps leading."""
    r = subprocess.run(
        [sys.executable, "-c", FORK_SCRIPT], capture_output=True, text=True, timeout=30
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:4] == [
        "child-inherited True",
        "child-leads",
        "child-status 0",
        "parent-leads True",
    ]


UAF_SCRIPT = r"""
import threading, time, mongomock
from mongoelector import MongoLeaderElector, _lifecycle
db = mongomock.MongoClient().db
done = threading.Event()
for i in range(10):
    holder = {}
    def on_leader():
        e = holder.pop("e")
        e.stop()
        with _lifecycle._lock:  # as if no other reference were left anywhere
            _lifecycle._running.discard(e)
        del e  # the last reference goes away on the elector's own thread
        done.set()
    holder["e"] = MongoLeaderElector("k%d" % i, db, ttl=1, on_leader=on_leader)
    holder["e"].start()
    assert done.wait(5)
    done.clear()
print("ok", flush=True)
"""


def test_last_reference_dropped_inside_its_own_callback():
    """The native elector cannot be freed by its own loop thread (it is still running
    on it): a reaper thread stops and frees it instead."""
    r = subprocess.run(
        [sys.executable, "-c", UAF_SCRIPT], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
