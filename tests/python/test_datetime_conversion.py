"""Dates between Python and the core: BSON dates are whole milliseconds since the epoch
(UTC); a datetime read from a database becomes one (truncated towards the past, naive
ones taken as UTC, aware ones at their offset) and comes back as a UTC-aware datetime.
The conversion is computed from the datetime's fields; these cases pin it to what the
arithmetic on timedelta gives."""

from datetime import datetime, timedelta, timezone

import mongomock
import pytest
from mongoelector import MongoLocker

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
IST = timezone(timedelta(hours=5, minutes=30))
FAR = datetime(9999, 12, 31, 23, 59, 59, 999000)


def as_bson(dt):
    """What the core should make of `dt`: whole ms since the epoch, floor, as UTC."""
    aware = dt if dt.tzinfo is not None else dt.replace(tzinfo=timezone.utc)
    return EPOCH + timedelta(milliseconds=(aware - EPOCH) // timedelta(milliseconds=1))


CASES = [
    datetime(2026, 11, 27, 1, 2, 3, 456789),  # naive: UTC, as pymongo decodes
    datetime(2026, 11, 27, 1, 2, 3, 999999, tzinfo=timezone.utc),
    datetime(2026, 11, 27, 1, 2, 3, 1500, tzinfo=IST),  # another offset
    datetime(1969, 12, 31, 23, 59, 59, 999500),  # before the epoch: floor, not truncation
    datetime(1900, 2, 28, 12, 0, 0, 1),
    datetime(2000, 2, 29, 23, 59, 59, 999999),  # leap day of a century leap year
    datetime(2100, 3, 1, 0, 0, 0, 0),  # after a century non-leap February
    datetime(1, 1, 1, 0, 0, 0, 0),
    datetime(9999, 12, 31, 23, 59, 59, 999999),
]


@pytest.mark.parametrize("value", CASES, ids=lambda d: d.isoformat())
def test_dates_read_from_a_database_become_utc_milliseconds(value):
    db = mongomock.MongoClient().testdb
    db.mongolocker.insert_one(
        {
            "_id": "k",
            "locked": True,
            "uuid": "someone",
            "host": "h",
            "pid": 1,
            "fence": 1,
            "ts_created": value,
            "ts_expire": FAR,  # held: read() shows held locks only
        }
    )
    got = MongoLocker("k", db, timeparanoid=False)._core.read()
    assert got is not None
    assert got["ts_created"] == as_bson(value)
    assert got["ts_created"].tzinfo is not None
    assert got["ts_created"].utcoffset() == timedelta(0)
    assert got["ts_expire"] == FAR.replace(tzinfo=timezone.utc)


def test_dates_the_core_writes_are_utc_milliseconds():
    db = mongomock.MongoClient().testdb
    lk = MongoLocker("k", db, ttl=30, timeparanoid=False)
    lk.acquire()
    fence, created, expires = lk._core.hold
    assert created.tzinfo is not None and created.utcoffset() == timedelta(0)
    assert created.microsecond % 1000 == 0 and expires.microsecond % 1000 == 0
    assert expires - created == timedelta(seconds=30)
    stored = db.mongolocker.find_one({"_id": "k"})
    # mongomock keeps naive UTC datetimes at millisecond precision
    assert stored["ts_created"].replace(tzinfo=timezone.utc) == created
    lk.release()
