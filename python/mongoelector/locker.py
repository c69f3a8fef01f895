"""MongoLocker: a distributed lock backed by MongoDB (drop-in for mongoelector 1.0).

The protocol runs in the native core (``mongoelector._native``): one atomic
conditional upsert per attempt, expiry compared on the server's time base (an expired
lock is taken over at once, without waiting for MongoDB's TTL monitor), and a fencing
token per hold (``MongoLocker.fence``). This module keeps the original's Python surface,
including the private helpers users' tests patch (``_verifytime``, ``_acquireretry``,
``_utcnow``, ``sleep``).
"""

import uuid
from datetime import datetime, timedelta, timezone
from os import getpid
from socket import getfqdn
from time import sleep

from . import _native, _transport
from .errors import AcquireTimeout, LockExists, TimeOffsetError, _time_offset_error

__all__ = ["MongoLocker", "LockExists", "AcquireTimeout", "TimeOffsetError"]


def _utcnow():
    """Return the current UTC time as a timezone-aware datetime."""
    return datetime.now(tz=timezone.utc)


def _identity():
    """uuid4, FQDN and pid computed as the original does (and patchable where it is)."""
    return _native.Identity(str(uuid.uuid4()), getfqdn(), getpid())


def _check_args(key, db, ttl, database=None):
    """The original's argument checks, in its order."""
    _transport.check_db(db, database)
    if not key:
        raise ValueError("Must provide a non-empty lock key")
    if not isinstance(key, str):
        raise TypeError("lock key must be a str, not %s" % type(key).__name__)
    if not isinstance(ttl, (int, float)) or ttl <= 0:
        raise ValueError("ttl must be a positive number (seconds)")


def _native_maxoffset(maxoffset):
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
    native core use its own connection.

    Keyword-only options beyond the original:
        database: database name when ``db`` is a URI without one.
        delete_on_release: True (default, as the original): release deletes the lock
            document, so original nodes sharing the collection can acquire at once.
            False marks it released instead: the next acquire then keeps counting
            fencing tokens in the document and saves two round trips; original nodes
            cannot insert until MongoDB's TTL monitor removes the released document.
        allow_unsafe_server: run on a server whose findAndModify is not atomic
            (FerretDB); mutual exclusion is then not guaranteed under contention.
        op_timeout: seconds one database call may take (default ttl/10, at least 0.05).

    Can be used as a context manager::

        with MongoLocker("my-resource", db, ttl=30) as lock:
            # lock is held
            pass
        # lock is released
    """

    def __init__(self, key, db, *, dbcollection="mongolocker", ttl=600, timeparanoid=True,
                 maxoffset=0.5, database=None, delete_on_release=True,
                 allow_unsafe_server=False, op_timeout=None):
        _check_args(key, db, ttl, database)
        if op_timeout is None:
            op_timeout = _transport.op_timeout_for(ttl)
        storage = _transport.open_storage(db, database=database, op_timeout=op_timeout)
        core = _native.Locker(
            storage, key, dbcollection, float(ttl), bool(timeparanoid), _native_maxoffset(maxoffset),
            bool(delete_on_release), bool(allow_unsafe_server), identity=_identity(),
            # acquire() returns True, not the token: a claim that creates the document
            # then costs one round trip, as the original's insert (see ``fence``).
            lazy_token=True)
        self._setup(core, key, db, dbcollection, ttl, timeparanoid, maxoffset)

    @classmethod
    def _wrap(cls, core, key, db, dbcollection, ttl, timeparanoid=True, maxoffset=0.5):
        """A MongoLocker around an existing native locker (the elector's ``mlock``)."""
        self = cls.__new__(cls)
        self._setup(core, key, db, dbcollection, ttl, timeparanoid, maxoffset)
        return self

    def _setup(self, core, key, db, dbcollection, ttl, timeparanoid, maxoffset):
        self._core = core
        self.uuid = core.uuid
        self.host = core.host
        self.pid = core.pid
        self._ts_expire = None
        self.timeparanoid = timeparanoid
        self.key = key
        self.database = db
        # The pymongo collection, as in the original (None with the URI transport).
        self.collection = None if _transport.is_native(db) else db[dbcollection]
        self.__ttl = ttl
        self._sanetime = None
        self._maxoffset = maxoffset

    @property
    def ts_expire(self):
        """Expiry of this instance's current or last hold (server time base, tz-aware
        UTC); None until acquired."""
        hold = self._core.hold
        if hold is not None:
            self._ts_expire = hold[2]
        return self._ts_expire

    @ts_expire.setter
    def ts_expire(self, value):
        self._ts_expire = value

    @property
    def _ttl(self):
        """The ttl as given (the native lock's lease is fixed at construction)."""
        return self.__ttl

    def __repr__(self):
        # No round trip (a repr must not fail when the server is down): owned is this
        # instance's own view, a hold whose lease still runs on this host's clock.
        remaining = self._core.lease_remaining
        owned = remaining is not None and remaining > 0
        return (f"MongoLocker(key={self.key!r}, uuid={self.uuid!r}, host={self.host!r}, "
                f"owned={owned})")

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.release()
        return False

    @property
    def status(self):
        """uuid, key, ttl, timestamp, host, pid, lock_owned, lock_created, lock_expires
        (core Elector::locker_status: one round trip)."""
        status = self._core.status()
        status["ttl"] = self._ttl  # as given (the core keeps an integral ttl an int)
        return status

    @property
    def fence(self):
        """Fencing token of the current hold (an int that strictly increases from one
        hold of this key to the next, whoever holds it), or None when this instance
        holds no lease that is still running on this host's clock. Pass it with every
        write the lock protects and let the resource reject lower tokens.

        The first read in a hold whose acquire created the lock document (first use,
        ``delete_on_release``, the TTL monitor) assigns the token: two round trips, once
        per hold. Acquires themselves stay at one round trip, as in the original."""
        return self._core.fence

    @staticmethod
    def _acquireretry(blocking, start, timeout, count):
        if not blocking and timeout:
            raise ValueError("blocking=False is incompatible with a timeout")
        if not blocking:
            return count == 0
        if timeout is None:
            return True
        return (_utcnow() - start) <= timedelta(seconds=timeout)

    def _verifytime(self):
        now = _utcnow()
        if self._sanetime and self._sanetime > now - timedelta(minutes=10):
            return True
        # Server clock minus host clock from one hello round trip, corrected by half
        # the round trip (the original compared without that correction).
        offset = abs(self._core.measure_offset())
        if offset > self._maxoffset:
            raise _time_offset_error(offset)
        self._sanetime = now
        return True

    def acquire(self, blocking=True, timeout=None, step=0.25, force=False):
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
                        f"{self.key} owned by {existing.get('host')} pid {existing.get('pid', '?')}")
            # time.sleep releases the GIL and is interrupted by Ctrl-C.
            sleep(step)
        raise AcquireTimeout("Timeout reached, lock not acquired")

    def locked(self):
        """Return True if the lock is currently held by anyone."""
        return self._core.locked()

    def owned(self):
        """Return True if the lock is currently held by this instance."""
        return self._core.owned()

    def get_current(self):
        """Return the current lock document, or None if no active lock."""
        return self._core.current()

    def release(self, force=False):
        """Release the lock. If force=True, release regardless of ownership."""
        self._core.release(bool(force))

    def touch(self):
        """Renew the lock's TTL. Returns the new expiration time, or None if the lock is
        not owned."""
        expires = self._core.touch()
        if expires is not None:
            self.ts_expire = expires
        return expires
