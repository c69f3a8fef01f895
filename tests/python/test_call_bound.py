"""Every call on a pymongo Database is bounded: the drop-in enters pymongo's client-side
operation timeout (CSOT) for each storage call, so a hung server cannot keep an acquire,
a renewal or a release waiting past its budget. pymongo shows the bound on the wire as
`maxTimeMS` (the budget left, minus a round trip): checked here on the real server, for
each kind of call, and with a caller's own shorter timeout around ours."""

import uuid

import pymongo
import pytest
from mongoelector import MongoLocker, _native
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
