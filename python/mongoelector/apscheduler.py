"""APScheduler 3 integration: jobs scheduled on every node run once per fire time.

Needs ``APScheduler>=3.9,<4`` (``pip install 'mongoelector[apscheduler]'``); imported
only when used::

    from apscheduler.executors.pool import ThreadPoolExecutor  # type: ignore[import-untyped,import-not-found,unused-ignore]
    from apscheduler.schedulers.background import BackgroundScheduler  # type: ignore[import-untyped,import-not-found,unused-ignore]
    from mongoelector.apscheduler import SingletonExecutor

    scheduler = BackgroundScheduler(
        executors={"default": SingletonExecutor("mongodb://db1/ops", ThreadPoolExecutor(4))})
    scheduler.add_job(report, "cron", minute="*/5", id="report")   # the same id on every node
    scheduler.start()

``SingletonExecutor`` wraps the executor that runs the jobs. Before it hands a run to
that executor it claims the run's fire time for the job (a marker per job id and fire
time, see ``mongoelector._claims``): the first node to claim it runs it, every other
node skips it (logged), whether its scheduler fired at the same moment, late (a misfire,
a loaded host) or after a restart. A node whose claim fails (database unreachable)
skips the run: it cannot know whether the claim landed.

What every node must agree on, or the runs cannot be matched:

* the job's ``id`` (give one: the default id is random per process, and is refused);
* its fire times: cron and date triggers give the same times everywhere; an interval
  trigger's runs are matched by the interval's window since the Unix epoch (every 10 min
  window [:00, :10), ...), so nodes that started at different times still run each
  window's run once; ``jitter`` is refused (each node would fire at another time).

A run whose fire time is older than half the ``retention`` (default 1 h) is skipped:
its claim may have expired. The claims are made on the scheduler's thread (one round
trip per fire time).
"""

from __future__ import annotations

import logging
import re
from datetime import datetime, timedelta, timezone
from typing import Any, List, Optional

from apscheduler.executors.base import BaseExecutor, MaxInstancesReachedError  # type: ignore[import-untyped,import-not-found,unused-ignore]
from apscheduler.executors.pool import ThreadPoolExecutor  # type: ignore[import-untyped,import-not-found,unused-ignore]
from apscheduler.job import Job  # type: ignore[import-untyped,import-not-found,unused-ignore]
from apscheduler.triggers.interval import IntervalTrigger  # type: ignore[import-untyped,import-not-found,unused-ignore]

from ._claims import FireClaims, utc
from ._transport import DatabaseArg

__all__ = ["SingletonExecutor", "claim_time"]

_log = logging.getLogger("mongoelector.apscheduler")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = timedelta(microseconds=1)
_RANDOM_ID = re.compile(r"[0-9a-f]{32}")


def claim_time(job: Job, run_time: datetime) -> datetime:
    """The time a run of ``job`` is claimed under (UTC): its fire time, or for an
    interval trigger the start of the interval's window (since the epoch) it falls in."""
    trigger = job.trigger
    if getattr(trigger, "jitter", None):
        raise ValueError(
            f"job {job.id!r} has a trigger with jitter: every node would fire it at a "
            "different time and its runs could not be matched; remove jitter"
        )
    if isinstance(trigger, IntervalTrigger):
        every = int(trigger.interval // _US)
        if every <= 0:
            raise ValueError(f"job {job.id!r} has an interval of {trigger.interval}")
        elapsed = (utc(run_time) - _EPOCH) // _US
        return _EPOCH + (elapsed // every) * every * _US
    return utc(run_time)


class SingletonExecutor(BaseExecutor):  # type: ignore[misc,unused-ignore]
    """An APScheduler 3 executor that runs each fire time of a job on one node only;
    ``executor`` (default ``ThreadPoolExecutor()``) runs the claimed runs. ``prefix``
    names the claims (``"<prefix>:<job id>@fire:<ms>"``): schedulers that should not
    share runs use different prefixes. See the module docstring."""

    def __init__(
        self,
        db: DatabaseArg,
        executor: Optional[BaseExecutor] = None,
        *,
        prefix: str = "apscheduler",
        retention: float = 3600,
        dbcollection: str = "mongolocker",
        database: Optional[str] = None,
        op_timeout: Optional[float] = None,
    ) -> None:
        super().__init__()
        if executor is not None and not isinstance(executor, BaseExecutor):
            raise TypeError(
                f"executor must be an APScheduler executor (e.g. ThreadPoolExecutor()), "
                f"not {type(executor).__name__}"
            )
        if not isinstance(prefix, str) or not prefix:
            raise ValueError(f"prefix must be a non-empty str, not {prefix!r}")
        self.inner: BaseExecutor = executor if executor is not None else ThreadPoolExecutor()
        self.prefix = prefix
        self._db = db
        self._retention = retention
        self._dbcollection = dbcollection
        self._database = database
        self._op_timeout = op_timeout
        self._new_claims().close()  # checks the arguments now
        self._claims: Optional[FireClaims] = None

    def _new_claims(self) -> FireClaims:
        return FireClaims(
            self._db,
            retention=self._retention,
            dbcollection=self._dbcollection,
            database=self._database,
            op_timeout=self._op_timeout,
        )

    def start(self, scheduler: Any, alias: str) -> None:
        super().start(scheduler, alias)
        self._claims = self._new_claims()
        self.inner.start(scheduler, alias)

    def shutdown(self, wait: bool = True) -> None:
        try:
            self.inner.shutdown(wait)
        finally:
            if self._claims is not None:
                self._claims.close()
                self._claims = None

    def submit_job(self, job: Job, run_times: List[datetime]) -> None:
        claims = self._claims
        if claims is None:
            raise RuntimeError("SingletonExecutor was not started: add it to a scheduler")
        if _RANDOM_ID.fullmatch(job.id):
            raise ValueError(
                f"job {job.name!r} has a generated id ({job.id}): give it the same id on every "
                "node (add_job(..., id='...')) so that the nodes can match its runs"
            )
        # A run that would exceed max_instances is refused before it is claimed, so that
        # another node can still run it.
        if self.inner._instances[job.id] >= job.max_instances:
            raise MaxInstancesReachedError(job)
        now = datetime.now(timezone.utc)
        claimed = []
        for run_time in run_times:
            when = claim_time(job, run_time)
            if (now - when).total_seconds() > claims.retention / 2:
                _log.warning(
                    "job %s: run of %s skipped: too late to claim it safely (retention %g s)",
                    job.id,
                    run_time,
                    claims.retention,
                )
            elif claims.claim(f"{self.prefix}:{job.id}", when):
                claimed.append(run_time)
            else:
                _log.info("job %s: run of %s skipped: another node claimed it", job.id, run_time)
        if claimed:
            self.inner.submit_job(job, claimed)

    def _do_submit_job(self, job: Job, run_times: List[datetime]) -> None:
        raise AssertionError("SingletonExecutor.submit_job hands runs to its inner executor")
