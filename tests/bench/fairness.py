"""Fair (FIFO) queueing against the unfair mode: N processes contend for one semaphore
slot (MongoSemaphore, limit 1), each acquiring (blocking), holding briefly and releasing
in a loop for a fixed time, all starting at once. Prints a markdown table per backend:
mode x processes -> acquisitions (and per second), acquisitions per process
(min/mean/max), Jain's fairness index over them (1 = perfectly even, 1/N = one process
got all), p50/p99 of the waits (a wait the run's end cut short counts as waited), and
commands per acquisition.

Commands are counted as the other benchmarks count them: on the server, by a counting
proxy (counting_proxy.py) in front of it, the application's commands (monitoring
excluded) from the start signal until every process has closed; on SQLite, the
transactions the processes' native transport reports (``metrics.round_trips``).

Not a test and not run by CI: the figures depend on the machine.

    PYTHONPATH=<package> python tests/bench/fairness.py --uri mongodb://127.0.0.1:PORT/
        [--sqlite] [--procs 8,32] [--seconds 20] [--hold 0.02] [--ttl 10] [--step 0.05]
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from urllib.parse import urlparse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def worker(args):
    """One contending process: "ready" once connected, then waits for "go <start>" on
    stdin, loops until start + seconds, prints one JSON line."""
    from mongoelector import MongoSemaphore, metrics
    from mongoelector.errors import AcquireTimeout, StorageUnavailable

    sem = MongoSemaphore(args.key, args.uri, limit=1, ttl=args.ttl, fair=args.mode == "fair")
    sem.holders()  # connected, indexes made: not part of the run
    print("ready", flush=True)
    start = float(sys.stdin.readline().split()[1])
    trips = metrics.snapshot().round_trips
    while time.time() < start:
        time.sleep(0.001)
    waits, acquired, errors, end = [], 0, 0, start + args.seconds
    while time.time() < end:
        t0 = time.monotonic()
        try:
            sem.acquire(timeout=max(0.001, end - time.time()), step=args.step)
        except AcquireTimeout:  # the run ended first: an unserved wait, counted as waited
            waits.append(time.monotonic() - t0)
            break
        except StorageUnavailable:  # SQLite: the file's write lock was busy too long
            errors += 1
            continue
        waits.append(time.monotonic() - t0)
        acquired += 1
        time.sleep(args.hold)
        sem.release()
    sem.close()
    trips = metrics.snapshot().round_trips - trips
    out = {"acquired": acquired, "waits": waits, "round_trips": trips, "errors": errors}
    print(json.dumps(out), flush=True)


def _result(stdout):
    """A worker's JSON line; a worker that died without one counts as one error."""
    lines = stdout.strip().splitlines()
    if lines and lines[-1].startswith("{"):
        return json.loads(lines[-1])
    return {"acquired": 0, "waits": [], "round_trips": 0, "errors": 1}


def jain(xs):
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)) if any(xs) else 0.0


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def run(args, backend, uri, mode, n, proxy):
    key = f"fair-{mode}-{n}-{uuid.uuid4().hex[:6]}"
    cmd = [sys.executable, __file__, "--worker", "--uri", uri, "--key", key, "--mode", mode]
    cmd += ["--seconds", str(args.seconds), "--hold", str(args.hold), "--ttl", str(args.ttl)]
    cmd += ["--step", str(args.step)]
    procs = [
        subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(n)
    ]
    for p in procs:  # every interpreter started and connected before the clock runs
        line = p.stdout.readline().strip()
        if line != "ready":
            sys.exit(f"fairness.py: a worker did not start ({line!r})")
    load = os.getloadavg()[0]
    before = proxy.snapshot() if proxy else None
    start = time.time() + 0.5
    for p in procs:
        p.stdin.write(f"go {start}\n")
        p.stdin.flush()
    outs = [_result(p.communicate()[0]) for p in procs]
    acquired = [o["acquired"] for o in outs]
    waits = [w for o in outs for w in o["waits"]]
    total = sum(acquired)
    if proxy:
        from counting_proxy import diff

        commands = sum(diff(proxy.snapshot(), before)["app"].values())
    else:
        commands = sum(o["round_trips"] for o in outs)
    return {
        "backend": backend,
        "mode": mode,
        "procs": n,
        "acquired": total,
        "per_s": total / args.seconds,
        "per_proc": (min(acquired), statistics.mean(acquired), max(acquired)),
        "jain": jain(acquired),
        "p50": pct(waits, 0.5),
        "p99": pct(waits, 0.99),
        "commands": commands / total if total else float("nan"),
        "load": load,
        "errors": sum(o["errors"] for o in outs),
    }


def table(rows):
    from harness import md_table  # as the other benchmarks print theirs

    header = ["mode", "procs", "acquisitions (/s)", "per process min/mean/max", "Jain"]
    header += ["p50 wait", "p99 wait", "commands/acquisition", "errors", "load"]
    out = []
    for r in rows:
        lo, mean, hi = r["per_proc"]
        out.append(
            [
                r["mode"],
                r["procs"],
                f"{r['acquired']} ({r['per_s']:.1f})",
                f"{lo}/{mean:.1f}/{hi}",
                f"{r['jain']:.3f}",
                f"{r['p50'] * 1000:.0f} ms",
                f"{r['p99'] * 1000:.0f} ms",
                f"{r['commands']:.1f}",
                r["errors"],
                f"{r['load']:.1f}",
            ]
        )
    return md_table(header, out, ["---", "---:"] + ["---:"] * 8)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--uri", default=os.environ.get("MONGOELECTOR_TEST_URI"))
    ap.add_argument("--sqlite", action="store_true", help="also run on a SQLite file")
    ap.add_argument("--key", default="fair")
    ap.add_argument("--mode", default="fair")
    ap.add_argument("--procs", default="8,32")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--hold", type=float, default=0.02)
    ap.add_argument("--ttl", type=float, default=10.0)
    ap.add_argument("--step", type=float, default=0.05)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    if not args.uri and not args.sqlite:
        sys.exit("fairness.py: --uri mongodb://host:port/ (or MONGOELECTOR_TEST_URI) or --sqlite")
    backends = []
    if args.uri:
        from counting_proxy import ProxyHub

        u = urlparse(args.uri)
        proxy = ProxyHub().new_proxy(u.hostname or "127.0.0.1", u.port or 27017, "fairness")
        backends.append(("server", proxy.uri("bench_fairness"), proxy))
    tmp = tempfile.TemporaryDirectory(prefix="fairness-")
    if args.sqlite:
        backends.append(("sqlite", f"sqlite://{tmp.name}/fairness.db", None))
    procs = [int(x) for x in args.procs.split(",")]
    print(
        f"One slot (limit 1), {args.seconds:g} s per run, hold {args.hold * 1000:g} ms, "
        f"step {args.step:g} s, ttl {args.ttl:g} s; {os.cpu_count()} cores, "
        f"{platform.python_implementation()} {platform.python_version()}; load = 1-minute "
        "load average when the run started; errors = acquires that failed (StorageUnavailable)."
    )
    for backend, uri, proxy in backends:
        rows = []
        for n in procs:
            for mode in ("unfair", "fair"):
                rows.append(run(args, backend, uri, mode, n, proxy))
                r = rows[-1]
                print(
                    f"... {backend} {mode} x {n}: {r['acquired']} acquisitions, "
                    f"Jain {r['jain']:.3f}",
                    file=sys.stderr,
                )
        if backend == "server":
            print("\nserver (commands counted by the proxy)\n")
        else:
            print("\nSQLite file (commands = transactions)\n")
        print(table(rows), flush=True)
    tmp.cleanup()


if __name__ == "__main__":
    main()
