import time
from typing import Any

from mongoelector.django import SingletonCommand

from djapp.common import barrier, record


class Command(SingletonCommand):
    help = "Runs on one node: the others skip it for 60 s after it started"
    mongoelector_ttl = 5
    mongoelector_min_hold = 60

    def execute(self, *args: Any, **options: Any) -> Any:
        barrier()
        return super().execute(*args, **options)

    def handle(self, *args: Any, **options: Any) -> None:
        assert self.lease is not None
        record("start", self.lease.fence)
        time.sleep(1)
        record("end", self.lease.fence)
        self.stdout.write("ran")
