"""Batched renewal through a pymongo Database (issue #17): keep-alive leases of one client
and database are renewed together by PyMongoStorage.renew_many -- one update_many whose
filter names the leases' keys, uuids and fences in $in lists, then one find of their keys
-- and each
lease still learns its own outcome. Commands are counted with pymongo's command
monitoring on a real server; the mongomock test needs none."""

import datetime
import time

import mongoelector
import mongomock
import pymongo
import pytest
from pymongo import monitoring

TTL = 3.0  # renewed every ttl/3 = 1 s; a lease may join a batch up to 0.5 s early
N = 40


class Commands(monitoring.CommandListener):
    def __init__(self):
        self.events = []

    def started(self, event):
        self.events.append((event.command_name, event.database_name, event.command))

    def succeeded(self, event):
        pass

    def failed(self, event):
        pass

    def take(self):
        events, self.events = self.events, []
        return events


def lock_commands(events, name, dbname=None):
    """The `name` commands on the lock collection (optionally of one database)."""
    return [
        cmd
        for (n, db, cmd) in events
        if n == name and cmd.get(name) == "mongolocker" and (dbname is None or db == dbname)
    ]


@pytest.fixture
def counted(server_db, server_uri):
    db, _ = server_db
    listener = Commands()
    client = pymongo.MongoClient(server_uri, event_listeners=[listener])
    yield client, client[db.name], listener
    client.close()


def hold(db, keys):
    leases = [mongoelector.lease(db, k, ttl=TTL, blocking=False) for k in keys]
    for lease in leases:
        lease.acquire()
    return leases


def expiries(db):
    return {d["_id"]: d["ts_expire"] for d in db["mongolocker"].find()}


@pytest.mark.server
def test_many_leases_of_one_database_renew_with_two_commands_per_round(counted):
    client, db, commands = counted
    keys = [f"key-{i}" for i in range(N)]
    leases = hold(db, keys)
    try:
        first = expiries(db)
        commands.take()
        start = time.monotonic()
        time.sleep(TTL)  # about three renew intervals
        events = commands.take()
        elapsed = time.monotonic() - start
        updates = lock_commands(events, "update")
        finds = lock_commands(events, "find")
        rounds = elapsed / (TTL / 3)
        print(
            f"\n{N} leases, {elapsed:.2f} s: {len(updates)} update + {len(finds)} find "
            f"commands (per-key renewal: about {int(N * rounds)} updates)"
        )
        assert updates, "nothing was renewed"
        # Per key this would be about N updates per interval; batched, one per round
        # (a round or two more while the leases acquired one after another align).
        assert len(updates) <= rounds + 3, len(updates)
        assert len(finds) <= len(updates) + 1

        def batch_keys(cmd):
            return cmd["updates"][0]["q"].get("_id", {}).get("$in", [])

        biggest = max(updates, key=lambda c: len(batch_keys(c)))
        (statement,) = biggest["updates"]  # one statement, multi, over the batch's keys
        assert statement.get("multi") is True
        assert len(batch_keys(biggest)) > N // 2
        q = statement["q"]
        assert set(q) == {"_id", "locked", "uuid", "fence", "ts_expire"}
        assert q["locked"] is True and len(q["uuid"]["$in"]) == len(q["_id"]["$in"])
        # Monotonic: an expiry only moves later (a late batch cannot shorten a lease).
        assert set(statement["u"]) == {"$max"} and set(statement["u"]["$max"]) == {"ts_expire"}
        find = finds[-1]
        assert set(find["filter"]) == {"_id"} and len(find["filter"]["_id"]["$in"]) > N // 2
        assert find.get("singleBatch") is True
        assert [n for (n, _, cmd) in events if n in ("getMore", "killCursors")] == []

        after = expiries(db)
        for k in keys:
            assert after[k] > first[k], k
        assert not any(lease.lost.is_set() for lease in leases)
    finally:
        for lease in leases:
            lease.release()


@pytest.mark.server
def test_a_batch_with_stolen_and_released_keys_keeps_only_the_others(counted):
    client, db, commands = counted
    keys = [f"part-{i}" for i in range(12)]
    leases = hold(db, keys)
    try:
        coll = db["mongolocker"]
        far = datetime.datetime.now(datetime.timezone.utc).replace(
            microsecond=0
        ) + datetime.timedelta(seconds=600)
        # Taken over behind the leases' backs (as a forced claim would), and released.
        coll.update_one({"_id": "part-1"}, {"$set": {"uuid": "thief", "ts_expire": far}})
        coll.update_one({"_id": "part-2"}, {"$inc": {"fence": 1}, "$set": {"ts_expire": far}})
        coll.update_one({"_id": "part-3"}, {"$set": {"locked": False, "ts_expire": far}})
        coll.delete_one({"_id": "part-4"})
        gone = {"part-1", "part-2", "part-3", "part-4"}
        first = expiries(db)
        commands.take()
        for k in gone:
            assert next(le for le in leases if le.key == k).wait_lost(2 * TTL), k
        time.sleep(TTL / 3 + 0.5)  # one more round for the others
        assert len(lock_commands(commands.take(), "update")) >= 1
        after = expiries(db)
        for lease in leases:
            if lease.key in gone:
                assert lease.lost.is_set(), lease.key
                with pytest.raises(mongoelector.LeaseLost):
                    lease.check()
            else:
                assert not lease.lost.is_set(), (lease.key, lease.reason)
                assert after[lease.key] > first[lease.key], lease.key
        # The batch never extended what it did not hold.
        for k in ("part-1", "part-2", "part-3"):
            assert after[k] == first[k], k
        assert "part-4" not in after
    finally:
        for lease in leases:
            lease.release()


@pytest.mark.server
def test_two_databases_of_one_client_are_two_batches(counted, server_client):
    client, db, commands = counted
    other_name = db.name + "_b"
    other = client[other_name]
    a = hold(db, [f"a-{i}" for i in range(10)])
    b = hold(other, [f"b-{i}" for i in range(10)])
    try:
        commands.take()
        time.sleep(TTL)
        events = commands.take()
        ua = lock_commands(events, "update", db.name)
        ub = lock_commands(events, "update", other_name)
        assert ua and ub
        rounds = TTL / (TTL / 3)
        assert len(ua) <= rounds + 3 and len(ub) <= rounds + 3, (len(ua), len(ub))
        # Each batch names only its own database's keys.
        for cmd in ua:
            assert all(k.startswith("a-") for k in cmd["updates"][0]["q"]["_id"]["$in"])
        for cmd in ub:
            assert all(k.startswith("b-") for k in cmd["updates"][0]["q"]["_id"]["$in"])
        assert not any(le.lost.is_set() for le in a + b)
    finally:
        for lease in a + b:
            lease.release()
        try:
            server_client.drop_database(other_name)
        except pymongo.errors.OperationFailure:
            pass


def test_mongomock_batch_keeps_each_outcome():
    db = mongomock.MongoClient().renewdb
    keys = [f"m-{i}" for i in range(8)]
    leases = hold(db, keys)
    try:
        coll = db["mongolocker"]
        coll.update_one({"_id": "m-2"}, {"$set": {"uuid": "thief"}})
        first = expiries(db)
        assert next(le for le in leases if le.key == "m-2").wait_lost(2 * TTL)
        time.sleep(TTL / 3 + 0.5)
        after = expiries(db)
        for lease in leases:
            if lease.key == "m-2":
                assert lease.lost.is_set()
                assert after["m-2"] == first["m-2"]
            else:
                assert not lease.lost.is_set(), (lease.key, lease.reason)
                assert after[lease.key] > first[lease.key], lease.key
    finally:
        for lease in leases:
            lease.release()
