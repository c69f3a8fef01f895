"""Plumbing shared by the asyncio classes: where core calls run (``_call``, on the
``_pool`` workers), how a native object is made off the loop and freed (``NativeHandle``),
and how an acquire of a lock, lease or semaphore awaits the core's acquire loop
(``drive``)."""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from typing import (
    Any,
    Callable,
    ContextManager,
    Coroutine,
    Generic,
    List,
    Optional,
    Tuple,
    TypeVar,
    Union,
)

from pymongo.database import Database

from .. import _native, _transport
from ..client import Client
from ..errors import ClosedError
from ..locker import _check_args
from . import _pool
from ._facade import AsyncDatabaseFacade, is_async_database

try:  # pymongo >= 4.9; URIs and Database objects need no more than the package's 4.2
    from pymongo.asynchronous.database import AsyncDatabase
except ImportError:  # pragma: no cover
    pass

log = logging.getLogger("mongoelector.aio")

#: What ``db=`` of the asyncio classes accepts: a URI (``mongodb://``, ``mongodb+srv://``,
#: ``sqlite:///``), a ``mongoelector.Client``, a pymongo ``AsyncDatabase`` or a
#: synchronous pymongo ``Database``.
AsyncDatabaseArg = Union[str, Client, "AsyncDatabase[Any]", "Database[Any]"]

_T = TypeVar("_T")
_C = TypeVar("_C")

# ------------------------------------------------------------------- workers ----
# Core calls run on _pool's workers: a dedicated pool, not the loop's default
# executor (a facade call waits for the loop, which may need the default executor --
# getaddrinfo -- to finish it), and one whose threads are never started by the loop.


async def call(fn: Callable[[], _T], orphan: Optional[Callable[[_T], object]] = None) -> _T:
    """Runs ``fn()`` (a core call that may make round trips) on the pool and returns its
    result. Cancelling the awaiting task returns at once; a call not started yet never
    runs, one already running finishes in its worker and, if it succeeded, ``orphan``
    (if given) gets its result there (to undo what nobody will take: a hold)."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[_T] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:  # on the loop
        if waiter.done():  # cancelled: nobody takes the result
            if ok and orphan is not None:
                _pool.clean_up(orphan, value)
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
                _pool.quietly(orphan, value)

    job = _pool.pool().submit(work)
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
                _pool.clean_up(orphan, waiter.result())
        raise


def prepare(
    key: str,
    db: object,
    ttl: float,
    database: Optional[str],
    op_timeout: Optional[float],
    check: Optional[Callable[[object], None]] = None,
) -> Tuple[object, Optional[AsyncDatabaseFacade], float]:
    """The synchronous classes' argument checks (``check(target)``; by default the
    locker's); the ``db`` the core gets (the facade for an ``AsyncDatabase``) and the
    op_timeout."""
    facade = None
    target: object = db
    if is_async_database(db):
        facade = AsyncDatabaseFacade(db, 1.0)
        target = facade
    if check is None:
        _check_args(key, target, ttl, database)
    else:
        check(target)
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


class Opener:
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


def free(box: List[Any], use: Optional[_transport.ClientUse]) -> None:
    """On a worker: drops the native object in ``box`` (its destruction may join
    threads) and the URI client use."""
    box.clear()
    if use is not None:
        use.end()


class NativeHandle(Generic[_C]):
    """The native object behind an asyncio class (a locker, a semaphore), made on first
    use off the loop (``_opened()``) and freed by ``close()`` after ``_release_sync``.
    ``_io`` is taken by every attempt, release and clean-up of a cancelled acquire (on
    the workers), so a clean-up never interleaves with this instance's next acquire."""

    key: str
    _what = "object"

    def _init_handle(
        self,
        target: object,
        facade: Optional[AsyncDatabaseFacade],
        database: Optional[str],
        op_timeout: float,
    ) -> None:
        self._target = target
        self._facade = facade
        self._db_name = database
        self._op_timeout = op_timeout
        self._core: Optional[_C] = None
        self._use: Optional[_transport.ClientUse] = None
        self._opener = Opener()
        self._closed = False
        self._io = threading.Lock()

    def _closed_error(self) -> ClosedError:
        return ClosedError(f"{self._what} {self.key!r} is closed (close() was called)")

    # -- what a subclass provides -------------------------------------------------
    def _new_core(self, storage: object) -> _C:  # on a worker
        raise NotImplementedError

    def _opened_core(self, core: _C) -> None:  # on a worker, once made
        pass

    def _release_sync(self, core: _C) -> None:  # on a worker, under _io, at close()
        raise NotImplementedError

    # -------------------------------------------------------------------------------
    async def open(self) -> None:
        """Makes the native object now (off the loop): the URI is parsed, the client
        connected, the collection's index ensured. Optional: every other coroutine
        opens on first use. Idempotent; ``ClosedError`` after ``close()``."""
        await self._opened()

    async def _opened(self) -> _C:
        core = self._core
        if core is not None:
            return core
        if self._closed:
            raise self._closed_error()
        if self._facade is not None:
            self._facade.bind(asyncio.get_running_loop())
        await self._opener.run(self._make)
        core = self._core
        if core is None:
            raise self._closed_error()
        return core

    async def _make(self) -> None:
        core, use = await call(self._make_sync)
        if self._closed:  # closed while it was made: free it, off the loop
            box: List[Any] = [core]
            await call(functools.partial(free, box, use))
            return
        self._core, self._use = core, use

    def _make_sync(self) -> Tuple[_C, Optional[_transport.ClientUse]]:
        storage, use = _transport.open_storage(
            self._target, database=self._db_name, op_timeout=self._op_timeout
        )
        try:
            core = self._new_core(storage)
        except BaseException:
            del storage
            if use is not None:
                use.end()
            raise
        self._opened_core(core)
        return core, use

    @property
    def closed(self) -> bool:
        """True once ``close()`` was called."""
        return self._closed

    async def close(self) -> None:
        """Ends this object for good: releases what this instance holds (fenced), then
        frees the native object and, for a URI, the connections unless another user of
        the process still uses that URI. An ``AsyncDatabase``/``Database``/``Client`` is
        the caller's and stays open. Idempotent; any other use afterwards raises
        ``ClosedError``. If the release fails, the object is closed all the same and the
        error raised."""
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
        await call(functools.partial(self._close_sync, box, use))

    def _close_sync(self, box: List[Any], use: Optional[_transport.ClientUse]) -> None:
        try:
            with self._io:
                self._release_sync(box[0])  # no round trip unless this instance holds
        finally:
            free(box, use)

    def _abandon(self, run: Any, step: Tuple[str, Any]) -> None:
        """On a worker: the orphan of ``drive``: the run took the hold but its task was
        cancelled before it resumed; the core releases that hold (only that one: fenced
        by its token) and logs it."""
        if step[0] != "acquired":
            return
        with self._io:
            run.abandon()

    def _attempt_sync(self, attempt: Callable[[], _T]) -> _T:
        """On a worker: one attempt, unless close() released under _io already."""
        with self._io:
            if self._closed:  # close() released under _io: nothing may take it after
                raise self._closed_error()
            return attempt()


async def drive(
    run: "_native.AcquireRun",
    attempt: Callable[[], Tuple[str, Any]],
    orphan: Callable[[Tuple[str, Any]], object],
    on_loop: Optional[Callable[[], Coroutine[Any, Any, Optional[Tuple[str, Any]]]]] = None,
    *,
    give_up_under: Optional[ContextManager[Any]] = None,
) -> Any:
    """Awaits the core's acquire loop (a native ``AcquireRun``: its retry rule, step,
    timeout, time check and metrics): waits with ``asyncio.sleep`` on the loop when the
    run says "wait", and when it says "try" awaits ``on_loop()`` (an attempt awaited on
    the loop itself, see ``_loop_io``) if given, or -- when there is none or it returns
    None -- runs ``attempt()`` (the run's ``attempt``, possibly followed by what takes
    the hold over, such as a keep-alive lease) as one call on a worker. Returns the value
    of the "acquired" step; the run's other outcomes raise (``LockExists``,
    ``AcquireTimeout``, the claim's error).

    Cancelling the awaiting task cancels the run: a claim in flight that lands is released
    (fenced by its token): by the core, by the attempt on the loop, or, when its result
    reached the loop after the task was cancelled, by ``orphan`` (on a worker).

    ``give_up_under``: for a run that may write while it waits (a fair waiter's queue
    entry, a waiting writer's mark), the instance's lock, under which the run's
    ``give_up()`` undoes those writes on a worker when the acquire ends without the hold
    -- in the background when the task was cancelled, as nothing may be awaited then. An
    attempt still in flight does it as it ends (the core's rule)."""
    kind, value = run.next()
    try:
        while kind != "acquired":
            if kind == "wait":
                await asyncio.sleep(value)
                kind, value = run.next()
            elif kind == "try":
                step = None if on_loop is None else await on_loop()
                if step is None:
                    step = await call(attempt, orphan=orphan)
                kind, value = step
            else:  # "cancelled": only ever after this task was cancelled
                raise asyncio.CancelledError()
        return value
    except BaseException as exc:
        cancelled = isinstance(exc, asyncio.CancelledError)
        if cancelled:
            run.cancel()
        if give_up_under is not None:
            undo = functools.partial(_give_up_sync, run)
            if cancelled:
                _pool.clean_up(undo, give_up_under)
            else:
                await call(functools.partial(undo, give_up_under))
        raise


def _give_up_sync(run: "_native.AcquireRun", io: ContextManager[Any]) -> None:
    with io:  # on a worker
        run.give_up()
