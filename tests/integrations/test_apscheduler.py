"""mongoelector.apscheduler on 3 real processes: each fire time runs once, on one node,
also after one node is killed; and the executor's refusals, in-process."""

import sys
import time
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest
from procs import Proc, read_lines, wait_until

pytest.importorskip("apscheduler")

from apscheduler.schedulers.background import BackgroundScheduler  # noqa: E402
from mongoelector.apscheduler import SingletonExecutor  # noqa: E402


def test_three_nodes_run_each_fire_time_once(tmp_path, store):
    runs = str(tmp_path / "runs.log")
    nodes = [
        Proc(
            f"node{i}", [sys.executable, "aps_node.py", store, runs], str(tmp_path / f"node{i}.log")
        )
        for i in range(3)
    ]
    try:
        for n in nodes:
            n.wait_for("ready", timeout=90)
        all_up = datetime.now(timezone.utc)
        wait_until(lambda: len(read_lines(runs)) >= 10, 60, "runs recorded")
        # Kill the node that ran most so far; the others go on without a gap.
        by_pid = Counter(r[2] for r in read_lines(runs))
        victim = next(n for n in nodes if str(n.p.pid) == by_pid.most_common(1)[0][0])
        victim.kill()
        victim.p.wait(10)
        killed = datetime.now(timezone.utc)
        count = len(read_lines(runs))
        wait_until(lambda: len(read_lines(runs)) >= count + 10, 60, "runs after the kill")
        for n in nodes:
            if n is not victim:
                assert n.stop() == 0, n.text()
        end = datetime.now(timezone.utc)
    finally:
        for n in nodes:
            n.kill()
    rows = read_lines(runs)
    doubled = [k for k, c in Counter((r[0], r[1]) for r in rows).items() if c > 1]
    assert not doubled, f"ran twice: {doubled}"
    for job in ("cron-1s", "interval-1s"):
        times = sorted(datetime.fromisoformat(r[1]) for r in rows if r[0] == job)
        inside = [
            t for t in times if all_up + timedelta(seconds=1) <= t <= end - timedelta(seconds=2)
        ]
        assert len(inside) >= 6, (job, times)
        gaps = [(x, y) for x, y in zip(inside, inside[1:]) if y - x != timedelta(seconds=1)]
        assert not gaps, f"{job}: skipped between {gaps}"
        assert any(t > killed for t in inside), f"{job}: nothing ran after the kill"
    pids = Counter(r[2] for r in rows)
    print(
        f"\napscheduler: {len(rows)} runs on {len(pids)} nodes {dict(pids)}, none twice, none skipped across kill -9"
    )


def test_refusals_name_the_mistake(tmp_path):
    db = f"sqlite:///{tmp_path}/x.db"
    with pytest.raises(TypeError, match="APScheduler executor"):
        SingletonExecutor(db, executor=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="retention"):
        SingletonExecutor(db, retention=0)
    sched = BackgroundScheduler(executors={"default": SingletonExecutor(db)}, timezone="UTC")
    sched.start(paused=True)
    try:
        executor = sched._lookup_executor("default")
        no_id = sched.add_job(print, "interval", seconds=5)
        with pytest.raises(ValueError, match="same id on every node"):
            executor.submit_job(no_id, [datetime.now(timezone.utc)])
        jittery = sched.add_job(print, "interval", seconds=5, jitter=2, id="j")
        with pytest.raises(ValueError, match="jitter"):
            executor.submit_job(jittery, [datetime.now(timezone.utc)])
        # Two executors (two nodes) claim one fire time: one runs it.
        job = sched.add_job(print, "cron", second="*/5", id="c")
        other = SingletonExecutor(db)
        other.start(sched, "other")
        when = datetime.now(timezone.utc).replace(microsecond=0)
        submitted = []
        for ex in (executor, other):
            ex.inner.submit_job = lambda job, times, ex=ex: submitted.append((ex, times))
            ex.submit_job(job, [when])
        assert len(submitted) == 1
        # Too old to claim safely: skipped, not run.
        executor.submit_job(job, [when - timedelta(hours=2)])
        assert len(submitted) == 1
        other.shutdown()
    finally:
        sched.shutdown(wait=False)
        time.sleep(0)
