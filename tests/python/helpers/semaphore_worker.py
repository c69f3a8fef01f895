"""Subprocess worker of the semaphore tests (tests/python/test_semaphore.py).

Every time it writes is time.monotonic(), one clock for all processes of the host
(CLOCK_MONOTONIC).

  contend  acquire / hold / release `rounds` times; append to the shared log
           "enter <name> <t> <fence> <t_requested>" right after acquire returned (t_requested:
           just before it was called) and
           "exit <name> <t>" right before release is sent (so the logged interval is
           inside the hold)
  hold     acquire once, print "held <fence> <t_before_acquire> <t_after>", sleep
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=["contend", "hold"])
    p.add_argument("--uri", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--transport", choices=["pymongo", "uri"], default="pymongo")
    p.add_argument("--limit", type=int, default=3)
    p.add_argument("--ttl", type=float, default=5)
    p.add_argument("--log")
    p.add_argument("--name", default="w")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--hold", type=float, default=0.01)
    p.add_argument("--pause", type=float, default=0.0)
    p.add_argument("--step", type=float, default=0.01)
    args = p.parse_args()
    {"contend": contend, "hold": hold}[args.command](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
