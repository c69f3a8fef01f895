"""Servers whose findAndModify is not atomic (FerretDB reads, then writes by _id): ours
refuses them unless allow_unsafe_server=True, and then still works for a single node.
Runs on whatever server MONGOELECTOR_TEST_URI points at; the refusal is checked only on
FerretDB."""

import uuid

import pytest
from conftest import TEST_SERVER
from mongoelector import LockExists, MongoLeaderElector, MongoLocker, UnsafeServerError

pytestmark = pytest.mark.ferretdb
ferret_only = pytest.mark.skipif(
    TEST_SERVER != "ferretdb", reason="MONGOELECTOR_TEST_SERVER is not ferretdb"
)


def new_key():
    return "f-" + uuid.uuid4().hex[:8]


@pytest.fixture(params=["pymongo", "uri"])
def db(request, server_db):
    database, uri = server_db
    return database if request.param == "pymongo" else uri


@ferret_only
def test_refused_by_default(db):
    lock = MongoLocker(new_key(), db, timeparanoid=False)  # construction does no claim
    with pytest.raises(UnsafeServerError, match="not run findAndModify atomically"):
        lock.acquire()


def test_single_node_use_when_allowed(db):
    key = new_key()
    a = MongoLocker(key, db, allow_unsafe_server=True, timeparanoid=False)
    b = MongoLocker(key, db, allow_unsafe_server=True, timeparanoid=False)
    assert a.acquire() and a.owned() and a.fence
    with pytest.raises(LockExists):
        b.acquire(blocking=False)
    assert a.touch() is not None
    a.release()
    assert b.acquire(blocking=False) and b.fence > 0


def test_elector_refuses_allow_unsafe_server(db):
    # Electors refuse the option on every server: where findAndModify is not atomic two
    # nodes could both lead and their fencing tokens could repeat (issue #14.7).
    with pytest.raises(ValueError, match="allow_unsafe_server"):
        MongoLeaderElector(new_key(), db, ttl=5, allow_unsafe_server=True)
