#!/usr/bin/env python3
"""Round trips and latency of the ORIGINAL pure-Python mongoelector (1.0.2) per operation.

Counterpart of bench_core.cpp, same operations where the original has them, same table.
Runs against MONGOELECTOR_TEST_URI (or --uri). Installs the original and pymongo into a
venv cached at ${MONGOELECTOR_CACHE:-~/.cache/mongoelector}/orig-venv on first use and
re-executes itself there, so it never imports this repository's package.

Round trips are pymongo CommandListener "started" events on the client the measured
object uses (handshakes and heartbeats are not commands, so they are not counted).
Not a test: run tests/bench/run.sh.
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time

ORIGINAL = "mongoelector==1.0.2"
PYMONGO = "pymongo>=4.13,<5"  # the original's own requirement
CACHE = os.environ.get("MONGOELECTOR_CACHE") or os.path.expanduser("~/.cache/mongoelector")
VENV = os.path.join(CACHE, "orig-venv")
VENV_PY = os.path.join(VENV, "bin", "python")


def _venv_ready():
    probe = "import importlib.metadata as m; assert m.version('mongoelector') == '1.0.2'; import pymongo"
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return os.path.exists(VENV_PY) and subprocess.run(
        [VENV_PY, "-c", probe], env=env, cwd="/", capture_output=True).returncode == 0


def ensure_venv_and_reexec():
    """Unless already inside the cached venv, install it if needed and re-run there."""
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    if not _venv_ready():
        print(f"original_roundtrips: installing {ORIGINAL} into {VENV}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", "--clear", VENV], check=True)
        subprocess.run([VENV_PY, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        ORIGINAL, PYMONGO], check=True)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # this repo's python/ must not shadow the original
    os.execve(VENV_PY, [VENV_PY, os.path.abspath(__file__)] + sys.argv[1:], env)


class Series:
    def __init__(self, op_id, label):
        self.id, self.label, self.ms, self.round_trips = op_id, label, [], 0

    def pct(self, p):
        if not self.ms:
            return 0.0
        v = sorted(self.ms)
        rank = max(1, -(-int(p * len(v)) // 100))  # nearest rank, as bench_core
        return v[min(len(v), rank) - 1]

    def mean(self):
        return sum(self.ms) / len(self.ms) if self.ms else 0.0

    def rt_per_op(self):
        return self.round_trips / len(self.ms) if self.ms else 0.0

    def as_dict(self):
        return {"id": self.id, "label": self.label, "round_trips": self.rt_per_op(),
                "p50_ms": self.pct(50), "p90_ms": self.pct(90), "p99_ms": self.pct(99),
                "mean_ms": self.mean(), "n": len(self.ms)}


def main():
    ensure_venv_and_reexec()
    import pymongo
    from pymongo import monitoring
    import mongoelector
    from mongoelector import LockExists, MongoLeaderElector, MongoLocker

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--uri", default=os.environ.get("MONGOELECTOR_TEST_URI"))
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=2.0, help="per throughput run")
    ap.add_argument("--json", help="also write the numbers here (for combine.py)")
    args = ap.parse_args()
    if not args.uri:
        ap.error("no server: set MONGOELECTOR_TEST_URI or pass --uri")
    if args.iterations < 1 or args.warmup < 0:
        ap.error("--iterations must be >= 1 and --warmup >= 0")
    if not mongoelector.__file__.startswith(os.path.realpath(VENV)):
        sys.exit(f"original_roundtrips: imported {mongoelector.__file__}, not the original")

    class Counter(monitoring.CommandListener):
        def __init__(self):
            self.n = 0

        def started(self, event):
            self.n += 1

        def succeeded(self, event):
            pass

        def failed(self, event):
            pass

    dbname = f"bench_orig_{os.getpid()}"

    def client():
        c = Counter()
        return pymongo.MongoClient(args.uri, event_listeners=[c], serverSelectionTimeoutMS=5000), c

    cl, counter = client()
    other_cl, _ = client()  # another node: its commands are not ours
    db, other_db = cl[dbname], other_cl[dbname]
    hello = cl.admin.command("isMaster")
    print(f"original_roundtrips: mongoelector {mongoelector.__version__} from "
          f"{os.path.dirname(mongoelector.__file__)}, pymongo {pymongo.__version__}, server "
          f"maxWireVersion {hello.get('maxWireVersion')}; {args.iterations} iterations per "
          f"operation after {args.warmup} warm-up, db {dbname}", file=sys.stderr)

    def timed(series, record, fn):
        rt0 = counter.n
        t0 = time.perf_counter_ns()
        fn()
        t1 = time.perf_counter_ns()
        if record:
            series.ms.append((t1 - t0) / 1e6)
            series.round_trips += counter.n - rt0

    def loop(n, body):
        for i in range(args.warmup):
            body(i, False)
        for i in range(n):
            body(args.warmup + i, True)

    def check(ok, what):
        if not ok:
            raise SystemExit(f"original_roundtrips: sanity check failed: {what}")

    # --- locker ---------------------------------------------------------------------
    acq = Series("acquire", "acquire, uncontended (lock released before)")
    rel = Series("release", "release")
    touch = Series("touch", "renew (touch)")
    locked = Series("locked", "locked()")
    owned = Series("owned", "owned()")
    cont = Series("contended_acquire_nb", "contended acquire, non-blocking (LockExists)")
    first = Series("new_locker_acquire", "new locker + first acquire of a new key")

    a = MongoLocker("bench-a", db, ttl=600)
    a.acquire()
    a.release()

    def locker_cycle(_i, rec):
        timed(acq, rec, a.acquire)
        timed(touch, rec, lambda: check(a.touch() is not None, "touch while holding"))
        timed(locked, rec, lambda: check(a.locked(), "locked() while held"))
        timed(owned, rec, lambda: check(a.owned(), "owned() while holding"))
        timed(rel, rec, a.release)
    loop(args.iterations, locker_cycle)

    holder = MongoLocker("bench-held", other_db, ttl=600)
    holder.acquire()
    b = MongoLocker("bench-held", db, ttl=600)

    def contended(_i, rec):
        def attempt():
            try:
                b.acquire(blocking=False)
            except LockExists:
                return
            raise SystemExit("original_roundtrips: a held lock was acquired")
        timed(cont, rec, attempt)
    loop(args.iterations, contended)
    holder.release()

    # Own collection, as in bench_core: mongo-java-server scans the collection for filters
    # other than a bare _id, so leftover documents would slow the other operations.
    def new_key(i, rec):
        timed(first, rec, lambda: MongoLocker(f"bench-new-{i}", db, dbcollection="bench_new",
                                              ttl=600).acquire())
    loop(min(args.iterations, 200), new_key)

    # The original's release deletes the document, so its every acquire is a first use.
    absent = Series("acquire_absent", "acquire, lock document absent (= its every acquire)")
    absent.ms, absent.round_trips = acq.ms, acq.round_trips

    # --- elector ----------------------------------------------------------------------
    def elector(key, status):
        return MongoLeaderElector(key, db, ttl=60, report_status=status)
    leader_s = Series("leader_poll_status", "elector poll as leader, report_status=True")
    leader_n = Series("leader_poll_nostatus", "elector poll as leader, report_status=False")
    follower_s = Series("follower_poll_status", "elector poll as follower, report_status=True")
    follower_n = Series("follower_poll_nostatus", "elector poll as follower, report_status=False")
    lead_s, lead_n = elector("bench-elect-s", True), elector("bench-elect-n", False)
    fol_s, fol_n = elector("bench-elect-s", True), elector("bench-elect-n", False)
    lead_s.poll()
    lead_n.poll()
    check(lead_s.is_leader and lead_n.is_leader, "first poll of a free key leads")

    def polls(_i, rec):
        timed(leader_s, rec, lead_s.poll)
        timed(leader_n, rec, lead_n.poll)
        timed(follower_s, rec, fol_s.poll)
        timed(follower_n, rec, fol_n.poll)
    loop(args.iterations, polls)
    check(lead_s.is_leader and lead_n.is_leader and not fol_s.is_leader and fol_s.leader_exists,
          "leaders keep leading, followers see them")
    for e in (lead_s, lead_n, fol_s, fol_n):
        e.release()

    ops = [acq, cont, touch, rel, locked, owned, absent, first,
           leader_s, leader_n, follower_s, follower_n]

    # --- throughput -------------------------------------------------------------------
    def throughput(threads, shared):
        shared_cl = client()
        pairs = [shared_cl if shared else client() for _ in range(threads)]
        suffix = "s-" if shared else "-"
        lockers = [MongoLocker(f"bench-tp-{threads}{suffix}{t}", p[0][dbname], ttl=600)
                   for t, p in enumerate(pairs)]
        counters = {id(p[1]): p[1] for p in pairs}
        for lk in lockers:  # warm-up: connection and the cached time check
            for _ in range(50):
                lk.acquire()
                lk.release()
        stop = threading.Event()
        counts = [0] * threads

        def run(t):
            lk, n = lockers[t], 0
            while not stop.is_set():
                lk.acquire()
                lk.release()
                n += 1
            counts[t] = n
        rt0 = sum(c.n for c in counters.values())
        pool = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
        t0 = time.perf_counter()
        for th in pool:
            th.start()
        time.sleep(args.seconds)
        stop.set()
        for th in pool:
            th.join()
        secs = time.perf_counter() - t0
        rt1 = sum(c.n for c in counters.values())
        for p in {id(p[0]): p[0] for p in pairs}.values():
            p.close()
        total = sum(counts)
        label = (f"acquire+release cycles/s, {threads} thread{'s' if threads > 1 else ''}"
                 + (", one shared storage" if shared else (", storage each" if threads > 1 else "")))
        return {"id": f"cycles_{threads}t" + ("_shared" if shared else ""), "label": label,
                "cycles_per_s": total / secs, "round_trips_per_cycle": (rt1 - rt0) / max(1, total)}
    tps = [throughput(1, False), throughput(4, False), throughput(4, True)]

    # --- memory -----------------------------------------------------------------------
    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    MongoLocker("bench-mem-warm", db, ttl=600)
    before = rss()
    idle = [MongoLocker(f"bench-mem-{i}", db, ttl=600) for i in range(1000)]
    after = rss()
    mem = {"id": "rss_per_1000_lockers", "label": "RSS per 1000 idle lockers",
           "kib": (after - before) / 1024, "process_mib": after / 1048576}
    del idle

    cl.drop_database(dbname)
    cl.close()
    other_cl.close()

    print("| operation | round trips | p50 ms | p90 ms | p99 ms | mean ms | n |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for s in ops:
        print(f"| {s.label} | {s.rt_per_op():.2f} | {s.pct(50):.3f} | {s.pct(90):.3f} | "
              f"{s.pct(99):.3f} | {s.mean():.3f} | {len(s.ms)} |")
    print("\n| throughput | cycles/s | round trips/cycle |\n|---|---:|---:|")
    for t in tps:
        print(f"| {t['label']} | {t['cycles_per_s']:.0f} | {t['round_trips_per_cycle']:.2f} |")
    print("\n| memory | KiB | process RSS MiB |\n|---|---:|---:|")
    print(f"| {mem['label']} | {mem['kib']:.0f} | {mem['process_mib']:.1f} |")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"impl": "original", "version": mongoelector.__version__,
                       "pymongo": pymongo.__version__, "ops": [s.as_dict() for s in ops],
                       "throughput": tps, "memory": [mem]}, f, indent=1)


if __name__ == "__main__":
    main()
