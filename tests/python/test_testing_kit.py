"""mongoelector.testing (issue #16, item 3): the memory:// backend and its levers, used the
way a user's own test would use them: no server, no mocks of ours."""

import threading
import time

import mongoelector
import pytest
from mongoelector import LockExists, MongoLeaderElector, MongoLocker, MongoSemaphore, testing


def test_memory_backend_has_lock_semantics():
    db = testing.memory_uri()
    a = MongoLocker("k", db, ttl=30)
    b = MongoLocker("k", db, ttl=30)
    assert a.acquire(blocking=False)
    with pytest.raises(LockExists):
        b.acquire(blocking=False)
    fence_a = a.fence
    a.release()
    assert b.acquire(blocking=False)
    assert b.fence > fence_a, "tokens increase as on a server"
    # Another name is another world.
    assert MongoLocker("k", testing.memory_uri(), ttl=30).acquire(blocking=False)
    # The same name, from anywhere in this process, is the same world.
    with pytest.raises(LockExists):
        MongoLocker("k", db, ttl=30).acquire(blocking=False)
    b.release()


def test_memory_semaphore_and_singleton():
    db = testing.memory_uri()
    s1 = MongoSemaphore("pool", db, limit=2, ttl=30)
    s2 = MongoSemaphore("pool", db, limit=2, ttl=30)
    s3 = MongoSemaphore("pool", db, limit=2, ttl=30)
    assert s1.acquire(blocking=False) and s2.acquire(blocking=False)
    with pytest.raises(LockExists):
        s3.acquire(blocking=False)
    s1.release()
    s2.release()
    ran = []

    @mongoelector.singleton("job", db, once_per=3600)
    def job():
        ran.append(1)

    job()
    job()
    assert ran == [1]


def test_steal_makes_the_lease_lost():
    db = testing.memory_uri()
    with pytest.raises(mongoelector.LeaseLost):
        with mongoelector.lease(db, "report", ttl=1) as held:
            thief = testing.steal(db, "report")
            assert held.wait_lost(timeout=5), "lost at its next renewal"
            assert "no longer ours" in held.reason
            assert thief.fence > held.fence
    thief.release()


def test_force_release_and_force_expire_make_the_lease_lost():
    db = testing.memory_uri()
    for lever in (testing.force_release, testing.force_expire):
        held = mongoelector.Lease(db, "k", ttl=1)
        held.acquire()
        lever(db, "k")
        assert held.wait_lost(timeout=5), lever.__name__
        held.release()
    assert not testing.force_expire(db, "nobody-holds-this")


def test_unavailable_backend_loses_the_lease_at_its_deadline():
    db = testing.memory_uri()
    held = mongoelector.Lease(db, "k", ttl=1)
    held.acquire()
    start = time.monotonic()
    with testing.unavailable(db):
        assert held.wait_lost(timeout=5)
        took = time.monotonic() - start
    # The renew deadline comes a margin before the ttl ends, never after.
    assert took < 1.0, took
    held.release()
    # Back up: the lost hold could not be released, so the key is free at its expiry.
    assert MongoLocker("k", db, ttl=30).acquire(timeout=3, step=0.05)


def test_elector_steps_down_when_its_lock_is_stolen():
    db = testing.memory_uri()
    events = []
    led = threading.Event()
    lost = threading.Event()
    e = MongoLeaderElector(
        "svc",
        db,
        ttl=1,
        on_leader=lambda: (events.append("lead"), led.set()),
        on_leader_loss=lambda: (events.append("loss"), lost.set()),
    )
    e.start()
    try:
        assert led.wait(5)
        testing.steal(db, "svc", collection="elector.locks")
        assert lost.wait(5), "a stolen election is announced"
        assert not e.is_leader
    finally:
        e.stop()
    assert events[:2] == ["lead", "loss"]


def test_levers_refuse_other_backends():
    with pytest.raises(TypeError):
        testing.force_expire("mongodb://localhost/db", "k")
    with pytest.raises(TypeError):
        with testing.unavailable("sqlite:///tmp/x.db"):
            pass
    with pytest.raises(ValueError):
        MongoLocker("k", "memory://x?opt=1")
