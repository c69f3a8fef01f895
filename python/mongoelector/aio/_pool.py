"""The worker threads of ``mongoelector.aio``: where core calls (round trips) run.

Not ``concurrent.futures.ThreadPoolExecutor``: its ``submit()`` starts a new worker on
the submitting thread -- the event loop -- and waits there until the thread runs, which
takes tens of milliseconds on a loaded host. Here the submitting thread starts at most
the first worker, once; further workers are started by workers (a worker that takes a
job while more jobs wait than workers are idle starts one more), up to ``max_workers``.

Workers are daemon threads; at interpreter exit (``atexit``) the jobs already queued are
still run (a clean-up of a cancelled acquire releases a lock) within a time limit, then
the workers end. In a child process made by ``fork()`` the parent's workers do not
exist: the pool starts afresh.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import queue
import threading
import time
from typing import Callable, Optional, TypeVar

__all__ = ["Job", "Pool", "clean_up", "pool", "quietly"]

_T = TypeVar("_T")

log = logging.getLogger("mongoelector.aio")

_PENDING, _RUNNING, _CANCELLED = 0, 1, 2


class Job:
    """A queued call; ``cancel()`` withdraws it if no worker has started it."""

    __slots__ = ("_fn", "_state", "_pool")

    def __init__(self, fn: Callable[[], object], owner: Pool) -> None:
        self._fn: Optional[Callable[[], object]] = fn
        self._state = _PENDING
        self._pool = owner

    def cancel(self) -> bool:
        """True if the job will never run; False if it runs or ran."""
        with self._pool._lock:
            if self._state == _PENDING:
                self._state = _CANCELLED
                self._fn = None
            return self._state == _CANCELLED


class Pool:
    def __init__(self, max_workers: int, name: str) -> None:
        self._max = max_workers
        self._name = name
        self._queue: queue.SimpleQueue[Optional[Job]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._waiting = 0  # jobs queued, not taken yet
        self._closing = False

    def submit(self, fn: Callable[[], object]) -> Job:
        job = Job(fn, self)
        with self._lock:
            if self._closing:
                raise RuntimeError("mongoelector.aio's workers have shut down (exit)")
            self._waiting += 1
            first = not self._threads
        self._queue.put(job)
        if first:
            self._grow(force=True)
        return job

    def _grow(self, force: bool = False) -> None:
        with self._lock:
            if self._closing or len(self._threads) >= self._max:
                return
            if not force and self._waiting <= self._idle:
                return
            if force and self._threads:
                return
            thread = threading.Thread(
                target=self._work, daemon=True, name=f"{self._name}-{len(self._threads) + 1}"
            )
            self._threads.append(thread)
        thread.start()

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            job = self._queue.get()
            with self._lock:
                self._idle -= 1
                if job is None:
                    return
                self._waiting -= 1
                fn = job._fn if job._state == _PENDING else None
                if fn is not None:
                    job._state = _RUNNING
                    job._fn = None
            self._grow()  # more jobs wait than workers are idle: one more worker
            if fn is None:
                continue
            try:
                fn()
            except BaseException:  # noqa: BLE001 - a job reports through its own future
                log.exception("mongoelector.aio: a worker job failed")
            del fn, job

    def shutdown(self, timeout: float) -> None:
        """Runs what is queued, then ends the workers (waits ``timeout`` at most)."""
        with self._lock:
            self._closing = True
            threads = list(self._threads)
        for _ in threads:
            self._queue.put(None)
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))


_MAX_WORKERS = 8
_pool: Optional[Pool] = None
_pool_lock = threading.Lock()


def pool() -> Pool:
    """The process's pool (made on first use)."""
    global _pool
    current = _pool
    if current is None:
        with _pool_lock:
            if _pool is None:
                _pool = Pool(_MAX_WORKERS, "mongoelector-aio")
            current = _pool
    return current


def quietly(fn: Callable[[_T], object], value: _T) -> None:
    """``fn(value)``, a background clean-up: its error is logged, never raised anywhere."""
    try:
        fn(value)
    except Exception:  # noqa: BLE001 - a background clean-up must not raise anywhere
        log.exception("mongoelector.aio: background clean-up failed")


def clean_up(fn: Callable[[_T], object], value: _T) -> None:
    """Runs ``quietly(fn, value)`` on a worker: undoes what nobody will take (a hold taken
    for a task that was cancelled)."""
    pool().submit(functools.partial(quietly, fn, value))


def _at_exit() -> None:
    current = _pool
    if current is not None:
        current.shutdown(10.0)


def _after_fork_in_child() -> None:
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()


atexit.register(_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
