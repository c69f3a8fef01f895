"""asyncio API: ``AsyncMongoLocker``, ``AsyncMongoLeaderElector``, ``AsyncMongoSemaphore``,
``AsyncMongoReadWriteLock``, ``AsyncPartitioner`` and ``async with lease()``.

The same objects as the synchronous package, awaited::

    from pymongo import AsyncMongoClient
    from mongoelector.aio import AsyncMongoLocker, AsyncMongoLeaderElector, lease

    db = AsyncMongoClient("mongodb://db1").app          # or "mongodb://db1/app"

    async with AsyncMongoLocker("nightly", db, ttl=30) as lock:
        ...                                              # held; released on exit

    async with lease(db, "report", ttl=30, timeout=10) as l:
        await write(batch, fence=l.fence)

    elector = AsyncMongoLeaderElector("svc", db, on_leader=start_work)   # async def or def
    await elector.start()

    async with AsyncMongoSemaphore("pool", db, limit=3, ttl=30) as sem:
        ...                                              # one of 3 slots; released on exit

``db`` is a ``mongodb://``/``mongodb+srv://``/``sqlite:///`` URI or a
``mongoelector.Client`` (the core's own transport), a pymongo ``AsyncDatabase``
(pymongo >= 4.9), or a synchronous pymongo ``Database``.

How it runs. The protocol is the native core's, as for the synchronous classes. Each core
call that makes a round trip runs on a small dedicated thread pool (never on the event
loop); all waiting between attempts is ``asyncio.sleep``, so a waiting task holds no
thread, only a round trip in flight does. With an ``AsyncDatabase`` the core drives a
synchronous facade whose calls run the ``AsyncDatabase``'s coroutines on the event loop
(``mongoelector.aio._facade``): the I/O is pymongo's own asyncio I/O. The elector's loop
is the core's native thread, as for ``MongoLeaderElector``; its callbacks (plain or
``async def``) run on the event loop.

Cancelling a task that awaits ``acquire()`` (or a lease) stops the waiting at once; a
round trip already running finishes in a worker, and if it took the lock (or a slot) after
the cancellation, that hold is released (fenced): a cancelled acquire never leaks a lock.

One module per type (``locker``, ``elector``, ``lease``, ``semaphore``, ``rwlock``), on
shared plumbing (``_common``: the workers, opening and closing native objects, and the one
asyncio acquire loop, which follows the core's retry rule).

Everything that needs the server is a coroutine; what the synchronous classes answer
locally (``fence``, ``ts_expire``, ``is_leader``, ``running``, ``poll_wait``) are
properties here too. The native objects are made on first use (or ``await open()``),
off the loop; ``close()`` is a coroutine.
"""

from ._common import AsyncDatabaseArg
from .elector import AsyncMongoLeaderElector, Callback
from .lease import AsyncLease, lease
from .locker import AsyncMongoLocker
from .partitioner import AsyncPartitioner
from .rwlock import AsyncMongoReadWriteLock, AsyncRwLockLease
from .semaphore import AsyncMongoSemaphore, AsyncSemaphoreLease

__all__ = [
    "AsyncMongoLocker",
    "AsyncPartitioner",
    "AsyncMongoLeaderElector",
    "AsyncLease",
    "lease",
    "AsyncMongoSemaphore",
    "AsyncSemaphoreLease",
    "AsyncMongoReadWriteLock",
    "AsyncRwLockLease",
    "AsyncDatabaseArg",
    "Callback",
]
