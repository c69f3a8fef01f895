"""How an acquire that Python drives counts in the core's acquire metrics: once, with the
outcome the core's own acquire loop gives it (core/acquire_metrics.h)."""

from __future__ import annotations

from contextlib import contextmanager
from time import monotonic
from typing import Iterator, Tuple, Type

from . import _native
from .errors import AcquireTimeout, ClosedError, LockExists


@contextmanager
def counted_acquire(cancelled: Tuple[Type[BaseException], ...]) -> Iterator[None]:
    """Counts the block as one acquire: acquired when it ends normally, held
    (``LockExists``), timeout (``AcquireTimeout``), cancelled (``cancelled``: Ctrl-C, an
    asyncio cancellation) or error; a caller's mistake (``ValueError``, ``TypeError``,
    ``ClosedError``) is not an outcome."""
    started = monotonic()
    outcome = "error"
    try:
        yield
        outcome = "acquired"
    except LockExists:
        outcome = "held"
        raise
    except AcquireTimeout:
        outcome = "timeout"
        raise
    except cancelled:
        outcome = "cancelled"
        raise
    except (ValueError, TypeError, ClosedError):
        outcome = ""
        raise
    finally:
        if outcome:
            _native.metrics_record_acquire(outcome, monotonic() - started)
