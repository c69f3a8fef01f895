"""``AsyncMongoSemaphore``: ``MongoSemaphore`` for asyncio."""

from __future__ import annotations

import functools
from types import TracebackType
from typing import Any, Callable, List, Literal, Optional, Type, TypeVar, cast

from .. import _native
from .._native import AcquireRun
from .._slots import NativeSlotLease
from .._transport import check_db
from ..locker import QueuedWaiter
from ..semaphore import (
    SemaphoreHolder,
    _check_args,
    _NativeSemaphore,
    _new_semaphore,
)
from ._common import AsyncDatabaseArg, call
from ._slots import AsyncSlotHandle, AsyncSlotLease

__all__ = ["AsyncMongoSemaphore", "AsyncSemaphoreLease"]

_S = TypeVar("_S", bound="AsyncMongoSemaphore")


class AsyncMongoSemaphore(AsyncSlotHandle[_NativeSemaphore]):
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
    limit: int

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
        fair: bool = False,
    ) -> None:
        def check(target: object) -> None:
            check_db(target, database)
            _check_args(key, limit, ttl)

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
        self.limit = int(limit)

    def _new_core(self, storage: object) -> _NativeSemaphore:
        return _new_semaphore(
            storage, self.key, self.limit, *self._slot_args(), **self._slot_kwargs()
        )

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
        await self._drive(run, run.attempt, functools.partial(self._abandon, run))
        return True

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

    async def waiting(self) -> List[QueuedWaiter]:
        """The fair waiters still queued for a slot, first in line first (one round
        trip); empty when nobody waits. Only blocking acquires of fair semaphores queue."""
        core = await self._opened()
        return [cast(QueuedWaiter, w) for w in await call(core.waiting)]

    def __repr__(self) -> str:
        return self._repr(f"limit={self.limit}", lambda: f"owned={self.owned}")

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


class AsyncSemaphoreLease(AsyncSlotLease):
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

    def __init__(
        self,
        semaphore: AsyncMongoSemaphore,
        *,
        blocking: bool = True,
        timeout: Optional[float] = None,
        step: float = 0.25,
    ) -> None:
        super().__init__(blocking=blocking, timeout=timeout, step=step)
        self.semaphore = semaphore

    def _holder(self) -> AsyncMongoSemaphore:
        return self.semaphore

    def _start(
        self, core: _NativeSemaphore, blocking: bool, timeout: Optional[float], step: float
    ) -> AcquireRun:
        return core.start_acquire(blocking, timeout, step)

    def _adopt(self, core: Any, on_lost: Callable[[], None]) -> NativeSlotLease:
        return _adopt_slot(core, on_lost)

    def _held(self) -> str:
        return f"slot of semaphore {self.semaphore.key!r}"


# The native lease of the slot a semaphore holds now (its private binding, by name as
# mongoelector.semaphore looks up the others).
_adopt_slot = cast(
    Callable[..., NativeSlotLease], getattr(getattr(_native, "_SemaphoreLease"), "adopt")
)
