"""Process-level housekeeping for native election loops.

* A started elector is kept alive here until its loop has ended (the original's loop
  thread kept its elector alive the same way). The reference is dropped on a thread
  that is not the loop's own, so a native elector is never destroyed by its own thread.
* At interpreter exit every running elector is stopped (leadership released) before
  finalization begins, and the log bridge is flushed: no native thread touches a
  dying interpreter.
* In a child created by fork() the parents' loop threads do not exist: their electors
  are abandoned (neither stopped nor joined).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from typing import Any, Protocol, Set

from . import _native


class _Loop(Protocol):
    """What is tracked: a MongoLeaderElector or a Partitioner (a native loop)."""

    _core: Any

    @property
    def closed(self) -> bool: ...

    def stop(self) -> None: ...


log = logging.getLogger("mongoelector")

_lock = threading.Lock()
_running: Set[_Loop] = set()
_exiting = False


def track(elector: _Loop) -> None:
    with _lock:
        _running.add(elector)


def sweep() -> None:
    """Forgets electors whose loop has ended. Never call from a loop thread."""
    with _lock:
        done = [e for e in _running if e.closed or not e._core.running]
        for e in done:
            _running.discard(e)
    # References are dropped here, outside the lock: destruction joins the thread.
    del done


def _stop_all() -> None:
    global _exiting
    _exiting = True
    with _lock:
        electors = list(_running)
        _running.clear()
    for e in electors:
        if e.closed:
            continue
        try:
            e.stop()
        except Exception:  # noqa: BLE001 - exit must go on
            log.exception("stopping %r at interpreter exit failed", e)
    del electors
    _native.wait_reapers(10.0)
    _native.shutdown_log()


def _after_fork_in_child() -> None:
    with _lock:
        electors = list(_running)
        _running.clear()
    for e in electors:
        if not e.closed:
            e._core._abandon()


atexit.register(_stop_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
