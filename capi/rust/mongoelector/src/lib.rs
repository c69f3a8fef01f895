//! Distributed locks with fencing tokens and leader election over MongoDB: safe bindings
//! of libmongoelector (the stable C ABI `libmongoelector.so.1`, >= 1.1).
//!
//! ```no_run
//! use mongoelector::{Client, Locker};
//! use std::time::Duration;
//! # fn write_report(_: i64) -> Result<(), mongoelector::Error> { Ok(()) }
//! let client = Client::new("mongodb://127.0.0.1:27017/", "app")?;
//! let lock = Locker::builder(&client, "nightly-report").ttl(Duration::from_secs(60)).build()?;
//! let guard = lock.acquire(Some(Duration::from_secs(10)))?;
//! write_report(guard.fence())?; // `?` here drops the guard: the lock is released at once
//! guard.release()?;             // or let it drop; release() returns the release's error
//! # Ok::<(), mongoelector::Error>(())
//! ```
//!
//! * [`Locker`]: [`Locker::acquire`], [`Locker::try_acquire`] and [`Locker::acquire_with`]
//!   return a [`LockGuard`] that releases the lock when dropped; [`AcquireOptions`] with a
//!   per-call [`CancelToken`]; [`Locker::hold`] keeps a lock alive on the library's
//!   renewer thread ([`LeaseGuard`]).
//! * [`Semaphore`]: at most `limit` holders of a key at once, one slot per handle;
//!   [`Semaphore::acquire`], [`Semaphore::try_acquire`] and [`Semaphore::acquire_with`]
//!   return a [`SemaphoreGuard`] that releases the slot when dropped;
//!   [`Semaphore::holders`] lists the holders ([`SemaphoreHolder`]).
//! * [`RwLock`]: many readers or one writer on a key, one hold per handle;
//!   [`RwLock::read`] and [`RwLock::write`] (and their `try_` and `acquire_with` forms)
//!   return a [`RwLockGuard`] that releases the hold when dropped; [`RwLock::hold_read`]
//!   and [`RwLock::hold_write`] keep a side alive ([`LeaseGuard`]); [`RwLock::holders`]
//!   lists the readers, the writer and a waiting writer ([`RwLockHolders`]).
//! * [`Elector`]: leader election with callbacks, graceful handover
//!   ([`Elector::resign`], [`Elector::transfer`]); typed [`NodeStatus`] and
//!   [`ClusterDetail`] (`Serialize`/`Deserialize` with the `serde` feature).
//! * [`LeaderObserver`]: who leads a key, from any process: a blocking stream of
//!   [`LeaderState`]s (every change, "nobody leads" included) and one-shot reads.
//! * [`Error`]: one variant per C status (`#[non_exhaustive]`); the backend's error code,
//!   code name and labels through [`Error::server_code`], [`Error::code_name`],
//!   [`Error::labels`] and [`Error::has_label`].
//!
//! * [`testing`]: a [`testing::FakeClock`] for `memory://` backends and levers on them
//!   ([`testing::force_expire`], [`testing::set_unavailable`]): tests of lease loss,
//!   step-down and failover that run in milliseconds, with no server and no sleep.
//!
//! Every option comes through a builder ([`Locker::builder`], [`Semaphore::builder`],
//! [`RwLock::builder`], [`Elector::builder`], [`AcquireOptions::new`]); what is not set keeps the C library's
//! default, the same for every binding.
//!
//! Thread rules follow the C header: `Client`, `Locker`, `Semaphore`, `RwLock`, `Elector`,
//! `CancelToken` and the guards are `Send + Sync`; callbacks are `FnMut() + Send +
//! 'static` and never unwind into C.
//!
//! Logging: the library's messages go to the [`log`](https://docs.rs/log) crate, target
//! `"mongoelector"` ([`LOG_TARGET`]), from the first [`Client::new`] on; no setup call.
//! Their structured fields (`event`, `key`, `fence`, `uuid`, `host`) come as `log`
//! key-values. [`set_log_handler`] takes them instead.
//!
//! Metrics: [`stats()`] returns the process-wide counters and acquire latency histogram
//! as a typed [`Stats`] (no I/O; `Serialize`/`Deserialize` with the `serde` feature).
//!
//! Linking: the C library must be installed; `mongoelector-sys` finds it through
//! `pkg-config mongoelector` (`PKG_CONFIG_PATH=<prefix>/lib/pkgconfig`) or
//! `MONGOELECTOR_LIB_DIR=<directory holding libmongoelector.so>`, and the loader at run
//! time through `LD_LIBRARY_PATH` unless it is in a system directory.

mod cancel;
mod client;
mod elector;
mod error;
mod lease;
mod locker;
mod log;
mod observer;
mod partitioner;
mod queue;
mod rwlock;
mod semaphore;
mod slot;
mod stats;
mod status;
pub mod testing;

pub use crate::log::{set_log_handler, sync_log_level, LogHandler, LogLevel, LOG_TARGET};
pub use cancel::CancelToken;
pub use client::Client;
pub use elector::{Elector, ElectorBuilder};
pub use error::{Error, ErrorDetail, ErrorKind, Result};
pub use lease::LeaseGuard;
pub use locker::{AcquireOptions, LockGuard, LockInfo, Locker, LockerBuilder};
pub use mongoelector_sys as sys;
pub use observer::{
    Leader, LeaderObserver, LeaderObserverBuilder, LeaderState, LeaderStates, LeaderStatus,
};
pub use partitioner::{
    partition_status, PartitionMember, PartitionOwner, PartitionStatus, Partitioner,
    PartitionerBuilder, MAX_PARTITIONS,
};
pub use queue::{read_queue, QueueOf, QueueStatus, QueuedWaiter};
pub use rwlock::{RwLock, RwLockBuilder, RwLockGuard, RwLockHolders, RwSide};
pub use semaphore::{Semaphore, SemaphoreBuilder, SemaphoreGuard, SemaphoreHolder};
pub use stats::{stats, AcquireCounts, LatencyHistogram, Stats};
pub use status::{ClusterDetail, LeaderInfo, NodeStatus, Timestamp};

/// Runtime version of the loaded library, e.g. "1.1.0".
pub fn version() -> &'static str {
    unsafe { std::ffi::CStr::from_ptr(sys::mongoelector_version()) }
        .to_str()
        .unwrap_or("?")
}

/// major * 10000 + minor * 100 + patch of the loaded library.
pub fn version_number() -> i32 {
    unsafe { sys::mongoelector_version_number() }
}

#[cfg(test)]
mod tests {
    use super::*;
    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn handles_are_send_and_sync() {
        assert_send_sync::<Client>();
        assert_send_sync::<Locker>();
        assert_send_sync::<LockGuard<'static>>();
        assert_send_sync::<Semaphore>();
        assert_send_sync::<SemaphoreGuard<'static>>();
        assert_send_sync::<SemaphoreHolder>();
        assert_send_sync::<RwLock>();
        assert_send_sync::<RwLockGuard<'static>>();
        assert_send_sync::<RwLockHolders>();
        assert_send_sync::<CancelToken>();
        assert_send_sync::<AcquireOptions>();
        assert_send_sync::<Elector>();
        assert_send_sync::<LeaderObserver>();
        assert_send_sync::<LeaderState>();
        assert_send_sync::<LeaseGuard>();
        assert_send_sync::<Error>();
        assert_send_sync::<testing::FakeClock>();
    }

    #[test]
    fn version_matches_the_header() {
        let header = std::ffi::CStr::from_bytes_with_nul(sys::MONGOELECTOR_VERSION_STRING);
        assert_eq!(version(), header.unwrap().to_str().unwrap());
        assert_eq!(version_number() as u32, sys::MONGOELECTOR_VERSION_NUMBER);
    }

    #[test]
    fn errors_map_both_ways() {
        for st in [1, 2, 3, 4, 5, 6, 7, 8, 9, 100] {
            let e = Error::from_status(st, ErrorDetail::new("m"));
            assert_eq!(e.status(), st);
            assert_eq!(e.message(), "m");
            assert_eq!(e.server_code(), None);
            assert!(e.to_string().starts_with("MONGOELECTOR_ERR_"), "{e}");
            assert_ne!(e.kind(), ErrorKind::Unknown);
        }
        let e = Error::from_status(42, ErrorDetail::new("x"));
        assert!(
            matches!(&e, Error::Unknown { status: 42, detail } if detail.message() == "x"),
            "{e:?}"
        );
        assert_eq!((e.status(), e.kind()), (42, ErrorKind::Unknown));
        assert_eq!(e.to_string(), "unknown status 42: x");

        let d = ErrorDetail::new("E11000").with_server_error(
            11000,
            "DuplicateKey",
            ["RetryableWriteError"],
        );
        let e = Error::from_status(sys::MONGOELECTOR_ERR_SERVER as i32, d);
        assert_eq!(e.server_code(), Some(11000));
        assert_eq!(e.code_name(), Some("DuplicateKey"));
        assert!(e.has_label("RetryableWriteError") && !e.has_label("x"));
        assert_eq!(
            e.to_string(),
            "MONGOELECTOR_ERR_SERVER: E11000 [code 11000 DuplicateKey]"
        );
        let none = ErrorDetail::new("m").with_server_error(0, "", Vec::<String>::new());
        assert_eq!((none.server_code(), none.code_name()), (None, None));
    }

    #[test]
    fn the_c_defaults_are_used() {
        // The builders start from these inits: nothing is re-hardcoded in Rust.
        let mut c: sys::mongoelector_locker_config = unsafe { std::mem::zeroed() };
        let st = unsafe {
            sys::mongoelector_locker_config_init(&mut c, sys::MONGOELECTOR_LOCKER_CONFIG_VERSION)
        };
        assert_eq!(st, sys::MONGOELECTOR_OK);
        assert_eq!(
            (c.ttl_seconds, c.timeparanoid, c.max_offset_seconds),
            (600.0, 1, 0.5)
        );
        assert_eq!((c.delete_on_release, c.allow_unsafe_server), (0, 0));
        let mut e: sys::mongoelector_elector_config = unsafe { std::mem::zeroed() };
        let st = unsafe {
            sys::mongoelector_elector_config_init(&mut e, sys::MONGOELECTOR_ELECTOR_CONFIG_VERSION)
        };
        assert_eq!(st, sys::MONGOELECTOR_OK);
        assert_eq!(
            (e.ttl_seconds, e.report_status, e.delete_on_release),
            (15.0, 1, 1)
        );
        assert_eq!(e.handover_poll_seconds, -1.0); // ttl/4
        let mut o: sys::mongoelector_observer_config = unsafe { std::mem::zeroed() };
        let st = unsafe {
            sys::mongoelector_observer_config_init(
                &mut o,
                sys::MONGOELECTOR_OBSERVER_CONFIG_VERSION,
            )
        };
        assert_eq!(st, sys::MONGOELECTOR_OK);
        assert_eq!((o.interval_seconds, o.op_timeout_seconds), (1.0, 0.0));
        let mut s: sys::mongoelector_semaphore_config = unsafe { std::mem::zeroed() };
        let st = unsafe {
            sys::mongoelector_semaphore_config_init(
                &mut s,
                sys::MONGOELECTOR_SEMAPHORE_CONFIG_VERSION,
            )
        };
        assert_eq!(st, sys::MONGOELECTOR_OK);
        assert_eq!(
            (s.limit, s.ttl_seconds, s.timeparanoid, s.max_offset_seconds),
            (1, 600.0, 1, 0.5)
        );
        assert_eq!((s.allow_unsafe_server, s.op_timeout_seconds), (0, 0.0));
        let mut r: sys::mongoelector_rwlock_config = unsafe { std::mem::zeroed() };
        let st = unsafe {
            sys::mongoelector_rwlock_config_init(&mut r, sys::MONGOELECTOR_RWLOCK_CONFIG_VERSION)
        };
        assert_eq!(st, sys::MONGOELECTOR_OK);
        assert_eq!(
            (
                r.max_readers,
                r.writer_preference,
                r.ttl_seconds,
                r.timeparanoid
            ),
            (64, 1, 600.0, 1)
        );
        assert!(r.collection.is_null());
        let o = AcquireOptions::new().to_c().unwrap();
        assert_eq!(
            (o.blocking, o.timeout_seconds, o.step_seconds, o.force),
            (1, -1.0, 0.25, 0)
        );
        assert!(o.cancel.is_null());
        let t = CancelToken::new();
        let o = AcquireOptions::new()
            .blocking(false)
            .force(true)
            .step(std::time::Duration::from_millis(50))
            .timeout(std::time::Duration::from_secs(2))
            .cancel(&t)
            .to_c()
            .unwrap();
        assert_eq!(
            (o.blocking, o.timeout_seconds, o.step_seconds, o.force),
            (0, 2.0, 0.05, 1)
        );
        assert_eq!(o.cancel, t.as_ptr());
    }

    #[test]
    fn cancel_tokens() {
        let t = CancelToken::new();
        let t2 = t.clone();
        assert!(!t.is_cancelled());
        std::thread::spawn(move || t2.cancel()).join().unwrap();
        assert!(t.is_cancelled());
        t.cancel(); // any number of times
        assert!(t.is_cancelled() && !CancelToken::default().is_cancelled());
    }
}

// The README's Rust blocks are compiled as doc-tests (`no_run`: they need a server).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
