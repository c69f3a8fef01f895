import time

from django_cron import CronJobBase, Schedule

from djapp.common import record


class Report(CronJobBase):
    RUN_EVERY_MINS = 60
    schedule = Schedule(run_every_mins=RUN_EVERY_MINS)
    code = "djapp.report"

    def do(self) -> None:
        record("cron", "-")
        time.sleep(1)
