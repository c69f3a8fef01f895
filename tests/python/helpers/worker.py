"""Subprocess worker of the multi-process tests. Runs under OUR package or under the
ORIGINAL mongoelector 1.0.2 (the mixed-fleet venv): it imports whichever `mongoelector`
the interpreter has, and uses only the original's API unless told otherwise.

Every line it prints or logs carries time.monotonic(), which is one clock for all
processes of the host (CLOCK_MONOTONIC)."""

import argparse
import os
import signal
import sys
import time


def db_for(args):
    """The `db` argument: a URI string (our native transport) or a pymongo Database."""
    if args.transport == "uri":
        return args.uri
    import pymongo

    client = pymongo.MongoClient(args.uri)
    return client.get_default_database()


def emit(path, *fields):
    with open(path, "a") as f:
        f.write(" ".join(str(x) for x in fields) + "\n")
        f.flush()


def contend(args):
    from mongoelector import MongoLocker

    kw = {"ttl": args.ttl}
    if args.keep_on_release:
        kw["delete_on_release"] = False
    lock = MongoLocker(args.key, db_for(args), **kw)
    me = f"{args.name}:{os.getpid()}"
    for _ in range(args.rounds):
        lock.acquire(step=args.step)
        start = time.monotonic()
        time.sleep(args.hold)
        end = time.monotonic()
        emit(args.log, me, repr(start), repr(end))
        lock.release()
        time.sleep(args.pause)


def hold(args):
    from mongoelector import MongoLocker

    lock = MongoLocker(args.key, db_for(args), ttl=args.ttl)
    before = time.monotonic()
    lock.acquire()
    after = time.monotonic()
    print("held", repr(before), repr(after), flush=True)
    time.sleep(3600)


def try_once(args):
    """One non-blocking acquire: prints 'acquired' or 'exists <message>'."""
    from mongoelector import LockExists, MongoLocker

    lock = MongoLocker(args.key, db_for(args), ttl=args.ttl)
    try:
        lock.acquire(blocking=False)
    except LockExists as e:
        print("exists", e, flush=True)
    else:
        print("acquired", flush=True)
        lock.release()


def elect(args):
    from mongoelector import MongoLeaderElector

    def on(name):
        return lambda: emit(args.log, args.name, name, repr(time.monotonic()))

    elector = MongoLeaderElector(
        args.key, db_for(args), ttl=args.ttl, on_leader=on("leader"), on_leader_loss=on("loss")
    )

    def term(signum, frame):
        elector.stop()
        emit(args.log, args.name, "stopped", repr(time.monotonic()))
        sys.exit(0)

    signal.signal(signal.SIGTERM, term)
    elector.start()
    emit(args.log, args.name, "started", repr(time.monotonic()))
    while True:
        time.sleep(0.05)


def exit_running(args):
    """Starts an elector, waits to lead, and leaves without stopping it."""
    from mongoelector import MongoLeaderElector

    if args.transport == "mongomock":
        import mongomock

        db = mongomock.MongoClient().db
    else:
        db = db_for(args)
    slow = (lambda: time.sleep(0.5)) if args.slow_callback else None
    e = MongoLeaderElector(args.key, db, ttl=args.ttl, on_loop=slow)
    e.start()
    while not e.is_leader:
        time.sleep(0.01)
    print("leader", flush=True)
    if args.exit == "sys.exit":
        sys.exit(0)
    if args.exit == "drop":
        del e
        import gc

        gc.collect()
    # "return": fall off the end of the program


def block_acquire(args):
    """Blocks in acquire on a lock held elsewhere until Ctrl-C."""
    from mongoelector import MongoLocker

    lock = MongoLocker(args.key, db_for(args), ttl=args.ttl)
    print("waiting", flush=True)
    try:
        if args.native:
            lock._core.acquire(True, None, 0.25, False)
        else:
            lock.acquire(step=5.0)  # a long step: Ctrl-C must interrupt the sleep too
    except KeyboardInterrupt:
        print("interrupted", repr(time.monotonic()), flush=True)
        return
    print("acquired?!", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode")
    p.add_argument("--uri")
    p.add_argument("--key", default="k")
    p.add_argument("--ttl", type=float, default=2)
    p.add_argument("--transport", default="pymongo", choices=["pymongo", "uri", "mongomock"])
    p.add_argument("--log")
    p.add_argument("--name", default="w")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--hold", type=float, default=0.02)
    p.add_argument("--pause", type=float, default=0.0)
    p.add_argument("--step", type=float, default=0.01)
    p.add_argument("--keep-on-release", action="store_true")
    p.add_argument("--slow-callback", action="store_true")
    p.add_argument("--exit", default="return", choices=["return", "sys.exit", "drop"])
    p.add_argument("--native", action="store_true")
    args = p.parse_args()
    if args.ttl == int(args.ttl):
        args.ttl = int(args.ttl)
    {
        "contend": contend,
        "hold": hold,
        "try": try_once,
        "elect": elect,
        "exit-running": exit_running,
        "block-acquire": block_acquire,
    }[args.mode](args)


if __name__ == "__main__":
    main()
