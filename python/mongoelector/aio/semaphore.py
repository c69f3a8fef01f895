"""``AsyncMongoSemaphore``: ``MongoSemaphore`` for asyncio."""

from __future__ import annotations

import functools
import logging
from datetime import datetime
from types import TracebackType
from typing import Any, Callable, Dict, List, Literal, Optional, Tuple, Type, TypeVar, cast

from .. import _native
from .._loss import AsyncLossEvent
from .._transport import check_db
from ..errors import ClosedError
from ..semaphore import (
    SemaphoreHolder,
    _check_args,
    _identity,
    _NativeSemaphore,
    _NativeSemaphoreLease,
    _new_semaphore,
)
from ._common import AsyncDatabaseArg, NativeHandle, call, drive, prepare
from .lease import KeepAlive, close_orphan, lost_callback

__all__ = ["AsyncMongoSemaphore", "AsyncSemaphoreLease"]

log = logging.getLogger("mongoelector.aio")

_S = TypeVar("_S", bound="AsyncMongoSemaphore")


class AsyncMongoSemaphore(NativeHandle[_NativeSemaphore]):
    """``MongoSemaphore`` for asyncio: at most ``limit`` holders of ``key`` at any
    instant, the same documents, tokens and semantics.

    ``db``: a URI, a ``mongoelector.Client``, a pymongo ``AsyncDatabase`` or a pymongo
    ``Database`` (see ``mongoelector.aio``). Keyword arguments as ``MongoSemaphore``'s.

    ``async with sem:`` takes a slot and releases it (it does not close); ``await
    sem.close()`` releases a held slot and frees the native semaphore and, for a URI, the
    connections (the last user of a URI closes them). The native semaphore is made on
    first use, off the loop, or by ``await sem.open()``. One instance holds at most one
    slot: use one instance per concurrent holder.
    """

    _what = "AsyncMongoSemaphore"
    key: str
    limit: int
    #: The ``db`` argument as given.
    database: AsyncDatabaseArg

    def __init__(
        self,
        key: str,
        db: AsyncDatabaseArg,
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
        def check(target: object) -> None:
            check_db(target, database)
            _check_args(key, limit, ttl)

        target, facade, timeout = prepare(key, db, ttl, database, op_timeout, check)
        self.key = key
        self.limit = int(limit)
        self.ttl = ttl
        self.database = db
        self.timeparanoid = bool(timeparanoid)
        self._init_handle(target, facade, database, timeout)
        self._collection = dbcollection
        self._maxoffset = float(maxoffset)
        self._allow_unsafe_server = bool(allow_unsafe_server)
        self._identity = _identity()

    def _new_core(self, storage: object) -> _NativeSemaphore:
        return _new_semaphore(
            storage,
            self.key,
            self.limit,
            self._collection,
            float(self.ttl),
            self.timeparanoid,
            self._maxoffset,
            self._allow_unsafe_server,
            identity=self._identity,
        )

    def _release_sync(self, core: _NativeSemaphore) -> None:
        core.release()

    @property
    def uuid(self) -> str:
        """This instance's uuid (its slot's ``uuid`` while it holds one)."""
        return self._identity.uuid

    @property
    def host(self) -> str:
        return self._identity.host

    @property
    def pid(self) -> int:
        return self._identity.pid

    # ---------------------------------------------------------------- holding --

    async def acquire(
        self, blocking: bool = True, timeout: Optional[float] = None, step: float = 0.25
    ) -> bool:
        """Takes one slot, as ``MongoSemaphore.acquire()``: returns True (the token is
        then ``self.fence``); raises ``LockExists`` (every slot held and ``blocking`` is
        False), ``AcquireTimeout``, ``ValueError`` (``blocking=False`` with a timeout, or
        another limit than the key's), ``RuntimeError`` (this instance holds a slot
        already) or ``TimeOffsetError``. Waits between attempts with ``asyncio.sleep``.
        Cancelling the awaiting task ends the wait at once; an attempt already in flight
        finishes in the background and a slot it took is released."""
        if not blocking and timeout is not None:
            raise ValueError("Cannot set timeout if blocking is False")
        if self.owned:
            raise RuntimeError(
                f"this AsyncMongoSemaphore already holds a slot of {self.key!r} (fence "
                f"{self.fence}): release it first, or use one instance per holder"
            )
        core = await self._opened()
        run = core.start_acquire(bool(blocking), timeout, step)
        await drive(
            run,
            functools.partial(self._attempt_sync, run.attempt),
            functools.partial(self._abandon, run),
        )
        return True

    async def release(self) -> None:
        """Releases this instance's slot (fenced: a release that runs late cannot free a
        newer hold). Not holding is not an error (and costs no round trip)."""
        core = await self._opened()
        await call(functools.partial(self._release_locked, core))

    def _release_locked(self, core: _NativeSemaphore) -> None:
        with self._io:
            core.release()

    async def touch(self) -> Optional[datetime]:
        """Pushes this instance's slot to now + ttl: the new expiry (server time base,
        tz-aware UTC), or None when it holds no unexpired slot any more."""
        core = await self._opened()
        return await call(core.touch)

    def keep_alive(
        self, *, blocking: bool = True, timeout: Optional[float] = None, step: float = 0.25
    ) -> AsyncSemaphoreLease:
        """A slot renewed in the background until the ``async with`` block ends (see
        ``AsyncSemaphoreLease``)::

            async with sem.keep_alive(timeout=10) as lease:
                lease.check()
        """
        return AsyncSemaphoreLease(self, blocking=blocking, timeout=timeout, step=step)

    async def holders(self) -> List[SemaphoreHolder]:
        """The unexpired holders (one round trip), in slot order."""
        core = await self._opened()
        return [cast(SemaphoreHolder, h) for h in await call(core.holders)]

    async def get_current(self) -> Optional[Dict[str, Any]]:
        """The semaphore document as stored ({_id, limit, fence, slots}), or None."""
        core = await self._opened()
        return await call(core.read)

    # ------------------------------------------------------------ local state ----

    @property
    def fence(self) -> Optional[int]:
        """Fencing token of this instance's hold, or None when it holds no slot whose
        lease still runs on this host's clock (a local read)."""
        core = self._core
        return None if core is None else core.fence

    @property
    def owned(self) -> bool:
        """Whether this instance holds a slot whose lease still runs (no round trip)."""
        core = self._core
        remaining = None if core is None else core.lease_remaining
        return remaining is not None and remaining > 0

    @property
    def ts_expire(self) -> Optional[datetime]:
        """Expiry of this instance's current hold (server time base), None without one."""
        core = self._core
        hold = None if core is None else core.hold
        return hold[3] if hold else None

    def __repr__(self) -> str:
        state = "closed=True" if self._closed else f"owned={self.owned}"
        return (
            f"AsyncMongoSemaphore(key={self.key!r}, limit={self.limit}, uuid={self.uuid!r}, "
            f"{state})"
        )

    async def __aenter__(self: _S) -> _S:
        await self.acquire()
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc_val: Optional[BaseException],
        exc_tb: Optional[TracebackType],
    ) -> Literal[False]:
        await self.release()
        return False


class AsyncSemaphoreLease(KeepAlive):
    """``mongoelector.SemaphoreLease`` for asyncio: a slot kept alive by the core's native
    renewer until :meth:`release` (or the end of ``async with``); renewed about every
    ttl/3, lost on this host's clock at its renew deadline (before anyone can take the
    slot), loss final. ``lost`` is an ``asyncio.Event`` whose state is the slot's loss,
    read from the native lease, as ``AsyncLease.lost``. Waiting for a slot is
    ``asyncio.sleep`` between attempts (``step``); ``timeout`` bounds it
    (``AcquireTimeout``), ``blocking=False`` makes one attempt (``LockExists``).
    Cancelling the awaiting task ends the wait; a slot an attempt in flight took is
    released."""

    semaphore: AsyncMongoSemaphore
    lost: AsyncLossEvent

    def __init__(
        self,
        semaphore: AsyncMongoSemaphore,
        *,
        blocking: bool = True,
        timeout: Optional[float] = None,
        step: float = 0.25,
    ) -> None:
        if not blocking and timeout is not None:
            raise ValueError("Cannot set timeout if blocking is False")
        self.semaphore = semaphore
        self.lost = AsyncLossEvent()
        self._blocking = blocking
        self._timeout = timeout
        self._step = step
        self._native: Optional[_NativeSemaphoreLease] = None

    async def acquire(self) -> int:
        """Waits for a slot and starts keeping it alive. Returns the fencing token."""
        if self._native is not None:
            raise RuntimeError("this lease is already held; use a new one")
        if self.semaphore.closed:
            raise ClosedError(f"the semaphore {self.semaphore.key!r} is closed")
        sem = self.semaphore
        core = await sem._opened()
        on_lost = lost_callback(self.lost)
        step = float(self._step)
        if sem.owned:
            raise RuntimeError(
                f"this AsyncMongoSemaphore already holds a slot of {sem.key!r}: "
                "release it first, or use one instance per holder"
            )
        run = core.start_acquire(bool(self._blocking), self._timeout, step)

        def attempt() -> Tuple[str, Any]:  # on a worker
            kind, value = run.attempt()
            if kind != "acquired":
                return kind, value
            return kind, _adopt_slot(core, on_lost)

        native: _NativeSemaphoreLease = await drive(
            run, functools.partial(sem._attempt_sync, attempt), close_orphan
        )
        self._native = native
        self.lost._bind(native)
        return native.fence

    def _held(self) -> str:
        return f"slot of semaphore {self.semaphore.key!r}"

    def _repr_key(self) -> str:
        return repr(self.semaphore.key)


# The native lease of the slot a semaphore holds now (its private binding, by name as
# mongoelector.semaphore looks up the others).
_adopt_slot = cast(
    Callable[..., _NativeSemaphoreLease], getattr(getattr(_native, "_SemaphoreLease"), "adopt")
)
