"""A synchronous face on a pymongo ``AsyncDatabase``, for the native core's PyMongoStorage.

The core drives a pymongo ``Database`` synchronously (python/src/pymongo_storage.cpp) from
whatever thread runs it: a worker of ``mongoelector.aio``'s executor, an elector's loop
thread, the keep-alive renewer. ``AsyncDatabaseFacade`` gives it exactly the calls it makes
(``db[name]``, ``db.command``, ``db.client``; a collection's ``find_one_and_update``,
``update_one``, ``delete_one``, ``find_one``, ``find(...).sort(...)``, ``insert_one``,
``replace_one``, ``create_index``, ``drop_indexes``, ``write_concern`` and
``with_options``), each of which submits the ``AsyncDatabase``'s coroutine to the event
loop the facade is bound to (``asyncio.run_coroutine_threadsafe``) and waits for its
result on the calling thread. So the protocol stays in the core; the I/O is pymongo's
asyncio I/O, on the loop.

Rules:

* Never called on the loop's own thread: it would wait for the loop it blocks. That is a
  ``RuntimeError`` at once (``mongoelector.aio`` runs every core call in a worker).
* Every call is bounded by ``op_timeout``: inside ``pymongo.timeout(op_timeout)`` on the
  loop (pymongo's client-side operation timeout), and the waiting thread gives up after
  ``op_timeout`` too (``pymongo.errors.NetworkTimeout``; the coroutine is cancelled). A
  call made inside the core's own client-side timeout scope takes that scope's budget
  instead: the core gives its one-time setup calls (index creation, asking what the
  server is) a longer bound than a claim or a renewal.
* A closed loop, or a call cancelled on the loop (the loop shutting down), is
  ``mongoelector.StorageUnavailable``, a ``pymongo.errors.ConnectionFailure``.

The facade subclasses pymongo's ``Database`` (without its constructor: it has no client of
its own) so that PyMongoStorage treats it as what it fronts, a real pymongo database:
lock writes get ``w: "majority"`` when the client's write concern is weaker, and every
call is known to be time-bounded (pymongo >= 4.2) -- exactly as for a synchronous
``Database``. Its methods are the subset above; anything else of ``Database`` is not
supported on it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple, TypeVar, cast

import pymongo
from pymongo.database import Database
from pymongo.errors import NetworkTimeout

from ..errors import StorageUnavailable

__all__ = ["AsyncDatabaseFacade", "is_async_database"]

_T = TypeVar("_T")


def is_async_database(db: object) -> bool:
    """Whether ``db`` is a pymongo ``AsyncDatabase`` (or a lookalike whose ``command`` is
    a coroutine function and that has ``create_collection``, as ``_transport.check_db``
    tells one)."""
    import inspect

    kind = type(db)
    return hasattr(kind, "create_collection") and inspect.iscoroutinefunction(
        getattr(kind, "command", None)
    )


def _scope_timeout(default: float) -> float:
    """The budget of the client-side timeout scope the calling thread is in (the core
    enters one around each of its calls: pymongo_storage.cpp), else ``default``."""
    try:
        from pymongo import _csot

        budget = _csot.get_timeout()
    except (ImportError, AttributeError):
        return default
    return float(budget) if budget else default


class _Raised:
    """An exception of a call on the loop, handed to the waiting thread as a value."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class AsyncDatabaseFacade(Database[Any]):
    """``db`` (an ``AsyncDatabase``) as a synchronous pymongo ``Database`` for the core.

    Unbound until ``bind(loop)``; every call then runs on that loop and waits for it on
    the calling thread, which must not be the loop's."""

    def __init__(self, db: Any, op_timeout: float) -> None:  # no Database.__init__
        self._adb = db
        self.op_timeout = float(op_timeout)
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._bind_lock = threading.Lock()

    # -------------------------------------------------------------- plumbing ----

    @property
    def async_database(self) -> Any:
        """The ``AsyncDatabase`` this facade fronts."""
        return self._adb

    @property
    def loop(self) -> Optional[asyncio.AbstractEventLoop]:
        return self._loop

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Binds the facade to ``loop`` (the loop the ``AsyncDatabase``'s client runs
        on). Binding again to the same loop does nothing; to another one is an error."""
        with self._bind_lock:
            if self._loop is None or self._loop.is_closed():
                self._loop = loop
            elif self._loop is not loop:
                raise RuntimeError(
                    "this AsyncDatabase is already used from another event loop: make the "
                    "AsyncMongoClient, and the lockers and electors on it, in one loop"
                )

    def call(self, fn: Callable[..., Awaitable[_T]], *args: Any, **kwargs: Any) -> _T:
        """Runs ``await fn(*args, **kwargs)`` on the bound loop within ``op_timeout`` and
        returns its result (or raises its exception) on this thread."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("this AsyncDatabase facade is not bound to an event loop")
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            # The loop would wait for itself.
            raise RuntimeError(
                "a mongoelector core call through an AsyncDatabase ran on the event loop's "
                "own thread, which would deadlock; mongoelector.aio runs them in workers"
            )
        timeout = _scope_timeout(self.op_timeout)

        async def run() -> Any:
            with pymongo.timeout(timeout):
                try:
                    return await fn(*args, **kwargs)
                except Exception as exc:  # noqa: BLE001 - handed over, see below
                    # Handed over as a value, without pymongo's asyncio frames: raised
                    # through them (and through asyncio's Task), the error's traceback
                    # holds reference cycles -- 60-odd objects of garbage per refused
                    # claim, whose collection stalls the loop for tens of ms under
                    # contention. Duplicate-key errors are the protocol's normal "held".
                    exc.__traceback__ = None
                    return _Raised(exc)

        coro = run()
        try:
            future = asyncio.run_coroutine_threadsafe(coro, loop)
        except RuntimeError as exc:  # the loop is closed
            coro.close()
            raise StorageUnavailable(
                f"the event loop of this AsyncDatabase is closed ({exc}): stop or close "
                "mongoelector.aio objects before their loop ends"
            ) from None
        try:
            result = future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise NetworkTimeout(
                f"the AsyncDatabase call did not complete within op_timeout ({timeout} s) "
                "(is the event loop blocked or stopped?)"
            ) from None
        except concurrent.futures.CancelledError:
            raise StorageUnavailable(
                "the AsyncDatabase call was cancelled on its event loop (loop shutting down?)"
            ) from None
        del future
        if isinstance(result, _Raised):
            error = result.error
            del result
            try:
                raise error
            finally:
                del error  # no frame -> error -> traceback -> frame cycle
        return cast(_T, result)

    # -------------------------------------------------- what PyMongoStorage uses ----

    def __getitem__(self, name: str) -> Any:
        return _FacadeCollection(self, self._adb[name])

    def command(self, *args: Any, **kwargs: Any) -> Any:
        return self.call(self._adb.command, *args, **kwargs)

    @property
    def client(self) -> Any:
        # Keys the per-client server facts (_transport._server_facts).
        return self._adb.client

    @property
    def name(self) -> str:
        return str(self._adb.name)

    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other

    def __hash__(self) -> int:
        return object.__hash__(self)

    def __repr__(self) -> str:
        return f"AsyncDatabaseFacade({self._adb!r})"


class _FacadeCollection:
    """A collection of the ``AsyncDatabase``, its calls run as the facade's."""

    __slots__ = ("_db", "_coll")

    def __init__(self, db: AsyncDatabaseFacade, coll: Any) -> None:
        self._db = db
        self._coll = coll

    @property
    def name(self) -> str:
        return str(self._coll.name)

    @property
    def write_concern(self) -> Any:
        return self._coll.write_concern

    @property
    def async_collection(self) -> Any:
        """The ``AsyncCollection`` (with this face's options), for calls awaited on the
        loop itself (PyMongoStorage::start)."""
        return self._coll

    def with_options(self, **kwargs: Any) -> _FacadeCollection:
        return _FacadeCollection(self._db, self._coll.with_options(**kwargs))

    def find_one_and_update(self, *args: Any, **kwargs: Any) -> Any:
        return self._db.call(self._coll.find_one_and_update, *args, **kwargs)

    def update_one(self, *args: Any, **kwargs: Any) -> Any:
        return self._db.call(self._coll.update_one, *args, **kwargs)

    def update_many(self, *args: Any, **kwargs: Any) -> Any:  # batched renewals
        return self._db.call(self._coll.update_many, *args, **kwargs)

    def replace_one(self, *args: Any, **kwargs: Any) -> Any:
        return self._db.call(self._coll.replace_one, *args, **kwargs)

    def insert_one(self, *args: Any, **kwargs: Any) -> Any:
        return self._db.call(self._coll.insert_one, *args, **kwargs)

    def delete_one(self, *args: Any, **kwargs: Any) -> Any:
        return self._db.call(self._coll.delete_one, *args, **kwargs)

    def find_one(self, *args: Any, **kwargs: Any) -> Any:
        return self._db.call(self._coll.find_one, *args, **kwargs)

    def create_index(self, *args: Any, **kwargs: Any) -> Any:
        return self._db.call(self._coll.create_index, *args, **kwargs)

    def drop_indexes(self, *args: Any, **kwargs: Any) -> Any:
        return self._db.call(self._coll.drop_indexes, *args, **kwargs)

    def find(self, *args: Any, **kwargs: Any) -> _FacadeCursor:
        return _FacadeCursor(self._db, self._coll, args, kwargs)

    def __repr__(self) -> str:
        return f"_FacadeCollection({self._coll!r})"


class _FacadeCursor:
    """``find(...)`` with its ``sort(...)``s, run as one ``to_list()`` when iterated."""

    __slots__ = ("_db", "_coll", "_args", "_kwargs", "_sorts")

    def __init__(
        self, db: AsyncDatabaseFacade, coll: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]
    ) -> None:
        self._db = db
        self._coll = coll
        self._args = args
        self._kwargs = kwargs
        self._sorts: List[Tuple[Tuple[Any, ...], Dict[str, Any]]] = []

    def sort(self, *args: Any, **kwargs: Any) -> _FacadeCursor:
        self._sorts.append((args, kwargs))
        return self

    async def _to_list(self) -> List[Any]:
        cursor = self._coll.find(*self._args, **self._kwargs)
        for args, kwargs in self._sorts:
            cursor = cursor.sort(*args, **kwargs)
        return list(await cursor.to_list(None))

    def __iter__(self) -> Any:
        return iter(self._db.call(self._to_list))
