"""MongoLocker: the contract of mongoelector 1.0 (every backend), plus what we promise
beyond it (fencing, takeover at expiry)."""

import os
import socket
import time
import uuid
from datetime import datetime, timedelta, timezone
from unittest import mock

import mongoelector
import mongoelector.locker
import mongomock
import pymongo
import pytest
from mongoelector import AcquireTimeout, LockExists, MongoLocker, TimeOffsetError

UTC = timezone.utc


def new_key():
    return "key-" + uuid.uuid4().hex[:8]


def coll_of(backend, name="mongolocker"):
    return backend.raw[name]


# ------------------------------------------------------------------ package ---


def test_public_names():
    for name in (
        "MongoLocker",
        "MongoLeaderElector",
        "LockExists",
        "AcquireTimeout",
        "TimeOffsetError",
        "__version__",
    ):
        assert hasattr(mongoelector, name), name
    import mongoelector.elector as el
    import mongoelector.locker as lk

    for name in ("MongoLocker", "LockExists", "AcquireTimeout", "TimeOffsetError"):
        assert getattr(lk, name) is getattr(mongoelector, name)
    assert el.MongoLeaderElector is mongoelector.MongoLeaderElector
    assert isinstance(mongoelector.__version__, str) and mongoelector.__version__[0].isdigit()


@pytest.mark.parametrize("exc", [LockExists, AcquireTimeout, TimeOffsetError])
def test_exceptions_are_exceptions(exc):
    assert issubclass(exc, Exception)
    assert exc.__module__ == "mongoelector.locker"
    with pytest.raises(exc, match="boom"):
        raise exc("boom")


def test_native_module_is_private_and_typed():
    import importlib.resources as res

    from mongoelector import _native

    assert _native.__name__ == "mongoelector._native"
    files = {p.name for p in res.files("mongoelector").iterdir()}
    assert {"py.typed", "_native.pyi"} <= files


# ------------------------------------------------------------ construction ---


@pytest.mark.parametrize(
    "bad",
    [
        None,
        42,
        mongomock.MongoClient(),
        pymongo.MongoClient("mongodb://127.0.0.1:1/", connect=False),
    ],
)
def test_db_without_create_collection_is_a_type_error(bad):
    with pytest.raises(TypeError, match="Must pass a pymongo Database instance"):
        MongoLocker("k", bad)


def test_non_uri_string_is_a_type_error():
    with pytest.raises(TypeError):
        MongoLocker("k", "not a uri")


def test_uri_without_database_is_a_value_error():
    with pytest.raises(ValueError, match="names no database"):
        MongoLocker("k", "mongodb://127.0.0.1:1/")


@pytest.mark.parametrize("key", ["", None])
def test_empty_key_is_a_value_error(backend, key):
    with pytest.raises(ValueError, match="Must provide a non-empty lock key"):
        MongoLocker(key, backend.db)


@pytest.mark.parametrize("ttl", ["10", 0, -1, -0.5, None, [1]])
def test_bad_ttl_is_a_value_error(backend, ttl):
    with pytest.raises(ValueError, match="ttl must be a positive number"):
        MongoLocker("k", backend.db, ttl=ttl)


def test_float_ttl_allowed(backend):
    lock = MongoLocker(new_key(), backend.db, ttl=2.5)
    assert lock._ttl == 2.5
    lock.acquire()
    doc = lock.get_current()
    assert doc["ts_expire"] - doc["ts_created"] == timedelta(seconds=2.5)


def test_ttl_index_created(backend):
    MongoLocker("k", backend.db, dbcollection="mylocks")
    info = coll_of(backend, "mylocks").index_information()
    ttl = [v for v in info.values() if v["key"] == [("ts_expire", 1)]]
    assert ttl and ttl[0]["expireAfterSeconds"] == 0


def test_conflicting_index_is_replaced(db_backend):
    coll = coll_of(db_backend)
    coll.create_index("ts_expire", expireAfterSeconds=100)
    MongoLocker("k", db_backend.db)
    info = coll.index_information()
    assert [v["expireAfterSeconds"] for v in info.values() if v["key"] == [("ts_expire", 1)]] == [0]


def test_attributes(backend):
    lock = MongoLocker("thekey", backend.db, ttl=30, timeparanoid=False, maxoffset=2.0)
    assert uuid.UUID(lock.uuid).version == 4 and str(uuid.UUID(lock.uuid)) == lock.uuid
    assert lock.host == socket.getfqdn()
    assert lock.pid == os.getpid()
    assert lock.key == "thekey"
    assert lock.timeparanoid is False
    assert lock.ts_expire is None
    assert lock._ttl == 30 and lock._maxoffset == 2.0
    assert MongoLocker("thekey", backend.db).uuid != lock.uuid
    if not backend.kind == "uri":
        assert lock.collection.name == "mongolocker"


def test_repr(backend):
    lock = MongoLocker("k", backend.db)
    assert (
        repr(lock) == f"MongoLocker(key='k', uuid='{lock.uuid}', host='{lock.host}', owned=False)"
    )
    lock.acquire()
    assert repr(lock).endswith("owned=True)")


# ------------------------------------------------------------------ acquire ---


def test_acquire_writes_the_original_document(backend):
    key = new_key()
    lock = MongoLocker(key, backend.db, ttl=60)
    before = datetime.now(UTC) - timedelta(seconds=1)
    assert lock.acquire() is True
    doc = coll_of(backend).find_one({"_id": key})
    assert list(doc)[:7] == ["_id", "locked", "host", "uuid", "pid", "ts_created", "ts_expire"]
    assert doc["locked"] is True and doc["host"] == lock.host and doc["uuid"] == lock.uuid
    assert doc["pid"] == os.getpid()
    created = doc["ts_created"].replace(tzinfo=UTC)
    assert before <= created <= datetime.now(UTC) + timedelta(seconds=1)
    assert doc["ts_expire"] - doc["ts_created"] == timedelta(seconds=60)
    assert lock.ts_expire.tzinfo is not None
    assert lock.ts_expire == doc["ts_expire"].replace(tzinfo=UTC)


def test_nonblocking_with_timeout_is_a_value_error(backend):
    lock = MongoLocker("k", backend.db)
    with pytest.raises(ValueError):
        lock.acquire(blocking=False, timeout=5)


def test_nonblocking_on_held_lock_raises_lock_exists(backend):
    key = new_key()
    holder = MongoLocker(key, backend.db)
    holder.acquire()
    other = MongoLocker(key, backend.db)
    with pytest.raises(LockExists) as info:
        other.acquire(blocking=False)
    assert str(info.value) == f"{key} owned by {holder.host} pid {holder.pid}"
    assert holder.owned() and not other.owned()


def test_blocking_times_out(backend):
    key = new_key()
    MongoLocker(key, backend.db).acquire()
    other = MongoLocker(key, backend.db)
    t0 = time.monotonic()
    with pytest.raises(AcquireTimeout, match="Timeout reached, lock not acquired"):
        other.acquire(timeout=0.6, step=0.1)
    assert 0.5 <= time.monotonic() - t0 < 3


def test_blocking_retries_every_step_and_wins_when_released(backend):
    key = new_key()
    holder = MongoLocker(key, backend.db)
    holder.acquire()
    other = MongoLocker(key, backend.db)
    calls = []

    def fake_sleep(s):
        calls.append(s)
        if len(calls) == 3:
            holder.release()

    with mock.patch("mongoelector.locker.sleep", side_effect=fake_sleep):
        assert other.acquire(step=0.123) is True
    assert calls == [0.123] * 3
    assert other.owned()


def test_force_takes_a_held_lock(backend):
    key = new_key()
    holder = MongoLocker(key, backend.db)
    holder.acquire()
    thief = MongoLocker(key, backend.db)
    assert thief.acquire(blocking=False, force=True) is True
    assert thief.owned() and not holder.owned()
    assert thief.fence > holder_fence_or_zero(holder)


def holder_fence_or_zero(lock):
    doc = lock._core.hold
    return doc[0] if doc else 0


def test_expired_lock_is_taken_over_at_once(backend):
    """Beyond the original: no waiting for MongoDB's TTL monitor."""
    key = new_key()
    MongoLocker(key, backend.db, ttl=0.5).acquire()
    time.sleep(0.6)
    assert MongoLocker(key, backend.db).acquire(blocking=False) is True


def test_lock_of_an_original_node_is_respected(backend):
    """A document written by mongoelector 1.0 (no fence field) holds the lock."""
    key = new_key()
    now = datetime.now(UTC)
    coll_of(backend).insert_one(
        {
            "_id": key,
            "locked": True,
            "host": "old-node",
            "uuid": "u-old",
            "pid": 7,
            "ts_created": now,
            "ts_expire": now + timedelta(seconds=1),
        }
    )
    lock = MongoLocker(key, backend.db)
    with pytest.raises(LockExists, match=f"^{key} owned by old-node pid 7$"):
        lock.acquire(blocking=False)
    assert lock.locked() and not lock.owned()
    time.sleep(1.1)
    assert lock.acquire(blocking=False) and lock.owned()


# ------------------------------------------------------------- time checks ---


def test_acquire_calls_patched_verifytime(backend):
    with mock.patch("mongoelector.locker.MongoLocker._verifytime", return_value=True) as vt:
        lock = MongoLocker(new_key(), backend.db)
        lock.acquire()
        assert vt.call_count == 1
        lock.timeparanoid = False
        lock.release()
        lock.acquire()
        assert vt.call_count == 1


def test_verifytime_error_propagates_from_acquire(backend):
    err = TimeOffsetError("Clock offset vs MongoDB is too high: 3.0s")
    with mock.patch("mongoelector.locker.MongoLocker._verifytime", side_effect=err):
        lock = MongoLocker(new_key(), backend.db)
        with pytest.raises(TimeOffsetError):
            lock.acquire()
        assert not lock.locked()


def test_patched_acquireretry_is_used(backend):
    with mock.patch("mongoelector.locker.MongoLocker._acquireretry", return_value=False) as ar:
        lock = MongoLocker(new_key(), backend.db)
        with pytest.raises(AcquireTimeout):
            lock.acquire()
        blocking, start, timeout, count = ar.call_args.args
        assert (blocking, timeout, count) == (True, None, 0) and isinstance(start, datetime)


def test_verifytime_real_check_and_cache(backend):
    lock = MongoLocker(new_key(), backend.db, maxoffset=0.5)
    assert lock._verifytime() is True  # same host: offset well below 0.5 s
    assert lock._sanetime is not None
    lock._maxoffset = -1  # any offset is too much now, but the good check is cached
    assert lock._verifytime() is True
    lock._sanetime = None
    with pytest.raises(
        TimeOffsetError, match=r"^Clock offset vs MongoDB is too high: \d+(\.\d+)?s$"
    ):
        lock._verifytime()
    lock._sanetime = datetime.now(UTC) - timedelta(minutes=11)  # stale: checked again
    with pytest.raises(TimeOffsetError):
        lock.acquire()


def test_timeparanoid_false_skips_the_check(backend):
    lock = MongoLocker(new_key(), backend.db, timeparanoid=False, maxoffset=-1)
    assert lock.acquire()


def test_acquireretry_rule():
    rr = MongoLocker._acquireretry
    now = datetime.now(UTC)
    with pytest.raises(ValueError):
        rr(False, now, 5, 0)
    assert rr(False, now, None, 0) is True
    assert rr(False, now, None, 1) is False
    assert rr(True, now, None, 10**6) is True
    assert rr(True, now, 5, 3) is True
    assert rr(True, now - timedelta(seconds=10), 5, 3) is False


# ---------------------------------------------------- release, touch, state ---


def test_release(backend):
    key = new_key()
    lock = MongoLocker(key, backend.db)
    lock.acquire()
    assert lock.release() is None
    assert not lock.locked() and not lock.owned() and lock.get_current() is None
    assert coll_of(backend).find_one({"_id": key}) is None  # deleted, as the original does


def test_release_without_delete_marks_the_document(backend):
    key = new_key()
    lock = MongoLocker(key, backend.db, delete_on_release=False)
    lock.acquire()
    lock.release()
    doc = coll_of(backend).find_one({"_id": key})
    if backend.kind != "mongomock":  # mongomock's TTL emulation deletes it at once
        assert doc["locked"] is False and doc["uuid"] == lock.uuid
    assert not lock.locked() and lock.get_current() is None
    assert MongoLocker(key, backend.db).acquire(blocking=False)


def test_release_of_a_lock_not_held_leaves_the_holder_alone(backend):
    key = new_key()
    holder = MongoLocker(key, backend.db)
    other = MongoLocker(key, backend.db)
    other.release()  # nobody holds it: not an error
    holder.acquire()
    other.release()
    assert holder.owned()


def test_force_release(backend):
    key = new_key()
    holder = MongoLocker(key, backend.db)
    holder.acquire()
    MongoLocker(key, backend.db).release(force=True)
    assert not holder.owned() and not holder.locked()


def test_touch(backend):
    key = new_key()
    lock = MongoLocker(key, backend.db, ttl=5)
    assert lock.touch() is None  # not owned
    lock.acquire()
    first = lock.ts_expire
    time.sleep(0.05)
    new = lock.touch()
    assert isinstance(new, datetime) and new.tzinfo is not None
    assert new > first and lock.ts_expire == new
    assert lock.get_current()["ts_expire"] == new
    assert MongoLocker(key, backend.db).touch() is None  # another instance


def test_touch_after_expiry_returns_none(backend):
    lock = MongoLocker(new_key(), backend.db, ttl=0.3)
    lock.acquire()
    time.sleep(0.4)
    assert lock.touch() is None
    assert not lock.owned()


def test_locked_owned_get_current(backend):
    key = new_key()
    a = MongoLocker(key, backend.db, ttl=0.5)
    b = MongoLocker(key, backend.db)
    assert (a.locked(), a.owned(), a.get_current()) == (False, False, None)
    a.acquire()
    assert a.locked() and a.owned() and b.locked() and not b.owned()
    cur = b.get_current()
    assert isinstance(cur, dict) and cur["_id"] == key and cur["uuid"] == a.uuid
    assert cur["ts_expire"].tzinfo is not None
    time.sleep(0.6)  # expired: nobody holds it any more
    assert (a.locked(), a.owned(), b.get_current()) == (False, False, None)


def test_status(backend):
    key = new_key()
    lock = MongoLocker(key, backend.db, ttl=42)
    st = lock.status
    assert set(st) == {
        "uuid",
        "key",
        "ttl",
        "timestamp",
        "host",
        "pid",
        "lock_owned",
        "lock_created",
        "lock_expires",
    }
    assert (st["uuid"], st["key"], st["ttl"], st["host"], st["pid"]) == (
        lock.uuid,
        key,
        42,
        lock.host,
        lock.pid,
    )
    assert st["timestamp"].tzinfo is not None
    assert abs(st["timestamp"] - datetime.now(UTC)) < timedelta(seconds=5)
    assert (st["lock_owned"], st["lock_created"], st["lock_expires"]) == (False, None, None)
    lock.acquire()
    st = lock.status
    assert st["lock_owned"] is True
    assert st["lock_expires"] - st["lock_created"] == timedelta(seconds=42)
    other = MongoLocker(key, backend.db).status
    assert (other["lock_owned"], other["lock_created"]) == (False, None)


def test_context_manager(backend):
    key = new_key()
    with MongoLocker(key, backend.db) as lock:
        assert isinstance(lock, MongoLocker) and lock.owned()
    assert not lock.locked()
    with pytest.raises(RuntimeError, match="inside"):
        with MongoLocker(key, backend.db) as lock2:
            raise RuntimeError("inside")
    assert not lock2.locked()


# ----------------------------------------------------------------- fencing ---


@pytest.mark.parametrize("delete", [True, False], ids=["delete", "mark"])
def test_fence_increases_across_holds(backend, delete):
    key = new_key()
    a = MongoLocker(key, backend.db, delete_on_release=delete)
    b = MongoLocker(key, backend.db, delete_on_release=delete)
    assert a.fence is None
    a.acquire()
    t1 = a.fence
    assert isinstance(t1, int) and t1 > 0
    a.release()
    assert a.fence is None
    b.acquire()
    t2 = b.fence
    assert t2 > t1
    b.release()
    # The document disappears (TTL monitor, an original node's release): tokens still grow.
    coll_of(backend).delete_one({"_id": key})
    a.acquire()
    t3 = a.fence
    assert t3 > t2
    b.acquire(force=True)
    assert b.fence > t3 and b.get_current()["fence"] == b.fence


def test_fence_is_none_after_the_lease_ran_out(backend):
    lock = MongoLocker(new_key(), backend.db, ttl=0.3)
    lock.acquire()
    assert lock.fence is not None
    time.sleep(0.35)
    assert lock.fence is None


def test_fence_guards_a_write(backend):
    """The README example: a superseded holder's write is rejected."""
    key = new_key()
    data = backend.raw["guarded"]
    data.insert_one({"_id": "doc", "fence": 0, "value": None})

    def guarded_write(token, value):
        r = data.update_one(
            {"_id": "doc", "fence": {"$lte": token}}, {"$set": {"value": value, "fence": token}}
        )
        return r.matched_count == 1

    old = MongoLocker(key, backend.db, ttl=0.3)
    old.acquire()
    stale = old.fence
    time.sleep(0.35)  # old holder pauses past its lease
    new = MongoLocker(key, backend.db)
    new.acquire()
    assert guarded_write(new.fence, "new")
    assert not guarded_write(stale, "stale")
    assert data.find_one({"_id": "doc"})["value"] == "new"


# ---------------------------------------------------------- errors & input ---


def test_non_str_key_is_a_type_error(backend):
    with pytest.raises(TypeError):
        MongoLocker(5, backend.db)


def test_oversized_key_is_a_value_error(backend):
    with pytest.raises(ValueError):
        MongoLocker("x" * 5000, backend.db)


def test_pymongo_exceptions_propagate_unchanged():
    from flaky import FlakyDatabase

    db = FlakyDatabase(mongomock.MongoClient().testdb)
    lock = MongoLocker("k", db)
    boom = pymongo.errors.AutoReconnect("network is down")
    db.fail(boom)
    for call in (
        lock.acquire,
        lock.locked,
        lock.owned,
        lock.get_current,
        lambda: lock.acquire(blocking=False),
    ):
        with pytest.raises(pymongo.errors.AutoReconnect) as info:
            call()
        assert info.value is boom
    lock.release()  # holds nothing: nothing to send (the contract: not an error)
    db.heal()
    assert lock.acquire()
    db.fail(boom)
    with pytest.raises(pymongo.errors.AutoReconnect) as info:
        lock.release()  # a held lock whose release fails: the caller hears it
    assert info.value is boom
    db.heal()
    assert lock.owned()  # the failed release left the hold on the server...
    lock.release()  # ...and the next release (fenced) frees it
    assert not lock.locked()


def test_unreachable_server_raises_pymongo_error():
    db = pymongo.MongoClient("mongodb://127.0.0.1:1/", serverSelectionTimeoutMS=200).db
    t0 = time.monotonic()
    with pytest.raises(pymongo.errors.ServerSelectionTimeoutError):
        MongoLocker("k", db, ttl=5)
    assert time.monotonic() - t0 < 5


def test_unreachable_server_with_uri_transport():
    from mongoelector.errors import StorageUnavailable

    t0 = time.monotonic()
    with pytest.raises(StorageUnavailable) as info:
        MongoLocker("k", "mongodb://127.0.0.1:1/db?serverSelectionTimeoutMS=300", ttl=5)
    assert isinstance(info.value, pymongo.errors.ConnectionFailure)
    assert time.monotonic() - t0 < 5


def test_stub_matches_the_extension():
    """Every name of _native.pyi exists in the extension, with its methods."""
    import ast
    import importlib.resources as res

    from mongoelector import _native

    tree = ast.parse(res.files("mongoelector").joinpath("_native.pyi").read_text())
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            assert hasattr(_native, node.name), node.name
        if isinstance(node, ast.ClassDef):
            cls = getattr(_native, node.name)
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    assert hasattr(cls, item.name), f"{node.name}.{item.name}"


def test_async_database_is_refused_with_a_pointer():
    # pymongo's AsyncDatabase would be accepted as a lookalike and every call would get a
    # coroutine back; refused at construction instead, naming what to use.
    pytest.importorskip("pymongo.asynchronous.database")
    from mongoelector import MongoLeaderElector
    from pymongo import AsyncMongoClient

    client = AsyncMongoClient("mongodb://127.0.0.1:1/", connect=False)
    for make in (lambda: MongoLocker("k", client.app), lambda: MongoLeaderElector("k", client.app)):
        with pytest.raises(
            TypeError, match="asyncio database.*mongoelector.aio.*asyncio.to_thread"
        ):
            make()
