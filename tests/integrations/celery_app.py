"""The Celery app of test_celery.py: a filesystem broker in $ME_TEST_DIR, the locks in
$ME_TEST_DB, two interval entries, a task that appends its runs to a file."""

import os
import time

from celery import Celery
from celery.signals import task_postrun
from mongoelector.celery import SingletonTask, fire_time

DIR = os.environ["ME_TEST_DIR"]
BROKER = os.path.join(DIR, "broker")
os.makedirs(BROKER, exist_ok=True)

app = Celery("itest", broker="filesystem://")
app.conf.update(
    broker_transport_options={
        "data_folder_in": BROKER,
        "data_folder_out": BROKER,
        "control_folder": os.path.join(DIR, "control"),
    },
    broker_connection_retry_on_startup=True,
    beat_enable_remote_control=False,
    task_ignore_result=True,
    worker_hijack_root_logger=False,
    mongoelector_url=os.environ["ME_TEST_DB"],
    mongoelector_beat_ttl=float(os.environ.get("ME_TTL", "2")),
    beat_schedule={
        "every-1s": {"task": "itest.record", "schedule": 1.0, "args": ("every-1s",)},
        "every-2s": {"task": "itest.record", "schedule": 2.0, "args": ("every-2s",)},
    },
)


def _append(path: str, line: str) -> None:
    with open(path, "a") as f:  # one write per line: lines of processes do not mix
        f.write(line + "\n")


@app.task(bind=True, name="itest.record")
def record(self, name):  # type: ignore[no-untyped-def]
    fired = fire_time(self.request)
    _append(
        os.path.join(DIR, "runs.log"), f"{name} {fired.isoformat() if fired else '-'} {os.getpid()}"
    )


@app.task(bind=True, base=SingletonTask, name="itest.exclusive", mongoelector_ttl=5)
def exclusive(self, seconds):  # type: ignore[no-untyped-def]
    path = os.path.join(DIR, "exclusive.log")
    _append(path, f"start {time.time():.3f} {self.lease.fence} {os.getpid()}")
    time.sleep(seconds)
    _append(path, f"end {time.time():.3f} {self.lease.fence} {os.getpid()}")
    return self.lease.fence


@task_postrun.connect
def _finished(sender=None, retval=None, **_):  # type: ignore[no-untyped-def]
    if sender is not None and sender.name == "itest.exclusive":  # skipped runs too
        _append(os.path.join(DIR, "exclusive.done"), str(retval))
