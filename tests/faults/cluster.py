"""The electors under test: N OS processes (native fault_node and Python node_py.py mixed),
each behind its own proxy, each logging to logs/<name>.jsonl. Every signal the suite sends
to a node is recorded in the nemesis log (kills close open intervals; SIGSTOP..SIGCONT
periods are excluded from overlaps)."""

import glob
import json
import os
import signal
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def libfaketime():
    hits = glob.glob("/usr/lib/*/faketime/libfaketime.so.1") + glob.glob(
        "/usr/lib/faketime/libfaketime.so.1"
    )
    return hits[0] if hits else None


class Node:
    def __init__(self, cluster, name, kind, proxy):
        self.cluster, self.name, self.kind, self.proxy = cluster, name, kind, proxy
        self.log_path = os.path.join(cluster.workdir, "logs", name + ".jsonl")
        self.proc = None
        self.offset = 0
        self.paused = False
        self._pos = 0
        self.leading = False
        self.fence = 0
        self.uuid = None

    def start(self, skew=None):
        c = self.cluster
        uri = f"mongodb://127.0.0.1:{self.proxy.port}/"
        if self.kind == "c":
            cmd = [
                c.native_node,
                "elect",
                uri,
                self.name,
                str(c.ttl),
                self.log_path,
                c.workdir,
                c.key,
            ]
        else:
            cmd = [
                c.python,
                os.path.join(HERE, "node_py.py"),
                uri,
                self.name,
                str(c.ttl),
                self.log_path,
                c.workdir,
                c.key,
            ]
        env = dict(os.environ)
        if skew is not None:
            env.update(
                LD_PRELOAD=libfaketime(),
                FAKETIME=f"{skew:+.3f}",
                FAKETIME_DONT_FAKE_MONOTONIC="1",
                FAKETIME_DONT_RESET="1",
            )
        self.proc = subprocess.Popen(
            cmd, env=env, stdin=subprocess.DEVNULL, stdout=c.stderr_log, stderr=c.stderr_log
        )
        self.paused = False
        self.leading = False
        self.expected_exit = False
        c.nem.emit("node_start", node=self.name, pid=self.proc.pid, kind=self.kind, skew=skew)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        t = time.monotonic()
        self.expected_exit = True
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.cluster.nem.emit("node_kill", node=self.name, pid=self.proc.pid, at=t)
        self.leading = False

    def term(self):
        if self.alive():
            if self.paused:
                self.cont()
            self.expected_exit = True
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill9()
                return
            self.cluster.nem.emit("node_exit", node=self.name, pid=self.proc.pid)

    def stop(self):
        self.cluster.nem.emit("node_stop", node=self.name, pid=self.proc.pid)
        os.kill(self.proc.pid, signal.SIGSTOP)
        self.paused = True

    def cont(self):
        os.kill(self.proc.pid, signal.SIGCONT)
        self.paused = False
        self.cluster.nem.emit("node_cont", node=self.name, pid=self.proc.pid)

    def signal(self, sig):
        os.kill(self.proc.pid, sig)

    def refresh(self):
        """Reads new log lines: is this node leading now (as it logged)?"""
        try:
            with open(self.log_path) as f:
                f.seek(self._pos)
                for line in f:
                    if not line.endswith("\n"):
                        break
                    self._pos += len(line.encode())
                    try:
                        r = json.loads(line)
                    except ValueError:
                        continue
                    if self.proc is None or r.get("pid") != self.proc.pid:
                        continue
                    if r["ev"] == "begin":
                        self.leading, self.fence = True, r["fence"]
                    elif r["ev"] == "end":
                        self.leading = False
                    elif r["ev"] == "start":
                        self.uuid = r.get("uuid")
        except FileNotFoundError:
            pass
        if not self.alive():
            self.leading = False


class Cluster:
    def __init__(self, workdir, server, hub, nem, *, n, ttl, key, native_node, python, kinds=None):
        self.workdir, self.server, self.hub, self.nem = workdir, server, hub, nem
        self.ttl, self.key = ttl, key
        self.native_node, self.python = native_node, python
        os.makedirs(os.path.join(workdir, "logs"), exist_ok=True)
        self.stderr_log = open(os.path.join(workdir, "nodes.stderr"), "ab")
        host = getattr(server, "host", "127.0.0.1")
        kinds = kinds or ["c" if i % 2 == 0 else "py" for i in range(n)]
        self.nodes = []
        for i, kind in enumerate(kinds):
            name = f"{kind}{i + 1}"
            proxy = hub.new_proxy(server.port, name, host)
            self.nodes.append(Node(self, name, kind, proxy))

    def start_all(self):
        for n in self.nodes:
            n.start()
            time.sleep(0.05)

    def leaders(self):
        for n in self.nodes:
            n.refresh()
        return [n for n in self.nodes if n.leading and n.alive()]

    def wait_leader(self, timeout, stable=0.3, exclude_paused=True):
        """The single leader once one has led for `stable` seconds, or None."""
        deadline = time.monotonic() + timeout
        since, cand = None, None
        while time.monotonic() < deadline:
            ls = [n for n in self.leaders() if not (exclude_paused and n.paused)]
            if len(ls) == 1:
                if ls[0] is not cand:
                    cand, since = ls[0], time.monotonic()
                elif time.monotonic() - since >= stable:
                    return cand
            else:
                cand = None
            time.sleep(0.01)
        return None

    def ensure_all_running(self):
        for n in self.nodes:
            if n.paused:
                n.cont()
            if not n.alive():
                if n.proc is not None and not n.expected_exit:
                    self.nem.emit("node_died", node=n.name, pid=n.proc.pid, rc=n.proc.returncode)
                n.start()

    def close(self):
        for n in self.nodes:
            try:
                n.term()
            except Exception:  # noqa: BLE001
                pass
