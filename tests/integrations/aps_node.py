"""One node of test_apscheduler.py: a BackgroundScheduler with two jobs on every second
(a cron job and an interval job), through SingletonExecutor; every run is appended to
runs.log as "job claim-time pid" by an EVENT_JOB_EXECUTED listener."""

import os
import signal
import sys
import threading

from apscheduler.events import EVENT_JOB_EXECUTED, JobExecutionEvent
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from mongoelector.apscheduler import SingletonExecutor, claim_time

db, out = sys.argv[1], sys.argv[2]
scheduler = BackgroundScheduler(
    executors={"default": SingletonExecutor(db, ThreadPoolExecutor(2))},
    job_defaults={"misfire_grace_time": 30, "coalesce": False},
    timezone="UTC",
)


def work() -> None:
    pass


scheduler.add_job(work, "cron", second="*", id="cron-1s")
scheduler.add_job(work, "interval", seconds=1, id="interval-1s")


def record(event: JobExecutionEvent) -> None:
    job = scheduler.get_job(event.job_id)
    when = claim_time(job, event.scheduled_run_time)
    with open(out, "a") as f:
        f.write(f"{event.job_id} {when.isoformat()} {os.getpid()}\n")


scheduler.add_listener(record, EVENT_JOB_EXECUTED)
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
scheduler.start()
print("ready", flush=True)
stop.wait()
scheduler.shutdown(wait=True)
print("stopped", flush=True)
