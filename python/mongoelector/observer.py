"""Who leads an election key, as a stream of changes: ``mongoelector.observe()``.

Any process can watch an election without taking part in it (a load balancer, a
dashboard, a client that must talk to the leader)::

    with mongoelector.observe(db, "my-service") as changes:
        for state in changes:                      # blocks, without the GIL
            if state.has_leader:
                print("leader", state.host, state.pid, "token", state.fence)
            else:
                print("no leader")                 # released, expired or never held

    async for state in mongoelector.observe(db, "my-service"):   # never blocks the loop
        ...

The first item is the state when the first poll ran; after it, one item per change of
leader: another member (its uuid), a new term of the same member (its fencing token),
"no leader" (released, resigned, expired), a pending hand-over, and "unknown". A resign
followed by the same member winning again within one ``interval`` is not seen (nothing
polled the gap). It polls the lock document (one read per ``interval``, no writes) on a
native thread of the core.

A leader is named only while its lease surely runs: its end (``expires``) is compared with
the latest the server's clock can read on this process's estimate of it (estimate plus
uncertainty), so the leader it names never outlives its lease under any clock error the
estimate allows. After ``transfer()`` the state is ``LeaderStatus.PENDING`` (nobody leads,
the target in ``handover_uuid``...) until the target has taken the hand-over with its own
renewal, then the target as leader; a target that never takes it stays pending until the
hand-over's expiry. While the database cannot be read nothing is yielded (each failure is
logged at WARNING on the ``mongoelector`` logger), except ``LeaderStatus.UNKNOWN`` at the
instant the lease last seen ends; the first read that succeeds yields the state if it
changed.
"""

from __future__ import annotations

import asyncio
import atexit
import enum
import json
import math
import numbers
import os
import threading
import weakref
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Any, Dict, List, Literal, Optional, Tuple, Type, TypeVar

from . import _native, _transport
from ._transport import DatabaseArg
from .errors import ClosedError

__all__ = ["LeaderState", "LeaderStatus", "LeaderObserver", "observe"]

_O = TypeVar("_O", bound="LeaderObserver")


class LeaderStatus(str, enum.Enum):
    """What an observer can tell about an election key (a ``str``: compares equal to its
    value)."""

    #: Nobody leads: the lock is absent, released or expired.
    NONE = "none"
    #: ``uuid`` leads.
    LEADER = "leader"
    #: A ``transfer()`` to ``handover_uuid`` is written and the target has not taken it
    #: yet (it leads only after a renewal of its own): nobody leads.
    PENDING = "pending"
    #: The reads fail and the lease last seen has ended on this process's estimate of the
    #: server's clock: who leads cannot be told.
    UNKNOWN = "unknown"


# The core's numbers (core/observe/leader_observer.h, the C API's
# mongoelector_leader_status).
_STATUS_BY_NUMBER = (
    LeaderStatus.NONE,
    LeaderStatus.LEADER,
    LeaderStatus.PENDING,
    LeaderStatus.UNKNOWN,
)


@dataclass(frozen=True)
class LeaderState:
    """One observation of an election key's lock.

    ``uuid``, ``host``, ``pid`` and ``fence`` are the leader's (its ``node_status``
    ``uuid``, ``host``, ``pid`` and ``MongoLeaderElector.fence`` of that term), all None
    when ``has_leader`` is False. ``server_time`` (timezone-aware UTC) is when the lock
    was read, on the server's clock as estimated by this process.

    ``status`` says which case this is (``LeaderStatus``; LEADER exactly when
    ``has_leader``). ``expires`` (server's clock) is when the lease ends unless
    renewed: the leader's, a pending hand-over's (a target that never takes it frees the
    lock then), or, with UNKNOWN, the one that ended unseen; None with NONE.
    ``handover_uuid``, ``handover_host``, ``handover_pid`` and ``handover_fence`` name the
    target of a pending hand-over and the token it will lead with (None otherwise).
    ``payload`` is the leader's payload (the dict its elector published with this term,
    ``MongoLeaderElector(payload=...)``), None when it has none or nobody leads; a new
    payload of the same leader is reported as a change.
    """

    has_leader: bool
    uuid: Optional[str]
    host: Optional[str]
    pid: Optional[int]
    fence: Optional[int]
    server_time: datetime
    status: LeaderStatus = LeaderStatus.NONE
    expires: Optional[datetime] = None
    handover_uuid: Optional[str] = None
    handover_host: Optional[str] = None
    handover_pid: Optional[int] = None
    handover_fence: Optional[int] = None
    payload: Optional[Dict[str, Any]] = field(default=None, hash=False)

    def __post_init__(self) -> None:
        # A leader means LEADER (the default NONE of a state built with has_leader only).
        status = LeaderStatus.LEADER if self.has_leader else LeaderStatus(self.status)
        object.__setattr__(self, "status", status)

    @classmethod
    def _from_native(cls, item: Tuple[Any, ...]) -> LeaderState:
        fields = list(item)
        fields[6] = _STATUS_BY_NUMBER[fields[6]]
        if len(fields) > 12 and fields[12] is not None:
            fields[12] = json.loads(fields[12])
        return cls(*fields)

    def same_leader(self, other: LeaderState) -> bool:
        """Whether both name the same term (or both no leader, or both the same pending
        hand-over), whenever observed."""
        return (self.status, self.uuid, self.fence, self.handover_uuid, self.handover_fence) == (
            other.status,
            other.uuid,
            other.fence,
            other.handover_uuid,
            other.handover_fence,
        )


_Waiter = Tuple[asyncio.AbstractEventLoop, "asyncio.Future[None]"]


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class _Waker:
    """Called by the native observer thread (GIL taken) after each change: wakes the
    coroutines waiting in ``__anext__``, each on its own loop. It does not refer to the
    observer, so that the observer is never freed on the thread that it joins."""

    __slots__ = ("_lock", "_waiters")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: List[_Waiter] = []

    def add(self, loop: asyncio.AbstractEventLoop, fut: asyncio.Future[None]) -> None:
        with self._lock:
            self._waiters.append((loop, fut))

    def discard(self, fut: asyncio.Future[None]) -> None:
        with self._lock:
            self._waiters = [w for w in self._waiters if w[1] is not fut]

    def __call__(self) -> None:
        with self._lock:
            waiters, self._waiters = self._waiters, []
        for loop, fut in waiters:
            try:
                loop.call_soon_threadsafe(_resolve, fut)
            except RuntimeError:  # that loop is closed: nobody waits there any more
                pass


def _seconds(name: str, value: object, *, allow_none: bool = False) -> Optional[float]:
    """A number of seconds given by the user: TypeError for what is not a number."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            "%s must be a number of seconds%s, not %s"
            % (name, " or None" if allow_none else "", type(value).__name__)
        )
    return float(value)


def _check_str(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError("%s must be a str, not %s" % (name, type(value).__name__))
    if not value:
        raise ValueError("%s must not be empty" % name)
    return value


# Observers not closed yet: closed at interpreter exit (their native threads stop before
# finalization), abandoned in a child created by fork() (their threads are not there).
_open: weakref.WeakSet[LeaderObserver] = weakref.WeakSet()
_open_lock = threading.Lock()


class LeaderObserver:
    """The stream of ``observe()``: an iterator, an async iterator and a context manager
    (sync and async) whose exit closes it.

    Meant for one consumer: two iterating one observer share its changes between them.
    Changes not yet read are kept (the oldest dropped past 1024, with a warning).
    """

    key: str
    #: The ``db`` argument as given.
    db: DatabaseArg
    interval: float
    collection: str

    def __init__(
        self,
        db: DatabaseArg,
        key: str,
        *,
        interval: float = 1.0,
        collection: str = "elector.locks",
        database: Optional[str] = None,
        op_timeout: Optional[float] = None,
    ) -> None:
        _transport.check_db(db, database)
        _check_str("key", key)
        _check_str("collection", collection)
        seconds = _seconds("interval", interval)
        if seconds is None or not (math.isfinite(seconds) and 0 < seconds <= 1e6):
            raise ValueError("interval must be a finite number of seconds in (0, 1e6]")
        timeout = _seconds("op_timeout", op_timeout, allow_none=True)
        if timeout is None:
            timeout = _transport.op_timeout_for(15)  # a default elector's
        elif not (math.isfinite(timeout) and timeout > 0):
            raise ValueError("op_timeout must be a positive number of seconds")
        self.key = key
        self.db = db
        self.interval = seconds
        self.collection = collection
        self._waker = _Waker()
        self._closed = False
        storage, use = _transport.open_storage(db, database=database, op_timeout=timeout)
        try:
            self._core = _native.LeaderObserver(storage, key, collection, seconds, self._waker)
        except BaseException:
            del storage
            if use is not None:
                use.end()
            raise
        self._use = use
        with _open_lock:
            _open.add(self)

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"LeaderObserver(key={self.key!r}, {state}, interval={self.interval})"

    @property
    def closed(self) -> bool:
        """True once ``close()`` was called (by any thread)."""
        return self._closed or self._core.closed

    def get(self, timeout: Optional[float] = None) -> Optional[LeaderState]:
        """The next change, waiting at most ``timeout`` seconds (None: as long as it
        takes) with the GIL released; None when the timeout passed first. Raises
        ``ClosedError`` once closed (also when ``close()`` ends the wait)."""
        seconds = _seconds("timeout", timeout, allow_none=True)
        if seconds is not None and (math.isnan(seconds) or seconds < 0):
            raise ValueError("timeout must be a non-negative number of seconds or None")
        item = self._core.next(seconds)
        if item is None and self.closed:
            raise ClosedError(f"LeaderObserver {self.key!r} is closed")
        return None if item is None else LeaderState._from_native(item)

    def __iter__(self: _O) -> _O:
        return self

    def __next__(self) -> LeaderState:
        item = self._core.next(None)  # None only once closed
        if item is None:
            raise StopIteration
        return LeaderState._from_native(item)

    def __aiter__(self: _O) -> _O:
        return self

    async def __anext__(self) -> LeaderState:
        loop = asyncio.get_running_loop()
        while True:
            item = self._core.next(0)
            if item is None and not self.closed:
                fut: asyncio.Future[None] = loop.create_future()
                self._waker.add(loop, fut)
                try:
                    # Looked at again after registering: a change pushed in between has
                    # either been queued already (seen here) or wakes `fut`.
                    item = self._core.next(0)
                    if item is None and not self.closed:
                        await fut
                        continue
                finally:
                    self._waker.discard(fut)
            if item is None:
                raise StopAsyncIteration
            return LeaderState._from_native(item)

    def close(self) -> None:
        """Ends the stream: a blocked ``for`` loop or ``async for`` ends (``get()``
        raises ``ClosedError``), changes not read are dropped, and the native thread
        stops (this waits for a read in flight, at most ``op_timeout``). Idempotent; any
        thread."""
        self._closed = True
        self._core.close()
        self._waker()
        with _open_lock:
            _open.discard(self)
            use, self._use = self._use, None
        if use is not None:
            use.end()

    async def aclose(self) -> None:
        """``close()`` on a worker thread: the event loop does not wait for a read in
        flight."""
        self._closed = True
        self._waker()
        await asyncio.get_running_loop().run_in_executor(None, self.close)

    def __enter__(self: _O) -> _O:
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc_val: Optional[BaseException],
        exc_tb: Optional[TracebackType],
    ) -> Literal[False]:
        self.close()
        return False

    async def __aenter__(self: _O) -> _O:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc_val: Optional[BaseException],
        exc_tb: Optional[TracebackType],
    ) -> Literal[False]:
        await self.aclose()
        return False

    def _abandon(self) -> None:
        self._closed = True
        self._core._abandon()


def observe(
    db: DatabaseArg,
    key: str,
    *,
    interval: float = 1.0,
    collection: str = "elector.locks",
    database: Optional[str] = None,
    op_timeout: Optional[float] = None,
) -> LeaderObserver:
    """Watches who leads election ``key`` (of ``MongoLeaderElector(key, db)``): returns a
    ``LeaderObserver`` that yields a ``LeaderState`` for the current state, then for every
    change of leader, "no leader" included.

    ``db`` is what ``MongoLeaderElector`` takes (pymongo ``Database``, ``mongodb://``,
    ``sqlite:///`` or ``memory://`` URI, ``mongoelector.Client``; ``database=`` for a URI
    without one). ``interval``: seconds between reads of the lock (one read each, no
    writes). ``collection``: the electors' lock collection. ``op_timeout``: the budget of
    one read (default: a default elector's, 1.5 s). The native thread starts now (no round
    trip in this call: safe on an event loop) and runs until ``close()``, the end of a
    ``with``/``async with`` block, garbage collection, or interpreter exit.

    Raises TypeError for arguments of the wrong type (``db`` as ``MongoLeaderElector``
    does), ValueError for an empty key, a bad collection name or an interval outside
    (0, 1e6] seconds.
    """
    return LeaderObserver(
        db, key, interval=interval, collection=collection, database=database, op_timeout=op_timeout
    )


def _close_all() -> None:
    with _open_lock:
        observers = list(_open)
    for o in observers:
        o.close()


def _after_fork_in_child() -> None:
    global _open_lock
    _open_lock = threading.Lock()  # another thread of the parent may have held it
    observers = list(_open)
    _open.clear()
    for o in observers:
        o._abandon()


atexit.register(_close_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
