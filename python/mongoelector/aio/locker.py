"""``AsyncMongoLocker``: ``MongoLocker`` for asyncio."""

from __future__ import annotations

import functools
import logging
import os
import uuid as _uuid
from datetime import datetime
from socket import getfqdn
from types import TracebackType
from typing import Any, Dict, Literal, Optional, Type, TypeVar, cast

from .. import _native
from ..errors import AcquireTimeout
from ..locker import LockerStatus, _native_maxoffset
from ._common import AsyncDatabaseArg, NativeHandle, call, drive, prepare

__all__ = ["AsyncMongoLocker"]

log = logging.getLogger("mongoelector.aio")

_L = TypeVar("_L", bound="AsyncMongoLocker")


class AsyncMongoLocker(NativeHandle[_native.Locker]):
    """``MongoLocker`` for asyncio: the same lock, documents and semantics.

    ``db``: a URI, a ``mongoelector.Client``, a pymongo ``AsyncDatabase`` or a pymongo
    ``Database`` (see ``mongoelector.aio``). Keyword arguments as ``MongoLocker``'s.

    ``async with lock:`` acquires and releases (it does not close); ``await lock.close()``
    releases a hold and frees the native locker and, for a URI, the connections (the last
    user of a URI closes them). The native locker is made on first use, off the loop, or
    by ``await lock.open()`` (which reports a bad server or URI at once).

    Unlike ``MongoLocker.acquire()``, ``acquire()`` gets the fencing token with the lock
    (``fence`` is then a local read): an acquire that creates the lock document costs two
    more round trips, as the other bindings' acquire does. So, as theirs, its release
    keeps the document by default (``delete_on_release=False``), and a cycle is one
    ``findAndModify`` and one ``update``. Pass ``delete_on_release=True`` while nodes of
    the original package share the key: they cannot take a lock whose released document
    is still there until MongoDB's TTL monitor deletes it.
    """

    _what = "AsyncMongoLocker"
    key: str
    #: The ``db`` argument as given.
    database: AsyncDatabaseArg
    timeparanoid: bool
    #: This instance's uuid (the lock document's ``uuid`` while it holds the lock).
    uuid: str
    pid: int

    def __init__(
        self,
        key: str,
        db: AsyncDatabaseArg,
        *,
        dbcollection: str = "mongolocker",
        ttl: float = 600,
        timeparanoid: bool = True,
        maxoffset: float = 0.5,
        database: Optional[str] = None,
        delete_on_release: bool = False,
        allow_unsafe_server: bool = False,
        op_timeout: Optional[float] = None,
    ) -> None:
        target, facade, timeout = prepare(key, db, ttl, database, op_timeout)
        self.key = key
        self.database = db
        self.timeparanoid = bool(timeparanoid)
        self.uuid = str(_uuid.uuid4())
        self.pid = os.getpid()
        self._init_handle(target, facade, database, timeout)
        self._collection = dbcollection
        self._ttl_arg = ttl
        self._maxoffset = maxoffset
        self._delete_on_release = bool(delete_on_release)
        self._allow_unsafe_server = bool(allow_unsafe_server)
        self._host: Optional[str] = None
        self._ts_expire: Optional[datetime] = None

    def _new_core(self, storage: object) -> _native.Locker:
        host = getfqdn()
        core = _native.Locker(
            cast(Any, storage),
            self.key,
            self._collection,
            float(self._ttl_arg),
            self.timeparanoid,
            _native_maxoffset(self._maxoffset),
            self._delete_on_release,
            self._allow_unsafe_server,
            identity=_native.Identity(self.uuid, host, self.pid),
            lazy_token=False,
        )
        self._host = host
        return core

    def _release_sync(self, core: _native.Locker) -> None:
        core.release(False)

    # ---------------------------------------------------------------- acquire ----

    async def acquire(
        self,
        blocking: bool = True,
        timeout: Optional[float] = None,
        step: float = 0.25,
        force: bool = False,
    ) -> bool:
        """Acquires the lock, as ``MongoLocker.acquire()``: returns True (the token is
        then ``self.fence``), raises ``LockExists`` (``blocking=False`` and held),
        ``AcquireTimeout`` or ``TimeOffsetError``. Waits between attempts (``step``
        seconds) with ``asyncio.sleep``. Cancelling the awaiting task ends the wait at
        once; an attempt already in flight finishes in the background and a hold it took
        is released."""
        if not blocking and timeout:
            raise ValueError("blocking=False is incompatible with a timeout")
        if blocking and timeout is not None and timeout < 0:
            timeout = 0  # as MongoLocker: past the timeout at once
        core = await self._opened()
        run = core.start_acquire(bool(blocking), timeout if blocking else None, step, bool(force))
        try:
            await drive(
                run,
                functools.partial(self._attempt_sync, run.attempt),
                functools.partial(self._drop_claim, core),
            )
        except AcquireTimeout:
            raise AcquireTimeout("Timeout reached, lock not acquired") from None
        hold = core.hold
        if hold is not None:
            self._ts_expire = hold[2]
        return True

    # ---------------------------------------------------------- round trips ----

    async def release(self, force: bool = False) -> None:
        """Releases the lock (fenced; a lock this instance does not hold is left alone
        and costs no round trip). ``force=True`` releases whoever holds it."""
        core = await self._opened()
        await call(functools.partial(self._release_locked, core, bool(force)))

    def _release_locked(self, core: _native.Locker, force: bool) -> None:
        with self._io:
            core.release(force)

    async def locked(self) -> bool:
        """True if anyone holds the lock (one round trip)."""
        core = await self._opened()
        return await call(core.locked)

    async def owned(self) -> bool:
        """True if this instance holds the lock (one round trip)."""
        core = await self._opened()
        return await call(core.owned)

    async def get_current(self) -> Optional[Dict[str, Any]]:
        """The current lock document, or None if no running lock."""
        core = await self._opened()
        return await call(core.current)

    async def touch(self) -> Optional[datetime]:
        """Renews this instance's hold; the new expiry, or None if it holds none."""
        core = await self._opened()
        expires = await call(core.touch)
        if expires is not None:
            self._ts_expire = expires
        return expires

    async def status(self) -> LockerStatus:
        """``MongoLocker.status`` (one round trip)."""
        core = await self._opened()
        status = await call(core.status)
        status["ttl"] = self._ttl_arg
        return cast(LockerStatus, status)

    # ------------------------------------------------------------ local state ----

    @property
    def host(self) -> str:
        """This host's FQDN, as written in the lock document (known once opened)."""
        if self._host is None:
            raise RuntimeError(
                f"AsyncMongoLocker {self.key!r} is not open yet: await lock.open() first"
            )
        return self._host

    @property
    def ttl(self) -> float:
        """The ttl as given."""
        return self._ttl_arg

    @property
    def fence(self) -> Optional[int]:
        """Fencing token of the current hold, or None when this instance holds no lease
        that still runs on this host's clock (a local read)."""
        core = self._core
        return None if core is None else core.fence

    @property
    def ts_expire(self) -> Optional[datetime]:
        """Expiry of this instance's current or last hold (server time base, tz-aware
        UTC); None until acquired."""
        core = self._core
        hold = None if core is None else core.hold
        if hold is not None:
            self._ts_expire = hold[2]
        return self._ts_expire

    def __repr__(self) -> str:
        core = self._core
        remaining = None if core is None else core.lease_remaining
        owned = remaining is not None and remaining > 0
        state = ", closed=True" if self._closed else ""
        return f"AsyncMongoLocker(key={self.key!r}, uuid={self.uuid!r}, owned={owned}{state})"

    async def __aenter__(self: _L) -> _L:
        await self.acquire()
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc_val: Optional[BaseException],
        exc_tb: Optional[TracebackType],
    ) -> Literal[False]:
        await self.release()
        return False
