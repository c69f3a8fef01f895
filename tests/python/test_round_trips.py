"""Database commands per operation of the drop-in, counted by pymongo's command
monitoring on a real server: with the defaults (delete_on_release=True) an acquire is one
insert, as the original's, where the document is gone, and an insert then the conditional
findAndModify where another node left one; the fencing token is assigned when first
read."""

import datetime

import pymongo
import pytest
from mongoelector import MongoLocker, _native
from pymongo import monitoring

pytestmark = pytest.mark.server

LOCK_WRITES = ("findAndModify", "insert", "update", "delete")


class Commands(monitoring.CommandListener):
    def __init__(self):
        self.names = []

    def started(self, event):
        self.names.append(event.command_name)

    def succeeded(self, event):
        pass

    def failed(self, event):
        pass

    def take(self):
        names, self.names = self.names, []
        return names


@pytest.fixture
def counted_db(server_db, server_uri):
    db, _ = server_db
    listener = Commands()
    client = pymongo.MongoClient(server_uri, event_listeners=[listener])
    yield client[db.name], listener
    client.close()


def test_acquire_after_a_deleting_release_is_one_command(counted_db):
    db, commands = counted_db
    lk = MongoLocker("rt", db, ttl=15)
    lk.acquire(blocking=False)  # first use: indexes, time check, clock sample
    lk.release()
    assert db["mongolocker"].find_one({"_id": "rt"}) is None  # deleted, as the original does
    commands.take()
    for _ in range(3):
        assert lk.acquire(blocking=False)
        assert commands.take() == ["insert"]
        lk.release()
        assert commands.take() == ["delete"]


def test_a_document_left_by_another_node_is_claimed_after_the_insert_fails(counted_db):
    db, commands = counted_db
    keeper = MongoLocker("rt-left", db, ttl=15, delete_on_release=False)
    keeper.acquire(blocking=False)
    keeper.release()  # the document stays, released
    lk = MongoLocker("rt-left", db, ttl=15)
    commands.take()
    assert lk.acquire(blocking=False)
    assert commands.take() == ["insert", "find", "findAndModify"]
    assert db["mongolocker"].find_one({"_id": "rt-left"})["uuid"] == lk.uuid
    lk.release()
    commands.take()
    assert lk.acquire(blocking=False)  # its own release deleted the document
    assert commands.take() == ["insert"]
    lk.release()


def test_a_held_lock_costs_the_insert_once_then_the_claim_alone(counted_db):
    from mongoelector import LockExists

    db, commands = counted_db
    holder = MongoLocker("rt-held", db, ttl=15)
    holder.acquire(blocking=False)
    lk = MongoLocker("rt-held", db, ttl=15)
    commands.take()
    # As the original: the insert, then the read that names the holder in the error.
    # The locker then knows a document is there and sends the conditional claim.
    for expected in (["insert", "find"], ["findAndModify", "find"]):
        with pytest.raises(LockExists, match=holder.host):
            lk.acquire(blocking=False)
        assert commands.take() == expected
    assert db["mongolocker"].find_one({"_id": "rt-held"})["uuid"] == holder.uuid
    holder.release()


def test_token_is_assigned_on_first_read_and_increases(counted_db):
    db, commands = counted_db
    a = MongoLocker("rt-token", db, ttl=15)
    b = MongoLocker("rt-token", db, ttl=15, delete_on_release=False)
    tokens = []
    for lk in (a, b, a, a, b):
        lk.acquire(blocking=False)
        commands.take()
        token = lk.fence
        spent = [n for n in commands.take() if n in LOCK_WRITES]
        assert token is not None
        assert len(spent) <= 2, spent  # epoch bump and fence change, once per hold
        assert lk.fence == token
        assert [n for n in commands.take() if n in LOCK_WRITES] == []
        tokens.append(token)
        lk.release()
    assert tokens == sorted(set(tokens)), tokens


def test_new_locker_on_a_known_client_costs_what_the_original_does(counted_db):
    # The original: createIndexes, serverStatus (time check), insert. What the server is
    # and which command gives its clock are learnt once per client, not once per locker.
    db, commands = counted_db
    MongoLocker("rt-first", db, ttl=15).acquire(blocking=False)
    commands.take()
    for i in range(3):
        lk = MongoLocker(f"rt-new-{i}", db, ttl=15)
        assert lk.acquire(blocking=False)
        spent = commands.take()
        assert len(spent) <= 3, spent
        assert spent[0] == "createIndexes" and spent[-1] == "insert", spent


def test_fire_claims_send_no_index_per_claim(counted_db):
    # A drop-in locker ensures its indexes at construction, as the original (a dropped
    # collection or a conflicting index is mended); FireClaims' anchor ensures them once,
    # and each claim is then its one command.
    from mongoelector._claims import FireClaims

    db, commands = counted_db
    claims = FireClaims(db, retention=60)
    try:
        assert commands.take() == ["createIndexes"]
        fire = datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)
        assert claims.claim("job", fire)  # the first also learns what the server is
        first = commands.take()
        assert "createIndexes" not in first and first[-1] == "findAndModify", first
        assert not claims.claim("job", fire)
        assert commands.take() == ["findAndModify", "find"]  # and who claimed it
        assert claims.claim("job", fire + datetime.timedelta(minutes=1))
        assert commands.take() == ["findAndModify"]
    finally:
        claims.close()


def test_repr_makes_no_round_trip(counted_db):
    db, commands = counted_db
    lk = MongoLocker("rt-repr", db, ttl=15)
    commands.take()
    assert repr(lk).endswith("owned=False)")
    lk.acquire(blocking=False)
    commands.take()
    assert repr(lk).endswith("owned=True)")
    assert commands.take() == []


def test_a_batch_of_semaphore_slot_renewals_is_one_update_and_one_find(counted_db):
    db, commands = counted_db
    storage = _native.PyMongoStorage(db, 5.0, _native.ServerFacts())
    t = datetime.datetime(2100, 1, 1)
    db["rt_sems"].insert_many(
        [
            {
                "_id": k,
                "limit": 2,
                "fence": 2,
                "slots": [
                    {
                        "uuid": "a",
                        "host": "h",
                        "pid": 1,
                        "fence": 1,
                        "ts_created": t,
                        "ts_expire": t,
                    },
                    {
                        "uuid": "b",
                        "host": "h",
                        "pid": 1,
                        "fence": 2,
                        "ts_created": t,
                        "ts_expire": t,
                    },
                ],
            }
            for k in ("p", "q", "r")
        ]
    )
    commands.take()
    base = 1_700_000_000_000
    requests = [(k, i, u, i + 1, base + 5000) for k in ("p", "q", "r") for i, u in enumerate("ab")]
    assert _native._storage_renew_semaphores(storage, "rt_sems", requests, base) == [True] * 6
    assert commands.take() == ["update", "find"]
