"""A rolling upgrade: the ORIGINAL mongoelector 1.0.2 (from PyPI, in its own venv) and
ours on one lock in one collection of the real server. Never two holders; each sees
the other's lock."""

import signal
import time
import uuid

import pytest
from mongoelector import LockExists, MongoLocker
from procs import check_no_overlap, read_line, read_log, run, spawn

pytestmark = pytest.mark.slow


def new_key():
    return "m-" + uuid.uuid4().hex[:8]


def test_ours_sees_the_originals_lock(server_db, original_python):
    db, uri = server_db
    key, ttl = new_key(), 2
    orig = spawn("hold", "--uri", uri, "--key", key, "--ttl", ttl, python=original_python)
    try:
        _, _, held_at = read_line(orig)
        ours = MongoLocker(key, db, ttl=ttl)
        with pytest.raises(LockExists) as info:
            ours.acquire(blocking=False)
        assert str(info.value) == f"{key} owned by {ours.host} pid {orig.pid}"
        assert ours.locked() and not ours.owned()
        assert ours.get_current()["pid"] == orig.pid
        # The original node dies: its lock is taken over at expiry (the original
        # itself would wait for the TTL monitor).
        orig.send_signal(signal.SIGKILL)
        orig.wait(10)
        ours.acquire(step=0.05)
        assert time.monotonic() <= float(held_at) + ttl + 1.0
        assert ours.owned() and ours.fence is not None
    finally:
        if orig.poll() is None:
            orig.kill()


@pytest.mark.parametrize("transport", ["pymongo", "uri"])
def test_original_sees_our_lock(server_db, original_python, transport):
    db, uri = server_db
    key = new_key()
    ours = MongoLocker(key, uri if transport == "uri" else db, ttl=30)
    ours.acquire()
    r = run("try", "--uri", uri, "--key", key, "--ttl", 30, python=original_python)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"exists {key} owned by {ours.host} pid {ours.pid}"
    ours.release()  # deletes, as an original node would: the original can take it now
    r = run("try", "--uri", uri, "--key", key, "--ttl", 30, python=original_python)
    assert r.stdout.strip() == "acquired", r.stderr


def test_mark_released_keeps_the_original_out_safely(server_db, original_python):
    """With delete_on_release=False our release keeps the document (and its fence): an
    original node then cannot insert until the document is gone (MongoDB's TTL monitor
    deletes it, since ts_expire is the release time) -- less live, never unsafe."""
    db, uri = server_db
    key = new_key()
    ours = MongoLocker(key, db, ttl=30, delete_on_release=False)
    ours.acquire()
    ours.release()
    r = run("try", "--uri", uri, "--key", key, "--ttl", 30, python=original_python)
    assert r.stdout.startswith("exists "), r.stderr
    assert not ours.locked()
    assert MongoLocker(key, db).acquire(blocking=False)  # ours take it at once


def test_original_and_ours_contend_without_two_holders(server_db, original_python, tmp_path):
    _, uri = server_db
    key, log = new_key(), tmp_path / "holds.log"
    common = [
        "contend",
        "--uri",
        uri,
        "--key",
        key,
        "--log",
        log,
        "--ttl",
        10,
        "--rounds",
        15,
        "--hold",
        0.03,
        "--pause",
        0.02,
        "--step",
        0.02,
    ]
    procs = [
        spawn(*common, "--name", "orig", python=original_python),
        spawn(*common, "--name", "ours"),
        spawn(*common, "--name", "ours-uri", "--transport", "uri"),
    ]
    try:
        for p in procs:
            assert p.wait(180) == 0, p.stderr.read()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    rows = read_log(log)
    assert len(rows) == 45
    check_no_overlap(rows)
    assert {r[0].split(":")[0] for r in rows} == {"orig", "ours", "ours-uri"}
