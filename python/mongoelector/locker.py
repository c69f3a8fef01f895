"""MongoLocker: a distributed lock backed by MongoDB (drop-in for mongoelector 1.0).

The protocol runs in the native core (``mongoelector._native``): one atomic
conditional upsert per attempt, expiry compared on the server's time base (an expired
lock is taken over at once, without waiting for MongoDB's TTL monitor), and a fencing
token per hold (``MongoLocker.fence``). This module keeps the original's Python surface,
including the private helpers users' tests patch (``_verifytime``, ``_acquireretry``,
``_utcnow``, ``sleep``).
"""

from __future__ import annotations

import time
import uuid
from datetime import datetime, timedelta, timezone
from os import getpid
from socket import getfqdn
from time import sleep
from types import TracebackType
from typing import (
    Any,
    Dict,
    List,
    Literal,
    NoReturn,
    Optional,
    Type,
    TypedDict,
    TypeVar,
    cast,
)

from pymongo.collection import Collection
from pymongo.database import Database

from . import _native, _transport
from ._outcome import counted_acquire
from ._transport import DatabaseArg
from .errors import AcquireTimeout, ClosedError, LockExists, TimeOffsetError, _time_offset_error

__all__ = [
    "MongoLocker",
    "LockExists",
    "AcquireTimeout",
    "TimeOffsetError",
    "LockerStatus",
    "QueuedWaiter",
]

_L = TypeVar("_L", bound="MongoLocker")


class LockerStatus(TypedDict):
    """``MongoLocker.status``: this instance and its hold, as of one round trip."""

    uuid: str
    key: str
    ttl: float  # as given to the constructor (an int stays an int)
    timestamp: datetime  # now, server time base, tz-aware UTC
    host: str
    pid: int
    lock_owned: bool
    lock_created: Optional[datetime]  # None unless owned
    lock_expires: Optional[datetime]  # None unless owned


class QueuedWaiter(TypedDict):
    """One fair waiter still queued for a key (its entry live at the earliest server
    time), as ``waiting()`` and ``holders()`` list them: first in line first."""

    uuid: str  # the waiting instance's uuid
    ticket: int  # its place: smaller tickets are served first
    ts_expire: datetime  # unless renewed; server time base, tz-aware UTC


#: How long a good time check is trusted (as the original).
_SANE_FOR = timedelta(minutes=10)


def _utcnow() -> datetime:
    """Return the current UTC time as a timezone-aware datetime."""
    return datetime.now(tz=timezone.utc)


def _epoch_ms(t: datetime) -> int:
    return int(t.timestamp() * 1000)


def _identity() -> _native.Identity:
    """uuid4, FQDN and pid computed as the original does (and patchable where it is)."""
    return _native.Identity(str(uuid.uuid4()), getfqdn(), getpid())


class _Closed:
    """Stands in for the native object of a closed locker or elector: any use raises."""

    __slots__ = ("_what",)

    def __init__(self, what: str) -> None:
        self._what = what

    def __getattr__(self, name: str) -> NoReturn:
        raise ClosedError(f"{self._what} is closed (close() was called): make a new one")


def _check_args(key: str, db: object, ttl: float, database: Optional[str] = None) -> None:
    """The original's argument checks, in its order."""
    _transport.check_db(db, database)
    if not key:
        raise ValueError("Must provide a non-empty lock key")
    if not isinstance(key, str):
        raise TypeError("lock key must be a str, not %s" % type(key).__name__)
    if not isinstance(ttl, (int, float)) or ttl <= 0:
        raise ValueError("ttl must be a positive number (seconds)")


def _native_maxoffset(maxoffset: Any) -> float:
    """The time check runs in Python (_verifytime, against self._maxoffset, which may be
    any value as in the original); the native copy is only a sane default."""
    try:
        value = float(maxoffset)
    except (TypeError, ValueError):
        return 0.5
    return value if 0 <= value < float("inf") else 0.5


class MongoLocker:
    """Distributed lock backed by MongoDB.

    Mimics the standard library Lock interface where reasonable. Used internally by
    MongoLeaderElector, but works as a standalone distributed locking primitive.

    ``db`` is a pymongo ``Database`` (or a mongomock one), or a ``mongodb://`` URI
    naming the database (``mongodb://host/dbname``, or pass ``database=``) to let the
    native core use its own connection (shared by the process's lockers and electors of
    that URI), or a ``sqlite:///path`` URI, or a ``mongoelector.Client``.

    Keyword-only options beyond the original:
        database: database name when ``db`` is a URI without one.
        delete_on_release: True (default, as the original): release deletes the lock
            document, so original nodes sharing the collection can acquire at once.
            False marks it released instead: the next acquire then keeps counting
            fencing tokens in the document and saves two round trips; original nodes
            cannot insert until MongoDB's TTL monitor removes the released document.
        allow_unsafe_server: run on a server whose findAndModify is not atomic
            (FerretDB); mutual exclusion is then not guaranteed under contention.
        op_timeout: seconds one database call may take (default ttl/10 within [0.1 s, 5 s],
            as in every binding). On a pymongo Database, the calls made once when the
            locker is created (index creation, asking what the server is) may take up
            to 5 s instead, or the client's serverSelectionTimeoutMS if shorter (never
            less than ``op_timeout``).
        fair: True serves blocking acquires in arrival order (FIFO) among fair lockers:
            a waiter that finds the lock taken joins the key's queue (a document in
            ``"<dbcollection>.queue"``), only the head of the queue tries the lock, a
            waiter that times out or is interrupted leaves the queue, and a dead waiter
            holds its place for at most one ttl. Every acquire of a fair locker waits for
            the live queue (``blocking=False`` raises ``LockExists`` while others wait).
            Lockers without ``fair`` (and nodes of the original package) ignore the
            queue: mutual exclusion and fencing never depend on it. A fair acquire costs
            one read of the queue more; the default (False) costs nothing more.

    Can be used as a context manager::

        with MongoLocker("my-resource", db, ttl=30) as lock:
            # lock is held
            pass
        # lock is released

    ``close()`` ends the locker for good: it releases the lock if this instance holds it,
    then frees the native locker and, for a URI, the connections (see ``close``). The
    ``with`` statement above does not close; for both, nest it in
    ``contextlib.closing(locker)``.
    """

    _core: _native.Locker
    uuid: str
    host: str
    pid: int
    timeparanoid: bool
    key: str
    #: The ``db`` argument as given.
    database: DatabaseArg
    #: The pymongo collection of the lock documents, as in the original (None with a URI
    #: or a ``mongoelector.Client``).
    collection: Optional[Collection[Any]]
    _ts_expire: Optional[datetime]
    _sanetime: Optional[datetime]
    _maxoffset: Any  # any value; the original compared it as given
    _use: Optional[_transport.ClientUse]
    _elector_owned: bool
    _closed: bool
    #: Whether blocking acquires queue in arrival order (the ``fair`` option).
    fair: bool

    def __init__(
        self,
        key: str,
        db: DatabaseArg,
        *,
        dbcollection: str = "mongolocker",
        ttl: float = 600,
        timeparanoid: bool = True,
        maxoffset: float = 0.5,
        database: Optional[str] = None,
        delete_on_release: bool = True,
        allow_unsafe_server: bool = False,
        op_timeout: Optional[float] = None,
        fair: bool = False,
        _ensure_indexes: bool = True,
    ) -> None:
        # _ensure_indexes=False: for the library's own short-lived lockers on a collection
        # whose indexes another of its lockers has just ensured (FireClaims).
        _check_args(key, db, ttl, database)
        _transport.check_fair(fair)
        if op_timeout is None:
            op_timeout = _transport.op_timeout_for(ttl)
        storage, use = _transport.open_storage(db, database=database, op_timeout=op_timeout)
        try:
            core = _native.Locker(
                storage,
                key,
                dbcollection,
                float(ttl),
                # The time check is _verifytime (patchable, against self._maxoffset), made
                # before the core's acquire loop: the core's own check stays off.
                False,
                _native_maxoffset(maxoffset),
                bool(delete_on_release),
                bool(allow_unsafe_server),
                identity=_identity(),
                # acquire() returns True, not the token: a claim that creates the document
                # then costs one round trip, as the original's insert (see ``fence``).
                lazy_token=True,
                ensure_indexes=bool(_ensure_indexes),
                fair=fair,
            )
        except BaseException:
            del storage
            if use is not None:
                use.end()
            raise
        self._setup(core, key, db, dbcollection, ttl, timeparanoid, maxoffset)
        self._use = use
        self.fair = fair

    @classmethod
    def _wrap(
        cls: Type[_L],
        core: _native.Locker,
        key: str,
        db: DatabaseArg,
        dbcollection: str,
        ttl: float,
        timeparanoid: bool = True,
        maxoffset: float = 0.5,
    ) -> _L:
        """A MongoLocker around an existing native locker (the elector's ``mlock``)."""
        self = cls.__new__(cls)
        self._setup(core, key, db, dbcollection, ttl, timeparanoid, maxoffset)
        self._elector_owned = True
        return self

    def _setup(
        self,
        core: _native.Locker,
        key: str,
        db: DatabaseArg,
        dbcollection: str,
        ttl: float,
        timeparanoid: bool,
        maxoffset: Any,
    ) -> None:
        self._core = core
        self.fair = False
        self.uuid = core.uuid
        self.host = core.host
        self.pid = core.pid
        self._ts_expire = None
        self.timeparanoid = timeparanoid
        self.key = key
        self.database = db
        # The pymongo collection, as in the original (None with the URI transport).
        self.collection = (
            None if _transport.is_native(db) else cast("Database[Any]", db)[dbcollection]
        )
        self.__ttl = ttl
        self._sanetime = None
        self._maxoffset = maxoffset
        self._use = None
        self._elector_owned = False
        self._closed = False

    @property
    def ts_expire(self) -> Optional[datetime]:
        """Expiry of this instance's current or last hold (server time base, tz-aware
        UTC); None until acquired."""
        hold = self._core.hold
        if hold is not None:
            self._ts_expire = hold[2]
        return self._ts_expire

    @ts_expire.setter
    def ts_expire(self, value: Optional[datetime]) -> None:
        self._ts_expire = value

    @property
    def _ttl(self) -> float:
        """The ttl as given (the native lock's lease is fixed at construction)."""
        return self.__ttl

    def __repr__(self) -> str:
        # No round trip (a repr must not fail when the server is down): owned is this
        # instance's own view, a hold whose lease still runs on this host's clock.
        if self._closed:
            return (
                f"MongoLocker(key={self.key!r}, uuid={self.uuid!r}, host={self.host!r}, "
                f"owned=False, closed=True)"
            )
        remaining = self._core.lease_remaining
        owned = remaining is not None and remaining > 0
        return (
            f"MongoLocker(key={self.key!r}, uuid={self.uuid!r}, host={self.host!r}, owned={owned})"
        )

    def __enter__(self: _L) -> _L:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc_val: Optional[BaseException],
        exc_tb: Optional[TracebackType],
    ) -> Literal[False]:
        self.release()
        return False

    @property
    def closed(self) -> bool:
        """True once ``close()`` was called (or, for an elector's ``mlock``, the
        elector's)."""
        return self._closed

    def close(self) -> None:
        """Ends this locker for good and frees what it holds.

        1. If this instance holds the lock, releases it (fenced: the same delete or mark
           as ``release()``, which cannot free a newer holder's lock); a lock it does not
           hold is left alone and costs no round trip.
        2. Frees the native locker. With a ``mongodb://`` or ``sqlite:///`` URI the
           connections close as well, unless another locker or elector of this process
           still uses the same URI (they share one client; the last one closed closes
           it). A pymongo ``Database`` or ``mongoelector.Client`` given as ``db`` is the
           caller's and is left open.

        Idempotent: a second ``close()`` does nothing. Any other use afterwards raises
        ``mongoelector.ClosedError`` (a ``RuntimeError``). If the release fails (server
        unreachable), the locker is closed all the same and that error is raised (as
        ``file.close()`` does when its flush fails): the lock then ends when its lease
        expires, at most ttl later, and its fencing token keeps protected writes safe.

        ``with contextlib.closing(MongoLocker(key, uri)) as lock:`` closes at the end of
        a block; inside it ``with lock:`` still acquires and releases.
        """
        if self._closed:
            return
        if self._elector_owned:
            raise RuntimeError(
                "this MongoLocker is a MongoLeaderElector's mlock: close the elector"
            )
        self._close(release=True)

    def _close(self, release: bool) -> None:
        core = self._core
        use = self._use
        self._mark_closed()
        try:
            if release:
                core.release(False)  # no round trip unless this instance holds the lock
        finally:
            del core  # frees the native locker, its storage and (last) the client
            if use is not None:
                use.end()

    def _close_keeping_hold(self) -> None:
        """Closes like ``close()`` but leaves a hold of this instance to end at its
        expiry: for marker locks that are never released (``mongoelector._claims``)."""
        if not self._closed and not self._elector_owned:
            self._close(release=False)

    def _mark_closed(self) -> None:
        self._closed = True
        self._use = None
        self._core = cast(_native.Locker, _Closed(f"MongoLocker {self.key!r}"))

    @property
    def status(self) -> LockerStatus:
        """uuid, key, ttl, timestamp, host, pid, lock_owned, lock_created, lock_expires
        (core Elector::locker_status: one round trip)."""
        status = self._core.status()
        status["ttl"] = self._ttl  # as given (the core keeps an integral ttl an int)
        return cast(LockerStatus, status)

    @property
    def fence(self) -> Optional[int]:
        """Fencing token of the current hold (an int that strictly increases from one
        hold of this key to the next, whoever holds it), or None when this instance
        holds no lease that is still running on this host's clock. Pass it with every
        write the lock protects and let the resource reject lower tokens.

        The first read in a hold whose acquire created the lock document (first use,
        ``delete_on_release``, the TTL monitor) assigns the token: two round trips, once
        per hold. Acquires themselves stay at one round trip, as in the original."""
        return self._core.fence

    @staticmethod
    def _acquireretry(
        blocking: bool, start: datetime, timeout: Optional[float], count: int
    ) -> bool:
        """The retry rule: may attempt number ``count`` (from 0) of a wait that started at
        ``start`` run now? It is the core's rule (``Locker::acquire_retry``), which the
        core's acquire loop applies."""
        if not blocking and timeout:
            raise ValueError("blocking=False is incompatible with a timeout")
        return _native.Locker.acquire_retry(
            bool(blocking),
            _epoch_ms(start),
            _epoch_ms(_utcnow()),
            None if not blocking else timeout,
            count,
        )

    def _verifytime(self) -> bool:
        now = _utcnow()
        if self._sanetime and self._sanetime > now - _SANE_FOR:
            return True
        # Server clock minus host clock from one hello round trip, corrected by half
        # the round trip (the original compared without that correction).
        offset = abs(self._core.measure_offset())
        if offset > self._maxoffset:
            raise _time_offset_error(offset)
        self._sanetime = now
        return True

    def acquire(
        self,
        blocking: bool = True,
        timeout: Optional[float] = None,
        step: float = 0.25,
        force: bool = False,
    ) -> bool:
        """Acquire the distributed lock.

        Args:
            blocking: If True, wait until the lock is available. If False, raise
                LockExists immediately.
            timeout: Maximum seconds to wait when blocking. None means wait forever
                (requires blocking=True).
            step: Seconds between retry attempts when blocking.
            force: If True, forcibly take the lock from any current holder.

        Returns:
            True if the lock was acquired (the token is then ``self.fence``).

        Raises:
            LockExists: Lock is held and blocking=False.
            AcquireTimeout: Timed out waiting for the lock.
            TimeOffsetError: timeparanoid and the host clock is off by > maxoffset.
        """
        # A fair acquire waits in the key's queue: always the core's loop.
        if not self.fair and _drop_in_hooks_patched(type(self)):
            return self._acquire_patched(blocking, timeout, step, force)
        if self.timeparanoid:
            try:
                self._verifytime()
            except (ValueError, TypeError, ClosedError):
                raise
            except BaseException:
                # What the core's acquire counts when its own time check fails.
                _native.metrics_record_acquire("error", 0.0)
                raise
        if not blocking and timeout:
            raise ValueError("blocking=False is incompatible with a timeout")
        if timeout is not None and blocking and timeout < 0:
            timeout = 0  # the original tried nothing then: "past timeout" at once
        try:
            # The core's acquire loop: it retries every `step` (GIL released, Ctrl-C ends
            # the wait), raises LockExists with the holder, and counts the outcome once in
            # the core's metrics. It returns the new hold's expiry.
            expires = self._core.acquire_expiry(
                bool(blocking), timeout if blocking else None, float(step), bool(force)
            )
        except AcquireTimeout:
            raise AcquireTimeout("Timeout reached, lock not acquired") from None
        self._ts_expire = (
            expires if expires is not None else _utcnow() + timedelta(seconds=self._ttl)
        )
        return True

    def _acquire_patched(
        self, blocking: bool, timeout: Optional[float], step: float, force: bool
    ) -> bool:
        """acquire() once a test patched the drop-in's hooks (``_acquireretry``,
        ``mongoelector.locker.sleep``, ``_utcnow``): the original's loop, calling them;
        the attempts are the core's. The outcome goes to the core's metrics, as the
        core's loop counts it."""
        with counted_acquire((KeyboardInterrupt,)):
            return self._acquire_loop(blocking, timeout, step, force)

    def _acquire_loop(
        self, blocking: bool, timeout: Optional[float], step: float, force: bool
    ) -> bool:
        if self.timeparanoid:
            self._verifytime()
        count = 0
        start = _utcnow()
        while self._acquireretry(blocking, start, timeout, count):
            count += 1
            # One atomic round trip; the GIL is released while it runs.
            if self._core.try_acquire(force) is not None:
                hold = self._core.hold
                self.ts_expire = hold[2] if hold else _utcnow() + timedelta(seconds=self._ttl)
                return True
            if not blocking:
                existing = self._core.read()
                if existing:
                    raise LockExists(
                        f"{self.key} owned by {existing.get('host')} pid {existing.get('pid', '?')}"
                    )
            # time.sleep releases the GIL and is interrupted by Ctrl-C.
            sleep(step)
        raise AcquireTimeout("Timeout reached, lock not acquired")

    def locked(self) -> bool:
        """Return True if the lock is currently held by anyone."""
        return self._core.locked()

    def owned(self) -> bool:
        """Return True if the lock is currently held by this instance."""
        return self._core.owned()

    def get_current(self) -> Optional[Dict[str, Any]]:
        """Return the current lock document, or None if no active lock."""
        return self._core.current()

    def waiting(self) -> List[QueuedWaiter]:
        """The fair waiters still queued for the lock, first in line first (one round
        trip); empty when nobody waits. Only blocking acquires of fair lockers queue."""
        return [cast(QueuedWaiter, w) for w in self._core.waiting()]

    def release(
        self, force: bool = False, *, min_hold: Optional[float] = None
    ) -> Optional[datetime]:
        """Release the lock. If force=True, release regardless of ownership.

        ``min_hold`` (seconds; scheduler semantics, ShedLock's lockAtLeastFor): let go of
        the hold but keep the lock TAKEN until at least ``min_hold`` seconds after it was
        acquired, on the server's clock (never early; late by at most a round trip and the
        clock estimate's uncertainty), so that no node runs the same job again within that
        time even if this run ended sooner. Returns the (UTC) time at which the lock frees,
        or None when it was released now (surely past ``min_hold``, or nothing was held).
        Raises ``LeaseLost`` when the write landed after the hold had ended at the server
        (it expired, or another node took the lock): the lock is NOT kept taken until
        ``min_hold``. A storage error: the write may still land; the hold stays given up,
        and the next release or acquire sends it again."""
        if min_hold is None:
            self._core.release(bool(force))
            return None
        if force:
            raise ValueError("min_hold keeps this locker's own hold: it cannot be forced")
        if isinstance(min_hold, bool) or not isinstance(min_hold, (int, float)):
            raise TypeError(f"min_hold must be a number of seconds, not {type(min_hold).__name__}")
        return self._core.release_min_hold(float(min_hold))

    def claim_window(self, window: float) -> Optional[datetime]:
        """At most once per window: claims the current window of ``window`` seconds for this
        key and returns its start (UTC), or None if the window was already claimed, by any
        node. Windows are aligned on the server's clock (an hour window starts on the hour),
        so every node agrees on them whatever its own clock says. Independent of the lock
        itself: acquire first, then claim, to also skip while a run is going on. The claim
        is a marker document ``"<key>@window:<start ms>"`` that expires exactly when the
        window ends. Also None within the server-time estimate's uncertainty of the
        window's end (a few ms on a LAN), when the window may already be over."""
        if isinstance(window, bool) or not isinstance(window, (int, float)):
            raise TypeError(f"window must be a number of seconds, not {type(window).__name__}")
        return self._core.claim_window(float(window))

    def touch(self) -> Optional[datetime]:
        """Renew the lock's TTL. Returns the new expiration time, or None if the lock is
        not owned."""
        expires = self._core.touch()
        if expires is not None:
            self._ts_expire = expires
        return expires


# The drop-in's hooks as defined here: acquire() runs the core's loop unless a test
# replaced one of them (then the original's loop runs, calling the replacements).
_ACQUIRERETRY = MongoLocker.__dict__["_acquireretry"].__func__
_UTCNOW = _utcnow


def _drop_in_hooks_patched(cls: Type[MongoLocker]) -> bool:
    return (
        sleep is not time.sleep or _utcnow is not _UTCNOW or cls._acquireretry is not _ACQUIRERETRY
    )
