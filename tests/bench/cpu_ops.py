#!/usr/bin/env python3
"""CPU time per operation of the Python contenders (a tool, not a test, not run by CI).

On a loaded machine wall-clock ratios are noise; the CPU time the CLIENT process spends
per operation is not (the server runs in another process). This runs each operation in a
tight loop, takes the calling thread's CPU time (``time.thread_time``: pymongo and our
native core both run on the caller's thread) and the whole process's
(``time.process_time``), and keeps the best of several rounds. The difference between
``db`` and ``floor`` is what our layer adds per operation.

    cpu_ops.py one --impl original|db|floor [--uri URI] [--n 400] [--rounds 5]
        one contender in this interpreter (the original needs its own venv); prints JSON
    cpu_ops.py table [--uri URI | --fake] [--orig-python PY] [--n 400] [--rounds 5]
                     [--repeat 3]
        runs `one` for the three contenders (the original in --orig-python, default
        $MONGOELECTOR_CACHE/orig-venv/bin/python) and prints a markdown table

URI: --uri or MONGOELECTOR_TEST_URI (``bash tests/servers/testserver.sh run java -- ...``).
For ours from a source tree: ``PYTHONPATH=python`` with the built ``_native`` module there.
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

OPS = ["cycle", "acquire", "release", "touch", "locked", "owned", "leader_poll", "follower_poll"]


def measure(fn, n, rounds, setup=None, teardown=None):
    """Best (lowest) mean per call over `rounds` rounds of n calls: (thread µs, process µs,
    wall p50 µs). setup/teardown run around each call, outside the timed span."""
    best_t = best_p = float("inf")
    walls = []
    tt, pt, pc = time.thread_time, time.process_time, time.perf_counter
    for _ in range(rounds):
        spent_t = spent_p = 0.0
        for _ in range(n):
            if setup:
                setup()
            t0, p0, w0 = tt(), pt(), pc()
            fn()
            w1, t1, p1 = pc(), tt(), pt()
            spent_t += t1 - t0
            spent_p += p1 - p0
            walls.append(w1 - w0)
            if teardown:
                teardown()
        best_t = min(best_t, spent_t / n)
        best_p = min(best_p, spent_p / n)
    walls.sort()
    return best_t * 1e6, best_p * 1e6, walls[len(walls) // 2] * 1e6


def measure_loop(fn, n, rounds):
    """Like measure() for one call per iteration, timing the whole loop (no per-call clock
    reads): the cycles figure."""
    best_t = best_p = best_w = float("inf")
    for _ in range(rounds):
        t0, p0, w0 = time.thread_time(), time.process_time(), time.perf_counter()
        for _ in range(n):
            fn()
        w1, t1, p1 = time.perf_counter(), time.thread_time(), time.process_time()
        best_t = min(best_t, (t1 - t0) / n)
        best_p = min(best_p, (p1 - p0) / n)
        best_w = min(best_w, (w1 - w0) / n)
    return best_t * 1e6, best_p * 1e6, best_w * 1e6


def cmd_one(args):
    import contender

    ns = argparse.Namespace(impl=args.impl, uri=args.uri, db="cpuops", unsafe=False)
    impl = contender.Impl(ns)
    if args.fake:
        import fakedb

        db = fakedb.fake_database()
        impl.db = lambda *a, **kw: db
    else:
        db = impl.db()
    n, rounds = args.n, args.rounds
    out = {"impl": args.impl, "version": impl.version, "n": n, "rounds": rounds, "ops": {}}
    lk = impl.locker("cpu-ops-" + args.impl, db, ttl=30)
    for _ in range(50):  # warm-up: time check, connections, fence epoch
        lk.acquire()
        lk.release()

    def cycle():
        lk.acquire()
        lk.release()

    out["ops"]["cycle"] = measure_loop(cycle, n, rounds)
    out["ops"]["acquire"] = measure(lk.acquire, n, rounds, teardown=lk.release)
    out["ops"]["release"] = measure(lk.release, n, rounds, setup=lk.acquire)
    lk.acquire()
    out["ops"]["touch"] = measure(lk.touch, n, rounds)
    out["ops"]["locked"] = measure(lk.locked, n, rounds)
    out["ops"]["owned"] = measure(lk.owned, n, rounds)
    assert lk.locked() and lk.owned(), "the lock is held"
    lk.release()
    if args.impl != "floor":
        lead = impl.elector("cpu-ops-elect-" + args.impl, db, 60)
        fol = impl.elector("cpu-ops-elect-" + args.impl, db, 60)
        lead.poll()
        fol.poll()
        assert lead.is_leader and not fol.is_leader
        out["ops"]["leader_poll"] = measure(lead.poll, n, rounds)
        out["ops"]["follower_poll"] = measure(fol.poll, n, rounds)
        assert lead.is_leader and not fol.is_leader
        fol.release()
        lead.release()
    print(json.dumps(out))


def cmd_table(args):
    env = dict(os.environ)
    cache = env.get("MONGOELECTOR_CACHE", os.path.expanduser("~/.cache/mongoelector"))
    orig = args.orig_python or os.path.join(cache, "orig-venv", "bin", "python")
    rows = {}
    # The contenders take turns (--repeat times), each op keeping its best figures: a
    # busy spell of the machine then hits every contender alike.
    for _ in range(args.repeat):
        for impl, py in (("original", orig), ("db", sys.executable), ("floor", sys.executable)):
            e = dict(env)
            if impl == "original":
                e.pop("PYTHONPATH", None)
            cmd = [py, os.path.abspath(__file__), "one", "--impl", impl]
            cmd += ["--uri", args.uri] if args.uri else []
            cmd += ["--n", str(args.n), "--rounds", str(args.rounds)]
            cmd += ["--fake"] if args.fake else []
            res = subprocess.run(cmd, env=e, capture_output=True, text=True, cwd="/")
            if res.returncode != 0:
                sys.stderr.write(res.stderr)
                raise SystemExit(f"{impl} failed")
            ops = json.loads(res.stdout.strip().splitlines()[-1])["ops"]
            best = rows.setdefault(impl, {})
            for op, fig in ops.items():
                best[op] = fig if op not in best else [min(a, b) for a, b in zip(best[op], fig)]
    print(
        f"CPU µs per operation (thread / process; best of {args.repeat} x {args.rounds} "
        f"rounds of {args.n});"
    )
    print("wall p50 µs in the last column group (noisy on a loaded machine)\n")
    print("| op | original | ours (db) | floor | ours − floor | ours / original |")
    print("|---|---|---|---|---|---|")
    for op in OPS:
        o, d, f = rows["original"].get(op), rows["db"].get(op), rows["floor"].get(op)

        def cell(x):
            return "–" if x is None else f"{x[0]:.0f} / {x[1]:.0f} (p50 {x[2]:.0f})"

        layer = "–" if (d is None or f is None) else f"{d[0] - f[0]:+.0f}"
        ratio = "–" if (d is None or o is None) else f"{d[0] / o[0]:.2f}"
        print(f"| {op} | {cell(o)} | {cell(d)} | {cell(f)} | {layer} | {ratio} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("one", "table"):
        p = sub.add_parser(name)
        p.add_argument("--uri", default=os.environ.get("MONGOELECTOR_TEST_URI"))
        p.add_argument("--n", type=int, default=400)
        p.add_argument("--rounds", type=int, default=5)
        p.add_argument(
            "--fake", action="store_true", help="an in-process fake Database (fakedb.py)"
        )
        if name == "one":
            p.add_argument("--impl", required=True, choices=["original", "db", "floor"])
        else:
            p.add_argument("--orig-python")
            p.add_argument("--repeat", type=int, default=3, help="turns of each contender")
    args = ap.parse_args()
    if not args.uri and not args.fake:
        raise SystemExit("no server: pass --uri or set MONGOELECTOR_TEST_URI")
    (cmd_one if args.cmd == "one" else cmd_table)(args)


if __name__ == "__main__":
    main()
