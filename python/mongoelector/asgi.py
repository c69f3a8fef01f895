"""ASGI lifespan helper (FastAPI, Starlette, any framework with a lifespan): a background
coroutine that runs only while this replica leads.

No dependency beyond the package (asyncio only)::

    from fastapi import FastAPI
    from mongoelector.asgi import leader_lifespan

    async def sync_forever(fence: int) -> None:
        while True:
            ...                             # one replica at a time; writes carry `fence`
            await asyncio.sleep(10)

    app = FastAPI(lifespan=leader_lifespan("mongodb://db1/app", "sync", sync_forever, ttl=15))

Every replica runs an ``AsyncMongoLeaderElector`` (``mongoelector.aio``) for ``key``.
When this replica becomes leader, ``work(fence)`` starts as a task on the event loop;
when it stops leading (its renew deadline passed, the database is unreachable, or it
shut down) the task is cancelled, and awaited before anything else runs; when it leads
again, ``work`` starts again with the new term's fencing token. The leader steps down
before another replica can take over, but cancellation is cooperative: a coroutine
that does not yield keeps running, so guard its writes with ``fence``
(``mongoelector.fenced_update_one``). If ``work`` raises, the error is logged and it is
started again after ``restart_delay`` seconds while this replica still leads; if it
returns, it is not started again in this term.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, AsyncIterator, Awaitable, Callable, Optional

from ._transport import DatabaseArg
from .aio import AsyncMongoLeaderElector

__all__ = ["LeaderWork", "run_while_leading", "leader_lifespan"]

_log = logging.getLogger("mongoelector.asgi")

Work = Callable[[int], Awaitable[object]]


class LeaderWork:
    """The state of ``run_while_leading``: ``elector`` (``is_leader``, ``fence``) and
    ``task``, the running ``work`` task (None while not leading)."""

    def __init__(self, elector: AsyncMongoLeaderElector, work: Work, restart_delay: float) -> None:
        self.elector = elector
        self.task: Optional[asyncio.Task[None]] = None
        self._work = work
        self._restart_delay = restart_delay

    async def _run(self, fence: int) -> None:
        while True:
            try:
                await self._work(fence)
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                _log.exception(
                    "leader work of %s failed; starting it again in %g s",
                    self.elector.key,
                    self._restart_delay,
                )
            await asyncio.sleep(self._restart_delay)
            if self.elector.fence != fence:  # this term is over
                return

    def _started(self) -> None:
        fence = self.elector.fence
        if fence is None or self.task is not None:
            return  # lost again before this callback ran, or already running
        self.task = asyncio.get_running_loop().create_task(self._run(fence))

    async def _stopped(self) -> None:
        task, self.task = self.task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


@contextlib.asynccontextmanager
async def run_while_leading(
    db: DatabaseArg,
    key: str,
    work: Work,
    *,
    ttl: float = 15,
    restart_delay: float = 1.0,
    **elector_kwargs: Any,
) -> AsyncIterator[LeaderWork]:
    """``async with run_while_leading(db, key, work):`` runs ``work(fence)`` while this
    process leads ``key`` (see the module docstring); on exit the elector is closed
    (leadership released at once, ``work`` cancelled). ``elector_kwargs`` go to
    ``AsyncMongoLeaderElector``."""
    if not callable(work):
        raise TypeError(f"work must be a coroutine function taking the fence, not {work!r}")
    if isinstance(restart_delay, bool) or not isinstance(restart_delay, (int, float)):
        raise TypeError(f"restart_delay must be a number of seconds, not {restart_delay!r}")
    for name in ("on_leader", "on_leader_loss"):
        if name in elector_kwargs:
            raise TypeError(f"run_while_leading sets {name} itself: start your work in `work`")
    state: Optional[LeaderWork] = None

    def on_leader() -> None:
        assert state is not None
        state._started()

    async def on_leader_loss() -> None:
        assert state is not None
        await state._stopped()

    elector = AsyncMongoLeaderElector(
        key, db, ttl=ttl, on_leader=on_leader, on_leader_loss=on_leader_loss, **elector_kwargs
    )
    state = LeaderWork(elector, work, float(restart_delay))
    await elector.start()
    try:
        yield state
    finally:
        try:
            await elector.close()
        finally:
            await state._stopped()


def leader_lifespan(
    db: DatabaseArg,
    key: str,
    work: Work,
    **options: Any,
) -> Callable[[Any], contextlib.AbstractAsyncContextManager[None]]:
    """A lifespan function for ``FastAPI(lifespan=...)`` / ``Starlette(lifespan=...)``
    that runs ``work(fence)`` while this replica leads ``key``; ``options`` as for
    ``run_while_leading``. The ``LeaderWork`` is ``app.state.mongoelector`` when the app
    has a ``state``."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async with run_while_leading(db, key, work, **options) as state:
            app_state = getattr(app, "state", None)
            if app_state is not None:
                app_state.mongoelector = state
            yield

    return lifespan
