"""asyncio API: ``AsyncMongoLocker``, ``AsyncMongoLeaderElector`` and ``async with lease()``.

The same objects as the synchronous package, awaited::

    from pymongo import AsyncMongoClient
    from mongoelector.aio import AsyncMongoLocker, AsyncMongoLeaderElector, lease

    db = AsyncMongoClient("mongodb://db1").app          # or "mongodb://db1/app"

    async with AsyncMongoLocker("nightly", db, ttl=30) as lock:
        ...                                              # held; released on exit

    async with lease(db, "report", ttl=30, timeout=10) as l:
        await write(batch, fence=l.fence)

    elector = AsyncMongoLeaderElector("svc", db, on_leader=start_work)   # async def or def
    await elector.start()

``db`` is a ``mongodb://``/``mongodb+srv://``/``sqlite:///`` URI or a
``mongoelector.Client`` (the core's own transport), a pymongo ``AsyncDatabase``
(pymongo >= 4.9), or a synchronous pymongo ``Database``.

How it runs. The protocol is the native core's, as for the synchronous classes. Each core
call that makes a round trip runs on a small dedicated thread pool (never on the event
loop); all waiting between attempts is ``asyncio.sleep``, so a waiting task holds no
thread, only a round trip in flight does. With an ``AsyncDatabase`` the core drives a
synchronous facade whose calls run the ``AsyncDatabase``'s coroutines on the event loop
(``mongoelector._aio_facade``): the I/O is pymongo's own asyncio I/O. The elector's loop
is the core's native thread, as for ``MongoLeaderElector``; its callbacks (plain or
``async def``) run on the event loop.

Cancelling a task that awaits ``acquire()`` (or a lease) stops the waiting at once; a
round trip already running finishes in a worker, and if it took the lock after the
cancellation, that hold is released (fenced): a cancelled acquire never leaks a lock.

Everything that needs the server is a coroutine; what the synchronous classes answer
locally (``fence``, ``ts_expire``, ``is_leader``, ``running``, ``poll_wait``) are
properties here too. The native objects are made on first use (or ``await open()``),
off the loop; ``close()`` is a coroutine.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import inspect
import logging
import os
import sys
import threading
import uuid as _uuid
import weakref
from datetime import datetime
from socket import getfqdn
from time import monotonic
from types import TracebackType
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Coroutine,
    Deque,
    Dict,
    List,
    Literal,
    Optional,
    Tuple,
    Type,
    TypeVar,
    Union,
    cast,
)

from pymongo.database import Database

from . import _aio_pool, _native, _transport
from ._aio_facade import AsyncDatabaseFacade, is_async_database
from ._loss import AsyncLossEvent
from .client import Client
from .elector import ClusterDetail, MongoLeaderElector, NodeStatus, _check_handover_poll
from .errors import AcquireTimeout, ClosedError, LeaseLost, LockExists
from .lease import LockerOptions
from .locker import LockerStatus, _check_args, _native_maxoffset

try:  # pymongo >= 4.9; URIs and Database objects need no more than the package's 4.2
    from pymongo.asynchronous.database import AsyncDatabase
except ImportError:  # pragma: no cover
    pass

if sys.version_info >= (3, 11):
    from typing import Unpack
elif TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "AsyncMongoLocker",
    "AsyncMongoLeaderElector",
    "AsyncLease",
    "lease",
    "AsyncDatabaseArg",
    "Callback",
]

log = logging.getLogger(__name__)

#: What ``db=`` of the asyncio classes accepts: a URI (``mongodb://``, ``mongodb+srv://``,
#: ``sqlite:///``), a ``mongoelector.Client``, a pymongo ``AsyncDatabase`` or a
#: synchronous pymongo ``Database``.
AsyncDatabaseArg = Union[str, Client, "AsyncDatabase[Any]", "Database[Any]"]

#: An elector callback: called with no arguments on the event loop; a coroutine function
#: (``async def``) is awaited. Its return value is ignored.
Callback = Callable[[], object]

_T = TypeVar("_T")
_L = TypeVar("_L", bound="AsyncMongoLocker")
_E = TypeVar("_E", bound="AsyncMongoLeaderElector")
_S = TypeVar("_S", bound="AsyncLease")

# ------------------------------------------------------------------- workers ----
# Core calls run on _aio_pool's workers: a dedicated pool, not the loop's default
# executor (a facade call waits for the loop, which may need the default executor --
# getaddrinfo -- to finish it), and one whose threads are never started by the loop.


def _quietly(fn: Callable[[_T], object], value: _T) -> None:
    try:
        fn(value)
    except Exception:  # noqa: BLE001 - a background clean-up must not raise anywhere
        log.exception("mongoelector.aio: background clean-up failed")


async def _call(fn: Callable[[], _T], orphan: Optional[Callable[[_T], object]] = None) -> _T:
    """Runs ``fn()`` (a core call that may make round trips) on the pool and returns its
    result. Cancelling the awaiting task returns at once; a call not started yet never
    runs, one already running finishes in its worker and, if it succeeded, ``orphan``
    (if given) gets its result there (to undo what nobody will take: a hold)."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[_T] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:  # on the loop
        if waiter.done():  # cancelled: nobody takes the result
            if ok and orphan is not None:
                _aio_pool.pool().submit(functools.partial(_quietly, orphan, value))
            return
        if ok:
            waiter.set_result(value)
        else:
            waiter.set_exception(value)

    def work() -> None:  # on a worker
        try:
            value: Any = fn()
            ok = True
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            # Without this frame (whose `value` refers to the error): no reference cycle.
            if exc.__traceback__ is not None:
                exc.__traceback__ = exc.__traceback__.tb_next
            value, ok = exc, False
        try:
            loop.call_soon_threadsafe(settle, ok, value)
        except RuntimeError:  # the loop is closed
            if ok and orphan is not None:
                _quietly(orphan, value)

    job = _aio_pool.pool().submit(work)
    try:
        return await waiter
    except asyncio.CancelledError:
        if not job.cancel():  # started (if not, it never runs)
            # Cancelled after the result was delivered but before this task resumed:
            # the result is nobody's either. (In flight, the waiter was cancelled with
            # the task and settle() hands the result to orphan.)
            if (
                orphan is not None
                and waiter.done()
                and not waiter.cancelled()
                and waiter.exception() is None
            ):
                _aio_pool.pool().submit(functools.partial(_quietly, orphan, waiter.result()))
        raise


def _prepare(
    key: str, db: object, ttl: float, database: Optional[str], op_timeout: Optional[float]
) -> Tuple[object, Optional[AsyncDatabaseFacade], float]:
    """The synchronous classes' argument checks; the ``db`` the core gets (the facade for
    an ``AsyncDatabase``) and the op_timeout."""
    facade = None
    target: object = db
    if is_async_database(db):
        facade = AsyncDatabaseFacade(db, 1.0)
        target = facade
    _check_args(key, target, ttl, database)
    if (
        isinstance(db, str)
        and not _transport.is_embedded_uri(db)
        and database is None
        and not _transport.database_from_uri(db)
    ):
        # As the synchronous classes' constructors (they connect at once).
        raise ValueError(
            "the MongoDB URI names no database: use mongodb://host/dbname or database="
        )
    if op_timeout is None:
        op_timeout = _transport.op_timeout_for(ttl)
    if facade is not None:
        facade.op_timeout = float(op_timeout)
    return target, facade, float(op_timeout)


class _Opener:
    """Makes an object's native part once, off the loop, shared by concurrent callers;
    a failed attempt is retried by the next call."""

    __slots__ = ("_task",)

    def __init__(self) -> None:
        self._task: Optional[asyncio.Task[None]] = None

    async def run(self, make: Callable[[], Coroutine[Any, Any, None]]) -> None:
        task = self._task
        if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
            task = self._task = asyncio.get_running_loop().create_task(make())
        # Shielded: a caller cancelled while the native object is made does not strand it.
        await asyncio.shield(task)

    async def settled(self) -> None:
        """Waits for an opening in progress (its outcome ignored)."""
        task = self._task
        if task is not None and not task.done():
            await asyncio.wait({task})


# -------------------------------------------------------------------- locker ----


class AsyncMongoLocker:
    """``MongoLocker`` for asyncio: the same lock, documents and semantics.

    ``db``: a URI, a ``mongoelector.Client``, a pymongo ``AsyncDatabase`` or a pymongo
    ``Database`` (see the module docstring). Keyword arguments as ``MongoLocker``'s.

    ``async with lock:`` acquires and releases (it does not close); ``await lock.close()``
    releases a hold and frees the native locker and, for a URI, the connections (the last
    user of a URI closes them). The native locker is made on first use, off the loop, or
    by ``await lock.open()`` (which reports a bad server or URI at once).

    Unlike ``MongoLocker.acquire()``, ``acquire()`` gets the fencing token with the lock
    (``fence`` is then a local read): an acquire that creates the lock document costs two
    more round trips, as the other bindings' acquire does.
    """

    key: str
    #: The ``db`` argument as given.
    database: AsyncDatabaseArg
    timeparanoid: bool
    #: This instance's uuid (the lock document's ``uuid`` while it holds the lock).
    uuid: str
    pid: int

    def __init__(
        self,
        key: str,
        db: AsyncDatabaseArg,
        *,
        dbcollection: str = "mongolocker",
        ttl: float = 600,
        timeparanoid: bool = True,
        maxoffset: float = 0.5,
        database: Optional[str] = None,
        delete_on_release: bool = True,
        allow_unsafe_server: bool = False,
        op_timeout: Optional[float] = None,
    ) -> None:
        target, facade, timeout = _prepare(key, db, ttl, database, op_timeout)
        self.key = key
        self.database = db
        self.timeparanoid = bool(timeparanoid)
        self.uuid = str(_uuid.uuid4())
        self.pid = os.getpid()
        self._target = target
        self._facade = facade
        self._db_name = database
        self._op_timeout = timeout
        self._collection = dbcollection
        self._ttl_arg = ttl
        self._maxoffset = maxoffset
        self._delete_on_release = bool(delete_on_release)
        self._allow_unsafe_server = bool(allow_unsafe_server)
        self._host: Optional[str] = None
        self._core: Optional[_native.Locker] = None
        self._use: Optional[_transport.ClientUse] = None
        self._opener = _Opener()
        self._closed = False
        self._ts_expire: Optional[datetime] = None
        self._time_checked = False
        # Taken by every acquire attempt, release and clean-up of a cancelled acquire
        # (on the workers), so a clean-up never interleaves with this instance's next
        # acquire.
        self._io = threading.Lock()

    # ------------------------------------------------------------ lifecycle ----

    async def open(self) -> None:
        """Makes the native locker now (off the loop): the URI is parsed, the client
        connected, the lock collection's index ensured. Optional: every other coroutine
        opens on first use. Idempotent; ``ClosedError`` after ``close()``."""
        await self._opened()

    async def _opened(self) -> _native.Locker:
        core = self._core
        if core is not None:
            return core
        if self._closed:
            raise ClosedError(f"AsyncMongoLocker {self.key!r} is closed (close() was called)")
        if self._facade is not None:
            self._facade.bind(asyncio.get_running_loop())
        await self._opener.run(self._make)
        core = self._core
        if core is None:
            raise ClosedError(f"AsyncMongoLocker {self.key!r} is closed (close() was called)")
        return core

    async def _make(self) -> None:
        core, use, host = await _call(self._make_sync)
        if self._closed:  # closed while it was made: free it, off the loop
            box: List[Any] = [core]
            await _call(functools.partial(_free, box, use))
            return
        self._core, self._use, self._host = core, use, host

    def _make_sync(self) -> Tuple[_native.Locker, Optional[_transport.ClientUse], str]:
        host = getfqdn()
        storage, use = _transport.open_storage(
            self._target, database=self._db_name, op_timeout=self._op_timeout
        )
        try:
            core = _native.Locker(
                storage,
                self.key,
                self._collection,
                float(self._ttl_arg),
                self.timeparanoid,
                _native_maxoffset(self._maxoffset),
                self._delete_on_release,
                self._allow_unsafe_server,
                identity=_native.Identity(self.uuid, host, self.pid),
                lazy_token=False,
            )
        except BaseException:
            del storage
            if use is not None:
                use.end()
            raise
        return core, use, host

    @property
    def closed(self) -> bool:
        """True once ``close()`` was called."""
        return self._closed

    async def close(self) -> None:
        """Ends this locker for good, as ``MongoLocker.close()``: releases the lock if this
        instance holds it (fenced), then frees the native locker and, for a URI, the
        connections unless another locker or elector of the process still uses that URI.
        An ``AsyncDatabase``/``Database``/``Client`` is the caller's and stays open.
        Idempotent; any other use afterwards raises ``ClosedError``. If the release fails,
        the locker is closed all the same and the error raised."""
        if self._closed:
            return
        self._closed = True
        await self._opener.settled()
        core, use = self._core, self._use
        self._core = self._use = None
        if core is None:
            return
        box: List[Any] = [core]
        del core
        await _call(functools.partial(self._close_sync, box, use))

    def _close_sync(self, box: List[Any], use: Optional[_transport.ClientUse]) -> None:
        try:
            with self._io:
                box[0].release(False)  # no round trip unless this instance holds the lock
        finally:
            _free(box, use)

    # ---------------------------------------------------------------- acquire ----

    async def acquire(
        self,
        blocking: bool = True,
        timeout: Optional[float] = None,
        step: float = 0.25,
        force: bool = False,
    ) -> bool:
        """Acquires the lock, as ``MongoLocker.acquire()``: returns True (the token is
        then ``self.fence``), raises ``LockExists`` (``blocking=False`` and held),
        ``AcquireTimeout`` or ``TimeOffsetError``. Waits between attempts (``step``
        seconds) with ``asyncio.sleep``. Cancelling the awaiting task ends the wait at
        once; an attempt already in flight finishes in the background and a hold it took
        is released."""
        if not blocking and timeout:
            raise ValueError("blocking=False is incompatible with a timeout")
        core = await self._opened()
        started = monotonic()
        outcome = "error"
        try:
            await self._acquire_loop(core, blocking, timeout, step, force)
            outcome = "acquired"
            return True
        except LockExists:
            outcome = "held"
            raise
        except AcquireTimeout:
            outcome = "timeout"
            raise
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        except (ValueError, TypeError, ClosedError):
            outcome = ""  # a caller's mistake, not an outcome
            raise
        finally:
            if outcome:
                _native.metrics_record_acquire(outcome, monotonic() - started)

    async def _acquire_loop(
        self,
        core: _native.Locker,
        blocking: bool,
        timeout: Optional[float],
        step: float,
        force: bool,
    ) -> None:
        start = monotonic()
        while True:
            check_time = self.timeparanoid and not self._time_checked
            token = await _call(
                functools.partial(self._attempt, core, force, check_time),
                orphan=functools.partial(self._drop_orphan, core),
            )
            if token is not None:
                hold = core.hold
                if hold is not None:
                    self._ts_expire = hold[2]
                return
            if not blocking:
                existing = await _call(core.read)
                if existing:
                    raise LockExists(
                        f"{self.key} owned by {existing.get('host')} pid {existing.get('pid', '?')}"
                    )
                raise AcquireTimeout("Timeout reached, lock not acquired")
            wait = step
            if timeout is not None:
                remaining = timeout - (monotonic() - start)
                if remaining <= 0:
                    raise AcquireTimeout("Timeout reached, lock not acquired")
                wait = min(step, remaining)
            await asyncio.sleep(wait)

    def _attempt(self, core: _native.Locker, force: bool, check_time: bool) -> Optional[int]:
        """One attempt, on a worker: the core's time check (cached ten minutes), then
        one conditional upsert."""
        with self._io:
            if self._closed:  # close() released under _io: nothing may take it after
                raise ClosedError(f"AsyncMongoLocker {self.key!r} is closed (close() was called)")
            if check_time:
                core.verify_time()  # TimeOffsetError beyond maxoffset
                self._time_checked = True
            return core.try_acquire(bool(force))

    def _drop_orphan(self, core: _native.Locker, token: Optional[int]) -> None:
        """On a worker: an attempt whose task was cancelled took the lock; release that
        hold (and only that one: fenced by its token)."""
        if token is None:
            return
        with self._io:
            hold = core.hold
            if hold is not None and hold[0] == token:
                log.info(
                    "releasing lock %r (fence %s) taken by a cancelled acquire", self.key, token
                )
                core.release(False)

    # ---------------------------------------------------------- round trips ----

    async def release(self, force: bool = False) -> None:
        """Releases the lock (fenced; a lock this instance does not hold is left alone
        and costs no round trip). ``force=True`` releases whoever holds it."""
        core = await self._opened()
        await _call(functools.partial(self._release_sync, core, bool(force)))

    def _release_sync(self, core: _native.Locker, force: bool) -> None:
        with self._io:
            core.release(force)

    async def locked(self) -> bool:
        """True if anyone holds the lock (one round trip)."""
        core = await self._opened()
        return await _call(core.locked)

    async def owned(self) -> bool:
        """True if this instance holds the lock (one round trip)."""
        core = await self._opened()
        return await _call(core.owned)

    async def get_current(self) -> Optional[Dict[str, Any]]:
        """The current lock document, or None if no running lock."""
        core = await self._opened()
        return await _call(core.current)

    async def touch(self) -> Optional[datetime]:
        """Renews this instance's hold; the new expiry, or None if it holds none."""
        core = await self._opened()
        expires = await _call(core.touch)
        if expires is not None:
            self._ts_expire = expires
        return expires

    async def status(self) -> LockerStatus:
        """``MongoLocker.status`` (one round trip)."""
        core = await self._opened()
        status = await _call(core.status)
        status["ttl"] = self._ttl_arg
        return cast(LockerStatus, status)

    # ------------------------------------------------------------ local state ----

    @property
    def host(self) -> str:
        """This host's FQDN, as written in the lock document (known once opened)."""
        if self._host is None:
            raise RuntimeError(
                f"AsyncMongoLocker {self.key!r} is not open yet: await lock.open() first"
            )
        return self._host

    @property
    def ttl(self) -> float:
        """The ttl as given."""
        return self._ttl_arg

    @property
    def fence(self) -> Optional[int]:
        """Fencing token of the current hold, or None when this instance holds no lease
        that still runs on this host's clock (a local read)."""
        core = self._core
        return None if core is None else core.fence

    @property
    def ts_expire(self) -> Optional[datetime]:
        """Expiry of this instance's current or last hold (server time base, tz-aware
        UTC); None until acquired."""
        core = self._core
        hold = None if core is None else core.hold
        if hold is not None:
            self._ts_expire = hold[2]
        return self._ts_expire

    def __repr__(self) -> str:
        core = self._core
        remaining = None if core is None else core.lease_remaining
        owned = remaining is not None and remaining > 0
        state = ", closed=True" if self._closed else ""
        return f"AsyncMongoLocker(key={self.key!r}, uuid={self.uuid!r}, owned={owned}{state})"

    async def __aenter__(self: _L) -> _L:
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


def _free(box: List[Any], use: Optional[_transport.ClientUse]) -> None:
    """On a worker: drops the native object in ``box`` (its destruction may join
    threads) and the URI client use."""
    box.clear()
    if use is not None:
        use.end()


# ------------------------------------------------------------------- elector ----


class AsyncMongoLeaderElector:
    """``MongoLeaderElector`` for asyncio.

    The election loop is the core's native thread (``start()``), as for
    ``MongoLeaderElector``: it never runs on the event loop and never waits for it.
    Callbacks may be plain functions or coroutine functions; they run on the event loop
    (scheduled from the native thread), one at a time in the order they fired, each
    coroutine awaited before the next callback starts. ``stop()``, ``poll()``,
    ``release()`` and ``close()`` return once the callbacks they fired have run (a
    callback may call them; it is then not waited for). A coroutine callback that never
    returns holds up the callbacks after it and those calls: start long-lived work as a
    task of its own.

    Stop or close the elector before its event loop ends: its callbacks, and with an
    ``AsyncDatabase`` its round trips, need the loop.
    """

    key: str
    #: The ``db`` argument as given.
    db: AsyncDatabaseArg
    ttl: float

    def __init__(
        self,
        key: str,
        db: AsyncDatabaseArg,
        *,
        ttl: float = 15,
        on_leader: Optional[Callback] = None,
        on_leader_loss: Optional[Callback] = None,
        on_loop: Optional[Callback] = None,
        app_version: Optional[str] = None,
        report_status: bool = True,
        database: Optional[str] = None,
        allow_unsafe_server: bool = False,
        op_timeout: Optional[float] = None,
        delete_on_release: bool = True,
        handover_poll: Optional[float] = None,
    ) -> None:
        _check_handover_poll(handover_poll)
        target, facade, timeout = _prepare(key, db, ttl, database, op_timeout)
        self.key = key
        self.db = db
        self.ttl = ttl
        self._target = target
        self._facade = facade
        self._options: Dict[str, Any] = dict(
            ttl=ttl,
            app_version=app_version,
            report_status=report_status,
            database=database,
            allow_unsafe_server=allow_unsafe_server,
            op_timeout=timeout,
            delete_on_release=delete_on_release,
            handover_poll=handover_poll,
        )
        self._callbacks: Dict[str, Optional[Callback]] = {
            "on_leader": on_leader,
            "on_leader_loss": on_leader_loss,
            "on_loop": on_loop,
        }
        self._sync: Optional[MongoLeaderElector] = None
        self._opener = _Opener()
        self._closed = False
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._queue: Deque[str] = collections.deque()
        self._runner: Optional[asyncio.Task[None]] = None

    # ------------------------------------------------------------ lifecycle ----

    async def open(self) -> None:
        """Makes the native elector now (off the loop). Optional: every other coroutine
        opens on first use. Idempotent; ``ClosedError`` after ``close()``."""
        await self._opened()

    async def _opened(self) -> MongoLeaderElector:
        loop = asyncio.get_running_loop()
        self._loop = loop  # callbacks go to the loop that used the elector last
        sync = self._sync
        if sync is not None:
            return sync
        if self._closed:
            raise ClosedError(f"AsyncMongoLeaderElector {self.key!r} is closed")
        if self._facade is not None:
            self._facade.bind(loop)
        await self._opener.run(self._make)
        sync = self._sync
        if sync is None:
            raise ClosedError(f"AsyncMongoLeaderElector {self.key!r} is closed")
        return sync

    async def _make(self) -> None:
        sync = await _call(self._make_sync)
        if self._closed:
            await _call(sync.close)
            return
        self._sync = sync

    def _make_sync(self) -> MongoLeaderElector:
        return MongoLeaderElector(
            self.key,
            cast(Any, self._target),
            on_leader=self._hook("on_leader"),
            on_leader_loss=self._hook("on_leader_loss"),
            on_loop=self._hook("on_loop"),
            **self._options,
        )

    def _hook(self, name: str) -> Optional[Callback]:
        """What the native elector calls for callback ``name`` (None: it calls nothing)."""
        if self._callbacks.get(name) is None:
            return None
        return functools.partial(self._dispatch, name)

    @property
    def closed(self) -> bool:
        """True once ``close()`` was called."""
        return self._closed

    async def close(self) -> None:
        """Stops this elector for good and frees it, as ``MongoLeaderElector.close()``
        (leadership released, ``on_leader_loss`` run if it led; for a URI the
        connections close with their last user). Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._loop = asyncio.get_running_loop()
        await self._opener.settled()
        sync = self._sync
        if sync is None:
            return
        await _call(sync.close)
        await self._settle_callbacks()

    async def start(self, blocking: bool = False) -> None:
        """Starts the native election loop. ``blocking=True`` then waits until the
        elector is stopped (by a callback or another task); cancelling that wait stops
        the elector and re-raises."""
        sync = await self._opened()
        await _call(functools.partial(sync.start, False))
        if blocking:
            try:
                while self.running:
                    await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                if not self._closed:
                    await self.stop()
                raise

    async def stop(self) -> None:
        """Stops the election loop and releases leadership (``on_leader_loss`` runs if it
        led); returns once the callbacks that fired have run."""
        self._loop = asyncio.get_running_loop()
        sync = self._sync
        if sync is None:
            if self._closed:
                raise ClosedError(f"AsyncMongoLeaderElector {self.key!r} is closed")
            return  # never started
        await _call(sync.stop)
        await self._settle_callbacks()

    async def poll(self) -> None:
        """One poll: renew if leader, try to acquire if not (errors are logged)."""
        sync = await self._opened()
        await _call(sync.poll)
        await self._settle_callbacks()

    async def release(self) -> None:
        """Releases leadership (``on_leader_loss`` runs if it led)."""
        sync = await self._opened()
        await _call(sync.release)
        await self._settle_callbacks()

    async def leader_exists(self) -> bool:
        """True if any node holds an unexpired leader lock (one round trip)."""
        sync = await self._opened()
        return await _call(lambda: sync.leader_exists)

    async def node_status(self) -> NodeStatus:
        """This node's status document, as reported to ``elector.leader_status``."""
        sync = await self._opened()
        return await _call(lambda: sync.node_status)

    async def cluster_detail(self) -> ClusterDetail:
        """Status documents of every node of this key and the current leader."""
        sync = await self._opened()
        return await _call(lambda: sync.cluster_detail)

    # ------------------------------------------------------------ local state ----

    @property
    def running(self) -> bool:
        """True while the election loop runs."""
        sync = self._sync
        return sync is not None and not sync.closed and sync.running

    @property
    def is_leader(self) -> bool:
        """True while this node leads and its lease safely runs (local clock)."""
        sync = self._sync
        return sync is not None and not sync.closed and sync.is_leader

    @property
    def fence(self) -> Optional[int]:
        """Fencing token of this node's current leadership term, or None."""
        sync = self._sync
        return None if sync is None or sync.closed else sync.fence

    @property
    def poll_wait(self) -> float:
        """Seconds between poll cycles (half the ttl while leading)."""
        sync = self._sync
        return float(self.ttl) if sync is None or sync.closed else sync.poll_wait

    @property
    def callback_on_leader(self) -> Optional[Callback]:
        return self._callbacks["on_leader"]

    @callback_on_leader.setter
    def callback_on_leader(self, fn: Optional[Callback]) -> None:
        self._set_callback("on_leader", fn)

    @property
    def callback_on_leader_loss(self) -> Optional[Callback]:
        return self._callbacks["on_leader_loss"]

    @callback_on_leader_loss.setter
    def callback_on_leader_loss(self, fn: Optional[Callback]) -> None:
        self._set_callback("on_leader_loss", fn)

    @property
    def callback_on_loop(self) -> Optional[Callback]:
        return self._callbacks["on_loop"]

    @callback_on_loop.setter
    def callback_on_loop(self, fn: Optional[Callback]) -> None:
        self._set_callback("on_loop", fn)

    def _set_callback(self, name: str, fn: Optional[Callback]) -> None:
        self._callbacks[name] = fn
        sync = self._sync
        if sync is not None and not sync.closed:
            setattr(sync, "callback_" + name, self._hook(name))

    def __repr__(self) -> str:
        if self._closed:
            return f"AsyncMongoLeaderElector(key={self.key!r}, closed)"
        leader = "leader" if self.is_leader else "follower"
        running = "running" if self.running else "stopped"
        return f"AsyncMongoLeaderElector(key={self.key!r}, {leader}, {running})"

    async def __aenter__(self: _E) -> _E:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc_val: Optional[BaseException],
        exc_tb: Optional[TracebackType],
    ) -> Literal[False]:
        await self.stop()
        return False

    # -------------------------------------------------------------- callbacks ----

    def _dispatch(self, name: str) -> None:
        """Called by the native elector (its thread, the deadline timer's, or a worker
        running poll/stop/release): hands the callback to the event loop, never waits."""
        loop = self._loop
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(self._enqueue, name)
        except RuntimeError:  # the loop is closed
            log.warning(
                "%s callback of elector %r not run: its event loop is closed "
                "(stop or close the elector before the loop ends)",
                name,
                self.key,
            )

    def _enqueue(self, name: str) -> None:  # on the loop
        self._queue.append(name)
        runner = self._runner
        loop = asyncio.get_running_loop()
        if runner is None or runner.done() or runner.get_loop() is not loop:
            self._runner = loop.create_task(self._drain())

    async def _drain(self) -> None:
        while self._queue:
            name = self._queue.popleft()
            fn = self._callbacks.get(name)  # looked up now: reassigning works
            if fn is None:
                continue
            try:
                result = fn()
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("Error in %s callback", name)

    async def _settle_callbacks(self) -> None:
        """Waits until the callbacks queued so far have run (not from a callback)."""
        runner = self._runner
        if (
            runner is not None
            and not runner.done()
            and runner is not asyncio.current_task()
            and runner.get_loop() is asyncio.get_running_loop()
        ):
            await asyncio.wait({runner})


# --------------------------------------------------------------------- lease ----


class AsyncLease:
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
        # A weak reference: self.lost reads the native lease, which holds this callback;
        # a strong one would keep a dropped lease renewing forever (a cycle through C++
        # that the garbage collector cannot see).
        on_lost = functools.partial(_lease_lost, asyncio.get_running_loop(), weakref.ref(self.lost))
        step = float(self._step)
        start = monotonic()
        try:
            return await self._acquire_loop(core, on_lost, step, start)
        except asyncio.CancelledError:
            _native.metrics_record_acquire("cancelled", monotonic() - start)
            raise

    async def _acquire_loop(
        self, core: _native.Locker, on_lost: Callable[[], None], step: float, start: float
    ) -> int:
        first = True
        while True:
            # After a failed attempt, a read (one round trip) tells when to try again.
            if first or not await _call(core.locked):
                try:
                    self._native = await _call(
                        functools.partial(_native.KeepAliveLease, core, False, None, step, on_lost),
                        orphan=_close_lease,
                    )
                    self.lost._bind(self._native)
                    return self._native.fence
                except LockExists:
                    if not self._blocking:
                        raise
            first = False
            wait = step
            if self._timeout is not None:
                remaining = self._timeout - (monotonic() - start)
                if remaining <= 0:
                    _native.metrics_record_acquire("timeout", monotonic() - start)
                    raise AcquireTimeout(
                        f"Timeout acquiring lock {self.key} after {self._timeout:.3f} seconds"
                    )
                wait = min(step, remaining)
            await asyncio.sleep(wait)

    @property
    def fence(self) -> Optional[int]:
        """The fencing token of the hold (None before acquire)."""
        return None if self._native is None else self._native.fence

    @property
    def reason(self) -> str:
        """Why the lease was lost ("" while it is not)."""
        return "" if self._native is None else self._native.lost_reason

    def _is_lost(self) -> bool:
        return self.lost.is_set()

    def check(self) -> None:
        """Raises ``LeaseLost`` if the lease is lost; call it before acting on the lock."""
        if self._is_lost():
            raise LeaseLost(f"lease of {self.key!r} (fence {self.fence}) was lost: {self.reason}")

    async def wait_lost(self, timeout: Optional[float] = None) -> bool:
        """Waits until the lease is lost (True) or ``timeout`` seconds pass (False)."""
        if self._native is None:
            return False
        try:
            await asyncio.wait_for(self.lost.wait(), timeout)
        except asyncio.TimeoutError:
            return self._is_lost()
        return True

    async def release(self) -> None:
        """Stops keeping the lock alive and releases it (fenced; not if lost)."""
        native = self._native
        if native is not None:
            await _call(native.close)

    async def __aenter__(self: _S) -> _S:
        await self.acquire()
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> Literal[False]:
        lost = self._is_lost()
        await self.release()
        if lost and exc_type is None:
            raise LeaseLost(
                f"lease of {self.key!r} (fence {self.fence}) was lost while the "
                f"block ran: {self.reason}"
            )
        return False

    def __repr__(self) -> str:
        state = "lost" if self.lost.is_set() else ("held" if self._native else "new")
        return f"<AsyncLease {self.key!r} fence={self.fence} {state}>"


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


def _close_lease(native: _native.KeepAliveLease) -> None:
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
