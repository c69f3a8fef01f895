"""Fenced writes to your own data: a lock's fencing token checked by MongoDB itself.

A write through these helpers applies only if the document's stored token (the field
``_fence`` by default) is absent or <= ``fence``, and it stores ``fence`` there, in the
same single write. A former holder that paused past its lease (GC, SIGSTOP, a network
partition) and whose lock was taken over (release, expiry or force) then cannot
overwrite what the newer holder wrote: its write raises :class:`StaleFence` and nothing
is written::

    lock.acquire()
    fenced_update_one(db.invoices, {"_id": 42}, {"$set": {"status": "paid"}}, lock.fence)

They work with your own pymongo ``Collection`` (or mongomock's) and return pymongo's
own result objects. Extra keyword arguments (``session``, ``hint``, ``collation``, ...)
go to the collection's method.
"""

from __future__ import annotations

from typing import (
    Any,
    Callable,
    Dict,
    List,
    Mapping,
    MutableMapping,
    NoReturn,
    Optional,
    Protocol,
    Sequence,
    Union,
    cast,
)

from bson import ObjectId
from pymongo.collection import Collection
from pymongo.errors import DuplicateKeyError
from pymongo.results import DeleteResult, InsertOneResult, UpdateResult

from .errors import StaleFence

__all__ = [
    "fenced_update_one",
    "fenced_replace_one",
    "fenced_insert_one",
    "fenced_delete_one",
    "FencedCollection",
    "StaleFence",
]

_INT64_MAX = (1 << 63) - 1

_Update = Union[Mapping[str, Any], Sequence[Mapping[str, Any]]]


class _HasFence(Protocol):
    @property
    def fence(self) -> Optional[int]: ...


FenceSource = Union[int, _HasFence, Callable[[], Optional[int]]]


def _check_fence(fence: object) -> int:
    if fence is None:
        raise TypeError("fence is None: no fencing token (is the lock held?)")
    if isinstance(fence, bool) or not isinstance(fence, int):
        raise TypeError(f"fence must be an int, not {type(fence).__name__}")
    if not 0 < fence <= _INT64_MAX:
        raise ValueError(f"fence must be a positive int64 fencing token, got {fence}")
    return int(fence)


def _check_field(field: object) -> str:
    if not isinstance(field, str):
        raise TypeError(f"field must be a str, not {type(field).__name__}")
    if not field or field == "_id" or field.startswith("$") or "." in field:
        raise ValueError(f"field {field!r} must be a top-level field name other than _id")
    return field


def _guard(filter: Mapping[str, Any], fence: int, field: str) -> Dict[str, Any]:
    if not isinstance(filter, Mapping):
        raise TypeError(f"filter must be a mapping, not {type(filter).__name__}")
    guard = {"$or": [{field: {"$exists": False}}, {field: {"$lte": fence}}]}
    # {$and: [filter, guard]}, written as {**filter, $and: [..., guard]}: the same query,
    # but an upsert then finds the filter's _id at the top level, where FerretDB and
    # mongomock take it for the inserted document (MongoDB also looks inside $and).
    ands = filter.get("$and", [])
    if not isinstance(ands, list):
        return {"$and": [filter, guard]}
    return {**filter, "$and": [*ands, guard]}


def _touches(path: object, field: str) -> bool:
    return isinstance(path, str) and (path == field or path.startswith(field + "."))


def _touch_error(where: str, path: str, field: str) -> NoReturn:
    raise ValueError(
        f"{where} touches {path!r}, the fence field {field!r}: the fenced "
        f"helpers write it themselves"
    )


def _fenced_update(update: _Update, fence: int, field: str) -> _Update:
    """The user's update plus {$set: {field: fence}} (merged into its $set), or the
    pipeline plus a last stage {$set: {field: fence}}."""
    if isinstance(update, Mapping):
        if not update:
            raise ValueError("update must not be empty")
        out: Dict[str, Any] = {}
        for op, args in update.items():
            if not isinstance(op, str) or not op.startswith("$"):
                raise ValueError(
                    f"update key {op!r} is not a $ operator (use "
                    f"fenced_replace_one to replace a document)"
                )
            if not isinstance(args, Mapping):
                raise ValueError(f"the argument of {op} must be a document")
            for path, value in cast(Mapping[str, Any], args).items():
                if _touches(path, field):
                    _touch_error(f"update {op}", path, field)
                if op == "$rename" and _touches(value, field):
                    _touch_error("update $rename", value, field)
            out[op] = args
        out["$set"] = {**out.get("$set", {}), field: fence}
        return out
    if isinstance(update, (str, bytes)) or not isinstance(update, Sequence):
        raise TypeError(
            f"update must be a mapping or a pipeline (list of stages), not {type(update).__name__}"
        )
    if not update:
        raise ValueError("update pipeline must not be empty")
    stages: List[Mapping[str, Any]] = []
    for i, stage in enumerate(update):
        if not isinstance(stage, Mapping) or len(stage) != 1:
            raise ValueError(f"pipeline stage {i} must be a document with one key")
        ((op, arg),) = stage.items()
        if op in ("$set", "$addFields", "$project") and isinstance(arg, Mapping):
            paths = list(cast(Mapping[str, Any], arg))
        elif op == "$unset":
            seq = isinstance(arg, (list, tuple))
            paths = [arg] if isinstance(arg, str) else list(cast(Any, arg)) if seq else []
        else:
            paths = []
        for path in paths:
            if _touches(path, field):
                _touch_error(f"pipeline stage {i} ({op})", path, field)
        stages.append(stage)
    stages.append({"$set": {field: fence}})
    return stages


def _fenced_document(
    document: Mapping[str, Any], fence: int, field: str, what: str
) -> Dict[str, Any]:
    if not isinstance(document, Mapping):
        raise TypeError(f"{what} must be a mapping, not {type(document).__name__}")
    for key in document:
        if isinstance(key, str) and key.startswith("$"):
            raise ValueError(f"{what} key {key!r} is an operator")
    if field in document:
        _touch_error(what, field, field)
    return {**document, field: fence}


def _check_upsert_filter(filter: Mapping[str, Any]) -> None:
    if not isinstance(filter, Mapping) or "_id" not in filter:
        raise ValueError(
            "a fenced upsert needs _id in the filter: when the stored token is "
            "newer the guarded filter matches nothing, so the upsert inserts; "
            "only a unique _id turns that insert into a duplicate key error "
            "(without it two upserts can both insert, and a stale writer adds "
            "a second document)"
        )
    _id: Any = filter["_id"]
    keys: List[Any] = list(_id) if isinstance(_id, Mapping) else []
    if any(str(k).startswith("$") for k in keys):
        raise ValueError(
            "a fenced upsert needs a plain _id value in the filter, not an operator expression"
        )


def _check_acknowledged(collection: Collection[Any]) -> None:
    wc = getattr(collection, "write_concern", None)
    if wc is not None and getattr(wc, "acknowledged", True) is False:
        raise ValueError("fenced writes need an acknowledged write concern (w != 0)")


def _raise_if_stale(
    collection: Collection[Any],
    filter: Mapping[str, Any],
    fence: int,
    field: str,
    kwargs: Mapping[str, Any],
) -> None:
    """After a write that matched nothing: StaleFence if a document of `filter` carries a
    newer token than `fence`."""
    read: Dict[str, Any] = {k: kwargs[k] for k in ("session", "collation") if k in kwargs}
    doc = collection.find_one(filter, {field: 1}, **read)
    if doc is None or field not in doc:
        return
    current = doc[field]
    if isinstance(current, bool) or not isinstance(current, (int, float)):
        raise ValueError(
            f"the document holds {field}={current!r}, not a fencing token: "
            f"fenced writes never match it"
        )
    if current > fence:
        raise StaleFence(fence, int(current) if float(current).is_integer() else cast(int, current))


def _update_like(
    collection: Collection[Any],
    filter: Mapping[str, Any],
    fence: int,
    field: str,
    upsert: bool,
    kwargs: Dict[str, Any],
    write: Callable[[], UpdateResult],
) -> UpdateResult:
    _check_acknowledged(collection)
    for attempt in (1, 2):
        try:
            result = write()
        except DuplicateKeyError:
            if not upsert:
                raise
            # The _id exists but the guard refused it: a newer token, or a document
            # inserted concurrently by an older writer (then retry once).
            _raise_if_stale(collection, {"_id": filter["_id"]}, fence, field, kwargs)
            if attempt == 2:
                raise
            continue
        if result.matched_count == 0 and result.upserted_id is None:
            _raise_if_stale(collection, filter, fence, field, kwargs)
        return result
    raise AssertionError("unreachable")


def fenced_update_one(
    collection: Collection[Any],
    filter: Mapping[str, Any],
    update: _Update,
    fence: int,
    *,
    field: str = "_fence",
    upsert: bool = False,
    **kwargs: Any,
) -> UpdateResult:
    """``collection.update_one`` that applies only if the document's ``field`` is absent
    or <= ``fence``, and sets it to ``fence``. ``update`` is an operator update or a
    pipeline; it must not touch ``field``. Raises :class:`StaleFence` (nothing written) if
    the document carries a newer token; a filter that matches no document gives the
    normal result (``matched_count == 0``). ``upsert=True`` needs ``_id`` in the filter."""
    fence = _check_fence(fence)
    field = _check_field(field)
    if upsert:
        _check_upsert_filter(filter)
    guarded = _guard(filter, fence, field)
    doc = _fenced_update(update, fence, field)
    return _update_like(
        collection,
        filter,
        fence,
        field,
        upsert,
        kwargs,
        lambda: collection.update_one(guarded, doc, upsert=upsert, **kwargs),
    )


def fenced_replace_one(
    collection: Collection[Any],
    filter: Mapping[str, Any],
    replacement: Mapping[str, Any],
    fence: int,
    *,
    field: str = "_fence",
    upsert: bool = False,
    **kwargs: Any,
) -> UpdateResult:
    """``collection.replace_one`` under the same guard as :func:`fenced_update_one`; the
    stored replacement carries ``field = fence`` (``replacement`` must not hold it and is
    not modified)."""
    fence = _check_fence(fence)
    field = _check_field(field)
    if upsert:
        _check_upsert_filter(filter)
    guarded = _guard(filter, fence, field)
    doc = _fenced_document(replacement, fence, field, "replacement")
    return _update_like(
        collection,
        filter,
        fence,
        field,
        upsert,
        kwargs,
        lambda: collection.replace_one(guarded, doc, upsert=upsert, **kwargs),
    )


def fenced_insert_one(
    collection: Collection[Any],
    document: Mapping[str, Any],
    fence: int,
    *,
    field: str = "_fence",
    **kwargs: Any,
) -> InsertOneResult:
    """``collection.insert_one`` of ``document`` with ``field = fence`` (``document`` must
    not hold it; as pymongo does, an ``_id`` is added to it when missing). If the ``_id``
    exists already: :class:`StaleFence` when that document carries a newer token, else
    pymongo's ``DuplicateKeyError`` (an insert never overwrites; use
    :func:`fenced_replace_one` with ``upsert=True`` to write whatever is there)."""
    fence = _check_fence(fence)
    field = _check_field(field)
    _check_acknowledged(collection)
    if isinstance(document, MutableMapping) and "_id" not in document:
        document["_id"] = ObjectId()
    doc = _fenced_document(document, fence, field, "document")
    try:
        return collection.insert_one(doc, **kwargs)
    except DuplicateKeyError:
        if "_id" in doc:
            _raise_if_stale(collection, {"_id": doc["_id"]}, fence, field, kwargs)
        raise


def fenced_delete_one(
    collection: Collection[Any],
    filter: Mapping[str, Any],
    fence: int,
    *,
    field: str = "_fence",
    **kwargs: Any,
) -> DeleteResult:
    """``collection.delete_one`` of a document whose ``field`` is absent or <= ``fence``.
    Raises :class:`StaleFence` (nothing deleted) if the document carries a newer token.
    Deleting removes the stored token too: a later stale writer's upsert or insert is
    then not refused (keep a tombstone, e.g. an update setting ``deleted``, if that
    matters)."""
    fence = _check_fence(fence)
    field = _check_field(field)
    _check_acknowledged(collection)
    result = collection.delete_one(_guard(filter, fence, field), **kwargs)
    if result.deleted_count == 0:
        _raise_if_stale(collection, filter, fence, field, kwargs)
    return result


def _has_fence(obj: object) -> bool:
    # On the type first: reading MongoLocker.fence may cost a round trip.
    return hasattr(type(obj), "fence") or "fence" in getattr(obj, "__dict__", {})


class FencedCollection:
    """A collection whose writes are fenced with the token of ``fence_source``: an int,
    an object with a ``fence`` attribute (a ``MongoLocker``, ``Lease``, elector or
    semaphore hold), or a zero-argument callable; it is read at each write, so one
    wrapper follows the holder's later holds. Reads go to ``.collection``."""

    def __init__(
        self, collection: Collection[Any], fence_source: FenceSource, field: str = "_fence"
    ) -> None:
        self.collection = collection
        self.field = _check_field(field)
        if isinstance(fence_source, int):
            _check_fence(fence_source)
        elif not (_has_fence(fence_source) or callable(fence_source)):
            raise TypeError(
                "fence_source must be an int, an object with a fence attribute "
                "or a zero-argument callable"
            )
        self._source = fence_source

    @property
    def fence(self) -> int:
        """The token the next write uses (TypeError when the source has none)."""
        src = self._source
        if isinstance(src, int):
            return _check_fence(src)
        if _has_fence(src):
            return _check_fence(cast(_HasFence, src).fence)
        return _check_fence(cast(Callable[[], Optional[int]], src)())

    def __repr__(self) -> str:
        return (
            f"<FencedCollection {getattr(self.collection, 'full_name', self.collection)!r} "
            f"field={self.field!r}>"
        )

    def update_one(
        self, filter: Mapping[str, Any], update: _Update, *, upsert: bool = False, **kwargs: Any
    ) -> UpdateResult:
        return fenced_update_one(
            self.collection, filter, update, self.fence, field=self.field, upsert=upsert, **kwargs
        )

    def replace_one(
        self,
        filter: Mapping[str, Any],
        replacement: Mapping[str, Any],
        *,
        upsert: bool = False,
        **kwargs: Any,
    ) -> UpdateResult:
        return fenced_replace_one(
            self.collection,
            filter,
            replacement,
            self.fence,
            field=self.field,
            upsert=upsert,
            **kwargs,
        )

    def insert_one(self, document: Mapping[str, Any], **kwargs: Any) -> InsertOneResult:
        return fenced_insert_one(self.collection, document, self.fence, field=self.field, **kwargs)

    def delete_one(self, filter: Mapping[str, Any], **kwargs: Any) -> DeleteResult:
        return fenced_delete_one(self.collection, filter, self.fence, field=self.field, **kwargs)
