"""mongoelector.testing.FakeClock (issue #16, item 3): a user's test of "what happens when
we lose the lock / leadership" on a fake clock: no server, no sleeps, deterministic."""

import datetime
import threading

import mongoelector
import pytest
from mongoelector import MongoLeaderElector, MongoSemaphore, testing


def test_lease_renews_for_an_hour_of_fake_time_then_is_lost_while_cut_off():
    clock = testing.FakeClock()
    db = clock.memory_uri()
    with pytest.raises(mongoelector.LeaseLost):
        with mongoelector.lease(db, "report", ttl=15) as held:
            clock.advance(datetime.timedelta(hours=1))
            assert not held.lost.is_set(), "renewed every ttl/3 for an hour"
            with testing.unavailable(db):
                clock.advance(4.9)
                assert not held.lost.is_set(), "still inside its renew deadline"
                clock.advance(15)
                assert held.lost.is_set(), "declared lost at the renew deadline"
    assert clock.monotonic() == pytest.approx(3600 + 19.9)


def test_stolen_lock_is_lost_at_the_next_renewal_not_before():
    clock = testing.FakeClock()
    db = clock.memory_uri()
    with pytest.raises(mongoelector.LeaseLost):
        with mongoelector.lease(db, "report", ttl=9) as held:
            testing.steal(db, "report")
            clock.advance(2.999)
            assert not held.lost.is_set(), "no renewal yet (every ttl/3 = 3 s)"
            clock.advance(0.001)
            assert held.lost.is_set()
            assert "no longer ours" in held.reason


def test_elector_steps_down_when_cut_off_and_another_takes_over():
    clock = testing.FakeClock()
    db = clock.memory_uri()
    events = []
    a = MongoLeaderElector(
        "svc",
        db,
        ttl=10,
        on_leader=lambda: events.append("a+"),
        on_leader_loss=lambda: events.append("a-"),
    )
    a.start()
    clock.advance(0)
    assert a.is_leader and events == ["a+"]
    b = MongoLeaderElector("svc", db, ttl=10, on_leader=lambda: events.append("b+"))
    b.start()
    clock.advance(datetime.timedelta(minutes=10))
    assert a.is_leader and not b.is_leader and events == ["a+"]
    # A is frozen out: the lock expires behind its back and B grabs it; A notices at its
    # next renewal (every ttl/2) at the latest.
    testing.force_expire(db, "svc", collection="elector.locks")
    clock.advance(5)
    assert b.is_leader and not a.is_leader
    assert events == ["a+", "b+", "a-"] or events == ["a+", "a-", "b+"]
    a.stop()
    b.stop()


def test_waits_on_the_clock_are_in_fake_time():
    clock = testing.FakeClock()
    db = clock.memory_uri()
    holder = MongoSemaphore("pool", db, limit=1, ttl=60)
    assert holder.acquire(blocking=False)
    outcome = []

    def wait_for_slot():
        other = MongoSemaphore("pool", db, limit=1, ttl=60)
        try:
            other.acquire(timeout=30)
            outcome.append("acquired")
        except mongoelector.AcquireTimeout:
            outcome.append("timeout at %.1f" % clock.monotonic())

    clock.settle()
    idle = clock.waiters
    t = threading.Thread(target=wait_for_slot, daemon=True)
    t.start()
    clock.block_until_waiters(idle + 1)  # it sleeps on the clock now
    assert t.is_alive() and not outcome, "30 s of fake time have not passed"
    clock.advance(31)
    t.join(10)
    assert outcome and outcome[0].startswith("timeout at 3"), outcome
    holder.release()


def test_drop_in_blocking_acquire_runs_the_core_loop_on_the_clock():
    """MongoLocker.acquire() is the core's acquire loop: its waits between attempts (every
    `step`) and its timeout are on the clock, in fake time, as every binding's."""
    clock = testing.FakeClock()
    db = clock.memory_uri()
    holder = mongoelector.MongoLocker("job", db, ttl=600)
    assert holder.acquire(blocking=False)
    outcome = []

    def wait_for_lock():
        other = mongoelector.MongoLocker("job", db, ttl=600)
        try:
            other.acquire(timeout=30, step=5)
            outcome.append("acquired")
        except mongoelector.AcquireTimeout as e:
            outcome.append("timeout at %.1f: %s" % (clock.monotonic(), e))

    clock.settle()
    idle = clock.waiters
    t = threading.Thread(target=wait_for_lock, daemon=True)
    t.start()
    clock.block_until_waiters(idle + 1, timeout=5)  # it sleeps on the clock now
    assert t.is_alive() and not outcome, "30 s of fake time have not passed"
    clock.advance(31)
    t.join(10)
    # The drop-in's message, at the fake timeout.
    assert len(outcome) == 1 and outcome[0].startswith("timeout at 3"), outcome
    assert outcome[0].endswith(": Timeout reached, lock not acquired"), outcome
    holder.release()


def test_wall_clock_and_arguments():
    start = datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)
    clock = testing.FakeClock(start)
    assert clock.time() == start.timestamp()
    clock.advance(1.5)
    assert clock.time() == start.timestamp() + 1.5 and clock.monotonic() == 1.5
    clock.jump_wall(-60)
    assert clock.monotonic() == 1.5, "an NTP step does not move intervals"
    with pytest.raises(TypeError):
        clock.advance("1")
    with pytest.raises(ValueError):
        clock.advance(-1)
    with pytest.raises(ValueError):
        clock.advance(float("nan"))
    with pytest.raises(ValueError):
        testing.FakeClock(datetime.datetime(2030, 1, 1))
    with pytest.raises(TypeError):
        testing.memory_uri(clock="not a clock")
    name = "fake-clock-" + str(id(clock))
    uri = testing.memory_uri(name, clock=clock)
    assert testing.memory_uri(name, clock=clock) == uri, "the same clock may attach again"
    with pytest.raises(ValueError):
        testing.memory_uri(name, clock=testing.FakeClock())


def test_a_callback_blocked_on_the_test_thread_is_reported_not_hung():
    clock = testing.FakeClock(settle_timeout=0.3)
    db = clock.memory_uri()
    gate = threading.Event()
    e = MongoLeaderElector("svc", db, ttl=10, on_leader=lambda: gate.wait(5))
    e.start()
    with pytest.raises(RuntimeError, match="did not become idle"):
        clock.advance(0)
    gate.set()
    clock.advance(1)
    assert e.is_leader
    e.stop()


def test_readme_example_leader_steps_down_when_cut_off_and_another_takes_over():
    # README, "A fake clock: an hour of leadership in milliseconds", verbatim.
    clock = testing.FakeClock()
    db = clock.memory_uri()  # memory://test-<uuid> on this clock
    a = MongoLeaderElector("svc", db, ttl=10)
    a.start()
    clock.advance(0)  # a's loop ran: it leads
    b = MongoLeaderElector("svc", db, ttl=10)
    b.start()
    clock.advance(3600)  # an hour: a renewed all along
    assert a.is_leader and not b.is_leader
    testing.force_expire(db, "svc", collection="elector.locks")
    clock.advance(5)  # within a's next renewal (ttl/2)
    assert b.is_leader and not a.is_leader  # a stepped down, b took over
    a.stop()
    b.stop()


def test_asyncio_elector_on_the_fake_clock():
    # From asyncio, advance() runs in a worker thread (it blocks until the library's
    # threads are idle): await asyncio.to_thread(clock.advance, seconds).
    import asyncio

    from mongoelector.aio import AsyncMongoLeaderElector

    async def scenario():
        clock = testing.FakeClock()
        db = clock.memory_uri()
        e = AsyncMongoLeaderElector("svc", db, ttl=10)
        await e.start()
        await asyncio.to_thread(clock.advance, 0)
        led = e.is_leader
        with testing.unavailable(db):
            await asyncio.to_thread(clock.advance, 10)
            cut_off = e.is_leader
        await e.stop()
        return led, cut_off

    assert asyncio.run(scenario()) == (True, False)


@pytest.mark.parametrize("kind", ["lease", "semaphore"])
def test_a_slow_on_lost_elsewhere_does_not_keep_a_lease_reading_held(kind):
    """Loss is read from the renew deadline and the clock, not from an Event that a
    callback sets: another lease's Python on_lost that blocks (as one waiting for the GIL
    would) must not keep this lease (or semaphore slot) reading "held" past its deadline."""
    clock = testing.FakeClock(settle_timeout=0.5)  # a blocked callback cannot settle
    db = clock.memory_uri()
    entered, go = threading.Event(), threading.Event()

    def slow_on_lost():
        entered.set()
        go.wait(30)

    other = mongoelector.MongoLocker("other", db, ttl=10)
    slow = mongoelector._native.KeepAliveLease(other._core, False, None, 0.25, slow_on_lost)
    sem = MongoSemaphore("pool", db, limit=1, ttl=10) if kind == "semaphore" else None
    held = (
        sem.keep_alive(blocking=False)
        if sem
        else mongoelector.lease(db, "job", ttl=10, blocking=False)
    )
    held.acquire()  # both at fake time 0: the same renew deadline, 9 s (ttl - ttl/10)
    advanced = []

    def advance():
        try:
            clock.advance(9)
        except RuntimeError:  # the blocked callback never became idle
            pass
        advanced.append(clock.monotonic())

    try:
        with testing.unavailable(db):  # no renewal gets through
            mover = threading.Thread(target=advance)
            mover.start()
            assert entered.wait(10), "the slow on_lost never ran"
            assert clock.monotonic() == pytest.approx(9)
            assert held.lost.is_set(), "reads held after its renew deadline"
            assert held.wait_lost(0)
            with pytest.raises(mongoelector.LeaseLost):
                held.check()
            go.set()
            mover.join(30)
            assert advanced == [pytest.approx(9)]
    finally:
        go.set()
        held.release()
        slow.close()
        other.close()
        if sem:
            sem.close()
        else:
            held.locker.close()
