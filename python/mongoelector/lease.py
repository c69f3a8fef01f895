"""Keep-alive leases: a lock renewed by the native core until the ``with`` block ends.

::

    with mongoelector.lease(db, "nightly-report", ttl=30, timeout=10) as lease:
        for batch in work:
            lease.check()                   # raises LeaseLost once the lease is lost
            write(batch, fence=lease.fence)

The lease is renewed about every ttl/3 by one native renewer thread per process (no
Python thread, no GIL while waiting). It is declared LOST on this host's monotonic clock
at its renew deadline (lease end minus max(ttl/10, 2 x clock uncertainty + 50 ms), so
before anyone else can take the lock) whether or not a renewal call still hangs, or as
soon as a renewal finds the lock taken. Loss is read from that deadline and the clock when
asked (no thread has to announce it: a slow callback elsewhere, or a fork()ed child,
cannot keep the lease reading "held"), and is final: ``lease.lost`` (a
``threading.Event`` whose state is the lease's loss) is set, ``lease.check()`` raises
``LeaseLost``, and leaving the ``with`` block raises ``LeaseLost`` too (unless the block
already raised). Leaving the block releases the lock (fenced); a lost lease is not
released.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Optional, TypedDict, TypeVar

from . import _native
from ._keepalive import KeepAlive
from ._loss import LossEvent
from ._transport import DatabaseArg
from .errors import ClosedError, LeaseLost
from .locker import MongoLocker

if sys.version_info >= (3, 11):
    from typing import Unpack
elif TYPE_CHECKING:
    from typing_extensions import Unpack

_log = logging.getLogger("mongoelector")

__all__ = ["Lease", "lease", "LeaseLost", "LockerOptions"]

_S = TypeVar("_S", bound="Lease")


class LockerOptions(TypedDict, total=False):
    """The ``MongoLocker`` keyword arguments that ``lease()`` and ``Lease`` pass on."""

    dbcollection: str
    timeparanoid: bool
    maxoffset: float
    database: Optional[str]
    delete_on_release: bool
    allow_unsafe_server: bool
    op_timeout: Optional[float]
    fair: bool


class Lease(KeepAlive):
    """A lock on ``key`` kept alive until :meth:`release` (or the end of a ``with``).

    ``db`` is what ``MongoLocker`` takes: a pymongo ``Database``, a ``mongodb://`` URI, a
    ``sqlite:///path`` URI or a ``mongoelector.Client``. ``timeout`` bounds the wait for
    the lock (``AcquireTimeout``; None waits forever); ``blocking=False`` makes one
    attempt (``LockExists``). Other keyword arguments go to ``MongoLocker``.
    """

    key: str
    ttl: float
    #: The locker whose lock the lease keeps alive.
    locker: MongoLocker
    #: Set once the lease is lost (read from the native lease: true from its renew
    #: deadline on); ``lost.wait(timeout)`` is ``wait_lost(timeout)``. Only the library
    #: decides it: ``lost.set()`` and ``lost.clear()`` raise ``RuntimeError``.
    lost: LossEvent

    def __init__(
        self,
        db: DatabaseArg,
        key: str,
        *,
        ttl: float = 30,
        timeout: Optional[float] = None,
        blocking: bool = True,
        step: float = 0.25,
        min_hold: Optional[float] = None,
        **locker_kwargs: Unpack[LockerOptions],
    ) -> None:
        if not blocking and timeout is not None:
            raise ValueError("Cannot set timeout if blocking is False")
        if min_hold is not None and (
            isinstance(min_hold, bool)
            or not isinstance(min_hold, (int, float))
            or not 0 <= min_hold <= 1e9
        ):
            raise ValueError(f"min_hold must be a number of seconds >= 0, not {min_hold!r}")
        #: Seconds after the acquire during which the lock stays taken once released.
        self.min_hold = min_hold
        self.key = key
        self.ttl = ttl
        self.locker = MongoLocker(key, db, ttl=ttl, **locker_kwargs)
        self.lost = LossEvent()
        self._timeout = timeout
        self._blocking = blocking
        self._step = step
        self._native: Optional[_native.KeepAliveLease] = None

    def acquire(self) -> int:
        """Waits for the lock and starts keeping it alive. Returns the fencing token."""
        if self._native is not None:
            raise RuntimeError("this lease is already held; use a new Lease")
        if self.locker.closed:
            raise ClosedError(f"the locker of lease {self.key!r} is closed")
        self._native = _native.KeepAliveLease(
            self.locker._core,
            self._blocking,
            None if self._timeout is None else float(self._timeout),
            float(self._step),
        )
        self.lost._bind(self._native)
        return self._native.fence

    def release(self, min_hold: Optional[float] = None) -> None:
        """Stops keeping the lock alive and releases it (fenced; not if lost). With
        ``min_hold`` (default: the lease's own), the lock stays taken until that many
        seconds after it was acquired (server clock): see ``MongoLocker.release``. When
        that minimum hold is not surely kept, the lease is released all the same and the
        call raises: ``LeaseLost`` (the lease was lost, or the lock had expired or been
        taken when the write landed), or the write's storage error (it may still land;
        otherwise the lock frees at its ttl)."""
        if self._native is None:
            return
        hold = self.min_hold if min_hold is None else min_hold
        if hold:
            self._native.close_min_hold(float(hold))
        else:
            self._native.close()

    def _release_after_job(self, what: str) -> None:
        """Releases once a job has run (the scheduler integrations): a minimum hold that is
        not surely kept is logged, not raised, since the job's own outcome stands and
        raising could make a task queue run it again."""
        try:
            self.release()
        except Exception as e:  # noqa: BLE001 -- any failure: logged, as said above
            _log.warning(
                "%s: the lock may be taken again before its minimum hold ends: %s", what, e
            )

    def _held(self) -> str:
        return f"lease of {self.key!r}"

    def _repr_key(self) -> str:
        return repr(self.key)


def lease(
    db: DatabaseArg,
    key: str,
    *,
    ttl: float = 30,
    timeout: Optional[float] = None,
    blocking: bool = True,
    step: float = 0.25,
    min_hold: Optional[float] = None,
    **locker_kwargs: Unpack[LockerOptions],
) -> Lease:
    """``with mongoelector.lease(db, key, ttl=30, timeout=10) as lease:`` — see :class:`Lease`."""
    return Lease(
        db,
        key,
        ttl=ttl,
        timeout=timeout,
        blocking=blocking,
        step=step,
        min_hold=min_hold,
        **locker_kwargs,
    )
