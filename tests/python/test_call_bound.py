"""Every call on a pymongo Database is bounded: the drop-in enters pymongo's client-side
operation timeout (CSOT) for each storage call, so a hung server cannot keep an acquire,
a renewal or a release waiting past its budget. pymongo shows the bound on the wire as
`maxTimeMS` (the budget left, minus a round trip): checked here on the real server, for
each kind of call, and with a caller's own shorter timeout around ours."""

import asyncio
import time
import uuid

import pymongo
import pytest
from mongoelector import MongoLocker, _native
from mongoelector.aio import AsyncMongoLocker
from pymongo import _csot, monitoring


class Commands(monitoring.CommandListener):
    def __init__(self):
        self.started_events = []

    def started(self, event):
        self.started_events.append(event)

    def succeeded(self, event):
        pass

    def failed(self, event):
        pass


@pytest.fixture
def watched_db(server_uri):
    listener = Commands()
    client = pymongo.MongoClient(server_uri, event_listeners=[listener])
    name = "me_test_" + uuid.uuid4().hex[:12]
    yield client[name], listener
    client.drop_database(name)
    client.close()


def test_each_call_carries_the_budget_as_max_time_ms(watched_db):
    db, listener = watched_db
    lock = MongoLocker("bounded-" + uuid.uuid4().hex[:8], db, ttl=30, op_timeout=2.0)
    lock.acquire()
    lock.touch()
    lock.owned()
    lock.release()
    ours = [
        e
        for e in listener.started_events
        if e.command_name in ("insert", "findAndModify", "update", "delete", "find")
    ]
    assert {e.command_name for e in ours} >= {"insert", "update", "find", "delete"}
    for e in ours:
        budget = e.command.get("maxTimeMS")
        assert budget is not None, f"{e.command_name} was sent without a bound"
        assert 0 < budget <= 2000, f"{e.command_name}: maxTimeMS {budget} outside (0, 2000]"


def test_a_call_never_extends_an_outer_pymongo_timeout(watched_db):
    """A caller's own, shorter pymongo.timeout() stays in force inside our calls (an inner
    scope never extends an outer deadline), and is restored after them."""
    db, listener = watched_db
    lock = MongoLocker("outer-" + uuid.uuid4().hex[:8], db, ttl=30, op_timeout=5.0)
    with pymongo.timeout(0.8):
        lock.acquire()
        assert _csot.get_timeout() == 0.8
    assert _csot.get_timeout() is None
    claim = [e for e in listener.started_events if e.command_name in ("insert", "findAndModify")]
    assert claim and all(0 < e.command["maxTimeMS"] <= 800 for e in claim)
    lock.release()


def test_the_scope_is_entered_directly_on_this_pymongo(server_db):
    """The installed pymongo reads a scope set through its context variables as its own
    (checked once per storage); the slower pymongo.timeout() stays the fallback."""
    db, _ = server_db
    storage = _native.PyMongoStorage(db, 2.0)
    assert storage.timeout_scope == "direct"
    assert _native.PyMongoStorage(db, 0.0).timeout_scope == "none"


def test_index_creation_gets_the_setup_bound_claims_keep_theirs(watched_db):
    """Index creation comes before any claim and is not part of a hold's timing: it is
    bounded by the setup bound (the larger of the call budget and 5 s), while claims,
    renewals and releases keep the call budget."""
    db, listener = watched_db
    op = 1.0
    setup = _native.setup_timeout_for(op)
    assert setup == 5.0 and _native.setup_timeout_for(0.1) == 5.0
    assert _native.setup_timeout_for(8.0) == 8.0  # never below the call budget
    # A client's own shorter server-selection timeout is kept (30 s, pymongo's default,
    # is not).
    assert _native.setup_timeout_for(0.1, 2.0) == 2.0
    assert _native.setup_timeout_for(0.5, 0.2) == 0.5
    assert _native.setup_timeout_for(0.1, 30.0) == 5.0
    lock = MongoLocker("setup-" + uuid.uuid4().hex[:8], db, ttl=30, op_timeout=op)
    assert lock.acquire(blocking=False)
    lock.touch()
    lock.release()
    budgets = {}
    for e in listener.started_events:
        budgets.setdefault(e.command_name, []).append(e.command.get("maxTimeMS"))
    assert budgets.get("createIndexes"), budgets.keys()
    for budget in budgets["createIndexes"]:
        assert op * 1000 < budget <= setup * 1000, budget
    ours = [
        b for name in ("insert", "findAndModify", "update", "delete") for b in budgets.get(name, [])
    ]
    assert ours and all(0 < b <= op * 1000 for b in ours), budgets


class _ShiftedTime:
    """pymongo._csot's `time`, whose monotonic clock a test moves forward: a call that
    takes `by` seconds without sleeping."""

    def __init__(self):
        self.by = 0.0

    def monotonic(self):
        return time.monotonic() + self.by

    def __getattr__(self, name):
        return getattr(time, name)


def test_a_slow_index_creation_within_the_setup_bound_opens_the_locker(server_db, monkeypatch):
    """A createIndexes that takes longer than a claim's budget (ttl/10 = 0.1 s here) but
    less than the setup bound does not fail the locker; one past the setup bound does."""
    db, _ = server_db
    clock = _ShiftedTime()
    monkeypatch.setattr(_csot, "time", clock)
    create_index = pymongo.collection.Collection.create_index
    took = {"s": 0.0}

    def slow_create_index(self, *args, **kwargs):
        clock.by += took["s"]  # the call has taken that long when pymongo checks its budget
        try:
            return create_index(self, *args, **kwargs)
        finally:
            clock.by -= took["s"]

    monkeypatch.setattr(pymongo.collection.Collection, "create_index", slow_create_index)
    took["s"] = 2.0  # 20 times the claim budget, within the setup bound
    lock = MongoLocker("slow-index-" + uuid.uuid4().hex[:8], db, ttl=1, dbcollection="slow_a")
    assert "slow_a" in db.list_collection_names()  # its indexes were made
    lock.close()
    took["s"] = _native.setup_timeout_for(0.1) + 1.0  # past the setup bound
    with pytest.raises(Exception, match="(?i)time"):
        MongoLocker("slow-index-" + uuid.uuid4().hex[:8], db, ttl=1, dbcollection="slow_b")


def test_an_async_database_gives_index_creation_the_setup_bound_too(server_db):
    """Through an AsyncDatabase (mongoelector.aio's facade) the same bounds apply: the
    facade takes the budget of the core's scope, so createIndexes gets the setup bound
    while the claim keeps the call budget."""
    _, uri = server_db
    listener = Commands()
    op = 1.0

    async def main():
        client = pymongo.AsyncMongoClient(uri, event_listeners=[listener])
        try:
            lock = AsyncMongoLocker(
                "aio-setup-" + uuid.uuid4().hex[:8], client.get_database(), ttl=30, op_timeout=op
            )
            assert await lock.acquire(blocking=False)
            await lock.release()
            await lock.close()
        finally:
            await client.close()

    asyncio.run(main())
    budgets = {}
    for e in listener.started_events:
        budgets.setdefault(e.command_name, []).append(e.command.get("maxTimeMS"))
    assert budgets.get("createIndexes"), budgets.keys()
    for budget in budgets["createIndexes"]:
        assert op * 1000 < budget <= _native.setup_timeout_for(op) * 1000, budget
    claims = budgets.get("insert", []) + budgets.get("findAndModify", [])
    assert claims and all(0 < b <= op * 1000 for b in claims), budgets
