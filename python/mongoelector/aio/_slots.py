"""What the asyncio holds on a slot document share: ``AsyncMongoSemaphore`` and
``AsyncMongoReadWriteLock`` (``mongoelector._slots`` for asyncio), and their keep-alive
leases (``AsyncSemaphoreLease``, ``AsyncRwLockLease``).

* ``AsyncSlotHandle``: the native object (``NativeHandle``) and what a slot hold does the
  same way in both: release, touch, the fence and expiry of the hold, the stored
  document, ``async with``, and the one way an acquire awaits the core's run
  (``_drive``: a feature that wrote something while waiting undoes it in ``_gave_up``).
* ``AsyncSlotLease``: a hold taken by awaiting the core's run, then handed to the
  native renewer; the feature says how its run starts and how its lease adopts the hold.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any, Callable, Dict, Optional, Tuple, TypeVar

from .._loss import AsyncLossEvent
from .._native import AcquireRun
from .._slots import NativeSlotHolder, NativeSlotLease
from .._transport import check_fair
from ..errors import ClosedError
from ..locker import _identity
from ._common import NativeHandle, call, drive, prepare
from .lease import KeepAlive, close_orphan, lost_callback

_N = TypeVar("_N", bound=NativeSlotHolder)


class AsyncSlotHandle(NativeHandle[_N]):
    """The native object of an asyncio slot hold, made on first use off the loop, and
    what both features do with it alike. One instance holds at most one hold."""

    key: str
    ttl: float
    timeparanoid: bool
    #: The ``db`` argument as given.
    database: Any
    #: Whether blocking acquires wait in the key's fair queue (see ``MongoSemaphore``).
    fair: bool

    def _init_slot(
        self,
        key: str,
        db: Any,
        ttl: float,
        check: Callable[[object], None],
        *,
        dbcollection: str,
        timeparanoid: bool,
        maxoffset: float,
        database: Optional[str],
        allow_unsafe_server: bool,
        op_timeout: Optional[float],
        fair: bool,
    ) -> None:
        """The synchronous class's checks (``check(target)``), then the state every slot
        hold keeps until its native object is made (``_slot_args``, ``_slot_kwargs``)."""
        self.fair = check_fair(fair)  # before prepare(), which may take a shared client
        target, facade, timeout = prepare(key, db, ttl, database, op_timeout, check)
        self.key = key
        self.ttl = ttl
        self.database = db
        self.timeparanoid = bool(timeparanoid)
        self._init_handle(target, facade, database, timeout)
        self._collection = dbcollection
        self._maxoffset = float(maxoffset)
        self._allow_unsafe_server = bool(allow_unsafe_server)
        self._identity = _identity()

    def _slot_args(self) -> Tuple[Any, ...]:
        """The native constructor's positional arguments after the feature's own:
        collection, ttl, timeparanoid, maxoffset, allow_unsafe_server (then
        ``_slot_kwargs()``)."""
        return (
            self._collection,
            float(self.ttl),
            self.timeparanoid,
            self._maxoffset,
            self._allow_unsafe_server,
        )

    def _slot_kwargs(self) -> Dict[str, Any]:
        """The native constructor's keyword arguments: identity, fair."""
        return {"identity": self._identity, "fair": self.fair}

    def _release_sync(self, core: _N) -> None:
        core.release()

    @property
    def uuid(self) -> str:
        """This instance's uuid (its hold's ``uuid`` while it holds one)."""
        return self._identity.uuid

    @property
    def host(self) -> str:
        return self._identity.host

    @property
    def pid(self) -> int:
        return self._identity.pid

    # ---------------------------------------------------------------- holding --

    async def _drive(
        self,
        run: AcquireRun,
        attempt: Callable[[], Tuple[str, Any]],
        orphan: Callable[[Tuple[str, Any]], object],
    ) -> Any:
        """``drive(run, ...)`` with each attempt under ``_io``; when the acquire does not
        end acquired, the run gives up what its waiting wrote (the core's rule)."""
        give_up_under = self._io if self._waits_with_writes() else None
        return await drive(
            run,
            functools.partial(self._attempt_sync, attempt),
            orphan,
            give_up_under=give_up_under,
        )

    def _waits_with_writes(self) -> bool:
        """Whether a blocking acquire may write while it waits: a fair waiter's queue
        entry."""
        return self.fair

    def _check_not_holding(self) -> None:
        if self.owned:
            raise RuntimeError(
                f"this {self._what} already holds {self.key!r} (fence {self.fence}): "
                "release it first, or use one instance per holder"
            )

    async def release(self) -> None:
        """Releases this instance's hold (fenced: a release that runs late cannot free a
        newer hold). Not holding is not an error (and costs no round trip)."""
        core = await self._opened()
        await call(functools.partial(self._release_locked, core))

    def _release_locked(self, core: _N) -> None:
        with self._io:
            core.release()

    async def touch(self) -> Optional[datetime]:
        """Pushes this instance's hold to now + ttl: the new expiry (server time base,
        tz-aware UTC), or None when it holds nothing unexpired any more."""
        core = await self._opened()
        return await call(core.touch)

    async def get_current(self) -> Optional[Dict[str, Any]]:
        """The key's document as stored ({_id, limit, fence, slots}; a read-write lock's
        also ``kind``; while fair waiters queue, ``queue``: [{uuid, ticket, ts_expire}]
        in arrival order), or None."""
        core = await self._opened()
        return await call(core.read)

    # ------------------------------------------------------------ local state ----

    @property
    def fence(self) -> Optional[int]:
        """Fencing token of this instance's hold, or None when it holds nothing whose
        lease still runs on this host's clock (a local read)."""
        core = self._core
        return None if core is None else core.fence

    @property
    def owned(self) -> bool:
        """Whether this instance holds something whose lease still runs (no round
        trip)."""
        core = self._core
        remaining = None if core is None else core.lease_remaining
        return remaining is not None and remaining > 0

    @property
    def ts_expire(self) -> Optional[datetime]:
        """Expiry of this instance's current hold (server time base), None without one."""
        core = self._core
        hold = None if core is None else core.hold
        return hold[3] if hold else None

    def _repr(self, fields: str, state: Callable[[], str]) -> str:
        shown = "closed=True" if self._closed else state()
        return f"{self._what}(key={self.key!r}, {fields}, uuid={self.uuid!r}, {shown})"


class AsyncSlotLease(KeepAlive):
    """A hold of an ``AsyncSlotHandle`` kept alive by the core's native renewer until
    released (or the end of ``async with``): renewed about every ttl/3, lost on this
    host's clock at its renew deadline (before anyone can take the hold), loss final.
    ``lost`` is an ``asyncio.Event`` whose state is the hold's loss, read from the native
    lease. Waiting is ``asyncio.sleep`` between attempts (``step``); ``timeout`` bounds it
    (``AcquireTimeout``), ``blocking=False`` makes one attempt (``LockExists``).
    Cancelling the awaiting task ends the wait; a hold an attempt in flight took is
    released. A feature says what holds (``_holder``), how its run starts (``_start``)
    and how its native lease adopts the hold (``_adopt``)."""

    lost: AsyncLossEvent
    _native: Optional[NativeSlotLease]

    def __init__(self, *, blocking: bool, timeout: Optional[float], step: float) -> None:
        if not blocking and timeout is not None:
            raise ValueError("Cannot set timeout if blocking is False")
        self.lost = AsyncLossEvent()
        self._blocking = blocking
        self._timeout = timeout
        self._step = step
        self._native = None

    def _holder(self) -> AsyncSlotHandle[Any]:
        raise NotImplementedError

    def _start(
        self, core: Any, blocking: bool, timeout: Optional[float], step: float
    ) -> AcquireRun:
        raise NotImplementedError

    def _adopt(self, core: Any, on_lost: Callable[[], None]) -> NativeSlotLease:
        """On a worker: the native lease of the hold ``core`` has just taken."""
        raise NotImplementedError

    async def acquire(self) -> int:
        """Waits for the hold and starts keeping it alive. Returns the fencing token."""
        if self._native is not None:
            raise RuntimeError("this lease is already held; use a new one")
        holder = self._holder()
        if holder.closed:
            raise ClosedError(f"{holder._what} {holder.key!r} is closed")
        core = await holder._opened()
        on_lost = lost_callback(self.lost)
        holder._check_not_holding()
        run = self._start(core, bool(self._blocking), self._timeout, float(self._step))

        def attempt() -> Tuple[str, Any]:  # on a worker
            kind, value = run.attempt()
            if kind != "acquired":
                return kind, value
            return kind, self._adopt(core, on_lost)

        native: NativeSlotLease = await holder._drive(run, attempt, close_orphan)
        self._native = native
        self.lost._bind(native)
        return native.fence

    def _repr_key(self) -> str:
        return repr(self._holder().key)
