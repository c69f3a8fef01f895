"""``AsyncMongoLocker``: ``MongoLocker`` for asyncio."""

from __future__ import annotations

import functools
import logging
import os
import threading
import uuid as _uuid
from datetime import datetime
from socket import getfqdn
from types import TracebackType
from typing import Any, Callable, Dict, List, Literal, Optional, Tuple, Type, TypeVar, cast

from .. import _native
from .._transport import check_fair
from ..errors import AcquireTimeout
from ..locker import LockerStatus, QueuedWaiter, _native_maxoffset
from . import _loop_io, _pool
from ._common import AsyncDatabaseArg, NativeHandle, call, drive, prepare

__all__ = ["AsyncMongoLocker"]

log = logging.getLogger("mongoelector.aio")

# An operation in parts that has to run on a worker after all (see _loop_io).
_ON_THREAD: Any = object()

_L = TypeVar("_L", bound="AsyncMongoLocker")
_R = TypeVar("_R")


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
        fair: bool = False,
    ) -> None:
        check_fair(fair)
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
        #: Whether blocking acquires queue in arrival order (see ``MongoLocker``).
        self.fair = fair
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
            fair=self.fair,
        )
        self._host = host
        return core

    def _give_up_under(self) -> Optional[threading.Lock]:
        """``drive``'s ``give_up_under``: a fair waiter's queue entry goes when its
        acquire ends without the lock (the next in line moves up now, not a ttl later)."""
        return self._io if self.fair else None

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
        on_loop = None
        if core.loop_io:
            on_loop = functools.partial(
                _loop_io.owned,
                self._io,
                functools.partial(self._claim_on_loop, core, run, bool(force), bool(blocking)),
                functools.partial(self._abandon, run),
            )
        try:
            await drive(
                run,
                functools.partial(self._attempt_sync, run.attempt),
                functools.partial(self._abandon, run),
                on_loop,
                give_up_under=self._give_up_under(),
            )
        except AcquireTimeout:
            raise AcquireTimeout("Timeout reached, lock not acquired") from None
        hold = core.hold
        if hold is not None:
            self._ts_expire = hold[2]
        return True

    # ---------------------------------------------------------- round trips ----

    # An attempt awaited on the loop (an AsyncDatabase): the core's claim in parts. It runs
    # in a task of its own holding _io (_loop_io.owned); None: run it on a worker.
    async def _claim_on_loop(
        self, core: _native.Locker, run: _native.AcquireRun, force: bool, blocking: bool
    ) -> Optional[Tuple[str, Any]]:
        if self._closed:  # close() released under _io: nothing may take it after
            raise self._closed_error()
        claim = core.claim_begin(force)
        if claim is None:  # round trips first (a stranded hold, a stale clock sample)
            return None
        step = run.begin_attempt()
        if step is not None:  # ("try", None): the time check is a round trip
            return None if step[0] == "try" else step
        try:
            got = await self._claim_write(core, claim)
            held = ""
            if got is None and not blocking:
                held = await call(core.refusal_message)
        except BaseException as exc:
            run.fail_attempt(str(exc) or type(exc).__name__)
            raise
        if run.next()[0] == "cancelled" and got is not None:  # cancelled meanwhile
            # The hold is nobody's: the run releases it, fenced (round trips: a worker).
            _pool.pool().submit(functools.partial(self._end_attempt_sync, run, got))
            return ("cancelled", None)
        return run.end_attempt(got, held)

    def _end_attempt_sync(self, run: _native.AcquireRun, got: Tuple[int, int]) -> None:
        with self._io:  # on a worker
            run.end_attempt(got)

    async def _claim_write(
        self, core: _native.Locker, claim: _native.ClaimInParts
    ) -> Optional[Tuple[int, int]]:
        """The claim's write and what follows it: (token, fence) of the hold taken, None
        when held by another."""
        try:
            try:
                reply = await _loop_io.send(
                    functools.partial(core.claim_send, claim), self._op_timeout
                )
            except Exception as exc:
                if not _loop_io.is_duplicate(exc):
                    raise
                # The protocol's normal "held": no traceback kept (its frames would hold
                # garbage cycles whose collection stalls the loop under contention).
                exc.__traceback__ = None
                if core.claim_duplicate(claim):  # an insert met a document: read, upsert
                    await call(functools.partial(core.claim_after_insert_refused, claim))
            else:
                core.claim_reply(claim, reply)
        except BaseException:
            # Its outcome is unknown: what it may have written is released on a worker.
            core.claim_drop(claim)
            self._settle_soon(core)
            raise
        try:
            if core.claim_lands_on_thread(claim):  # a new fence epoch: two round trips
                return cast(
                    Optional[Tuple[int, int]], await call(functools.partial(core.claim_land, claim))
                )
            return core.claim_land(claim)
        except BaseException:
            self._settle_soon(core)  # what the landing gave up, if anything
            raise

    def _settle_soon(self, core: _native.Locker) -> None:
        _pool.pool().submit(functools.partial(self._settle_sync, core))

    def _settle_sync(self, core: _native.Locker) -> None:  # on a worker
        with self._io:
            core.settle_stranded()

    async def release(self, force: bool = False) -> None:
        """Releases the lock (fenced; a lock this instance does not hold is left alone
        and costs no round trip). ``force=True`` releases whoever holds it."""
        core = await self._opened()
        if not force and core.loop_io:
            if await _loop_io.owned(self._io, functools.partial(self._release_on_loop, core)):
                return
        await call(functools.partial(self._release_locked, core, bool(force)))

    async def _release_on_loop(self, core: _native.Locker) -> bool:
        """release() in parts, awaited on the loop; False: run it on a worker."""
        parts = core.release_begin()
        if parts.on_thread:
            return False
        if parts.holds:
            try:
                reply = await _loop_io.send(
                    functools.partial(core.release_send, parts), self._op_timeout
                )
            except BaseException:
                core.release_failed(parts)  # it may still land: in doubt, settled later
                raise
            core.release_reply(parts, reply)
        return True

    def _release_locked(self, core: _native.Locker, force: bool) -> None:
        with self._io:
            core.release(force)

    async def _read(self, core: _native.Locker, judge: Callable[[Any], _R]) -> _R:
        """The lock's document, read on the loop, as ``judge`` (the core's owned_by or
        current_of) sees it."""
        reply = await _loop_io.send(core.read_begin, self._op_timeout)
        if core.clock_stale:  # judging takes a clock sample: a round trip
            return await call(functools.partial(judge, reply))
        return judge(reply)

    def _reads_on_loop(self, core: _native.Locker) -> bool:
        return bool(core.loop_io) and not core.clock_stale

    async def locked(self) -> bool:
        """True if anyone holds the lock (one round trip)."""
        core = await self._opened()
        if self._reads_on_loop(core):
            return await self._read(core, core.current_of) is not None
        return await call(core.locked)

    async def owned(self) -> bool:
        """True if this instance holds the lock (one round trip)."""
        core = await self._opened()
        if self._reads_on_loop(core):
            return bool(await self._read(core, core.owned_by))
        return await call(core.owned)

    async def get_current(self) -> Optional[Dict[str, Any]]:
        """The current lock document, or None if no running lock."""
        core = await self._opened()
        if self._reads_on_loop(core):
            return await self._read(core, core.current_of)
        return await call(core.current)

    async def waiting(self) -> List[QueuedWaiter]:
        """The fair waiters still queued for the lock, first in line first (one round
        trip); empty when nobody waits. Only blocking acquires of fair lockers queue."""
        core = await self._opened()
        return [cast(QueuedWaiter, w) for w in await call(core.waiting)]

    async def touch(self) -> Optional[datetime]:
        """Renews this instance's hold; the new expiry, or None if it holds none."""
        core = await self._opened()
        expires = await self._touch_on_loop(core) if core.loop_io else _ON_THREAD
        if expires is _ON_THREAD:
            expires = await call(core.touch)
        if expires is not None:
            self._ts_expire = expires
        return cast(Optional[datetime], expires)

    async def _touch_on_loop(self, core: _native.Locker) -> Any:
        parts = core.touch_begin()
        if parts is None:  # a stale clock sample, a stranded hold to take back
            return _ON_THREAD
        try:
            reply = await _loop_io.send(functools.partial(core.touch_send, parts), self._op_timeout)
        except BaseException:
            core.touch_failed(parts)  # the hold stays as it was
            raise
        return core.touch_reply(parts, reply)

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
