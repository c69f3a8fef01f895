"""The options of ``@singleton`` as class attributes, shared by the integrations whose
classes users configure that way (``mongoelector.celery.SingletonTask``,
``mongoelector.django.SingletonCommand``), and the one way they run a body under it."""

from __future__ import annotations

from typing import Any, Callable, Optional, Tuple, TypeVar, cast

from ._transport import DatabaseArg
from .lease import Lease
from .scheduling import singleton

_T = TypeVar("_T")


class SingletonOptions:
    """``mongoelector_ttl`` (60), ``mongoelector_wait``, ``mongoelector_timeout``,
    ``mongoelector_min_hold``, ``mongoelector_once_per``: as for ``mongoelector.singleton``."""

    mongoelector_ttl: float = 60
    mongoelector_wait: bool = False
    mongoelector_timeout: Optional[float] = None
    mongoelector_min_hold: Optional[float] = None
    mongoelector_once_per: Optional[float] = None

    @classmethod
    def of(
        cls,
        ttl: float,
        wait: bool,
        timeout: Optional[float],
        min_hold: Optional[float],
        once_per: Optional[float],
    ) -> "SingletonOptions":
        options = cls()
        options.mongoelector_ttl = ttl
        options.mongoelector_wait = wait
        options.mongoelector_timeout = timeout
        options.mongoelector_min_hold = min_hold
        options.mongoelector_once_per = once_per
        return options


def run_singleton(
    key: str, db: DatabaseArg, options: SingletonOptions, body: Callable[[Lease], _T]
) -> Tuple[bool, Optional[_T]]:
    """Runs ``body(lease)`` under ``@singleton(key, db, ...)`` with ``options``: (True,
    its result), or (False, None) when the run was skipped (logged by ``singleton``)."""
    ran = False

    def call(*, lease: Lease) -> _T:
        nonlocal ran
        ran = True
        return body(lease)

    guard = singleton(
        key,
        db,
        ttl=options.mongoelector_ttl,
        wait=options.mongoelector_wait,
        timeout=options.mongoelector_timeout,
        min_hold=options.mongoelector_min_hold,
        once_per=options.mongoelector_once_per,
        lease=True,
    )
    result = cast(Callable[[], Any], guard(call))()
    return ran, result
