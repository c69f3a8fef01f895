"""Distributed locks and leader election over MongoDB, on a native core.

A drop-in replacement for the pure-Python ``mongoelector`` 1.0 package: same names,
signatures, documents and collections, plus fencing tokens (``MongoLocker.fence``),
step-down before takeover, failover in about one ttl, a server-time base and an
election loop that does not compete for the GIL.
"""

from . import testing
from .client import Client
from .elector import ClusterDetail, MongoLeaderElector, NodeStatus
from .errors import (
    ClosedError,
    LeaseLost,
    MongoElectorError,
    StaleFence,
    StorageError,
    StorageUnavailable,
    UnsafeServerError,
)
from .fenced import (
    FencedCollection,
    fenced_delete_one,
    fenced_insert_one,
    fenced_replace_one,
    fenced_update_one,
)
from .lease import Lease, lease
from .locker import AcquireTimeout, LockerStatus, LockExists, MongoLocker, TimeOffsetError
from .observer import LeaderObserver, LeaderState, LeaderStatus, observe
from .partitioner import Partitioner, PartitionStatus, partition_status
from .rwlock import MongoReadWriteLock, RwLockHolders, RwLockLease
from .scheduling import once_per, singleton
from .semaphore import MongoSemaphore, SemaphoreHolder, SemaphoreLease

__version__ = "1.1.0"

__all__ = [
    "MongoLocker",
    "MongoLeaderElector",
    "MongoSemaphore",
    "SemaphoreHolder",
    "SemaphoreLease",
    "MongoReadWriteLock",
    "Partitioner",
    "PartitionStatus",
    "partition_status",
    "RwLockLease",
    "RwLockHolders",
    "Client",
    "LockExists",
    "AcquireTimeout",
    "TimeOffsetError",
    "MongoElectorError",
    "UnsafeServerError",
    "StorageUnavailable",
    "StorageError",
    "lease",
    "Lease",
    "LeaseLost",
    "ClosedError",
    "StaleFence",
    "FencedCollection",
    "fenced_update_one",
    "fenced_replace_one",
    "fenced_insert_one",
    "fenced_delete_one",
    "singleton",
    "observe",
    "LeaderObserver",
    "LeaderState",
    "LeaderStatus",
    "once_per",
    "testing",
    "LockerStatus",
    "NodeStatus",
    "ClusterDetail",
    "__version__",
]
