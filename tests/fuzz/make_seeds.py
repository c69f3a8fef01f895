#!/usr/bin/env python3
"""Writes the hand-made seeds of tests/fuzz/corpus/fuzz_server_docs (needs pymongo's bson).

Each seed is a stream of BSON documents (lock document first, then node status
documents) followed by 16 control bytes, the layout fuzz_server_docs.cpp reads. The
documents are what a server may return: our schema, the original's (no fence), wrong
types, missing fields, huge values, dates out of range, nested documents and arrays.
run.sh adds what fuzzing finds to a working copy; these stay small and readable.

    python3 tests/fuzz/make_seeds.py
"""

import os

import bson
from bson.datetime_ms import DatetimeMS
from bson.int64 import Int64

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "fuzz_server_docs")

NOW = 1700000000000
UUID = "00000000-0000-4000-8000-000000000003"


def ms(v):
    return DatetimeMS(v)


def lock(**kw):
    d = {
        "_id": "k",
        "locked": True,
        "host": "h1",
        "uuid": "other",
        "pid": 12,
        "ts_created": ms(NOW - 1000),
        "ts_expire": ms(NOW + 10000),
        "fence": Int64(1 << 32 | 5),
    }
    d.update(kw)
    return {k: v for k, v in d.items() if v is not _DROP}


_DROP = object()


def status(**kw):
    d = {
        "_id": "node-1",
        "key": "k",
        "host": "h1",
        "process_id": 12,
        "is_leader": True,
        "timestamp": ms(NOW),
        "app_version": "1.0",
    }
    d.update(kw)
    return d


SEEDS = {
    "ours_held": [lock(uuid=UUID), status()],
    "other_held": [lock(), status(), status(_id="node-2", is_leader=False)],
    "original_schema_no_fence": [lock(fence=_DROP)],
    "released": [lock(locked=False, ts_expire=ms(NOW - 5))],
    "expired": [lock(ts_expire=ms(NOW - 1))],
    "wrong_types": [
        lock(locked="yes", pid="12", fence=2.5, ts_expire=NOW + 10000, host=7),
        status(timestamp="now", key=3),
    ],
    "missing_fields": [{"_id": "k"}, {"key": "k"}],
    "huge_values": [
        lock(
            fence=Int64(2**63 - 1),
            pid=Int64(-(2**63)),
            ts_expire=ms(2**63 - 1),
            ts_created=ms(-(2**63)),
        ),
        status(timestamp=ms(2**63 - 1)),
    ],
    "fence_float_huge": [lock(fence=1e300, pid=float("nan"), ts_expire=ms(-1))],
    "nested": [
        lock(host={"a": {"b": [1, 2, {"c": "d"}]}}, uuid=["x"], fence={"$numberLong": "5"}),
        status(extra={"deep": {"deeper": {"deepest": 1}}}, members=[1, "two", None]),
    ],
    # BADUTF8_n placeholders become invalid UTF-8 below (Python only encodes valid UTF-8).
    "bad_utf8_and_nul": [
        lock(host="BADUTF8_1", uuid="a\u0000b", BADUTF8_2=1),
        status(host="BADUTF8_3", app_version='\x01\x7f"\\'),
    ],
    "odd_bson_types": [
        lock(
            ts_expire=bson.Timestamp(1700000000, 1),
            fence=bson.Decimal128("1"),
            host=bson.ObjectId("0123456789ab0123456789ab"),
            uuid=bson.Binary(b"\x00" * 16, 4),
            pid=bson.Regex("a.*"),
        )
    ],
}


# Same length as the placeholder: lone continuation byte, overlong NUL, surrogate, > U+10FFFF.
BAD_UTF8 = {
    b"BADUTF8_1": b"\xff\xfeab\xc0\x80cd\x80",
    b"BADUTF8_2": b"\xed\xa0\x80key\xf4\x90!",
    b"BADUTF8_3": b"ok\xf8\x88\x80\x80\x80ok",
}


def control(i):
    # 16 bytes: server clock, ttl choices and the operation sequence, varied per seed.
    return bytes((i * 37 + j * 11) & 0xFF for j in range(16))


def main():
    os.makedirs(OUT, exist_ok=True)
    for i, (name, docs) in enumerate(sorted(SEEDS.items())):
        data = b"".join(bson.encode(d) for d in docs)
        for k, bad in BAD_UTF8.items():
            assert len(k) == len(bad)
            data = data.replace(k, bad)
        data += control(i)
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"{len(SEEDS)} seeds in {OUT}")


if __name__ == "__main__":
    main()
