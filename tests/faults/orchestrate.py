"""The fault suite's main program (run.sh calls it with the built native node and a Python
that has the `mongoelector` package). See README.md in this folder."""

import argparse
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checker  # noqa: E402
import faults  # noqa: E402
import report  # noqa: E402
import server as servers  # noqa: E402
from cluster import Cluster  # noqa: E402
from events import EventLog  # noqa: E402
from observer import Observer  # noqa: E402
from proxy import ProxyHub  # noqa: E402

PROFILES = {
    # ttl, rounds per fault (server-freeze-short: rounds_freeze_short)
    "ci": dict(ttl=1.5, rounds=2, rounds_freeze_short=2),
    "long": dict(ttl=2.0, rounds=16, rounds_freeze_short=40),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--profile", choices=PROFILES, default="ci")
    ap.add_argument(
        "--server", default="java", help="java | java-memory | ferretdb | mongodb://URI"
    )
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--ttl", type=float)
    ap.add_argument("--rounds", type=int, help="rounds per fault (overrides the profile)")
    ap.add_argument("--faults", help="comma-separated subset of: " + ",".join(faults.FAULTS))
    ap.add_argument("--clock-step", type=float, default=1.0, help="server clock step, in ttls")
    ap.add_argument("--native-node", required=True)
    ap.add_argument("--workdir")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    args = ap.parse_args()
    prof = PROFILES[args.profile]
    ttl = args.ttl or prof["ttl"]
    random.seed(args.seed)
    workdir = args.workdir or tempfile.mkdtemp(prefix="mongoelector-faults.")
    os.makedirs(workdir, exist_ok=True)
    print(
        f"fault suite: profile {args.profile}, server {args.server}, {args.nodes} nodes, "
        f"ttl {ttl:g} s, seed {args.seed}, logs in {workdir}",
        flush=True,
    )

    if args.server in ("java", "java-h2"):
        srv = servers.JavaServer(workdir, "h2")
    elif args.server == "java-memory":
        srv = servers.JavaServer(workdir, "memory")
    elif args.server == "ferretdb":
        srv = servers.FerretServer(workdir)
    else:
        srv = servers.ExternalServer(args.server)
    names = args.faults.split(",") if args.faults else list(faults.FAULTS)
    runnable = []
    for f in names:
        need = faults.NEEDS.get(f)
        if need and not getattr(srv, need, False):
            print(f"  skipping {f}: not possible on {srv.kind}")
        else:
            runnable.append(f)
    plan = []
    for f in runnable:
        n = args.rounds or (
            prof["rounds_freeze_short"] if f == "server-freeze-short" else prof["rounds"]
        )
        plan.append([f, n])
    nem = EventLog(os.path.join(workdir, "nemesis.jsonl"))
    hub = ProxyHub()
    key = f"fault-suite-{random.randrange(1 << 30)}"
    obs = Observer(srv.uri, key, os.path.join(workdir, "observer.jsonl"))
    obs.start()
    cluster = Cluster(
        workdir,
        srv,
        hub,
        nem,
        n=args.nodes,
        ttl=ttl,
        key=key,
        native_node=args.native_node,
        python=sys.executable,
    )
    ctx = faults.Ctx(cluster, srv, nem, ttl, args)
    t0 = time.monotonic()
    done = {f: 0 for f, _ in plan}
    try:
        nem.emit("run_begin", ttl=ttl, server=srv.kind, nodes=[n.name for n in cluster.nodes])
        cluster.start_all()
        # Round-robin over the faults until each has its rounds.
        while any(done[f] < n for f, n in plan):
            for f, n in plan:
                if done[f] >= n:
                    continue
                ok = faults.run_round(ctx, f, done[f] + 1)
                done[f] += 1
                print(
                    f"  {time.monotonic() - t0:6.1f} s  {f} round {done[f]}/{n}"
                    f"{'' if ok else ' (skipped: no stable leader)'}",
                    flush=True,
                )
        nem.emit("run_end")
    finally:
        cluster.close()
        obs.halt.set()
        obs.join(2)
        hub.close()
        srv.close()
    elapsed = time.monotonic() - t0
    run = checker.Run(workdir, ttl)
    freeze_short = 0.75 * ctx.freeze_bound
    table, failures, misses, live_fail, overlaps, stale, bad = report.build(
        run, args.profile, ttl, freeze_short
    )
    out = [
        f"## Fault suite ({args.profile} profile): {srv.kind}"
        f"{' (' + srv.backend + ' backend)' if hasattr(srv, 'backend') else ''}, "
        f"{args.nodes} nodes ({', '.join(n.name for n in cluster.nodes)}), ttl {ttl:g} s, "
        f"{sum(done.values())} rounds in {elapsed:.0f} s",
        "",
        table,
        "",
    ]
    out.append(
        "Goal figures: 0 overlaps among unpaused nodes, 0 stale writes accepted, 0 token "
        "order violations, partitioned leaders step down before their lease can be taken "
        f"(margin > 0), kill -9 failover <= ttl + 10 % ({1.1 * ttl:.2f} s), no leadership "
        f"lost for server pauses of {freeze_short:.2f} s (< ttl - (renew interval + margin) "
        f"= {ctx.freeze_bound:.2f} s)."
    )
    for t, ms, a, c in overlaps[:20]:
        out.append(
            f"- overlap {ms:.0f} ms at t={t:.3f}: {a.node}(pid {a.pid}, fence {a.fence}, "
            f"{a.why}) and {c.node}(pid {c.pid}, fence {c.fence}, {c.why})"
        )
    for t, node, token, hi in stale[:20]:
        out.append(f"- stale write accepted at t={t:.3f}: {node} token {token} < granted {hi}")
    for a, b in bad[:20]:
        out.append(
            f"- token order: {a.node} fence {a.fence} began {a.b:.3f}, then {b.node} "
            f"fence {b.fence} began {b.b:.3f}"
        )
    if failures:
        out.append("\nSAFETY VIOLATIONS:\n" + "\n".join("- " + f for f in failures))
    if misses:
        out.append("\nGoal figures missed:\n" + "\n".join("- " + m for m in misses))
    if live_fail:
        out.append(
            "\nLiveness clearly off (long profile fails on these):\n"
            + "\n".join("- " + m for m in live_fail)
        )
    verdict = "FAIL" if failures or live_fail else "PASS"
    out.append(f"\nverdict: {verdict} (logs: {workdir})")
    text = "\n".join(out)
    with open(os.path.join(workdir, "report.md"), "w") as f:
        f.write(text + "\n")
    print("\n" + text, flush=True)
    return 1 if verdict == "FAIL" else 0


if __name__ == "__main__":
    sys.exit(main())
