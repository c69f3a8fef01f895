"""Python node of the fault suite: the `mongoelector` package over a mongodb:// URI.

    python node_py.py URI NAME TTL LOG STORE_DIR KEY

Same behaviour and log format as node.c's `elect` mode: logs each leadership interval it
believed in (CLOCK_MONOTONIC), writes fenced records every 50 ms while leading,
SIGUSR1 = release leadership, SIGTERM = stop."""

import json
import logging
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mongoelector  # noqa: E402
from store import FencedStore  # noqa: E402

uri, name, ttl, log_path, store_dir, key = sys.argv[1:7]
ttl = float(ttl)
logf = open(log_path, "a", buffering=1)
mu = threading.Lock()
store = FencedStore(store_dir)
state = {
    "leading": False,
    "fence": 0,
    "last_true": 0.0,
    "loss_cb": None,
    "next_write": 0.0,
    "seq": 0,
}
flags = {"stop": False, "release": False}


def logline(ev, **kw):
    rec = {"t": round(time.monotonic(), 6), "node": name, "pid": os.getpid(), "ev": ev}
    rec.update(kw)
    logf.write(json.dumps(rec) + "\n")


class LibLog(logging.Handler):
    def emit(self, record):
        with mu:
            logline("lib", level=record.levelno, msg=record.getMessage())


def write_record():
    state["seq"] += 1
    store.write(name, state["fence"], state["seq"])
    state["next_write"] = time.monotonic() + 0.05


def saw_leader(fence, src):
    now = time.monotonic()
    if state["leading"] and fence and fence != state["fence"]:
        logline(
            "end",
            fence=state["fence"],
            last_true=state["last_true"],
            first_false=now,
            loss_cb=None,
            why="new-term",
        )
        state["leading"] = False
    if not state["leading"]:
        if not fence:
            return
        state.update(leading=True, fence=fence, loss_cb=None)
        logline("begin", fence=fence, src=src)
        write_record()
    state["last_true"] = now


def saw_follower(why):
    if not state["leading"]:
        return
    logline(
        "end",
        fence=state["fence"],
        last_true=state["last_true"],
        first_false=time.monotonic(),
        loss_cb=state["loss_cb"],
        why=why,
    )
    state["leading"] = False


elector = None


def on_leader():
    with mu:
        fence = elector.fence if elector.is_leader else None
        if fence:
            saw_leader(fence, "on_leader")
        else:
            logline("on_leader_stale", fence=fence)


def on_leader_loss():
    with mu:
        logline("loss_cb", leading=int(state["leading"]))
        if state["leading"]:
            state["loss_cb"] = time.monotonic()


def main():
    global elector
    h = LibLog()
    h.setLevel(logging.INFO)
    logging.getLogger("mongoelector").addHandler(h)
    logging.getLogger("mongoelector").setLevel(logging.INFO)
    db_uri = uri.rstrip("/") + "/faults" if uri.count("/") == 3 else uri
    signal.signal(signal.SIGTERM, lambda *a: flags.update(stop=True))
    # Like a robust application, retry until the elector can be made (its constructor
    # does a round trip, which fails while the server is unreachable).
    while True:
        try:
            elector = mongoelector.MongoLeaderElector(
                key,
                db_uri,
                ttl=ttl,
                on_leader=on_leader,
                on_leader_loss=on_leader_loss,
                app_version="fault-suite",
            )
            break
        except Exception as e:  # noqa: BLE001
            with mu:
                logline("error", msg=repr(e))
            if flags["stop"]:
                return 1
            time.sleep(0.2)
    signal.signal(signal.SIGTERM, lambda *a: flags.update(stop=True))
    signal.signal(signal.SIGINT, lambda *a: flags.update(stop=True))
    signal.signal(signal.SIGUSR1, lambda *a: flags.update(release=True))
    with mu:
        logline("start", kind="py", uuid=elector.mlock.uuid, ttl=ttl)
    elector.start()
    while not flags["stop"]:
        if flags["release"]:
            flags["release"] = False
            with mu:
                logline("release_call")
            try:
                elector.release()
                status = "MONGOELECTOR_OK"
            except Exception as e:  # noqa: BLE001
                status = repr(e)
            with mu:
                logline("release_done", status=status)
        with mu:
            fence = elector.fence if elector.is_leader else None
            if fence:
                saw_leader(fence, "is_leader")
                if time.monotonic() >= state["next_write"]:
                    if elector.is_leader:
                        state["last_true"] = time.monotonic()
                        write_record()
                    else:
                        saw_follower("is_leader")
            else:
                saw_follower("is_leader")
        time.sleep(0.005)
    with mu:
        saw_follower("exit")
        logline("exit")
    elector.stop()
    return 0


sys.exit(main())
