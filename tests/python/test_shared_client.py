"""One native client per URI and database in a process (issue: one pool per client).

Lockers and electors given the same URI share a native client, as a module-level
MongoClient would; a ``mongoelector.Client`` passed explicitly is used as given; threads
stay flat as lockers grow; after fork() a child's new lockers work and the parent's
refuse to run there."""

import os
import threading

import mongoelector
import pytest
from mongoelector import Client, MongoLocker, StorageError, _transport


def thread_count():
    return len(os.listdir("/proc/self/task"))


def test_lockers_of_one_uri_share_one_native_client(server_db):
    _, uri = server_db
    lockers = [MongoLocker("share-%d" % i, uri, ttl=15) for i in range(3)]
    clients = [c for (u, _), c in _transport._shared_clients.items() if u == uri]
    assert len(clients) == 1
    assert clients[0].pool_count == 1  # one ttl: one timeout class
    MongoLocker("share-short", uri, ttl=2)
    assert clients[0].pool_count == 2
    for lk in lockers:
        assert lk.acquire(blocking=False)
        lk.release()


def test_threads_stay_flat_as_lockers_grow(server_db):
    _, uri = server_db
    first = MongoLocker("flat-0", uri, ttl=15)
    assert first.acquire(blocking=False)
    before = thread_count()
    lockers = [MongoLocker("flat-%d" % i, uri, ttl=15) for i in range(1, 200)]
    for lk in lockers:
        assert lk.acquire(blocking=False)
    after = thread_count()
    assert after - before <= 2, (before, after)
    for lk in [first] + lockers:
        assert lk.touch()
        lk.release()


def test_an_explicit_client_is_used_as_given(server_db):
    _, uri = server_db
    client = Client(uri.replace("?", "?maxPoolSize=3&") if "?" in uri else uri + "?maxPoolSize=3")
    assert client.pool_size == 3
    assert client.database == uri.split("/")[3].split("?")[0]
    a = MongoLocker("explicit", client, ttl=15)
    b = MongoLocker("explicit", client, ttl=15)
    assert a.acquire(blocking=False)
    with pytest.raises(mongoelector.LockExists):
        b.acquire(blocking=False)
    a.release()
    assert b.acquire(blocking=False)
    b.release()
    with pytest.raises(TypeError):
        MongoLocker("explicit", client, database="other")
    with pytest.raises(TypeError):
        Client("not-a-uri")


def test_many_threads_on_one_client(server_db):
    """Calls from many threads on one client run without errors or lost counts."""
    _, uri = server_db
    errors = []

    def work(i):
        lk = MongoLocker("threads-%d" % i, uri, ttl=15)
        try:
            for _ in range(20):
                assert lk.acquire(blocking=False)
                lk.release()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_fork_child_gets_fresh_connections_and_refuses_parent_lockers(server_db):
    _, uri = server_db
    parent = MongoLocker("forked", uri, ttl=15)
    assert parent.acquire(blocking=False)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report through the exit status, never return to pytest
        status = 1
        try:
            child = MongoLocker("forked", uri, ttl=15)
            assert child.locked() and not child.owned()
            try:
                parent.touch()
                os.write(write_fd, b"parent locker ran in the child")
            except (ValueError, StorageError) as exc:
                os.write(write_fd, str(exc).encode()[:500])
            status = 0
        except BaseException as exc:  # noqa: BLE001
            os.write(write_fd, repr(exc).encode()[:500])
        finally:
            os._exit(status)
    os.close(write_fd)
    message = os.read(read_fd, 1000).decode()
    os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, message
    assert "fork" in message, message
    assert parent.owned()
    assert parent.touch()
    parent.release()


def test_lock_writes_use_majority_even_when_the_client_says_w1(server_db):
    """A user's MongoClient with w=1 is honoured in everything but the lock writes, which
    are raised to w:"majority" (a w:1 write can be rolled back after a failover)."""
    import pymongo
    from pymongo import monitoring

    class Commands(monitoring.CommandListener):
        def __init__(self):
            self.seen = []

        def started(self, event):
            self.seen.append((event.command_name, event.command.get("writeConcern")))

        def succeeded(self, event):
            pass

        def failed(self, event):
            pass

    db, uri = server_db
    listener = Commands()
    client = pymongo.MongoClient(uri, w=1, event_listeners=[listener])
    try:
        lk = MongoLocker("majority", client[db.name], ttl=15)
        assert lk.acquire(blocking=False)
        assert lk.touch()
        lk.release()
        writes = [
            (name, wc)
            for name, wc in listener.seen
            if name in ("findAndModify", "update", "delete")
        ]
        assert writes, listener.seen
        for name, wc in writes:
            assert wc is not None and wc.get("w") == "majority", (name, wc)
    finally:
        client.close()
