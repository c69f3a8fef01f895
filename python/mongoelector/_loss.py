"""``lease.lost`` of the keep-alive leases: an Event whose state IS the native lease's loss.

The core decides loss from the renew deadline and the host's monotonic clock when asked
(a lease is lost once the clock passes it, whatever any thread is doing). An Event that a
callback sets would read "held" for as long as that callback is late: waiting for the
GIL, queued behind another lease's slow callback, or absent in a fork()ed child. So
``is_set()`` asks the native lease, and ``wait()`` waits on its clock, up to the deadline.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Literal, Optional, Protocol


class _NativeLoss(Protocol):
    @property
    def lost(self) -> bool: ...
    def wait_lost(self, timeout: Optional[float] = None) -> bool: ...


class LossEvent(threading.Event):
    """A ``threading.Event`` that reads a lease's loss: ``is_set()`` is true once the lease
    is lost (at its renew deadline at the latest), ``wait(timeout)`` is the lease's
    ``wait_lost(timeout)`` (on the lease's clock: fake time on a testing ``FakeClock``;
    only a wait that begins before the lease exists spends that part in real time).
    It is set by the library only: ``set()`` and ``clear()`` raise ``RuntimeError``."""

    def __init__(self) -> None:
        super().__init__()
        self._native: Optional[_NativeLoss] = None

    def _bind(self, native: _NativeLoss) -> None:
        """The lease exists: from now on its loss is this Event's state."""
        self._native = native
        threading.Event.set(self)  # the inherited flag means "bound": wait() may ask it

    def is_set(self) -> bool:
        native = self._native
        return native is not None and native.lost

    isSet = is_set

    def wait(self, timeout: Optional[float] = None) -> bool:
        end = None if timeout is None else time.monotonic() + timeout
        if not threading.Event.wait(self, timeout):  # no lease yet: nothing to lose
            return False
        native = self._native
        assert native is not None
        return native.wait_lost(None if end is None else max(0.0, end - time.monotonic()))

    def set(self) -> None:
        raise RuntimeError("a lease's loss is decided by the library: lost cannot be set")

    def clear(self) -> None:
        raise RuntimeError("a lease's loss is final: lost cannot be cleared")

    def __repr__(self) -> str:
        return f"<LossEvent {'set' if self.is_set() else 'unset'}>"


class _AsyncNativeLoss(_NativeLoss, Protocol):
    @property
    def deadline_in(self) -> float: ...


class AsyncLossEvent(asyncio.Event):
    """An ``asyncio.Event`` that reads a lease's loss: ``is_set()`` asks the native lease;
    ``wait()`` returns once it is lost, waking at the renew deadline by itself (and at
    once when the library announces the loss). Set by the library only."""

    def __init__(self) -> None:
        super().__init__()
        self._native: Optional[_AsyncNativeLoss] = None

    def _bind(self, native: _AsyncNativeLoss) -> None:
        self._native = native
        self._wake()  # a wait() that began before the lease existed reads it now

    def _wake(self) -> None:
        """Wakes every wait() to look again (on the loop: the on_lost callback's hint)."""
        asyncio.Event.set(self)
        asyncio.Event.clear(self)

    def is_set(self) -> bool:
        native = self._native
        return native is not None and native.lost

    async def wait(self) -> Literal[True]:
        while not self.is_set():
            native = self._native
            # Until the deadline (then lost(), unless a renewal moved it: look again), or
            # without a limit once it passed and the lease is still not lost (released).
            left = None if native is None else native.deadline_in
            try:
                await asyncio.wait_for(
                    asyncio.Event.wait(self), left if left is not None and left > 0 else None
                )
            except asyncio.TimeoutError:
                pass
        return True

    def set(self) -> None:
        raise RuntimeError("a lease's loss is decided by the library: lost cannot be set")

    def clear(self) -> None:
        raise RuntimeError("a lease's loss is final: lost cannot be cleared")
