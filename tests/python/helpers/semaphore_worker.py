"""Subprocess worker of the tests of the holds on a slot document: the semaphore's
(tests/python/test_semaphore.py) and the read-write lock's (tests/python/test_rwlock.py).

Every time it writes is time.monotonic(), one clock for all processes of the host
(CLOCK_MONOTONIC).

  contend     acquire / hold / release `rounds` times; append to the shared log
              "enter <name> <t> <fence> <t_requested>" right after acquire returned
              (t_requested: just before it was called) and
              "exit <name> <t>" right before release is sent (so the logged interval is
              inside the hold)
  hold        acquire once, print "held <fence> <t_before_acquire> <t_after>", sleep
  rw-contend  contend for the `--side` hold of a read-write lock with ``rw.read()`` /
              ``rw.write()`` (kept alive: the context managers under test); the log lines
              carry the side after the name: "enter <name> <side> <t> <fence>
              <t_requested>", "exit <name> <side> <t>"
  rw-hold     hold for the `--side` of a read-write lock (acquire, no keep-alive)
"""

import argparse
import os
import sys
import time


def db_for(args):
    """The `db` argument: a URI string (native transport) or a pymongo Database."""
    if args.transport == "uri":
        return args.uri
    import pymongo

    return pymongo.MongoClient(args.uri).get_default_database()


def emit(path, *fields):
    # One write() of a short line on an O_APPEND file: lines of processes never mix.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (" ".join(str(x) for x in fields) + "\n").encode())
    finally:
        os.close(fd)


def contend(args):
    from mongoelector.semaphore import MongoSemaphore

    sem = MongoSemaphore(args.key, db_for(args), limit=args.limit, ttl=args.ttl)
    name = f"{args.name}:{os.getpid()}"
    for _ in range(args.rounds):
        requested = time.monotonic()
        sem.acquire(step=args.step, timeout=120)
        emit(args.log, "enter", name, repr(time.monotonic()), sem.fence, repr(requested))
        time.sleep(args.hold)
        emit(args.log, "exit", name, repr(time.monotonic()))
        sem.release()
        time.sleep(args.pause)
    sem.close()


def hold(args):
    from mongoelector.semaphore import MongoSemaphore

    sem = MongoSemaphore(args.key, db_for(args), limit=args.limit, ttl=args.ttl)
    before = time.monotonic()
    sem.acquire(timeout=30)
    after = time.monotonic()
    print("held", sem.fence, repr(before), repr(after), flush=True)
    time.sleep(3600)


def make_rwlock(args):
    from mongoelector import MongoReadWriteLock

    return MongoReadWriteLock(args.key, db_for(args), ttl=args.ttl, max_readers=args.limit)


def rw_contend(args):
    rw = make_rwlock(args)
    name = f"{args.name}:{os.getpid()}"
    take = rw.read if args.side == "read" else rw.write
    for _ in range(args.rounds):
        requested = time.monotonic()
        with take(step=args.step, timeout=120) as held:
            emit(args.log, "enter", name, args.side, repr(time.monotonic()), held.fence, requested)
            time.sleep(args.hold)
            held.check()
            emit(args.log, "exit", name, args.side, repr(time.monotonic()))
        time.sleep(args.pause)
    rw.close()


def rw_hold(args):
    rw = make_rwlock(args)
    before = time.monotonic()
    rw.acquire(args.side, timeout=30)
    after = time.monotonic()
    print("held", rw.fence, repr(before), repr(after), flush=True)
    time.sleep(3600)


COMMANDS = {"contend": contend, "hold": hold, "rw-contend": rw_contend, "rw-hold": rw_hold}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=sorted(COMMANDS))
    p.add_argument("--side", choices=["read", "write"], default="read")
    p.add_argument("--uri", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--transport", choices=["pymongo", "uri"], default="pymongo")
    p.add_argument("--limit", type=int, default=3)  # a read-write lock's max_readers
    p.add_argument("--ttl", type=float, default=5)
    p.add_argument("--log")
    p.add_argument("--name", default="w")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--hold", type=float, default=0.01)
    p.add_argument("--pause", type=float, default=0.0)
    p.add_argument("--step", type=float, default=0.01)
    args = p.parse_args()
    COMMANDS[args.command](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
