"""Markdown tables per fault, the goal figures, and the verdict (exit code)."""

from collections import defaultdict

SAFETY_NOTE = (
    "safety: overlaps, stale writes accepted, repeated/decreasing tokens, failed safety checks"
)


def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * (len(xs) - 1)))))
    return xs[k]


def fmt_s(x):
    return "–" if x is None else f"{x:.2f}"


def build(run, profile, ttl, freeze_short):
    rounds = run.rounds()
    overlaps = run.overlaps()
    stale = run.stale_writes()
    bad_tokens, resets = run.token_violations()
    per = defaultdict(list)
    for r in rounds:
        per[r["fault"]].append((r, run.measure(r)))

    def in_round(t):
        for r in rounds:
            if r["begin"] <= t <= r["end"]:
                return r["fault"]
        return "(between rounds)"

    ov_by = defaultdict(list)
    for t, ms, a, c in overlaps:
        ov_by[in_round(t)].append(ms)
    st_by = defaultdict(int)
    for t, *_ in stale:
        st_by[in_round(t)] += 1
    tok_by = defaultdict(int)
    for a, b in bad_tokens:
        tok_by[in_round(b.b)] += 1
    reset_by = defaultdict(int)
    for a, b in resets:
        reset_by[in_round(b.b)] += 1

    lines = []
    hdr = (
        "| fault | rounds | overlaps (n / ms) | stale writes accepted | token order violations "
        "| writes rejected | failover p50 / p95 / max (s) | leaderless mean / max (s) "
        "| leadership lost (rounds) | step-down margin min (ms) | takeover after step-down min (ms) "
        "| stranded >100 ms (n / max ms) | checks failed |"
    )
    lines.append(hdr)
    lines.append("|" + "---|" * 13)
    failures, misses = [], []
    for fault in list(per) + [k for k in ov_by if k not in per]:
        ms = per.get(fault, [])
        fo = [m["failover"] for _, m in ms if m["failover"] is not None]
        ll = [m["leaderless"] for _, m in ms]
        lost = sum(1 for _, m in ms if m["lost"])
        margins = [x for _, m in ms for x in m["margins"]]
        tmarg = [x for _, m in ms for x in m["takeover_margins"]]
        strand = [x for _, m in ms for x in m["stranded"] if x > 100]
        checks = [c for _, m in ms for c in m["checks"]]
        cfail = [c for c in checks if not c["ok"]]
        rej = sum(m["rejected"] for _, m in ms)
        ov = ov_by.get(fault, [])
        notes = ""
        if reset_by.get(fault):
            notes = f" ({reset_by[fault]} token resets: server lost its data)"
        lines.append(
            f"| {fault} | {len(ms)} | {len(ov)} / {sum(ov):.0f} | {st_by.get(fault, 0)} "
            f"| {tok_by.get(fault, 0)}{notes} | {rej} "
            f"| {fmt_s(pct(fo, 50))} / {fmt_s(pct(fo, 95))} / {fmt_s(max(fo) if fo else None)} "
            f"| {fmt_s(sum(ll) / len(ll) if ll else None)} / {fmt_s(max(ll) if ll else None)} "
            f"| {lost} / {len(ms)} | {'–' if not margins else f'{min(margins):.0f}'} "
            f"| {'–' if not tmarg else f'{min(tmarg):.0f}'} "
            f"| {len(strand)} / {'–' if not strand else f'{max(strand):.0f}'} | {len(cfail)}/{len(checks)} |"
        )
        # Safety figures: any violation fails the run.
        if ov:
            failures.append(
                f"{fault}: {len(ov)} overlapping leaderships among unpaused nodes ({sum(ov):.0f} ms)"
            )
        if st_by.get(fault):
            failures.append(f"{fault}: {st_by[fault]} stale writes accepted")
        if tok_by.get(fault):
            failures.append(f"{fault}: {tok_by[fault]} repeated or decreasing tokens")
        for c in cfail:
            failures.append(f"{fault}: check failed: {c['check']}: {c.get('got')}")
        # Goal figures (liveness and step-down timing).
        if fault in ("kill9-leader",) and fo and max(fo) > 1.1 * ttl:
            misses.append(
                f"{fault}: failover max {max(fo):.2f} s > ttl + 10 % ({1.1 * ttl:.2f} s)"
                + (" (p95 %.2f s)" % pct(fo, 95))
            )
        if fault == "server-freeze-short" and lost:
            misses.append(
                f"{fault}: leadership lost in {lost}/{len(ms)} rounds for a "
                f"{freeze_short:.2f} s server pause (goal: never below "
                f"ttl - (renew interval + margin))"
            )
        if fault.startswith("partition") or fault == "slow-hello-follower":
            if margins and min(margins) <= 0:
                misses.append(
                    f"{fault}: a partitioned leader stepped down {-min(margins):.0f} ms AFTER "
                    "its lease could be taken (goal: before)"
                )
    died = [r for r in run.nem if r["ev"] == "node_died"]
    if died:
        failures.append(
            f"{len(died)} nodes exited on their own (crash or startup error; see nodes.stderr "
            f"and logs/): " + ", ".join(f"{r['node']} rc {r['rc']}" for r in died[:10])
        )
    lines.append("")
    lines.append(
        f"Overlaps between rounds: {len(ov_by.get('(between rounds)', []))}; "
        f"stale writes accepted in all: {len(stale)}; token order violations in all: "
        f"{len(bad_tokens)}; token resets from server data loss: {len(resets)}."
    )
    # Liveness verdict: only the long profile fails on clearly-off liveness figures.
    live_fail = []
    if profile == "long":
        for fault, ms in per.items():
            fo = [m["failover"] for _, m in ms if m["failover"] is not None]
            if fault == "kill9-leader" and fo and pct(fo, 95) > 1.5 * ttl:
                live_fail.append(f"{fault}: failover p95 {pct(fo, 95):.2f} s > 1.5 ttl")
            lost = sum(1 for _, m in ms if m["lost"])
            if fault == "server-freeze-short" and ms and lost > 0.1 * len(ms):
                live_fail.append(f"{fault}: leadership lost in {lost}/{len(ms)} rounds (> 10 %)")
    return "\n".join(lines), failures, misses, live_fail, overlaps, stale, bad_tokens
