import time
from typing import Any

from django.core.management.base import BaseCommand
from mongoelector.django import singleton_command

from djapp.common import barrier, record


class Command(BaseCommand):
    help = "The decorator form: one node at a time, 60 s minimum hold"

    def execute(self, *args: Any, **options: Any) -> Any:
        barrier()
        return super().execute(*args, **options)

    @singleton_command(ttl=5, min_hold=60)
    def handle(self, *args: Any, **options: Any) -> None:
        record("start", self.lease.fence)  # type: ignore[attr-defined]
        time.sleep(1)
        record("end", self.lease.fence)  # type: ignore[attr-defined]
        self.stdout.write("ran")
