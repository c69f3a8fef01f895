"""Scheduler semantics: run a job on one node only, at most once per window, and keep
other nodes off it for a minimum time.

::

    @mongoelector.singleton("nightly-report", db, ttl=60, min_hold=300, once_per=3600)
    def nightly_report():
        ...

Every node's scheduler (APScheduler, celery beat, cron) may fire the job; each call:

1. takes the lock ``key`` without waiting (``wait=True`` waits up to ``timeout``); held
   by another node: the call is skipped ("skip if running");
2. with ``once_per``: claims the current window of that many seconds, aligned on the
   server's clock (an hour window starts on the hour, UTC); already claimed by a run in
   this window, on any node: skipped (the lock is released at once);
3. runs the function while a native renewer keeps the lock alive (a lease: see
   ``mongoelector.lease``);
4. releases the lock; with ``min_hold`` the lock stays taken until ``min_hold`` seconds
   after step 1, so a node whose clock or schedule is a little off cannot run the job
   again right after a short run.

A skipped call returns None without calling the function (and logs why, logger
``mongoelector``). If the lease is lost while the function runs, ``LeaseLost`` is raised
when it returns; to stop sooner, pass ``lease=True``: the function then gets the running
``Lease`` as keyword argument ``lease`` and can call ``lease.check()`` between steps, and
pass ``lease.fence`` to the writes it makes (see ``mongoelector.fenced_update_one``).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from datetime import datetime
from typing import Any, Callable, Optional, TypeVar, cast

from ._transport import DatabaseArg
from .errors import LeaseLost
from .lease import Lease
from .locker import AcquireTimeout, LockExists, MongoLocker

__all__ = ["once_per", "singleton"]

_log = logging.getLogger("mongoelector")
_F = TypeVar("_F", bound=Callable[..., Any])


def once_per(db: DatabaseArg, key: str, window: float, **locker_kwargs: Any) -> Optional[datetime]:
    """Claims the current window of ``window`` seconds for ``key``: its start (UTC) if
    this call claimed it, None if a claim of this window exists already, from any node.
    Windows are aligned on the server's clock. See ``MongoLocker.claim_window``."""
    locker = MongoLocker(key, db, **locker_kwargs)
    try:
        return locker.claim_window(window)
    finally:
        locker.close()


def _check_seconds(name: str, value: Optional[float], minimum: float) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    if not minimum <= value <= 1e9:
        raise ValueError(f"{name} must be between {minimum} and 1e9 seconds, not {value!r}")


def singleton(
    key: str,
    db: DatabaseArg,
    *,
    ttl: float = 60,
    min_hold: Optional[float] = None,
    once_per: Optional[float] = None,
    wait: bool = False,
    timeout: Optional[float] = None,
    lease: bool = False,
    **locker_kwargs: Any,
) -> Callable[[_F], _F]:
    """Decorator: the function runs on one node at a time, at most once per ``once_per``
    seconds, and keeps the job's lock taken ``min_hold`` seconds at least. See the module
    docstring. ``lease=True`` passes the running ``Lease`` as keyword argument ``lease``.
    Works on plain and ``async def`` functions (the lock's I/O then runs in a thread)."""
    _check_seconds("ttl", ttl, 0.001)
    _check_seconds("min_hold", min_hold, 0)
    _check_seconds("once_per", once_per, 0.001)
    _check_seconds("timeout", timeout, 0)
    if timeout is not None and not wait:
        raise ValueError("timeout bounds the wait for the lock: set wait=True as well")

    def start() -> Optional[Lease]:
        held = Lease(
            db,
            key,
            ttl=ttl,
            blocking=wait,
            timeout=timeout if wait else None,
            min_hold=min_hold,
            **locker_kwargs,
        )
        try:
            held.acquire()
        except (LockExists, AcquireTimeout) as e:
            _log.info("singleton %s: skipped, the lock is held by another run (%s)", key, e)
            held.locker.close()
            return None
        try:
            if once_per is not None:
                window = held.locker.claim_window(once_per)
                if window is None:
                    _log.info(
                        "singleton %s: skipped, this %g s window already had its run", key, once_per
                    )
                    held.release(min_hold=0)  # nothing ran: no reason to hold it
                    held.locker.close()
                    return None
        except BaseException:
            held.release(min_hold=0)
            held.locker.close()
            raise
        return held

    def finish(held: Lease, failed: bool) -> None:
        # Read from the native lease (its deadline and the clock), not from a callback.
        lost = held.lost.is_set()
        try:
            held._release_after_job(f"singleton {key}")
        finally:
            held.locker.close()
        if lost and not failed:
            raise LeaseLost(
                f"singleton {key!r}: the lock (fence {held.fence}) was lost while "
                f"the job ran: {held.reason}"
            )

    def decorate(fn: _F) -> _F:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                held = await asyncio.to_thread(start)
                if held is None:
                    return None
                if lease:
                    kwargs["lease"] = held
                try:
                    result = await fn(*args, **kwargs)
                except BaseException:
                    await asyncio.to_thread(finish, held, True)
                    raise
                await asyncio.to_thread(finish, held, False)
                return result

            return cast(_F, run_async)

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            held = start()
            if held is None:
                return None
            if lease:
                kwargs["lease"] = held
            try:
                result = fn(*args, **kwargs)
            except BaseException:
                finish(held, True)
                raise
            finish(held, False)
            return result

        return cast(_F, run)

    return decorate
