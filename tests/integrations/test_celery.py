"""mongoelector.celery with real `celery beat` and `celery worker` processes (filesystem
broker, locks on SQLite or the test server), and the scheduler's rules in-process."""

import os
import re
import time
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest
from procs import BIN, Proc, read_lines, wait_until

pytest.importorskip("celery")

from celery import Celery  # noqa: E402
from celery.schedules import crontab, schedule  # noqa: E402
from mongoelector.celery import LeaderScheduler, next_fire_time  # noqa: E402

TTL = 2.0
CELERY = os.path.join(BIN, "celery")
SENT = re.compile(r"Sent due task (\S+) \(itest\.record\) for (\S+)")


def beat(name, tmp_path, store):
    return Proc(
        name,
        [
            CELERY,
            "-A",
            "celery_app",
            "beat",
            "-S",
            "mongoelector.celery:LeaderScheduler",
            "-l",
            "info",
        ],
        str(tmp_path / f"{name}.log"),
        ME_TEST_DIR=str(tmp_path),
        ME_TEST_DB=store,
        ME_TTL=str(TTL),
    )


def worker(name, tmp_path, store):
    return Proc(
        name,
        [CELERY, "-A", "celery_app", "worker", "-P", "solo", "-l", "info", "-n", f"{name}@%h"],
        str(tmp_path / f"{name}.log"),
        ME_TEST_DIR=str(tmp_path),
        ME_TEST_DB=store,
    )


def sent(proc):
    return [(m.group(1), m.group(2)) for m in SENT.finditer(proc.text())]


def test_beat_pair_hands_over_without_skipping_or_doubling(tmp_path, store):
    w = worker("worker", tmp_path, store)
    a = beat("beat-a", tmp_path, store)
    procs = [w, a]
    try:
        a.wait_for(r"beat: leading", timeout=90)
        b = beat("beat-b", tmp_path, store)
        procs.append(b)
        b.wait_for(r"beat: standing by", timeout=90)
        # B is up and following; A keeps running the schedule meanwhile.
        a.wait_for(r"Sent due task every-1s", timeout=30, after=len(a.text()))
        assert "beat: leading" not in b.text()
        # Kill A right after it sent the even second's every-2s run: then A is between
        # ticks (a kill between a claim and its send would lose that one run: documented).
        a.wait_for(r"Sent due task every-2s", timeout=30, after=len(a.text()))
        # That tick also fires every-1s, sent before or after every-2s: wait for both.
        tick = [t for e, t in sent(a) if e == "every-2s"][-1]
        wait_until(lambda: ("every-1s", tick) in sent(a), 30, "A sent the tick's every-1s run")
        a.kill()
        killed = time.monotonic()
        a.p.wait(10)
        b.wait_for(r"beat: leading", timeout=60)
        takeover = time.monotonic() - killed
        b_start = len(b.text())
        for _ in range(3):  # B runs the schedule: three more every-2s runs
            m = b.wait_for(r"Sent due task every-2s", timeout=30, after=b_start)
            b_start = m.end()
        b.stop()
    finally:
        for p in procs[1:]:
            p.kill()
    sent_a, sent_b = sent(a), sent(b)
    assert sent_a and sent_b
    expected = sent_a + sent_b
    runs = str(tmp_path / "runs.log")
    wait_until(lambda: len(read_lines(runs)) >= len(expected), 90, "the worker ran every sent task")
    w.stop()
    ran = [(r[0], r[1]) for r in read_lines(runs)]
    doubled = [k for k, n in Counter(ran).items() if n > 1]
    assert not doubled, f"ran twice: {doubled}"
    assert sorted(ran) == sorted(expected), "runs differ from what the beats sent"
    # Never skipped: every entry's fire times form an unbroken sequence across the hand-over.
    for entry, step in (("every-1s", 1), ("every-2s", 2)):
        times = sorted(datetime.fromisoformat(t) for e, t in ran if e == entry)
        gaps = [(x, y) for x, y in zip(times, times[1:]) if y - x != timedelta(seconds=step)]
        assert not gaps, f"{entry}: skipped between {gaps}"
        assert any(e == entry for e, _ in sent_b) and any(e == entry for e, _ in sent_a)
    caught_up = len([1 for e, _ in sent_b if e == "every-1s"])
    print(
        f"\nbeat hand-over: takeover {takeover:.2f} s after kill -9 (ttl {TTL:g} s); "
        f"A sent {len(sent_a)}, B sent {len(sent_b)} ({caught_up} every-1s), "
        f"{len(ran)} runs, none twice, none skipped"
    )


def test_singleton_task_never_runs_twice_at_once(tmp_path, store):
    workers = [worker(f"w{i}", tmp_path, store) for i in range(2)]
    try:
        for w in workers:
            w.wait_for(r"ready\.", timeout=90)
        from celery_app_client import send_exclusive  # the app, in this process

        results = send_exclusive(str(tmp_path), store, count=4, seconds=1.5)
        log = str(tmp_path / "exclusive.log")
        wait_until(lambda: len(results()) == 4, 120, "every exclusive task finished")
    finally:
        for w in workers:
            w.stop()
    rows = read_lines(log)
    runs = [(float(s[1]), float(e[1]), int(s[2])) for s, e in zip(rows[::2], rows[1::2])]
    assert (
        runs and all(s[0] == "start" for s in rows[::2]) and all(e[0] == "end" for e in rows[1::2])
    ), rows
    for (s1, e1, f1), (s2, e2, f2) in zip(runs, runs[1:]):
        assert e1 <= s2, f"two runs at once: {runs}"
        assert f2 > f1, f"fencing tokens do not increase: {runs}"
    print(
        f"\nsingleton task: {len(runs)} of 4 ran, one at a time (fences {[r[2] for r in runs]}); the rest skipped"
    )


# -- in-process: the scheduler's rules ---------------------------------------------------


def test_fire_times_are_the_same_on_every_node():
    app = Celery("fires")
    every = schedule(timedelta(seconds=10), app=app)
    t = datetime(2024, 1, 1, 12, 0, 3, 500000, tzinfo=timezone.utc)
    assert next_fire_time(every, t) == datetime(2024, 1, 1, 12, 0, 10, tzinfo=timezone.utc)
    assert next_fire_time(every, datetime(2024, 1, 1, 12, 0, 10, tzinfo=timezone.utc)) == datetime(
        2024, 1, 1, 12, 0, 20, tzinfo=timezone.utc
    )
    cron = crontab(minute="*/15", app=app)
    assert next_fire_time(cron, t) == datetime(2024, 1, 1, 12, 15, tzinfo=timezone.utc)
    assert next_fire_time(cron, datetime(2024, 1, 1, 12, 15, tzinfo=timezone.utc)) == datetime(
        2024, 1, 1, 12, 30, tzinfo=timezone.utc
    )
    with pytest.raises(ValueError, match="no time zone"):
        next_fire_time(every, datetime(2024, 1, 1))
    from celery.schedules import BaseSchedule

    with pytest.raises(TypeError, match="entry 's' has a BaseSchedule schedule"):
        next_fire_time(BaseSchedule(app=app), t, "s")


def _app(db, **conf):
    app = Celery("inproc", set_as_current=False)
    app.conf.update(mongoelector_url=db, mongoelector_beat_ttl=1, beat_schedule={}, **conf)
    return app


def test_settings_errors_name_the_setting(tmp_path):
    with pytest.raises(ValueError, match="mongoelector_url"):
        LeaderScheduler(Celery("x", set_as_current=False), lazy=True)
    with pytest.raises(TypeError, match="mongoelector_beat_ttl"):
        LeaderScheduler(_app(f"sqlite:///{tmp_path}/x.db", mongoelector_beat_ttl="5"), lazy=True)
    with pytest.raises(ValueError, match="retention"):
        LeaderScheduler(
            _app(
                f"sqlite:///{tmp_path}/x.db",
                mongoelector_beat_catch_up=100,
                mongoelector_beat_retention=50,
            ),
            lazy=True,
        )


class _AlwaysLeader:
    """Two schedulers that both believe they lead (a paused leader waking up next to
    its successor): the claims alone must keep each fire time to one send."""

    is_leader = True
    fence = 1

    def close(self):
        pass


class _Follower(_AlwaysLeader):
    is_leader = False
    fence = None


def _scheduler(db, name, sent, monkeypatch, every=0.2):
    app = _app(db)
    app.conf.beat_schedule = {"e": {"task": "t", "schedule": every}}
    s = LeaderScheduler(app)
    s.__dict__["producer"] = None  # no broker connection: apply_async is replaced
    monkeypatch.setattr(
        s,
        "apply_async",
        lambda entry, **kw: sent.append(
            (name, datetime.fromisoformat(entry.options["headers"]["mongoelector_fire_time"]))
        ),
    )
    return s


def _tick_for(s, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        s.tick()
        time.sleep(0.02)


def test_a_new_leader_sends_what_fell_due_during_the_hand_over(tmp_path, monkeypatch):
    db = f"sqlite:///{tmp_path}/gap.db"
    sent = []
    a = _scheduler(db, "a", sent, monkeypatch)
    b = _scheduler(db, "b", sent, monkeypatch)  # running (standing by) from now on
    a._elector, b._elector = _AlwaysLeader(), _Follower()
    _tick_for(a, 1.0)
    _tick_for(b, 0.2)  # a follower sends nothing
    a_sent = len(sent)
    time.sleep(0.7)  # a is gone; nobody leads: about 3 fire times pass
    b._elector = _AlwaysLeader()
    took_over = datetime.now(timezone.utc)
    _tick_for(b, 0.5)
    fires = sorted(t for _, t in sent)
    assert len(set(fires)) == len(fires), sent
    assert all(y - x == timedelta(seconds=0.2) for x, y in zip(fires, fires[1:])), fires
    late = [t for n, t in sent if n == "b" and t < took_over]
    assert {n for n, _ in sent[:a_sent]} == {"a"} and len(late) >= 2, sent
    for s in (a, b):
        s.close()


def test_two_leaders_at_once_send_each_fire_time_once(tmp_path, monkeypatch):
    db = f"sqlite:///{tmp_path}/two.db"
    sent = []
    schedulers = []
    for name in ("a", "b"):
        app = _app(db)
        app.conf.beat_schedule = {"e": {"task": "t", "schedule": 0.2}}
        s = LeaderScheduler(app)
        s._elector = _AlwaysLeader()
        s.__dict__["producer"] = None  # no broker connection: apply_async is replaced
        monkeypatch.setattr(
            s,
            "apply_async",
            lambda entry, name=name, **kw: sent.append((name, entry.options["headers"])),
        )
        schedulers.append(s)
    end = time.monotonic() + 3
    while time.monotonic() < end:
        for s in schedulers:
            s.tick()
        time.sleep(0.03)
    fires = [h["mongoelector_fire_time"] for _, h in sent]
    assert len(fires) >= 5 and len(set(fires)) == len(fires), sent
    times = sorted(datetime.fromisoformat(f) for f in fires)
    assert all(y - x == timedelta(seconds=0.2) for x, y in zip(times, times[1:])), times
    for s in schedulers:
        s.close()
