//! Distributed locks and leader election over MongoDB: safe bindings of libmongoelector.
//!
//! ```no_run
//! use mongoelector::{Client, Locker, LockerOptions};
//! use std::time::Duration;
//! let client = Client::new("mongodb://127.0.0.1:27017/", "app")?;
//! let lock = Locker::new(&client, "nightly-report", &LockerOptions::default().ttl(Duration::from_secs(60)))?;
//! let fence = lock.acquire(Some(Duration::from_secs(10)))?;
//! // ... write to the resource, passing `fence` so it can refuse a superseded holder
//! lock.release()?;
//! # Ok::<(), mongoelector::Error>(())
//! ```
//!
//! Thread rules follow the C header: `Client`, `Locker` and `Elector` are `Send + Sync`;
//! callbacks are `FnMut() + Send + 'static` and never unwind into C.
//!
//! Logging: the library's messages go to the [`log`](https://docs.rs/log) crate, target
//! `"mongoelector"` ([`LOG_TARGET`]), from the first [`Client::new`] on; no setup call.
//! [`set_log_handler`] takes them instead.
//!
//! Linking: the C library must be installed; `mongoelector-sys` finds it through
//! `pkg-config mongoelector` (`PKG_CONFIG_PATH=<prefix>/lib/pkgconfig`) or
//! `MONGOELECTOR_LIB_DIR=<directory holding libmongoelector.so>`, and the loader at run
//! time through `LD_LIBRARY_PATH` unless it is in a system directory.

mod client;
mod elector;
mod error;
mod lease;
mod locker;
mod log;

pub use crate::log::{set_log_handler, LogHandler, LogLevel, LOG_TARGET};
pub use client::Client;
pub use elector::{Elector, ElectorBuilder};
pub use error::{Error, Result};
pub use lease::LeaseGuard;
pub use locker::{AcquireOptions, CancelHandle, LockInfo, Locker, LockerOptions};
pub use mongoelector_sys as sys;

/// Runtime version of the loaded library, e.g. "1.0.0".
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
        assert_send_sync::<CancelHandle>();
        assert_send_sync::<Elector>();
        assert_send_sync::<LeaseGuard>();
        assert_send_sync::<Error>();
    }

    #[test]
    fn version_matches_the_header() {
        assert_eq!(version(), sys::MONGOELECTOR_VERSION_STRING);
        assert_eq!(version_number(), sys::MONGOELECTOR_VERSION_NUMBER);
    }

    #[test]
    fn errors_map_both_ways() {
        for st in [1, 2, 3, 4, 5, 6, 7, 8, 100] {
            let e = Error::from_status(st, "m".into());
            assert_eq!(e.status(), st);
            assert_eq!(e.message(), "m");
            assert!(e.to_string().starts_with("MONGOELECTOR_ERR_"), "{e}");
        }
        assert!(matches!(
            Error::from_status(42, "x".into()),
            Error::Internal(_)
        ));
    }

    #[test]
    fn default_options_are_the_c_defaults() {
        let o = LockerOptions::default();
        assert_eq!(o.ttl, std::time::Duration::from_secs(600));
        assert!(o.timeparanoid);
        assert_eq!(o.max_offset, std::time::Duration::from_millis(500));
        assert!(!o.delete_on_release && !o.allow_unsafe_server);
    }
}
