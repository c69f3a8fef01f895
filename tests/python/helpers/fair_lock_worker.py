"""Subprocess worker of tests/python/test_fair_lock.py: one waiter of a fair MongoLocker.

Every time it writes is time.monotonic(), one clock for all processes of the host
(CLOCK_MONOTONIC).

  wait  acquire the fair lock (blocking) on a thread; print "queued <ticket>" once its
        entry is in the key's queue; once it holds the lock append "enter <name> <t>" to
        the shared log, hold `--hold` seconds, append "exit <name> <t>" and release.
"""

import argparse
import os
import sys
import threading
import time

from semaphore_worker import emit  # one line per write, O_APPEND


def wait(args):
    from mongoelector import MongoLocker

    lock = MongoLocker(args.key, args.db, ttl=args.ttl, fair=True)
    got = threading.Event()
    failed = []

    def take():
        try:
            lock.acquire(step=args.step, timeout=120)
            got.set()
        except BaseException as exc:  # reported by the main thread
            failed.append(exc)

    t = threading.Thread(target=take, daemon=True)
    t.start()
    while t.is_alive() and lock._core.queue_ticket == 0:
        time.sleep(0.01)
    print("queued", lock._core.queue_ticket, flush=True)
    t.join()
    if failed:
        raise failed[0]
    emit(args.log, "enter", args.name, repr(time.monotonic()))
    time.sleep(args.hold)
    emit(args.log, "exit", args.name, repr(time.monotonic()))
    lock.release()
    lock.close()


def main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["wait"])
    p.add_argument("--db", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--name", default="w")
    p.add_argument("--log", default=os.devnull)
    p.add_argument("--ttl", type=float, default=5)
    p.add_argument("--step", type=float, default=0.05)
    p.add_argument("--hold", type=float, default=0.2)
    args = p.parse_args(argv)
    wait(args)


if __name__ == "__main__":
    main(sys.argv[1:])
