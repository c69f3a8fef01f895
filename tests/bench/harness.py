#!/usr/bin/env python3
"""The benchmark harness of issue #10 (run it with tests/bench/run.sh, which builds and
installs the contenders first). Not a test and never part of the test suite.

Contenders, each on the same server in one run: the original mongoelector 1.0.2 (its own
venv), ours through Python with a pymongo Database, ours through Python with a URI (the
native libmongoc transport), ours through the C API (contender.c over the public
header). Scenarios (--only takes a comma-separated subset):

  ops        database commands per operation, counted by a loopback proxy that parses
             the wire protocol of every contender alike (monitoring reported apart)
  cycles     uncontended acquire+release: cycles/s, p50/p99 latency, against the
             server's ping round trip (floor: two round trips a cycle); 4 threads
             sharing one client vs a client each
  failover   ttl 2: kill -9 of the leader and graceful stop, N trials each
  contention 8 processes looping acquire/release on one key: rate and fairness
  cost       an idle elector in the host process: CPU seconds, RSS; GIL slowdown of a
             CPU-bound Python loop
  load       commands/s a 5-node election puts on the server (ttl 15, steady state)
  scale      1..N keys held and renewed by one process: commands/s, CPU, threads,
             connections

Results: markdown tables on stdout, and results.md, results.json and results.png in
--results (default tests/bench/results). mongo-java-server and FerretDB have no TTL
monitor, which the original needs to free a crashed holder's lock: the harness emulates
it (deletes expired documents every 60 s, as MongoDB's monitor does) and says so.
"""

import argparse
import datetime as dt
import json
import math
import os
import platform
import queue
import random
import signal
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import counting_proxy  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")

PROFILES = {
    "full": dict(
        ops_n=100,
        ping_n=3000,
        cycle_seconds=5.0,
        cycle_threads=4,
        cycle_warmup=100,
        cycle_rounds=3,
        lag_tasks=50,
        lag_seconds=10.0,
        trials=20,
        failover_ttl=2.0,
        ttl_monitor_period=60.0,
        contention_procs=8,
        contention_seconds=20.0,
        idle_seconds=60.0,
        cost_ttl=15.0,
        spin_seconds=0.3,
        spin_rounds=20,
        spin_ttl=1.0,
        load_nodes=5,
        load_ttl=15.0,
        load_window=60.0,
        scale_sizes=[1, 10, 100, 1000],
        scale_ttl=15.0,
        scale_window=10.0,
        scale_grow_budget=120.0,
        scale_modes=["batched", "per-key"],
    ),
    "quick": dict(
        ops_n=10,
        ping_n=500,
        cycle_seconds=1.0,
        cycle_threads=4,
        cycle_warmup=20,
        cycle_rounds=1,
        lag_tasks=50,
        lag_seconds=2.0,
        trials=3,
        failover_ttl=2.0,
        ttl_monitor_period=60.0,
        contention_procs=8,
        contention_seconds=3.0,
        idle_seconds=8.0,
        cost_ttl=15.0,
        spin_seconds=0.3,
        spin_rounds=3,
        spin_ttl=1.0,
        load_nodes=5,
        load_ttl=15.0,
        load_window=15.0,
        scale_sizes=[1, 100],
        scale_ttl=3.0,
        scale_window=2.0,
        scale_grow_budget=30.0,
        scale_modes=["batched", "per-key"],
    ),
}
# --renewal (tests/bench/renewal.sh): the figures of issue #17, the scale scenario alone,
# batched and per-key renewal side by side; --quick with it: a smoke test.
PROFILES["renewal"] = dict(
    PROFILES["full"], scale_sizes=[1, 10, 100, 1000, 5000], scale_ttl=15.0, scale_window=60.0
)
PROFILES["renewal-quick"] = dict(
    PROFILES["quick"], scale_sizes=[1, 100, 500], scale_ttl=3.0, scale_window=2.0
)
SCALE_MODES = ["batched", "per-key"]
# The environment of a scale process per mode of ours (None: removed from it).
SCALE_MODE_ENV = {
    "batched": {"MONGOELECTOR_BATCH_RENEWALS": None},
    "per-key": {"MONGOELECTOR_BATCH_RENEWALS": "0"},
}
SCENARIOS = ["ops", "cycles", "lag", "failover", "contention", "cost", "load", "scale"]


def log(*a):
    print("harness:", *a, file=sys.stderr, flush=True)


def now_iso():
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def pct(values, p):
    v = sorted(values)
    if not v:
        return None
    rank = max(1, -(-int(round(p * len(v))) // 100))
    return v[min(len(v), rank) - 1]


def fmt(v, spec=".2f", none="–"):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return none
    return format(v, spec)


def ratio(a, b):
    if a is None or b in (None, 0):
        return None
    return a / b


def md_table(header, rows, align=None):
    align = align or ["---"] + ["---:"] * (len(header) - 1)
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


# ----------------------------------------------------------------------- contenders --
class Contender:
    def __init__(
        self,
        cid,
        label,
        argv,
        impl=None,
        ours=True,
        python=False,
        needs_ttl_monitor=False,
        env=None,
        scenarios=None,
    ):
        self.id, self.label, self.argv, self.impl = cid, label, argv, impl
        # The scenarios this contender takes part in (None: every one).
        self.scenarios = scenarios
        self.ours, self.python, self.needs_ttl_monitor = ours, python, needs_ttl_monitor
        self.env = env or {}
        self.error = None
        self.info = {}

    def cmd(self, sub, **opts):
        a = list(self.argv) + [sub]
        if self.impl:
            a += ["--impl", self.impl]
        for k, v in opts.items():
            if v is None or v is False:
                continue
            flag = "--" + k.replace("_", "-")
            a += [flag] if v is True else [flag, str(v)]
        return a


class Proc:
    """A contender process speaking the line protocol (see contender.py)."""

    def __init__(self, h, contender, sub, name, extra_env=None, **opts):
        self.h, self.c, self.name = h, contender, name
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        env.update(contender.env)
        for k, v in (extra_env or {}).items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        if h.args.unsafe:
            opts.setdefault("unsafe", True)
        argv = contender.cmd(sub, **opts)
        self.logpath = os.path.join(h.logdir, f"{name}.log")
        self.logf = open(self.logpath, "ab")
        self.logf.write(
            (
                "$ "
                + "".join(f"{k}={v} " for k, v in (extra_env or {}).items() if v is not None)
                + " ".join(argv)
                + "\n"
            ).encode()
        )
        self.logf.flush()
        self.p = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.logf,
            env=env,
            cwd="/",
            text=True,
            bufsize=1,
            start_new_session=True,
        )
        h.procs.add(self)
        self.q = queue.Queue()
        self.events = []  # (what, t, rest)
        self.results = []
        self.cv = threading.Condition()
        self.eof = False
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.p.stdout:
            line = line.rstrip("\n")
            if line.startswith("EVENT "):
                parts = line.split(" ", 3)
                with self.cv:
                    self.events.append(
                        (parts[1], float(parts[2]), parts[3] if len(parts) > 3 else "")
                    )
                    self.cv.notify_all()
            else:
                self.q.put(line)
        with self.cv:
            self.eof = True
            self.cv.notify_all()
        self.q.put(None)

    @property
    def pid(self):
        return self.p.pid

    def line(self, timeout):
        """Next non-EVENT line; None at EOF. Raises TimeoutError."""
        try:
            line = self.q.get(timeout=max(0.0, timeout))
        except queue.Empty:
            raise TimeoutError(
                f"{self.name}: no output within {timeout:.0f} s (log: {self.logpath})"
            ) from None
        if line is not None and line.startswith("ERROR"):
            raise RuntimeError(f"{self.name}: {line[6:]} (log: {self.logpath})")
        return line

    def expect(self, prefix, timeout):
        """Skips lines until one starts with prefix; returns it."""
        end = time.monotonic() + timeout
        while True:
            line = self.line(end - time.monotonic())
            if line is None:
                raise RuntimeError(
                    f"{self.name}: exited (code {self.p.poll()}) before "
                    f"'{prefix}' (log: {self.logpath}){self.tail()}"
                )
            if line.startswith(prefix):
                return line

    def result(self, timeout):
        return json.loads(self.expect("RESULT ", timeout)[7:])

    def send(self, text):
        try:
            self.p.stdin.write(text + "\n")
            self.p.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass

    def wait_event(self, what, key=None, timeout=30.0, after=0.0):
        """The first EVENT `what` (for `key`) with t > after: its t, or None on timeout."""
        end = time.monotonic() + timeout
        with self.cv:
            while True:
                for w, t, rest in self.events:
                    if w == what and t > after and (key is None or rest.split()[0] == key):
                        return t
                left = end - time.monotonic()
                if left <= 0 or (self.eof and self.p.poll() is not None):
                    return None
                self.cv.wait(min(left, 0.5))

    def signal(self, sig):
        try:
            os.kill(self.p.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self, timeout=10.0):
        """Close stdin, SIGTERM, then SIGKILL (the whole session) if still running."""
        if self.p.poll() is None:
            try:
                self.p.stdin.close()
            except OSError:
                pass
            self.signal(signal.SIGTERM)
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.h.procs.discard(self)
        self.logf.close()

    def kill(self):
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            pass

    def tail(self):
        try:
            with open(self.logpath, "rb") as f:
                lines = f.read().decode(errors="replace").strip().splitlines()[-6:]
            return "\n    " + "\n    ".join(lines) if lines else ""
        except OSError:
            return ""

    def cpu_seconds(self):
        with open(f"/proc/{self.p.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def proc_status(self, field):
        with open(f"/proc/{self.p.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        return None


# ---------------------------------------------------------------------- wire ping --
def _bson_ping():
    e = (
        b"\x10ping\x00"
        + struct.pack("<i", 1)
        + b"\x02$db\x00"
        + struct.pack("<i", 6)
        + b"admin\x00"
    )
    return struct.pack("<i", len(e) + 5) + e + b"\x00"


def wire_ping(host, port, n, warmup=200):
    """Round trips of a hand-made OP_MSG {ping: 1} on a raw socket (no driver): the
    physical floor of one command on this machine and server. Returns sorted ms."""
    doc = _bson_ping()
    s = socket.create_connection((host, port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    out = []
    try:
        for i in range(warmup + n):
            msg = (
                struct.pack("<iiii", 16 + 4 + 1 + len(doc), i + 1, 0, 2013)
                + b"\x00\x00\x00\x00\x00"
                + doc
            )
            t0 = time.perf_counter()
            s.sendall(msg)
            buf = b""
            while len(buf) < 4 or len(buf) < struct.unpack_from("<i", buf)[0]:
                chunk = s.recv(65536)
                if not chunk:
                    raise ConnectionError("server closed the ping connection")
                buf += chunk
            t1 = time.perf_counter()
            if i >= warmup:
                out.append((t1 - t0) * 1e3)
    finally:
        s.close()
    return sorted(out)


# -------------------------------------------------------------------------- harness --
class Harness:
    def __init__(self, args, keep_logs=False):
        self.args = args
        self.profile = ("renewal" if args.renewal else "") + ("-quick" if args.quick else "")
        self.profile = {"": "full", "-quick": "quick"}.get(self.profile, self.profile)
        self.p = dict(PROFILES[self.profile])
        if args.trials:
            self.p["trials"] = args.trials
        if args.scale_sizes:
            self.p["scale_sizes"] = [int(x) for x in args.scale_sizes.split(",")]
        if args.scale_ttl:
            self.p["scale_ttl"] = args.scale_ttl
        if args.scale_window:
            self.p["scale_window"] = args.scale_window
        self.p["scale_kinds"] = (args.scale_kinds or "lock").split(",")
        for k in self.p["scale_kinds"]:
            if k not in ("lock", "semaphore"):
                raise SystemExit(f"unknown --scale-kinds entry {k} (lock, semaphore)")
        if args.scale_modes:
            self.p["scale_modes"] = args.scale_modes.split(",")
            for m in self.p["scale_modes"]:
                if m not in SCALE_MODES:
                    raise SystemExit(
                        f"harness: unknown scale mode {m} (one of {', '.join(SCALE_MODES)})"
                    )
        # Output files: NAME.md, NAME.json, NAME.png and NAME-logs/ (results: logs/).
        self.name = args.name or (
            ("renewal-quick" if args.quick else "renewal") if args.renewal else "results"
        )
        self.results_dir = os.path.abspath(args.results)
        os.makedirs(self.results_dir, exist_ok=True)
        self.logdir = os.path.join(
            self.results_dir, "logs" if self.name == "results" else f"{self.name}-logs"
        )
        os.makedirs(self.logdir, exist_ok=True)
        for f in [] if keep_logs else os.listdir(self.logdir):
            if f.endswith(".log"):
                os.remove(os.path.join(self.logdir, f))
        self.procs = set()
        self.prefix = f"meb{os.getpid()}_"
        self.out = {"meta": {}, "scenarios": {}}
        self.md_sections = []
        self.partial_md = None  # a scenario's table so far (written while it runs)
        self.server_uri = None
        self.server_kind = None
        self.server_proc = None
        self.hub = None
        self.ttl_monitor = None
        self.stop_evt = threading.Event()
        self.slow_failover = None
        self.notes = dict(n.split("=", 1) for n in (args.note or []))
        self.failover_results = {}

    # ---- setup -------------------------------------------------------------------
    def start_server(self):
        uri = os.environ.get("MONGOELECTOR_TEST_URI")
        if self.args.uri:
            uri = self.args.uri
        if uri:
            self.server_uri = uri
            self.server_kind = os.environ.get("MONGOELECTOR_TEST_SERVER", "") or "uri"
            return
        kind = self.args.server
        ts = os.path.join(HERE, "..", "servers", "testserver.sh")
        r = subprocess.run(["bash", ts, "start", kind], capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            raise SystemExit(f"harness: cannot start {kind}:\n{r.stderr}")
        self.server_uri = r.stdout.strip().splitlines()[-1]
        self.server_kind = kind
        if kind == "ferretdb" and not self.args.unsafe:
            # Ours refuses FerretDB (non-atomic findAndModify) unless told otherwise;
            # electors refuse it even then, so the election scenarios report errors.
            self.args.unsafe = True
            log("FerretDB: our lockers run with allow_unsafe_server; our electors refuse it")
        self.server_started = True
        log(f"started {kind} at {self.server_uri}")

    def stop_server(self):
        if getattr(self, "server_started", False):
            ts = os.path.join(HERE, "..", "servers", "testserver.sh")
            subprocess.run(["bash", ts, "stop", self.server_uri], capture_output=True, timeout=60)
            log(f"stopped the server {self.server_uri}")

    def host_port(self):
        rest = self.server_uri.split("://", 1)[1].split("/", 1)[0].split("?", 1)[0]
        rest = rest.split("@")[-1].split(",")[0]
        host, _, port = rest.rpartition(":")
        return host or "127.0.0.1", int(port or 27017)

    def pymongo_client(self):
        import pymongo

        return pymongo.MongoClient(self.server_uri, serverSelectionTimeoutMS=10000)

    def describe_server(self):
        c = self.pymongo_client()
        try:
            bi = c.admin.command("buildInfo")
            hello = c.admin.command("isMaster")  # mongo-java-server knows no "hello"
            try:
                process = c.admin.command("serverStatus").get("process", "")
            except Exception:  # noqa: BLE001
                process = ""
        finally:
            c.close()
        if self.server_kind in ("uri", ""):  # tell the servers without a TTL monitor apart
            if "ferretdb" in bi or "ferretdb" in str(bi.get("version", "")).lower():
                self.server_kind = "ferretdb"
            elif process == "java":
                self.server_kind = "java"
        names = {
            "java": "mongo-java-server 1.47.0 (in-memory backend)",
            "ferretdb": "FerretDB v1.24.0 (SQLite backend)",
        }
        desc = names.get(self.server_kind, f"{self.server_uri}")
        return {
            "kind": self.server_kind,
            "description": desc,
            "uri": self.server_uri,
            "version": bi.get("version"),
            "maxWireVersion": hello.get("maxWireVersion"),
            "loopback": self.host_port()[0] in ("127.0.0.1", "localhost", "::1"),
        }

    def ttl_monitor_wanted(self):
        m = self.args.ttl_monitor
        if m == "auto":
            return self.server_kind in ("java", "ferretdb")
        return m == "on"

    def start_ttl_monitor(self):
        """MongoDB's TTL monitor, emulated: every period, delete the documents of every
        TTL index (expireAfterSeconds) of our databases whose date field has passed."""
        period = self.p["ttl_monitor_period"]
        self.ttl_runs = 0
        self.ttl_deleted = 0

        def sweep(client):
            now = dt.datetime.now(dt.timezone.utc)
            for name in client.list_database_names():
                if not name.startswith(self.prefix):
                    continue
                db = client[name]
                for coll in db.list_collection_names():
                    try:
                        idx = db[coll].index_information()
                    except Exception:  # noqa: BLE001
                        continue
                    ttl_fields = (
                        {"ts_expire": 0}
                        if coll in ("mongolocker", "elector.locks", "ops_new")
                        else {}
                    )
                    for spec in idx.values():
                        if "expireAfterSeconds" in spec and len(spec["key"]) == 1:
                            ttl_fields[spec["key"][0][0]] = float(spec["expireAfterSeconds"])
                    for field, after in ttl_fields.items():
                        limit = now - dt.timedelta(seconds=after)
                        r = db[coll].delete_many({field: {"$lt": limit}})
                        self.ttl_deleted += r.deleted_count

        def run():
            client = self.pymongo_client()
            next_t = time.monotonic() + period
            while not self.stop_evt.wait(max(0.0, next_t - time.monotonic())):
                next_t += period
                try:
                    sweep(client)
                    self.ttl_runs += 1
                except Exception as e:  # noqa: BLE001
                    log(f"TTL monitor emulation: {e}")
            client.close()

        self.ttl_monitor = threading.Thread(target=run, name="ttl-monitor", daemon=True)
        self.ttl_monitor.start()
        log(f"emulating MongoDB's TTL monitor (every {period:.0f} s)")

    def make_contenders(self):
        a = self.args
        cs = []
        if a.original_python:
            cs.append(
                Contender(
                    "original",
                    "original 1.0.2 (Python, pymongo)",
                    [a.original_python, os.path.join(HERE, "contender.py")],
                    impl="original",
                    ours=False,
                    python=True,
                    needs_ttl_monitor=True,
                )
            )
            cs.append(
                Contender(
                    "original-bounded",
                    "original 1.0.2 on a client whose calls are bounded (timeoutMS)",
                    [a.original_python, os.path.join(HERE, "contender.py")],
                    impl="original-bounded",
                    ours=False,
                    python=True,
                    needs_ttl_monitor=True,
                    scenarios={"cycles"},
                )
            )
        if a.ours_python:
            cs.append(
                Contender(
                    "py-db",
                    "ours, Python + pymongo Database",
                    [a.ours_python, os.path.join(HERE, "contender.py")],
                    impl="db",
                    python=True,
                )
            )
            cs.append(
                Contender(
                    "py-uri",
                    "ours, Python + URI (libmongoc)",
                    [a.ours_python, os.path.join(HERE, "contender.py")],
                    impl="uri",
                    python=True,
                )
            )
            cs.append(
                Contender(
                    "py-aio",
                    "ours, asyncio + pymongo AsyncDatabase",
                    [a.ours_python, os.path.join(HERE, "contender.py")],
                    impl="aio-db",
                    python=True,
                    scenarios={"cycles", "lag"},
                )
            )
            cs.append(
                Contender(
                    "floor",
                    "floor: ours' commands issued directly with pymongo",
                    [a.ours_python, os.path.join(HERE, "contender.py")],
                    impl="floor",
                    ours=False,
                    python=True,
                    scenarios={"ops", "cycles"},
                )
            )
            cs.append(
                Contender(
                    "aio-floor",
                    "aio floor: py-aio's commands issued directly with pymongo's AsyncDatabase",
                    [a.ours_python, os.path.join(HERE, "contender.py")],
                    impl="aio-floor",
                    ours=False,
                    python=True,
                    scenarios={"cycles", "lag"},
                )
            )
        if a.c_driver:
            cs.append(Contender("c", "ours, C API", [a.c_driver]))
        if a.go_driver:
            cs.append(Contender("go", "ours, Go binding", [a.go_driver]))
        wanted = set(a.contenders.split(",")) if a.contenders else None
        if wanted is None and a.renewal:  # the original has no lease: not in the figures
            wanted = {"py-db", "py-uri", "c", "go"}
        if wanted:
            cs = [c for c in cs if c.id in wanted]
        return cs

    def probe(self, c):
        try:
            pr = Proc(
                self, c, "probe", f"probe-{c.id}", uri=self.server_uri, db=self.prefix + "probe"
            )
            try:
                c.info = pr.result(60)
            finally:
                pr.stop()
        except Exception as e:  # noqa: BLE001
            c.error = str(e)
            log(f"contender {c.id} cannot run: {e}")

    def db(self, scenario, c, extra=""):
        return f"{self.prefix}{scenario}_{c.id}{extra}".replace("-", "_")[:60]

    def drop_dbs(self, pattern=""):
        try:
            client = self.pymongo_client()
        except Exception as e:  # noqa: BLE001
            log(f"dropping databases: {e}")
            return
        try:
            for name in client.list_database_names():
                if not name.startswith(self.prefix + pattern):
                    continue
                try:
                    client.drop_database(name)
                except Exception:  # noqa: BLE001
                    # mongo-java-server fails dropDatabase after the original re-created
                    # a TTL index ("index not found"): drop the collections one by one.
                    for coll in client[name].list_collection_names():
                        try:
                            client[name].drop_collection(coll)
                        except Exception as e:  # noqa: BLE001
                            log(f"dropping {name}.{coll}: {e}")
        except Exception as e:  # noqa: BLE001
            log(f"dropping databases: {e}")
        finally:
            client.close()

    def runnable(self):
        scenario = getattr(self, "current", None)
        return [
            c
            for c in self.contenders
            if not c.error and (scenario is None or c.scenarios is None or scenario in c.scenarios)
        ]

    def emit(self, md):
        print(md + "\n", flush=True)
        self.md_sections.append(md)
        self.partial_md = None

    # ---- scenario 1: commands per operation ----------------------------------------
    OPS = [
        ("acquire_defaults", "acquire after own release, library defaults"),
        ("acquire_present", "acquire, document present (released, kept)"),
        ("acquire_absent", "acquire, document absent (deleted by release)"),
        ("contended", "contended attempt (non-blocking, held by another)"),
        ("release_defaults", "release, library defaults"),
        ("release_keep", "release, keep the document"),
        ("release_delete", "release, delete the document"),
        ("touch", "touch (renew)"),
        ("locked", "locked()"),
        ("owned", "owned()"),
        ("new_key", "new locker + first acquire of a new key"),
        ("leader_poll", "leader poll, report_status=False"),
        ("follower_poll", "follower poll, report_status=False"),
        ("leader_poll_status", "leader poll, report_status=True"),
        ("follower_poll_status", "follower poll, report_status=True"),
    ]

    def run_ops(self):
        n = self.p["ops_n"]
        res = {}
        for c in self.runnable():
            log(f"ops: {c.id}")
            proxy = self.hub.new_proxy(*self.host_port(), f"ops-{c.id}")
            snaps = {}
            r = {"ops": {}, "skipped": {}}
            try:
                pr = Proc(
                    self,
                    c,
                    "ops",
                    f"ops-{c.id}",
                    uri=proxy.uri(),
                    other_uri=self.server_uri,
                    db=self.db("ops", c),
                    n=n,
                )
                start = proxy.snapshot()
                try:
                    end_t = time.monotonic() + 120 + n * 2
                    while True:
                        line = pr.line(end_t - time.monotonic())
                        if line is None:
                            break
                        if line.startswith("MARK "):
                            op, _, edge = line[5:].rpartition(":")
                            snap = proxy.snapshot()
                            if edge == "begin":
                                snaps[op] = snap
                            else:
                                d = counting_proxy.diff(snap, snaps.pop(op))
                                r["ops"].setdefault(op, []).append(d)
                            pr.send("OK")
                        elif line.startswith("SKIP "):
                            _, op, why = line.split(" ", 2)
                            r["skipped"][op] = why
                        elif line.startswith("RESULT "):
                            r["latency"] = json.loads(line[7:])["latency_ms"]
                    if pr.p.wait(30) != 0:
                        raise RuntimeError(f"exited with {pr.p.returncode}{pr.tail()}")
                finally:
                    pr.stop()
                total = counting_proxy.diff(proxy.snapshot(), start)
                r["run_total"] = total
            except Exception as e:  # noqa: BLE001
                r["error"] = str(e)
                log(f"ops: {c.id} failed: {e}")
            finally:
                proxy.close()
            res[c.id] = self.summarize_ops(r)
        self.drop_dbs("ops")
        self.out["scenarios"]["ops"] = res
        self.emit(self.md_ops(res))

    @staticmethod
    def summarize_ops(r):
        out = {
            "error": r.get("error"),
            "skipped": r.get("skipped", {}),
            "ops": {},
            "run_monitoring": (r.get("run_total") or {}).get("monitor", {}),
            "run_app": (r.get("run_total") or {}).get("app", {}),
        }
        for op, diffs in r.get("ops", {}).items():
            totals = [sum(d["app"].values()) for d in diffs]
            names = {}
            for d in diffs:
                for k, v in d["app"].items():
                    names[k] = names.get(k, 0) + v
            mon = sum(sum(d["monitor"].values()) for d in diffs)
            lat = (r.get("latency") or {}).get(op) or []
            out["ops"][op] = {
                "n": len(diffs),
                "mean": sum(totals) / len(totals),
                "min": min(totals),
                "max": max(totals),
                "by_name": {k: v / len(diffs) for k, v in sorted(names.items())},
                "monitoring_in_window": mon,
                "p50_ms_proxied": pct(lat, 50) if lat else None,
            }
        return out

    def ops_cell(self, o):
        if o is None:
            return None
        if o["min"] == o["max"]:
            return f"{o['min']}"
        return f"{o['mean']:.2f} ({o['min']}–{o['max']})"

    def md_ops(self, res):
        cs = [c for c in self.contenders if c.id in res]
        lines = [
            f"### 1. Database commands per operation (exact counts, n = {self.p['ops_n']} each)",
            "",
            "Counted by a loopback proxy that parses each contender's wire protocol "
            "(commands only, before the reply). Handshakes and monitoring (hello on "
            "monitor connections) are excluded and shown below. A range (min–max) means "
            "the count varied between iterations.",
            "",
        ]
        header = ["operation"] + [c.id for c in cs]
        rows = []
        for op, label in self.OPS:
            row = [label]
            for c in cs:
                r = res[c.id]
                if r.get("error") and op not in r["ops"]:
                    row.append("error")
                elif op in r["ops"]:
                    row.append(self.ops_cell(r["ops"][op]))
                elif op in r["skipped"]:
                    row.append("n/a")
                else:
                    row.append("–")
            rows.append(row)
        for who in ("leader", "follower"):
            row = [f"status report ({who} poll: with − without)"]
            for c in cs:
                o = res[c.id]["ops"]
                a, b = o.get(f"{who}_poll_status"), o.get(f"{who}_poll")
                row.append(fmt(a["mean"] - b["mean"], "g") if a and b else "–")
            rows.append(row)
        row = ["acquire+release cycle, library defaults"]
        for c in cs:
            o = res[c.id]["ops"]
            a, b = o.get("acquire_defaults"), o.get("release_defaults")
            row.append(fmt(a["mean"] + b["mean"], "g") if a and b else "–")
        rows.append(row)
        lines.append(md_table(header, rows))
        lines += ["", "Commands by name (mean per operation; p50 latency through the proxy):", ""]
        header = ["operation"] + [c.id for c in cs]
        rows = []
        for op, label in self.OPS:
            row = [op]
            any_ = False
            for c in cs:
                o = res[c.id]["ops"].get(op)
                if o:
                    any_ = True
                    names = (
                        ", ".join(f"{k}×{fmt(v, 'g')}" for k, v in o["by_name"].items()) or "none"
                    )
                    row.append(f"{names} ({fmt(o['p50_ms_proxied'], '.3f')} ms)")
                else:
                    row.append(res[c.id]["skipped"].get(op, "–"))
            if any_:
                rows.append(row)
        lines.append(md_table(header, rows, ["---"] * len(header)))
        lines += [
            "",
            "Monitoring and handshakes during each contender's whole ops run "
            "(not counted above): "
            + "; ".join(
                f"{c.id}: "
                + (
                    ", ".join(f"{k}×{v}" for k, v in sorted(res[c.id]["run_monitoring"].items()))
                    or "none"
                )
                for c in cs
            ),
        ]
        notes = []
        for c in cs:
            if res[c.id].get("error"):
                notes.append(f"* {c.id}: ERROR {res[c.id]['error']}")
            for op, why in res[c.id]["skipped"].items():
                notes.append(f"* {c.id}, {op}: n/a — {why}")
        notes.append(
            "* library defaults: the original and ours through Python delete the "
            "document on release (`delete_on_release=True`); the C API keeps it "
            "(`delete_on_release=0`)."
        )
        lines += [""] + sorted(set(notes), key=notes.index)
        return "\n".join(lines)

    # ---- scenario 2: cycles ----------------------------------------------------------
    def run_cycles(self):
        host, port = self.host_port()
        S, T, R = self.p["cycle_seconds"], self.p["cycle_threads"], self.p["cycle_rounds"]
        res = {"ping": [], "contenders": {}, "rounds": R}
        ping_all = []

        def ping():
            try:
                v = wire_ping(host, port, self.p["ping_n"])
                ping_all.extend(v)
                res["ping"].append({"p50_ms": pct(v, 50), "p99_ms": pct(v, 99), "n": len(v)})
            except Exception as e:  # noqa: BLE001
                log(f"ping failed: {e}")

        def cycles(c, label, threads, clients):
            try:
                pr = Proc(
                    self,
                    c,
                    "cycles",
                    f"cycles-{c.id}-{label}",
                    uri=self.server_uri,
                    db=self.db("cyc", c),
                    threads=threads,
                    clients=clients,
                    seconds=S,
                    warmup=self.p["cycle_warmup"],
                )
                try:
                    return pr.result(S + 90)
                finally:
                    pr.stop()
            except Exception as e:  # noqa: BLE001
                log(f"cycles: {c.id} {label} failed: {e}")
                return {"error": str(e)}

        # One thread: R rounds, the contenders alternating (the order reversed every other
        # round) so that a drift of the machine spreads over all of them; the median round
        # (by cycles/s) is the contender's figure.
        cs = self.runnable()
        for c in cs:
            res["contenders"][c.id] = {"1t_rounds": []}
        ping()
        for rnd in range(R):
            for c in cs if rnd % 2 == 0 else list(reversed(cs)):
                log(f"cycles: {c.id} round {rnd + 1}/{R}")
                res["contenders"][c.id]["1t_rounds"].append(cycles(c, "1t", 1, "shared"))
            ping()
        for c in cs:
            r = res["contenders"][c.id]
            ok = sorted(
                (x for x in r["1t_rounds"] if "cycles" in x),
                key=lambda x: x["cycles"] / x["seconds"],
            )
            r["1t"] = ok[len(ok) // 2] if ok else r["1t_rounds"][0]
            for label, threads, clients in (
                (f"{T}t_shared", T, "shared"),
                (f"{T}t_each", T, "each"),
            ):
                log(f"cycles: {c.id} {label}")
                r[label] = cycles(c, label, threads, clients)
        self.drop_dbs("cyc")
        res["ping_p50_ms"] = pct(ping_all, 50)
        res["ping_p99_ms"] = pct(ping_all, 99)
        self.out["scenarios"]["cycles"] = res
        self.emit(self.md_cycles(res))

    def md_cycles(self, res):
        T = self.p["cycle_threads"]
        ping50 = res.get("ping_p50_ms")
        floor = 2 * ping50 if ping50 else None
        ops = self.out["scenarios"].get("ops", {})
        orig = res["contenders"].get("original", {}).get("1t", {})
        lines = [
            f"### 2. Uncontended acquire+release cycles ({self.p['cycle_seconds']:g} s each, "
            "library defaults, one thread, own client, no proxy; "
            f"median of {res.get('rounds', 1)} alternating rounds)",
            "",
            f"Server ping round trip (raw OP_MSG on a socket, no driver, measured between "
            f"contenders): p50 {fmt(ping50, '.3f')} ms, p99 {fmt(res.get('ping_p99_ms'), '.3f')} ms. "
            f"Floor: two round trips a cycle = {fmt(floor, '.3f')} ms "
            f"({fmt(1e3 / floor if floor else None, '.0f')} cycles/s).",
            "",
        ]
        header = [
            "contender",
            "cycles/s",
            "rounds",
            "p50 ms",
            "p99 ms",
            "p50 / 2 pings",
            "cycles/s vs original",
            "p50 vs original",
            "cycles/s vs floor",
            "layer µs/cycle",
            "commands/cycle",
            "CPU ms/cycle",
        ]
        rows = []
        cmds_note = False
        # Each contender against the floor of its kind: the asyncio ones (impl aio-*)
        # against `aio-floor`, the others against `floor`.
        aio = {c.id for c in self.contenders if (c.impl or "").startswith("aio-")}
        floors = {}
        for fid in ("floor", "aio-floor"):
            fx = res["contenders"].get(fid, {}).get("1t", {})
            floors[fid] = (fx, fx["cycles"] / fx["seconds"] if fx.get("cycles") else None)
        for cid, r in res["contenders"].items():
            x = r.get("1t", {})
            if "error" in x:
                rows.append([cid, "error"] + [""] * 10)
                continue
            fid = "aio-floor" if cid in aio else "floor"
            fl, frate = floors[fid]
            rate = x["cycles"] / x["seconds"]
            rounds = [y["cycles"] / y["seconds"] for y in r.get("1t_rounds", []) if "cycles" in y]
            orate = orig["cycles"] / orig["seconds"] if orig.get("cycles") else None
            layer = (
                (x["p50_ms"] - fl["p50_ms"]) * 1e3
                if fl.get("p50_ms") is not None and x.get("p50_ms") is not None
                else None
            )
            o = ops.get(cid, {}).get("ops", {})
            cmds = (
                o["acquire_defaults"]["mean"] + o["release_defaults"]["mean"]
                if "acquire_defaults" in o and "release_defaults" in o
                else None
            )
            if cmds is None:
                cmds_note = True
            rows.append(
                [
                    cid,
                    fmt(rate, ".0f"),
                    "–".join(fmt(v, ".0f") for v in (min(rounds), max(rounds)))
                    if len(rounds) > 1
                    else "",
                    fmt(x.get("p50_ms"), ".3f"),
                    fmt(x.get("p99_ms"), ".3f"),
                    fmt(ratio(x.get("p50_ms"), floor), ".2f") + "×",
                    fmt(ratio(rate, orate), ".2f") + "×" if cid != "original" else "1×",
                    fmt(ratio(x.get("p50_ms"), orig.get("p50_ms")), ".2f") + "×"
                    if cid != "original"
                    else "1×",
                    fmt(ratio(rate, frate), ".2f") + "×" if cid != fid else "1×",
                    fmt(layer, "+.0f") if cid != fid else "0",
                    fmt(cmds, "g"),
                    fmt(x["cpu_s"] * 1e3 / max(1, x["cycles"]), ".3f"),
                ]
            )
        lines.append(md_table(header, rows))
        lines += [
            "",
            f"{T} threads, each looping acquire+release on its own key, sharing one "
            "client vs a client each (total cycles/s):",
            "",
        ]
        header = [
            "contender",
            "1 thread",
            f"{T} threads, one shared client",
            f"{T} threads, a client each",
            "shared / each",
            "shared vs original",
        ]
        rows = []
        oshared = res["contenders"].get("original", {}).get(f"{T}t_shared", {})
        orate_sh = oshared["cycles"] / oshared["seconds"] if oshared.get("cycles") else None
        for cid, r in res["contenders"].items():

            def rate(k):
                x = r.get(k, {})
                return x["cycles"] / x["seconds"] if "cycles" in x else None

            one, sh, each = rate("1t"), rate(f"{T}t_shared"), rate(f"{T}t_each")
            rows.append(
                [
                    cid,
                    fmt(one, ".0f"),
                    fmt(sh, ".0f"),
                    fmt(each, ".0f"),
                    fmt(ratio(sh, each), ".2f") + "×",
                    (fmt(ratio(sh, orate_sh), ".2f") + "×") if cid != "original" else "1×",
                ]
            )
        lines.append(md_table(header, rows))
        if cmds_note:
            lines += ["", "* commands/cycle comes from the ops scenario (not run here)."]
        lines += [
            "",
            "* Python contenders: the original and `py-db` share one pymongo "
            "`MongoClient` or make one per thread; `py-uri` shares one "
            "`mongoelector.Client` or makes one per thread; `c` one "
            "`mongoelector_client` or one per thread.",
            f"* {os.cpu_count()} cores: with {T} threads the client and the server compete "
            "for them.",
            "* `floor`: the commands ours sends for a lock (same filters, updates, write "
            "concern, maxTimeMS), issued directly with pymongo `find_one_and_update` + "
            "`delete_one`: no layer at all (its probe checks that the commands match ours'). "
            "`layer µs/cycle`: a contender's p50 minus the floor's, i.e. what our layer "
            "adds to one acquire + release.",
            "* `py-aio`: ours through `mongoelector.aio` on a pymongo `AsyncDatabase`, "
            f"tasks on one event loop instead of threads ({T} tasks: one shared "
            "`AsyncMongoClient` or one each).",
            "* `aio-floor`: the commands `py-aio` sends with its defaults (the document is "
            "kept: `findAndModify` + `update` a cycle), issued directly on a pymongo "
            "`AsyncDatabase` (its probe checks that they match ours'). The asyncio rows' "
            "`cycles/s vs floor` and `layer µs/cycle` are against `aio-floor`, the others' "
            "against `floor`.",
        ]
        return "\n".join(lines)

    # ---- scenario: event loop lag under contention (asyncio contenders) ---------------
    def run_lag(self):
        n, S = self.p["lag_tasks"], self.p["lag_seconds"]
        res = {}
        for c in [c for c in self.runnable() if (c.impl or "").startswith("aio-")]:
            log(f"lag: {c.id} ({n} tasks, {S:g} s)")
            try:
                pr = Proc(
                    self,
                    c,
                    "lag",
                    f"lag-{c.id}",
                    uri=self.server_uri,
                    db=self.db("lag", c),
                    threads=n,
                    seconds=S,
                )
                try:
                    res[c.id] = pr.result(S + 120)
                finally:
                    pr.stop()
            except Exception as e:  # noqa: BLE001
                log(f"lag: {c.id} failed: {e}")
                res[c.id] = {"error": str(e)}
        self.drop_dbs("lag")
        self.out["scenarios"]["lag"] = res
        self.emit(self.md_lag(res))

    def md_lag(self, res):
        n, S = self.p["lag_tasks"], self.p["lag_seconds"]
        header = ["contender", "acquisitions/s", "loop lag p50 ms", "p99 ms", "max ms", "probes"]
        rows = []
        for cid, x in res.items():
            if "error" in x:
                rows.append([cid, "error: " + x["error"][:60]] + [""] * 4)
                continue
            rows.append(
                [
                    cid,
                    fmt(x["acquisitions"] / x["seconds"], ".0f"),
                    fmt(x["lag_p50_ms"], ".3f"),
                    fmt(x["lag_p99_ms"], ".3f"),
                    fmt(x["lag_max_ms"], ".3f"),
                    fmt(x["probes"], "d"),
                ]
            )
        return "\n".join(
            [
                f"### Event loop lag: {n} tasks contending for one key ({S:g} s)",
                "",
                md_table(header, rows),
                "",
                "* Each task: blocking `acquire()` (default step), hold 1 ms, `release()`; a "
                "probe task sleeps 1 ms over and over and records how late the loop wakes it.",
            ]
        )

    # ---- scenario 3: failover ---------------------------------------------------------
    def failover_wave(self, c, mode, trials, ttl):
        """`trials` elections at once on distinct keys: one leader process per key, one
        process hosting every key's follower; leaders are killed (or stopped) one by
        one, `stagger` apart; failover = the follower's on_leader - the signal."""
        monitor = c.needs_ttl_monitor and mode == "kill"
        # MongoDB's TTL monitor (or our emulation) runs every 60 s: spread the kills over
        # one period so that the trials sample its phase instead of sharing one sweep.
        period = self.p["ttl_monitor_period"]
        stagger = max(0.25, period / trials) if monitor else 0.25
        db = self.db("fo", c, "_" + mode)
        keys = [f"fo-{mode}-{i}" for i in range(trials)]
        leaders, fol = [], None
        out = {
            "mode": mode,
            "ttl": ttl,
            "trials": trials,
            "stagger_s": stagger,
            "failover_s": [],
            "timeouts": 0,
        }
        try:
            for i, k in enumerate(keys):
                leaders.append(
                    Proc(
                        self,
                        c,
                        "elect",
                        f"fo-{c.id}-{mode}-leader-{i}",
                        uri=self.server_uri,
                        db=db,
                        keys=k,
                        ttl=ttl,
                    )
                )
            for lp, k in zip(leaders, keys):
                if lp.wait_event("leader", k, timeout=30) is None:
                    raise RuntimeError(f"{lp.name} did not lead within 30 s (log {lp.logpath})")
            fol = Proc(
                self,
                c,
                "elect",
                f"fo-{c.id}-{mode}-followers",
                uri=self.server_uri,
                db=db,
                keys=",".join(keys),
                ttl=ttl,
            )
            for k in keys:
                if fol.wait_event("started", k, timeout=60) is None:
                    raise RuntimeError(f"{fol.name} did not start{fol.tail()}")
            time.sleep(ttl)  # every follower has looked at its lock at least once
            for k in keys:
                if fol.wait_event("leader", k, timeout=0) is not None:
                    raise RuntimeError(f"follower of {k} led before the leader was stopped")
            sig = signal.SIGKILL if mode == "kill" else signal.SIGTERM
            t0 = time.monotonic()
            kills = []
            for i, lp in enumerate(leaders):
                time.sleep(max(0.0, t0 + i * stagger - time.monotonic()))
                kills.append(time.monotonic())
                lp.signal(sig)
            budget = ttl * 3 + 10 + (period + ttl if monitor else 0)
            for k, tk in zip(keys, kills):
                t = fol.wait_event(
                    "leader", k, timeout=max(0.0, tk + budget - time.monotonic()), after=tk
                )
                if t is None:
                    out["timeouts"] += 1
                else:
                    out["failover_s"].append(t - tk)
            if mode == "term":
                stops = []
                for lp in leaders:
                    try:
                        lp.p.wait(15)
                    except subprocess.TimeoutExpired:
                        pass
                    ev = [e for e in lp.events if e[0] == "stopped"]
                    if ev:
                        stops.append(float(ev[0][2]))
                out["stop_call_s"] = stops
            out["budget_s"] = budget
        except Exception as e:  # noqa: BLE001
            out["error"] = str(e)
            log(f"failover {c.id} {mode}: {e}")
        finally:
            for pr in leaders + ([fol] if fol else []):
                pr.kill()
                pr.stop(1)
        v = out["failover_s"]
        if v:
            out.update(
                p50=pct(v, 50), p95=pct(v, 95), max=max(v), min=min(v), mean=statistics.mean(v)
            )
        return out

    def start_slow_failover(self):
        """The original's kill -9 trials wait for the (emulated) TTL monitor, about a
        minute whatever the trial count: run them on threads alongside the other waves
        (--quick: from the start of the run, alongside every scenario)."""
        if self.slow_failover is not None:
            return
        trials, ttl = self.p["trials"], self.p["failover_ttl"]
        self.failover_results = {}
        slow = [(c, "kill") for c in self.runnable() if c.needs_ttl_monitor]

        def run(c, m):
            log(f"failover: {c.id} {m} ({trials} trials, in the background)")
            self.failover_results[(c.id, m)] = self.failover_wave(c, m, trials, ttl)

        self.slow_failover = [threading.Thread(target=run, args=j, daemon=True) for j in slow]
        for t in self.slow_failover:
            t.start()

    def run_failover(self):
        trials, ttl = self.p["trials"], self.p["failover_ttl"]
        res = {}
        self.start_slow_failover()
        results = self.failover_results
        fast = [
            (c, m)
            for c in self.runnable()
            for m in ("kill", "term")
            if (c.id, m) not in results and not (c.needs_ttl_monitor and m == "kill")
        ]

        def run(job):
            c, m = job
            log(f"failover: {c.id} {m} ({trials} trials)")
            results[(c.id, m)] = self.failover_wave(c, m, trials, ttl)

        if self.args.quick:  # all waves at once: timer-bound, a few processes each
            threads = [threading.Thread(target=run, args=(j,)) for j in fast]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        else:
            for j in fast:
                run(j)
        for t in self.slow_failover:
            t.join()
        for (cid, m), r in list(results.items()):
            res.setdefault(cid, {})[m] = r
        self.drop_dbs("fo")
        self.out["scenarios"]["failover"] = res
        self.emit(self.md_failover(res))

    def md_failover(self, res):
        ttl, trials = self.p["failover_ttl"], self.p["trials"]
        lines = [
            f"### 3. Failover, ttl {ttl:g} s ({trials} trials per row)",
            "",
            "Time from the signal to the leader process to the moment another process's "
            "`on_leader` runs. kill -9: the lease must run out; graceful: SIGTERM, the "
            "leader calls `stop()` (releases), a follower takes over.",
            "",
        ]
        header = [
            "contender",
            "stop",
            "p50 s",
            "p95 s",
            "max s",
            "min s",
            "vs original (p50)",
            "no takeover",
            "notes",
        ]
        rows = []
        for cid in [c.id for c in self.contenders if c.id in res]:
            for m in ("kill", "term"):
                r = res[cid].get(m)
                if r is None:
                    continue
                o = res.get("original", {}).get(m, {})
                notes = []
                if r.get("error"):
                    notes.append("ERROR " + r["error"][:120])
                if cid == "original" and m == "kill":
                    if self.ttl_monitor:
                        notes.append(
                            f"needs MongoDB's TTL monitor: emulated (expired documents "
                            f"deleted every {self.p['ttl_monitor_period']:.0f} s), kills "
                            f"{r['stagger_s']:.1f} s apart to sample its phase"
                        )
                    else:
                        notes.append(
                            f"the server's own TTL monitor (about every 60 s); kills "
                            f"{r['stagger_s']:.1f} s apart to sample its phase"
                        )
                if m == "term" and r.get("stop_call_s"):
                    notes.append(f"stop() took p50 {pct(r['stop_call_s'], 50):.2f} s")
                rows.append(
                    [
                        cid,
                        "kill -9" if m == "kill" else "graceful",
                        fmt(r.get("p50")),
                        fmt(r.get("p95")),
                        fmt(r.get("max")),
                        fmt(r.get("min")),
                        (fmt(ratio(r.get("p50"), o.get("p50")), ".2f") + "×")
                        if cid != "original"
                        else "1×",
                        f"{r['timeouts']} / {r['trials']}",
                        "; ".join(notes),
                    ]
                )
        lines.append(md_table(header, rows, ["---", "---"] + ["---:"] * 6 + ["---"]))
        lines += [
            "",
            "* no takeover: trials where no follower led within the budget "
            "(3 ttl + 10 s, plus one TTL-monitor period and one ttl for the original "
            "after kill -9).",
        ]
        return "\n".join(lines)

    # ---- scenario 4: contention ------------------------------------------------------
    def run_contention(self):
        P, S = self.p["contention_procs"], self.p["contention_seconds"]
        res = {}
        for c in self.runnable():
            log(f"contention: {c.id} ({P} processes, {S:g} s)")
            procs = []
            r = {}
            try:
                db = self.db("cont", c)
                for i in range(P):
                    procs.append(
                        Proc(
                            self,
                            c,
                            "contend",
                            f"contend-{c.id}-{i}",
                            uri=self.server_uri,
                            db=db,
                            key="contended",
                            ttl=600,
                            seconds=S,
                        )
                    )
                for pr in procs:
                    pr.expect("READY", 90)
                start = time.monotonic() + 1.0
                for pr in procs:
                    pr.send(f"GO {start:.6f}")
                got = [pr.result(S + 60) for pr in procs]
                counts = [g["acquisitions"] for g in got]
                total = sum(counts)
                r = {
                    "counts": counts,
                    "total": total,
                    "per_s": total / S,
                    "share_min": min(counts) / total if total else None,
                    "share_max": max(counts) / total if total else None,
                    "jain": (total * total) / (P * sum(x * x for x in counts)) if total else None,
                    "wait_p50_ms": [g.get("wait_p50_ms") for g in got],
                    "wait_max_ms": [g.get("wait_max_ms") for g in got],
                }
            except Exception as e:  # noqa: BLE001
                r = {"error": str(e)}
                log(f"contention {c.id}: {e}")
            finally:
                for pr in procs:
                    pr.stop(5)
            res[c.id] = r
        self.drop_dbs("cont")
        self.out["scenarios"]["contention"] = res
        self.emit(self.md_contention(res))

    def md_contention(self, res):
        P, S = self.p["contention_procs"], self.p["contention_seconds"]
        lines = [
            f"### 4. Contention: {P} processes looping acquire/release on one key for {S:g} s",
            "",
            "Blocking `acquire()` with the library's default retry step (0.25 s), then "
            "`release()`, library defaults otherwise. Share = a process's part of all "
            "acquisitions; Jain's index: 1 = perfectly even, 1/n = one process got all.",
            "",
        ]
        header = [
            "contender",
            "acquisitions/s",
            "vs original",
            "share min",
            "share max",
            "Jain's index",
            "per process",
        ]
        rows = []
        o = res.get("original", {})
        for cid, r in res.items():
            if r.get("error"):
                rows.append([cid, "ERROR " + r["error"][:100], "", "", "", "", ""])
                continue
            rows.append(
                [
                    cid,
                    fmt(r["per_s"], ".1f"),
                    (fmt(ratio(r["per_s"], o.get("per_s")), ".2f") + "×")
                    if cid != "original"
                    else "1×",
                    fmt(100 * r["share_min"], ".1f") + " %" if r["share_min"] is not None else "–",
                    fmt(100 * r["share_max"], ".1f") + " %" if r["share_max"] is not None else "–",
                    fmt(r["jain"], ".3f"),
                    " ".join(str(x) for x in r["counts"]),
                ]
            )
        lines.append(md_table(header, rows, ["---"] + ["---:"] * 5 + ["---"]))
        return "\n".join(lines)

    # ---- scenario 5: cost in the host process ------------------------------------------
    def run_cost(self):
        I = self.p["idle_seconds"]
        res = {}
        procs = {}
        for c in self.runnable():
            try:
                procs[c.id] = Proc(
                    self,
                    c,
                    "cost",
                    f"cost-{c.id}",
                    uri=self.server_uri,
                    db=self.db("cost", c),
                    ttl=self.p["cost_ttl"],
                    idle=I,
                    spin=self.p["spin_seconds"],
                    spin_ttl=self.p["spin_ttl"],
                    rounds=self.p["spin_rounds"],
                )
            except Exception as e:  # noqa: BLE001
                res[c.id] = {"error": str(e)}
        log(f"cost: {len(procs)} idle electors for {I:g} s (in parallel)")
        for cid, pr in procs.items():
            try:
                pr.expect("READY", 90)
            except Exception as e:  # noqa: BLE001
                res[cid] = {"error": str(e)}
        for cid, pr in procs.items():
            if cid in res:
                continue
            try:
                res[cid] = {"idle": pr.result(I + 60)}
            except Exception as e:  # noqa: BLE001
                res[cid] = {"error": str(e)}
        for c in self.runnable():
            pr = procs.get(c.id)
            if pr is None or "error" in res.get(c.id, {}):
                continue
            if c.python:
                log(f"cost: GIL spin test {c.id}")
                pr.send("SPIN")
                try:
                    res[c.id]["spin"] = pr.result(
                        self.p["spin_rounds"] * (2 * self.p["spin_seconds"] + 15) + 60
                    )
                except Exception as e:  # noqa: BLE001
                    res[c.id]["spin"] = {"error": str(e)}
            pr.stop(10)
        for pr in procs.values():
            pr.stop(5)
        self.drop_dbs("cost")
        self.out["scenarios"]["cost"] = res
        self.emit(self.md_cost(res))

    def md_cost(self, res):
        I = self.p["idle_seconds"]
        lines = [
            f"### 5. Cost in the host process: one idle leading elector (ttl "
            f"{self.p['cost_ttl']:g} s) over {I:g} s",
            "",
            "CPU = user + system seconds of the whole process during the idle window "
            '(all its threads: elector, driver monitors). RSS at the end; "elector '
            'adds" = RSS minus RSS before the elector was made (client already '
            "connected for the Python contenders). GIL: a CPU-bound pure-Python loop "
            f"in the main thread, {self.p['spin_rounds']} paired rounds of "
            f"{self.p['spin_seconds']:g} s without / with a leading elector at ttl "
            f"{self.p['spin_ttl']:g} s (renewing every ttl/3 or ttl/2: a busy one); "
            "slowdown = median of loop rate without / with − 1 (in brackets: the "
            "rounds' interquartile range, i.e. the noise of this machine).",
            "",
        ]
        header = [
            "contender",
            "CPU s / 60 s",
            "CPU vs original",
            "RSS MiB",
            "elector adds MiB",
            "threads",
            "GIL slowdown",
        ]
        rows = []
        o = res.get("original", {}).get("idle", {})
        ocpu = o["cpu_s"] * 60 / o["seconds"] if o else None
        for cid, r in res.items():
            if r.get("error"):
                rows.append([cid, "ERROR " + r["error"][:100]] + [""] * 5)
                continue
            x = r["idle"]
            cpu60 = x["cpu_s"] * 60 / x["seconds"]
            s = r.get("spin")
            if s is None:
                gil = "n/a (no Python)"
            elif s.get("error"):
                gil = "error"
            else:
                rs = s["ratios"]
                gil = (
                    f"{100 * (s['slowdown_median'] - 1):+.1f} % "
                    f"({100 * (pct(rs, 25) - 1):+.0f} … {100 * (pct(rs, 75) - 1):+.0f})"
                )
            rows.append(
                [
                    cid,
                    fmt(cpu60, ".3f"),
                    (fmt(ratio(cpu60, ocpu), ".2f") + "×") if cid != "original" else "1×",
                    fmt(x["rss_kib"] / 1024, ".1f"),
                    fmt((x["rss_kib"] - x["rss_base_kib"]) / 1024, ".1f"),
                    f"{x['threads_base']} → {x['threads']}",
                    gil,
                ]
            )
        lines.append(md_table(header, rows))
        return "\n".join(lines)

    # ---- scenario 6: database load of an election ------------------------------------------
    def run_load(self):
        N, ttl, W = self.p["load_nodes"], self.p["load_ttl"], self.p["load_window"]
        res = {}
        runs = {}
        log(f"load: {N}-node elections at ttl {ttl:g} s, {W:g} s window (all contenders at once)")
        for c in self.runnable():
            proxy = self.hub.new_proxy(*self.host_port(), f"load-{c.id}")
            procs = []
            try:
                for i in range(N):
                    procs.append(
                        Proc(
                            self,
                            c,
                            "elect",
                            f"load-{c.id}-{i}",
                            uri=proxy.uri(),
                            db=self.db("load", c),
                            keys="load",
                            ttl=ttl,
                        )
                    )
                runs[c.id] = (proxy, procs)
            except Exception as e:  # noqa: BLE001
                res[c.id] = {"error": str(e)}
                for pr in procs:
                    pr.stop(2)
                proxy.close()
        for cid, (proxy, procs) in runs.items():
            for pr in procs:
                if pr.wait_event("started", "load", timeout=90) is None:
                    res[cid] = {"error": f"{pr.name} did not start{pr.tail()}"}
            deadline = time.monotonic() + 60
            while cid not in res and not any(
                pr.wait_event("leader", "load", timeout=0) for pr in procs
            ):
                if time.monotonic() > deadline:
                    res[cid] = {"error": "no leader within 60 s"}
                time.sleep(0.1)
        time.sleep(3.0)  # past the start-up transient
        before = {cid: proxy.snapshot() for cid, (proxy, _) in runs.items()}
        t0 = time.monotonic()
        time.sleep(W)
        after = {cid: proxy.snapshot() for cid, (proxy, _) in runs.items()}
        secs = time.monotonic() - t0
        for cid, (proxy, procs) in runs.items():
            leaders = sum(1 for pr in procs if [e for e in pr.events if e[0] == "leader"])
            for pr in procs:  # no graceful stop: the original's waits up to a whole ttl
                pr.kill()
                pr.stop(1)
            proxy.close()
            if cid in res:
                continue
            d = counting_proxy.diff(after[cid], before[cid])
            res[cid] = {
                "seconds": secs,
                "app_per_s": sum(d["app"].values()) / secs,
                "monitor_per_s": sum(d["monitor"].values()) / secs,
                "by_name_per_s": {k: v / secs for k, v in sorted(d["app"].items())},
                "monitor_by_name_per_s": {k: v / secs for k, v in sorted(d["monitor"].items())},
                "connections": after[cid]["conns_open"],
                "nodes_that_led": leaders,
            }
        self.drop_dbs("load")
        self.out["scenarios"]["load"] = res
        self.emit(self.md_load(res))

    def md_load(self, res):
        N, ttl, W = self.p["load_nodes"], self.p["load_ttl"], self.p["load_window"]
        lines = [
            f"### 6. Database load of a {N}-node election, ttl {ttl:g} s, steady state "
            f"({W:g} s window)",
            "",
            f"{N} elector processes per contender (report_status=True, the default), all "
            "contenders at once, each through its own counting proxy.",
            "",
        ]
        header = [
            "contender",
            "commands/s",
            "vs original",
            "by command (per s)",
            "monitoring/s (apart)",
            "connections",
        ]
        rows = []
        o = res.get("original", {})
        for cid, r in res.items():
            if r.get("error"):
                rows.append([cid, "ERROR " + r["error"][:100], "", "", "", ""])
                continue
            rows.append(
                [
                    cid,
                    fmt(r["app_per_s"], ".2f"),
                    (fmt(ratio(r["app_per_s"], o.get("app_per_s")), ".2f") + "×")
                    if cid != "original"
                    else "1×",
                    ", ".join(f"{k} {v:.2f}" for k, v in r["by_name_per_s"].items()),
                    fmt(r["monitor_per_s"], ".2f"),
                    str(r["connections"]),
                ]
            )
        lines.append(md_table(header, rows, ["---", "---:", "---:", "---", "---:", "---:"]))
        return "\n".join(lines)

    # ---- scenario 7: scale --------------------------------------------------------------
    def scale_entries(self):
        """(row label, contender, mode, extra environment, kind) of every scale process:
        ours in each renewal mode of --scale-modes (batched: the library's default;
        per-key: the process runs with MONGOELECTOR_BATCH_RENEWALS=0, so each lease renews
        with its own command) and each kind of --scale-kinds (lock leases; semaphore: one
        slot of a limit-2 key per lease, C contender only), the original in its only one
        (a touch() loop)."""
        out = []
        for c in self.runnable():
            if c.ours:
                for kind in self.p.get("scale_kinds", ["lock"]):
                    if kind == "semaphore" and c.id != "c":
                        continue
                    for mode in self.p["scale_modes"]:
                        label = f"{c.id} {mode}" + (" semaphore" if kind == "semaphore" else "")
                        out.append((label, c, mode, SCALE_MODE_ENV[mode], kind))
            else:
                out.append(
                    (
                        f"{c.id} (touch() loop in a thread: no lease API)",
                        c,
                        "touch-thread",
                        {},
                        "lock",
                    )
                )
        return out

    def run_scale(self):
        sizes, ttl = self.p["scale_sizes"], self.p["scale_ttl"]
        interval = ttl / 3
        # A whole number of renewal periods (ttl/3), so that every key renews equally often
        # inside the window whatever its phase.
        W = max(1, round(self.p["scale_window"] / interval)) * interval
        self.p["scale_window"] = W
        # The window starts one renew interval after the last key is held: by then every
        # lease has renewed once and batched renewals have formed their batches.
        settle = max(1.0, interval)
        self.p["scale_settle"] = settle
        res = {}
        for label, c, mode, env, kind in self.scale_entries():
            log(f"scale: {label} sizes {sizes}")
            tag = f"{c.id}-{mode}" + ("-sem" if kind == "semaphore" else "")
            proxy = self.hub.new_proxy(*self.host_port(), f"scale-{tag}")
            rows = []
            pr = None
            try:
                pr = Proc(
                    self,
                    c,
                    "scale",
                    f"scale-{tag}",
                    extra_env=env,
                    uri=proxy.uri(),
                    db=self.db(
                        "scale",
                        c,
                        "_" + mode.replace("-", "") + ("_sem" if kind == "semaphore" else ""),
                    ),
                    ttl=ttl,
                    mode=mode,
                    kind=None if kind == "lock" else kind,
                )
                pr.expect("READY", 90)
                held = 0
                for n in sizes:
                    pr.send(f"GROW {n}")
                    # Acquiring is concurrent in the contenders, but mongo-java-server scans
                    # the collection for each filter: allow 0.1 s a key on top.
                    budget = self.p["scale_grow_budget"] + 0.1 * max(0, n - held)
                    try:
                        line = pr.expect("HOLDING", budget)
                    except TimeoutError:
                        rows.append(
                            {"keys": n, "error": f"acquiring {n} keys took over {budget:.0f} s"}
                        )
                        break
                    held = n
                    grow_s = float(line.split()[2])
                    time.sleep(settle)
                    pr.send("STATS")
                    st0 = pr.result(60)
                    s0, c0, t0 = proxy.snapshot(), pr.cpu_seconds(), time.monotonic()
                    time.sleep(W)
                    s1, c1, t1 = proxy.snapshot(), pr.cpu_seconds(), time.monotonic()
                    pr.send("STATS")
                    st = pr.result(60)
                    d = counting_proxy.diff(s1, s0)
                    secs = t1 - t0
                    with pr.cv:
                        lost_ev = [(t, rest.split()[0]) for w, t, rest in pr.events if w == "lost"]
                    in_window = {k for t, k in lost_ev if t0 <= t <= t1}
                    before = {k for t, k in lost_ev if t < t0}
                    app = sum(d["app"].values())
                    row = {
                        "keys": n,
                        "grow_s": grow_s,
                        "seconds": secs,
                        "settle_s": settle,
                        "app": app,
                        "app_per_s": app / secs,
                        "per_interval": app / (secs / interval),
                        "monitor_per_s": sum(d["monitor"].values()) / secs,
                        "by_name_per_s": {k: v / secs for k, v in d["app"].items()},
                        "by_name_per_interval": {
                            k: v / (secs / interval) for k, v in d["app"].items()
                        },
                        "cpu_s": c1 - c0,
                        "cpu_pct": 100 * (c1 - c0) / secs,
                        "threads": st.get("threads"),
                        "rss_mib": st.get("rss_kib", 0) / 1024,
                        "connections": s1["conns_open"],
                        # A lease that reported loss (on_lost, or its lost flag) during
                        # the window; losses are final, so the flags can only grow.
                        "lost": max(len(in_window), st.get("lost", 0) - st0.get("lost", 0)),
                        "lost_before": max(len(before), st0.get("lost", 0)),
                        "lost_total": st.get("lost", 0),
                        "touch_failed": st.get("touch_failed", 0) - st0.get("touch_failed", 0),
                    }
                    if "renewals" in st and "renewals" in st0:
                        row["renewals"] = st["renewals"] - st0["renewals"]
                        row["renewals_per_key_interval"] = row["renewals"] / n / (secs / interval)
                        row["renewal_failures"] = st["renewal_failures"] - st0["renewal_failures"]
                        row["round_trips"] = st["round_trips"] - st0["round_trips"]
                    rows.append(row)
                    log(
                        f"scale: {label} N={n}: {row['per_interval']:.1f} commands per renew "
                        f"interval, lost {row['lost']}"
                    )
                pr.send("QUIT")
            except Exception as e:  # noqa: BLE001
                rows.append({"error": str(e)})
                log(f"scale {label}: {e}")
            finally:
                if pr:
                    pr.stop(30)
                proxy.close()
            res[label] = {"contender": c.id, "mode": mode, "kind": kind, "rows": rows}
            self.drop_dbs("scale")
            # What is measured so far goes to the results at once: a long run that is
            # interrupted still leaves its figures (marked partial).
            self.out["scenarios"]["scale"] = res
            self.partial_md = (
                self.md_scale(res) + "\n\n**Partial**: written after "
                f"{len(res)} of {len(self.scale_entries())} processes; the run "
                "was still going or was interrupted."
            )
            self.write()
        self.out["scenarios"]["scale"] = res
        self.emit(self.md_scale(res))

    def md_scale(self, res):
        ttl, W = self.p["scale_ttl"], self.p["scale_window"]
        interval = ttl / 3
        modes = self.p.get("scale_modes", SCALE_MODES)
        settle = self.p.get("scale_settle", max(1.0, interval))
        num = "7. " if not self.args.renewal else ""
        lines = [
            f"### {num}Scale: N keys held and renewed by one process (ttl {ttl:g} s, "
            f"renew interval {interval:g} s, {W:g} s window per N)",
            "",
            "Ours: one keep-alive lease per key, one client, keys acquired on 8 threads "
            "at once; the window starts one renew interval after the last key is held "
            f"({settle:g} s). Modes: **batched** = the library's default (one renewer per "
            "client sends the renewals due together: `renew_many`, 2 commands per "
            "chunk of up to 1000 keys on MongoDB); **per-key** = the same process with "
            "`MONGOELECTOR_BATCH_RENEWALS=0` (each lease renews with its own command, "
            "the behaviour before issue #17). Commands: counted by a loopback proxy "
            "(monitoring apart). CPU: user + system seconds of the whole process in the "
            "window. Threads and RSS at the end of the window; connections open to the "
            "server (monitors included). Lost: leases that reported loss (on_lost or "
            "their lost flag) during the window — must be 0.",
            "",
        ]
        by_c = {}
        for label, r in res.items():
            by_c.setdefault(r["contender"], {})[r["mode"]] = r["rows"]
        first = {"c": 0, "py-uri": 1, "py-db": 2, "go": 3}
        ours = sorted(
            (c for c in self.contenders if c.id in by_c),
            key=lambda c: (not c.ours, first.get(c.id, 9)),
        )
        short = {"batched": "B", "per-key": "P"}
        metrics = [
            ("commands/s", lambda x: fmt(x["app_per_s"], ".1f")),
            (
                f"commands per renew interval ({interval:g} s)",
                lambda x: fmt(x["per_interval"], ".1f"),
            ),
            (f"CPU s in {W:g} s", lambda x: fmt(x["cpu_s"], ".2f")),
            ("threads", lambda x: str(x["threads"])),
            ("connections", lambda x: str(x["connections"])),
            (
                "lost",
                lambda x: (
                    str(x["lost"])
                    + (f" (+{x['lost_before']} before)" if x.get("lost_before") else "")
                ),
            ),
            ("RSS MiB", lambda x: fmt(x["rss_mib"], ".1f")),
        ]
        for c in ours:
            ms = list(modes) if c.ours else list(by_c[c.id])
            rows_by_mode = {m: {x.get("keys"): x for x in by_c[c.id].get(m, [])} for m in ms}
            errors = [(m, x) for m in ms for x in by_c[c.id].get(m, []) if "error" in x]
            sizes = [n for n in self.p["scale_sizes"] if any(n in rows_by_mode[m] for m in ms)]
            lines += [
                f"**{c.id}** ({c.label}"
                + ("" if c.ours else ": a touch() loop in a thread, no lease API")
                + ")"
                + (": " + ", ".join(f"{m} = {short.get(m, m)}" for m in ms) if len(ms) > 1 else ""),
                "",
            ]
            header = ["N"]
            for name, _ in metrics:
                for m in ms:
                    header.append(f"{name} {short.get(m, m)}" if len(ms) > 1 else name)
            both = "batched" in ms and "per-key" in ms
            if both:
                header.append("per-key / batched commands")
            rows = []
            for n in sizes:
                row = [str(n)]
                for _, f in metrics:
                    for m in ms:
                        x = rows_by_mode[m].get(n)
                        row.append(
                            "ERROR"
                            if x is not None and "error" in x
                            else f(x)
                            if x is not None
                            else "–"
                        )
                if both:
                    b, p = rows_by_mode["batched"].get(n), rows_by_mode["per-key"].get(n)
                    ok = b and p and "error" not in b and "error" not in p
                    row.append(
                        fmt(ratio(p["app_per_s"], b["app_per_s"]), ".1f") + "×" if ok else "–"
                    )
                rows.append(row)
            lines.append(md_table(header, rows))
            for m, x in errors:
                lines.append(
                    f"\n* {c.id} {m}"
                    + (f", N = {x['keys']}" if "keys" in x else "")
                    + f": ERROR {x['error'][:300]}"
                )
            lines.append("")
        lines += [
            "Details (every process): commands per renew interval by name; renewals "
            "per key per renew interval as the library counts them (≈ 1: every key "
            "renewed in time); time to acquire the keys added for this N.",
            "",
        ]
        header = [
            "contender / mode",
            "N",
            "commands per interval, by name",
            "renewals per key per interval",
            "renewal failures",
            "CPU %",
            "acquire (s)",
            "lost: window / before / total",
        ]
        rows = []
        order = {c.id: i for i, c in enumerate(ours)}
        for label, r in sorted(
            res.items(),
            key=lambda kv: (
                order.get(kv[1]["contender"], 99),
                modes.index(kv[1]["mode"]) if kv[1]["mode"] in modes else 99,
            ),
        ):
            for x in r["rows"]:
                if "error" in x:
                    rows.append([label, x.get("keys", ""), "ERROR " + x["error"][:100]] + [""] * 5)
                    continue
                names = (
                    ", ".join(f"{k} {v:.1f}" for k, v in sorted(x["by_name_per_interval"].items()))
                    or "none"
                )
                lost = f"{x['lost']} / {x.get('lost_before', 0)} / {x.get('lost_total', x['lost'])}"
                if r["mode"] == "touch-thread":
                    lost = f"touch() found it expired: {x['touch_failed']}"
                rows.append(
                    [
                        label,
                        x["keys"],
                        names,
                        fmt(x.get("renewals_per_key_interval"), ".2f"),
                        fmt(x.get("renewal_failures"), "d"),
                        fmt(x["cpu_pct"], ".2f"),
                        fmt(x["grow_s"], ".2f"),
                        lost,
                    ]
                )
        lines.append(
            md_table(header, rows, ["---", "---:", "---", "---:", "---:", "---:", "---:", "---"])
        )
        lines += [
            "",
            f"* Per-key renewal sends N × 3/ttl commands/s ({3 / ttl:.2f} per key per s "
            f"at ttl {ttl:g}), one per key per renew interval; batched renewal about 2 per "
            "chunk of 1000 keys per interval (once the batches have formed; a single key "
            "renews with one command).",
            "* `isMaster` (or `hello`) on the application connections is the client's "
            "server-time sample (about one a minute, both modes); the rest are the "
            "renewals.",
            "* Threads: the renewer's are flat in N in both modes; the contenders' own "
            "acquiring threads are gone by the window (Go's runtime keeps its idle OS "
            "threads).",
        ]
        if not self.args.renewal:
            lines.append(
                "* 5000 keys (`--scale-sizes 1,10,100,1000,5000`, or "
                "`tests/bench/renewal.sh`) is not in the default profile: at 5000 "
                "documents mongo-java-server, not the client, is the bottleneck "
                '(tests/bench/README.md, "Batched renewal").'
            )
        return "\n".join(lines)

    # ---- output ---------------------------------------------------------------------------
    def meta(self):
        try:
            commit = subprocess.run(
                ["git", "-C", HERE, "rev-parse", "--short=12", "HEAD"],
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.strip()
            dirty = subprocess.run(
                ["git", "-C", HERE, "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
                timeout=20,
            ).stdout.strip()
        except Exception:  # noqa: BLE001
            commit, dirty = "?", ""
        cpu = "?"
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith("model name"):
                        cpu = line.split(":", 1)[1].strip()
                        break
        except OSError:
            pass
        try:
            load = os.getloadavg()
        except OSError:
            load = None
        return {
            "date": now_iso(),
            "commit": commit + ("+dirty" if dirty else ""),
            "machine": f"{platform.node()}: {cpu}, {os.cpu_count()} cores, "
            f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB, "
            f"{platform.system()} {platform.release()}",
            "loadavg_start": load,
            "profile": self.profile,
            "command": os.environ.get("MONGOELECTOR_BENCH_COMMAND")
            or " ".join(["python3", "tests/bench/harness.py"] + sys.argv[1:]),
            "params": self.p,
            "python": sys.version.split()[0],
        }

    def header_md(self):
        m = self.out["meta"]
        s = m.get("server", {})
        title = (
            "# Batched renewal: keep-alive leases renewed in batches vs key by key (issue #17)"
            if self.args.renewal
            else "# mongoelector benchmark (issue #10)"
        )
        lines = [
            title,
            "",
            f"* command: `{m.get('command', '?')}`",
            f"* date: {m['date']}; commit {m['commit']}; profile {m['profile']}",
            f"* machine: {m['machine']}; load average at start "
            f"{', '.join(f'{x:.2f}' for x in m['loadavg_start']) if m.get('loadavg_start') else '?'}",
            f"* server: {s.get('description', '?')}, version {s.get('version', '?')}, "
            f"maxWireVersion {s.get('maxWireVersion', '?')}, "
            f"{'loopback' if s.get('loopback') else 'remote'} ({s.get('uri', '')})",
            f"* TTL monitor: {m.get('ttl_monitor')}",
            "* contenders:",
        ]
        for c in self.contenders:
            info = c.info or {}
            extra = ", ".join(f"{k} {v}" for k, v in info.items() if k not in ("phase",))
            note = self.notes.get(c.id) or (
                self.notes.get("python") if c.python and c.ours else None
            )
            if note:
                extra += f" — **{note}**"
            lines.append(
                f"  * `{c.id}`: {c.label}"
                + (f" — {extra}" if extra else "")
                + (f" — **cannot run: {c.error}**" if c.error else "")
            )
        if self.args.unsafe:
            lines.append(
                "* our lockers run with `allow_unsafe_server` (the server's findAndModify "
                "is not atomic); our electors refuse such servers."
            )
        if not self.args.renewal:
            lines.append('* ratios ("vs original") are ours / original from this run.')
        return "\n".join(lines)

    def write(self, final=False):
        md = (
            self.header_md()
            + "\n\n"
            + "\n\n".join(self.md_sections + ([self.partial_md] if self.partial_md else []))
        )
        if final and self.out["meta"].get("runtime_s") is not None:
            md += f"\n\nRuntime: {self.out['meta']['runtime_s']:.0f} s.\n"
        with open(os.path.join(self.results_dir, self.name + ".md"), "w") as f:
            f.write(md + "\n")
        with open(os.path.join(self.results_dir, self.name + ".json"), "w") as f:
            json.dump(self.out, f, indent=1, default=str)

    def plot(self):
        """One PNG, up to four panels: failover after kill -9 and after a graceful stop
        (every trial, box = quartiles), the uncontended cycle latency CDF, and commands
        per operation."""
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            from matplotlib.ticker import FuncFormatter, NullFormatter
        except ImportError as e:
            log(f"no plot: {e}")
            return None
        sc = self.out["scenarios"]
        fo, cyc, ops = sc.get("failover"), sc.get("cycles"), sc.get("ops")
        panels = [
            p
            for p in (("kill", fo), ("term", fo), ("cdf", cyc), ("ops", ops))
            if p[1] and "error" not in p[1]
        ]
        if not panels:
            return None
        ncol = 2 if len(panels) > 1 else 1
        nrow = (len(panels) + 1) // 2 if len(panels) > 1 else 1
        fig, axes = plt.subplots(nrow, ncol, figsize=(7.2 * ncol, 5.0 * nrow + 0.8), squeeze=False)
        colors = {
            "original": "#d62728",
            "original-bounded": "#ff9896",
            "py-db": "#1f77b4",
            "py-uri": "#2ca02c",
            "c": "#9467bd",
            "go": "#8c564b",
            "py-aio": "#17becf",
            "floor": "#7f7f7f",
            "aio-floor": "#bcbd22",
        }
        order = [c.id for c in self.contenders]
        plain = FuncFormatter(lambda v, _: f"{v:g}")
        flat = [ax for row in axes for ax in row]
        for ax in flat[len(panels) :]:
            ax.axis("off")
        for ax, (kind, data) in zip(flat, panels):
            if kind in ("kill", "term"):
                ids = [cid for cid in order if cid in data and data[cid].get(kind)]
                vals = [data[cid][kind].get("failover_s") or [] for cid in ids]
                pos = list(range(1, len(ids) + 1))
                nonempty = [(p, v) for p, v in zip(pos, vals) if v]
                if nonempty:
                    ax.boxplot(
                        [v for _, v in nonempty],
                        positions=[p for p, _ in nonempty],
                        widths=0.5,
                        showfliers=False,
                        medianprops={"color": "black"},
                    )
                rnd = random.Random(1)
                logy = any(v and max(v) > 12 for v in vals)
                for p, cid, v in zip(pos, ids, vals):
                    r = data[cid][kind]
                    ax.scatter(
                        [p + rnd.uniform(-0.17, 0.17) for _ in v],
                        v,
                        s=16,
                        alpha=0.7,
                        color=colors.get(cid, "k"),
                        zorder=3,
                    )
                    label = f"p50 {r['p50']:.2f} s" if r.get("p50") is not None else "no data"
                    if r.get("timeouts"):
                        label += f"\n{r['timeouts']} no takeover"
                    if r.get("error"):
                        label += "\nerror"
                    ax.annotate(
                        label,
                        (p, 1.0),
                        xycoords=("data", "axes fraction"),
                        xytext=(0, -4),
                        textcoords="offset points",
                        ha="center",
                        va="top",
                        fontsize=8,
                    )
                ax.set_xticks(pos)
                ax.set_xticklabels(ids)
                ax.set_xlim(0.4, len(pos) + 0.6)
                ttl = self.p["failover_ttl"]
                if logy:
                    ax.set_yscale("log")
                    ax.yaxis.set_major_formatter(plain)
                    ax.yaxis.set_minor_formatter(NullFormatter())
                    ax.set_yticks([0.5, 1, 2, 5, 10, 20, 30, 60, 120])
                lo, hi = ax.get_ylim()
                ax.set_ylim(lo, hi * (1.6 if logy else 1.15))
                ax.axhline(ttl, ls="--", lw=0.8, color="gray")
                ax.text(
                    len(pos) + 0.55,
                    ttl,
                    f"ttl {ttl:g} s",
                    va="bottom",
                    ha="right",
                    fontsize=8,
                    color="gray",
                )
                ax.set_ylabel("seconds from signal to the new leader" + (" (log)" if logy else ""))
                what = (
                    "kill -9 of the leader"
                    if kind == "kill"
                    else "graceful stop (SIGTERM → stop())"
                )
                ax.set_title(
                    f"failover after {what}\nttl {ttl:g} s, {self.p['trials']} trials each",
                    fontsize=10,
                )
                ax.grid(axis="y", alpha=0.3, which="both")
                if kind == "kill" and "original" in ids and self.ttl_monitor:
                    ax.set_xlabel(
                        "original: expired locks freed by the (emulated) 60 s TTL monitor",
                        fontsize=8,
                    )
            elif kind == "cdf":
                for cid in order:
                    x = data["contenders"].get(cid, {}).get("1t", {})
                    q = x.get("cdf_ms")
                    if q:
                        ax.plot(
                            q,
                            [i / (len(q) - 1) for i in range(len(q))],
                            label=f"{cid} (p50 {x['p50_ms']:.2f} ms)",
                            color=colors.get(cid, "k"),
                        )
                if data.get("ping_p50_ms"):
                    f = 2 * data["ping_p50_ms"]
                    ax.axvline(f, ls="--", lw=0.8, color="gray")
                    ax.text(
                        f,
                        0.5,
                        f" floor: 2 ping round trips ({f:.3f} ms)",
                        fontsize=8,
                        color="gray",
                        rotation=90,
                        va="center",
                        ha="right",
                    )
                ax.set_xscale("log")
                ax.set_xticks([t for t in (0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100)])
                ax.xaxis.set_major_formatter(plain)
                ax.xaxis.set_minor_formatter(NullFormatter())
                curves = [
                    x["cdf_ms"]
                    for x in (data["contenders"].get(c, {}).get("1t", {}) for c in order)
                    if x.get("cdf_ms")
                ]
                lows = [q[0] for q in curves] + (
                    [2 * data["ping_p50_ms"]] if data.get("ping_p50_ms") else []
                )
                lo = min(lows or [0.1])
                hi = max([q[-1] for q in curves] or [10])
                ax.set_xlim(lo * 0.7, hi * 1.3)
                ax.set_xlabel("acquire + release latency, ms (log)")
                ax.set_ylabel("fraction of cycles")
                ax.set_title(
                    "uncontended acquire+release cycles, library defaults\n"
                    "(one thread, own client, no proxy)",
                    fontsize=10,
                )
                ax.legend(fontsize=8, loc="lower right")
                ax.grid(alpha=0.3, which="both")
            else:
                shown = [
                    ("acquire_defaults", "acquire\n(defaults)"),
                    ("acquire_absent", "acquire\n(doc absent)"),
                    ("contended", "contended\nattempt"),
                    ("release_defaults", "release"),
                    ("touch", "touch"),
                    ("leader_poll_status", "leader poll\n+ status"),
                    ("follower_poll_status", "follower poll\n+ status"),
                ]
                ids = [cid for cid in order if cid in data and data[cid].get("ops")]
                w = 0.8 / max(1, len(ids))
                for j, cid in enumerate(ids):
                    o = data[cid]["ops"]
                    xs = [i + (j - (len(ids) - 1) / 2) * w for i in range(len(shown))]
                    ys = [o[k]["mean"] if k in o else 0 for k, _ in shown]
                    ax.bar(xs, ys, width=w, color=colors.get(cid, "k"), label=cid)
                    for x_, y_, (k, _) in zip(xs, ys, shown):
                        ax.text(
                            x_,
                            y_ + 0.05,
                            f"{y_:g}" if k in o else "n/a",
                            ha="center",
                            va="bottom",
                            fontsize=6.5,
                        )
                ax.set_xticks(range(len(shown)))
                ax.set_xticklabels([lbl for _, lbl in shown], fontsize=8)
                ax.set_ylabel("database commands per operation")
                ax.set_title("database commands per operation (counted by the proxy)", fontsize=10)
                ax.legend(fontsize=8, loc="upper left")
                ax.grid(axis="y", alpha=0.3)
        m = self.out["meta"]
        fig.suptitle(
            f"mongoelector benchmark, {m['date']}, commit {m['commit']}, profile "
            f"{m['profile']}\n{m['machine']}\nserver: "
            f"{m.get('server', {}).get('description', '?')}",
            fontsize=9,
        )
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.55 / fig.get_figheight()))
        path = os.path.join(self.results_dir, self.name + ".png")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return path

    # ---- main ---------------------------------------------------------------------------
    def run(self):
        t_start = time.monotonic()
        self.start_server()
        self.out["meta"] = self.meta()
        try:
            self.out["meta"]["server"] = self.describe_server()
            self.hub = counting_proxy.ProxyHub()
            if self.ttl_monitor_wanted():
                self.start_ttl_monitor()
                self.out["meta"]["ttl_monitor"] = (
                    f"emulated by the harness (expired documents of every TTL index deleted "
                    f"every {self.p['ttl_monitor_period']:.0f} s, as MongoDB does): the server "
                    f"has none"
                )
            else:
                self.out["meta"]["ttl_monitor"] = "the server's own (not emulated)"
            self.contenders = self.make_contenders()
            for c in self.contenders:
                self.probe(c)
            self.drop_dbs()
            if not self.runnable():
                raise SystemExit("harness: no contender can run")
            self.out["meta"]["notes"] = self.notes
            self.out["meta"]["contenders"] = {
                c.id: {"label": c.label, "info": c.info, "error": c.error} for c in self.contenders
            }
            only = (
                self.args.only.split(",")
                if self.args.only
                else ["scale"]
                if self.args.renewal
                else SCENARIOS
            )
            for name in only:
                if name not in SCENARIOS:
                    raise SystemExit(
                        f"harness: unknown scenario {name} (one of {', '.join(SCENARIOS)})"
                    )
            print(self.header_md() + "\n", flush=True)
            if self.args.quick and "failover" in only:
                self.start_slow_failover()
            for name in SCENARIOS:
                if name not in only:
                    continue
                t0 = time.monotonic()
                self.current = name
                try:
                    getattr(self, "run_" + name)()
                except Exception as e:  # noqa: BLE001
                    traceback.print_exc()
                    self.out["scenarios"][name] = {"error": str(e)}
                    self.emit(f"### {name}\n\nERROR: {e}")
                self.out["meta"].setdefault("scenario_seconds", {})[name] = time.monotonic() - t0
                log(f"{name} done in {time.monotonic() - t0:.0f} s")
                self.write()
            self.out["meta"]["runtime_s"] = time.monotonic() - t_start
            png = self.plot()
            self.out["meta"]["plot"] = png
            self.write(final=True)
            log(
                f"results: {self.results_dir}/{self.name}.md, {self.name}.json"
                + (f", {self.name}.png" if png else "")
                + f"; logs in {self.logdir}"
            )
            log(f"runtime {self.out['meta']['runtime_s']:.0f} s")
        finally:
            self.stop_evt.set()
            for pr in list(self.procs):
                pr.kill()
            try:
                self.drop_dbs()
            except Exception:  # noqa: BLE001
                pass
            self.stop_server()


def main():
    ap = argparse.ArgumentParser(description="mongoelector benchmark harness (issue #10)")
    ap.add_argument("--quick", action="store_true", help="smoke-test profile (about 3 minutes)")
    ap.add_argument("--only", help=f"comma-separated scenarios: {','.join(SCENARIOS)}")
    ap.add_argument(
        "--contenders",
        help="comma-separated subset: original,original-bounded,py-db,py-uri,py-aio,floor,aio-floor,c,go",
    )
    ap.add_argument("--trials", type=int, help="failover trials per contender and stop kind")
    ap.add_argument("--scale-sizes", help="comma-separated key counts for the scale scenario")
    ap.add_argument(
        "--scale-kinds",
        help="kinds of hold in the scale scenario: lock,semaphore (default lock; "
        "semaphore: C contender only)",
    )
    ap.add_argument(
        "--scale-modes",
        help="renewal modes of ours in the scale scenario: batched,per-key (default both)",
    )
    ap.add_argument("--scale-ttl", type=float, help="ttl of the scale scenario's leases (s)")
    ap.add_argument(
        "--scale-window",
        type=float,
        help="measuring window per size, s (rounded to whole renew intervals, ttl/3)",
    )
    ap.add_argument(
        "--renewal",
        action="store_true",
        help="the figures of issue #17 (tests/bench/renewal.sh): scale only, N = "
        "1..5000, ttl 15, 60 s, batched vs per-key, ours only, into renewal.md",
    )
    ap.add_argument(
        "--name", help="base name of the output files (default results; renewal with --renewal)"
    )
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    ap.add_argument("--server", default="java", choices=["java", "ferretdb"])
    ap.add_argument(
        "--uri", help="use this server (default: $MONGOELECTOR_TEST_URI, else start --server)"
    )
    ap.add_argument("--ttl-monitor", default="auto", choices=["auto", "on", "off"])
    ap.add_argument(
        "--unsafe", action="store_true", help="allow_unsafe_server for our lockers (FerretDB)"
    )
    ap.add_argument("--original-python", help="python of the original's venv")
    ap.add_argument("--ours-python", help="python of a venv with our package")
    ap.add_argument("--c-driver", help="bench_contender binary")
    ap.add_argument("--go-driver", help="Go contender binary (optional)")
    ap.add_argument(
        "--note",
        action="append",
        metavar="ID=TEXT",
        help="a note on a contender (python = ours through Python), e.g. a stale build",
    )
    ap.add_argument(
        "--replot", metavar="DIR", help="only re-render DIR/results.png from DIR/results.json"
    )
    args = ap.parse_args()
    if args.replot:
        args.results = args.replot
        h = Harness(args, keep_logs=True)
        with open(os.path.join(h.results_dir, "results.json")) as f:
            h.out = json.load(f)
        h.p = h.out["meta"]["params"]
        h.args.quick = h.out["meta"]["profile"] == "quick"
        h.ttl_monitor = str(h.out["meta"].get("ttl_monitor", "")).startswith("emulated")
        h.contenders = [
            Contender(cid, c.get("label", cid), [])
            for cid, c in h.out["meta"].get("contenders", {}).items()
        ]
        print(h.plot())
        return
    h = Harness(args)

    def on_signal(sig, _frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    try:
        h.run()
    except KeyboardInterrupt:
        log("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
