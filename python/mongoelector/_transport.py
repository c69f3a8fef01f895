"""Chooses how the native core talks to MongoDB for a ``db`` argument.

* A pymongo ``Database`` (or a mongomock one, or any lookalike): the core calls that
  object's collections, so the user's client settings apply (auth, TLS, replica set,
  read/write concerns, listeners), pymongo exceptions reach the caller unchanged, and
  mongomock works. Each call takes the GIL for its duration.
* A ``mongodb://`` or ``mongodb+srv://`` URI string: the core opens its own libmongoc
  client; the election loop then needs the GIL only for user callbacks.
"""

from urllib.parse import unquote

from . import _native

_SCHEMES = ("mongodb://", "mongodb+srv://")
_BARE_CLIENT = "Must pass a pymongo Database instance, not a bare MongoClient"


def op_timeout_for(ttl):
    """Budget of one database call: a tenth of the lease, at least 50 ms.

    A leader renews at ttl/2 and must be done by its renew deadline, ttl*0.9 (or
    earlier when clocks are uncertain): 0.4*ttl later. The core starts a renewal only if
    its worst case (Storage.call_bound_ms) fits in that window; for the URI transport
    the worst case is three timeouts (server selection, connect, socket), 0.3*ttl."""
    return max(0.05, float(ttl) / 10.0)


def is_uri(db):
    return isinstance(db, str) and db.startswith(_SCHEMES)


def database_from_uri(uri):
    """The database named in the URI's path (``mongodb://host/dbname?opts``), or None."""
    rest = uri.split("://", 1)[1].split("?", 1)[0]
    if "/" not in rest:
        return None
    name = unquote(rest.split("/", 1)[1])
    return name or None


def check_db(db, database=None):
    """Raises like the original for objects that are not a Database (TypeError)."""
    if is_uri(db):
        return
    if isinstance(db, str):
        raise TypeError(
            "Must pass a pymongo Database instance or a mongodb:// URI, not %r" % (db,))
    # Looked up on the type: MongoClient.__getattr__ turns any name into a Database,
    # so hasattr(client, "create_collection") is true for a bare client.
    if not hasattr(type(db), "create_collection"):
        raise TypeError(_BARE_CLIENT)
    if database is not None:
        raise TypeError("database= applies only when db is a MongoDB URI")


def open_storage(db, *, database=None, op_timeout):
    """Returns the native storage for ``db`` (see the module docstring)."""
    check_db(db, database)
    if is_uri(db):
        name = database if database is not None else database_from_uri(db)
        if not name:
            raise ValueError(
                "the MongoDB URI names no database: use mongodb://host/dbname or database=")
        return _native.MongoStorage(db, name, float(op_timeout))
    return _native.PyMongoStorage(db, float(op_timeout))
