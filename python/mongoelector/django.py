"""Django integration: management commands whose ``handle()`` runs on one node at a time,
and a lock backend for django-cron.

Needs ``Django`` (``pip install 'mongoelector[django]'``); imported only when used. The
database of the locks is ``settings.MONGOELECTOR_URL`` (a ``mongodb://`` or
``sqlite:///`` URI, or a pymongo ``Database``)::

    # myapp/management/commands/nightly_report.py
    from mongoelector.django import SingletonCommand

    class Command(SingletonCommand):
        mongoelector_min_hold = 300        # and no other node for 5 minutes after it started

        def handle(self, *args, **options):
            print("report, fencing token", self.lease.fence)

Run it from every node's crontab: one node runs ``handle()``, the others print that they
skipped it to stderr and exit with status 0. For django-cron:
``DJANGO_CRON_LOCK_BACKEND = "mongoelector.django.CronJobLock"``.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional, TypeVar, cast

from django.conf import settings  # type: ignore[import-untyped,import-not-found,unused-ignore]
from django.core.exceptions import ImproperlyConfigured  # type: ignore[import-untyped,import-not-found,unused-ignore]
from django.core.management.base import BaseCommand  # type: ignore[import-untyped,import-not-found,unused-ignore]

from ._singleton_options import SingletonOptions, run_singleton
from ._transport import DatabaseArg
from .lease import Lease
from .locker import AcquireTimeout, LockExists

__all__ = ["SingletonCommand", "singleton_command", "CronJobLock"]

_H = TypeVar("_H", bound=Callable[..., Any])


def _database(what: str) -> DatabaseArg:
    db = getattr(settings, "MONGOELECTOR_URL", None)
    if not db:
        raise ImproperlyConfigured(
            f"{what} needs the database of its locks: set MONGOELECTOR_URL in your Django "
            'settings (e.g. "mongodb://db1/app" or "sqlite:////var/lib/app/locks.db")'
        )
    return cast(DatabaseArg, db)


def _command_name(command: BaseCommand) -> str:
    # A command's module is <app>.management.commands.<name>.
    return type(command).__module__.rsplit(".", 1)[-1]


def singleton_command(
    key: Optional[str] = None,
    *,
    ttl: float = 60,
    wait: bool = False,
    timeout: Optional[float] = None,
    min_hold: Optional[float] = None,
    once_per: Optional[float] = None,
) -> Callable[[_H], _H]:
    """Decorator for a command's ``handle(self, *args, **options)``: it runs on one node
    at a time (lock ``key``, default ``"django-command:<command name>"``), with the
    options of ``mongoelector.singleton``; ``self.lease`` is the running lease while it
    runs. A skipped run writes why to ``self.stderr`` and returns None."""

    settings_ = SingletonOptions.of(ttl, wait, timeout, min_hold, once_per)

    def decorate(handle: _H) -> _H:
        @functools.wraps(handle)
        def run(self: BaseCommand, *args: Any, **options: Any) -> Any:
            name = key or f"django-command:{_command_name(self)}"

            def body(lease: Lease) -> Any:
                previous = getattr(self, "lease", None)
                setattr(self, "lease", lease)  # noqa: B010 - any command class
                try:
                    return handle(self, *args, **options)
                finally:
                    setattr(self, "lease", previous)  # noqa: B010

            db = _database(f"command {_command_name(self)}")
            ran, result = run_singleton(name, db, settings_, body)
            if not ran:
                self.stderr.write(f"{name}: skipped, it runs (or ran recently) on another node")
            return result

        return cast(_H, run)

    return decorate


class SingletonCommand(SingletonOptions, BaseCommand):  # type: ignore[misc,unused-ignore]
    """A management command whose ``handle()`` runs on one node at a time; options as
    class attributes: ``mongoelector_key`` (default ``"django-command:<name>"``),
    ``mongoelector_ttl`` (60), ``mongoelector_wait``, ``mongoelector_timeout``,
    ``mongoelector_min_hold``, ``mongoelector_once_per`` (see
    ``mongoelector.singleton``). ``self.lease`` (``.fence``: the fencing token) is the
    running lease inside ``handle()``."""

    mongoelector_key: Optional[str] = None
    lease: Optional[Lease] = None

    def execute(self, *args: Any, **options: Any) -> Any:
        guarded = singleton_command(
            self.mongoelector_key,
            ttl=self.mongoelector_ttl,
            wait=self.mongoelector_wait,
            timeout=self.mongoelector_timeout,
            min_hold=self.mongoelector_min_hold,
            once_per=self.mongoelector_once_per,
        )(BaseCommand.execute)
        return guarded(self, *args, **options)


try:  # django-cron is optional: CronJobLock exists when it is installed.
    from django_cron.backends.lock.base import DjangoCronJobLock  # type: ignore[import-untyped,import-not-found,unused-ignore]
except ImportError:  # pragma: no cover - depends on the environment
    pass
else:

    class CronJobLock(DjangoCronJobLock):  # type: ignore[misc,unused-ignore]
        """django-cron lock backend (``DJANGO_CRON_LOCK_BACKEND =
        "mongoelector.django.CronJobLock"``): a job runs on one node at a time, under a
        keep-alive lease ``"django-cron:<job code>"`` of ``MONGOELECTOR_CRON_TTL``
        seconds (default 60) renewed while it runs."""

        def __init__(self, cron_class: Any, silent: bool, *args: Any, **kwargs: Any) -> None:
            super().__init__(cron_class, silent, *args, **kwargs)
            self._lease = Lease(
                _database("mongoelector.django.CronJobLock"),
                f"django-cron:{self.job_code}",
                ttl=float(getattr(settings, "MONGOELECTOR_CRON_TTL", 60)),
                blocking=False,
            )

        def lock(self) -> bool:
            try:
                self._lease.acquire()
            except (LockExists, AcquireTimeout):
                self._lease.locker.close()  # django-cron calls release() only after a lock
                return False
            return True

        def release(self) -> None:
            try:
                self._lease._release_after_job(f"cron job lock {self._lease.key}")
            finally:
                self._lease.locker.close()
