"""The nemesis: one fault at a time, one round per call. Each round waits for a single
stable leader, logs `fault` (the instant the fault hits) and `round_end`; the checker
measures everything between the two from the node, store, observer and nemesis logs."""

import json
import os
import random
import signal
import subprocess
import time

from cluster import libfaketime


class Ctx:
    def __init__(self, cluster, server, nem, ttl, args):
        self.cluster, self.server, self.nem, self.ttl, self.args = cluster, server, nem, ttl, args
        self.op_timeout = max(0.1, min(5.0, ttl / 10))

    @property
    def margin(self):
        return max(self.ttl / 10, 0.05)

    @property
    def freeze_bound(self):
        """ttl - (renew interval + margin): pauses below it must not cost leadership."""
        return self.ttl - (self.ttl / 2 + self.margin)


def _heal(ctx):
    for n in ctx.cluster.nodes:
        p = n.proxy
        p.set_mode("forward")
        p.set_hello_delay(0.0)
        p.disarm()
        p.drop_held()


def _prepare(ctx):
    _heal(ctx)
    ctx.cluster.ensure_all_running()
    return ctx.cluster.wait_leader(6 * ctx.ttl)


def _settle(ctx, extra=0.3):
    leader = ctx.cluster.wait_leader(6 * ctx.ttl)
    time.sleep(extra)
    return leader


def _follower(ctx, leader, k=1):
    fs = [n for n in ctx.cluster.nodes if n is not leader and n.alive()]
    random.shuffle(fs)
    return fs[:k]


# ---------------------------------------------------------------- faults ----


def kill9_leader(ctx, leader):
    leader.kill9()
    ctx.nem.emit("fault", fault="kill9-leader", leader=leader.name, fence=leader.fence)
    new = ctx.cluster.wait_leader(6 * ctx.ttl, stable=0.05)
    leader.start()
    return new


def pause_leader(ctx, leader):
    d = 1.5 * ctx.ttl
    leader.stop()
    ctx.nem.emit("fault", fault="pause-leader", leader=leader.name, fence=leader.fence, duration=d)
    time.sleep(d)
    leader.cont()
    time.sleep(0.5)
    return _settle(ctx)


def server_restart(ctx, leader):
    ctx.server.stop()
    ctx.nem.emit(
        "fault",
        fault="server-restart",
        leader=leader.name,
        fence=leader.fence,
        durable=ctx.server.durable,
    )
    time.sleep(0.5)
    ctx.server.start()
    ctx.nem.emit("server_up")
    return _settle(ctx)


def _freeze(ctx, leader, d, name):
    ctx.server.freeze()
    ctx.nem.emit("fault", fault=name, leader=leader.name, fence=leader.fence, duration=d)
    time.sleep(d)
    ctx.server.thaw()
    ctx.nem.emit("server_thaw")
    time.sleep(ctx.ttl)
    return _settle(ctx)


def server_freeze_short(ctx, leader):
    return _freeze(ctx, leader, round(0.75 * ctx.freeze_bound, 3), "server-freeze-short")


def server_freeze_long(ctx, leader):
    return _freeze(ctx, leader, 1.5 * ctx.ttl, "server-freeze-long")


def _partition(ctx, leader, mode, name):
    d = 2 * ctx.ttl
    leader.proxy.set_mode(mode)
    ctx.nem.emit(
        "fault",
        fault=name,
        leader=leader.name,
        fence=leader.fence,
        duration=d,
        partitioned=leader.name,
    )
    time.sleep(d)
    leader.proxy.set_mode("forward")
    ctx.nem.emit("heal", node=leader.name)
    return _settle(ctx, 0.5)


def partition_blackhole(ctx, leader):
    return _partition(ctx, leader, "blackhole", "partition-blackhole")


def partition_reset(ctx, leader):
    return _partition(ctx, leader, "reset", "partition-reset")


def clock_skew_client(ctx, leader):
    """A follower restarted under libfaketime (host clock off by +-3 s, far above
    maxoffset 0.5 s), then the leader is killed so the skewed node takes part in an
    election; plus two timeparanoid acquires under faketime (0.2 s and 2 s off)."""
    f = _follower(ctx, leader)[0]
    skew = random.choice([3.0, -3.0])
    f.term()
    f.start(skew=skew)
    time.sleep(0.5)
    leader.kill9()
    ctx.nem.emit(
        "fault",
        fault="clock-skew-client",
        leader=leader.name,
        fence=leader.fence,
        skewed=f.name,
        skew=skew,
    )
    ctx.cluster.wait_leader(6 * ctx.ttl, stable=0.05)
    leader.start()
    for off, expect in ((0.2, "MONGOELECTOR_OK"), (2.0, "MONGOELECTOR_ERR_TIME_OFFSET")):
        env = dict(
            os.environ,
            LD_PRELOAD=libfaketime(),
            FAKETIME=f"{random.choice([1, -1]) * off:+.3f}",
            FAKETIME_DONT_FAKE_MONOTONIC="1",
            FAKETIME_DONT_RESET="1",
        )
        r = subprocess.run(
            [ctx.cluster.native_node, "skewcheck", ctx.server.uri, "skew", "0.5"],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        try:
            res = json.loads(r.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            res = {"status": "NO-OUTPUT", "stderr": r.stderr[-300:]}
        ctx.nem.emit(
            "check",
            check=f"timeparanoid offset {env['FAKETIME']}s",
            ok=res.get("status") == expect,
            expect=expect,
            got=res,
        )
    time.sleep(1.0)
    f.term()
    f.start()
    return _settle(ctx)


def fork_holder(ctx, leader):
    ctx.nem.emit("fault", fault="fork-holder", leader=leader.name, fence=leader.fence)
    r = subprocess.run(
        [
            ctx.cluster.native_node,
            "forkcheck",
            ctx.server.uri,
            f"fork-{random.randrange(1 << 30)}",
            str(ctx.ttl),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    try:
        res = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        res = {"error": "no output", "stderr": r.stderr[-300:]}
    ctx.nem.emit(
        "check",
        check="fork: child cannot see/renew/release the parent's lock",
        ok=bool(res.get("safe")),
        got=res,
        safety=True,
    )
    return leader


def slow_hello(ctx, leader):
    """Two followers restart behind proxies that forward every hello/isMaster late
    (their server-time samples get a long round trip, the server's clock looks ahead by
    up to half of it), then the leader is black-holed: do they claim before the leader
    steps down?"""
    d = 0.8 * ctx.op_timeout
    fs = _follower(ctx, leader, 2)
    for f in fs:
        f.proxy.set_hello_delay(d)
        f.term()
        f.start()
    time.sleep(1.0)
    leader.proxy.set_mode("blackhole")
    ctx.nem.emit(
        "fault",
        fault="slow-hello-follower",
        leader=leader.name,
        fence=leader.fence,
        delay=d,
        slow=[f.name for f in fs],
        partitioned=leader.name,
    )
    time.sleep(2 * ctx.ttl)
    leader.proxy.set_mode("forward")
    for f in fs:
        f.proxy.set_hello_delay(0.0)
    ctx.nem.emit("heal", node=leader.name)
    _settle(ctx, 0.5)
    for f in fs:  # their skewed samples would otherwise live on for 60 s
        f.term()
        f.start()
    return _settle(ctx, 0.3)


def server_clock_step(ctx, leader):
    """The server's clock steps forward by one ttl; two followers restart (fresh samples
    on the new time base) while the leader keeps its old estimate."""
    step = ctx.args.clock_step * ctx.ttl
    ctx.server.step_clock(step * 1000)
    ctx.nem.emit(
        "fault", fault="server-clock-step", leader=leader.name, fence=leader.fence, step=step
    )
    for f in _follower(ctx, leader, 2):
        f.term()
        f.start()
    time.sleep(2 * ctx.ttl)
    ctx.server.step_clock(-step * 1000)
    ctx.nem.emit("server_clock_back", step=-step)
    time.sleep(0.5)
    # Nodes that sampled the stepped clock now run ahead of the server by `step` (their
    # estimate is refreshed every 60 s): restart every node so that later rounds start from
    # fresh samples (followers first, the leader last).
    _restart_all(ctx)
    return _settle(ctx, 0.5)


def _restart_all(ctx):
    ls = ctx.cluster.leaders()
    for n in sorted(ctx.cluster.nodes, key=lambda n: n in ls):
        n.term()
        n.start()
        time.sleep(0.05)


def stalled_release(ctx, leader):
    """The leader's release is held in its proxy (server unreachable for it) and times out;
    the other nodes are paused while the leader takes the key again; then they resume and
    the held release lands late. It must not free the newer hold."""
    others = [n for n in ctx.cluster.nodes if n is not leader and n.alive()]
    leader.proxy.set_mode("hold")
    leader.signal(signal.SIGUSR1)
    ctx.nem.emit("fault", fault="stalled-release", leader=leader.name, fence=leader.fence)
    time.sleep(3 * ctx.op_timeout + 0.3)
    leader.proxy.open_new()
    for n in others:
        n.stop()
    deadline = time.monotonic() + 3 * ctx.ttl
    again = False
    while time.monotonic() < deadline:
        leader.refresh()
        if leader.leading:
            again = True
            break
        time.sleep(0.01)
    time.sleep(0.1)
    for n in others:
        n.cont()
    n_bytes = leader.proxy.flush_held()
    ctx.nem.emit(
        "late_release_landed", node=leader.name, bytes=n_bytes, releader=again, fence=leader.fence
    )
    time.sleep(2 * ctx.ttl)
    return _settle(ctx, 0.5)


def error_after_claim(ctx, leader):
    """Every follower's next findAndModify (a claim) reaches the server but its reply is
    cut (connection closed); then the leader is killed: the claimant's claim is applied,
    it sees an error."""
    for n in ctx.cluster.nodes:
        if n is not leader:
            n.proxy.arm_drop_after(b"findAndModify")
    leader.kill9()
    ctx.nem.emit("fault", fault="error-after-claim", leader=leader.name, fence=leader.fence)
    new = ctx.cluster.wait_leader(6 * ctx.ttl, stable=0.05)
    for n in ctx.cluster.nodes:
        n.proxy.disarm()
    leader.start()
    return new


FAULTS = {
    "kill9-leader": kill9_leader,
    "pause-leader": pause_leader,
    "server-restart": server_restart,
    "server-freeze-short": server_freeze_short,
    "server-freeze-long": server_freeze_long,
    "partition-blackhole": partition_blackhole,
    "partition-reset": partition_reset,
    "clock-skew-client": clock_skew_client,
    "fork-holder": fork_holder,
    "slow-hello-follower": slow_hello,
    "server-clock-step": server_clock_step,
    "stalled-release": stalled_release,
    "error-after-claim": error_after_claim,
}
NEEDS = {
    "server-restart": "can_restart",
    "server-freeze-short": "can_freeze",
    "server-freeze-long": "can_freeze",
    "server-clock-step": "can_step_clock",
}


def run_round(ctx, fault, i):
    leader = _prepare(ctx)
    if leader is None:
        ctx.nem.emit("round_skip", fault=fault, round=i, reason="no stable leader")
        return False
    ctx.nem.emit("round_begin", fault=fault, round=i, leader=leader.name)
    FAULTS[fault](ctx, leader)
    ctx.nem.emit("round_end", fault=fault, round=i)
    return True
