"""Testing kit: test code that uses mongoelector without a server.

``memory_uri()`` names a fresh in-process backend (``memory://NAME``) with the semantics of
the MongoDB one: pass it wherever a ``db`` goes (``MongoLocker``, ``MongoLeaderElector``,
``lease``, ``MongoSemaphore``, ``singleton``). Every use of one name in this process shares
its locks; other names, and other processes, see nothing of them. The levers below make
the situations a user's code must survive happen on purpose, at once::

    from mongoelector import testing

    def test_job_stops_when_the_lock_is_lost():
        db = testing.memory_uri()
        with mongoelector.lease(db, "report", ttl=2) as lease:
            testing.steal(db, "report")          # another node forces the lock away
            assert lease.wait_lost(timeout=5)    # lost at the next renewal (about ttl/3)

* ``steal(db, key)``: another node takes the lock by force (the holder's next renewal
  finds it taken: lost). Returns the thief's ``MongoLocker``.
* ``force_release(db, key)``: the lock is released behind the holder's back.
* ``force_expire(db, key)``: (memory:// only) the lock expires now, as if its holder had
  stopped renewing; the holder's next renewal finds it lost.
* ``unavailable(db)``: (memory:// only) a context manager during which the backend answers
  nothing (every call fails at once, like a server that is down): holders keep their lock
  until their renew deadline and then report it lost, electors step down.

Electors' locks live in the collection ``"elector.locks"``: pass
``collection="elector.locks"`` to the levers to act on an election.

``FakeClock`` makes time itself a lever. Attach one to a memory:// backend
(``clock.memory_uri()``, or ``memory_uri(clock=clock)``) and everything made on it runs on
that clock: leases renew, expire and are declared lost, electors poll, win and step
down, observers look, exactly when the fake time says so, on the library's own threads.
Time moves only through ``clock.advance(seconds)``, which walks to each pending
deadline in turn and returns once every one of those threads has acted; a test of an
hour of leadership takes milliseconds and needs no sleep::

    def test_leader_steps_down_when_cut_off():
        clock = testing.FakeClock()
        db = clock.memory_uri()
        elector = MongoLeaderElector("svc", db, ttl=10)
        elector.start()
        clock.advance(0)                     # its loop ran: it leads
        assert elector.is_leader
        with testing.unavailable(db):
            clock.advance(10)                # one ttl without a successful renewal
            assert not elector.is_leader

Every wait on the clock is in fake time: ``lease.wait_lost(timeout)``, a blocking
``lease(...)`` or ``MongoSemaphore`` acquire returns when ``advance()`` reaches its
deadline, so call those with ``timeout=0`` or from another thread than the one that
advances; ``clock.block_until_waiters(clock.waiters + 1)`` (taken before starting that
thread) waits until it has reached its blocking call. From asyncio, advance in a worker
thread: ``await asyncio.to_thread(clock.advance, seconds)``. (The drop-in ``MongoLocker.acquire(blocking=True)`` retry loop, written in
Python, waits in real time.)
"""

from __future__ import annotations

import contextlib
import datetime
import math
import time
import uuid
from typing import Iterator, Optional, Union

from . import _native
from ._transport import DatabaseArg
from .locker import MongoLocker
from .observer import _seconds as _number_of_seconds

__all__ = ["memory_uri", "steal", "force_release", "force_expire", "unavailable", "FakeClock"]

_MEMORY = "memory://"


Seconds = Union[int, float, datetime.timedelta]


def _seconds(value: Seconds, what: str) -> float:
    """Finite seconds from a number or a timedelta (TypeError / ValueError otherwise)."""
    s = (
        value.total_seconds()
        if isinstance(value, datetime.timedelta)
        else _number_of_seconds(what, value)
    )
    assert s is not None
    if not math.isfinite(s):
        raise ValueError(f"{what} must be finite, not {value!r}")
    return s


class FakeClock:
    """A clock that moves only when the test says so (see the module's doc).

    ``start``: the wall clock at the start (the memory backend's server clock), as Unix
    seconds or an aware ``datetime``; default: now. ``settle_timeout``: how long, in real
    seconds, ``advance()`` waits for the library's threads to become idle at each step
    before it raises ``RuntimeError`` (a callback that waits for the advancing thread
    never becomes idle).
    """

    def __init__(
        self,
        start: Union[None, int, float, datetime.datetime] = None,
        *,
        settle_timeout: Seconds = 10.0,
    ) -> None:
        if start is None:
            start_s = time.time()
        elif isinstance(start, datetime.datetime):
            if start.tzinfo is None:
                raise ValueError("start must be an aware datetime (tzinfo set)")
            start_s = start.timestamp()
        else:
            start_s = _seconds(start, "start")
        bound = _seconds(settle_timeout, "settle_timeout")
        if not 0 < bound <= 3600:
            raise ValueError(f"settle_timeout must be in (0, 3600] seconds, not {bound!r}")
        self._native = _native.ManualClock(int(round(start_s * 1000)), int(round(bound * 1000)))

    def advance(self, seconds: Seconds) -> None:
        """Moves time forward by ``seconds`` (>= 0), stopping at every deadline on the
        way, and returns once the library's threads have acted on it. The GIL is released
        meanwhile, so callbacks run."""
        s = _seconds(seconds, "seconds")
        if s < 0:
            raise ValueError(f"a clock cannot go back (advance by {s!r} s)")
        if not self._native.advance(int(round(s * 1000))):
            raise RuntimeError(
                "FakeClock.advance: the library's threads did not become idle "
                "(a callback blocked on something the advancing thread holds?)"
            )

    def settle(self) -> None:
        """What ``advance(0)`` does: waits until the threads acted on the time it is."""
        if not self._native.settle():
            raise RuntimeError("FakeClock.settle: the library's threads did not become idle")

    @property
    def waiters(self) -> int:
        """How many threads wait on this clock now (the library's own, and any blocked in
        a call that waits in fake time)."""
        return int(self._native.waiters())

    def block_until_waiters(self, n: int, timeout: Seconds = 10.0) -> None:
        """Blocks, in real time, until at least ``n`` threads wait on this clock: a test's
        own thread has reached its blocking call, so an ``advance()`` now passes that
        call's deadline instead of running before it. ``TimeoutError`` after ``timeout``
        real seconds."""
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"n must be an int, not {type(n).__name__}")
        bound = _seconds(timeout, "timeout")
        if not self._native.block_until_waiters(max(0, n), int(round(max(0.0, bound) * 1000))):
            raise TimeoutError(f"fewer than {n} threads wait on the clock after {bound} s")

    def time(self) -> float:
        """The wall clock (and the memory backend's server clock): Unix seconds."""
        return self._native.wall_ms() / 1000.0

    def monotonic(self) -> float:
        """Seconds of fake time since the clock was made."""
        return self._native.mono_ms() / 1000.0

    def jump_wall(self, seconds: Seconds) -> None:
        """Steps only the wall clock, as NTP would (intervals do not change)."""
        self._native.jump_wall(int(round(_seconds(seconds, "seconds") * 1000)))

    def memory_uri(self, name: Optional[str] = None) -> str:
        """A memory:// backend that runs on this clock (see ``memory_uri``)."""
        return memory_uri(name, clock=self)


def memory_uri(name: Optional[str] = None, *, clock: Optional[FakeClock] = None) -> str:
    """``memory://NAME``: a fresh name unless one is given (the same name shares locks).
    With ``clock``, everything made on it runs on that ``FakeClock`` (``ValueError`` if
    the name already runs on another clock)."""
    uri = _MEMORY + (name if name is not None else "test-" + uuid.uuid4().hex)
    if clock is not None:
        if not isinstance(clock, FakeClock):
            raise TypeError(f"clock must be a testing.FakeClock, not {type(clock).__name__}")
        clock._native.attach(uri)
    return uri


def _memory(db: DatabaseArg, what: str) -> str:
    if not (isinstance(db, str) and db.startswith(_MEMORY)):
        raise TypeError(
            f"{what} works on the memory:// backend only (testing.memory_uri()), not {db!r}"
        )
    return db


def steal(
    db: DatabaseArg, key: str, *, collection: str = "mongolocker", ttl: float = 600
) -> MongoLocker:
    """Another node takes ``key`` by force and holds it (``ttl``). Returns its locker:
    ``release()`` it to free the key."""
    thief = MongoLocker(key, db, dbcollection=collection, ttl=ttl, timeparanoid=False)
    thief.acquire(force=True)
    return thief


def force_release(db: DatabaseArg, key: str, *, collection: str = "mongolocker") -> None:
    """Releases ``key`` whoever holds it, behind the holder's back."""
    other = MongoLocker(key, db, dbcollection=collection, timeparanoid=False)
    try:
        other.release(force=True)
    finally:
        other.close()


def force_expire(db: DatabaseArg, key: str, *, collection: str = "mongolocker") -> bool:
    """Makes the lock on ``key`` expire now (memory:// only). True if it was held."""
    return _native.memory_expire(_memory(db, "force_expire"), collection, key)


@contextlib.contextmanager
def unavailable(db: DatabaseArg) -> Iterator[None]:
    """While the block runs, the memory:// backend ``db`` fails every call at once."""
    uri = _memory(db, "unavailable")
    _native.memory_set_unavailable(uri, True)
    try:
        yield
    finally:
        _native.memory_set_unavailable(uri, False)
