"""Drives pool_bench (one process holding N keys on one client) for two builds of
libmongoelector.so.1 and prints their figures side by side (see pool.sh).

Connections are counted from the server side: the server's established TCP sockets on
its port (/proc/net/tcp and tcp6, local port = the server's; mongo-java-server's
serverStatus.connections is a constant), sampled while the process holds its keys,
minus the count before it started (this driver's own)."""

import argparse
import os
import subprocess
import sys
import threading
import time

import pymongo


def server_connections(port):
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    local_port = int(fields[1].rsplit(":", 1)[1], 16)
                    if local_port == port and fields[3] == "01":  # ESTABLISHED
                        count += 1
        except FileNotFoundError:
            pass
    return count


def run_one(bench, libdir, n, seconds, port):
    env = dict(os.environ, LD_LIBRARY_PATH=libdir)
    base = server_connections(port)
    proc = subprocess.Popen(
        [bench, str(n), str(seconds)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    peak = [0]
    holding = threading.Event()
    done = threading.Event()

    def sample():
        holding.wait()
        while not done.is_set():
            peak[0] = max(peak[0], server_connections(port) - base)
            time.sleep(0.25)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    figures = {}
    for line in proc.stdout:
        line = line.strip()
        if line == "holding":
            holding.set()
        elif line.startswith("n="):
            figures = dict(kv.split("=", 1) for kv in line.split())
    done.set()
    holding.set()
    err = proc.stderr.read()
    if proc.wait() != 0 or not figures:
        raise SystemExit("pool_bench %d failed (%s): %s" % (n, libdir, err.strip()))
    sampler.join()
    figures["connections"] = str(peak[0])
    return figures


def row(design, f, one_rss):
    n = int(f["n"])
    extra = max(n - 1, 1)
    rss_per_1000 = (int(f["rss_all_kib"]) - one_rss) * 1000.0 / extra / 1024.0 if n > 1 else 0.0
    return "| %s | %d | %s -> %s | %s | %s | %.2f | %s / %s | %s |" % (
        design,
        n,
        f["threads_one"],
        f["threads_all"],
        f["connections"],
        "%d" % (int(f["rss_all_kib"]) // 1024),
        rss_per_1000,
        f["missed"],
        f["renewals"],
        f["round_max_s"],
    )


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bench", required=True)
    p.add_argument("--design", action="append", required=True, help="NAME=LIBDIR")
    p.add_argument("--sizes", default="1,10,100,1000")
    p.add_argument("--seconds", type=float, default=20.0)
    args = p.parse_args()
    uri = os.environ["MONGOELECTOR_TEST_URI"]
    client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=5000)
    client.admin.command("ping")  # the driver's own connections exist before each base
    _, port = next(iter(client.nodes))
    sizes = [int(s) for s in args.sizes.split(",")]
    print(
        "\n| design | N keys | threads (1 key -> N) | server connections | RSS MiB | "
        "RSS MiB per 1000 lockers beyond the first | renewals missed / sent | slowest "
        "renewal round (s) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    sys.stdout.flush()
    for spec in args.design:
        name, libdir = spec.split("=", 1)
        for n in sizes:
            f = run_one(args.bench, libdir, n, args.seconds, port)
            print(row(name, f, int(f["rss_one_kib"])))
            sys.stdout.flush()
    print(
        "\nttl 15 s, every key renewed every 5 s for %.0f s; connections: the server's "
        "established sockets on its port while holding (server on this machine)." % args.seconds
    )


if __name__ == "__main__":
    main()
