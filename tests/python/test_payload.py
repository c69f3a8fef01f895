"""The leader payload from Python: MongoLeaderElector(payload=...) and set_payload(), the
asyncio elector's, and what readers see (observe()'s LeaderState.payload,
cluster_detail["leader"]["payload"]).

Backends: memory:// and SQLite always; mongomock (the pymongo transport: PyMongoStorage,
whose commands are the core's) always; a pymongo Database and a mongodb:// URI on the
real server (MONGOELECTOR_TEST_URI, skipped without). Waits are generous deadlines;
what is asserted is what was read.
"""

import asyncio
import time
import uuid

import pytest
from conftest import make_backend
from mongoelector import MongoLeaderElector, observe
from mongoelector.aio import AsyncMongoLeaderElector

WAIT = 20.0


def lead(elector):
    deadline = time.monotonic() + WAIT
    while not elector.is_leader:
        assert time.monotonic() < deadline, "never led"
        elector.poll()
        if not elector.is_leader:
            time.sleep(0.02)


@pytest.fixture(params=["memory", "sqlite", "mongomock", "pymongo", "uri"])
def db(request, tmp_path):
    if request.param == "memory":
        return "memory://payload-" + uuid.uuid4().hex
    if request.param == "sqlite":
        return "sqlite:///" + str(tmp_path / "payload.db")
    return make_backend(request.param, request).db


def test_a_new_term_carries_its_leaders_payload_and_readers_see_it(db):
    key = "payload-" + uuid.uuid4().hex
    a = MongoLeaderElector(key, db, ttl=5, payload={"endpoint": "10.0.0.1:8080", "v": [1, 2]})
    b = MongoLeaderElector(key, db, ttl=5, payload={"endpoint": "10.0.0.2:8080"})
    try:
        lead(a)
        detail = a.cluster_detail
        assert detail["leader"]["payload"] == {"endpoint": "10.0.0.1:8080", "v": [1, 2]}
        with observe(db, key, interval=0.05) as changes:
            state = changes.get(WAIT)
            assert state is not None and state.has_leader
            assert state.payload == {"endpoint": "10.0.0.1:8080", "v": [1, 2]}
            assert a.set_payload({"endpoint": "10.0.0.1:9090"}) is True
            state = changes.get(WAIT)
            assert state is not None, "a new payload is a change"
            assert state.uuid == a.mlock.uuid and state.payload == {"endpoint": "10.0.0.1:9090"}
            b.poll()
            assert b.set_payload({"endpoint": "10.0.0.2:7070"}) is False  # kept for its claim
            a.release()
            lead(b)
            deadline = time.monotonic() + WAIT
            while True:
                state = changes.get(max(0.01, deadline - time.monotonic()))
                assert state is not None, "b's term never observed"
                if state.has_leader:
                    break
            # The first state naming b carries b's payload, never a's.
            assert state.uuid == b.mlock.uuid
            assert state.payload == {"endpoint": "10.0.0.2:7070"}
        assert b.payload == {"endpoint": "10.0.0.2:7070"}
        assert b.set_payload(None) is True
        assert "payload" not in b.cluster_detail["leader"]  # the original's shape
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize(
    "bad, error, words",
    [
        ([1, 2], TypeError, "dict"),
        ("{}", TypeError, "str"),
        ({"x": object()}, ValueError, "JSON"),
        ({"x": float("nan")}, ValueError, "JSON"),
        ({"x": "y" * 20000}, ValueError, "16384"),
    ],
)
def test_payloads_are_validated_with_a_clear_error(bad, error, words):
    db = "memory://payload-" + uuid.uuid4().hex
    with pytest.raises(error, match=words):
        MongoLeaderElector("k", db, payload=bad)
    e = MongoLeaderElector("k", db, payload={"ok": True})
    try:
        with pytest.raises(error, match=words):
            e.set_payload(bad)
        assert e.payload == {"ok": True}
    finally:
        e.close()
    with pytest.raises(error, match=words):
        AsyncMongoLeaderElector("k", db, payload=bad)


def test_asyncio_elector_publishes_and_replaces_its_payload():
    db = "memory://payload-" + uuid.uuid4().hex

    async def main():
        e = AsyncMongoLeaderElector("k", db, ttl=5, payload={"role": "primary"})
        try:
            assert e.payload == {"role": "primary"}
            deadline = time.monotonic() + WAIT
            while not e.is_leader:
                assert time.monotonic() < deadline
                await e.poll()
            detail = await e.cluster_detail()
            assert detail["leader"]["payload"] == {"role": "primary"}
            assert await e.set_payload({"role": "primary", "epoch": 2}) is True
            detail = await e.cluster_detail()
            assert detail["leader"]["payload"] == {"role": "primary", "epoch": 2}
            assert e.payload == {"role": "primary", "epoch": 2}
            with pytest.raises(TypeError):
                await e.set_payload(["x"])
        finally:
            await e.close()

    asyncio.run(main())
