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
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Iterator, Optional

from . import _native
from ._transport import DatabaseArg
from .locker import MongoLocker

__all__ = ["memory_uri", "steal", "force_release", "force_expire", "unavailable"]

_MEMORY = "memory://"


def memory_uri(name: Optional[str] = None) -> str:
    """``memory://NAME``: a fresh name unless one is given (the same name shares locks)."""
    return _MEMORY + (name if name is not None else "test-" + uuid.uuid4().hex)


def _memory(db: DatabaseArg, what: str) -> str:
    if not (isinstance(db, str) and db.startswith(_MEMORY)):
        raise TypeError(f"{what} works on the memory:// backend only (testing.memory_uri()), "
                        f"not {db!r}")
    return db


def steal(db: DatabaseArg, key: str, *, collection: str = "mongolocker",
          ttl: float = 600) -> MongoLocker:
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
