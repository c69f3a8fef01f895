"""``AsyncMongoReadWriteLock``: ``MongoReadWriteLock`` for asyncio."""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional, TypeVar, cast

from .. import _native
from .._native import AcquireRun
from .._slots import NativeSlotLease
from .._transport import check_db
from ..rwlock import (
    RwLockHolders,
    Side,
    _check_args,
    _check_side,
    _NativeRwLock,
    _new_rwlock,
    _RwHold,
)
from ._common import AsyncDatabaseArg, call
from ._slots import AsyncSlotHandle, AsyncSlotLease

__all__ = ["AsyncMongoReadWriteLock", "AsyncRwLockLease"]

_S = TypeVar("_S", bound="AsyncMongoReadWriteLock")

# The native lease of the hold a read-write lock has now (its private binding, by name as
# mongoelector.rwlock looks up the others).
_adopt_hold = cast(
    Callable[..., NativeSlotLease], getattr(getattr(_native, "_RwLockLease"), "adopt")
)


class AsyncMongoReadWriteLock(AsyncSlotHandle[_NativeRwLock]):
    """``MongoReadWriteLock`` for asyncio: readers (up to ``max_readers``) OR one writer
    hold ``key`` at any instant; the same documents, tokens and semantics.

    ``db``: a URI, a ``mongoelector.Client``, a pymongo ``AsyncDatabase`` or a pymongo
    ``Database`` (see ``mongoelector.aio``). Keyword arguments as
    ``MongoReadWriteLock``'s.

    ``async with rw.read() as hold:`` / ``async with rw.write() as hold:`` take a hold and
    keep it alive until the block ends (``AsyncRwLockLease``); ``await rw.acquire(side)``
    and ``await rw.release()`` take and drop one without keep-alive. ``await rw.close()``
    releases a hold and frees the native lock and, for a URI, the connections. The native
    lock is made on first use, off the loop, or by ``await rw.open()``. One instance holds
    at most one hold (a read or the write): use one instance per concurrent holder (per
    task).
    """

    _what = "AsyncMongoReadWriteLock"
    max_readers: int
    writer_preference: bool

    def __init__(
        self,
        key: str,
        db: AsyncDatabaseArg,
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
        def check(target: object) -> None:
            check_db(target, database)
            _check_args(key, max_readers, ttl)

        self._init_slot(
            key,
            db,
            ttl,
            check,
            dbcollection=dbcollection,
            timeparanoid=timeparanoid,
            maxoffset=maxoffset,
            database=database,
            allow_unsafe_server=allow_unsafe_server,
            op_timeout=op_timeout,
            fair=fair,
        )
        self.max_readers = int(max_readers)
        self.writer_preference = bool(writer_preference)

    def _new_core(self, storage: object) -> _NativeRwLock:
        own = (self.key, self.max_readers, self.writer_preference)
        return _new_rwlock(storage, *own, *self._slot_args(), **self._slot_kwargs())

    # ---------------------------------------------------------------- holding --

    def read(
        self, *, blocking: bool = True, timeout: Optional[float] = None, step: float = 0.25
    ) -> AsyncRwLockLease:
        """A read hold kept alive until the ``async with`` block ends::

        async with rw.read(timeout=10) as hold:
            hold.check()
        """
        return AsyncRwLockLease(self, "read", blocking=blocking, timeout=timeout, step=step)

    def write(
        self, *, blocking: bool = True, timeout: Optional[float] = None, step: float = 0.25
    ) -> AsyncRwLockLease:
        """The write hold kept alive until the ``async with`` block ends."""
        return AsyncRwLockLease(self, "write", blocking=blocking, timeout=timeout, step=step)

    async def acquire(
        self,
        side: Side,
        blocking: bool = True,
        timeout: Optional[float] = None,
        step: float = 0.25,
    ) -> bool:
        """Takes a read (``"read"``) or the write (``"write"``) hold without keep-alive,
        as ``MongoReadWriteLock.acquire()``: returns True (the token is then
        ``self.fence``); raises ``LockExists`` (held and ``blocking`` is False; the
        message names the holder), ``AcquireTimeout``, ``ValueError`` (an unknown side,
        ``blocking=False`` with a timeout, another ``max_readers`` than the key's, a key
        of another kind), ``TypeError`` (a side that is not a str), ``RuntimeError``
        (this instance holds already) or ``TimeOffsetError``. Waits between attempts with
        ``asyncio.sleep``; a blocking writer waits with its mark (writer preference),
        released when it gives up. Cancelling the awaiting task ends the wait at once; a
        hold an attempt in flight took is released, fenced."""
        side = _check_side(side)
        if not blocking and timeout is not None:
            raise ValueError("Cannot set timeout if blocking is False")
        self._check_not_holding()
        core = await self._opened()
        run = core.start_acquire(side, bool(blocking), timeout, step)
        await self._drive(run, run.attempt, functools.partial(self._abandon, run))
        return True

    def _waits_with_writes(self) -> bool:
        return True  # a blocking writer's waiting mark, or a fair writer's queue entry

    def _check_not_holding(self) -> None:
        core = self._core
        if self.owned and core is not None:
            raise RuntimeError(
                f"this AsyncMongoReadWriteLock already holds {self.key!r} for "
                f"{'writing' if core.side == 'write' else 'reading'} (fence {self.fence}): "
                "release it first, or use one instance per holder"
            )

    async def holders(self) -> RwLockHolders:
        """Who holds the key now (one round trip): the readers in slot order, the writer,
        and the writer waiting with its mark, each ``None`` when there is none; and the
        fair waiters still queued, first in line first."""
        core = await self._opened()
        return await call(core.holders)

    # ------------------------------------------------------------ local state ----

    @property
    def side(self) -> Optional[Side]:
        """``"read"`` or ``"write"`` while this instance's hold runs on this host's
        clock; None otherwise (no round trip)."""
        core = self._core
        return core.side if core is not None and self.owned else None

    def __repr__(self) -> str:
        return self._repr(f"max_readers={self.max_readers}", lambda: f"side={self.side!r}")


class AsyncRwLockLease(_RwHold, AsyncSlotLease):
    """``mongoelector.RwLockLease`` for asyncio: a read or the write hold kept alive by
    the core's native renewer until :meth:`release` (or the end of ``async with``); the
    rules of ``AsyncLease`` (``lost`` is an ``asyncio.Event`` read from the native lease,
    ``check()``, ``LeaseLost`` on leaving a block in which it was lost). Cancelling the
    awaiting task ends the wait; a hold an attempt in flight took is released, and a
    writer's waiting mark too."""

    rwlock: AsyncMongoReadWriteLock
    side: Side

    def __init__(
        self,
        rwlock: AsyncMongoReadWriteLock,
        side: Side,
        *,
        blocking: bool = True,
        timeout: Optional[float] = None,
        step: float = 0.25,
    ) -> None:
        self.side = _check_side(side)
        super().__init__(blocking=blocking, timeout=timeout, step=step)
        self.rwlock = rwlock

    def _holder(self) -> AsyncMongoReadWriteLock:
        return self.rwlock

    def _start(
        self, core: _NativeRwLock, blocking: bool, timeout: Optional[float], step: float
    ) -> AcquireRun:
        return core.start_acquire(self.side, blocking, timeout, step)

    def _adopt(self, core: Any, on_lost: Callable[[], None]) -> NativeSlotLease:
        return _adopt_hold(core, on_lost)
