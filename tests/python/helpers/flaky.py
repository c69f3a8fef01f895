"""A Database lookalike around a real one (mongomock or pymongo) whose collections can
be made to fail: stands in for a network partition in the contract tests."""

import threading


class FlakyDatabase:
    def __init__(self, db):
        self._db = db
        self._lock = threading.Lock()
        self._error = None
        self._methods = None
        self.calls = 0

    def fail(self, error, methods=None):
        """Raise `error` (the same instance every time) from the given collection
        methods (all when None) until heal()."""
        with self._lock:
            self._error = error
            self._methods = set(methods) if methods else None

    def heal(self):
        with self._lock:
            self._error = None

    def _check(self, name):
        with self._lock:
            self.calls += 1
            if self._error is not None and (self._methods is None or name in self._methods):
                raise self._error

    # What the contract requires of a Database.
    def create_collection(self, name, **kw):
        return self._db.create_collection(name, **kw)

    def command(self, *args, **kw):
        self._check("command")
        return self._db.command(*args, **kw)

    def __getitem__(self, name):
        return _FlakyCollection(self, self._db[name])


class _FlakyCollection:
    def __init__(self, owner, coll):
        self._owner = owner
        self._coll = coll

    def __getattr__(self, name):
        target = getattr(self._coll, name)
        if not callable(target):
            return target

        def call(*args, **kw):
            self._owner._check(name)
            return target(*args, **kw)

        return call
