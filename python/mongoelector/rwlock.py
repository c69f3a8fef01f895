"""MongoReadWriteLock: many readers OR one writer on one key, each hold with a lease and a
fencing token.

::

    rw = MongoReadWriteLock("catalog", db, ttl=30)
    with rw.read() as hold:               # with other readers; no writer meanwhile
        rows = load(fence=hold.fence)
    with rw.write(timeout=10) as hold:    # alone: every reader and writer has left
        save(rows, fence=hold.fence)

The protocol runs in the native core (``core/semaphore/rwlock.h``), on the semaphore's
document and machinery: one document per key with ``max_readers`` reader slots, the writer
slot and a writer-waiting mark; a claim is one atomic compare-and-set, so a writer never
holds next to anyone, and no more than ``max_readers`` read at once, also under contention
and after ``kill -9`` (a dead holder's slot frees at its expiry). Every claim moves the
key's counter: a writer's token is greater than every token granted before it, readers'
and writers', so a resource that keeps the highest token it has seen (``mongoelector``'s
fenced-write helpers) refuses the writes of every holder the writer superseded.

Writer preference (the default): a writer that waits (a blocking ``write()``) marks the
key, and new readers wait for it while the readers already in finish; without it
(``writer_preference=False``) readers keep entering as long as any reader holds.

``read()`` and ``write()`` give an ``RwLockLease``: the hold kept alive by the core's
renewer while the ``with`` block runs (a long section does not lose it), ``lost`` and
``check()`` as ``mongoelector.lease``. ``acquire(side)`` and ``release()`` take and drop a
hold without keep-alive (``touch()`` renews it), as ``MongoSemaphore``'s. ``db`` is
what every class of the package takes (see ``MongoReadWriteLock``).
"""

from __future__ import annotations

from typing import Any, Callable, List, Literal, Optional, Protocol, TypedDict, cast

from . import _native
from ._slots import (
    MAX_LIMIT,
    NativeSlotHolder,
    NativeSlotLease,
    QueuedWaiter,
    SlotHandle,
    SlotHolder,
    SlotLease,
    check_args,
)
from ._transport import DatabaseArg, check_db, check_fair
from .errors import AcquireTimeout, LeaseLost, LockExists
from .locker import _identity

__all__ = [
    "MongoReadWriteLock",
    "RwLockLease",
    "RwLockHolders",
    "Side",
    "LockExists",
    "AcquireTimeout",
    "LeaseLost",
]

#: The side of a hold: ``"read"`` (shared with other readers) or ``"write"`` (alone).
Side = Literal["read", "write"]
_SIDES = ("read", "write")


class RwLockHolders(TypedDict):
    """Who holds a read-write lock, as ``MongoReadWriteLock.holders()`` reads it."""

    readers: List[SlotHolder]  # in slot order
    writer: Optional[SlotHolder]
    #: The writer whose waiting (writer preference) stops new readers, if any.
    waiting_writer: Optional[SlotHolder]
    #: The fair waiters (``fair=True``) still queued, first in line first.
    waiting: List[QueuedWaiter]


class _NativeRwLock(NativeSlotHolder, Protocol):
    """The private native binding (``_native._RwLock``), as this module uses it."""

    def acquire(
        self, side: str, blocking: bool = True, timeout: Optional[float] = None, step: float = 0.25
    ) -> int: ...
    def try_acquire(self, side: str) -> Optional[int]: ...
    def start_acquire(
        self, side: str, blocking: bool = True, timeout: Optional[float] = None, step: float = 0.25
    ) -> _native.AcquireRun: ...
    def drop_mark(self) -> None: ...
    def holders(self) -> RwLockHolders: ...
    @property
    def side(self) -> Optional[Side]: ...
    @property
    def waiting_mark(self) -> int: ...


# Looked up by name, as mongoelector.semaphore's.
_new_rwlock = cast(Callable[..., _NativeRwLock], getattr(_native, "_RwLock"))
_new_rwlock_lease = cast(Callable[..., NativeSlotLease], getattr(_native, "_RwLockLease"))


def _check_args(key: object, max_readers: object, ttl: object) -> None:
    """Run-time checks of what the annotations promise (callers may not type-check)."""
    check_args("read-write lock", key, "max_readers", max_readers, ttl, limit_max=MAX_LIMIT)


def _check_side(side: object) -> Side:
    if not isinstance(side, str):
        raise TypeError(f"side must be 'read' or 'write' (a str), not {type(side).__name__}")
    if side not in _SIDES:
        raise ValueError(f"side must be 'read' or 'write', not {side!r}")
    return cast(Side, side)


class MongoReadWriteLock(SlotHandle[_NativeRwLock]):
    """A read-write lock: any number of readers (up to ``max_readers``) OR one writer
    hold ``key`` at any instant.

    Args:
        key: the lock's name (its document's ``_id``).
        db: a pymongo ``Database``, a ``mongodb://host/dbname`` or ``sqlite:///path`` URI,
            or a ``mongoelector.Client``.
        ttl: lease of one hold, in seconds; a holder that neither releases nor renews
            within it (a dead process) loses its hold at that expiry. ``read()`` and
            ``write()`` renew it in the background.
        max_readers: how many readers at most (1 to 1000). Fixed per key when its
            document is created: an instance asking for another number gets
            ``ValueError`` at its first ``acquire()`` or ``holders()`` (nothing written).
        writer_preference: a waiting writer stops new readers (writers do not starve);
            False lets readers keep entering while any reader holds.
        fair: serve blocking writers in arrival order (FIFO): a writer that finds the
            lock taken joins the key's queue once (instead of the waiting mark) and only
            the head of the queue polls every ``step``; a dead writer holds up the others
            for at most one ``ttl``. With ``writer_preference``, a non-empty queue stops
            new readers as the mark does.
        dbcollection: collection of the lock documents ("mongorwlock"); its fencing
            epochs live in "<dbcollection>.fences". A key whose document there is
            another kind's (a semaphore's) is refused with ``ValueError``.
        timeparanoid, maxoffset: as ``MongoLocker`` (refuse to acquire when the host's
            clock is certainly off the server's by more than ``maxoffset`` seconds).
        database: database name when ``db`` is a URI without one.
        allow_unsafe_server: run on a server whose updates are not atomic (FerretDB):
            exclusion is then NOT guaranteed under contention.
        op_timeout: seconds one database call may take (default ttl/10).

    One instance holds at most one hold at a time, a read or the write (taking another
    raises ``RuntimeError``): use one instance per concurrent holder (per thread or
    task). Thread-safe.
    """

    _what = "MongoReadWriteLock"
    max_readers: int
    writer_preference: bool
    fair: bool

    def __init__(
        self,
        key: str,
        db: DatabaseArg,
        *,
        ttl: float = 600,
        max_readers: int = 64,
        writer_preference: bool = True,
        dbcollection: str = "mongorwlock",
        timeparanoid: bool = True,
        maxoffset: float = 0.5,
        database: Optional[str] = None,
        allow_unsafe_server: bool = False,
        op_timeout: Optional[float] = None,
        fair: bool = False,
    ) -> None:
        check_db(db, database)
        _check_args(key, max_readers, ttl)
        self.fair = check_fair(fair)
        self.max_readers = int(max_readers)
        self.writer_preference = bool(writer_preference)
        self._open(
            key,
            db,
            ttl,
            database,
            op_timeout,
            lambda storage: _new_rwlock(
                storage,
                key,
                int(max_readers),
                bool(writer_preference),
                dbcollection,
                float(ttl),
                bool(timeparanoid),
                float(maxoffset),
                bool(allow_unsafe_server),
                identity=_identity(),
                fair=self.fair,
            ),
        )

    # ---------------------------------------------------------------- holding --

    def read(
        self, *, blocking: bool = True, timeout: Optional[float] = None, step: float = 0.25
    ) -> RwLockLease:
        """A read hold kept alive until the ``with`` block ends (see ``RwLockLease``)::

        with rw.read(timeout=10) as hold:
            hold.check()
        """
        return RwLockLease(self, "read", blocking=blocking, timeout=timeout, step=step)

    def write(
        self, *, blocking: bool = True, timeout: Optional[float] = None, step: float = 0.25
    ) -> RwLockLease:
        """The write hold kept alive until the ``with`` block ends (see
        ``RwLockLease``)."""
        return RwLockLease(self, "write", blocking=blocking, timeout=timeout, step=step)

    def acquire(
        self,
        side: Side,
        blocking: bool = True,
        timeout: Optional[float] = None,
        step: float = 0.25,
    ) -> bool:
        """Takes a read (``"read"``) or the write (``"write"``) hold, without keep-alive
        (``touch()`` renews it; it expires ``ttl`` after its claim otherwise): returns
        True (the token is then ``self.fence``). Waits as ``MongoLocker.acquire``: an
        attempt every ``step`` seconds, at most ``timeout`` seconds. A blocking writer
        waits with its mark (writer preference), dropped when it gives up.

        Raises:
            LockExists: held on the other side (or every read slot, or a writer waits)
                and ``blocking`` is False; the message names the holder.
            AcquireTimeout: not acquired within ``timeout`` seconds.
            ValueError: an unknown side, ``blocking=False`` with a timeout, another
                ``max_readers`` than the key's, or a key holding another kind's document.
            TypeError: a side that is not a str.
            RuntimeError: this instance already holds (a read or the write).
            TimeOffsetError: ``timeparanoid`` and the host clock is off by > maxoffset.
        """
        side = _check_side(side)
        if not blocking and timeout is not None:
            raise ValueError("Cannot set timeout if blocking is False")
        self._check_not_holding()
        self._core.acquire(
            side, bool(blocking), None if timeout is None else float(timeout), float(step)
        )
        return True

    def _check_not_holding(self) -> None:
        if self.owned:
            raise RuntimeError(
                f"this MongoReadWriteLock already holds {self.key!r} for "
                f"{'writing' if self._core.side == 'write' else 'reading'} (fence "
                f"{self._core.fence}): release it first, or use one instance per holder"
            )

    @property
    def side(self) -> Optional[Side]:
        """``"read"`` or ``"write"``: the side of this instance's hold while its lease
        runs on this host's clock; None otherwise (no round trip)."""
        return self._core.side if self.owned else None

    def holders(self) -> RwLockHolders:
        """Who holds the key now (one round trip): the readers in slot order, the writer,
        and the writer waiting with its mark (writer preference), each ``None`` when
        there is none; and the fair waiters still queued, first in line first."""
        return self._core.holders()

    def __repr__(self) -> str:
        return self._repr(f"max_readers={self.max_readers}", lambda: f"side={self.side!r}")


class _RwHold:
    """What the leases of a read-write lock (``RwLockLease``, asyncio's
    ``AsyncRwLockLease``) say about the hold they keep."""

    rwlock: Any
    side: Side

    def _held(self) -> str:
        return f"{self.side} hold of read-write lock {self.rwlock.key!r}"

    def _repr_key(self) -> str:
        return f"{self.rwlock.key!r} {self.side}"


class RwLockLease(_RwHold, SlotLease):
    """A read or the write hold of a ``MongoReadWriteLock`` kept alive by the native
    renewer until released (or the end of a ``with`` block); the rules of
    ``mongoelector.lease``: renewed about every ttl/3, declared LOST on this host's clock
    at its own renew deadline (before anyone can take the key over), loss final. ``lost``
    is a ``threading.Event`` whose state is the hold's loss, read from the native lease;
    ``check()`` raises ``LeaseLost`` then, and so does leaving the ``with`` block (unless
    the block raised). ``timeout`` bounds the wait (``AcquireTimeout``); ``blocking=False``
    makes one attempt (``LockExists``)."""

    rwlock: MongoReadWriteLock
    side: Side

    def __init__(
        self,
        rwlock: MongoReadWriteLock,
        side: Side,
        *,
        blocking: bool = True,
        timeout: Optional[float] = None,
        step: float = 0.25,
    ) -> None:
        self.side = _check_side(side)
        super().__init__(blocking=blocking, timeout=timeout, step=step)
        self.rwlock = rwlock

    def _holder(self) -> MongoReadWriteLock:
        return self.rwlock

    def _start(
        self, core: _NativeRwLock, blocking: bool, timeout: Optional[float], step: float
    ) -> NativeSlotLease:
        return _new_rwlock_lease(core, self.side, blocking, timeout, step)
