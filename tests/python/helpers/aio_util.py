"""asyncio helpers of the asyncio tests (tests/python/test_aio*.py)."""

import asyncio
import gc
import inspect
import os
import socket
import statistics
import sys
import threading
import time
import traceback


class LagProbe:
    """``async with LagProbe() as probe:`` runs a ticker task that sleeps ``interval`` and
    records by how much each sleep overshot: the event loop's lag (how long something kept
    the loop from running its ready callbacks). ``probe.max``, ``p99``, ``median``."""

    def __init__(self, interval=0.001, stall=0.012):
        self.interval = interval
        self.lags = []
        self.gc_pauses = []  # (seconds, generation, thread name) of collections meanwhile
        self.stalls = []  # (seconds, the loop thread's stack) of lags over ``stall``
        self._stall = stall
        self._task = None
        self._stop = False
        self._beat = time.perf_counter()
        self._gc_start = {}

    async def _tick(self):
        while not self._stop:
            t0 = self._beat = time.perf_counter()
            await asyncio.sleep(self.interval)
            self.lags.append(max(0.0, time.perf_counter() - t0 - self.interval))

    def _on_gc(self, phase, info):
        ident = threading.get_ident()
        if phase == "start":
            self._gc_start[ident] = time.perf_counter()
        elif ident in self._gc_start:
            self.gc_pauses.append(
                (
                    time.perf_counter() - self._gc_start.pop(ident),
                    info["generation"],
                    threading.current_thread().name,
                )
            )

    def _watch(self, loop_thread):
        # Where the loop thread is when it has not ticked for ``stall`` seconds.
        while not self._stop:
            time.sleep(0.005)
            age = time.perf_counter() - self._beat
            if age > self._stall:
                frame = sys._current_frames().get(loop_thread)
                stack = "".join(traceback.format_stack(frame, limit=8)) if frame else "?"
                self.stalls.append((age, stack))
                while not self._stop and time.perf_counter() - self._beat > self._stall:
                    time.sleep(0.001)

    async def __aenter__(self):
        gc.callbacks.append(self._on_gc)
        self._watcher = threading.Thread(
            target=self._watch, args=(threading.get_ident(),), daemon=True
        )
        self._watcher.start()
        self._task = asyncio.ensure_future(self._tick())
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc):
        self._stop = True
        await self._task
        gc.callbacks.remove(self._on_gc)
        self._watcher.join()
        return False

    def report(self):
        worst_gc = max(self.gc_pauses, default=(0.0, None, None))
        lines = [
            f"loop lag over {len(self.lags)} ticks: max {self.max * 1000:.2f} ms, "
            f"p99 {self.p99 * 1000:.2f} ms, median {self.median * 1000:.2f} ms; "
            f"{len(self.gc_pauses)} GC passes meanwhile, longest "
            f"{worst_gc[0] * 1000:.1f} ms (generation {worst_gc[1]}, {worst_gc[2]})"
        ]
        for age, stack in self.stalls[:3]:
            lines.append(f"  loop stalled {age * 1000:.0f}+ ms at:\n{stack}")
        return "\n".join(lines)

    @property
    def max(self):
        return max(self.lags) if self.lags else 0.0

    @property
    def median(self):
        return statistics.median(self.lags) if self.lags else 0.0

    @property
    def p99(self):
        if not self.lags:
            return 0.0
        ordered = sorted(self.lags)
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


class BlockingCallsOnLoop:
    """``async with BlockingCallsOnLoop() as calls:`` records the calls made on the event
    loop's thread meanwhile that can block it: functions of mongoelector's native module
    (each may wait for a round trip or a lock) but those that only step the core's acquire
    run (``NON_BLOCKING``), ``time.sleep``, starting a thread (it waits for the thread to
    run; but the loop's default executor's, asyncio's own), and the I/O of blocking
    sockets (a synchronous driver's). Such a call stalls the loop on any machine; unlike
    the loop's lag, whether one was made does not depend on how loaded the machine is.
    ``calls.found``: "module.name (where)" of each, in order (a profile hook on the loop thread:
    ``sys.setprofile``'s c_call events)."""

    NON_BLOCKING = frozenset(
        {
            # AcquireRun: start it, decide the next step (no I/O), cancel it
            "start_acquire",
            "next",
            "cancel",
            "begin_attempt",
            "end_attempt",
            "fail_attempt",
            # The locker's operations in parts over an AsyncDatabase (aio/_loop_io.py):
            # what to send and what the reply means; the loop awaits the round trip.
            # (settle_stranded makes round trips: not here.)
            "claim_begin",
            "claim_send",
            "claim_reply",
            "claim_duplicate",
            "claim_after_insert_refused",
            "claim_lands_on_thread",
            "claim_land",
            "claim_drop",
            "release_begin",
            "release_send",
            "release_reply",
            "release_failed",
            "touch_begin",
            "touch_send",
            "touch_reply",
            "touch_failed",
            "read_begin",
            "current_of",
            "refusal_message",
            "owned_by",
            "loop_io",
        }
    )
    SOCKET_IO = frozenset(
        {"recv", "recv_into", "recvfrom", "send", "sendall", "sendto", "connect", "accept"}
    )

    def __init__(self):
        self.found = []
        self._previous = None

    def _profile(self, frame, event, arg):
        if event != "c_call":
            return
        name = getattr(arg, "__name__", "")
        module = getattr(arg, "__module__", None) or ""
        owner = getattr(arg, "__self__", None)
        if module.startswith("mongoelector") and name not in self.NON_BLOCKING:
            self._found(f"{module}.{name}", frame)
        elif owner is time and name == "sleep":
            self._found("time.sleep", frame)
        elif module == "_thread" and name.startswith("start_"):
            if not self._in_default_executor(frame):  # waits for the new thread to start
                self._found(f"_thread.{name}", frame)
        elif isinstance(owner, socket.socket) and name in self.SOCKET_IO:
            if owner.gettimeout() != 0.0:  # asyncio's sockets never block
                self._found(f"socket.{name}", frame)

    @staticmethod
    def _in_default_executor(frame):
        """The loop's default executor (asyncio's run_in_executor: the driver's DNS
        look-ups) starts its threads there; not this library's to avoid."""
        for _ in range(12):
            if frame is None:
                return False
            if frame.f_code.co_name == "run_in_executor":
                return True
            frame = frame.f_back
        return False

    def _found(self, what, frame):
        where = []
        while frame is not None and len(where) < 4:
            where.append(f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}")
            frame = frame.f_back
        self.found.append(f"{what} ({' < '.join(where)})")

    async def __aenter__(self):
        self._previous = sys.getprofile()
        sys.setprofile(self._profile)
        return self

    async def __aexit__(self, *exc):
        sys.setprofile(self._previous)
        return False


async def wait_until(predicate, timeout, interval=0.02, swallow=()):
    """Polls ``predicate()`` (a function returning a bool or an awaitable of one) until it
    is true; AssertionError after ``timeout`` seconds. Exceptions in ``swallow`` count as
    false."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
            if inspect.isawaitable(value):
                value = await value
        except swallow:
            value = False
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s: {predicate}")
        await asyncio.sleep(interval)


def delay_attempts(monkeypatch, cls, seconds=0.2):
    """Makes every attempt of ``cls`` (an asyncio class's ``_attempt_sync``) wait
    ``seconds`` on its worker before it starts, so that a test can cancel the awaiting
    task meanwhile. Returns the event set when an attempt was handed to a worker, the
    list of the attempts' results, and a function that undoes the delay."""
    real = cls._attempt_sync
    started = threading.Event()
    results = []

    def slow_attempt(self, attempt):
        started.set()
        time.sleep(seconds)
        results.append(real(self, attempt))
        return results[-1]

    monkeypatch.setattr(cls, "_attempt_sync", slow_attempt)
    return started, results, lambda: monkeypatch.setattr(cls, "_attempt_sync", real)


def run_on(transport, request, body):
    """asyncio.run(body(db)) with ``db`` a memory:// URI ("memory"), or the test server's
    database as a URI ("uri") or an AsyncDatabase ("asyncdb", its AsyncMongoClient made
    and closed in the loop)."""
    from mongoelector import testing

    if transport == "memory":
        return asyncio.run(body(testing.memory_uri()))
    raw, uri = request.getfixturevalue("server_db")

    async def main():
        if transport == "uri":
            return await body(uri)
        import pymongo

        client = pymongo.AsyncMongoClient(uri, serverSelectionTimeoutMS=5000)
        try:
            return await body(client[raw.name])
        finally:
            await client.close()

    return asyncio.run(main())


async def cancel_once(coro, ready, timeout=5):
    """Runs ``coro`` as a task, cancels it as soon as ``ready()`` is true, and checks that
    the task ended cancelled."""
    task = asyncio.ensure_future(coro)
    await wait_until(ready, timeout=timeout, interval=0.005)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return
    raise AssertionError("the task ended without being cancelled")


def slow_first_claim(monkeypatch, seconds=0.2):
    """Makes the first write an AsyncDatabase's facade sends (a claim, on a worker) wait
    ``seconds`` AFTER the server applied it, as a reply that comes late: a test cancels
    the awaiting task meanwhile. Returns the event set when that write was applied, the
    list that gets its name once the late reply is delivered, and a function that undoes
    the delay."""
    from mongoelector.aio import _facade

    claimed = threading.Event()
    landed = []
    writes = ("find_one_and_update", "update_one", "insert_one", "replace_one")
    real = {name: getattr(_facade._FacadeCollection, name) for name in writes}

    def slowed(name):
        def write(self, *args, **kwargs):
            result = real[name](self, *args, **kwargs)
            if not claimed.is_set():
                claimed.set()
                time.sleep(seconds)
                landed.append(name)
            return result

        return write

    for name in writes:
        monkeypatch.setattr(_facade._FacadeCollection, name, slowed(name))

    def undo():
        for name in writes:
            monkeypatch.setattr(_facade._FacadeCollection, name, real[name])

    return claimed, landed, undo


async def cancel_before_the_claim(monkeypatch, cls, acquire):
    """Cancels the task of ``acquire`` (a coroutine of an instance of ``cls``) once its
    attempt was handed to a worker, before the claim is sent (``delay_attempts``): what
    that attempt returned, ``[("cancelled", None)]`` when it claimed nothing."""
    started, results, undo = delay_attempts(monkeypatch, cls)
    await cancel_once(acquire, started.is_set)
    await wait_until(lambda: results, timeout=5, interval=0.005)
    undo()
    return results
