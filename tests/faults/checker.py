"""Reads a run's logs and measures, per fault and round: overlaps among unpaused nodes,
stale writes accepted, token order, failover, leaderless time, lost leadership, step-down
margins and stranded leases. All times are CLOCK_MONOTONIC seconds (system-wide)."""

import glob
import os
from collections import defaultdict

from events import read_jsonl
from store import read_log


class Interval:
    __slots__ = ("node", "pid", "uuid", "fence", "b", "e", "sd", "why", "loss_cb")

    def __init__(self, **kw):
        for k in self.__slots__:
            setattr(self, k, kw.get(k))

    @property
    def inc(self):
        return (self.node, self.pid)


def _subtract(seg, holes):
    """Length of seg=(a,b) minus the union of holes."""
    a, b = seg
    if b <= a:
        return 0.0
    total = b - a
    for ha, hb in sorted(holes):
        lo, hi = max(a, ha), min(b, hb)
        if hi > lo:
            total -= hi - lo
            a = max(a, hi)  # holes sorted; avoid double-subtracting overlaps
    return max(total, 0.0)


def _union_len(segs, lo, hi):
    segs = sorted((max(a, lo), min(b, hi)) for a, b in segs if min(b, hi) > max(a, lo))
    total, cur_a, cur_b = 0.0, None, None
    for a, b in segs:
        if cur_b is None or a > cur_b:
            if cur_b is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_b is not None:
        total += cur_b - cur_a
    return total


class Run:
    def __init__(self, workdir, ttl):
        self.ttl = ttl
        self.nem = read_jsonl(os.path.join(workdir, "nemesis.jsonl"))
        self.obs = [
            r for r in read_jsonl(os.path.join(workdir, "observer.jsonl")) if r["ev"] == "obs"
        ]
        self.writes = read_log(workdir)
        self.node_logs = {}
        for p in glob.glob(os.path.join(workdir, "logs", "*.jsonl")):
            self.node_logs[os.path.basename(p)[:-6]] = read_jsonl(p)
        self.t_end = max([r["t"] for r in self.nem] + [0.0])
        self._deaths()
        self._pauses()
        self._intervals()

    def _deaths(self):
        self.death = {}
        for r in self.nem:
            if r["ev"] == "node_kill":
                self.death[(r["node"], r["pid"])] = (r.get("at", r["t"]), "killed")
            elif r["ev"] == "node_exit":
                self.death.setdefault((r["node"], r["pid"]), (r["t"], "exit"))

    def _pauses(self):
        self.paused = defaultdict(list)
        open_ = {}
        for r in self.nem:
            if r["ev"] == "node_stop":
                open_[(r["node"], r["pid"])] = r["t"]
            elif r["ev"] == "node_cont":
                k = (r["node"], r["pid"])
                if k in open_:
                    self.paused[k].append((open_.pop(k), r["t"]))
        for k, t in open_.items():
            self.paused[k].append((t, self.t_end))

    def _intervals(self):
        self.intervals = []
        self.uuid = {}
        for node, recs in self.node_logs.items():
            cur = {}
            for r in recs:
                k = (node, r.get("pid"))
                if r["ev"] == "start":
                    self.uuid[k] = r.get("uuid")
                elif r["ev"] == "begin":
                    cur[k] = r
                elif r["ev"] == "end" and k in cur:
                    b = cur.pop(k)
                    sd = r["first_false"]
                    if r.get("loss_cb"):
                        sd = min(sd, r["loss_cb"])
                    self.intervals.append(
                        Interval(
                            node=node,
                            pid=k[1],
                            uuid=self.uuid.get(k),
                            fence=b["fence"],
                            b=b["t"],
                            e=r["last_true"],
                            sd=None if r["why"] == "exit" else sd,
                            why=r["why"],
                            loss_cb=r.get("loss_cb"),
                        )
                    )
            for k, b in cur.items():  # still open: killed, or running at the end
                t, why = self.death.get(k, (self.t_end, "running"))
                self.intervals.append(
                    Interval(
                        node=node,
                        pid=k[1],
                        uuid=self.uuid.get(k),
                        fence=b["fence"],
                        b=b["t"],
                        e=t,
                        sd=None,
                        why=why,
                    )
                )
        self.intervals.sort(key=lambda i: i.b)

    # ------------------------------------------------------------------ rounds ----
    def rounds(self):
        out, cur = [], None
        for r in self.nem:
            if r["ev"] == "round_begin":
                cur = {"fault": r["fault"], "round": r["round"], "begin": r["t"], "checks": []}
            elif cur and r["ev"] == "fault":
                cur.update(t_fault=r["t"], info=r)
            elif cur and r["ev"] == "check":
                cur["checks"].append(r)
            elif cur and r["ev"] == "late_release_landed":
                cur["late_release"] = r
            elif cur and r["ev"] == "round_end":
                cur["end"] = r["t"]
                out.append(cur)
                cur = None
        return out

    def overlaps(self):
        """[(t_start, ms, inc_a, inc_b)] overlaps of beliefs, minus paused periods."""
        out = []
        iv = self.intervals
        for i, a in enumerate(iv):
            for c in iv[i + 1 :]:
                if c.b >= a.e:
                    continue
                if c.inc == a.inc:
                    continue
                seg = (max(a.b, c.b), min(a.e, c.e))
                ms = _subtract(seg, self.paused[a.inc] + self.paused[c.inc]) * 1000
                if ms > 0:
                    out.append((seg[0], ms, a, c))
        return out

    def token_violations(self):
        """Repeated or decreasing tokens between terms, in the order the terms began;
        tokens reset by a non-durable server restart are reported apart."""
        restarts = [
            r["t"]
            for r in self.nem
            if r["ev"] == "fault"
            and r.get("fault") == "server-restart"
            and not r.get("durable", True)
        ]
        bad, resets = [], []
        prev = None
        for i in self.intervals:
            if (
                prev is not None
                and i.fence <= prev.fence
                and not (i.fence == prev.fence and i.inc == prev.inc)
            ):
                if any(prev.b < t < i.b for t in restarts):
                    resets.append((prev, i))
                else:
                    bad.append((prev, i))
            prev = i
        return bad, resets

    def stale_writes(self):
        grants = sorted((i.b, i.fence) for i in self.intervals)
        out = []
        j, hi = 0, 0
        for t, node, token, seq, accepted, highest in sorted(self.writes):
            while j < len(grants) and grants[j][0] < t:
                hi = max(hi, grants[j][1])
                j += 1
            if accepted and token < hi:
                out.append((t, node, token, hi))
        return out

    def lease_end(self, iv, at):
        """(mono time the lease of iv could be taken, mono time it stopped being held on the
        server) from the observer, or (None, None)."""
        exp_m, gone = None, None
        for o in self.obs:
            if (
                o.get("uuid") == iv.uuid
                and o.get("fence") == iv.fence
                and o.get("locked")
                and o.get("exp")
                and o.get("srv")
            ):
                m = o["t"] + (o["exp"] - o["srv"]) / 1000.0
                if o["t"] <= at:
                    exp_m = m
                elif gone is None and m <= o["t"]:
                    gone = o["t"]
            elif o["t"] > at and gone is None and o.get("srv") is not None:
                gone = o["t"]
        return exp_m, gone

    def measure(self, rnd):
        lo, hi = rnd.get("t_fault", rnd["begin"]), rnd["end"]
        info = rnd.get("info", {})
        res = {
            "failover": None,
            "lost": False,
            "margins": [],
            "takeover_margins": [],
            "stranded": [],
            "checks": rnd["checks"],
        }
        lf = info.get("fence")
        inside = [i for i in self.intervals if lo - 1e-6 <= i.b <= hi]
        new_terms = [i for i in inside if i.fence != lf]
        if new_terms:
            res["failover"] = new_terms[0].b - lo
        res["lost"] = any(
            i.fence == lf and lo <= i.e < hi and i.why != "exit" for i in self.intervals
        ) or bool(new_terms)
        eff = []
        for i in self.intervals:
            if i.e > lo and i.b < hi:
                segs = [(i.b, i.e)]
                for pa, pb in self.paused[i.inc]:
                    nxt = []
                    for a, b in segs:
                        if pb <= a or pa >= b:
                            nxt.append((a, b))
                        else:
                            if pa > a:
                                nxt.append((a, pa))
                            if pb < b:
                                nxt.append((pb, b))
                    segs = nxt
                eff += segs
        res["leaderless"] = (hi - lo) - _union_len(eff, lo, hi)
        for i in self.intervals:
            if i.sd is None or not (lo <= i.sd <= hi):
                continue
            if any(pa <= i.sd <= pb + 0.05 for pa, pb in self.paused[i.inc]):
                continue  # a paused node's step-down is not a decision it made in time
            exp_m, gone = self.lease_end(i, i.sd)
            if exp_m is not None:
                res["margins"].append((exp_m - i.sd) * 1000)
                end_hold = min(x for x in (gone, exp_m) if x is not None) if gone else exp_m
                res["stranded"].append(max(0.0, end_hold - i.sd) * 1000)
            nxt = [j for j in self.intervals if j.b > i.b and j.inc != i.inc]
            if nxt:
                res["takeover_margins"].append((nxt[0].b - i.sd) * 1000)
        res["rejected"] = sum(1 for w in self.writes if lo <= w[0] <= hi and not w[4])
        return res
