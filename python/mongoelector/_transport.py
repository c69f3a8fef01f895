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

import inspect
import threading
import weakref
from urllib.parse import unquote

from . import _native
from .client import Client

_SCHEMES = ("mongodb://", "mongodb+srv://")
_SQLITE = "sqlite://"
_BARE_CLIENT = "Must pass a pymongo Database instance, not a bare MongoClient"
_ASYNC_DATABASE = (
    "%s is an asyncio database, whose methods return coroutines: MongoLocker and "
    "MongoLeaderElector block and need a synchronous one. Pass a pymongo Database or a "
    "mongodb:// URI (its waits release the GIL), and from asyncio code call them through "
    "asyncio.to_thread()")


def op_timeout_for(ttl):
    """Budget of one database call: a tenth of the lease, at least 50 ms.

    A leader renews at ttl/2 and must be done by its renew deadline, ttl*0.9 (or
    earlier when clocks are uncertain): 0.4*ttl later. The core starts a renewal only if
    its worst case (Storage.call_bound_ms) fits in that window; for the URI transport
    the worst case is three timeouts (server selection, connect, socket), 0.3*ttl."""
    return max(0.05, float(ttl) / 10.0)


def is_uri(db):
    return isinstance(db, str) and db.startswith(_SCHEMES + (_SQLITE,))


def is_sqlite_uri(db):
    return isinstance(db, str) and db.startswith(_SQLITE)


def is_native(db):
    """Whether ``db`` is served by the core's own libmongoc client (URI or Client)."""
    return is_uri(db) or isinstance(db, Client)


# (uri, database) -> _native.MongoClient, for the life of the process (like a module-level
# MongoClient; bounded by the distinct URIs a program uses).
_shared_clients = {}
_shared_lock = threading.Lock()


def shared_client(uri, database):
    """The process-wide native client of ``uri`` and ``database`` (ignored for sqlite)."""
    if is_sqlite_uri(uri):
        database = ""
    with _shared_lock:
        client = _shared_clients.get((uri, database))
        if client is None:
            if is_sqlite_uri(uri):
                client = _native.StorageClient(uri, "")
            else:
                client = _native.MongoClient(uri, database)
            _shared_clients[(uri, database)] = client
        return client


def database_from_uri(uri):
    """The database named in the URI's path (``mongodb://host/dbname?opts``), or None."""
    rest = uri.split("://", 1)[1].split("?", 1)[0]
    if "/" not in rest:
        return None
    name = unquote(rest.split("/", 1)[1])
    return name or None


def check_db(db, database=None):
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
            "(or sqlite:///absolute/path for the embedded backend)" % (db,))
    # Looked up on the type: MongoClient.__getattr__ turns any name into a Database,
    # so hasattr(client, "create_collection") is true for a bare client.
    if not hasattr(type(db), "create_collection"):
        raise TypeError(_BARE_CLIENT)
    if inspect.iscoroutinefunction(getattr(type(db), "command", None)):
        # pymongo's AsyncDatabase: every later call would get a coroutine, not a reply.
        raise TypeError(_ASYNC_DATABASE % type(db).__name__)
    if database is not None:
        raise TypeError("database= applies only when db is a MongoDB URI")


def open_storage(db, *, database=None, op_timeout):
    """Returns the native storage for ``db`` (see the module docstring)."""
    check_db(db, database)
    if is_sqlite_uri(db):
        return shared_client(db, "").open_storage(float(op_timeout))
    if is_uri(db):
        name = database if database is not None else database_from_uri(db)
        if not name:
            raise ValueError(
                "the MongoDB URI names no database: use mongodb://host/dbname or database=")
        return _native.MongoStorage(shared_client(db, name), float(op_timeout))
    if isinstance(db, Client):
        return _native.MongoStorage(db._native, float(op_timeout))
    return _native.PyMongoStorage(db, float(op_timeout), facts=_server_facts(db))


# What each pymongo client's server is (buildInfo, which command gives its clock), learnt
# once per client rather than once per locker: a new locker's first acquire then costs
# no more commands than the original's.
_facts_by_client = weakref.WeakKeyDictionary()


def _server_facts(db):
    client = getattr(db, "client", None)
    if client is None:
        return None
    try:
        facts = _facts_by_client.get(client)
        if facts is None:
            facts = _facts_by_client.setdefault(client, _native.ServerFacts())
        return facts
    except TypeError:  # a client that cannot be weakly referenced or hashed
        return None
