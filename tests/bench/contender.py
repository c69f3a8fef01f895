#!/usr/bin/env python3
"""One benchmark contender process for tests/bench/harness.py: the ORIGINAL
mongoelector 1.0.2 (run with its own venv's interpreter) or ours through Python (a
pymongo Database, or a mongodb:// URI for the native libmongoc transport), ours through
asyncio (a pymongo AsyncDatabase), or the FLOOR: the very commands ours sends for a lock,
issued directly with pymongo (no layer at all), so that a row can say what our layer costs
(AIO-FLOOR: the same for asyncio, with pymongo's AsyncDatabase).

The same code drives both packages: it uses only the original's API (MongoLocker,
MongoLeaderElector, LockExists, AcquireTimeout) plus, for ours, ``delete_on_release``,
``mongoelector.Client`` and ``mongoelector.lease``. contender.c is its C API twin; both
speak the line protocol below, so the harness treats them alike.

    contender.py SUBCOMMAND --impl original|original-bounded|db|uri|floor|aio-db|aio-floor --uri URI --db NAME
                 [options]

Lines on stdout (stderr is the harness's log):
    MARK <label>          then wait for one line on stdin (the harness snapshots the
                          counting proxy's command counters in between)
    EVENT <what> <t> [key]   t = CLOCK_MONOTONIC seconds (time.monotonic())
    SKIP <op> <reason>    an operation this contender does not have
    RESULT <json>         figures (one per phase)
    ERROR <message>       and exit 1
Not a test: run tests/bench/run.sh.
"""

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time

_out_lock = threading.Lock()


def say(*parts):
    with _out_lock:
        sys.stdout.write(" ".join(str(p) for p in parts) + "\n")
        sys.stdout.flush()


def mark(label):
    say("MARK", label)
    if not sys.stdin.readline():
        raise SystemExit("harness went away")


def result(obj):
    say("RESULT", json.dumps(obj, separators=(",", ":")))


def pct(sorted_v, p):
    """Nearest rank percentile of a sorted list."""
    if not sorted_v:
        return None
    rank = max(1, -(-int(round(p * len(sorted_v))) // 100))
    return sorted_v[min(len(sorted_v), rank) - 1]


def quantiles(values, n=200):
    """n+1 evenly spaced quantiles (for a CDF plot without shipping every sample)."""
    v = sorted(values)
    if not v:
        return []
    return [v[min(len(v) - 1, int(i * (len(v) - 1) / n + 0.5))] for i in range(n + 1)]


def proc_status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def cpu_seconds():
    """CPU time of the whole process (every thread), ns resolution."""
    return time.process_time()


def now_ms():
    """UTC now to the millisecond (what a BSON date keeps), as ours stamps documents."""
    import datetime as dt

    now = dt.datetime.now(dt.timezone.utc)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def claim_command(lk, ms):
    """The floors' claim (ours' conditional one): the filter and update of a
    findAndModify that takes the key when it is free or expired at `ms`, by locker `lk`
    (key, ttl, host, uuid, pid)."""
    import datetime as dt

    query = {
        "_id": lk.key,
        "$or": [{"locked": {"$ne": True}}, {"ts_expire": {"$not": {"$gt": ms}}}],
    }
    update = {
        "$set": {
            "locked": True,
            "host": lk.host,
            "uuid": lk.uuid,
            "pid": lk.pid,
            "ts_created": ms,
            "ts_expire": ms + dt.timedelta(seconds=lk.ttl),
        },
        "$inc": {"fence": 1},
    }
    return query, update


class floor:  # noqa: N801 (stands in for the mongoelector module)
    """The floor: the commands ours sends for a lock with its defaults, issued directly
    with pymongo and nothing else (same collection, filters, updates, write concern and
    maxTimeMS, one pymongo.timeout() per call as ours bounds every call). Local clock,
    no time check, no retry loop: whatever ours costs beyond this row is our layer.
    `check_floor_commands` compares the commands with ours' (run by the probe)."""

    class LockExists(Exception):
        pass

    class AcquireTimeout(Exception):
        pass

    __file__ = __file__

    class MongoLocker:
        def __init__(self, key, db, ttl=600, dbcollection="mongolocker", **_):
            import socket
            import uuid

            from pymongo import WriteConcern

            self.key, self.ttl = key, ttl
            self.c = db.get_collection(dbcollection, write_concern=WriteConcern("majority"))
            self.uuid, self.host, self.pid = str(uuid.uuid4()), socket.getfqdn(), os.getpid()
            self.fence = None
            self.absent_likely = True  # as ours: an insert first where release deletes

        def acquire(self, blocking=True, timeout=None, step=0.25, force=False):
            import pymongo
            from pymongo.errors import DuplicateKeyError

            query, update = claim_command(self, now_ms())
            if self.absent_likely:
                doc = {"_id": self.key, **update["$set"], "fence": 1}
                try:
                    with pymongo.timeout(3.0):
                        self.c.insert_one(doc)
                    self.fence = 1
                    return True
                except DuplicateKeyError:
                    self.absent_likely = False
            try:
                with pymongo.timeout(3.0):
                    doc = self.c.find_one_and_update(
                        query, update, upsert=True, return_document=pymongo.ReturnDocument.AFTER
                    )
            except DuplicateKeyError:
                raise floor.LockExists(self.key) from None
            self.fence = doc["fence"]
            return True

        def release(self):
            import pymongo

            with pymongo.timeout(3.0):
                if self.c.delete_one(
                    {"_id": self.key, "uuid": self.uuid, "fence": self.fence}
                ).deleted_count:
                    self.absent_likely = True
            self.fence = None

        def touch(self):
            import datetime as dt

            import pymongo

            ms = now_ms()
            q = {
                "_id": self.key,
                "locked": True,
                "uuid": self.uuid,
                "fence": self.fence,
                "ts_expire": {"$gt": ms},
            }
            with pymongo.timeout(3.0):
                r = self.c.update_one(
                    q, {"$max": {"ts_expire": ms + dt.timedelta(seconds=self.ttl)}}
                )
            return ms if r.matched_count else None

        def _read(self):
            import pymongo

            with pymongo.timeout(3.0):
                return self.c.find_one({"_id": self.key})

        def locked(self):
            import datetime as dt

            d = self._read()
            return bool(
                d
                and d.get("locked")
                and d["ts_expire"].replace(tzinfo=dt.timezone.utc)
                > dt.datetime.now(dt.timezone.utc)
            )

        def owned(self):
            d = self._read()
            return bool(d and d.get("uuid") == self.uuid and d.get("locked"))

    class MongoLeaderElector:
        def __init__(self, *a, **kw):
            raise SystemExit("the floor has no elector")


def command_shape(cmd):
    """A command's shape for check_floor_commands: its keys, nested, with the type of
    each value (not the value; maxTimeMS is an int whatever pymongo computes)."""
    out = {}
    for k, v in cmd.items():
        if k in ("lsid", "$db", "$clusterTime", "txnNumber"):
            continue
        if isinstance(v, dict):
            out[k] = command_shape(v)
        elif isinstance(v, list):
            out[k] = [command_shape(x) if isinstance(x, dict) else type(x).__name__ for x in v]
        else:
            out[k] = type(v).__name__ if k not in ("maxTimeMS",) else "int"
    return out


def shape_listener(seen):
    """A pymongo CommandListener appending the shape of every lock command to `seen`."""
    from pymongo import monitoring

    class Listener(monitoring.CommandListener):
        def started(self, e):
            if e.command_name in ("insert", "findAndModify", "delete", "update", "find"):
                seen.append(command_shape(e.command))

        def succeeded(self, e):
            pass

        def failed(self, e):
            pass

    return Listener()


def check_floor_commands(uri, dbname):
    """Runs one cycle of ours (pymongo Database) and one of the floor under pymongo's
    command monitoring and returns the differences in command names and in the shapes
    (keys) of their filters and updates: empty when the floor sends what ours sends."""
    import mongoelector
    import pymongo

    seen = []
    client = pymongo.MongoClient(uri, event_listeners=[shape_listener(seen)])
    try:
        sequences = []
        for make in (mongoelector.MongoLocker, floor.MongoLocker):
            lk = make("floor-check", client[dbname], ttl=30)
            for _ in range(2):
                lk.acquire()
                lk.touch()
                lk.release()
            seen.clear()
            lk.acquire()
            lk.touch()
            lk.release()
            sequences.append(list(seen))
        ours, mine = sequences
        return [] if ours == mine else [{"ours": ours, "floor": mine}]
    finally:
        client.close()


class aio_floor:  # noqa: N801 (stands in for the mongoelector module)
    """The asyncio floor: the commands ``mongoelector.aio.AsyncMongoLocker`` sends for a
    lock with its defaults (``delete_on_release=False``: a cycle is one ``findAndModify``,
    the upsert claim that returns the token, and one ``update``, the release that keeps
    the document), issued directly on a pymongo ``AsyncDatabase`` (pymongo >= 4.9) from
    the event loop: same collection, filters, updates, write concern and maxTimeMS (one
    ``pymongo.timeout(op_timeout)`` per call, as ours' facade). Local clock, no time
    check, no worker thread. A blocking acquire retries every ``step`` seconds with
    ``asyncio.sleep`` (the lag scenario contends), a refused non-blocking one reads the
    holder (``find``) before raising ``LockExists``, as ours. `check_aio_floor_commands`
    compares the commands with ours' (run by the probe)."""

    LockExists = floor.LockExists
    AcquireTimeout = floor.AcquireTimeout
    __file__ = __file__

    class AsyncMongoLocker:
        def __init__(self, key, db, ttl=600, dbcollection="mongolocker", **_):
            import socket
            import uuid

            from pymongo import WriteConcern

            self.key, self.ttl = key, ttl
            # As ours (the core's op_timeout_for_ttl): a tenth of the ttl, within [0.1, 5] s.
            self.op_timeout = min(5.0, max(0.1, ttl / 10.0))
            self.c = db.get_collection(
                dbcollection,
                write_concern=WriteConcern("majority", wtimeout=int(self.op_timeout * 1e3)),
            )
            self.uuid, self.host, self.pid = str(uuid.uuid4()), socket.getfqdn(), os.getpid()
            self.fence = None

        async def _claim(self):
            import pymongo
            from pymongo.errors import DuplicateKeyError

            query, update = claim_command(self, now_ms())
            try:
                with pymongo.timeout(self.op_timeout):
                    doc = await self.c.find_one_and_update(
                        query, update, upsert=True, return_document=pymongo.ReturnDocument.AFTER
                    )
            except DuplicateKeyError:
                return False
            self.fence = doc["fence"]
            return True

        async def acquire(self, blocking=True, timeout=None, step=0.25, force=False):
            import asyncio

            import pymongo

            end = None if timeout is None else time.monotonic() + timeout
            while not await self._claim():
                if not blocking:
                    with pymongo.timeout(self.op_timeout):
                        holder = await self.c.find_one({"_id": self.key})
                    raise aio_floor.LockExists(f"{self.key} held by {(holder or {}).get('host')}")
                if end is not None and time.monotonic() + step > end:
                    raise aio_floor.AcquireTimeout(self.key)
                await asyncio.sleep(step)
            return True

        async def release(self):
            import pymongo

            if self.fence is None:
                return
            with pymongo.timeout(self.op_timeout):
                await self.c.update_one(
                    {"_id": self.key, "uuid": self.uuid, "fence": self.fence},
                    {"$set": {"locked": False, "ts_expire": now_ms()}},
                )
            self.fence = None

        async def close(self):
            await self.release()


async def check_aio_floor_commands(uri, dbname):
    """check_floor_commands for asyncio: one cycle (acquire + release) of ours
    (``mongoelector.aio.AsyncMongoLocker`` on a pymongo ``AsyncDatabase``) and one of the
    aio floor, then a refused non-blocking acquire of each, under pymongo's command
    monitoring; returns the differences in command names and shapes (empty: the same)."""
    import pymongo
    from mongoelector import LockExists
    from mongoelector.aio import AsyncMongoLocker

    seen = []
    client = pymongo.AsyncMongoClient(uri, event_listeners=[shape_listener(seen)])
    try:
        db = client[dbname]
        diffs = []
        sequences = {"cycle": [], "refused": []}
        for name, make in (("ours", AsyncMongoLocker), ("aio-floor", aio_floor.AsyncMongoLocker)):
            key = f"aio-floor-check-{name}"
            lk, holder = make(key, db, ttl=30), make(key, db, ttl=30)
            for _ in range(2):
                await lk.acquire()
                await lk.release()
            seen.clear()
            await lk.acquire()
            await lk.release()
            sequences["cycle"].append(list(seen))
            await holder.acquire()
            for _ in range(2):  # the second refusal is recorded
                seen.clear()
                try:
                    await lk.acquire(blocking=False)
                    raise SystemExit(f"{name}: a held lock was acquired")
                except (LockExists, aio_floor.LockExists):
                    pass
            sequences["refused"].append(list(seen))
            await holder.close()
            await lk.close()
        for what, (ours, mine) in sequences.items():
            if ours != mine:
                diffs.append({"what": what, "ours": ours, "aio-floor": mine})
        return diffs
    finally:
        await client.close()


class Impl:
    """The package under test and how to hand it a database."""

    def __init__(self, args):
        self.args = args
        self.kind = args.impl
        self.asyncio = args.impl.startswith("aio-")
        if self.kind in ("floor", "aio-floor"):
            self.me = floor if self.kind == "floor" else aio_floor
            self.version = self.kind
            self.original = False
            self._clients = []
            return
        import mongoelector

        self.me = mongoelector
        self.version = getattr(mongoelector, "__version__", "?")
        self.original = args.impl in ("original", "original-bounded")
        if self.original != (self.version == "1.0.2"):
            raise SystemExit(
                f"--impl {args.impl} but imported mongoelector {self.version} "
                f"from {mongoelector.__file__}"
            )
        self._clients = []

    def db(self, uri=None, fresh=False):
        """A `db` argument: a pymongo Database (original, db) or a URI string (uri).
        fresh=True: its own connections (a new MongoClient / mongoelector.Client)."""
        uri = uri or self.args.uri
        if self.asyncio:
            from pymongo import AsyncMongoClient

            c = AsyncMongoClient(uri, serverSelectionTimeoutMS=10000)
            self._clients.append(c)
            return c[self.args.db]
        if self.kind == "uri":
            full = uri.rstrip("/") + "/" + self.args.db
            if fresh:
                return self.me.Client(full)
            return full
        import pymongo

        # original-bounded: the original as it runs when its client bounds every call
        # (pymongo's client-side timeout), the bound ours enters for each call itself.
        bound = {"timeoutMS": 3000} if self.kind == "original-bounded" else {}
        c = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000, **bound)
        self._clients.append(c)
        return c[self.args.db]

    def locker(self, key, db, ttl=600, delete_on_release=None, **kw):
        if self.kind == "floor":
            if delete_on_release is False:
                return None  # the floor sends the defaults' commands: release deletes
            return self.me.MongoLocker(key, db, ttl=ttl, **kw)
        if self.kind == "aio-floor":
            if delete_on_release is True:
                return None  # the aio floor sends the defaults' commands: release keeps
            return self.me.AsyncMongoLocker(key, db, ttl=ttl, **kw)
        if not self.original:
            if delete_on_release is not None:
                kw["delete_on_release"] = delete_on_release
            if self.args.unsafe:
                kw["allow_unsafe_server"] = True
        elif delete_on_release is False:
            return None  # the original always deletes on release
        if self.asyncio:
            from mongoelector.aio import AsyncMongoLocker

            return AsyncMongoLocker(key, db, ttl=ttl, **kw)
        return self.me.MongoLocker(key, db, ttl=ttl, **kw)

    def elector(self, key, db, ttl, report_status=True, **callbacks):
        return self.me.MongoLeaderElector(
            key, db, ttl=ttl, report_status=report_status, **callbacks
        )


# ------------------------------------------------------------------------------- ops --
def cmd_ops(args, impl):
    """Each operation n times between two MARKs (the harness counts the commands in
    between), after a warm-up; latencies go to the RESULT line."""
    me = impl.me
    n = args.n
    db = impl.db()
    other = impl.db(uri=args.other_uri)  # another node's connection: not counted
    lat = {}

    def timed(op, fn):
        mark(op + ":begin")
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        mark(op + ":end")
        lat.setdefault(op, []).append((t1 - t0) * 1e3)

    def check(ok, what):
        if not ok:
            raise SystemExit("sanity check failed: " + what)

    # Library defaults (ours through Python: delete_on_release=True, like the original).
    a = impl.locker("ops-defaults", db)
    for _ in range(3):  # warm-up: time check, connections, fence epoch
        a.acquire()
        a.release()
    for _ in range(n):
        timed("acquire_defaults", a.acquire)
        timed("touch", lambda: check(a.touch() is not None, "touch while holding"))
        timed("locked", lambda: check(a.locked(), "locked() while held"))
        timed("owned", lambda: check(a.owned(), "owned() while holding"))
        timed("release_defaults", a.release)

    for op, keep in (("present", False), ("absent", True)):
        lk = impl.locker("ops-" + op, db, delete_on_release=keep)
        if lk is None:
            say(
                "SKIP",
                "acquire_present",
                "release always deletes; a present (expired) document is never taken over",
            )
            say("SKIP", "release_keep", "release always deletes the document")
            continue
        for _ in range(3):
            lk.acquire()
            lk.release()
        for _ in range(n):
            timed("acquire_" + op, lk.acquire)
            timed("release_keep" if op == "present" else "release_delete", lk.release)

    holder = impl.locker("ops-held", other)
    holder.acquire()
    b = impl.locker("ops-held", db)

    def contended():
        try:
            b.acquire(blocking=False)
        except me.LockExists:
            return
        raise SystemExit("a held lock was acquired")

    contended()  # warm-up (time check)
    for _ in range(n):
        timed("contended", contended)
    holder.release()

    for i in range(n + 1):  # new locker + first acquire of a new key (own collection)
        fn = lambda i=i: impl.locker(f"ops-new-{i}", db, dbcollection="ops_new").acquire()
        if i == 0:
            fn()
        else:
            timed("new_key", fn)

    els = {}
    try:
        for status in (False, True):
            suffix = "_status" if status else ""
            lead = impl.elector("ops-elect" + suffix, db, 60, report_status=status)
            fol = impl.elector("ops-elect" + suffix, db, 60, report_status=status)
            lead.poll()
            fol.poll()
            check(lead.is_leader and not fol.is_leader, "first poll leads, second follows")
            els[status] = (lead, fol)
    except (Exception, SystemExit) as e:  # noqa: BLE001 (e.g. electors refuse FerretDB)
        for op in ("leader_poll", "follower_poll", "leader_poll_status", "follower_poll_status"):
            say("SKIP", op, f"electors did not run here: {e}")
        result({"phase": "ops", "latency_ms": {k: sorted(v) for k, v in lat.items()}})
        return
    for _ in range(n):
        for status in (False, True):
            suffix = "_status" if status else ""
            lead, fol = els[status]
            timed("leader_poll" + suffix, lead.poll)
            timed("follower_poll" + suffix, fol.poll)
    for lead, fol in els.values():
        check(lead.is_leader and not fol.is_leader, "leaders keep leading")
        fol.release()
        lead.release()
    result({"phase": "ops", "latency_ms": {k: sorted(v) for k, v in lat.items()}})


# ---------------------------------------------------------------------------- cycles --
def cmd_cycles(args, impl):
    """Uncontended acquire()+release() cycles, `threads` threads on their own keys,
    sharing one client or a client each, for `seconds`; per-cycle latency with 1 thread.
    asyncio contenders: `threads` tasks on one event loop instead of threads."""
    if impl.asyncio:
        import asyncio

        return asyncio.run(cycles_async(args, impl))
    threads, shared = args.threads, args.clients == "shared"
    base = impl.db(fresh=impl.kind == "uri") if shared else None
    lockers = []
    for t in range(threads):
        db = base if shared else impl.db(fresh=True)
        lockers.append(impl.locker(f"cyc-{os.getpid()}-{t}", db))
    for lk in lockers:  # warm-up: connections, time check, fence epoch
        for _ in range(args.warmup):
            lk.acquire()
            lk.release()
    go = threading.Event()
    stop = threading.Event()
    counts = [0] * threads
    lats = [[] for _ in range(threads)]

    def run(t):
        lk, n, lat = lockers[t], 0, lats[t]
        record = threads == 1
        go.wait()
        pc = time.perf_counter
        while not stop.is_set():
            t0 = pc()
            lk.acquire()
            lk.release()
            if record:
                lat.append(pc() - t0)
            n += 1
        counts[t] = n

    pool = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    cpu0 = cpu_seconds()
    t0 = time.perf_counter()
    go.set()
    time.sleep(args.seconds)
    stop.set()
    for th in pool:
        th.join()
    secs = time.perf_counter() - t0
    cpu = cpu_seconds() - cpu0
    out = {
        "phase": "cycles",
        "threads": threads,
        "clients": args.clients,
        "cycles": sum(counts),
        "seconds": secs,
        "cpu_s": cpu,
        "per_thread": counts,
    }
    if threads == 1:
        out.update(latency_figures(lats[0]))
    result(out)


def latency_figures(seconds):
    v = sorted(x * 1e3 for x in seconds)
    return {
        "p50_ms": pct(v, 50),
        "p90_ms": pct(v, 90),
        "p99_ms": pct(v, 99),
        "mean_ms": sum(v) / len(v),
        "cdf_ms": quantiles(v),
    }


async def cycles_async(args, impl):
    """cmd_cycles on one event loop: `threads` tasks, each looping acquire+release on
    its own key, sharing one AsyncMongoClient or a client each."""
    import asyncio

    tasks_n, shared = args.threads, args.clients == "shared"
    base = impl.db() if shared else None
    lockers = [
        impl.locker(f"cyc-{os.getpid()}-{t}", base if shared else impl.db()) for t in range(tasks_n)
    ]
    for lk in lockers:
        for _ in range(args.warmup):
            await lk.acquire()
            await lk.release()
    stop = False
    counts = [0] * tasks_n
    lat = []
    pc = time.perf_counter

    async def run(t):
        lk, n = lockers[t], 0
        record = tasks_n == 1
        while not stop:
            t0 = pc()
            await lk.acquire()
            await lk.release()
            if record:
                lat.append(pc() - t0)
            n += 1
        counts[t] = n

    cpu0 = cpu_seconds()
    t0 = pc()
    running = [asyncio.create_task(run(t)) for t in range(tasks_n)]
    await asyncio.sleep(args.seconds)
    stop = True
    await asyncio.gather(*running)
    secs = pc() - t0
    cpu = cpu_seconds() - cpu0
    for lk in lockers:
        await lk.close()
    out = {
        "phase": "cycles",
        "threads": tasks_n,
        "clients": args.clients,
        "cycles": sum(counts),
        "seconds": secs,
        "cpu_s": cpu,
        "per_thread": counts,
    }
    if tasks_n == 1:
        out.update(latency_figures(lat))
    result(out)


# ------------------------------------------------------------------------------ lag --
def cmd_lag(args, impl):
    """asyncio only: `threads` tasks contend for ONE key (blocking acquire with the
    default step, hold for `hold` ms, release) for `seconds`, while a probe task asks
    the loop for a 1 ms sleep over and over; the loop's lag is how late it wakes."""
    import asyncio

    if not impl.asyncio:
        raise SystemExit("lag measures an event loop: asyncio contenders only")

    async def main():
        db = impl.db()
        lockers = [impl.locker("lag", db, ttl=30) for _ in range(args.threads)]
        for lk in lockers:
            await lk.acquire()
            await lk.release()
        stop = False
        acquired = [0] * len(lockers)
        lags = []

        async def contend(i):
            lk = lockers[i]
            while not stop:
                await lk.acquire()
                try:
                    acquired[i] += 1
                    await asyncio.sleep(args.hold / 1e3)
                finally:
                    await lk.release()
                await asyncio.sleep(0)

        async def probe():
            loop = asyncio.get_running_loop()
            while not stop:
                t0 = loop.time()
                await asyncio.sleep(0.001)
                lags.append(max(0.0, loop.time() - t0 - 0.001))

        tasks = [asyncio.create_task(contend(i)) for i in range(len(lockers))]
        tasks.append(asyncio.create_task(probe()))
        t0 = time.perf_counter()
        await asyncio.sleep(args.seconds)
        stop = True
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        secs = time.perf_counter() - t0
        for lk in lockers:
            await lk.close()
        v = sorted(x * 1e3 for x in lags)
        result(
            {
                "phase": "lag",
                "tasks": len(lockers),
                "seconds": secs,
                "acquisitions": sum(acquired),
                "lag_p50_ms": pct(v, 50),
                "lag_p99_ms": pct(v, 99),
                "lag_max_ms": v[-1] if v else None,
                "probes": len(v),
            }
        )

    asyncio.run(main())


# ---------------------------------------------------------------------------- elect --
def cmd_elect(args, impl):
    """Electors on --keys (one process may host several), events on stdout; SIGTERM
    stops them gracefully (releasing leadership) and exits 0."""
    db = impl.db()
    electors = []
    for key in args.keys.split(","):

        def on_leader(key=key):
            say("EVENT", "leader", f"{time.monotonic():.6f}", key)

        def on_loss(key=key):
            say("EVENT", "loss", f"{time.monotonic():.6f}", key)

        electors.append(
            impl.elector(key, db, args.ttl, on_leader=on_leader, on_leader_loss=on_loss)
        )
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    for e, key in zip(electors, args.keys.split(",")):
        e.start()
        say("EVENT", "started", f"{time.monotonic():.6f}", key)
    while not stopping.wait(0.05):
        pass
    t = time.monotonic()
    for e in electors:
        e.stop()
    say("EVENT", "stopped", f"{time.monotonic():.6f}", f"{time.monotonic() - t:.3f}")
    os._exit(0)  # no lingering monitor threads at exit


# -------------------------------------------------------------------------- contend --
def cmd_contend(args, impl):
    """Loop blocking acquire (library default step) + release on one key for --seconds
    from the moment the harness names (GO <t> on stdin); counts the acquisitions made
    before the end."""
    db = impl.db()
    lk = impl.locker(args.key, db, ttl=args.ttl)
    lk._verifytime()  # warm the cached time check (both packages cache it 10 minutes)
    say("READY")
    go = sys.stdin.readline().split()  # GO <start-at, CLOCK_MONOTONIC seconds>
    if len(go) != 2 or go[0] != "GO":
        return
    start_at = float(go[1])
    end = start_at + args.seconds
    delay = start_at - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    n = 0
    waits = []
    while True:
        left = end - time.monotonic()
        if left <= 0:
            break
        t0 = time.monotonic()
        try:
            lk.acquire(timeout=left, step=args.step)
        except impl.me.AcquireTimeout:
            break
        t1 = time.monotonic()
        if t1 > end:
            lk.release()
            break
        n += 1
        waits.append(t1 - t0)
        lk.release()
    waits.sort()
    result(
        {
            "phase": "contend",
            "acquisitions": n,
            "wait_p50_ms": (pct(waits, 50) or 0) * 1e3,
            "wait_max_ms": (waits[-1] if waits else 0) * 1e3,
        }
    )


# ----------------------------------------------------------------------------- cost --
def spin(seconds):
    """A CPU-bound pure-Python loop: iterations per second."""
    n = 0
    pc = time.perf_counter
    end = pc() + seconds
    while pc() < end:
        for _ in range(1000):
            n += 1
    return n / seconds


def cmd_cost(args, impl):
    """Phase idle: one leading elector (ttl --ttl) idles for --idle seconds: CPU seconds
    of the process and its RSS. Phase spin (after SPIN on stdin): a CPU-bound loop in the
    main thread with and without a leading elector (ttl --spin-ttl), paired rounds."""
    db = impl.db()
    rss_base = proc_status("VmRSS")
    threads_base = proc_status("Threads")
    leading = threading.Event()
    e = impl.elector("cost-idle", db, args.ttl, on_leader=leading.set)
    e.start()
    if not leading.wait(30):
        raise SystemExit("the idle elector did not lead within 30 s")
    time.sleep(0.5)
    say("READY")
    cpu0 = cpu_seconds()
    t0 = time.monotonic()
    time.sleep(args.idle)
    cpu = cpu_seconds() - cpu0
    secs = time.monotonic() - t0
    result(
        {
            "phase": "idle",
            "cpu_s": cpu,
            "seconds": secs,
            "rss_kib": proc_status("VmRSS"),
            "rss_base_kib": rss_base,
            "threads": proc_status("Threads"),
            "threads_base": threads_base,
        }
    )
    e.stop()
    if not sys.stdin.readline().startswith("SPIN"):
        return
    spin(0.3)  # warm-up
    ratios, on_all, off_all = [], [], []
    for r in range(args.rounds):
        off = spin(args.spin)
        lead = threading.Event()
        el = impl.elector(f"cost-spin-{r}", db, args.spin_ttl, on_leader=lead.set)
        el.start()
        lead.wait(10)
        time.sleep(0.1)
        on = spin(args.spin)
        el.stop()
        ratios.append(off / on)
        on_all.append(on)
        off_all.append(off)
    ratios.sort()
    result(
        {
            "phase": "spin",
            "slowdown_median": ratios[len(ratios) // 2],
            "ratios": ratios,
            "it_per_s_off": sum(off_all) / len(off_all),
            "it_per_s_on": sum(on_all) / len(on_all),
        }
    )


# ---------------------------------------------------------------------------- scale --
# Below the native client's default pool (10 connections), so that the renewer always
# finds one while keys are being acquired.
SCALE_GROW_THREADS = 8
SCALE_GROW_ATTEMPTS = 10


class _LostStamper(logging.Handler):
    """EVENT lost T KEY for every lease the library declares lost: its structured log
    record (event "lease_lost", the key in ``extra``). No polling of thousands of leases."""

    def emit(self, record):
        if getattr(record, "event", None) == "lease_lost":
            say("EVENT", "lost", f"{time.monotonic():.6f}", getattr(record, "key", "?"))


def cmd_scale(args, impl):
    """Holds and renews N keys in this process: keep-alive leases (ours) or, for the
    original, which has none, a thread touching every lock every ttl/3. Commands on
    stdin: GROW N (acquires the missing keys on several threads at once, then prints
    HOLDING N SECONDS), STATS (prints RESULT, cumulative counters), QUIT.

    --mode (ours): batched (the library's default renewer) or per-key (the harness sets
    MONGOELECTOR_BATCH_RENEWALS=0 in this process's environment); checked against the
    environment so that a row is never mislabelled. A lost lease prints EVENT lost."""
    db = impl.db()
    ttl = args.ttl
    held = []
    failed = [0]
    renewals = [0]
    stop = threading.Event()
    lock = threading.Lock()
    use_lease = not impl.original and args.mode != "touch-thread"
    if use_lease:
        per_key_env = os.environ.get("MONGOELECTOR_BATCH_RENEWALS") == "0"
        if args.mode not in ("batched", "per-key"):
            raise SystemExit(f"unknown --mode {args.mode} (batched or per-key)")
        if per_key_env != (args.mode == "per-key"):
            raise SystemExit(
                f"--mode {args.mode} but MONGOELECTOR_BATCH_RENEWALS="
                f"{os.environ.get('MONGOELECTOR_BATCH_RENEWALS', '(unset)')}"
            )
        from mongoelector import metrics
    else:
        metrics = None

        def toucher():
            while not stop.wait(ttl / 3.0):
                with lock:
                    snapshot = list(held)
                for lk in snapshot:
                    renewals[0] += 1
                    try:
                        if lk.touch() is None:
                            failed[0] += 1
                    except Exception:  # noqa: BLE001
                        failed[0] += 1

        threading.Thread(target=toucher, daemon=True).start()
    extra = {"allow_unsafe_server": True} if args.unsafe and use_lease else {}
    if use_lease:
        logging.getLogger("mongoelector").addHandler(_LostStamper())

    def hold(i):
        key = f"scale-{i}"
        # A transient failure (e.g. a call that timed out while the server was busy) is
        # retried. Only this process uses these keys: a key found held after a failed
        # attempt was taken by that attempt (it reached the server): it is freed first.
        for attempt in range(1, SCALE_GROW_ATTEMPTS + 1):
            try:
                if use_lease:
                    le = impl.me.lease(db, key, ttl=ttl, blocking=False, **extra)
                    le.acquire()
                    return le
                lk = impl.locker(key, db, ttl=ttl)
                lk.acquire(blocking=False)
                return lk
            except impl.me.LockExists:
                if attempt == 1 or attempt == SCALE_GROW_ATTEMPTS:
                    raise
                print(
                    f"contender: {key}: held after a failed attempt: freeing it",
                    file=sys.stderr,
                    flush=True,
                )
                try:
                    (le.locker if use_lease else lk).release(force=True)
                    continue
                except Exception as e:  # noqa: BLE001
                    print(f"contender: {key}: attempt {attempt}: {e}", file=sys.stderr, flush=True)
                    time.sleep(0.5)
            except Exception as e:  # noqa: BLE001 (transient: e.g. no free pooled connection)
                if attempt == SCALE_GROW_ATTEMPTS:
                    raise
                print(f"contender: {key}: attempt {attempt}: {e}", file=sys.stderr, flush=True)
                time.sleep(0.5)

    say("READY")
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "GROW":
            target = int(cmd[1])
            t0 = time.monotonic()
            todo = range(len(held), target)
            if todo:
                from concurrent.futures import ThreadPoolExecutor

                with ThreadPoolExecutor(min(SCALE_GROW_THREADS, len(todo))) as ex:
                    got = list(ex.map(hold, todo))
                with lock:
                    held.extend(got)
            say("HOLDING", len(held), f"{time.monotonic() - t0:.3f}")
        elif cmd[0] == "STATS":
            lost = sum(1 for h in held if use_lease and h.lost.is_set())
            out = {
                "phase": "scale",
                "mode": args.mode,
                "held": len(held),
                "lost": lost,
                "touch_failed": failed[0],
                "touches": renewals[0],
                "threads": proc_status("Threads"),
                "rss_kib": proc_status("VmRSS"),
                "cpu_s": cpu_seconds(),
            }
            if metrics is not None:
                m = metrics.snapshot()
                out.update(
                    renewals=m.renewals,
                    renewal_failures=m.renewal_failures,
                    round_trips=m.round_trips,
                )
            result(out)
        elif cmd[0] == "QUIT":
            break
    stop.set()
    os._exit(0)


# ---------------------------------------------------------------------------- probe --
def cmd_probe(args, impl):
    db = impl.db()
    lk = impl.locker("probe", db, ttl=30)
    if impl.asyncio:
        import asyncio

        async def once():
            await lk.acquire(blocking=False)
            await lk.release()
            await lk.close()

        asyncio.run(once())
    else:
        lk.acquire(blocking=False)
        lk.release()
    import pymongo

    info = {
        "phase": "probe",
        "version": impl.version,
        "pymongo": pymongo.__version__,
        "python": sys.version.split()[0],
        "module": os.path.dirname(impl.me.__file__),
    }
    if impl.kind == "floor":
        diff = check_floor_commands(args.uri, args.db)
        if diff:
            raise SystemExit(f"the floor does not send ours' commands: {diff}")
        info["same_commands_as_ours"] = True
    if impl.kind == "aio-floor":
        import asyncio

        diff = asyncio.run(check_aio_floor_commands(args.uri, args.db))
        if diff:
            raise SystemExit(f"the aio floor does not send py-aio's commands: {diff}")
        info["same_commands_as_ours"] = True
    result(info)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "cmd", choices=["ops", "cycles", "lag", "elect", "contend", "cost", "scale", "probe"]
    )
    ap.add_argument(
        "--impl",
        required=True,
        choices=["original", "original-bounded", "db", "uri", "floor", "aio-db", "aio-floor"],
    )
    ap.add_argument("--hold", type=float, default=1.0, help="lag: ms each hold lasts")
    ap.add_argument("--uri", required=True)
    ap.add_argument("--other-uri")
    ap.add_argument("--db", required=True)
    ap.add_argument("--unsafe", action="store_true", help="allow_unsafe_server for lockers")
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--clients", choices=["shared", "each"], default="shared")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--keys", default="k")
    ap.add_argument("--key", default="k")
    ap.add_argument("--ttl", type=float, default=15.0)
    ap.add_argument("--step", type=float, default=0.25)
    ap.add_argument("--idle", type=float, default=60.0)
    ap.add_argument("--spin", type=float, default=1.0)
    ap.add_argument("--spin-ttl", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--mode",
        default="batched",
        help="scale: batched, per-key (ours) or touch-thread (the original)",
    )
    args = ap.parse_args()
    try:
        impl = Impl(args)
        globals()["cmd_" + args.cmd](args, impl)
    except SystemExit as e:
        if e.code not in (None, 0):
            say("ERROR", e.code)
            sys.exit(1)
        raise
    except Exception as e:  # noqa: BLE001
        import traceback

        traceback.print_exc()
        say("ERROR", f"{type(e).__name__}: {e}")
        sys.exit(1)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
