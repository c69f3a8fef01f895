"""Claims of one fire time of a scheduled job, shared by the scheduler integrations
(``mongoelector.celery``, ``mongoelector.apscheduler``).

A claim of ``(name, fire time)`` is a marker lock ``"<name>@fire:<epoch ms>"`` in the
locks' collection, taken without waiting and never released: the first claim, from any
node, wins; every later one loses until the marker expires ``retention`` seconds after it
was taken (server clock). It is the once-per-window marker of ``claim_window``
(``"<key>@window:<start ms>"``) for a fire time given by the schedule instead of a window
of the server's clock: a run that falls due during a hand-over can still be claimed late,
by the node that takes over, and still only once.

Claiming first and sending after means a run is never sent twice; a node that dies
between its claim and the send loses that one run (nothing can tell "claimed and sent"
from "claimed, then killed" without the broker taking part).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from typing import Optional

from ._transport import DatabaseArg
from .locker import LockExists, MongoLocker

__all__ = ["FireClaims", "utc"]

_log = logging.getLogger("mongoelector")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def utc(when: datetime) -> datetime:
    """``when`` in UTC; a naive datetime is refused (its time zone would be a guess, and
    nodes that guessed differently would claim different fire times)."""
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError(f"fire time {when!r} has no time zone: give an aware datetime")
    return when.astimezone(timezone.utc)


class FireClaims:
    """Claims fire times of jobs; ``retention`` (seconds) must exceed the longest a node
    may still try to claim a fire time after it (catch-up, misfire grace, clock skew)."""

    def __init__(
        self,
        db: DatabaseArg,
        *,
        retention: float,
        dbcollection: str = "mongolocker",
        database: Optional[str] = None,
        op_timeout: Optional[float] = None,
        allow_unsafe_server: bool = False,
    ) -> None:
        if isinstance(retention, bool) or not isinstance(retention, (int, float)):
            raise TypeError(f"retention must be a number of seconds, not {retention!r}")
        if not 1 <= retention <= 1e9:
            raise ValueError(f"retention must be between 1 and 1e9 seconds, not {retention!r}")
        self.db = db
        self.retention = float(retention)
        self._dbcollection = dbcollection
        self._database = database
        self._op_timeout = op_timeout
        self._allow_unsafe_server = allow_unsafe_server
        # Never acquired: keeps a URI's shared client (and a SQLite file) open between
        # claims, which would otherwise each open and close it.
        self._anchor: Optional[MongoLocker] = MongoLocker(
            "mongoelector-fire-claims",
            db,
            dbcollection=dbcollection,
            database=database,
            op_timeout=op_timeout,
            allow_unsafe_server=allow_unsafe_server,
            timeparanoid=False,
        )

    def close(self) -> None:
        """Frees the connections (claims made stay until their retention ends)."""
        if self._anchor is not None:
            self._anchor.close()
            self._anchor = None

    @staticmethod
    def marker(name: str, fire: datetime) -> str:
        """The marker's key: ``name`` and the fire time in whole milliseconds since the
        epoch (UTC), exactly as every node computes it."""
        return f"{name}@fire:{(utc(fire) - _EPOCH) // timedelta(milliseconds=1)}"

    def _locker(self, name: str, fire: datetime) -> MongoLocker:
        return MongoLocker(
            self.marker(name, fire),
            self.db,
            ttl=self.retention,
            dbcollection=self._dbcollection,
            database=self._database,
            op_timeout=self._op_timeout,
            allow_unsafe_server=self._allow_unsafe_server,
            # The markers live on the server's time base: a host clock check would add a
            # round trip per claim and protect nothing.
            timeparanoid=False,
            # The anchor ensured the collection's indexes: none per claim.
            _ensure_indexes=False,
            # Never released: a claim is then the one conditional write, which also
            # answers the nodes that lose it in one command.
            delete_on_release=False,
        )

    def claim(self, name: str, fire: datetime) -> bool:
        """True if this call claimed ``fire`` for ``name``; False if any node (this one
        included) claimed it before. Errors (server unreachable) propagate: the caller
        must not run the job then, since it cannot know whether a claim landed."""
        locker = self._locker(name, fire)
        try:
            locker.acquire(blocking=False)
        except LockExists:
            return False
        finally:
            # The marker stays taken until its ttl (the retention) ends: never released.
            locker._close_keeping_hold()
        return True

    def claimed(self, name: str, fire: datetime) -> bool:
        """Whether ``fire`` of ``name`` has been claimed (one read, claims nothing)."""
        locker = self._locker(name, fire)
        try:
            return locker.locked()
        finally:
            locker.close()
