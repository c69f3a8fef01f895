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
