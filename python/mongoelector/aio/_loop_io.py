"""Round trips awaited on the event loop itself, for an ``AsyncDatabase``.

The core's operations come in parts (``_native.Locker``'s ``claim_begin``,
``release_begin``, ``touch_begin``, ``read_begin``...): the core decides what to send (the
commands every transport sends) and what the reply means; the loop awaits pymongo's
coroutine. No worker thread, no hop back to the loop, no GIL hand-off per round trip. A
part that needs round trips of its own (a stale clock sample, a stranded hold to settle,
a new fence epoch) says so, and that part -- or the whole operation -- runs on a worker
as before (``_common.call``).

Writes that take or give up a hold are not cut short by cancelling the awaiting task: a
write cancelled in flight may still land at the server, and nobody would know what it
did. They run in a task of their own (``owned``) that holds the object's ``_io`` lock
until it ends, and is shielded from the caller's cancellation; what it took for a
cancelled caller is released by it, fenced.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from typing import Any, Awaitable, Callable, Coroutine, Optional, TypeVar

import pymongo
from pymongo.errors import DuplicateKeyError, OperationFailure

from . import _pool

__all__ = ["is_duplicate", "owned", "send"]

_T = TypeVar("_T")

# E11000 and its older codes, as the synchronous transport reads them.
_DUPLICATE_CODES = frozenset((11000, 11001, 12582))


async def send(make: Callable[[], Awaitable[_T]], op_timeout: float) -> _T:
    """Awaits the coroutine ``make()`` returns within ``pymongo.timeout(op_timeout)``: the
    same bound as every synchronous call (server selection, checkout, round trip)."""
    with pymongo.timeout(op_timeout):
        return await make()


def is_duplicate(exc: BaseException) -> bool:
    """A duplicate-key error: the protocol's "a document is there" (or "held")."""
    if isinstance(exc, DuplicateKeyError):
        return True
    return isinstance(exc, OperationFailure) and exc.code in _DUPLICATE_CODES


def _ended(io: threading.Lock, task: asyncio.Task[Any]) -> None:
    # Released when the task ends in any way, even cancelled before it ran (the loop
    # shutting down), where a `finally` in its coroutine would never run.
    io.release()
    # A shielded task whose caller was cancelled: nobody awaits its error (already acted
    # on inside it); fetched so that asyncio does not report it as never retrieved.
    if not task.cancelled():
        task.exception()


async def owned(
    io: threading.Lock,
    work: Callable[[], Coroutine[Any, Any, _T]],
    orphan: Optional[Callable[[_T], object]] = None,
) -> Optional[_T]:
    """Runs ``work()`` in a task of its own that holds ``io`` (the object's lock against
    its clean-ups on workers) from now until it ends, shielded from the caller's
    cancellation. None, without running it, when ``io`` is taken (a worker holds it):
    the caller then runs the operation on a worker, which waits for it. When the caller
    is cancelled before it takes the result (even one ready in the same turn of the
    loop), ``orphan`` gets that result on a worker (to undo what nobody will take)."""
    if not io.acquire(blocking=False):
        return None
    try:
        task = asyncio.get_running_loop().create_task(work())
    except BaseException:
        io.release()
        raise
    task.add_done_callback(functools.partial(_ended, io))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if orphan is not None:  # after _ended: io is free when the orphan runs
            task.add_done_callback(functools.partial(_orphaned, orphan))
        raise


def _orphaned(orphan: Callable[[Any], object], task: asyncio.Task[Any]) -> None:
    if task.cancelled() or task.exception() is not None:
        return
    result = task.result()
    if result is not None:
        _pool.clean_up(orphan, result)
