"""Keep-alive leases: ``with mongoelector.lease(db, key, ttl=..., timeout=...) as lease``.

On mongomock (API behaviour), a pymongo Database and the native URI transport on the
real server, and on the embedded SQLite backend; a frozen storage makes ``lost`` fire
before the lease could expire.
"""

import datetime
import os
import tempfile
import threading
import time
import uuid

import mongoelector
import mongomock
import pytest
from mongoelector import AcquireTimeout, LeaseLost, LockExists, MongoLocker, testing


def _key():
    return "lease-" + uuid.uuid4().hex[:8]


def test_exported():
    assert mongoelector.LeaseLost is LeaseLost
    assert issubclass(LeaseLost, mongoelector.MongoElectorError)
    assert callable(mongoelector.lease)


def test_kept_alive_while_idle_then_released():
    """On the fake clock, so the renewals are due at fixed instants whatever the load
    (only a memory:// backend runs on one; the real transports' renewals are watched in
    the stored expiry by test_renewed_while_idle_on_every_transport)."""
    clock = testing.FakeClock()
    db = clock.memory_uri()
    key, ttl = _key(), 1
    with mongoelector.lease(db, key, ttl=ttl, timeout=5) as lease:
        fence = lease.fence
        assert fence > 0
        assert isinstance(lease.lost, threading.Event) and not lease.lost.is_set()
        clock.advance(2.5 * ttl)  # idle for two and a half ttl: the renewer kept it
        lease.check()
        assert not lease.lost.is_set()
        assert lease.locker.owned()
        with pytest.raises(LockExists):
            MongoLocker(key, db, ttl=ttl).acquire(blocking=False)
        # A waiter with a timeout gives up at its deadline (in fake time).
        outcome = []

        def wait():
            try:
                with mongoelector.lease(db, key, ttl=ttl, timeout=0.3):
                    outcome.append("acquired")
            except AcquireTimeout:
                outcome.append("timed out")

        waiter = threading.Thread(target=wait)
        before = clock.waiters
        waiter.start()
        clock.block_until_waiters(before + 1)
        start = clock.monotonic()
        while waiter.is_alive() and clock.monotonic() - start < 5:
            clock.advance(0.1)
        waiter.join(10)
        assert outcome == ["timed out"]
        assert round(clock.monotonic() - start, 3) >= 0.3  # not before its deadline
        lease.check()
        assert lease.locker.owned()
    # Released on exit: the next holder gets it at once, with a greater token.
    with mongoelector.lease(db, key, ttl=ttl, blocking=False) as again:
        assert again.fence > fence


def test_renewed_while_idle_on_every_transport(backend):
    """The renewer keeps an idle lease alive on the real transports: the stored expiry
    moves forward twice while the block does nothing (watched in the document; no
    assertion on how long that takes)."""
    key, ttl = _key(), 1
    locks = backend.raw["mongolocker"]
    with mongoelector.lease(backend.db, key, ttl=ttl, timeout=5) as lease:
        first = locks.find_one({"_id": key})["ts_expire"]
        seen = {first}
        deadline = time.monotonic() + 60
        while len(seen) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
            seen.add(locks.find_one({"_id": key})["ts_expire"])
        assert len(seen) >= 3 and max(seen) > first, "renewed at least twice"
        lease.check()
        assert lease.locker.owned()
        assert locks.find_one({"_id": key})["uuid"] == lease.locker.uuid


def test_lost_when_taken(backend):
    key, ttl = _key(), 1
    other = MongoLocker(key, backend.db, ttl=ttl)
    with pytest.raises(LeaseLost, match="lost while the block ran"):
        with mongoelector.lease(backend.db, key, ttl=ttl, timeout=5) as lease:
            assert other.acquire(blocking=False, force=True)
            assert other.fence > lease.fence
            assert lease.lost.wait(3 * ttl), "loss not noticed"
            assert lease.wait_lost(0)
            with pytest.raises(LeaseLost, match=key):
                lease.check()
            assert lease.reason
    # A lost lease is not released: the other keeps its hold.
    assert other.owned()
    other.release()


def test_body_exception_is_not_masked():
    db = mongomock.MongoClient().testdb
    key = _key()
    with pytest.raises(KeyError):
        with mongoelector.lease(db, key, ttl=1, timeout=5) as lease:
            MongoLocker(key, db, ttl=1).acquire(blocking=False, force=True)
            assert lease.lost.wait(3)
            raise KeyError("body")


def test_arguments():
    db = mongomock.MongoClient().testdb
    with pytest.raises(ValueError):
        mongoelector.lease(db, _key(), blocking=False, timeout=1)
    l = mongoelector.Lease(db, _key(), ttl=1)
    assert l.fence is None and not l.wait_lost(0)
    l.release()  # nothing held: no-op


def test_sqlite_backend():
    with tempfile.TemporaryDirectory() as d:
        uri = "sqlite:///" + os.path.join(d, "locks.db").lstrip("/")
        key = _key()
        with mongoelector.lease(uri, key, ttl=1, timeout=5) as lease:
            assert lease.fence > 0
            time.sleep(1.5)
            lease.check()
            with pytest.raises(LockExists):
                with mongoelector.lease(uri, key, ttl=1, blocking=False):
                    pass
        with mongoelector.lease(uri, key, ttl=1, blocking=False) as again:
            assert again.fence > lease.fence


def _utc_ts(dt):
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.timezone.utc)
    return dt.timestamp()


def test_frozen_storage_fires_lost_before_the_lease_can_expire(monkeypatch):
    """The storage stops answering (every renewal hangs): `lost` is set at the renew
    deadline, before the lock document's expiry, while the renewal is still hanging."""
    db = mongomock.MongoClient().testdb
    key, ttl = _key(), 2
    original = mongomock.collection.Collection.update_one
    frozen = threading.Event()
    thaw = threading.Event()
    seen = {}

    def update_one(self, filter, update, *args, **kwargs):
        if frozen.is_set() and "ts_expire" not in seen:
            doc = self.find_one({"_id": key})
            seen["ts_expire"] = _utc_ts(doc["ts_expire"])
            seen["hung_at"] = time.time()
        if frozen.is_set():
            thaw.wait(30)  # a frozen server: the call does not return
        return original(self, filter, update, *args, **kwargs)

    monkeypatch.setattr(mongomock.collection.Collection, "update_one", update_one)
    lease = mongoelector.lease(db, key, ttl=ttl, timeout=5)
    with pytest.raises(LeaseLost):
        with lease:
            frozen.set()
            assert lease.lost.wait(3 * ttl), "lost did not fire"
            lost_at = time.time()
            assert "ts_expire" in seen, "no renewal hung"
            # Before anyone could take the lock over (its expiry on the server's clock,
            # here the host's), by at least most of the margin (ttl/10).
            assert lost_at < seen["ts_expire"] - 0.05, (lost_at, seen["ts_expire"])
            thaw.set()  # let the hung renewal land: it must not revive the lease
    assert lease.lost.is_set()
    with pytest.raises(LeaseLost):
        lease.check()
    # The late renewal was not taken back: the lock is free (released, fenced) or
    # expires; another holder gets it within a ttl.
    other = MongoLocker(key, db, ttl=ttl)
    assert other.acquire(timeout=2 * ttl)
    assert other.fence > lease.fence


def test_client_object(server_uri):
    client = mongoelector.Client(server_uri, "me_lease_" + uuid.uuid4().hex[:8])
    key = _key()
    with mongoelector.lease(client, key, ttl=1, timeout=5) as lease:
        assert lease.fence > 0
        lease.check()
    with mongoelector.lease(client, key, ttl=1, blocking=False) as again:
        assert again.fence > lease.fence
