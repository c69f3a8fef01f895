"""Partitioner: a group's N partitions spread over its live members, each fenced.

::

    def assigned(p: int, token: int) -> None: ...   # start working on partition p
    def revoked(p: int) -> None: ...                # stop; flush what must be flushed

    with mongoelector.Partitioner("ingest", db, partitions=32,
                                  on_assigned=assigned, on_revoked=revoked) as part:
        ...                      # part.owned() -> {partition: token}

Each partition is owned by the member that rendezvous hashing picks among the live
members, through a keep-alive lease on the partition's lock with its own fencing token
(``token(p)``; pass it to ``FencedCollection(coll, lambda: part.token(p))``). When a
member joins, leaves or dies, only the partitions concerned move: a graceful move runs
the old owner's ``on_revoked(p)`` to completion before the new owner's ``on_assigned``;
a dead member's partitions move when their leases expire. The member loop, the
renewals (one batch per client) and the callbacks run on the native core's threads;
callbacks take the GIL only while they run, one at a time per partitioner.
"""

from __future__ import annotations

import logging
import numbers
import weakref
from datetime import datetime
from types import TracebackType
from typing import Callable, Dict, List, Literal, Optional, Type, TypedDict, TypeVar, cast

from . import _lifecycle, _native, _transport
from ._transport import DatabaseArg
from .locker import _Closed, _identity
from .observer import _seconds

__all__ = ["Partitioner", "PartitionStatus", "PartitionOwner", "PartitionMember"]

log = logging.getLogger(__name__)

#: on_assigned(partition, token) and on_revoked(partition); return values are ignored.
AssignedCallback = Callable[[int, int], object]
RevokedCallback = Callable[[int], object]

_P = TypeVar("_P", bound="Partitioner")

#: Largest number of partitions (the core's kMaxPartitions).
MAX_PARTITIONS = 100000


class PartitionMember(TypedDict):
    uuid: str
    host: str
    pid: int
    live: bool
    running: bool
    expires: Optional[datetime]
    owned: int  # partitions it holds now
    assigned: int  # partitions rendezvous gives it


class PartitionOwner(TypedDict):
    partition: int
    key: str  # "<group>/<partition>": the partition's lock
    owner: Optional[str]  # the holder's uuid while held
    host: Optional[str]
    pid: Optional[int]
    token: int  # the lock's fencing token (0: never held)
    expires: Optional[datetime]
    assigned: Optional[str]  # the member rendezvous gives it
    conflict: Optional[str]  # another kind of document at the key


class PartitionStatus(TypedDict):
    """``Partitioner.status()``: the group as its documents show it."""

    group: str
    partitions: int
    timestamp: datetime
    members: List[PartitionMember]
    owners: List[PartitionOwner]
    conflicts: List[str]
    settled: bool  # every partition held, by the member rendezvous gives it


def _check_partitions(partitions: object) -> int:
    if isinstance(partitions, bool) or not isinstance(partitions, numbers.Integral):
        raise TypeError("partitions must be an int, not %s" % type(partitions).__name__)
    n = int(partitions)
    if not 1 <= n <= MAX_PARTITIONS:
        raise ValueError(
            "partitions must be a whole number in [1, %d], got %d" % (MAX_PARTITIONS, n)
        )
    return n


def _dispatch(part: Partitioner, name: str) -> Callable[..., None]:
    """The function the native member calls: it holds the partitioner weakly (the
    native object must not keep its Python owner alive)."""
    ref = weakref.ref(part)

    def call(*args: int) -> None:
        self = ref()
        if self is not None:
            getattr(self, name)(*args)

    return call


class Partitioner:
    """A member of ``group``, whose ``partitions`` partitions are shared by its live
    members (rendezvous hashing), each owned through a fenced keep-alive lease.

    ``db`` is what ``MongoLocker`` takes: a pymongo ``Database``, a ``mongodb://`` URI
    (with ``database=`` when it names none), ``sqlite:///path`` or ``memory://NAME``
    (``mongoelector.testing``), or a ``mongoelector.Client``. Every member of a group
    must use the same ``partitions`` (a member of another count is refused at
    ``start()``). ``ttl``: seconds a lease (and a member's report) lives without
    renewal: a dead member's partitions move about one ttl after its death. ``poll``:
    seconds between the member's looks at the group (default ttl/3, at most ttl/2).

    ``on_assigned(partition, token)`` and ``on_revoked(partition)`` run on a native
    callback thread with the GIL, one at a time per partitioner; per partition always
    assigned, then revoked. A graceful move (a member joined or left) calls the old
    owner's ``on_revoked`` and releases the partition only once it has returned, so the
    new owner's ``on_assigned`` comes after it; while it runs the lease is still renewed.
    A partition whose lease is lost (its member cut off from the database beyond its
    renew deadline) is revoked too, but someone else may take it while that callback
    still runs: fence the writes. An exception in a callback is logged (logger
    ``mongoelector``).

    ``start()`` joins (``ValueError`` when the group's key holds another kind of document
    or a live member has another number of partitions; nothing is written then),
    ``stop()`` leaves: every partition held is revoked and released. Use ``with`` for
    both. ``close()`` also frees the native member and, for a URI, the connections.
    """

    group: str
    partitions: int
    ttl: float
    #: The ``db`` argument as given.
    db: DatabaseArg

    def __init__(
        self,
        group: str,
        db: DatabaseArg,
        *,
        partitions: int,
        ttl: float = 15,
        poll: Optional[float] = None,
        on_assigned: Optional[AssignedCallback] = None,
        on_revoked: Optional[RevokedCallback] = None,
        database: Optional[str] = None,
        op_timeout: Optional[float] = None,
        collection: str = "partitioner.locks",
        members_collection: str = "partitioner.members",
    ) -> None:
        _transport.check_db(db, database)
        if not isinstance(group, str):
            raise TypeError("group must be a str, not %s" % type(group).__name__)
        if not group:
            raise ValueError("group must not be empty")
        n = _check_partitions(partitions)
        ttl_s = _seconds("ttl", ttl)
        assert ttl_s is not None
        if not 0 < ttl_s <= 1e9:
            raise ValueError("ttl must be a positive number of seconds, got %r" % (ttl,))
        poll_s = _seconds("poll", poll, allow_none=True)
        if poll_s is not None and not 0 < poll_s <= ttl_s / 2:
            raise ValueError("poll must be a number of seconds in (0, ttl/2], got %r" % (poll,))
        for name, fn in (("on_assigned", on_assigned), ("on_revoked", on_revoked)):
            if fn is not None and not callable(fn):
                raise TypeError("%s must be callable or None" % name)
        _lifecycle.sweep()
        self.group = group
        self.partitions = n
        self.ttl = ttl
        self.db = db
        self._on_assigned = on_assigned
        self._on_revoked = on_revoked
        self._closed = False
        if op_timeout is None:
            op_timeout = _transport.op_timeout_for(ttl_s)
        storage, use = _transport.open_storage(db, database=database, op_timeout=op_timeout)
        try:
            self._core = _native.Partitioner(
                storage,
                group,
                n,
                ttl_s,
                poll_s,
                _dispatch(self, "_assigned") if on_assigned is not None else None,
                _dispatch(self, "_revoked") if on_revoked is not None else None,
                locks_collection=collection,
                members_collection=members_collection,
                identity=_identity(),
            )
        except BaseException:
            del storage
            if use is not None:
                use.end()
            raise
        self._use = use

    # The native callbacks (a native thread, GIL taken): errors are logged here.
    def _assigned(self, partition: int, token: int) -> None:
        fn = self._on_assigned
        if fn is not None:
            try:
                fn(partition, token)
            except Exception:
                log.exception("Error in on_assigned callback (partition %d)", partition)

    def _revoked(self, partition: int) -> None:
        fn = self._on_revoked
        if fn is not None:
            try:
                fn(partition)
            except Exception:
                log.exception("Error in on_revoked callback (partition %d)", partition)

    @property
    def uuid(self) -> str:
        """This member's uuid (the owner named in the partitions' lock documents)."""
        return self._core.uuid

    @property
    def running(self) -> bool:
        """True while the member loop runs (``start()`` until ``stop()``)."""
        return bool(self._core.running)

    @property
    def closed(self) -> bool:
        return self._closed

    def start(self) -> None:
        """Joins the group (one read first; see the class doc) and starts the member loop."""
        core = self._core
        start = core.start  # ClosedError after close()
        if _lifecycle._exiting:
            raise RuntimeError("cannot start a partitioner while the interpreter exits")
        start()
        _lifecycle.track(self)

    def stop(self) -> None:
        """Leaves the group: its report says so at once, ``on_revoked`` runs for every
        partition held and each is released (fenced) once it has returned. Waits for all
        of it, except from one of this partitioner's callbacks (it then only asks)."""
        self._core.stop()

    def poll(self) -> None:
        """One poll of the member loop now (tests; the loop polls by itself)."""
        self._core.poll()

    def owned(self) -> Dict[int, int]:
        """``{partition: token}`` of the partitions this member owns now: those whose
        lease is not lost (read from its renew deadline and the monotonic clock) and not
        being released. No round trip."""
        return dict(self._core.owned())

    def token(self, partition: int) -> Optional[int]:
        """The fencing token of ``partition`` while this member owns it, else None
        (``FencedCollection(coll, lambda: part.token(p))`` fences writes with it)."""
        return self._core.token(int(partition))

    def assignment(self) -> Dict[int, str]:
        """``{partition: member uuid}`` as this member computed it at its last look at
        the group (rendezvous over the live members); empty before the first."""
        return {p: u for p, u in enumerate(self._core.assignment()) if u}

    def members(self) -> List[str]:
        """The live members' uuids seen at the last look at the group (sorted)."""
        return list(self._core.members())

    def status(self) -> PartitionStatus:
        """The group as its documents show it now: each partition's owner, token and
        expiry, each member's report (one read of the reports, one per partition)."""
        return cast(PartitionStatus, self._core.status())

    def close(self) -> None:
        """``stop()``, then frees the native member and (for a URI, when no other user
        of it is left) the connections. Idempotent; other uses afterwards raise
        ``ClosedError``."""
        if self._closed:
            return
        try:
            self._core.stop()
        finally:
            with _lifecycle._lock:
                _lifecycle._running.discard(self)
                core = self._core
                use = self._use
                self._closed = True
                self._use = None
                self._core = cast(_native.Partitioner, _Closed(f"Partitioner {self.group!r}"))
            del core
            if use is not None:
                use.end()

    def __enter__(self: _P) -> _P:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> Literal[False]:
        self.stop()
        return False

    def __repr__(self) -> str:
        if self._closed:
            return f"Partitioner(group={self.group!r}, closed)"
        state = "running" if self.running else "stopped"
        return (
            f"Partitioner(group={self.group!r}, partitions={self.partitions}, {state}, "
            f"owned={len(self.owned())}, uuid={self.uuid!r})"
        )


def partition_status(
    group: str,
    db: DatabaseArg,
    *,
    partitions: Optional[int] = None,
    database: Optional[str] = None,
    collection: str = "partitioner.locks",
    members_collection: str = "partitioner.members",
) -> PartitionStatus:
    """The assignment of ``group`` as its documents show it, without joining: each
    partition's owner (uuid), token and expiry, and each member's report. ``partitions``:
    None to take it from the live members (``ValueError`` when none is live)."""
    n = None if partitions is None else _check_partitions(partitions)
    storage, use = _transport.open_storage(
        db, database=database, op_timeout=_transport.op_timeout_for(15)
    )
    try:
        return cast(
            PartitionStatus,
            _native.partition_status(
                storage,
                group,
                n,
                locks_collection=collection,
                members_collection=members_collection,
            ),
        )
    finally:
        del storage
        if use is not None:
            use.end()
