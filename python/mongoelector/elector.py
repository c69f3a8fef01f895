"""MongoLeaderElector: leader election on MongoLocker (drop-in for mongoelector 1.0).

The poll loop is the native core's thread. It holds the GIL only while it calls Python
(pymongo calls with a Database transport, callbacks, logging) and never while it
sleeps; with a URI transport and no callbacks it never needs it. A leader that cannot
renew steps down (``is_leader`` turns False, ``on_leader_loss`` fires) before its lease
can be taken over; a follower takes over a dead leader's lease about one ttl after its
last renewal.
"""

from __future__ import annotations

import logging
import math
import numbers
import weakref
from datetime import datetime
from time import sleep
from types import TracebackType
from typing import Any, Callable, Dict, List, Literal, Optional, Type, TypedDict, TypeVar, cast

from pymongo.collection import Collection
from pymongo.database import Database

from . import _lifecycle, _native, _payload, _transport
from ._transport import DatabaseArg
from .locker import LockerStatus, MongoLocker, _check_args, _Closed, _identity
from .observer import LeaderObserver, _seconds, observe

__all__ = ["MongoLeaderElector", "NodeStatus", "ClusterDetail", "LeaderInfo"]

log = logging.getLogger(__name__)

_CALLBACKS = ("on_leader", "on_leader_loss", "on_loop")

#: A callback: called with no arguments; its return value is ignored.
Callback = Callable[[], object]

_E = TypeVar("_E", bound="MongoLeaderElector")


class _NodeStatusBase(LockerStatus):
    _id: str  # the node's uuid
    is_leader: bool
    elector_running: bool
    last_poll: Optional[datetime]  # None before the first poll


class NodeStatus(_NodeStatusBase, total=False):
    """``MongoLeaderElector.node_status``: the locker's status plus the node's."""

    app_version: str  # only when app_version was given


class _LeaderInfoBase(TypedDict):
    host: str
    process_id: int
    uuid: str


class LeaderInfo(_LeaderInfoBase, total=False):
    #: The leader's payload (``MongoLeaderElector(payload=...)``); absent when it has
    #: none (the original's three fields then).
    payload: Dict[str, Any]


class ClusterDetail(TypedDict):
    """``MongoLeaderElector.cluster_detail``."""

    #: Status documents of this key's nodes (original nodes' too), newest first, no _id.
    member_detail: List[Dict[str, Any]]
    leader: Optional[LeaderInfo]  # None when no node leads
    timestamp: datetime


def _check_handover_poll(handover_poll: object) -> None:
    seconds = _seconds("handover_poll", handover_poll, allow_none=True)
    if seconds is not None and not (math.isfinite(seconds) and 0 <= seconds <= 1e9):
        raise ValueError(
            "handover_poll must be a finite number of seconds in [0, 1e9] "
            "(0: off), not %r" % (handover_poll,)
        )


def _check_priority(priority: object, priority_stability: object) -> None:
    """Priority leaders' options, checked before any I/O (the core checks them again)."""
    if priority is not None:
        if isinstance(priority, bool) or not isinstance(priority, numbers.Real):
            raise TypeError("priority must be a number or None, not %s" % type(priority).__name__)
        if not math.isfinite(priority):
            raise ValueError("priority must be a finite number, not %r" % (priority,))
    seconds = _seconds("priority_stability", priority_stability, allow_none=True)
    if seconds is not None and not (math.isfinite(seconds) and 0 <= seconds <= 1e9):
        raise ValueError(
            "priority_stability must be a finite number of seconds in [0, 1e9], not %r"
            % (priority_stability,)
        )


def _make_dispatch(elector: MongoLeaderElector) -> Callable[[str], None]:
    """The function the native loop calls for a callback. It holds the elector weakly
    (the native elector must not keep its Python owner alive) and looks the callback
    up at call time, so reassigning ``callback_on_leader`` works as in the original."""
    ref = weakref.ref(elector)

    def dispatch(name: str) -> None:
        self = ref()
        if self is not None:
            self._fire_callback(self._callbacks.get(name), name)

    return dispatch


class MongoLeaderElector:
    """Coordinates distributed leader election using MongoDB-based locking.

    Runs a background (native) thread that periodically attempts to acquire leadership
    and invokes callbacks on state transitions.

    ``db`` is a pymongo ``Database`` (or mongomock's), or a ``mongodb://host/dbname``
    URI (or pass ``database=``) for the native transport.

    Keyword-only options beyond the original: ``database``, ``allow_unsafe_server``,
    ``op_timeout`` and ``delete_on_release`` (see MongoLocker; True by default, so that
    original nodes in a mixed fleet can take over at once after this node releases), and
    ``handover_poll``: seconds between a follower's looks at the lock while a leader
    exists, i.e. how soon a ``resign()`` or ``transfer()`` elsewhere is noticed (one read
    each, no write). None (default): ttl/4; 0: off (followers wake only when the
    leader's lease can expire, about one ttl after a hand-over). ``payload``: a dict
    (JSON-serialisable, at most 16 KiB encoded) published with each term this node
    leads, shown to observers and in ``cluster_detail["leader"]["payload"]`` (absent
    without one); see
    ``set_payload``.
    ``priority`` (opt-in; None, the default, is off): a number published in this node's
    status report; while leading, this node hands leadership over (``transfer``) to the
    running member of highest priority strictly above its own, once that member has been
    seen live at every poll for ``priority_stability`` seconds (None: one ttl). A tie
    never moves leadership; members without a priority are never chosen. Needs
    ``report_status``.

    Can be used as a context manager::

        with MongoLeaderElector("my-service", db, on_leader=start_work) as elector:
            # elector is running
            while elector.running:
                sleep(1)
        # elector is stopped, leadership released

    ``close()`` stops it for good and frees its native elector and, for a URI, the
    connections (see ``close``); the ``with`` statement above only starts and stops.
    """

    _core: _native.Elector
    key: str
    #: The ``db`` argument as given.
    db: DatabaseArg
    ttl: float
    #: The elector's lock (collection ``elector.locks``); closed with the elector.
    mlock: MongoLocker
    _status_collection: Optional[Collection[Any]]
    _callbacks: Dict[str, Optional[Callback]]
    _use: Optional[_transport.ClientUse]
    _closed: bool

    def __init__(
        self,
        key: str,
        db: DatabaseArg,
        *,
        ttl: float = 15,
        on_leader: Optional[Callback] = None,
        on_leader_loss: Optional[Callback] = None,
        on_loop: Optional[Callback] = None,
        app_version: Optional[str] = None,
        report_status: bool = True,
        database: Optional[str] = None,
        allow_unsafe_server: bool = False,
        op_timeout: Optional[float] = None,
        delete_on_release: bool = True,
        handover_poll: Optional[float] = None,
        payload: _payload.Payload = None,
        priority: Optional[float] = None,
        priority_stability: Optional[float] = None,
    ) -> None:
        _check_args(key, db, ttl, database)
        _check_handover_poll(handover_poll)
        _check_priority(priority, priority_stability)
        payload_json = _payload.encode(payload)
        _lifecycle.sweep()
        self._closed = False
        self._app_version = app_version
        self._report_status = report_status
        self.key = key
        self.db = db
        self.ttl = ttl
        self._database = database
        self._callbacks = {
            "on_leader": on_leader,
            "on_leader_loss": on_leader_loss,
            "on_loop": on_loop,
        }
        if op_timeout is None:
            op_timeout = _transport.op_timeout_for(ttl)
        storage, use = _transport.open_storage(db, database=database, op_timeout=op_timeout)
        try:
            self._core = _native.Elector(
                storage,
                key,
                float(ttl),
                bool(report_status),
                str(app_version) if app_version else None,
                _make_dispatch(self),
                allow_unsafe_server=bool(allow_unsafe_server),
                identity=_identity(),
                delete_on_release=bool(delete_on_release),
                handover_poll=None if handover_poll is None else float(handover_poll),
                payload=payload_json,
                priority=None if priority is None else float(priority),
                priority_stability=(
                    None if priority_stability is None else float(priority_stability)
                ),
            )
        except BaseException:
            del storage
            if use is not None:
                use.end()
            raise
        self._use = use
        for name in _CALLBACKS:
            self._core.set_callback_enabled(name, self._callbacks[name] is not None)
        self.mlock = MongoLocker._wrap(self._core.locker, key, db, "elector.locks", ttl)
        self._status_collection = (
            None if _transport.is_native(db) else cast("Database[Any]", db)["elector.leader_status"]
        )

    @property
    def callback_on_leader(self) -> Optional[Callback]:
        """Called (no arguments) when this node becomes leader."""
        return self._callbacks.get("on_leader")

    @callback_on_leader.setter
    def callback_on_leader(self, fn: Optional[Callback]) -> None:
        self._set_callback("on_leader", fn)

    @property
    def callback_on_leader_loss(self) -> Optional[Callback]:
        """Called (no arguments) when this node stops being leader."""
        return self._callbacks.get("on_leader_loss")

    @callback_on_leader_loss.setter
    def callback_on_leader_loss(self, fn: Optional[Callback]) -> None:
        self._set_callback("on_leader_loss", fn)

    @property
    def callback_on_loop(self) -> Optional[Callback]:
        """Called (no arguments) at the end of every poll."""
        return self._callbacks.get("on_loop")

    @callback_on_loop.setter
    def callback_on_loop(self, fn: Optional[Callback]) -> None:
        self._set_callback("on_loop", fn)

    def _set_callback(self, name: str, fn: Optional[Callback]) -> None:
        self._callbacks[name] = fn
        self._core.set_callback_enabled(name, fn is not None)

    def __repr__(self) -> str:
        if self._closed:
            return f"MongoLeaderElector(key={self.key!r}, closed, uuid={self.mlock.uuid!r})"
        leader = "leader" if self.is_leader else "follower"
        running = "running" if self.running else "stopped"
        return (
            f"MongoLeaderElector(key={self.key!r}, {leader}, {running}, uuid={self.mlock.uuid!r})"
        )

    def __enter__(self: _E) -> _E:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc_val: Optional[BaseException],
        exc_tb: Optional[TracebackType],
    ) -> Literal[False]:
        self.stop()
        return False

    @property
    def closed(self) -> bool:
        """True once ``close()`` was called."""
        return self._closed

    def close(self) -> None:
        """Stops this elector for good and frees what it holds.

        1. ``stop()``: ends the loop and releases leadership (fenced; ``on_leader_loss``
           fires if it led). As with ``stop()``, a failed release is logged, not raised
           (``logging.getLogger("mongoelector")``); the lease then ends at most one ttl
           later.
        2. Frees the native elector. With a URI the connections close as well unless
           another locker or elector of this process still uses the same URI (the last
           one closed closes them). A pymongo ``Database`` or ``mongoelector.Client`` is
           the caller's and is left open.

        Idempotent. Any other use afterwards (``mlock`` included) raises
        ``mongoelector.ClosedError``. May be called from a callback (the loop then ends
        after it). ``with contextlib.closing(elector), elector:`` runs, stops and closes.
        """
        if self._closed:
            return
        try:
            self._core.stop()
        finally:
            with _lifecycle._lock:  # no sweep or interpreter exit sees it any more
                _lifecycle._running.discard(self)
                core = self._core
                use = self._use
                self._closed = True
                self._use = None
                self._core = cast(_native.Elector, _Closed(f"MongoLeaderElector {self.key!r}"))
            self.mlock._mark_closed()
            # Frees the native elector (joins its loop; from a callback a native reaper
            # thread does), its storage and, last, the shared client.
            del core
            if use is not None:
                use.end()

    def start(self, blocking: bool = False) -> None:
        """Start the elector background thread.

        Args:
            blocking: If True, block until the elector thread exits (stop() from a
                callback or another thread). Ctrl-C stops the elector and re-raises.
        """
        core = self._core
        start = core.start  # ClosedError after close(), before the elector is tracked
        _lifecycle.sweep()
        if _lifecycle._exiting:
            raise RuntimeError("cannot start an elector while the interpreter exits")
        _lifecycle.track(self)
        start()
        if blocking:
            # ``core``, not self._core: close() from a callback ends the wait, not in error.
            try:
                while core.running:
                    sleep(0.05)  # GIL released, interruptible
            except BaseException:
                if not self._closed:
                    self.stop()
                raise

    def stop(self) -> None:
        """Stop the elector thread and release leadership."""
        self._core.stop()
        if not self._core.running:  # joined: not called from the loop's own thread
            _lifecycle.sweep()

    @property
    def running(self) -> bool:
        """True while the election loop runs (``start()`` until ``stop()``)."""
        return self._core.running

    @property
    def is_leader(self) -> bool:
        """True while this node leads and its lease is safely running (local clock:
        turns False at the renew deadline even if the database hangs)."""
        return self._core.is_leader

    @property
    def leader_exists(self) -> bool:
        """True if any node holds an unexpired leader lock (one round trip)."""
        return self.mlock.locked()

    @property
    def fence(self) -> Optional[int]:
        """Fencing token of this node's current leadership term, or None."""
        # Read with is_leader in one critical section of the core (no race between the
        # two), and local: no round trip.
        return self._core.leader_fence

    def poll(self) -> None:
        """Execute one poll cycle: renew if leader, attempt acquire if not."""
        self._core.poll()

    def _fire_callback(self, callback: Optional[Callback], name: str) -> None:
        if callback:
            try:
                callback()
            except Exception:
                log.exception("Error in %s callback", name)

    @property
    def cluster_detail(self) -> ClusterDetail:
        """Status documents of every node of this key and the current leader (one
        round trip)."""
        return cast(ClusterDetail, self._core.cluster_detail())

    @property
    def node_status(self) -> NodeStatus:
        """This node's status document, as reported to ``elector.leader_status``."""
        status = self._core.node_status()
        status["ttl"] = self.ttl
        if self._app_version:
            status["app_version"] = self._app_version
        return cast(NodeStatus, status)

    def release(self) -> None:
        """Release leadership and fire the on_leader_loss callback if applicable."""
        self._core.release()

    @property
    def payload(self) -> Optional[Dict[str, Any]]:
        """This node's leader payload, as last set (None: none)."""
        return _payload.decode(self._core.payload)

    def set_payload(self, payload: _payload.Payload) -> bool:
        """Replaces the payload this node publishes with its terms (None: none).

        While leading, one write that names this term (uuid and fence) with a version
        above every earlier one: True once applied. A write that lands late changes this
        term's payload only, never back to an older one. Not leading: kept for the next
        claim (which writes it atomically with the lock), False. TypeError for anything
        but a dict or None; ValueError when it is not JSON-serialisable or above 16 KiB
        encoded; a storage error when the write failed (the loop writes it again at its
        next poll while it leads). Any thread, callbacks included.
        """
        return bool(self._core.set_payload(_payload.encode(payload)))

    def resign(self, hold_off: Optional[float] = None) -> bool:
        """Give up leadership now and keep the loop running, but do not stand for
        election again for ``hold_off`` seconds (default: the ttl), so that another
        member takes over (in about ttl/4: followers peek at the lock that often).

        on_leader_loss runs (on this thread) and returns before the fenced release is
        sent. Returns whether this node was leader. Raises ValueError for a hold-off
        that is not a finite number of seconds in [0, 1e9].
        """
        return self._core.resign(hold_off)

    def transfer(self, to: str) -> None:
        """Hand leadership to the member whose uuid is ``to`` (its
        ``node_status["uuid"]``, or a ``cluster_detail`` member's ``uuid``).

        This term ends first (is_leader turns False, on_leader_loss runs and returns),
        then one fenced write names the target, which takes over at its next peek
        (about ttl/4) with one renewal of its own, its fencing token one above this
        term's. A target that died costs one ttl, as a crash would. Raises ValueError
        when this node does not lead (also when its lease ended first: nothing was
        handed over), or ``to`` is empty, this node, or not a member (no status
        document, with report_status on).
        """
        self._core.transfer(to)

    def observe(self, *, interval: float = 1.0) -> LeaderObserver:
        """``mongoelector.observe()`` of this elector's key and database: the stream of
        its leader changes (a ``LeaderObserver`` of its own; close it when done)."""
        return observe(self.db, self.key, interval=interval, database=self._database)

    @property
    def poll_wait(self) -> float:
        """Seconds between poll cycles. Leaders poll at half the TTL."""
        return self.ttl if self._core.poll_wait == float(self.ttl) else self.ttl / 2.0
