"""Celery integration: a beat scheduler that runs the schedule on one beat of several, and
a task base class for "at most one running instance" of a task.

Needs ``celery`` (``pip install 'mongoelector[celery]'``); imported only when used::

    app.conf.mongoelector_url = "mongodb://db1/ops"    # or "sqlite:////var/lib/app/locks.db"

    # every node: celery -A proj beat -S mongoelector.celery:LeaderScheduler

    @app.task(base=SingletonTask, mongoelector_ttl=60)
    def rebuild_index() -> None:
        print("token", rebuild_index.lease.fence)

``LeaderScheduler``: every beat process runs an elector on ``mongoelector_beat_key``; the
leader runs the schedule, the others stand by and take over about one ttl after the
leader dies. Every fire time of every entry is claimed before it is sent (a marker per
entry and fire time: see ``mongoelector._claims``), so a run is never sent twice, even
when two beats briefly both think they lead; the beat that takes over sends the fire
times that fell due during the hand-over and that nobody claimed (within
``mongoelector_beat_catch_up`` seconds and since it started), so a hand-over skips
nothing. Fire times are the schedule's, identical on every node: a ``crontab``'s times,
and for an interval (``schedule``, a number, a ``timedelta``) the multiples of the
interval since the Unix epoch (every 10 s on :00, :10, ...), not "interval after the last
run". Each task gets the fire time in header ``mongoelector_fire_time`` (``fire_time()``).

Settings (``app.conf``):
    mongoelector_url            the database: a URI (mongodb://, sqlite:///) or a pymongo
                                Database (required)
    mongoelector_beat_key       the election's key (default "celery-beat:<app name>")
    mongoelector_beat_ttl       the leader's lease in seconds (default 15)
    mongoelector_beat_catch_up  how far back a new leader looks for unclaimed fire times,
                                seconds (default max(60, 4 * ttl); 0: no catch-up)
    mongoelector_beat_retention how long a claim is kept, seconds (default
                                2 * catch_up + 300; longer than any node may look back)
"""

from __future__ import annotations

import contextvars
import logging
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Dict, Optional, Union

from celery import Celery, Task  # type: ignore[import-untyped,import-not-found,unused-ignore]
from celery.beat import ScheduleEntry, Scheduler  # type: ignore[import-untyped,import-not-found,unused-ignore]
from celery.schedules import crontab  # type: ignore[import-untyped,import-not-found,unused-ignore]
from celery.schedules import schedule as interval_schedule  # type: ignore[import-untyped,import-not-found,unused-ignore]

from ._claims import FireClaims, utc
from ._singleton_options import SingletonOptions, run_singleton
from ._transport import DatabaseArg
from .elector import MongoLeaderElector
from .lease import Lease

__all__ = ["LeaderScheduler", "SingletonTask", "FIRE_TIME_HEADER", "fire_time", "next_fire_time"]

_log = logging.getLogger("mongoelector.celery")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = timedelta(microseconds=1)
_MAX_CATCH_UP = 1000  # fire times a new leader looks back at, per entry

#: The message header that carries the fire time (ISO 8601, UTC) of a task sent by
#: ``LeaderScheduler``.
FIRE_TIME_HEADER = "mongoelector_fire_time"


def _database(app: Celery, what: str) -> DatabaseArg:
    db = app.conf.get("mongoelector_url")
    if db is None or db == "":
        raise ValueError(
            f"{what} needs the database of its locks: set app.conf.mongoelector_url "
            '(e.g. "mongodb://db1/ops" or "sqlite:////var/lib/app/locks.db")'
        )
    return db  # type: ignore[no-any-return]


def _seconds(app: Celery, name: str, default: float, minimum: float) -> float:
    value = app.conf.get(name)
    if value is None:
        return default
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"app.conf.{name} must be a number of seconds, not {value!r}")
    if not minimum <= value <= 1e9:
        raise ValueError(
            f"app.conf.{name} must be between {minimum} and 1e9 seconds, not {value!r}"
        )
    return float(value)


def next_fire_time(sched: Any, after: datetime, entry: str = "?") -> datetime:
    """The schedule's first fire time strictly after ``after`` (aware, UTC), the same on
    every node: a crontab's next time; for an interval, the next multiple of the
    interval since the Unix epoch. Other schedule types are refused (``TypeError``):
    their times cannot be matched across nodes."""
    if isinstance(sched, crontab):
        start, delta, _ = sched.remaining_delta(utc(after))
        return utc(start + delta)
    if isinstance(sched, interval_schedule):
        every = int(sched.run_every // _US)
        if every < 1000:
            raise ValueError(
                f"beat entry {entry!r} runs every {sched.run_every}: give it an interval "
                "of 1 ms or more"
            )
        elapsed = (utc(after) - _EPOCH) // _US
        return _EPOCH + (elapsed // every + 1) * every * _US
    raise TypeError(
        f"beat entry {entry!r} has a {type(sched).__name__} schedule: "
        "mongoelector.celery.LeaderScheduler runs crontab and interval schedules "
        "(celery.schedules.crontab, celery.schedules.schedule, a number or a timedelta), "
        "whose fire times every beat computes alike"
    )


def fire_time(request: Any) -> Optional[datetime]:
    """The fire time (UTC) of the task being run, from ``self.request`` in a bound task,
    or None when it was not sent by ``LeaderScheduler``."""
    value = getattr(request, FIRE_TIME_HEADER, None)
    if value is None:
        headers = getattr(request, "headers", None) or {}
        value = headers.get(FIRE_TIME_HEADER)
    return datetime.fromisoformat(value) if isinstance(value, str) else None


class _Lost(Exception):
    """Leadership ended in the middle of a tick."""


class LeaderScheduler(Scheduler):  # type: ignore[misc,unused-ignore]
    """``celery beat -S mongoelector.celery:LeaderScheduler``: the schedule runs on the
    elected beat only, each fire time of each entry once. See the module docstring."""

    def __init__(self, app: Celery, *args: Any, **kwargs: Any) -> None:
        self._db = _database(app, "mongoelector.celery.LeaderScheduler")
        self._key = app.conf.get("mongoelector_beat_key") or f"celery-beat:{app.main or 'celery'}"
        if not isinstance(self._key, str):
            raise TypeError(f"app.conf.mongoelector_beat_key must be a str, not {self._key!r}")
        self._ttl = _seconds(app, "mongoelector_beat_ttl", 15.0, 0.1)
        self._catch_up = _seconds(app, "mongoelector_beat_catch_up", max(60.0, 4 * self._ttl), 0)
        retention = _seconds(app, "mongoelector_beat_retention", 2 * self._catch_up + 300, 1)
        if retention <= self._catch_up:
            raise ValueError(
                f"app.conf.mongoelector_beat_retention ({retention:g} s) must be longer than "
                f"mongoelector_beat_catch_up ({self._catch_up:g} s): a claim must outlive "
                "every look back for it"
            )
        self._claims = FireClaims(self._db, retention=retention)
        self._started = datetime.now(timezone.utc)
        self._elector: Optional[MongoLeaderElector] = None
        self._term: Optional[int] = None
        # Per entry: the last fire time this beat dealt with (claimed, or found claimed)
        # in its current term as leader.
        self._cursor: Dict[str, datetime] = {}
        super().__init__(app, *args, **kwargs)

    # -- election --------------------------------------------------------------------

    def _ensure_elector(self) -> MongoLeaderElector:
        if self._elector is None:
            self._elector = MongoLeaderElector(
                self._key,
                self._db,
                ttl=self._ttl,
                on_leader=lambda: _log.info("beat: leading %s: running the schedule", self._key),
                on_leader_loss=lambda: _log.info("beat: no longer leading %s", self._key),
            )
            self._elector.start()
            _log.info("beat: standing by for %s (ttl %g s)", self._key, self._ttl)
        return self._elector

    @property
    def is_leader(self) -> bool:
        """Whether this beat runs the schedule now."""
        return self._elector is not None and self._elector.is_leader

    def _follower_wait(self) -> float:
        return float(min(self.max_interval, max(0.05, self._ttl / 10)))

    # -- the schedule ----------------------------------------------------------------

    def tick(self, *args: Any, **kwargs: Any) -> float:
        elector = self._ensure_elector()
        if not elector.is_leader:
            self._term = None
            return self._follower_wait()
        fence = elector.fence
        if fence != self._term:  # a new term: where each entry stands is read again
            self._term = fence
            self._cursor.clear()
        now = datetime.now(timezone.utc)
        wait = float(self.max_interval)
        for entry in list(self.schedule.values()):
            try:
                upcoming = self._run_entry(entry, now, elector)
            except _Lost:
                return self._follower_wait()
            except (TypeError, ValueError):
                raise  # a schedule this scheduler cannot run: the user's to fix
            except Exception:  # the database: this entry is tried again next tick
                _log.exception("beat: entry %s: cannot claim its fire time; retrying", entry.name)
                wait = min(wait, 1.0)
                continue
            wait = min(wait, (upcoming - datetime.now(timezone.utc)).total_seconds())
        return max(0.0, wait)

    def _run_entry(
        self, entry: ScheduleEntry, now: datetime, elector: MongoLeaderElector
    ) -> datetime:
        """Claims and sends every fire time of ``entry`` up to ``now``; returns the next."""
        name = str(entry.name)
        claim_name = f"{self._key}:{name}"
        cursor = self._cursor.get(name)
        if cursor is None:
            cursor = self._catch_up_from(entry, claim_name, now)
            self._cursor[name] = cursor
        fire = next_fire_time(entry.schedule, cursor, name)
        while fire <= now:
            if not elector.is_leader:
                raise _Lost()
            if self._claims.claim(claim_name, fire):
                self._send(entry, fire)
            else:
                _log.debug("beat: %s at %s was claimed by another beat", name, fire)
            self._cursor[name] = fire
            fire = next_fire_time(entry.schedule, fire, name)
        return fire

    def _catch_up_from(self, entry: ScheduleEntry, claim_name: str, now: datetime) -> datetime:
        """Where a new term starts for ``entry``: its latest claimed fire time within the
        catch-up window (the previous leader's last), else the window's start. Fire times
        after it that nobody claimed fell due during the hand-over and are sent now."""
        floor = max(self._started, now - timedelta(seconds=self._catch_up))
        fires = []
        fire = next_fire_time(entry.schedule, floor, str(entry.name))
        while fire <= now:
            fires.append(fire)
            fire = next_fire_time(entry.schedule, fire, str(entry.name))
        if len(fires) > _MAX_CATCH_UP:  # one read per fire time: bound the look back
            _log.warning(
                "beat: %s: only the last %d of %d fire times since %s are looked at: "
                "lower mongoelector_beat_catch_up for so short an interval",
                entry.name,
                _MAX_CATCH_UP,
                len(fires),
                floor.isoformat(),
            )
            floor = fires[-_MAX_CATCH_UP - 1]
            fires = fires[-_MAX_CATCH_UP:]
        for fire in reversed(fires):
            if self._claims.claimed(claim_name, fire):
                return fire
        if len(fires) > 1:
            _log.info(
                "beat: %s: %d fire time(s) since %s were not claimed: sending them",
                entry.name,
                len(fires),
                floor.isoformat(),
            )
        return floor

    def _send(self, entry: ScheduleEntry, fire: datetime) -> None:
        options = dict(entry.options or {})
        headers = dict(options.get("headers") or {})
        headers[FIRE_TIME_HEADER] = fire.isoformat()
        options["headers"] = headers
        message = self.Entry(**dict(dict(entry), options=options))
        try:
            self.apply_async(message, producer=self.producer, advance=False)
        except Exception:
            # Claimed, so nobody else sends it: say loudly that this run is lost.
            _log.exception("beat: %s at %s was claimed but could not be sent", entry.name, fire)
        else:
            _log.info(
                "Scheduler: Sent due task %s (%s) for %s", entry.name, entry.task, fire.isoformat()
            )
        entry.last_run_at = fire
        entry.total_run_count += 1

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self._elector is not None:
                self._elector.close()  # releases leadership: a standby takes over at once
            self._claims.close()

    @property
    def info(self) -> str:
        return f"    . leader election -> {self._key} (ttl {self._ttl:g} s)"


# -- at most one running instance of a task --------------------------------------------

_current_lease: contextvars.ContextVar[Optional[Lease]] = contextvars.ContextVar(
    "mongoelector_celery_lease", default=None
)


class SingletonTask(SingletonOptions, Task):  # type: ignore[misc,unused-ignore]
    """Task base class: at most one instance of the task runs at a time, across all
    workers (the celery-once use case, checked when the task runs, not when it is sent).

    ``@app.task(base=SingletonTask)``; a run that finds the task running elsewhere is
    skipped (returns None, logged) unless ``mongoelector_wait`` is set. While it runs,
    ``self.lease`` is the running ``mongoelector.Lease`` (``self.lease.fence``: the
    fencing token for your writes; ``self.lease.check()`` raises ``LeaseLost`` once the
    lock was lost). Options (task attributes, e.g. ``@app.task(base=SingletonTask,
    mongoelector_ttl=30)``):

    - ``mongoelector_key``: the lock's key: a str, or a callable given the task's
      arguments (one lock per argument value); default ``"celery-task:<task name>"``
    - ``mongoelector_ttl`` (60), ``mongoelector_wait`` (False), ``mongoelector_timeout``,
      ``mongoelector_min_hold``, ``mongoelector_once_per``: as for ``mongoelector.singleton``
    - ``mongoelector_url``: the database, default ``app.conf.mongoelector_url``
    """

    mongoelector_key: Union[None, str, Callable[..., str]] = None
    mongoelector_url: Optional[DatabaseArg] = None

    @property
    def lease(self) -> Lease:
        """The lease of the run in progress (in the task's own thread or coroutine)."""
        held = _current_lease.get()
        if held is None:
            raise RuntimeError(
                f"{self.name}.lease is only available while the task runs (inside its body)"
            )
        return held

    def mongoelector_lock_key(self, *args: Any, **kwargs: Any) -> str:
        key = self.mongoelector_key
        if key is None:
            return f"celery-task:{self.name}"
        if isinstance(key, str):
            return key
        value = key(*args, **kwargs)
        if not isinstance(value, str) or not value:
            raise TypeError(
                f"{self.name}.mongoelector_key returned {value!r}: it must return a non-empty str"
            )
        return value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        db = self.mongoelector_url or _database(self.app, f"SingletonTask {self.name}")
        call = super().__call__

        def body(lease: Lease) -> Any:
            token = _current_lease.set(lease)
            try:
                return call(*args, **kwargs)
            finally:
                _current_lease.reset(token)

        return run_singleton(self.mongoelector_lock_key(*args, **kwargs), db, self, body)[1]
