"""``AsyncLease`` and ``lease()``: ``mongoelector.lease`` for asyncio."""

from __future__ import annotations

import asyncio
import functools
import sys
import weakref
from types import TracebackType
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Literal,
    Optional,
    Tuple,
    Type,
    TypeVar,
)

from .. import _native
from .._keepalive import KeepAliveBase
from .._loss import AsyncLossEvent
from ..errors import ClosedError
from ..lease import LockerOptions
from ._common import AsyncDatabaseArg, call, drive
from .locker import AsyncMongoLocker

if sys.version_info >= (3, 11):
    from typing import Unpack
elif TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["AsyncLease", "lease"]

_K = TypeVar("_K", bound="KeepAlive")


class KeepAlive(KeepAliveBase):
    """What the asyncio keep-alive leases (``AsyncLease``, ``AsyncSemaphoreLease``) add to
    the shared state (``mongoelector._keepalive``): waiting, releasing, ``async with``."""

    lost: AsyncLossEvent

    async def acquire(self) -> int:
        raise NotImplementedError

    async def wait_lost(self, timeout: Optional[float] = None) -> bool:
        """Waits until the lease is lost (True) or ``timeout`` seconds pass (False)."""
        if self._native is None:
            return False
        try:
            await asyncio.wait_for(self.lost.wait(), timeout)
        except asyncio.TimeoutError:
            return self.lost.is_set()
        return True

    async def release(self) -> None:
        """Stops keeping the hold alive and releases it (fenced; not if lost)."""
        native = self._native
        if native is not None:
            await call(native.close)

    async def __aenter__(self: _K) -> _K:
        await self.acquire()
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> Literal[False]:
        lost = self.lost.is_set()
        await self.release()
        if lost and exc_type is None:
            raise self._lost_in_block()
        return False


class AsyncLease(KeepAlive):
    """``mongoelector.Lease`` for asyncio: a lock on ``key`` kept alive by the core's
    native renewer until :meth:`release` (or the end of ``async with``).

    ``lost`` is an ``asyncio.Event`` whose state is the lease's loss, read from the native
    lease (true from its renew deadline on; ``await lost.wait()`` wakes there by itself);
    ``check()`` raises ``LeaseLost`` then; leaving the ``async with`` block raises
    ``LeaseLost`` too (unless the block raised). Waiting for the lock is ``asyncio.sleep``
    between attempts (``step``); ``timeout`` bounds it (``AcquireTimeout``), and
    ``blocking=False`` makes one attempt (``LockExists``). Other keyword arguments go to
    ``AsyncMongoLocker`` (the lease's ``locker``).
    """

    key: str
    ttl: float
    #: The locker whose lock the lease keeps alive.
    locker: AsyncMongoLocker
    #: Set once the lease is lost (read from the native lease).
    lost: AsyncLossEvent

    def __init__(
        self,
        db: AsyncDatabaseArg,
        key: str,
        *,
        ttl: float = 30,
        timeout: Optional[float] = None,
        blocking: bool = True,
        step: float = 0.25,
        **locker_kwargs: Unpack[LockerOptions],
    ) -> None:
        if not blocking and timeout is not None:
            raise ValueError("Cannot set timeout if blocking is False")
        self.key = key
        self.ttl = ttl
        self.locker = AsyncMongoLocker(key, db, ttl=ttl, **locker_kwargs)
        self.lost = AsyncLossEvent()
        self._timeout = timeout
        self._blocking = blocking
        self._step = step
        self._native: Optional[_native.KeepAliveLease] = None

    async def acquire(self) -> int:
        """Waits for the lock and starts keeping it alive. Returns the fencing token."""
        if self._native is not None:
            raise RuntimeError("this lease is already held; use a new AsyncLease")
        if self.locker.closed:
            raise ClosedError(f"the locker of lease {self.key!r} is closed")
        core = await self.locker._opened()
        on_lost = lost_callback(self.lost)
        step = float(self._step)
        run = core.start_acquire(bool(self._blocking), self._timeout, step, False)

        def attempt() -> Tuple[str, Any]:  # on a worker
            kind, value = run.attempt()
            if kind != "acquired":
                return kind, value
            return kind, _native.KeepAliveLease.adopt(core, on_lost)

        native: _native.KeepAliveLease = await drive(
            run,
            functools.partial(self.locker._attempt_sync, attempt),
            close_orphan,
            give_up_under=self.locker._give_up_under(),
        )
        self._native = native
        self.lost._bind(native)
        return native.fence

    def _held(self) -> str:
        return f"lease of {self.key!r}"

    def _repr_key(self) -> str:
        return repr(self.key)


def _lease_lost(
    loop: asyncio.AbstractEventLoop, event_ref: "weakref.ReferenceType[AsyncLossEvent]"
) -> None:
    """on_lost of a lease (a core callback thread): wakes the waits at once. Only a hint:
    the loss itself is read from the native lease."""
    event = event_ref()
    if event is None:  # the lease was dropped: nobody waits
        return
    try:
        loop.call_soon_threadsafe(event._wake)
    except RuntimeError:  # the loop is closed: nobody waits
        pass


def lost_callback(event: AsyncLossEvent) -> Callable[[], None]:
    """The native on_lost of a lease whose loss ``event`` reports (on the running loop)."""
    return functools.partial(_lease_lost, asyncio.get_running_loop(), weakref.ref(event))


def close_orphan(step: Tuple[str, Any]) -> None:
    """The orphan of ``drive`` for a lease (of a lock or a semaphore slot): closes
    (releases) a lease taken for a task that was cancelled before it resumed."""
    kind, native = step
    if kind == "acquired":
        native.close()


def lease(
    db: AsyncDatabaseArg,
    key: str,
    *,
    ttl: float = 30,
    timeout: Optional[float] = None,
    blocking: bool = True,
    step: float = 0.25,
    **locker_kwargs: Unpack[LockerOptions],
) -> AsyncLease:
    """``async with mongoelector.aio.lease(db, key, ttl=30, timeout=10) as lease:`` -- see
    :class:`AsyncLease`."""
    return AsyncLease(
        db, key, ttl=ttl, timeout=timeout, blocking=blocking, step=step, **locker_kwargs
    )
