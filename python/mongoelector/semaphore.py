"""MongoSemaphore: at most ``limit`` holders of one key (distributex's ``maxlocks`` pools,
Curator's semaphore), each with a lease and a fencing token.

::

    pool = MongoSemaphore("pool", db, limit=3, ttl=30)
    with pool:                        # waits for one of the 3 slots
        write(batch, fence=pool.fence)

The protocol runs in the native core (``core/semaphore``): one document per key with a
fixed array of ``limit`` slots; a claim is one atomic compare-and-set that fills a slot
only if it is free (released or expired on the SERVER's clock) and nobody claimed since
the claimant's copy, so no instant ever has more than ``limit`` unexpired holders, also
under contention and after ``kill -9`` (a dead holder's slot frees at its expiry). Tokens
strictly increase per key across all slots, releases, expiries and deletions of the
document. An uncontended acquire costs one round trip when the instance's copy of the
document is current (its own last write), two otherwise (a read, then the claim).

``db`` is what ``MongoLocker`` takes: a pymongo ``Database`` (or a mongomock one), a
``mongodb://host/dbname`` URI, a ``sqlite:///path`` URI, or a ``mongoelector.Client``.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Callable, Dict, List, Literal, Optional, Protocol, Type, TypeVar, cast

from . import _native
from ._slots import (
    MAX_LIMIT,
    NativeSlotHolder,
    NativeSlotLease,
    QueuedWaiter,
    SlotHandle,
    SlotLease,
    check_args,
)
from ._slots import SlotHolder as SemaphoreHolder
from ._transport import DatabaseArg, check_db, check_fair
from .errors import AcquireTimeout, LeaseLost, LockExists
from .locker import _identity as _identity  # the asyncio semaphore's too

__all__ = [
    "MongoSemaphore",
    "SemaphoreHolder",
    "SemaphoreLease",
    "LockExists",
    "AcquireTimeout",
    "LeaseLost",
]

_S = TypeVar("_S", bound="MongoSemaphore")


class _NativeSemaphore(NativeSlotHolder, Protocol):
    """The private native binding (``_native._Semaphore``), as this module uses it."""

    def acquire(
        self, blocking: bool = True, timeout: Optional[float] = None, step: float = 0.25
    ) -> int: ...
    def try_acquire(self) -> Optional[int]: ...
    def start_acquire(
        self, blocking: bool = True, timeout: Optional[float] = None, step: float = 0.25
    ) -> _native.AcquireRun: ...
    def holders(self) -> List[Dict[str, Any]]: ...


_NativeSemaphoreLease = NativeSlotLease

# Looked up by name: the stub of the native module types them once they are public.
_NewSemaphore = Callable[..., _NativeSemaphore]
_new_semaphore = cast(_NewSemaphore, getattr(_native, "_Semaphore"))
_new_semaphore_lease = cast(Callable[..., NativeSlotLease], getattr(_native, "_SemaphoreLease"))


def _check_args(key: object, limit: object, ttl: object) -> None:
    """Run-time checks of what the annotations promise (callers may not type-check)."""
    check_args("semaphore", key, "limit", limit, ttl, limit_max=MAX_LIMIT)


class MongoSemaphore(SlotHandle[_NativeSemaphore]):
    """A counting semaphore: at most ``limit`` holders of ``key`` at any instant.

    Args:
        key: the semaphore's name (its document's ``_id``).
        db: a pymongo ``Database``, a ``mongodb://host/dbname`` or ``sqlite:///path`` URI,
            or a ``mongoelector.Client``.
        limit: how many holders at most (1 to 1000). Fixed per key when its document is
            created: an instance asking for another limit gets ``ValueError`` at its first
            ``acquire()`` or ``holders()`` (nothing is written).
        ttl: lease of one hold, in seconds; a holder that neither releases nor touches
            within it (a dead process) loses its slot at that expiry.
        dbcollection: collection of the semaphore documents ("mongosemaphore"); its
            fencing epochs live in "<dbcollection>.fences".
        timeparanoid, maxoffset: as ``MongoLocker`` (refuse to acquire when the host's
            clock is certainly off the server's by more than ``maxoffset`` seconds).
        database: database name when ``db`` is a URI without one.
        allow_unsafe_server: run on a server whose updates are not atomic (FerretDB):
            the limit is then NOT guaranteed under contention.
        op_timeout: seconds one database call may take (default ttl/10, at least 0.05).
        fair: serve blocking waiters in arrival order (FIFO). A waiter that finds every
            slot held joins the key's queue once, keeps its place alive while it waits,
            and only the head of the queue polls every ``step``; a waiter that dies holds
            up the others for at most one ``ttl``. Every acquire honours a non-empty
            queue (no barging), fair or not; ``fair`` decides whether this instance's
            blocking acquires queue.

    One instance holds at most one slot (``acquire()`` while holding raises
    ``RuntimeError``): use one instance per concurrent holder. Thread-safe.
    """

    _what = "MongoSemaphore"
    limit: int
    fair: bool

    def __init__(
        self,
        key: str,
        db: DatabaseArg,
        *,
        limit: int,
        ttl: float = 600,
        dbcollection: str = "mongosemaphore",
        timeparanoid: bool = True,
        maxoffset: float = 0.5,
        database: Optional[str] = None,
        allow_unsafe_server: bool = False,
        op_timeout: Optional[float] = None,
        fair: bool = False,
    ) -> None:
        check_db(db, database)
        _check_args(key, limit, ttl)
        self.fair = check_fair(fair)
        self.limit = int(limit)
        self._open(
            key,
            db,
            ttl,
            database,
            op_timeout,
            lambda storage: _new_semaphore(
                storage,
                key,
                int(limit),
                dbcollection,
                float(ttl),
                bool(timeparanoid),
                float(maxoffset),
                bool(allow_unsafe_server),
                identity=_identity(),
                fair=self.fair,
            ),
        )

    def acquire(
        self, blocking: bool = True, timeout: Optional[float] = None, step: float = 0.25
    ) -> bool:
        """Takes one slot, as ``MongoLocker.acquire``: returns True (the token is then
        ``self.fence``).

        Raises:
            LockExists: every slot is held and ``blocking`` is False.
            AcquireTimeout: no slot within ``timeout`` seconds.
            ValueError: ``blocking=False`` with a timeout, or this instance's limit
                differs from the key's.
            RuntimeError: this instance already holds a slot.
            TimeOffsetError: ``timeparanoid`` and the host clock is off by > maxoffset.
        """
        if not blocking and timeout is not None:
            raise ValueError("Cannot set timeout if blocking is False")
        if self.owned:
            raise RuntimeError(
                f"this MongoSemaphore already holds a slot of {self.key!r} (fence "
                f"{self._core.fence}): release it first, or use one instance per holder"
            )
        self._core.acquire(bool(blocking), None if timeout is None else float(timeout), float(step))
        return True

    def keep_alive(
        self, *, blocking: bool = True, timeout: Optional[float] = None, step: float = 0.25
    ) -> SemaphoreLease:
        """A slot renewed in the background until the ``with`` block ends (see
        ``SemaphoreLease``)::

            with pool.keep_alive(timeout=10) as lease:
                lease.check()
        """
        return SemaphoreLease(self, blocking=blocking, timeout=timeout, step=step)

    def holders(self) -> List[SemaphoreHolder]:
        """The unexpired holders (one round trip), in slot order."""
        return [cast(SemaphoreHolder, h) for h in self._core.holders()]

    def waiting(self) -> List[QueuedWaiter]:
        """The fair waiters still queued for a slot, first in line first (one round
        trip); empty when nobody waits. Only blocking acquires of fair semaphores queue."""
        return [cast(QueuedWaiter, w) for w in self._core.waiting()]

    def __enter__(self: _S) -> _S:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc_val: Optional[BaseException],
        exc_tb: Optional[TracebackType],
    ) -> Literal[False]:
        self.release()
        return False

    def __repr__(self) -> str:
        return self._repr(f"limit={self.limit}", lambda: f"owned={self.owned}")


class SemaphoreLease(SlotLease):
    """A semaphore slot kept alive by the native renewer until released (or the end of
    a ``with`` block); the rules of ``mongoelector.lease``: renewed about every ttl/3,
    declared LOST on this host's clock at its own renew deadline (before anyone can take
    the slot), loss final; ``lost`` is a ``threading.Event`` whose state is the slot's
    loss, read from the native lease (see ``mongoelector.lease``)."""

    semaphore: MongoSemaphore

    def __init__(
        self,
        semaphore: MongoSemaphore,
        *,
        blocking: bool = True,
        timeout: Optional[float] = None,
        step: float = 0.25,
    ) -> None:
        super().__init__(blocking=blocking, timeout=timeout, step=step)
        self.semaphore = semaphore

    def _holder(self) -> MongoSemaphore:
        return self.semaphore

    def _start(
        self, core: _NativeSemaphore, blocking: bool, timeout: Optional[float], step: float
    ) -> NativeSlotLease:
        return _new_semaphore_lease(core, blocking, timeout, step)

    def _held(self) -> str:
        return f"slot of semaphore {self.semaphore.key!r}"

    def _repr_key(self) -> str:
        return repr(self.semaphore.key)
