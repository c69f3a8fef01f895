#!/usr/bin/env python3
"""Probe what the test servers support of the MongoDB behaviour mongoelector relies on.

    python3 tests/servers/probe_servers.py [java|ferretdb ...]

Starts each server with testserver.sh, prints one line per check, stops it.
Not a test (it asserts nothing): a quick way to see server quirks after a
version bump. Needs pymongo.
"""

from __future__ import annotations

import datetime
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import testserver  # noqa: E402
from bson import json_util  # noqa: E402
from pymongo import MongoClient, ReturnDocument  # noqa: E402
from pymongo.errors import DuplicateKeyError  # noqa: E402


def check(name, fn):
    try:
        out = json_util.dumps(fn(), default=str)
    except Exception as e:  # noqa: BLE001 - we report whatever comes back
        out = (
            f"{type(e).__name__} code={getattr(e, 'code', None)} {getattr(e, 'details', None) or e}"
        )
    print(f"  {name}: {out[:500]}", flush=True)


def race(col, key, now, later, existing, n=16):
    """n clients try to take lock `key` at once; returns how many were told they won."""
    if existing:  # an expired lock: the update path, not the upsert path
        col.insert_one(
            {"_id": key, "locked": True, "ts_expire": now - datetime.timedelta(seconds=10), "v": 0}
        )
    flt = {"_id": key, "$or": [{"locked": False}, {"ts_expire": {"$lte": now}}]}
    wins, dups, lock, barrier = [], [0], threading.Lock(), threading.Barrier(n)

    def worker(i):
        barrier.wait()
        try:
            col.find_one_and_update(
                flt,
                {"$set": {"locked": True, "owner": i, "ts_expire": later}, "$inc": {"v": 1}},
                upsert=True,
            )
            with lock:
                wins.append(i)
        except DuplicateKeyError:
            with lock:
                dups[0] += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"winners": len(wins), "E11000": dups[0], "final_v": col.find_one({"_id": key}).get("v")}


def probe(kind):
    with testserver.mongo_server(kind) as uri:
        print(f"== {kind} {uri}", flush=True)
        client = MongoClient(uri, serverSelectionTimeoutMS=5000, maxPoolSize=32)
        db = client.probe
        col = db.locks
        admin = client.admin

        def pick(doc, *keys):
            return {k: doc[k] for k in keys if k in doc}

        check("buildInfo", lambda: pick(admin.command("buildInfo"), "version", "ferretdbVersion"))
        check(
            "isMaster",
            lambda: pick(
                admin.command("isMaster"),
                "maxWireVersion",
                "localTime",
                "logicalSessionTimeoutMinutes",
            ),
        )
        check(
            "hello",
            lambda: pick(
                admin.command("hello"), "isWritablePrimary", "maxWireVersion", "localTime"
            ),
        )
        check(
            "serverStatus",
            lambda: pick(admin.command("serverStatus"), "process", "version", "localTime"),
        )

        now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        later = now + datetime.timedelta(seconds=60)
        flt = {"_id": "k", "$or": [{"locked": False}, {"ts_expire": {"$lte": now}}]}

        def fam(query, update, new=True):
            return db.command(
                {
                    "findAndModify": "locks",
                    "query": query,
                    "update": update,
                    "upsert": True,
                    "new": new,
                }
            )

        check(
            "insert held lock",
            lambda: col.insert_one({"_id": "k", "locked": True, "ts_expire": later}).inserted_id,
        )
        check(
            "find_one_and_update upsert on held lock",
            lambda: col.find_one_and_update(
                flt, {"$set": {"owner": "B"}}, upsert=True, return_document=ReturnDocument.AFTER
            ),
        )
        check(
            "update_one upsert on held lock",
            lambda: col.update_one(flt, {"$set": {"owner": "B"}}, upsert=True).raw_result,
        )
        col.update_one({"_id": "k"}, {"$set": {"locked": False}})
        check("findAndModify on released lock", lambda: fam(flt, {"$set": {"locked": True}}))
        check(
            "findAndModify upsert, new:true",
            lambda: fam(
                {"_id": "n1", "$or": [{"locked": False}]},
                {"$set": {"locked": True}, "$inc": {"c": 1}},
            ),
        )
        check(
            "findAndModify upsert, new:false",
            lambda: fam({"_id": "n2"}, {"$set": {"locked": True}}, new=False),
        )
        check("$max", lambda: fam({"_id": "n1"}, {"$max": {"m": 5}})["value"])
        check("$currentDate", lambda: fam({"_id": "n1"}, {"$currentDate": {"t": True}})["value"])
        check(
            "createIndexes expireAfterSeconds",
            lambda: col.create_index("ts_expire", expireAfterSeconds=0),
        )
        for existing in (False, True):
            label = "expired lock" if existing else "missing lock"
            for r in range(3):
                check(
                    f"16 concurrent takeovers of a {label} #{r}",
                    lambda: race(col, f"race-{existing}-{r}", now, later, existing),
                )
        client.close()


if __name__ == "__main__":
    for k in sys.argv[1:] or testserver.KINDS:
        probe(k)
