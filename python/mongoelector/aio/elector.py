"""``AsyncMongoLeaderElector``: ``MongoLeaderElector`` for asyncio."""

from __future__ import annotations

import asyncio
import collections
import functools
import inspect
import logging
from types import TracebackType
from typing import Any, Callable, Deque, Dict, Literal, Optional, Type, TypeVar, cast

from .. import _payload
from ..elector import (
    ClusterDetail,
    MongoLeaderElector,
    NodeStatus,
    _check_handover_poll,
    _check_priority,
)
from ..errors import ClosedError
from ._common import AsyncDatabaseArg, Opener, call, prepare

__all__ = ["AsyncMongoLeaderElector", "Callback"]

log = logging.getLogger("mongoelector.aio")

#: An elector callback: called with no arguments on the event loop; a coroutine function
#: (``async def``) is awaited. Its return value is ignored.
Callback = Callable[[], object]

_E = TypeVar("_E", bound="AsyncMongoLeaderElector")


class AsyncMongoLeaderElector:
    """``MongoLeaderElector`` for asyncio.

    The election loop is the core's native thread (``start()``), as for
    ``MongoLeaderElector``: it never runs on the event loop and never waits for it.
    Callbacks may be plain functions or coroutine functions; they run on the event loop
    (scheduled from the native thread), one at a time in the order they fired, each
    coroutine awaited before the next callback starts. ``stop()``, ``poll()``,
    ``release()`` and ``close()`` return once the callbacks they fired have run (a
    callback may call them; it is then not waited for). A coroutine callback that never
    returns holds up the callbacks after it and those calls: start long-lived work as a
    task of its own.

    Stop or close the elector before its event loop ends: its callbacks, and with an
    ``AsyncDatabase`` its round trips, need the loop.
    """

    key: str
    #: The ``db`` argument as given.
    db: AsyncDatabaseArg
    ttl: float

    def __init__(
        self,
        key: str,
        db: AsyncDatabaseArg,
        *,
        ttl: float = 15,
        on_leader: Optional[Callback] = None,
        on_leader_loss: Optional[Callback] = None,
        on_loop: Optional[Callback] = None,
        app_version: Optional[str] = None,
        report_status: bool = True,
        database: Optional[str] = None,
        allow_unsafe_server: bool = False,
        op_timeout: Optional[float] = None,
        delete_on_release: bool = True,
        handover_poll: Optional[float] = None,
        payload: _payload.Payload = None,
        priority: Optional[float] = None,
        priority_stability: Optional[float] = None,
    ) -> None:
        _check_handover_poll(handover_poll)
        _check_priority(priority, priority_stability)
        _payload.encode(payload)  # TypeError / ValueError here, not at the first await
        target, facade, timeout = prepare(key, db, ttl, database, op_timeout)
        self.key = key
        self.db = db
        self.ttl = ttl
        self._target = target
        self._facade = facade
        self._options: Dict[str, Any] = dict(
            ttl=ttl,
            app_version=app_version,
            report_status=report_status,
            database=database,
            allow_unsafe_server=allow_unsafe_server,
            op_timeout=timeout,
            delete_on_release=delete_on_release,
            handover_poll=handover_poll,
            payload=payload,
            priority=priority,
            priority_stability=priority_stability,
        )
        self._callbacks: Dict[str, Optional[Callback]] = {
            "on_leader": on_leader,
            "on_leader_loss": on_leader_loss,
            "on_loop": on_loop,
        }
        self._sync: Optional[MongoLeaderElector] = None
        self._opener = Opener()
        self._closed = False
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._queue: Deque[str] = collections.deque()
        self._runner: Optional[asyncio.Task[None]] = None

    # ------------------------------------------------------------ lifecycle ----

    async def open(self) -> None:
        """Makes the native elector now (off the loop). Optional: every other coroutine
        opens on first use. Idempotent; ``ClosedError`` after ``close()``."""
        await self._opened()

    async def _opened(self) -> MongoLeaderElector:
        loop = asyncio.get_running_loop()
        self._loop = loop  # callbacks go to the loop that used the elector last
        sync = self._sync
        if sync is not None:
            return sync
        if self._closed:
            raise ClosedError(f"AsyncMongoLeaderElector {self.key!r} is closed")
        if self._facade is not None:
            self._facade.bind(loop)
        await self._opener.run(self._make)
        sync = self._sync
        if sync is None:
            raise ClosedError(f"AsyncMongoLeaderElector {self.key!r} is closed")
        return sync

    async def _make(self) -> None:
        sync = await call(self._make_sync)
        if self._closed:
            await call(sync.close)
            return
        self._sync = sync

    def _make_sync(self) -> MongoLeaderElector:
        return MongoLeaderElector(
            self.key,
            cast(Any, self._target),
            on_leader=self._hook("on_leader"),
            on_leader_loss=self._hook("on_leader_loss"),
            on_loop=self._hook("on_loop"),
            **self._options,
        )

    def _hook(self, name: str) -> Optional[Callback]:
        """What the native elector calls for callback ``name`` (None: it calls nothing)."""
        if self._callbacks.get(name) is None:
            return None
        return functools.partial(self._dispatch, name)

    @property
    def closed(self) -> bool:
        """True once ``close()`` was called."""
        return self._closed

    async def close(self) -> None:
        """Stops this elector for good and frees it, as ``MongoLeaderElector.close()``
        (leadership released, ``on_leader_loss`` run if it led; for a URI the
        connections close with their last user). Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._loop = asyncio.get_running_loop()
        await self._opener.settled()
        sync = self._sync
        if sync is None:
            return
        await call(sync.close)
        await self._settle_callbacks()

    async def start(self, blocking: bool = False) -> None:
        """Starts the native election loop. ``blocking=True`` then waits until the
        elector is stopped (by a callback or another task); cancelling that wait stops
        the elector and re-raises."""
        sync = await self._opened()
        await call(functools.partial(sync.start, False))
        if blocking:
            try:
                while self.running:
                    await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                if not self._closed:
                    await self.stop()
                raise

    async def stop(self) -> None:
        """Stops the election loop and releases leadership (``on_leader_loss`` runs if it
        led); returns once the callbacks that fired have run."""
        self._loop = asyncio.get_running_loop()
        sync = self._sync
        if sync is None:
            if self._closed:
                raise ClosedError(f"AsyncMongoLeaderElector {self.key!r} is closed")
            return  # never started
        await call(sync.stop)
        await self._settle_callbacks()

    async def poll(self) -> None:
        """One poll: renew if leader, try to acquire if not (errors are logged)."""
        sync = await self._opened()
        await call(sync.poll)
        await self._settle_callbacks()

    async def release(self) -> None:
        """Releases leadership (``on_leader_loss`` runs if it led)."""
        sync = await self._opened()
        await call(sync.release)
        await self._settle_callbacks()

    async def leader_exists(self) -> bool:
        """True if any node holds an unexpired leader lock (one round trip)."""
        sync = await self._opened()
        return await call(lambda: sync.leader_exists)

    async def node_status(self) -> NodeStatus:
        """This node's status document, as reported to ``elector.leader_status``."""
        sync = await self._opened()
        return await call(lambda: sync.node_status)

    async def cluster_detail(self) -> ClusterDetail:
        """Status documents of every node of this key and the current leader."""
        sync = await self._opened()
        return await call(lambda: sync.cluster_detail)

    async def set_payload(self, payload: _payload.Payload) -> bool:
        """``MongoLeaderElector.set_payload``: replaces the payload this node publishes
        with its terms; True when written now (leading), False when kept for the next
        claim. One round trip while leading, off the loop."""
        _payload.encode(payload)
        self._options["payload"] = payload  # for an elector made after this
        sync = await self._opened()
        return await call(functools.partial(sync.set_payload, payload))

    # ------------------------------------------------------------ local state ----

    @property
    def payload(self) -> Optional[Dict[str, Any]]:
        """This node's leader payload, as last set (None: none)."""
        sync = self._sync
        if sync is None or sync.closed:
            return _payload.decode(_payload.encode(self._options["payload"]))
        return sync.payload

    @property
    def running(self) -> bool:
        """True while the election loop runs."""
        sync = self._sync
        return sync is not None and not sync.closed and sync.running

    @property
    def is_leader(self) -> bool:
        """True while this node leads and its lease safely runs (local clock)."""
        sync = self._sync
        return sync is not None and not sync.closed and sync.is_leader

    @property
    def fence(self) -> Optional[int]:
        """Fencing token of this node's current leadership term, or None."""
        sync = self._sync
        return None if sync is None or sync.closed else sync.fence

    @property
    def poll_wait(self) -> float:
        """Seconds between poll cycles (half the ttl while leading)."""
        sync = self._sync
        return float(self.ttl) if sync is None or sync.closed else sync.poll_wait

    @property
    def callback_on_leader(self) -> Optional[Callback]:
        return self._callbacks["on_leader"]

    @callback_on_leader.setter
    def callback_on_leader(self, fn: Optional[Callback]) -> None:
        self._set_callback("on_leader", fn)

    @property
    def callback_on_leader_loss(self) -> Optional[Callback]:
        return self._callbacks["on_leader_loss"]

    @callback_on_leader_loss.setter
    def callback_on_leader_loss(self, fn: Optional[Callback]) -> None:
        self._set_callback("on_leader_loss", fn)

    @property
    def callback_on_loop(self) -> Optional[Callback]:
        return self._callbacks["on_loop"]

    @callback_on_loop.setter
    def callback_on_loop(self, fn: Optional[Callback]) -> None:
        self._set_callback("on_loop", fn)

    def _set_callback(self, name: str, fn: Optional[Callback]) -> None:
        self._callbacks[name] = fn
        sync = self._sync
        if sync is not None and not sync.closed:
            setattr(sync, "callback_" + name, self._hook(name))

    def __repr__(self) -> str:
        if self._closed:
            return f"AsyncMongoLeaderElector(key={self.key!r}, closed)"
        leader = "leader" if self.is_leader else "follower"
        running = "running" if self.running else "stopped"
        return f"AsyncMongoLeaderElector(key={self.key!r}, {leader}, {running})"

    async def __aenter__(self: _E) -> _E:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc_val: Optional[BaseException],
        exc_tb: Optional[TracebackType],
    ) -> Literal[False]:
        await self.stop()
        return False

    # -------------------------------------------------------------- callbacks ----

    def _dispatch(self, name: str) -> None:
        """Called by the native elector (its thread, the deadline timer's, or a worker
        running poll/stop/release): hands the callback to the event loop, never waits."""
        loop = self._loop
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(self._enqueue, name)
        except RuntimeError:  # the loop is closed
            log.warning(
                "%s callback of elector %r not run: its event loop is closed "
                "(stop or close the elector before the loop ends)",
                name,
                self.key,
            )

    def _enqueue(self, name: str) -> None:  # on the loop
        self._queue.append(name)
        runner = self._runner
        loop = asyncio.get_running_loop()
        if runner is None or runner.done() or runner.get_loop() is not loop:
            self._runner = loop.create_task(self._drain())

    async def _drain(self) -> None:
        while self._queue:
            name = self._queue.popleft()
            fn = self._callbacks.get(name)  # looked up now: reassigning works
            if fn is None:
                continue
            try:
                result = fn()
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("Error in %s callback", name)

    async def _settle_callbacks(self) -> None:
        """Waits until the callbacks queued so far have run (not from a callback)."""
        runner = self._runner
        if (
            runner is not None
            and not runner.done()
            and runner is not asyncio.current_task()
            and runner.get_loop() is asyncio.get_running_loop()
        ):
            await asyncio.wait({runner})
