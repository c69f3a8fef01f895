"""Renewals through a pymongo Database (PyMongoStorage) are monotonic: a renewal whose expiry
is earlier than the stored one -- it timed out at the client and ran at the server after a
newer renewal of the same hold -- still matches and counts as renewed, but never lowers
ts_expire. For renew, renew_many (its per-request read-back) and semaphore slots; and
set_expiry, the one write that may lower an expiry (minimum-hold releases), sets it exactly.
The storage's operations are called directly, with explicit server times (no clock, no
sleeps), on mongomock and on the real server (mongo-java-server, FerretDB)."""

import datetime

import mongomock
import pytest
from mongoelector import _native

COLL = "locks"
T = 1_700_000_000_000  # server time of the test, in ms


def at(ms):
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc).replace(tzinfo=None)


def ms(value):
    return int(value.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)


@pytest.fixture(params=["mongomock", pytest.param("pymongo", marks=pytest.mark.ferretdb)])
def db(request):
    if request.param == "mongomock":
        return mongomock.MongoClient().renewaldb
    database, _ = request.getfixturevalue("server_db")
    return database


@pytest.fixture
def storage(db):
    return _native.PyMongoStorage(db, 5.0, _native.ServerFacts())


def put_lock(db, key, uuid="u", fence=1, expire=T + 10_000, locked=True):
    db[COLL].insert_one(
        {
            "_id": key,
            "locked": locked,
            "host": "h",
            "uuid": uuid,
            "pid": 1,
            "ts_created": at(T),
            "ts_expire": at(expire),
            "fence": fence,
        }
    )


def expiry(db, key, coll=COLL):
    return ms(db[coll].find_one({"_id": key})["ts_expire"])


def test_a_late_renewal_matches_and_never_lowers_the_expiry(db, storage):
    put_lock(db, "k")
    assert _native._storage_renew(storage, COLL, "k", "u", 1, T + 2000, T + 16_000)
    # The late one: still our hold, so renewed -- and the later expiry stays.
    assert _native._storage_renew(storage, COLL, "k", "u", 1, T + 1000, T + 12_000)
    assert expiry(db, "k") == T + 16_000
    assert _native._storage_renew(storage, COLL, "k", "u", 0, T + 1000, T + 16_000)
    assert not _native._storage_renew(storage, COLL, "k", "u", 2, T + 1000, T + 12_000)
    assert not _native._storage_renew(storage, COLL, "k", "v", 1, T + 1000, T + 12_000)
    assert not _native._storage_renew(storage, COLL, "k", "u", 1, T + 16_000, T + 20_000)
    assert expiry(db, "k") == T + 16_000


def test_a_batch_counts_an_already_later_hold_as_renewed(db, storage):
    put_lock(db, "later", expire=T + 30_000)
    put_lock(db, "plain")
    put_lock(db, "theirs", uuid="other", expire=T + 30_000)
    put_lock(db, "later-unfenced", expire=T + 30_000)
    put_lock(db, "refenced", fence=2, expire=T + 30_000)
    requests = [
        ("later", "u", 1, T + 20_000),
        ("plain", "u", 1, T + 20_000),
        ("theirs", "u", 1, T + 20_000),
        ("later-unfenced", "u", 0, T + 20_000),
        ("refenced", "u", 1, T + 20_000),
        ("missing", "u", 1, T + 20_000),
    ]
    renewed = _native._storage_renew_many(storage, COLL, requests, T)
    assert renewed == [True, True, False, True, False, False]
    assert expiry(db, "later") == T + 30_000
    assert expiry(db, "plain") == T + 20_000
    assert expiry(db, "theirs") == T + 30_000
    assert expiry(db, "later-unfenced") == T + 30_000
    assert expiry(db, "refenced") == T + 30_000


def test_set_expiry_shortens_or_extends_the_named_unexpired_hold(db, storage):
    def set_expiry(*args):
        return _native._storage_renew(storage, COLL, *args, exact=True)

    put_lock(db, "k")
    assert not set_expiry("k", "u", 2, T, T + 3000)
    assert not set_expiry("k", "v", 1, T, T + 3000)
    assert set_expiry("k", "u", 1, T + 1000, T + 3000)
    assert expiry(db, "k") == T + 3000
    assert set_expiry("k", "u", 1, T + 1000, T + 60_000)
    assert expiry(db, "k") == T + 60_000
    assert not set_expiry("k", "u", 1, T + 60_000, T + 90_000)
    assert expiry(db, "k") == T + 60_000


def test_a_late_slot_renewal_never_lowers_the_slots_expiry(db, storage):
    def slot(uuid, fence, expire):
        return {
            "uuid": uuid,
            "host": "h",
            "pid": 1,
            "fence": fence,
            "ts_created": at(T),
            "ts_expire": at(expire),
        }

    db["sems"].insert_one(
        {
            "_id": "pool",
            "limit": 2,
            "fence": 2,
            "slots": [slot("a", 1, T + 1000), slot("b", 2, T + 1000)],
        }
    )
    assert _native._storage_renew_semaphore(storage, "sems", "pool", 0, "a", 1, T + 500, T + 9000)
    assert _native._storage_renew_semaphore(storage, "sems", "pool", 0, "a", 1, T + 200, T + 5000)
    doc = db["sems"].find_one({"_id": "pool"})
    assert ms(doc["slots"][0]["ts_expire"]) == T + 9000
    assert ms(doc["slots"][1]["ts_expire"]) == T + 1000
    assert not _native._storage_renew_semaphore(storage, "sems", "pool", 0, "a", 2, T, T + 5000)


def put_pool(db, key, slots):
    db["sems"].insert_one(
        {
            "_id": key,
            "limit": len(slots),
            "fence": len(slots),
            "slots": [
                {
                    "uuid": u,
                    "host": "h",
                    "pid": 1,
                    "fence": f,
                    "ts_created": at(T),
                    "ts_expire": at(e),
                }
                for u, f, e in slots
            ],
        }
    )


def slot_expiry(db, key, i):
    return ms(db["sems"].find_one({"_id": key})["slots"][i]["ts_expire"])


def test_a_slot_batch_renews_by_slot_uuid_and_fence_and_decides_by_reading_back(db, storage):
    put_pool(db, "pool", [("a", 1, T + 1000), ("b", 2, T + 1000), ("c", 3, T + 30_000)])
    put_pool(db, "other", [("d", 1, T + 1000)])
    requests = [
        ("pool", 0, "a", 1, T + 5000),  # two slots of one key, one batch
        ("pool", 1, "b", 2, T + 6000),
        ("pool", 2, "c", 3, T + 9000),  # already later: kept, and renewed
        ("other", 0, "d", 1, T + 7000),
        ("other", 0, "x", 1, T + 7000),  # another uuid
        ("other", 0, "d", 2, T + 7000),  # another fence
        ("pool", 1, "a", 1, T + 7000),  # another slot
        ("missing", 0, "a", 1, T + 7000),
    ]
    renewed = _native._storage_renew_semaphores(storage, "sems", requests, T + 500)
    assert renewed == [True, True, True, True, False, False, False, False]
    assert [slot_expiry(db, "pool", i) for i in range(3)] == [T + 5000, T + 6000, T + 30_000]
    assert slot_expiry(db, "other", 0) == T + 7000
    # An expired slot is not revived; an empty batch is fine.
    assert _native._storage_renew_semaphores(
        storage, "sems", [("pool", 0, "a", 1, T + 9000)], T + 5000
    ) == [False]
    assert slot_expiry(db, "pool", 0) == T + 5000
    assert _native._storage_renew_semaphores(storage, "sems", [], T) == []
