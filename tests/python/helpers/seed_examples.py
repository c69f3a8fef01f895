"""The examples of the original's documentation (reference/seeds/000_*.txt), pasted
unchanged except for the `db = MongoClient().my_database` lines, which point at the
test server. Run in order in one namespace, as a reader would paste them into one
program; the harness only adds markers, a pause before the cluster-state example,
and ends the endless `while elector.running` example with Ctrl-C.

Usage: python seed_examples.py MONGODB_URI_WITH_DATABASE
"""

import sys
import time

DB_LINE = "db = MongoClient(SEED_URI).get_default_database()"

SNIPPETS = [
    (
        "lock",
        f"""
from pymongo import MongoClient
from mongoelector import MongoLocker
{DB_LINE}
lock = MongoLocker("my-resource", db, ttl=30)
lock.acquire()
try:
    # do work while holding the lock
    pass
finally:
    lock.release()
""",
    ),
    (
        "lock-with",
        """
with MongoLocker("my-resource", db, ttl=30) as lock:
    # lock is acquired automatically
    pass
# lock is released on exit
""",
    ),
    (
        "non-blocking",
        """
from mongoelector import LockExists
lock = MongoLocker("my-resource", db, ttl=30)
try:
    lock.acquire(blocking=False)
except LockExists:
    print("Lock is already held")
""",
    ),
    (
        "timeout",
        """
from mongoelector import AcquireTimeout
lock = MongoLocker("my-resource", db, ttl=30)
try:
    lock.acquire(timeout=5)
except AcquireTimeout:
    print("Could not acquire lock within 5 seconds")
""",
    ),
    (
        "elector",
        f"""
from pymongo import MongoClient
from mongoelector import MongoLeaderElector
{DB_LINE}
def became_leader():
    print("I am the leader now")
def lost_leadership():
    print("No longer the leader")
elector = MongoLeaderElector(
    "my-service",
    db,
    ttl=15,
    on_leader=became_leader,
    on_leader_loss=lost_leadership,
)
elector.start()
""",
    ),
    (
        "elector-with",
        """
from time import sleep
with MongoLeaderElector("my-service", db, ttl=15, on_leader=became_leader) as elector:
    while elector.running:
        sleep(1)
# elector is stopped and leadership released on exit
""",
    ),
    (
        "cluster-state",
        """
print(f"Is leader: {elector.is_leader}")
print(f"Leader exists: {elector.leader_exists}")
print(f"Node status: {elector.node_status}")
print(f"Cluster detail: {elector.cluster_detail}")
""",
    ),
]


def main():
    ns = {"SEED_URI": sys.argv[1]}
    for name, code in SNIPPETS:
        if name == "elector-with":
            time.sleep(1)  # let the first elector win before a second one joins
        print(f"== {name}", flush=True)
        try:
            exec(compile(code, f"<seed:{name}>", "exec"), ns)
        except KeyboardInterrupt:
            print("== interrupted", flush=True)
        sys.stdout.flush()
    print("== end", flush=True)


if __name__ == "__main__":
    main()
