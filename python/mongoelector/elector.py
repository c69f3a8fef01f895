"""MongoLeaderElector: leader election on MongoLocker (drop-in for mongoelector 1.0).

The poll loop is the native core's thread. It holds the GIL only while it calls Python
(pymongo calls with a Database transport, callbacks, logging) and never while it
sleeps; with a URI transport and no callbacks it never needs it. A leader that cannot
renew steps down (``is_leader`` turns False, ``on_leader_loss`` fires) before its lease
can be taken over; a follower takes over a dead leader's lease about one ttl after its
last renewal.
"""

import logging
import weakref
from time import sleep

from . import _lifecycle, _native, _transport
from .locker import MongoLocker, _check_args, _identity

__all__ = ["MongoLeaderElector"]

log = logging.getLogger(__name__)

_CALLBACKS = ("on_leader", "on_leader_loss", "on_loop")


def _make_dispatch(elector):
    """The function the native loop calls for a callback. It holds the elector weakly
    (the native elector must not keep its Python owner alive) and looks the callback
    up at call time, so reassigning ``callback_on_leader`` works as in the original."""
    ref = weakref.ref(elector)

    def dispatch(name):
        self = ref()
        if self is not None:
            self._fire_callback(self._callbacks.get(name), name)

    return dispatch


def _callback_property(name):
    def get(self):
        return self._callbacks.get(name)

    def set_(self, fn):
        self._callbacks[name] = fn
        self._core.set_callback_enabled(name, fn is not None)

    return property(get, set_, doc=f"Called (no arguments) {name.replace('_', ' ')}.")


class MongoLeaderElector:
    """Coordinates distributed leader election using MongoDB-based locking.

    Runs a background (native) thread that periodically attempts to acquire leadership
    and invokes callbacks on state transitions.

    ``db`` is a pymongo ``Database`` (or mongomock's), or a ``mongodb://host/dbname``
    URI (or pass ``database=``) for the native transport.

    Keyword-only options beyond the original: ``database``, ``allow_unsafe_server``,
    ``op_timeout`` and ``delete_on_release`` (see MongoLocker; True by default, so that
    original nodes in a mixed fleet can take over at once after this node releases).

    Can be used as a context manager::

        with MongoLeaderElector("my-service", db, on_leader=start_work) as elector:
            # elector is running
            while elector.running:
                sleep(1)
        # elector is stopped, leadership released
    """

    callback_on_leader = _callback_property("on_leader")
    callback_on_leader_loss = _callback_property("on_leader_loss")
    callback_on_loop = _callback_property("on_loop")

    def __init__(self, key, db, *, ttl=15, on_leader=None, on_leader_loss=None, on_loop=None,
                 app_version=None, report_status=True, database=None, allow_unsafe_server=False,
                 op_timeout=None, delete_on_release=True):
        _check_args(key, db, ttl, database)
        _lifecycle.sweep()
        self._app_version = app_version
        self._report_status = report_status
        self.key = key
        self.db = db
        self.ttl = ttl
        self._callbacks = {"on_leader": on_leader, "on_leader_loss": on_leader_loss,
                           "on_loop": on_loop}
        if op_timeout is None:
            op_timeout = _transport.op_timeout_for(ttl)
        storage = _transport.open_storage(db, database=database, op_timeout=op_timeout)
        self._core = _native.Elector(
            storage, key, float(ttl), bool(report_status),
            str(app_version) if app_version else None, _make_dispatch(self),
            allow_unsafe_server=bool(allow_unsafe_server), identity=_identity(),
            delete_on_release=bool(delete_on_release))
        for name in _CALLBACKS:
            self._core.set_callback_enabled(name, self._callbacks[name] is not None)
        self.mlock = MongoLocker._wrap(self._core.locker, key, db, "elector.locks", ttl)
        self._status_collection = (
            None if _transport.is_native(db) else db["elector.leader_status"])

    def __repr__(self):
        leader = "leader" if self.is_leader else "follower"
        running = "running" if self.running else "stopped"
        return f"MongoLeaderElector(key={self.key!r}, {leader}, {running}, uuid={self.mlock.uuid!r})"

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.stop()
        return False

    def start(self, blocking=False):
        """Start the elector background thread.

        Args:
            blocking: If True, block until the elector thread exits (stop() from a
                callback or another thread). Ctrl-C stops the elector and re-raises.
        """
        _lifecycle.sweep()
        if _lifecycle._exiting:
            raise RuntimeError("cannot start an elector while the interpreter exits")
        _lifecycle.track(self)
        self._core.start()
        if blocking:
            try:
                while self._core.running:
                    sleep(0.05)  # GIL released, interruptible
            except BaseException:
                self.stop()
                raise

    def stop(self):
        """Stop the elector thread and release leadership."""
        self._core.stop()
        if not self._core.running:  # joined: not called from the loop's own thread
            _lifecycle.sweep()

    @property
    def running(self):
        return self._core.running

    @property
    def is_leader(self):
        """True while this node leads and its lease is safely running (local clock:
        turns False at the renew deadline even if the database hangs)."""
        return self._core.is_leader

    @property
    def leader_exists(self):
        """True if any node holds an unexpired leader lock (one round trip)."""
        return self.mlock.locked()

    @property
    def fence(self):
        """Fencing token of this node's current leadership term, or None."""
        return self.mlock.fence if self.is_leader else None

    def poll(self):
        """Execute one poll cycle: renew if leader, attempt acquire if not."""
        self._core.poll()

    def _fire_callback(self, callback, name):
        if callback:
            try:
                callback()
            except Exception:
                log.exception("Error in %s callback", name)

    @property
    def cluster_detail(self):
        return self._core.cluster_detail()

    @property
    def node_status(self):
        status = self._core.node_status()
        status["ttl"] = self.ttl
        if self._app_version:
            status["app_version"] = self._app_version
        return status

    def release(self):
        """Release leadership and fire the on_leader_loss callback if applicable."""
        self._core.release()

    @property
    def poll_wait(self):
        """Seconds between poll cycles. Leaders poll at half the TTL."""
        return self.ttl if self._core.poll_wait == float(self.ttl) else self.ttl / 2.0
