#!/usr/bin/env python3
"""CPU instructions per uncontended acquire+release cycle, counted by valgrind (a tool,
not a test, not run by CI).

Why: on this shared 2-core VM wall-clock figures (and even CPU seconds) move with the
load and the server's latency, so a few percent of layer cost is lost in the noise. The
number of instructions the CLIENT process executes per cycle hardly moves at all: it is
the layer's cost, free of timing noise, and it compares the original, ours and the
floors (the same commands issued directly with pymongo) on one scale.

How: each contender (``contender.py``'s implementations, imported from this directory)
runs in its own process under ``valgrind --tool=callgrind``: a warm-up (connections,
time check, first use), then N measured cycles on its own key. Two processes per
contender, N1 = 100 and N2 = 400 cycles; the start-up (interpreter, imports, warm-up,
exit) is the same in both and cancels:

    Ir per cycle = (Ir(N2) - Ir(N1)) / (N2 - N1)

Ir is callgrind's whole-process total (every thread). From the same two profiles, the
per-cycle instructions are split by the object file that executed them (self cost):
CPython (the interpreter and its stdlib extension modules), ours (``_native``),
libmongoc/libbson, pymongo's C extensions (``_cbson``, ``_cmessage``), libc and the
dynamic loader, and the rest. The split is left out when the profile cannot be read
back to the same total.

Only the client is counted: the server runs in another process. pymongo's background
timers (its monitors' and periodic tasks' executors, which wake every 0.5 s, and the
heartbeat) are made hourly in the measured processes (``quiet_driver_timers``, and
``heartbeatFrequencyMS`` in the URI): their instructions follow the wall-clock time, which
valgrind stretches by a factor that depends on the machine's load, and would leak into
the difference. Everything else is the libraries' defaults (Python:
``delete_on_release=True`` for ``original``, ``db`` and ``floor``; asyncio keeps the
document).

    python3 tests/bench/instructions.py [--uri URI] [--db NAME] [--contenders a,b,...]
        [--python-original PY] [--python-ours PY] [--n1 100] [--n2 400] [--warmup 20]
        [--jobs 2] [--json FILE] [--quick]

URI: --uri or MONGOELECTOR_TEST_URI (``bash tests/servers/testserver.sh run java --
python3 tests/bench/instructions.py``). The original runs in --python-original (default
$MONGOELECTOR_CACHE/orig-venv/bin/python, made by run.sh), ours and the floors in
--python-ours (default $MONGOELECTOR_CACHE/bench-venv/bin/python, else this interpreter;
``PYTHONPATH=python`` runs a source tree). ``bash tests/bench/run.sh --instructions``
prepares both venvs and runs this.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.environ.get("MONGOELECTOR_CACHE") or os.path.expanduser("~/.cache/mongoelector")

#: contender id -> (contender.py --impl, its floor, which interpreter)
CONTENDERS = {
    "original": ("original", None, "original"),
    # The original on a client that bounds every call (timeoutMS), as ours bounds each.
    "original-bounded": ("original-bounded", None, "original"),
    "db": ("db", "floor", "ours"),
    "uri": ("uri", "floor", "ours"),
    "floor": ("floor", None, "ours"),
    "aio-db": ("aio-db", "aio-floor", "ours"),
    "aio-floor": ("aio-floor", None, "ours"),
}
DEFAULT_CONTENDERS = "original,original-bounded,db,floor,aio-db,aio-floor"
#: The harness's ids of the same contenders (run.sh --instructions --contenders py-db,...).
ALIASES = {"py-db": "db", "py-uri": "uri", "py-aio": "aio-db"}

#: Object-file groups of the split, first match wins (on the file's path).
GROUPS = [
    ("ours (_native)", re.compile(r"/mongoelector/_native[^/]*\.so")),
    ("libmongoc/libbson", re.compile(r"/lib(mongoc|bson|mongocrypt)[^/]*\.so")),
    ("pymongo C", re.compile(r"/(bson|pymongo)/_c[^/]*\.so")),
    ("CPython", re.compile(r"/libpython[^/]*\.so|/lib-dynload/|/bin/python[^/]*$")),
    ("libc/ld", re.compile(r"/(libc|libm|ld-linux[^/]*|libpthread)[.-][^/]*$")),
]
OTHER = "other"
#: pymongo's background timers in the measured processes (seconds; see quiet_driver_timers).
QUIET_S = 3600


# ------------------------------------------------------------------ the child --
def quiet_driver_timers():
    """pymongo's background timers, made hourly (in this process, before any client):
    every client wakes every 0.5 s (its monitors' and its periodic tasks' executors) and
    runs its periodic tasks every second, on threads or, for asyncio, on the loop. Their
    instructions follow the wall-clock time, which valgrind stretches by a factor that
    depends on the machine's load: left alone they leak into Ir(N2) - Ir(N1)."""
    import pymongo.common as common

    for name in ("MIN_HEARTBEAT_INTERVAL", "KILL_CURSOR_FREQUENCY", "EVENTS_QUEUE_FREQUENCY"):
        if hasattr(common, name):
            setattr(common, name, QUIET_S)


def child(args):
    """Runs under valgrind: warm-up, then --n cycles of one contender; prints DONE."""
    sys.path.insert(0, HERE)
    import contender

    quiet_driver_timers()

    ns = argparse.Namespace(impl=args.child, uri=args.uri, db=args.db, unsafe=False)
    impl = contender.Impl(ns)
    key = f"instr-{args.child}-{os.getpid()}"
    t0 = time.perf_counter()
    if impl.asyncio:
        import asyncio

        async def main():
            lk = impl.locker(key, impl.db())
            for _ in range(args.warmup):
                await lk.acquire()
                await lk.release()
            for _ in range(args.n):
                await lk.acquire()
                await lk.release()

        asyncio.run(main())
    else:
        lk = impl.locker(key, impl.db())
        for _ in range(args.warmup):
            lk.acquire()
            lk.release()
        for _ in range(args.n):
            lk.acquire()
            lk.release()
    sys.stdout.write(f"DONE {args.n} {time.perf_counter() - t0:.3f} {impl.version}\n")
    sys.stdout.flush()
    os._exit(0)  # no lingering client threads; callgrind writes its profile at exit


# ------------------------------------------------------------- the profiles --
def read_profile(path):
    """(total Ir, {object file: self Ir}) of a callgrind output file. Self cost: the cost
    lines of each function, not those that follow a `calls=` line (a call's inclusive
    cost). The split is None when it does not add up to the file's total."""
    total = None
    per_obj = {}
    names = {}
    obj = "???"
    after_calls = False

    def name(value):
        m = re.match(r"\((\d+)\)(?:\s+(.*))?$", value)
        if not m:
            return value
        if m.group(2) is not None:
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), "???")

    with open(path, errors="replace") as f:
        for line in f:
            if not line or line == "\n":
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                if after_calls:
                    after_calls = False
                    continue
                parts = line.split()
                if len(parts) >= 2:
                    per_obj[obj] = per_obj.get(obj, 0) + int(parts[1])
                continue
            if line.startswith("ob="):
                obj = name(line[3:].strip())
            elif line.startswith(("cob=", "cfi=", "cfl=", "cfn=")):
                k = line.index("=") + 1
                if line.startswith("cob="):
                    name(line[k:].strip())  # defines the id; the caller's object stays
            elif line.startswith("calls="):
                after_calls = True
            elif line.startswith(("totals:", "summary:")):
                total = int(line.split()[1])
    if total is None:
        raise RuntimeError(f"{path}: no totals: line")
    split = per_obj if sum(per_obj.values()) == total else None
    return total, split


def group(per_obj):
    out = {}
    for path, ir in per_obj.items():
        g = next((g for g, rx in GROUPS if rx.search(path)), OTHER)
        out[g] = out.get(g, 0) + ir
    return out


def with_quiet_monitors(uri):
    """The URI with an hourly heartbeat (pymongo refuses one shorter than its minimum
    interval, which quiet_driver_timers raises to QUIET_S); one it sets is replaced."""
    hb = f"heartbeatFrequencyMS={QUIET_S * 1000}"
    uri = re.sub(r"([?&])heartbeatFrequencyMS=\d+&?", r"\1", uri, flags=re.I).rstrip("?&")
    if "?" in uri:
        return uri + "&" + hb
    base = uri if uri.count("/") > 2 else uri + "/"
    return base + "?" + hb


def run_one(args, cid, n, outdir):
    """One valgrind run of contender `cid`, n measured cycles: (total, split, seconds)."""
    impl, _, which = CONTENDERS[cid]
    python = args.python_original if which == "original" else args.python_ours
    out = os.path.join(outdir, f"{cid}-{n}.callgrind")
    log = os.path.join(outdir, f"{cid}-{n}.log")
    # A URI contender appends the database to the URI: no query string there.
    uri = args.uri if impl == "uri" else with_quiet_monitors(args.uri)
    cmd = [
        args.valgrind,
        "--tool=callgrind",
        "--fair-sched=yes",  # threads take turns (asyncio's workers hand over to the loop)
        f"--callgrind-out-file={out}",
        python,
        os.path.abspath(__file__),
        "--child",
        impl,
        "--uri",
        uri,
        "--db",
        args.db,
        "--n",
        str(n),
        "--warmup",
        str(args.warmup),
    ]
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = "0"  # the same dict layouts in both runs
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # no run compiles for the other
    if which == "original":
        env.pop("PYTHONPATH", None)
    t0 = time.monotonic()
    with open(log, "w") as lf:
        p = subprocess.run(
            cmd,
            stdout=subprocess.PIPE,
            stderr=lf,
            text=True,
            timeout=args.timeout,
            cwd="/",
            env=env,
        )
    secs = time.monotonic() - t0
    if p.returncode != 0 or not p.stdout.startswith("DONE"):
        with open(log) as lf:  # the program's own lines, not valgrind's (==pid==)
            tail = "".join([x for x in lf if not x.startswith("==")][-12:])
        raise RuntimeError(f"{cid} n={n}: exit {p.returncode}, stdout {p.stdout!r}\n{tail}")
    total, split = read_profile(out)
    return total, split, secs, p.stdout.split()[3]


def run_retried(args, cid, n, outdir):
    """run_one, once more if it fails: under valgrind on a loaded machine a call can
    overrun its timeout (e.g. the asyncio facade's op_timeout), which says nothing of
    the instructions a cycle takes."""
    try:
        return run_one(args, cid, n, outdir)
    except RuntimeError as e:
        first = str(e).splitlines()[-1] if str(e) else "?"
        print(f"instructions: {cid} n={n} failed ({first}); once more", file=sys.stderr)
        return run_one(args, cid, n, outdir)


def measure(args, cid, outdir, pool):
    n1, n2 = args.n1, args.n2
    f1 = pool.submit(run_retried, args, cid, n1, outdir)
    f2 = pool.submit(run_retried, args, cid, n2, outdir)
    (t1, s1, sec1, version), (t2, s2, sec2, _) = f1.result(), f2.result()
    per = (t2 - t1) / (n2 - n1)
    r = {
        "contender": cid,
        "impl": CONTENDERS[cid][0],
        "version": version,
        "ir_per_cycle": per,
        "ir": {str(n1): t1, str(n2): t2},
        "valgrind_seconds": {str(n1): round(sec1, 1), str(n2): round(sec2, 1)},
    }
    if s1 is not None and s2 is not None:
        g1, g2 = group(s1), group(s2)
        r["split_per_cycle"] = {
            g: (g2.get(g, 0) - g1.get(g, 0)) / (n2 - n1) for g in sorted(set(g1) | set(g2))
        }
        objs = {o: (s2.get(o, 0) - s1.get(o, 0)) / (n2 - n1) for o in set(s1) | set(s2)}
        top = sorted(objs.items(), key=lambda kv: -kv[1])[:8]
        r["top_objects_per_cycle"] = {o: v for o, v in top if v > 0}
    return r


# --------------------------------------------------------------------- table --
def fmt_ratio(a, b):
    return f"{a / b:.2f}×" if a is not None and b else ""


def tables(results, args):
    by = {r["contender"]: r for r in results if "ir_per_cycle" in r}
    orig = by.get("original", {}).get("ir_per_cycle")
    bounded = by.get("original-bounded", {}).get("ir_per_cycle")
    lines = [
        f"### Instructions per acquire+release cycle (callgrind Ir, whole client process; "
        f"(Ir({args.n2}) − Ir({args.n1})) / {args.n2 - args.n1}, after {args.warmup} "
        "warm-up cycles)",
        "",
        "| contender | Ir/cycle | vs original | vs original-bounded | vs its floor |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in results:
        cid = r["contender"]
        if "error" in r:
            lines.append(f"| {cid} | error: {r['error'].splitlines()[0][:80]} | | | |")
            continue
        ir = r["ir_per_cycle"]
        floor_id = CONTENDERS[cid][1]
        fl = by.get(floor_id, {}).get("ir_per_cycle") if floor_id else None
        vs_floor = (
            f"{fmt_ratio(ir, fl)} ({floor_id}; {ir - fl:+,.0f})"
            if fl
            else ("1×" if cid in ("floor", "aio-floor") else "")
        )
        lines.append(
            f"| {cid} | {ir:,.0f} | "
            f"{'1×' if cid == 'original' else fmt_ratio(ir, orig)} | "
            f"{fmt_ratio(ir, bounded) if bounded else ''} | {vs_floor} |"
        )
    split = [r for r in results if r.get("split_per_cycle")]
    if split:
        # The groups that run per cycle in some contender (loaded is not enough).
        groups = [
            g
            for g in [g for g, _ in GROUPS] + [OTHER]
            if any(abs(r["split_per_cycle"].get(g, 0)) >= 1 for r in split)
        ]
        lines += [
            "",
            "Where they go (self cost per cycle by object file, share of the contender's Ir/cycle):",
            "",
            "| contender | " + " | ".join(groups) + " |",
            "|---|" + "---:|" * len(groups),
        ]
        for r in split:
            s, ir = r["split_per_cycle"], r["ir_per_cycle"]
            cells = [f"{s.get(g, 0):,.0f} ({100 * s.get(g, 0) / ir:.0f}%)" for g in groups]
            lines.append(f"| {r['contender']} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"* valgrind runs each contender twice ({args.n1} and {args.n2} cycles) in its own "
        "process; start-up cancels in the difference. The server is another process, not "
        "counted.",
        "* floors: `db` against `floor` (the same commands issued directly with pymongo), "
        "`aio-db` against `aio-floor` (the same with pymongo's AsyncDatabase).",
    ]
    return "\n".join(lines)


def drop_database(args):
    try:
        import pymongo
    except ImportError:
        return
    try:
        c = pymongo.MongoClient(args.uri, serverSelectionTimeoutMS=5000)
        try:
            c.drop_database(args.db)
        finally:
            c.close()
    except Exception as e:  # noqa: BLE001 (best effort)
        print(f"instructions: dropping {args.db}: {e}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--uri", default=os.environ.get("MONGOELECTOR_TEST_URI"))
    ap.add_argument("--db", default="mongoelector_instructions")
    ap.add_argument("--contenders", default=DEFAULT_CONTENDERS, help=",".join(CONTENDERS))
    ap.add_argument("--python-original", default=os.path.join(CACHE, "orig-venv", "bin", "python"))
    ours = os.path.join(CACHE, "bench-venv", "bin", "python")
    ap.add_argument("--python-ours", default=ours if os.path.exists(ours) else sys.executable)
    ap.add_argument("--n1", type=int, default=100)
    ap.add_argument("--n2", type=int, default=400)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=2, help="valgrind processes at once")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per valgrind run")
    ap.add_argument("--valgrind", default=shutil.which("valgrind") or "/usr/bin/valgrind")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--keep", help="keep the callgrind profiles and logs in this directory")
    ap.add_argument("--quick", action="store_true", help="n1=50, n2=150, warm-up 10")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    if not args.uri:
        ap.error(
            "no server: --uri or MONGOELECTOR_TEST_URI "
            "(bash tests/servers/testserver.sh run java -- python3 tests/bench/instructions.py)"
        )
    if args.quick:
        args.n1, args.n2, args.warmup = 50, 150, 10
    if args.n2 <= args.n1:
        ap.error("--n2 must be larger than --n1")
    wanted = [ALIASES.get(c, c) for c in args.contenders.split(",") if c]
    for c in wanted:
        if c not in CONTENDERS:
            ap.error(f"unknown contender {c!r} (known: {', '.join(CONTENDERS)})")
    if not os.path.exists(args.valgrind):
        ap.error(f"no valgrind at {args.valgrind}")
    outdir = args.keep or tempfile.mkdtemp(prefix="mongoelector-instructions-")
    os.makedirs(outdir, exist_ok=True)
    print(
        f"instructions: {', '.join(wanted)}; n1={args.n1} n2={args.n2} warm-up {args.warmup}; "
        f"original: {args.python_original}; ours: {args.python_ours}; profiles in {outdir}",
        file=sys.stderr,
        flush=True,
    )
    results = []
    t0 = time.monotonic()
    try:
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            for cid in wanted:
                try:
                    r = measure(args, cid, outdir, pool)
                    print(
                        f"instructions: {cid}: {r['ir_per_cycle']:,.0f} Ir/cycle "
                        f"({time.monotonic() - t0:.0f} s)",
                        file=sys.stderr,
                        flush=True,
                    )
                except Exception as e:  # noqa: BLE001 (reported in its row)
                    print(f"instructions: {cid} failed: {e}", file=sys.stderr, flush=True)
                    r = {"contender": cid, "error": str(e)}
                results.append(r)
    finally:
        if not args.keep:
            shutil.rmtree(outdir, ignore_errors=True)
        drop_database(args)
    md = tables(results, args)
    print(md)
    if args.json:
        meta = {
            "n1": args.n1,
            "n2": args.n2,
            "warmup": args.warmup,
            "uri": args.uri,
            "python_original": args.python_original,
            "python_ours": args.python_ours,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        }
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "contenders": results}, f, indent=1)
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
