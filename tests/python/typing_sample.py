"""A user's script: mongoelector's public API used the way an application uses it.

tests/python/test_typing.py type-checks this file against the INSTALLED package with
``mypy --strict`` and pyright (strict), with no ``type: ignore`` anywhere, and runs it
against the test server. Type-checking needs no server; running it does::

    python tests/python/typing_sample.py mongodb://127.0.0.1:27017/

It works in a fresh database of its own and drops it at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
import uuid
from datetime import datetime
from typing import Any, Dict, List, Mapping, Optional

import mongoelector
from mongoelector import (
    AcquireTimeout,
    Client,
    ClosedError,
    ClusterDetail,
    LeaderObserver,
    LeaderState,
    LeaderStatus,
    LeaseLost,
    LockerStatus,
    LockExists,
    MongoElectorError,
    MongoLeaderElector,
    MongoLocker,
    MongoReadWriteLock,
    NodeStatus,
    RwLockHolders,
    RwLockLease,
    StorageUnavailable,
    lease,
    observe,
)
from mongoelector.aio import AsyncMongoReadWriteLock, AsyncRwLockLease
from mongoelector.lease import Lease
from pymongo import MongoClient
from pymongo.database import Database

log = logging.getLogger("typing_sample")


def uri_with_db(uri: str, name: str) -> str:
    """mongodb://host:port/?opts + name -> mongodb://host:port/name?opts"""
    scheme, rest = uri.split("://", 1)
    hosts, _, opts = rest.partition("?")
    return f"{scheme}://{hosts.split('/', 1)[0]}/{name}" + (f"?{opts}" if opts else "")


def pay_invoice(db: Database[Dict[str, Any]], lock: MongoLocker) -> bool:
    """A write guarded by the lock's fencing token (README, "Fencing tokens")."""
    token: Optional[int] = lock.fence
    if token is None:
        raise RuntimeError("not holding the lock")
    result = db.invoices.update_one(
        {"_id": 42, "fence": {"$lte": token}},
        {"$set": {"status": "paid", "fence": token}},
    )
    return result.matched_count == 1


def describe(status: LockerStatus) -> str:
    created: Optional[datetime] = status["lock_created"]
    expires: Optional[datetime] = status["lock_expires"]
    owned: bool = status["lock_owned"]
    return (
        f"{status['key']} ttl={status['ttl']} owned={owned} pid={status['pid']} "
        f"created={created} expires={expires}"
    )


def as_plain_dict(doc: Mapping[str, object]) -> Dict[str, object]:
    return dict(doc)


def use_locker(db: Database[Dict[str, Any]], uri: str) -> None:
    db.invoices.insert_one({"_id": 42, "status": "open", "fence": 0})

    # A locker that owns its connections (URI): closed at the end of the block; inside,
    # "with lock:" acquires and releases as in the original package.
    with contextlib.closing(MongoLocker("invoice-42", uri, ttl=30, timeparanoid=False)) as lock:
        with lock:
            assert pay_invoice(db, lock)
            print(describe(lock.status))

        acquired: bool = lock.acquire(blocking=True, timeout=5.0, step=0.1)
        assert acquired and lock.owned() and lock.locked()
        renewed: Optional[datetime] = lock.touch()
        expires: Optional[datetime] = lock.ts_expire
        assert renewed is not None and expires is not None and renewed == expires
        current: Optional[Dict[str, Any]] = lock.get_current()
        if current is not None:
            print("holder:", current.get("host"), current.get("pid"), current.get("fence"))

        # Another node (here on the caller's pymongo Database) meets the held lock.
        other = MongoLocker("invoice-42", db, ttl=30, delete_on_release=False, op_timeout=2.0)
        try:
            other.acquire(blocking=False)
        except LockExists as exc:
            print("busy:", exc)
        try:
            other.acquire(timeout=0.3, step=0.1)
        except AcquireTimeout as exc:
            print("gave up:", exc)
        except MongoElectorError as exc:  # the base class of every mongoelector error
            print("other error:", exc)
        lock.release()
        assert other.acquire(blocking=False)
        print(repr(other), as_plain_dict(other.status))
        other.close()  # releases its hold; the pymongo client stays open

    try:
        lock.owned()
    except ClosedError as exc:
        print("closed:", exc)
    assert lock.closed


def use_shared_client(uri: str) -> None:
    client = Client(uri + ("&" if "?" in uri else "?") + "maxPoolSize=4")
    locks: List[MongoLocker] = [MongoLocker(f"tenant-{i}", client, ttl=15) for i in range(3)]
    for lk in locks:
        lk.acquire(blocking=False)
    fences = [lk.fence for lk in locks]
    print(client, client.database, client.pool_size, fences)
    for lk in locks:
        lk.close()


def use_elector(uri: str) -> None:
    became_leader = threading.Event()

    def on_leader() -> None:
        became_leader.set()

    def on_loop() -> None:
        pass

    elector = MongoLeaderElector(
        "sample-service",
        uri,
        ttl=3,
        on_leader=on_leader,
        on_leader_loss=lambda: log.info("lost leadership"),
        app_version="1.0.0",
        report_status=True,
    )
    elector.callback_on_loop = on_loop
    # Runs the loop inside the block, stops it and frees the elector after it.
    with contextlib.closing(elector), elector:
        assert became_leader.wait(10)
        leading: bool = elector.is_leader
        running: bool = elector.running
        fence: Optional[int] = elector.fence
        node: NodeStatus = elector.node_status
        cluster: ClusterDetail = elector.cluster_detail
        leader = cluster["leader"]
        if leader is not None:
            print("leader:", leader["host"], leader["process_id"], leader["uuid"])
        members: List[Dict[str, Any]] = cluster["member_detail"]
        wait: float = elector.poll_wait
        print(
            leading,
            running,
            fence,
            node["is_leader"],
            node["last_poll"],
            node.get("app_version"),
            len(members),
            wait,
            elector.leader_exists,
        )
        print(describe(elector.mlock.status))
    assert elector.closed


def use_observer(db: Database[Dict[str, Any]], uri: str) -> None:
    elector = MongoLeaderElector("observed-service", uri, ttl=3, handover_poll=0.5)
    changes: LeaderObserver
    with observe(db, "observed-service", interval=0.1) as changes, contextlib.closing(elector):
        first: LeaderState = next(changes)  # the current state: nobody leads yet
        elector.start()
        state: Optional[LeaderState] = changes.get(timeout=10)
        if state is not None and state.has_leader:
            fence: Optional[int] = state.fence
            print(
                "observed",
                first.has_leader,
                state.uuid,
                state.host,
                state.pid,
                fence,
                state.server_time.isoformat(),
            )
            until: Optional[datetime] = state.expires
            status: LeaderStatus = state.status
            target: Optional[str] = state.handover_uuid
            print(
                "lease until",
                until,
                status.value,
                status == "leader",
                target,
                state.handover_host,
                state.handover_pid,
                state.handover_fence,
            )
        elector.stop()

    async def watch() -> List[LeaderState]:
        seen: List[LeaderState] = []
        async with observe(uri, "observed-service", interval=0.1) as stream:
            async for s in stream:
                seen.append(s)
                break
        return seen

    print("async", [s.has_leader for s in asyncio.run(watch())])


def use_lease(db: Database[Dict[str, Any]], uri: str) -> None:
    held: Lease
    with lease(uri, "nightly-report", ttl=10, timeout=5, op_timeout=1.0) as held:
        held.check()  # raises LeaseLost once the lease is lost
        token: Optional[int] = held.fence
        print("lease", token, held.reason == "", held.wait_lost(0.01))
    held.locker.close()  # the lease's locker owns the URI's connections

    try:
        with lease(db, "nightly-report", ttl=10, blocking=False, dbcollection="leases") as other:
            other.check()
    except LeaseLost as exc:
        print("lost:", exc)
    except StorageUnavailable as exc:  # with a URI: the server is unreachable (a pymongo
        print("unreachable:", exc)  # ConnectionFailure, as pymongo's own errors are)


def use_rwlock(db: Database[Dict[str, Any]], uri: str) -> None:
    catalog = MongoReadWriteLock("catalog", db, ttl=10, max_readers=8)
    writer = MongoReadWriteLock("catalog", uri, ttl=10, max_readers=8, writer_preference=False)
    hold: RwLockLease
    with catalog.read(timeout=5) as hold:
        hold.check()
        token: Optional[int] = hold.fence
        who: RwLockHolders = writer.holders()
        print("reading", token, hold.side, [r["pid"] for r in who["readers"]], who["writer"])
    if writer.acquire("write", blocking=False):
        side: Optional[str] = writer.side
        print("writing", writer.fence, side, writer.ts_expire)
        writer.release()
    writer.close()
    catalog.close()

    async def in_a_task() -> Optional[int]:
        rw = AsyncMongoReadWriteLock("catalog", uri, ttl=10, max_readers=8)
        held: AsyncRwLockLease
        async with rw.write(timeout=5) as held:
            held.check()
            who: RwLockHolders = await rw.holders()
            assert who["writer"] is not None and who["writer"]["uuid"] == rw.uuid
        await rw.close()
        return held.fence

    print("async writing", asyncio.run(in_a_task()))


def main(argv: List[str]) -> int:
    logging.basicConfig(level=logging.WARNING)
    if len(argv) != 2:
        print(f"usage: {argv[0]} mongodb://host:port/", file=sys.stderr)
        return 2
    name = "typing_sample_" + uuid.uuid4().hex[:8]
    client: MongoClient[Dict[str, Any]] = MongoClient(argv[1], serverSelectionTimeoutMS=5000)
    try:
        db = client[name]
        uri = uri_with_db(argv[1], name)
        use_locker(db, uri)
        use_shared_client(uri)
        use_elector(uri)
        use_observer(db, uri)
        use_lease(db, uri)
        use_rwlock(db, uri)
        print("mongoelector", mongoelector.__version__, "OK")
        return 0
    finally:
        client.drop_database(name)
        client.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
