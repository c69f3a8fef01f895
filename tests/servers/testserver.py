"""Start/stop real MongoDB-protocol test servers from Python (pytest fixtures).

This is a thin wrapper around ``testserver.sh`` next to this file, which does
the actual work (building, free-port selection, readiness wait, clean-up).

    from testserver import start_server, mongo_server

    uri, stop = start_server("java")        # or "ferretdb"
    try:
        ...                                  # MongoClient(uri)
    finally:
        stop()

    with mongo_server("ferretdb") as uri:
        ...

Example pytest fixture (one server per session and kind)::

    import pytest, testserver

    @pytest.fixture(scope="session", params=testserver.KINDS)
    def mongo_uri(request):
        try:
            uri, stop = testserver.start_server(request.param)
        except testserver.ServerError as e:
            pytest.skip(str(e))
        request.addfinalizer(stop)
        return uri

Servers still running when the interpreter exits are stopped by an atexit
hook (not on SIGKILL: ``testserver.sh stop --all`` cleans up after that).
"""

from __future__ import annotations

import atexit
import contextlib
import subprocess
import threading
from pathlib import Path
from typing import Callable, Iterator, Tuple

__all__ = ["KINDS", "SCRIPT", "ServerError", "install", "start_server", "mongo_server"]

KINDS = ("java", "ferretdb")
SCRIPT = Path(__file__).resolve().with_name("testserver.sh")

_lock = threading.Lock()
_running: dict[str, Callable[[], None]] = {}


class ServerError(RuntimeError):
    """A test server could not be installed, started or stopped."""


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            ["bash", str(SCRIPT), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as e:
        raise ServerError(f"testserver.sh {' '.join(args)} timed out after {timeout:.0f}s") from e


def install(*kinds: str, timeout: float = 1800) -> None:
    """Build/install the servers (all when none given). Idempotent."""
    p = _run(["install", *kinds], timeout)
    if p.returncode != 0:
        raise ServerError(f"testserver.sh install failed ({p.returncode}):\n{p.stderr}")


def start_server(kind: str, timeout: float = 1800) -> Tuple[str, Callable[[], None]]:
    """Start a server of ``kind`` ("java" or "ferretdb") on a free loopback port.

    Returns ``(uri, stop)``; ``uri`` looks like ``mongodb://127.0.0.1:PORT/``
    and ``stop()`` (idempotent) stops the server and removes its data.
    ``timeout`` covers a first-time build as well.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown server kind {kind!r}, expected one of {KINDS}")
    p = _run(["start", kind], timeout)
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines or not lines[-1].startswith("mongodb://"):
        raise ServerError(f"testserver.sh start {kind} failed ({p.returncode}):\n{p.stderr}")
    uri = lines[-1].strip()
    done = threading.Event()

    def stop() -> None:
        with _lock:
            if done.is_set():
                return
            done.set()
            _running.pop(uri, None)
        q = _run(["stop", uri], 60)
        if q.returncode != 0:
            raise ServerError(f"testserver.sh stop {uri} failed ({q.returncode}):\n{q.stderr}")

    with _lock:
        _running[uri] = stop
    return uri, stop


@contextlib.contextmanager
def mongo_server(kind: str) -> Iterator[str]:
    """Context manager: start a server of ``kind``, yield its URI, always stop it."""
    uri, stop = start_server(kind)
    try:
        yield uri
    finally:
        stop()


@atexit.register
def _stop_all() -> None:
    with _lock:
        stops = list(_running.values())
    for stop in stops:
        with contextlib.suppress(Exception):
            stop()


if __name__ == "__main__":  # manual smoke test: python3 testserver.py [kind...]
    import sys

    for k in sys.argv[1:] or KINDS:
        with mongo_server(k) as u:
            print(k, u, flush=True)
