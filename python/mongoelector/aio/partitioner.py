"""``AsyncPartitioner``: ``mongoelector.Partitioner`` for asyncio code.

The member loop, the renewals and the callbacks' order are the native core's, as for the
synchronous class. Its callbacks (``def`` or ``async def``) run on the event loop that
called ``start()``; the core's callback thread waits (without the GIL) until each has
returned, so a graceful move still releases a partition only after the old owner's
``on_revoked`` has completed, awaits included. What makes round trips (``start``,
``stop``, ``close``, ``status``) is a coroutine run on a worker thread; ``owned()``,
``token(p)``, ``assignment()`` and ``members()`` answer locally.

``db`` is what ``Partitioner`` takes (a URI, a ``mongoelector.Client``, a synchronous
pymongo ``Database``); a pymongo ``AsyncDatabase`` is refused (the member's own thread
makes the calls).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import weakref
from types import TracebackType
from typing import Any, Awaitable, Callable, Dict, List, Literal, Optional, Type, Union

from .._transport import DatabaseArg
from ..partitioner import Partitioner, PartitionStatus

__all__ = ["AsyncPartitioner"]

log = logging.getLogger("mongoelector")

AsyncAssigned = Callable[[int, int], Union[Awaitable[object], object]]
AsyncRevoked = Callable[[int], Union[Awaitable[object], object]]


class AsyncPartitioner:
    """A member of ``group`` (see ``mongoelector.Partitioner``), for asyncio."""

    def __init__(
        self,
        group: str,
        db: DatabaseArg,
        *,
        partitions: int,
        ttl: float = 15,
        poll: Optional[float] = None,
        on_assigned: Optional[AsyncAssigned] = None,
        on_revoked: Optional[AsyncRevoked] = None,
        database: Optional[str] = None,
        op_timeout: Optional[float] = None,
        collection: str = "partitioner.locks",
        members_collection: str = "partitioner.members",
    ) -> None:
        for name, fn in (("on_assigned", on_assigned), ("on_revoked", on_revoked)):
            if fn is not None and not callable(fn):
                raise TypeError("%s must be callable or None" % name)
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._on_assigned = on_assigned
        self._on_revoked = on_revoked
        ref = weakref.ref(self)

        def assigned(p: int, token: int) -> None:
            me = ref()
            if me is not None:
                me._run("on_assigned", me._on_assigned, p, token)

        def revoked(p: int) -> None:
            me = ref()
            if me is not None:
                me._run("on_revoked", me._on_revoked, p)

        self._part = Partitioner(
            group,
            db,
            partitions=partitions,
            ttl=ttl,
            poll=poll,
            on_assigned=assigned if on_assigned is not None else None,
            on_revoked=revoked if on_revoked is not None else None,
            database=database,
            op_timeout=op_timeout,
            collection=collection,
            members_collection=members_collection,
        )
        self.group = group
        self.partitions = self._part.partitions

    def _run(self, name: str, fn: Optional[Callable[..., Any]], *args: int) -> None:
        """On the core's callback thread: runs ``fn`` on the event loop and waits for it."""
        loop = self._loop
        if fn is None or loop is None or loop.is_closed():
            if fn is not None:
                log.warning("%s of partitioner %r not run: no event loop", name, self.group)
            return

        async def call() -> None:
            try:
                result = fn(*args)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("Error in %s callback (partition %d)", name, args[0])

        try:
            asyncio.run_coroutine_threadsafe(call(), loop).result()
        except RuntimeError:  # the loop closed meanwhile
            log.warning("%s of partitioner %r not run: its event loop is closed", name, self.group)
        except BaseException:  # the loop went away while it ran (cancelled)
            log.warning("%s of partitioner %r did not complete", name, self.group)

    @property
    def uuid(self) -> str:
        return self._part.uuid

    @property
    def running(self) -> bool:
        return self._part.running

    @property
    def closed(self) -> bool:
        return self._part.closed

    async def start(self) -> None:
        """Joins the group (``Partitioner.start``); callbacks run on this event loop."""
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self._part.start)

    async def stop(self) -> None:
        """Leaves the group (``Partitioner.stop``); returns once every ``on_revoked`` has
        completed on the loop and every partition was released."""
        await asyncio.to_thread(self._part.stop)

    async def close(self) -> None:
        await asyncio.to_thread(self._part.close)

    def owned(self) -> Dict[int, int]:
        return self._part.owned()

    def token(self, partition: int) -> Optional[int]:
        return self._part.token(partition)

    def assignment(self) -> Dict[int, str]:
        return self._part.assignment()

    def members(self) -> List[str]:
        return self._part.members()

    async def status(self) -> PartitionStatus:
        return await asyncio.to_thread(self._part.status)

    async def __aenter__(self) -> AsyncPartitioner:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> Literal[False]:
        await self.stop()
        return False

    def __repr__(self) -> str:
        return "Async" + repr(self._part)
