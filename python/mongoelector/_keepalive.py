"""What every keep-alive lease shares, a lock's or a semaphore slot's, synchronous or
asyncio: its fencing token, why it was lost, ``check()``, the error that leaving a block
raises, and its repr. ``mongoelector.lease``, ``mongoelector.semaphore`` and
``mongoelector.aio`` add acquiring, waiting and releasing in their own flavour."""

from __future__ import annotations

import logging
from types import TracebackType
from typing import Literal, Optional, Protocol, Type, TypeVar

from .errors import LeaseLost

_log = logging.getLogger("mongoelector")

_K = TypeVar("_K", bound="KeepAlive")


class NativeKeepAlive(Protocol):
    @property
    def fence(self) -> int: ...
    @property
    def lost_reason(self) -> str: ...
    def close(self) -> None: ...
    def wait_lost(self, timeout: Optional[float]) -> bool: ...


class _Lost(Protocol):
    def is_set(self) -> bool: ...


class KeepAliveBase:
    """The state of a keep-alive lease once made: the native lease (``_native``, None
    before acquire) and its loss (``lost``)."""

    lost: _Lost
    _native: Optional[NativeKeepAlive]

    def _held(self) -> str:  # "lease of 'k'", "slot of semaphore 'k'"
        raise NotImplementedError

    def _repr_key(self) -> str:
        raise NotImplementedError

    @property
    def fence(self) -> Optional[int]:
        """The fencing token of the hold (None before acquire): pass it with every write
        the hold guards."""
        return None if self._native is None else self._native.fence

    @property
    def reason(self) -> str:
        """Why the lease was lost ("" while it is not)."""
        return "" if self._native is None else self._native.lost_reason

    def check(self) -> None:
        """Raises ``LeaseLost`` if the lease is lost; call it before acting on the hold."""
        if self.lost.is_set():
            raise LeaseLost(f"{self._held()} (fence {self.fence}) was lost: {self.reason}")

    def _lost_in_block(self) -> LeaseLost:
        return LeaseLost(
            f"{self._held()} (fence {self.fence}) was lost while the block ran: {self.reason}"
        )

    def __repr__(self) -> str:
        state = "lost" if self.lost.is_set() else ("held" if self._native else "new")
        return f"<{type(self).__name__} {self._repr_key()} fence={self.fence} {state}>"


class KeepAlive(KeepAliveBase):
    """A synchronous keep-alive lease (``Lease``, ``SemaphoreLease``): a ``with`` block
    holds it, and leaving the block raises ``LeaseLost`` if it was lost meanwhile."""

    def acquire(self) -> int:
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError

    def wait_lost(self, timeout: Optional[float] = None) -> bool:
        """Blocks until the lease is lost (True) or ``timeout`` seconds pass (False)."""
        native = self._native
        if native is None:
            return False
        return native.wait_lost(timeout)

    def __enter__(self: _K) -> _K:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> Literal[False]:
        lost = self.lost.is_set()
        try:
            self.release()
        except Exception as e:
            if exc_type is None and not lost:
                raise
            # The block's own exception, or the loss raised below, is what the caller sees.
            _log.warning("%s: %s", self._held(), e)
        if lost and exc_type is None:
            raise self._lost_in_block()
        return False
