"""An in-process stand-in for a pymongo ``Database`` that answers at once: a tool for
measuring the CPU cost of a Python layer (ours, the original, the floor) without a
network or a server competing for the CPU. Not a test double for behaviour: it knows
just the filters and updates those three send.

``fake_database()`` is an instance of a ``pymongo.database.Database`` subclass (so our
storage treats it as pymongo's: ``pymongo.timeout()`` per call, write concern raised to
majority), on a ``MongoClient`` that never connects. Its collections keep documents in a
dict and evaluate equality, ``$or``, ``$ne``, ``$not``, ``$gt``/``$gte``/``$lt``/``$lte``,
``$in``, ``$exists`` filters and ``$set``, ``$inc``, ``$max``, ``$setOnInsert``,
``$unset`` updates. Dates are stored naive UTC, as pymongo decodes them by default.
"""

import datetime as _dt
from types import SimpleNamespace

import pymongo
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError
from pymongo.write_concern import WriteConcern

_UTC = _dt.timezone.utc


def _norm(v):
    """Dates as BSON stores them: naive UTC, millisecond precision."""
    if isinstance(v, _dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(_UTC).replace(tzinfo=None)
        return v.replace(microsecond=v.microsecond // 1000 * 1000)
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_norm(x) for x in v]
    return v


_MISSING = object()


def _cmp_ok(op, have, want):
    if have is _MISSING or have is None:
        return False
    try:
        if op == "$gt":
            return have > want
        if op == "$gte":
            return have >= want
        if op == "$lt":
            return have < want
        return have <= want
    except TypeError:
        return False


def _match_value(have, cond):
    if isinstance(cond, dict) and cond and next(iter(cond)).startswith("$"):
        for op, want in cond.items():
            if op == "$ne":
                if have is not _MISSING and have == want:
                    return False
            elif op == "$not":
                if _match_value(have, want):
                    return False
            elif op in ("$gt", "$gte", "$lt", "$lte"):
                if not _cmp_ok(op, have, want):
                    return False
            elif op == "$in":
                if have is _MISSING or have not in want:
                    return False
            elif op == "$exists":
                if (have is not _MISSING) != bool(want):
                    return False
            else:
                raise NotImplementedError(op)
        return True
    return have is not _MISSING and have == cond


def _get(doc, path):
    cur = doc
    for part in path.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return _MISSING
    return cur


def _matches(doc, flt):
    for k, cond in flt.items():
        if k == "$or":
            if not any(_matches(doc, f) for f in cond):
                return False
        elif k == "$and":
            if not all(_matches(doc, f) for f in cond):
                return False
        elif not _match_value(_get(doc, k), cond):
            return False
    return True


def _apply(doc, update, inserting):
    for op, fields in update.items():
        for k, v in fields.items():
            if op == "$set" or (op == "$setOnInsert" and inserting):
                doc[k] = v
            elif op == "$inc":
                doc[k] = doc.get(k, 0) + v
            elif op == "$max":
                if k not in doc or doc[k] < v:
                    doc[k] = v
            elif op == "$unset":
                doc.pop(k, None)
            elif op != "$setOnInsert":
                raise NotImplementedError(op)


def _equalities(flt):
    return {k: v for k, v in flt.items() if not k.startswith("$") and not isinstance(v, dict)}


class FakeCollection:
    def __init__(self, name, docs, write_concern=None):
        self.name = name
        self._docs = docs
        self.write_concern = write_concern or WriteConcern()

    def with_options(self, write_concern=None, **_):
        return FakeCollection(self.name, self._docs, write_concern or self.write_concern)

    def create_index(self, *a, **kw):
        return "ix"

    def drop_indexes(self):
        pass

    def _first(self, flt):
        if "_id" in flt and not isinstance(flt["_id"], dict):
            d = self._docs.get(flt["_id"])
            return d if d is not None and _matches(d, flt) else None
        for d in self._docs.values():
            if _matches(d, flt):
                return d
        return None

    def insert_one(self, doc):
        doc = _norm(doc)
        if doc["_id"] in self._docs:
            raise DuplicateKeyError("E11000 duplicate key", 11000)
        self._docs[doc["_id"]] = doc
        return SimpleNamespace(inserted_id=doc["_id"], acknowledged=True)

    def find_one(self, flt=None, projection=None, **_):
        d = self._first(_norm(flt or {}))
        return None if d is None else dict(d)

    def find(self, flt=None, projection=None, limit=0, **_):
        flt = _norm(flt or {})
        out = [dict(d) for d in self._docs.values() if _matches(d, flt)]
        return _Cursor(out[: abs(limit)] if limit else out, projection)

    def find_one_and_update(self, flt, update, upsert=False, return_document=False, **_):
        flt, update = _norm(flt), _norm(update)
        d = self._first(flt)
        if d is None:
            if not upsert:
                return None
            d = _equalities(flt)
            if d.get("_id") in self._docs:
                raise DuplicateKeyError("E11000 duplicate key", 11000)
            _apply(d, update, True)
            self._docs[d["_id"]] = d
            return dict(d) if return_document else None
        before = dict(d)
        _apply(d, update, False)
        return dict(d) if return_document else before

    def find_one_and_replace(self, flt, replacement, upsert=False, **_):
        flt = _norm(flt)
        d = self._first(flt)
        if d is None:
            return None
        before = dict(d)
        new = _norm(replacement)
        new["_id"] = d["_id"]
        self._docs[d["_id"]] = new
        return before

    def update_one(self, flt, update, upsert=False, **_):
        flt, update = _norm(flt), _norm(update)
        d = self._first(flt)
        if d is None:
            if upsert:
                d = _equalities(flt)
                _apply(d, update, True)
                self._docs[d["_id"]] = d
            return SimpleNamespace(matched_count=0, modified_count=0, upserted_id=None)
        _apply(d, update, False)
        return SimpleNamespace(matched_count=1, modified_count=1, upserted_id=None)

    def update_many(self, flt, update, **_):
        flt, update = _norm(flt), _norm(update)
        n = 0
        for d in list(self._docs.values()):
            if _matches(d, flt):
                _apply(d, update, False)
                n += 1
        return SimpleNamespace(matched_count=n, modified_count=n)

    def replace_one(self, flt, replacement, upsert=False, **_):
        flt = _norm(flt)
        d = self._first(flt)
        new = _norm(replacement)
        key = d["_id"] if d is not None else flt.get("_id", new.get("_id"))
        if d is None and not upsert:
            return SimpleNamespace(matched_count=0)
        new["_id"] = key
        self._docs[key] = new
        return SimpleNamespace(matched_count=0 if d is None else 1)

    def delete_one(self, flt, **_):
        d = self._first(_norm(flt))
        if d is None:
            return SimpleNamespace(deleted_count=0)
        del self._docs[d["_id"]]
        return SimpleNamespace(deleted_count=1)

    def delete_many(self, flt, **_):
        flt = _norm(flt)
        gone = [k for k, d in self._docs.items() if _matches(d, flt)]
        for k in gone:
            del self._docs[k]
        return SimpleNamespace(deleted_count=len(gone))


class _Cursor:
    def __init__(self, docs, projection):
        if projection:
            drop = [k for k, v in projection.items() if not v]
            docs = [{k: v for k, v in d.items() if k not in drop} for d in docs]
        self._docs = docs

    def sort(self, key, direction=None):
        keys = key if isinstance(key, list) else [(key, direction or 1)]
        for k, dirn in reversed(keys):
            self._docs.sort(key=lambda d: d.get(k) or _dt.datetime.min, reverse=dirn < 0)
        return self

    def __iter__(self):
        return iter(self._docs)


class FakeDatabase(Database):
    """A pymongo Database whose collections answer in process (see the module
    docstring)."""

    def __init__(self, client, name):
        super().__init__(client, name)
        self.__dict__["_fake_colls"] = {}

    def _fake(self, name):
        colls = self.__dict__["_fake_colls"]
        if name not in colls:
            colls[name] = FakeCollection(name, {})
        return colls[name]

    def __getitem__(self, name):
        return self._fake(name)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return self._fake(name)

    def get_collection(
        self, name, codec_options=None, read_preference=None, write_concern=None, read_concern=None
    ):
        c = self._fake(name)
        return c.with_options(write_concern=write_concern) if write_concern else c

    def command(self, command, *a, **kw):
        name = command if isinstance(command, str) else next(iter(command))
        now = _dt.datetime.now(_UTC).replace(tzinfo=None)
        now = now.replace(microsecond=now.microsecond // 1000 * 1000)
        if name == "buildInfo":
            return {"version": "7.0.0", "gitVersion": "fake", "ok": 1.0}
        if name in ("hello", "isMaster", "ismaster", "serverStatus"):
            return {"localTime": now, "ok": 1.0, "isWritablePrimary": True}
        if name == "ping":
            return {"ok": 1.0}
        raise NotImplementedError(name)


def fake_database(name="fake"):
    client = pymongo.MongoClient("mongodb://127.0.0.1:9/", connect=False)
    return FakeDatabase(client, name)
