"""``mongoelector.Client``: connections shared by many lockers and electors.

Lockers and electors given the same ``mongodb://`` URI (and database) in one process
already share one native client, like a ``MongoClient`` kept at module level. Make a
``Client`` yourself to control that sharing: its pool serves exactly the lockers and
electors you pass it to.

>>> client = Client("mongodb://db.example/app?maxPoolSize=4")   # doctest: +SKIP
>>> locks = [MongoLocker("tenant-%d" % i, client) for i in range(1000)]  # doctest: +SKIP

Pool size: the URI's ``maxPoolSize``, else 10 connections for commands (plus one
monitoring connection per server and per timeout class). A call that finds every
connection busy waits at most half its time budget, then raises ``StorageUnavailable``.
After ``fork()``, lockers made in the child get fresh connections; the parent's lockers
refuse to run in the child.
"""

from __future__ import annotations

from typing import Optional

from . import _native


class Client:
    """A native MongoDB client (libmongoc pools) for ``db=`` of lockers and electors."""

    __slots__ = ("_native", "_uri")

    def __init__(self, uri: str, database: Optional[str] = None) -> None:
        if not isinstance(uri, str) or not uri.startswith(("mongodb://", "mongodb+srv://")):
            raise TypeError("Client needs a mongodb:// or mongodb+srv:// URI, not %r" % (uri,))
        from ._transport import database_from_uri

        name = database if database is not None else database_from_uri(uri)
        if not name:
            raise ValueError(
                "the MongoDB URI names no database: use mongodb://host/dbname or database="
            )
        self._uri = uri
        self._native = _native.MongoClient(uri, name)

    @property
    def database(self) -> str:
        """The database whose collections the locks live in."""
        return self._native.database

    @property
    def pool_size(self) -> int:
        """Most connections open at once for commands (``maxPoolSize``, default 10)."""
        return self._native.pool_size

    def __repr__(self) -> str:
        return "Client(%r, database=%r)" % (self._uri, self.database)
