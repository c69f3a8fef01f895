#!/usr/bin/env python3
"""Rolling restart of N elector processes: leaderless time per hand-over.

Each step restarts the CURRENT leader (so every step is a hand-over), in one of
three modes:

  kill      SIGKILL, as a crash or an unclean restart: the others wait for the lease
            to expire (about a ttl).
  stop      clean stop(): a fenced release; followers peek at the lock every ttl/4.
  transfer  elector.transfer(to=<another member's uuid>), then stop(): the target takes
            over at its next peek with one renewal of its own.

Leaderless time = new leader's on_leader minus the moment the old leader stopped
leading (its on_leader_loss; for kill: the moment of SIGKILL), on CLOCK_MONOTONIC,
which is one clock for every process on the host.

    bash tests/servers/testserver.sh run java -- \\
        python tests/bench/rolling_restart.py --nodes 3 --ttl 5 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid as uuidlib
from typing import Dict, List, Optional


def mono() -> float:
    return time.clock_gettime(time.CLOCK_MONOTONIC)


# ---- child: one elector process; events on stdout, commands on stdin ----------------


def child(uri: str, key: str, ttl: float, handover_poll: Optional[float]) -> None:
    import mongoelector

    def emit(ev: str, **kw: object) -> None:
        kw.update(ev=ev, t=mono(), pid=os.getpid())
        sys.stdout.write(json.dumps(kw) + "\n")
        sys.stdout.flush()

    el = mongoelector.MongoLeaderElector(
        key,
        uri,
        ttl=ttl,
        handover_poll=handover_poll,
        on_leader=lambda: emit("leader"),
        on_leader_loss=lambda: emit("loss"),
    )
    el.start()
    emit("ready", uuid=el.node_status["uuid"])
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        try:
            if cmd[0] == "transfer":
                el.transfer(cmd[1])
                emit("transferred")
            elif cmd[0] == "stop":
                el.stop()
                emit("stopped")
                break
        except Exception as ex:  # reported to the parent, which decides
            emit("error", what=str(ex))
    el.close()


# ---- parent ----------------------------------------------------------------------------

HANDOVER_POLL: Optional[float] = None  # --handover-poll, passed to every child


class Node:
    def __init__(self, uri: str, key: str, ttl: float, events: "queue.Queue[dict]") -> None:
        poll = "default" if HANDOVER_POLL is None else str(HANDOVER_POLL)
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--child", uri, key, str(ttl), poll],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.uuid: Optional[str] = None
        self.events = events
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout
        for line in self.proc.stdout:
            ev = json.loads(line)
            ev["node"] = self
            if ev["ev"] == "ready":
                self.uuid = ev["uuid"]
            self.events.put(ev)

    def send(self, cmd: str) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()


def wait_for(events: "queue.Queue[dict]", pred, timeout: float) -> dict:
    end = time.monotonic() + timeout
    while True:
        left = end - time.monotonic()
        if left <= 0:
            raise TimeoutError("no matching event")
        ev = events.get(timeout=left)
        if pred(ev):
            return ev


def run_mode(uri: str, mode: str, nodes: int, ttl: float, rounds: int) -> List[float]:
    key = "rolling-" + mode + "-" + uuidlib.uuid4().hex[:8]
    events: "queue.Queue[dict]" = queue.Queue()
    members: List[Node] = []
    for _ in range(nodes):
        members.append(Node(uri, key, ttl, events))
    leader: Optional[Node] = None
    ready = 0
    while ready < nodes or leader is None:
        ev = wait_for(events, lambda e: e["ev"] in ("ready", "leader"), 4 * ttl)
        if ev["ev"] == "ready":
            ready += 1
        else:
            leader = ev["node"]
    time.sleep(ttl)  # every member has reported status (transfer checks membership)
    gaps: List[float] = []
    for _step in range(rounds * nodes):
        old = leader
        assert old is not None
        if mode == "kill":
            stopped_at = mono()
            old.proc.send_signal(signal.SIGKILL)
        else:
            if mode == "transfer":
                # The longest-running other member (restarted least recently).
                target = next(m for m in members if m is not old)
                old.send("transfer " + target.uuid)
            else:
                old.send("stop")
            ev = wait_for(
                events, lambda e: e["node"] is old and e["ev"] in ("loss", "error"), 4 * ttl
            )
            if ev["ev"] == "error":
                raise RuntimeError(ev["what"])
            stopped_at = ev["t"]
            if mode == "transfer":
                old.send("stop")
        ev = wait_for(events, lambda e: e["ev"] == "leader" and e["node"] is not old, 4 * ttl)
        gaps.append(ev["t"] - stopped_at)
        leader = ev["node"]
        old.proc.wait(timeout=4 * ttl)
        members.remove(old)
        fresh = Node(uri, key, ttl, events)  # the restarted process
        members.append(fresh)
        wait_for(events, lambda e: e["node"] is fresh and e["ev"] == "ready", 4 * ttl)
        time.sleep(1.0)  # its first status report is in
    for m in members:
        m.send("stop")
    for m in members:
        m.proc.wait(timeout=4 * ttl)
    return gaps


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(
            sys.argv[2],
            sys.argv[3],
            float(sys.argv[4]),
            None if sys.argv[5] == "default" else float(sys.argv[5]),
        )
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--ttl", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=1, help="restarts per node")
    ap.add_argument("--modes", default="kill,stop,transfer")
    ap.add_argument(
        "--handover-poll",
        type=float,
        default=None,
        help="followers' look interval while a leader exists (default ttl/4)",
    )
    args = ap.parse_args()
    global HANDOVER_POLL
    HANDOVER_POLL = args.handover_poll
    base = os.environ.get("MONGOELECTOR_TEST_URI")
    if not base:
        print(
            "MONGOELECTOR_TEST_URI is not set (run under tests/servers/testserver.sh)",
            file=sys.stderr,
        )
        return 2
    uri = base.rstrip("/") + "/rolling_restart"
    results: Dict[str, List[float]] = {}
    for mode in args.modes.split(","):
        results[mode] = run_mode(uri, mode, args.nodes, args.ttl, args.rounds)
    n = max(len(v) for v in results.values())
    poll = "ttl/4" if HANDOVER_POLL is None else f"{HANDOVER_POLL:g} s"
    print(
        f"rolling restart, {args.nodes} electors, ttl {args.ttl:g} s, handover_poll {poll}: "
        f"leaderless time per hand-over (ms)"
    )
    print("hand-over  " + "".join(f"{m:>10}" for m in results))
    for i in range(n):
        print(
            f"{i + 1:>9}  "
            + "".join(
                f"{results[m][i] * 1000:>10.0f}" if i < len(results[m]) else " " * 10
                for m in results
            )
        )
    print("     mean  " + "".join(f"{sum(v) / len(v) * 1000:>10.0f}" for v in results.values()))
    print("      max  " + "".join(f"{max(v) * 1000:>10.0f}" for v in results.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
