"""What the synchronous holds on a slot document share: ``MongoSemaphore`` and
``MongoReadWriteLock`` (the core's SlotHolder, ``core/semaphore/slot_holder.h``), and
their keep-alive leases (``SemaphoreLease``, ``RwLockLease``).

* ``SlotHandle``: the native object behind the class, opened on the ``db`` argument's
  transport, and what a slot hold does the same way in both: release, touch, the fence
  and expiry of the hold, the stored document, ``close()``.
* ``SlotLease``: a hold of that object kept alive by the core's renewer (the rules of
  ``mongoelector.lease``), taken by the feature's own native lease class.
* The argument checks both run before anything is made (``check_args``).
"""

from __future__ import annotations

from datetime import datetime
from typing import (
    Any,
    Callable,
    Dict,
    Generic,
    List,
    Optional,
    Protocol,
    Tuple,
    TypedDict,
    TypeVar,
    cast,
)

from . import _transport
from ._keepalive import KeepAlive, NativeKeepAlive
from ._loss import LossEvent
from ._transport import DatabaseArg
from .errors import ClosedError
from .locker import QueuedWaiter as QueuedWaiter
from .locker import _Closed

#: The largest ``limit`` / ``max_readers`` (the whole slot array is one document every
#: acquirer reads).
MAX_LIMIT = 1000


class SlotHolder(TypedDict):
    """One unexpired holder of a slot (a semaphore's, or a read-write lock's reader,
    writer or waiting writer)."""

    uuid: str
    host: str
    pid: int
    fence: int  # the holder's fencing token
    ts_created: datetime  # server time base, tz-aware UTC
    ts_expire: datetime


class NativeSlotHolder(Protocol):
    """The private native bindings of a slot hold (``_native._Semaphore``,
    ``_native._RwLock``), as far as they share their methods."""

    def release_if(self, fence: int) -> bool: ...
    def release(self) -> None: ...
    def leave_queue(self) -> None: ...
    def touch(self) -> Optional[datetime]: ...
    def read(self) -> Optional[Dict[str, Any]]: ...
    def waiting(self) -> List[Dict[str, Any]]: ...
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


class NativeSlotLease(NativeKeepAlive, Protocol):
    """A native keep-alive lease (``_SemaphoreLease``, ``_RwLockLease``): what every
    keep-alive lease has, and what ``lost`` (``LossEvent``) reads."""

    @property
    def deadline_in(self) -> float: ...
    @property
    def lost(self) -> bool: ...
    def wait_lost(self, timeout: Optional[float] = None) -> bool: ...


_N = TypeVar("_N", bound=NativeSlotHolder)


def check_args(
    noun: str, key: object, limit_name: str, limit: object, ttl: object, *, limit_max: int
) -> None:
    """Run-time checks of what the annotations promise (callers may not type-check):
    ``noun`` names the feature in messages ("semaphore"), ``limit_name`` its bound."""
    if not key:
        raise ValueError(f"Must provide a non-empty {noun} key")
    if not isinstance(key, str):
        raise TypeError(f"{noun} key must be a str, not {type(key).__name__}")
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"{limit_name} must be an int, not {type(limit).__name__}")
    if not 1 <= limit <= limit_max:
        raise ValueError(f"{limit_name} must be between 1 and {limit_max}, not {limit}")
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0:
        raise ValueError(f"ttl must be a positive number (seconds), not {ttl!r}")


class SlotHandle(Generic[_N]):
    """The native object of a slot hold and what both features do with it alike. One
    instance holds at most one hold at a time. Thread-safe."""

    #: The class's name in messages and reprs ("MongoSemaphore").
    _what = "object"
    key: str
    ttl: float
    uuid: str
    host: str
    pid: int
    #: The ``db`` argument as given.
    database: DatabaseArg
    _core: _N
    _use: Optional[_transport.ClientUse]
    _closed: bool

    def _open(
        self,
        key: str,
        db: DatabaseArg,
        ttl: float,
        database: Optional[str],
        op_timeout: Optional[float],
        make: Callable[[object], _N],
    ) -> None:
        """Opens ``db``'s transport and makes the native object on it (``make(storage)``);
        a failure leaves no connection behind."""
        if op_timeout is None:
            op_timeout = _transport.op_timeout_for(ttl)
        storage, use = _transport.open_storage(db, database=database, op_timeout=op_timeout)
        try:
            core = make(storage)
        except BaseException:
            del storage
            if use is not None:
                use.end()
            raise
        self._core = core
        self._use = use
        self._closed = False
        self.key = key
        self.ttl = ttl
        self.database = db
        self.uuid = core.uuid
        self.host = core.host
        self.pid = core.pid

    # ---------------------------------------------------------------- holding --

    def release(self) -> None:
        """Releases this instance's hold (fenced: a release that runs late cannot free a
        newer hold). Not holding is not an error."""
        self._core.release()

    def touch(self) -> Optional[datetime]:
        """Pushes this instance's hold to now + ttl: the new expiry (server time base,
        tz-aware UTC), or None when it holds nothing unexpired any more."""
        return self._core.touch()

    @property
    def fence(self) -> Optional[int]:
        """Fencing token of this instance's hold (strictly increasing per key across all
        holders), or None when it holds nothing whose lease still runs on this host's
        clock."""
        return self._core.fence

    @property
    def owned(self) -> bool:
        """Whether this instance holds something whose lease still runs (no round
        trip)."""
        remaining = self._core.lease_remaining
        return remaining is not None and remaining > 0

    @property
    def ts_expire(self) -> Optional[datetime]:
        """Expiry of this instance's current hold (server time base), None without one."""
        hold = self._core.hold
        return hold[3] if hold else None

    def get_current(self) -> Optional[Dict[str, Any]]:
        """The key's document as stored ({_id, limit, fence, slots}; a read-write lock's
        also ``kind``; while fair waiters queue, ``queue``: [{uuid, ticket, ts_expire}]
        in arrival order), or None."""
        return self._core.read()

    # -------------------------------------------------------------- lifecycle --

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Releases the hold if any, then frees the native object and (for a URI, when no
        other user is left) the connections. Idempotent; any later use raises
        ``ClosedError``."""
        if self._closed:
            return
        core, use = self._core, self._use
        self._closed = True
        self._use = None
        self._core = cast(_N, _Closed(f"{self._what} {self.key!r}"))
        try:
            core.release()
        finally:
            del core
            if use is not None:
                use.end()

    def _repr(self, fields: str, state: Callable[[], str]) -> str:
        """``Class(key=..., <fields>, uuid=..., <state()>)``, ``closed=True`` once closed
        (no round trip)."""
        shown = "closed=True" if self._closed else state()
        return f"{self._what}(key={self.key!r}, {fields}, uuid={self.uuid!r}, {shown})"


class SlotLease(KeepAlive):
    """A hold of a ``SlotHandle`` kept alive by the native renewer until released (or the
    end of a ``with`` block); the rules of ``mongoelector.lease``: renewed about every
    ttl/3, declared LOST on this host's clock at its own renew deadline (before anyone can
    take the hold), loss final; ``lost`` is a ``threading.Event`` whose state is the
    hold's loss, read from the native lease. A feature says what it holds (``_holder``)
    and how its native lease takes it (``_start``)."""

    lost: LossEvent
    _native: Optional[NativeSlotLease]

    def __init__(self, *, blocking: bool, timeout: Optional[float], step: float) -> None:
        if not blocking and timeout is not None:
            raise ValueError("Cannot set timeout if blocking is False")
        self.lost = LossEvent()
        self._blocking = blocking
        self._timeout = timeout
        self._step = step
        self._native = None

    def _holder(self) -> SlotHandle[Any]:
        raise NotImplementedError

    def _start(
        self, core: Any, blocking: bool, timeout: Optional[float], step: float
    ) -> NativeSlotLease:
        """Takes the hold with the feature's native lease (blocking, without the GIL)."""
        raise NotImplementedError

    def acquire(self) -> int:
        """Waits for the hold and starts keeping it alive. Returns the fencing token."""
        if self._native is not None:
            raise RuntimeError("this lease is already held; use a new one")
        holder = self._holder()
        if holder.closed:
            raise ClosedError(f"{holder._what} {holder.key!r} is closed")
        if holder.owned:
            raise RuntimeError(
                f"this {holder._what} already holds {holder.key!r} (fence {holder.fence}): "
                "release it first, or use one instance per holder"
            )
        self._native = self._start(
            holder._core,
            bool(self._blocking),
            None if self._timeout is None else float(self._timeout),
            float(self._step),
        )
        self.lost._bind(self._native)
        return self._native.fence

    def release(self) -> None:
        """Stops keeping the hold alive and releases it (fenced; not if lost)."""
        if self._native is not None:
            self._native.close()
