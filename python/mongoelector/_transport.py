"""Chooses how the native core talks to MongoDB for a ``db`` argument.

* A pymongo ``Database`` (or a mongomock one, or any lookalike): the core calls that
  object's collections, so the user's client settings apply (auth, TLS, replica set,
  read/write concerns, listeners), pymongo exceptions reach the caller unchanged, and
  mongomock works. Each call takes the GIL for its duration.
* A ``mongodb://`` or ``mongodb+srv://`` URI string: the core's own libmongoc client;
  the election loop then needs the GIL only for user callbacks. Every locker and elector
  of the process given the same URI and database shares one native client (one pool per
  timeout class, see ``mongoelector.Client``), as a ``MongoClient`` kept at module level
  would: a thousand lockers do not open a thousand pools.
* A ``sqlite:///absolute/path/locks.db`` URI string: the core's embedded SQLite backend,
  for processes on this host only (no server; README, "Embedded SQLite backend"). The
  ``database`` argument is ignored. Every locker and elector of the process given the
  same URI shares one native client (one SQLite connection).
* A ``mongoelector.Client``: that client, shared exactly as the caller decides.
"""

from __future__ import annotations

import inspect
import threading
import weakref
from typing import Any, Dict, Optional, Tuple, Union, cast

from pymongo.database import Database

from . import _native
from .client import Client

#: What ``db=`` of ``MongoLocker``, ``MongoLeaderElector`` and ``lease`` accepts: a
#: ``mongodb://``/``mongodb+srv://``/``sqlite:///`` URI, a ``mongoelector.Client`` or a
#: synchronous pymongo ``Database`` (mongomock's types as one). Other objects that behave
#: like a Database work at run time too; type-check them with ``typing.cast``.
DatabaseArg = Union[str, Client, Database[Any]]

_SCHEMES = ("mongodb://", "mongodb+srv://")
_SQLITE = "sqlite://"
_MEMORY = "memory://"  # in-process backend for tests (mongoelector.testing)
_BARE_CLIENT = "Must pass a pymongo Database instance, not a bare MongoClient"
_ASYNC_DATABASE = (
    "%s is an asyncio database, whose methods return coroutines: MongoLocker and "
    "MongoLeaderElector block and need a synchronous one. From asyncio code use "
    "mongoelector.aio (AsyncMongoLocker, AsyncMongoLeaderElector, lease), which takes this "
    "AsyncDatabase; or pass a pymongo Database or a mongodb:// URI (its waits release the "
    "GIL) and call them through asyncio.to_thread()"
)


def op_timeout_for(ttl: float) -> float:
    """Budget of one database call: a tenth of the lease, kept within [0.1 s, 5 s] -- the
    rule of every binding (the core's op_timeout_ms_for_ttl; C, Go and Rust use it too).

    A leader renews at ttl/3 and must be done by its renew deadline (0.9 ttl or earlier
    when clocks are uncertain). The core starts a renewal only if its worst case
    (Storage.call_bound_ms) fits in that window; for the URI transport the worst case is
    three timeouts (server selection, connect, socket), 0.3*ttl. The 5 s cap keeps a
    call to a hung server from blocking for minutes under a long ttl."""
    return float(_native.op_timeout_for_ttl(float(ttl)))


def is_uri(db: object) -> bool:
    return isinstance(db, str) and db.startswith(_SCHEMES + (_SQLITE, _MEMORY))


def is_sqlite_uri(db: object) -> bool:
    return isinstance(db, str) and db.startswith(_SQLITE)


def is_embedded_uri(db: object) -> bool:
    """sqlite:// or memory://: a core backend without a MongoDB database."""
    return isinstance(db, str) and db.startswith((_SQLITE, _MEMORY))


def is_native(db: object) -> bool:
    """Whether ``db`` is served by the core's own libmongoc client (URI or Client)."""
    return is_uri(db) or isinstance(db, Client)


# (uri, database) -> _native.MongoClient (StorageClient for sqlite), kept like a
# module-level MongoClient: lockers made and dropped one after another reuse its
# connections. It is forgotten when the last of its users that is still alive is closed
# (ClientUse.end), so close() of every locker and elector of a URI closes its connections.
_shared_clients: Dict[Tuple[str, str], _native.StorageClient] = {}
# The same keys -> the uses of that client by lockers and electors still alive.
_shared_users: Dict[Tuple[str, str], weakref.WeakSet[ClientUse]] = {}
_shared_lock = threading.Lock()


class ClientUse:
    """A locker's or elector's use of a process-shared native client (URI transport).

    Its owner holds it until ``close()``; an owner that is garbage-collected without
    ``close()`` drops it silently (the client stays cached for the next locker)."""

    __slots__ = ("_key", "__weakref__")

    def __init__(self, key: Tuple[str, str]) -> None:
        self._key = key

    def end(self) -> None:
        """Forgets this use. The last live use of a client forgets the client, whose
        connections close once no native storage refers to it any more."""
        client = None
        with _shared_lock:
            users = _shared_users.get(self._key)
            if users is None or self not in users:
                return
            users.discard(self)
            if not users:
                del _shared_users[self._key]
                client = _shared_clients.pop(self._key, None)
        del client  # outside the lock: destroying a client joins its monitor threads


def _shared_client_use(uri: str, database: str) -> Tuple[_native.StorageClient, ClientUse]:
    """The process-wide native client of ``uri`` and ``database`` (ignored for sqlite),
    and a new use of it."""
    if is_embedded_uri(uri):
        database = ""
    key = (uri, database)
    with _shared_lock:
        client = _shared_clients.get(key)
        if client is None:
            if is_embedded_uri(uri):
                client = _native.StorageClient(uri, "")
            else:
                client = _native.MongoClient(uri, database)
            _shared_clients[key] = client
        use = ClientUse(key)
        _shared_users.setdefault(key, weakref.WeakSet()).add(use)
        return client, use


def database_from_uri(uri: str) -> Optional[str]:
    """The database named in the URI's path (``mongodb://host/dbname?opts``), decoded, or
    None. Read by the core's URI parser (the one of every binding); ValueError naming the
    URI when it is malformed."""
    return cast(Optional[str], _native.parse_uri(uri)["database"])


def check_db(db: object, database: Optional[str] = None) -> None:
    """Raises like the original for objects that are not a Database (TypeError); a URI
    or a ``mongoelector.Client`` is accepted too."""
    if is_uri(db):
        return
    if isinstance(db, Client):
        if database is not None:
            raise TypeError("database= applies only when db is a MongoDB URI")
        return
    if isinstance(db, str):
        raise TypeError(
            "Must pass a pymongo Database instance or a mongodb:// URI, not %r "
            "(or sqlite:///absolute/path for the embedded backend, memory://NAME for "
            "tests)" % (db,)
        )
    # Looked up on the type: MongoClient.__getattr__ turns any name into a Database,
    # so hasattr(client, "create_collection") is true for a bare client.
    if not hasattr(type(db), "create_collection"):
        raise TypeError(_BARE_CLIENT)
    if inspect.iscoroutinefunction(getattr(type(db), "command", None)):
        # pymongo's AsyncDatabase: every later call would get a coroutine, not a reply.
        raise TypeError(_ASYNC_DATABASE % type(db).__name__)
    if database is not None:
        raise TypeError("database= applies only when db is a MongoDB URI")


def open_storage(
    db: object, *, database: Optional[str] = None, op_timeout: float
) -> Tuple[_native.Storage, Optional[ClientUse]]:
    """Returns the native storage for ``db`` (see the module docstring) and, for a URI,
    the caller's use of the process-shared client (``end()`` it at ``close()``)."""
    check_db(db, database)
    if isinstance(db, str) and is_embedded_uri(db):
        client, use = _shared_client_use(db, "")
        return client.open_storage(float(op_timeout)), use
    if isinstance(db, str):  # a mongodb:// URI (check_db refused other strings)
        name = database if database is not None else database_from_uri(db)
        if not name:
            raise ValueError(
                "the MongoDB URI names no database: use mongodb://host/dbname or database="
            )
        client, use = _shared_client_use(db, name)
        return _native.MongoStorage(cast(_native.MongoClient, client), float(op_timeout)), use
    if isinstance(db, Client):
        return _native.MongoStorage(db._native, float(op_timeout)), None
    return _native.PyMongoStorage(db, float(op_timeout), facts=_server_facts(db)), None


# What each pymongo client's server is (buildInfo, which command gives its clock), learnt
# once per client rather than once per locker: a new locker's first acquire then costs
# no more commands than the original's. By identity: pymongo clients of one address
# compare equal, and an entry keyed by equality would be dropped when an earlier, equal
# client is collected.
_facts_by_client: Dict[int, Tuple[weakref.ref[Any], _native.ServerFacts]] = {}


def _server_facts(db: object) -> Optional[_native.ServerFacts]:
    client = getattr(db, "client", None)
    if client is None:
        return None
    key = id(client)
    entry = _facts_by_client.get(key)
    if entry is not None and entry[0]() is client:
        return entry[1]

    def forget(ref: weakref.ref[Any]) -> None:  # the client was collected
        _forget_facts(key, ref)

    try:
        ref = weakref.ref(client, forget)
    except TypeError:  # a client that cannot be weakly referenced
        return None
    facts = _native.ServerFacts()
    _facts_by_client[key] = (ref, facts)
    return facts


def _forget_facts(key: int, ref: weakref.ref[Any]) -> None:
    entry = _facts_by_client.get(key)
    if entry is not None and entry[0] is ref:  # not a newer client's at the same address
        del _facts_by_client[key]


def check_fair(fair: object) -> bool:
    """``fair`` is a bool, never a truthy stand-in (a string "no" would turn it on): the
    same check for every fair hold (locks, semaphores, read-write locks)."""
    if not isinstance(fair, bool):
        raise TypeError(f"fair must be a bool, not {type(fair).__name__}")
    return fair
