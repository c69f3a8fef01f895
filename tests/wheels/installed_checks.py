"""Checks of an installed wheel, run by tests/wheels/test_hidden.sh inside a mount
namespace where the system's libmongoc, libbson and libsqlite3 are hidden.

    python installed_checks.py MONGODB_URI SCRATCH_DIR

For the native URI transport and, when pymongo imports, the pymongo Database transport:
a lock (acquire, fence, release), contention with a second process (LockExists while
the other holds it, then taken over once it releases, with a higher fence) and an
elector becoming leader. Then the embedded SQLite backend and a TLS connection attempt
(the driver must have TLS compiled in). Ends with "N passed, N failed".
"""

import subprocess
import sys
import threading
import time

import mongoelector
from mongoelector import LockExists, MongoLeaderElector, MongoLocker

PASSED = []
FAILED = []


def check(name, fn):
    try:
        detail = fn()
    except Exception as exc:  # noqa: BLE001 - report every failure, go on
        FAILED.append(name)
        print(f"FAIL: {name}: {type(exc).__name__}: {exc}", flush=True)
        return
    PASSED.append(name)
    print(f"ok: {name}" + (f" ({detail})" if detail else ""), flush=True)


def open_db(transport, uri):
    if transport == "uri":
        return uri.rstrip("/") + "/wheeltest"
    import pymongo

    return pymongo.MongoClient(uri)["wheeltest"]


def holder(transport, uri, key):
    """Child process: take the lock, say so, hold it until stdin closes, release."""
    lock = MongoLocker(key, open_db(transport, uri), ttl=10)
    lock.acquire(blocking=False)
    print(f"held {lock.fence}", flush=True)
    sys.stdin.read()
    lock.release()


def lock_once(transport, uri):
    lock = MongoLocker(f"wheel-lock-{transport}", open_db(transport, uri), ttl=5)
    assert lock.acquire(blocking=False)
    fence = lock.fence
    assert isinstance(fence, int) and lock.owned(), (fence, lock.owned())
    lock.release()
    assert not lock.locked()
    return f"fence {fence}"


def contention(transport, uri):
    key = f"wheel-contention-{transport}"
    child = subprocess.Popen(
        [sys.executable, __file__, "--hold", transport, uri, key],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = child.stdout.readline().split()
        assert line and line[0] == "held", f"the other process did not take the lock: {line}"
        theirs = int(line[1])
        lock = MongoLocker(key, open_db(transport, uri), ttl=10)
        try:
            lock.acquire(blocking=False)
            raise AssertionError("acquired a lock the other process holds")
        except LockExists:
            pass
        child.stdin.close()  # the holder releases
        assert lock.acquire(blocking=True, timeout=10, step=0.05)
        mine = lock.fence
        lock.release()
        assert mine > theirs, (mine, theirs)
        return (
            f"LockExists while held by pid {child.pid}, then taken over: fence {theirs} -> {mine}"
        )
    finally:
        if child.stdin and not child.stdin.closed:
            child.stdin.close()
        child.wait(timeout=20)


def elector(transport, uri):
    led = threading.Event()
    el = MongoLeaderElector(
        f"wheel-elector-{transport}", open_db(transport, uri), ttl=2, on_leader=led.set
    )
    start = time.monotonic()
    el.start()
    try:
        assert led.wait(10), "no leadership within 10 s"
        assert el.is_leader
        return f"leader after {time.monotonic() - start:.2f} s, fence {el.fence}"
    finally:
        el.stop()


def sqlite_lock(scratch):
    uri = f"sqlite://{scratch}/locks.db"
    lock = MongoLocker("wheel-sqlite", uri, ttl=5)
    assert lock.acquire(blocking=False)
    fence = lock.fence
    lock.release()
    return f"{uri}, fence {fence}"


def tls_compiled_in(uri):
    """libmongoc's OpenSSL stream is linked in (its function names are in its log
    strings), and a TLS handshake attempt against the plain server fails as a connection
    error, not because the driver was built without TLS."""
    with open(mongoelector._native.__file__, "rb") as f:
        assert b"_mongoc_openssl_ctx_new" in f.read(), "no libmongoc OpenSSL code in the extension"
    host = uri.split("://", 1)[1].split("/", 1)[0]
    try:
        lock = MongoLocker(
            "wheel-tls", f"mongodb://{host}/wheeltest?tls=true", ttl=5, timeparanoid=False
        )
        lock.acquire(blocking=False)
    except mongoelector.StorageUnavailable as exc:
        text = str(exc)
        assert "not enabled" not in text.lower() and "not supported" not in text.lower(), text
        return f"StorageUnavailable: {text[:90]}"
    raise AssertionError("a TLS connection to a plain server succeeded")


def main():
    uri, scratch = sys.argv[1], sys.argv[2]
    native = mongoelector._native.__file__
    print(f"mongoelector {mongoelector.__version__} from {native}", flush=True)

    def from_venv():
        assert native.startswith(sys.prefix), f"{native} is not under {sys.prefix}"

    check("the extension comes from the venv", from_venv)
    transports = ["uri"]
    try:
        import pymongo

        transports.append("pymongo")
        print(f"pymongo {pymongo.version}", flush=True)
    except ImportError:
        print("pymongo not importable: the Database transport is not checked", flush=True)
    for t in transports:
        check(f"{t}: lock", lambda: lock_once(t, uri))
        check(f"{t}: contention (two processes)", lambda: contention(t, uri))
        check(f"{t}: elector", lambda: elector(t, uri))
    check("sqlite: lock", lambda: sqlite_lock(scratch))
    check("TLS compiled in", lambda: tls_compiled_in(uri))
    print(f"installed_checks: {len(PASSED)} passed, {len(FAILED)} failed", flush=True)
    return 1 if FAILED else 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--hold":
        holder(*sys.argv[2:5])
    else:
        sys.exit(main())
