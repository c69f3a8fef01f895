"""Subprocess worker of tests/python/test_fair.py: one fair waiter of a semaphore slot.

wait  print "ready", acquire (fair, blocking), append "enter <name> <t> <fence>" to the
      shared log (t: time.time() once acquired, comparable with the server's times on
      this host), hold for --hold seconds, release, exit
"""

import argparse
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["wait"])
    ap.add_argument("--uri", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--ttl", type=float, default=4.0)
    ap.add_argument("--hold", type=float, default=0.05)
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from mongoelector import MongoSemaphore

    sem = MongoSemaphore(args.key, args.uri, limit=1, ttl=args.ttl, fair=True)
    print("ready", flush=True)
    sem.acquire(timeout=120, step=0.05)
    line = f"enter {args.name} {time.time()} {sem.fence}\n"
    fd = os.open(args.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
    time.sleep(args.hold)
    sem.release()
    sem.close()


if __name__ == "__main__":
    main()
