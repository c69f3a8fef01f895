"""Metrics (mongoelector.metrics) and structured logs: the counters move with what the
process does, the Prometheus collector and the OpenTelemetry hooks expose them, nothing
optional is imported unless used, and log records carry event/key/fence/uuid/host."""

import logging
import subprocess
import sys
import uuid

import mongomock
import pytest
from mongoelector import LockExists, MongoLeaderElector, MongoLocker, metrics


def new_key():
    return "mt-" + uuid.uuid4().hex[:8]


def delta(before, after, name):
    return getattr(after, name) - getattr(before, name)


def test_snapshot_counts_acquire_outcomes_and_round_trips(backend):
    key = new_key()
    before = metrics.snapshot()
    a = MongoLocker(key, backend.db, ttl=30)
    b = MongoLocker(key, backend.db, ttl=30)
    assert a.acquire()
    with pytest.raises(LockExists):
        b.acquire(blocking=False)
    a.release()
    after = metrics.snapshot()
    assert after.acquires["acquired"] - before.acquires["acquired"] == 1
    assert after.acquires["held"] - before.acquires["held"] == 1
    assert delta(before, after, "acquire_latency_count") == 2
    assert sum(after.acquire_latency_buckets) == after.acquire_latency_count
    assert len(after.acquire_latency_buckets) == len(after.acquire_latency_bounds) + 1
    if backend.kind == "uri":
        assert delta(before, after, "round_trips") >= 3  # claim, read of the holder, release
    print(f"{backend.kind}: {metrics.snapshot()}")


def test_snapshot_counts_leadership_and_renewals():
    db = mongomock.MongoClient().testdb
    before = metrics.snapshot()
    e = MongoLeaderElector(new_key(), db, ttl=6)
    e.poll()
    assert e.is_leader
    e.poll()  # renews? only after ttl/3: renewals are counted by the loop's renew cycle
    e.mlock.touch()
    e.release()
    after = metrics.snapshot()
    assert delta(before, after, "leader_elected") == 1
    assert delta(before, after, "leader_lost") == 1
    assert delta(before, after, "renewals") >= 1
    assert after.clock_samples >= 1


def test_prometheus_collector_exposes_the_counters():
    prometheus_client = pytest.importorskip("prometheus_client")
    registry = prometheus_client.CollectorRegistry()
    registry.register(metrics.PrometheusCollector())
    db = mongomock.MongoClient().testdb
    lock = MongoLocker(new_key(), db, ttl=30)
    lock.acquire()
    lock.release()
    text = prometheus_client.generate_latest(registry).decode()
    acquired = registry.get_sample_value("mongoelector_acquires_total", {"outcome": "acquired"})
    assert acquired is not None and acquired >= 1
    assert acquired == metrics.snapshot().acquires["acquired"]
    assert 'mongoelector_acquire_duration_seconds_bucket{le="+Inf"}' in text
    assert "mongoelector_clock_offset_seconds" in text
    assert "mongoelector_step_downs_total" in text
    print("\n".join(line for line in text.splitlines() if line.startswith("mongoelector_acquires")))


def test_opentelemetry_hooks_report_the_counters():
    pytest.importorskip("opentelemetry.sdk.metrics")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    metrics.instrument_opentelemetry(meter_provider=provider)
    db = mongomock.MongoClient().testdb
    MongoLocker(new_key(), db, ttl=30).acquire()
    data = reader.get_metrics_data()
    points = {}
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                for p in m.data.data_points:
                    points[(m.name, tuple(sorted(p.attributes.items())))] = p.value
    assert (
        points[("mongoelector.acquires", (("outcome", "acquired"),))]
        == metrics.snapshot().acquires["acquired"]
    )
    assert ("mongoelector.clock.offset", ()) in points


def test_optional_dependencies_are_not_imported_unless_used():
    code = (
        "import sys, mongoelector, mongoelector.metrics; "
        "print(sorted(m for m in sys.modules if m.startswith(('prometheus_client', "
        "'opentelemetry'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


class Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)


def test_log_records_carry_structured_fields():
    from mongoelector import _native

    handler = Records()
    logger = logging.getLogger("mongoelector")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        key = new_key()
        e = MongoLeaderElector(key, mongomock.MongoClient().testdb, ttl=6)
        e.poll()
        fence = e.fence
        e.poll()
        e.release()
        _native.flush_log()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    mine = [r for r in handler.records if getattr(r, "key", None) == key]
    elected = [r for r in mine if r.event == "leader_elected"]
    lost = [r for r in mine if r.event == "leader_lost"]
    assert len(elected) == 1 and len(lost) == 1, [(r.levelname, r.getMessage()) for r in mine]
    assert elected[0].levelno == logging.INFO and lost[0].levelno == logging.INFO
    assert elected[0].fence == fence and elected[0].uuid == e.mlock.uuid
    assert elected[0].host == e.mlock.host
    # Nothing chatty at INFO: only the two leadership changes of this elector.
    assert [r.event for r in mine if r.levelno >= logging.INFO] == ["leader_elected", "leader_lost"]
    # Every record has the five attributes (None when not about a lock).
    for r in handler.records:
        for name in ("event", "key", "fence", "uuid", "host"):
            assert hasattr(r, name)


@pytest.mark.parametrize("kind", ["locker", "semaphore"])
def test_ctrl_c_in_a_blocking_acquire_is_counted_once_as_cancelled(kind, request):
    """Ctrl-C ends the core's acquire loop as a cancellation: the core counts it once, as
    cancelled (not as an error), and KeyboardInterrupt reaches the caller."""
    import _thread
    import signal
    import threading

    from mongoelector import MongoSemaphore, testing

    # Python's own handler, also when started with SIGINT ignored (testserver.sh runs the
    # suite as a background job, which ignores it: interrupt_main() would do nothing).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    request.addfinalizer(lambda: signal.signal(signal.SIGINT, previous))

    db = testing.memory_uri()
    key = new_key()
    if kind == "locker":
        holder, waiter = MongoLocker(key, db, ttl=30), MongoLocker(key, db, ttl=30)
    else:
        holder, waiter = (MongoSemaphore(key, db, limit=1, ttl=30) for _ in range(2))
    holder.acquire()
    before = metrics.snapshot()
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            waiter.acquire(step=0.05)
    finally:
        timer.cancel()
    after = metrics.snapshot()
    assert {o: after.acquires[o] - before.acquires[o] for o in metrics.OUTCOMES} == {
        "acquired": 0,
        "held": 0,
        "timeout": 0,
        "cancelled": 1,
        "error": 0,
    }
    assert delta(before, after, "acquire_latency_count") == 1
    holder.release()
