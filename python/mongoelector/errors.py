"""Exceptions of mongoelector.

``LockExists``, ``AcquireTimeout`` and ``TimeOffsetError`` are the original's three
exceptions (also importable from ``mongoelector`` and ``mongoelector.locker``); they now
share the base class ``MongoElectorError``. The others are new: they are raised only by
the native URI transport and by the server-safety check, and they subclass the pymongo
exception a pymongo-based caller already catches.
"""

from __future__ import annotations

from pymongo.errors import ConnectionFailure, OperationFailure

__all__ = [
    "MongoElectorError",
    "LockExists",
    "AcquireTimeout",
    "TimeOffsetError",
    "UnsafeServerError",
    "StorageUnavailable",
    "StorageError",
    "LeaseLost",
    "ClosedError",
    "StaleFence",
]


class MongoElectorError(Exception):
    """Base class of every exception defined by mongoelector."""


class LockExists(MongoElectorError):
    """Raised when attempting a non-blocking acquire on an existing lock."""


class AcquireTimeout(MongoElectorError):
    """Raised when lock acquisition times out."""


class TimeOffsetError(MongoElectorError):
    """Raised when the clock offset between this host and MongoDB is too high."""


def _time_offset_error(offset: float) -> TimeOffsetError:
    """The original's error for a clock offset (seconds, either sign) above maxoffset;
    the native core's offset errors are raised with this message too."""
    return TimeOffsetError(f"Clock offset vs MongoDB is too high: {round(abs(offset), 2)}s")


# The original defines these three in mongoelector.locker: keep that name in reprs,
# tracebacks and pickles.
for _cls in (LockExists, AcquireTimeout, TimeOffsetError):
    _cls.__module__ = "mongoelector.locker"
del _cls


class UnsafeServerError(MongoElectorError):
    """The server does not run findAndModify atomically (e.g. FerretDB), so two nodes
    could both take over one expired lock. Pass ``allow_unsafe_server=True`` to run
    anyway (tests, a single node)."""


class StorageUnavailable(MongoElectorError, ConnectionFailure):
    """URI transport: the server could not be reached or did not answer in time."""


class StorageError(MongoElectorError, OperationFailure):
    """URI transport: the server answered with an error (``code`` is the server's)."""


class LeaseLost(MongoElectorError):
    """A keep-alive lease (``mongoelector.lease``) was lost: its renew deadline passed
    without a successful renewal (server unreachable, frozen or slow), or the lock was
    taken. The holder must stop acting on the lock; another node may take it over once
    the lease expires. Raised by ``lease.check()`` and on leaving the ``with`` block.
    Also raised by a release with ``min_hold`` whose minimum hold cannot be kept: the
    hold had already ended at the server (expired, or taken) when its write landed."""


class ClosedError(MongoElectorError, RuntimeError):
    """A ``MongoLocker`` or ``MongoLeaderElector`` was used after its ``close()``.

    A ``RuntimeError`` (the object's state forbids the call, as for an elector inherited
    through ``fork()``); ``close()`` itself may be called again and does nothing."""


class StaleFence(MongoElectorError):
    """A fenced write (``mongoelector.fenced``) was refused: the document already carries
    a newer fencing token (``current``) than the writer's (``fence``), written by a later
    holder of the lock. Nothing was written; the writer must stop acting on the lock."""

    def __init__(self, fence: int, current: int) -> None:
        super().__init__(
            f"stale fencing token {fence}: the document carries {current} "
            f"(written by a newer holder); nothing was written"
        )
        self.fence = fence
        self.current = current

    def __reduce__(self) -> tuple[type[StaleFence], tuple[int, int]]:
        return (StaleFence, (self.fence, self.current))
