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

import uuid
from datetime import datetime
from os import getpid
from socket import getfqdn
from types import TracebackType
from typing import (
    Any,
    Callable,
    Dict,
    List,
    Literal,
    NoReturn,
    Optional,
    Protocol,
    Tuple,
    Type,
    TypedDict,
    TypeVar,
    cast,
)

from . import _native, _transport
from ._keepalive import KeepAlive
from ._loss import LossEvent
from ._transport import DatabaseArg
from .errors import AcquireTimeout, ClosedError, LeaseLost, LockExists

__all__ = [
    "MongoSemaphore",
    "SemaphoreHolder",
    "SemaphoreLease",
    "LockExists",
    "AcquireTimeout",
    "LeaseLost",
]

_S = TypeVar("_S", bound="MongoSemaphore")
_SL = TypeVar("_SL", bound="SemaphoreLease")

#: The largest ``limit`` (the whole slot array is one document every acquirer reads).
MAX_LIMIT = 1000


class SemaphoreHolder(TypedDict):
    """One unexpired holder, as ``MongoSemaphore.holders()`` lists it."""

    uuid: str
    host: str
    pid: int
    fence: int  # the holder's fencing token
    ts_created: datetime  # server time base, tz-aware UTC
    ts_expire: datetime


class _NativeSemaphore(Protocol):
    """The private native binding (``_native._Semaphore``), as this module uses it."""

    def acquire(
        self, blocking: bool = True, timeout: Optional[float] = None, step: float = 0.25
    ) -> int: ...
    def try_acquire(self) -> Optional[int]: ...
    def start_acquire(
        self, blocking: bool = True, timeout: Optional[float] = None, step: float = 0.25
    ) -> _native.AcquireRun: ...
    def release_if(self, fence: int) -> bool: ...
    def release(self) -> None: ...
    def touch(self) -> Optional[datetime]: ...
    def holders(self) -> List[Dict[str, Any]]: ...
    def read(self) -> Optional[Dict[str, Any]]: ...
    def verify_time(self) -> float: ...
    @property
    def hold(self) -> Optional[Tuple[int, int, datetime, datetime]]: ...
    @property
    def fence(self) -> Optional[int]: ...
    @property
    def lease_remaining(self) -> Optional[float]: ...
    @property
    def uuid(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def pid(self) -> int: ...


class _NativeSemaphoreLease(Protocol):
    @property
    def fence(self) -> int: ...
    @property
    def deadline_in(self) -> float: ...
    @property
    def lost(self) -> bool: ...
    @property
    def lost_reason(self) -> str: ...
    def wait_lost(self, timeout: Optional[float] = None) -> bool: ...
    def close(self) -> None: ...


# Looked up by name: the stub of the native module types them once they are public.
_NewSemaphore = Callable[..., _NativeSemaphore]
_new_semaphore = cast(_NewSemaphore, getattr(_native, "_Semaphore"))
_new_semaphore_lease = cast(
    Callable[..., _NativeSemaphoreLease], getattr(_native, "_SemaphoreLease")
)


class _Closed:
    __slots__ = ("_what",)

    def __init__(self, what: str) -> None:
        self._what = what

    def __getattr__(self, name: str) -> NoReturn:
        raise ClosedError(f"{self._what} is closed (close() was called): make a new one")


def _identity() -> _native.Identity:
    return _native.Identity(str(uuid.uuid4()), getfqdn(), getpid())


def _check_args(key: object, limit: object, ttl: object) -> None:
    """Run-time checks of what the annotations promise (callers may not type-check)."""
    if not key:
        raise ValueError("Must provide a non-empty semaphore key")
    if not isinstance(key, str):
        raise TypeError("semaphore key must be a str, not %s" % type(key).__name__)
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError("limit must be an int, not %s" % type(limit).__name__)
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be between 1 and {MAX_LIMIT}, not {limit}")
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0:
        raise ValueError("ttl must be a positive number (seconds)")


class MongoSemaphore:
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

    One instance holds at most one slot (``acquire()`` while holding raises
    ``RuntimeError``): use one instance per concurrent holder. Thread-safe.
    """

    key: str
    limit: int
    uuid: str
    host: str
    pid: int
    #: The ``db`` argument as given.
    database: DatabaseArg
    _core: _NativeSemaphore
    _use: Optional[_transport.ClientUse]
    _closed: bool

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
    ) -> None:
        _transport.check_db(db, database)
        _check_args(key, limit, ttl)
        if op_timeout is None:
            op_timeout = _transport.op_timeout_for(ttl)
        storage, use = _transport.open_storage(db, database=database, op_timeout=op_timeout)
        try:
            core = _new_semaphore(
                storage,
                key,
                int(limit),
                dbcollection,
                float(ttl),
                bool(timeparanoid),
                float(maxoffset),
                bool(allow_unsafe_server),
                identity=_identity(),
            )
        except BaseException:
            del storage
            if use is not None:
                use.end()
            raise
        self._core = core
        self._use = use
        self._closed = False
        self.key = key
        self.limit = int(limit)
        self.ttl = ttl
        self.database = db
        self.uuid = core.uuid
        self.host = core.host
        self.pid = core.pid

    # ---------------------------------------------------------------- holding --

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

    def release(self) -> None:
        """Releases this instance's slot (fenced: a release that runs late cannot free a
        newer hold). Not holding is not an error."""
        self._core.release()

    def touch(self) -> Optional[datetime]:
        """Pushes this instance's slot to now + ttl: the new expiry (server time base,
        tz-aware UTC), or None when it holds no unexpired slot any more."""
        return self._core.touch()

    def keep_alive(
        self, *, blocking: bool = True, timeout: Optional[float] = None, step: float = 0.25
    ) -> SemaphoreLease:
        """A slot renewed in the background until the ``with`` block ends (see
        ``SemaphoreLease``)::

            with pool.keep_alive(timeout=10) as lease:
                lease.check()
        """
        return SemaphoreLease(self, blocking=blocking, timeout=timeout, step=step)

    @property
    def fence(self) -> Optional[int]:
        """Fencing token of this instance's hold (strictly increasing per key across all
        holders), or None when it holds no slot whose lease still runs on this host's
        clock."""
        return self._core.fence

    @property
    def owned(self) -> bool:
        """Whether this instance holds a slot whose lease still runs (no round trip)."""
        remaining = self._core.lease_remaining
        return remaining is not None and remaining > 0

    @property
    def ts_expire(self) -> Optional[datetime]:
        """Expiry of this instance's current hold (server time base), None without one."""
        hold = self._core.hold
        return hold[3] if hold else None

    def holders(self) -> List[SemaphoreHolder]:
        """The unexpired holders (one round trip), in slot order."""
        return [cast(SemaphoreHolder, h) for h in self._core.holders()]

    def get_current(self) -> Optional[Dict[str, Any]]:
        """The semaphore document as stored ({_id, limit, fence, slots}), or None."""
        return self._core.read()

    # -------------------------------------------------------------- lifecycle --

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

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Releases the slot if held, then frees the native semaphore and (for a URI, when
        no other user is left) the connections. Idempotent; any later use raises
        ``ClosedError``."""
        if self._closed:
            return
        core, use = self._core, self._use
        self._closed = True
        self._use = None
        self._core = cast(_NativeSemaphore, _Closed(f"MongoSemaphore {self.key!r}"))
        try:
            core.release()
        finally:
            del core
            if use is not None:
                use.end()

    def __repr__(self) -> str:
        if self._closed:
            return (
                f"MongoSemaphore(key={self.key!r}, limit={self.limit}, uuid={self.uuid!r}, "
                f"closed=True)"
            )
        return (
            f"MongoSemaphore(key={self.key!r}, limit={self.limit}, uuid={self.uuid!r}, "
            f"owned={self.owned})"
        )


class SemaphoreLease(KeepAlive):
    """A semaphore slot kept alive by the native renewer until released (or the end of
    a ``with`` block); the rules of ``mongoelector.lease``: renewed about every ttl/3,
    declared LOST on this host's clock at its own renew deadline (before anyone can take
    the slot), loss final; ``lost`` is a ``threading.Event`` whose state is the slot's
    loss, read from the native lease (see ``mongoelector.lease``)."""

    semaphore: MongoSemaphore
    lost: LossEvent

    def __init__(
        self,
        semaphore: MongoSemaphore,
        *,
        blocking: bool = True,
        timeout: Optional[float] = None,
        step: float = 0.25,
    ) -> None:
        if not blocking and timeout is not None:
            raise ValueError("Cannot set timeout if blocking is False")
        self.semaphore = semaphore
        self.lost = LossEvent()
        self._blocking = blocking
        self._timeout = timeout
        self._step = step
        self._native: Optional[_NativeSemaphoreLease] = None

    def acquire(self) -> int:
        """Waits for a slot and starts keeping it alive. Returns the fencing token."""
        if self._native is not None:
            raise RuntimeError("this lease is already held; use a new one")
        if self.semaphore.closed:
            raise ClosedError(f"the semaphore {self.semaphore.key!r} is closed")
        core = cast(_NativeSemaphore, getattr(self.semaphore, "_core"))  # its friend
        self._native = _new_semaphore_lease(
            core,
            self._blocking,
            None if self._timeout is None else float(self._timeout),
            float(self._step),
        )
        self.lost._bind(self._native)
        return self._native.fence

    def release(self) -> None:
        """Stops keeping the slot alive and releases it (fenced; not if lost)."""
        if self._native is not None:
            self._native.close()

    def _held(self) -> str:
        return f"slot of semaphore {self.semaphore.key!r}"

    def _repr_key(self) -> str:
        return repr(self.semaphore.key)
