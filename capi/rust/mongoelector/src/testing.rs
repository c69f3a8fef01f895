//! The testing kit: a fake clock for `memory://` backends, and levers on them, so that a
//! test of "what does my code do when it loses the lock" runs in milliseconds, with no
//! server and no sleep.
//!
//! `memory://NAME` is an in-process backend with the semantics of the MongoDB one (every
//! [`Client`](crate::Client) of one name in this process shares its locks). A
//! [`FakeClock`] attached to it ([`FakeClock::memory_uri`]) makes time a lever: every
//! locker, lease, elector, semaphore and observer made on that backend runs on the clock,
//! and [`FakeClock::advance`] walks time forward to each pending deadline on the way
//! (renewals, renew deadlines, polls), returning once the library's threads have acted.
//!
//! ```
//! use mongoelector::testing::{self, FakeClock};
//! use mongoelector::{Client, Elector};
//! use std::time::{Duration, SystemTime};
//! # fn main() -> mongoelector::Result<()> {
//! let clock = FakeClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_893_456_000))?;
//! let uri = clock.memory_uri(None)?; // a fresh memory:// backend on the clock
//! let client = Client::new(&uri, "")?;
//! let elector = Elector::builder(&client, "scheduler")
//!     .ttl(Duration::from_secs(10))
//!     .build()?;
//! elector.start()?;
//! clock.settle()?; // its first poll ran
//! clock.advance(Duration::from_secs(3600))?; // an hour of renewals, in milliseconds
//! assert!(elector.is_leader()?);
//!
//! testing::set_unavailable(&uri, true)?; // the database goes away
//! clock.advance(Duration::from_secs(10))?; // one ttl without a successful renewal
//! assert!(!elector.is_leader()?, "stepped down at its renew deadline");
//! testing::set_unavailable(&uri, false)?;
//! # Ok(()) }
//! ```
//!
//! What the library reports itself is settled when `advance` returns: `is_leader`, a
//! lease's [`is_lost`](crate::LeaseGuard::is_lost), `on_leader_loss`. A lease's loss and an
//! elector's loss at a missed renew deadline are reported on the thread calling
//! `advance` or `settle`, inside that call. Every wait of the library on an attached
//! backend is in fake time too (a blocking acquire's timeout and retry step,
//! [`LeaseGuard::wait_lost`](crate::LeaseGuard::wait_lost)): call those with a zero
//! timeout, or from another thread than the one that advances.
use crate::error::{check, cstring, Error, Result};
use mongoelector_sys as sys;
use std::os::raw::c_int;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A clock that moves only when the test says so (see the [module](self)).
///
/// `Send + Sync`, but one thread drives a clock: [`FakeClock::advance`] or
/// [`FakeClock::settle`] while another thread is inside one of them is
/// `Error::InvalidArgument`, and so is a call from a callback that the clock's own
/// `advance` runs (it would wait for itself). Dropping the clock lets go of the backends
/// attached to it; objects still open on them keep them alive, but time no longer moves
/// for them: drop those first.
pub struct FakeClock {
    ptr: *mut sys::mongoelector_fake_clock,
}

// The header: every call may come from any thread; free (Drop) runs with no other call
// in flight (it takes the clock by value).
unsafe impl Send for FakeClock {}
unsafe impl Sync for FakeClock {}

impl Drop for FakeClock {
    fn drop(&mut self) {
        unsafe { sys::mongoelector_fake_clock_free(self.ptr) }
    }
}

impl std::fmt::Debug for FakeClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeClock")
            .field("now", &self.now())
            .field("elapsed", &self.elapsed())
            .finish()
    }
}

/// `d` in whole milliseconds, rounded to the nearest (the clock's resolution).
fn millis(d: Duration, what: &str) -> Result<i64> {
    let ms = (d.as_nanos() + 500_000) / 1_000_000;
    i64::try_from(ms).map_err(|_| Error::invalid(format!("{what}: {d:?} is out of range")))
}

impl FakeClock {
    /// A clock whose wall time (also the server clock of the backends attached to it)
    /// starts at `start`, to the millisecond, and whose monotonic time starts at 0.
    /// `start` must lie between 1970 and the end of year 9999 (`Error::InvalidArgument`).
    /// Each step of `advance` waits at most 10 s of real time for the library's threads.
    pub fn new(start: SystemTime) -> Result<FakeClock> {
        Self::make(start, 0)
    }

    /// As [`FakeClock::new`], each step of `advance` and `settle` waiting at most
    /// `settle_timeout` of real time (at most an hour) for the library's threads to
    /// become idle. A callback that blocks on the thread that advances never does: the
    /// call then fails with `Error::Timeout` after this long instead of hanging.
    pub fn with_settle_timeout(start: SystemTime, settle_timeout: Duration) -> Result<FakeClock> {
        // 0 would mean "the default" to C.
        Self::make(start, millis(settle_timeout, "settle_timeout")?.max(1))
    }

    fn make(start: SystemTime, settle_timeout_ms: i64) -> Result<FakeClock> {
        let since = start
            .duration_since(UNIX_EPOCH)
            .map_err(|_| Error::invalid("a fake clock cannot start before 1970"))?;
        let start_ms = i64::try_from(since.as_millis())
            .map_err(|_| Error::invalid("a fake clock cannot start after year 9999"))?;
        let mut p = ptr::null_mut();
        check(unsafe { sys::mongoelector_fake_clock_new(start_ms, settle_timeout_ms, &mut p) })?;
        Ok(FakeClock { ptr: p })
    }

    /// Moves time forward by `d` (rounded to the millisecond), stopping at every pending
    /// deadline on the way, and returns once the library's threads have acted on each.
    /// Blocks for as long as they take (real time). `Error::Timeout`: at some step they
    /// did not become idle within the settle timeout (the clock has moved by `d` anyway).
    pub fn advance(&self, d: Duration) -> Result<()> {
        let ms = millis(d, "advance")?;
        check(unsafe { sys::mongoelector_fake_clock_advance(self.ptr, ms) })
    }

    /// `advance(Duration::ZERO)`: waits until the library's threads have acted on the
    /// time it is now (an elector just started has run its first poll).
    pub fn settle(&self) -> Result<()> {
        check(unsafe { sys::mongoelector_fake_clock_settle(self.ptr) })
    }

    /// Blocks, in real time (at most `timeout`), until at least `n` threads wait on the
    /// clock, and returns how many do. A test whose own thread makes a blocking call (an
    /// acquire with a timeout, `wait_lost`) reads the count with `n = 0` first, starts the
    /// thread, then waits for count + 1 before advancing past the call's deadline.
    /// `Error::Timeout` when fewer wait.
    pub fn wait_for_waiters(&self, n: usize, timeout: Duration) -> Result<usize> {
        let bound = millis(timeout, "wait_for_waiters")?;
        let mut waiting: usize = 0;
        check(unsafe {
            sys::mongoelector_fake_clock_wait_for_waiters(self.ptr, n, bound, &mut waiting)
        })?;
        Ok(waiting)
    }

    fn read(&self) -> (i64, i64) {
        let (mut wall, mut mono) = (0i64, 0i64);
        // Cannot fail on a live handle with valid out pointers.
        let _ = unsafe { sys::mongoelector_fake_clock_now(self.ptr, &mut wall, &mut mono) };
        (wall, mono)
    }

    /// The wall clock: the attached backends' server clock.
    pub fn now(&self) -> SystemTime {
        // Never before 1970 (the library keeps it there).
        UNIX_EPOCH + Duration::from_millis(u64::try_from(self.read().0).unwrap_or(0))
    }

    /// Fake time since the clock was made: its monotonic clock, which
    /// [`FakeClock::jump_wall`] does not move.
    pub fn elapsed(&self) -> Duration {
        Duration::from_millis(u64::try_from(self.read().1).unwrap_or(0))
    }

    /// Steps the wall clock alone by `delta_ms` milliseconds (either sign), as NTP would:
    /// the attached backends' server clock jumps, intervals do not change. The library
    /// notices at its next server-time sample, during a later `advance` (leases written
    /// on the old time base are then declared lost). `Error::InvalidArgument` when the
    /// wall clock would leave 1970 .. year 9999.
    pub fn jump_wall(&self, delta_ms: i64) -> Result<()> {
        check(unsafe { sys::mongoelector_fake_clock_jump_wall(self.ptr, delta_ms) })
    }

    /// Attaches the backend `memory://NAME` to this clock and returns its URI, for
    /// [`Client::new(&uri, "")`](crate::Client::new). `None` picks a fresh, unique name.
    /// The clock keeps the backend (and its locks) alive while it lives. A name may be
    /// attached to the same clock again; one already in use on another clock (a client
    /// opened it first: the system clock; or another `FakeClock`) is
    /// `Error::InvalidArgument`.
    pub fn memory_uri(&self, name: Option<&str>) -> Result<String> {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let uri = match name {
            Some(n) => format!("memory://{n}"),
            None => {
                let nanos = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or(0);
                let seq = SEQ.fetch_add(1, Ordering::Relaxed);
                format!(
                    "memory://rust-fake-clock-{}-{nanos}-{seq}",
                    std::process::id()
                )
            }
        };
        let c = cstring("uri", &uri)?;
        check(unsafe { sys::mongoelector_fake_clock_attach(self.ptr, c.as_ptr()) })?;
        Ok(uri)
    }
}

/// Makes the lock on `key` in `collection` (None: "mongolocker"; electors' locks are in
/// "elector.locks") of the `memory://` backend `uri` expire now, as if its holder had
/// stopped renewing. The holder is not told: its next renewal finds the lock gone (a
/// lease is lost, an elector steps down, and wins it back at its next poll if no other
/// candidate took it), and anyone may take it meanwhile, so for that while two nodes may
/// believe they hold it, which is what a test of fencing needs.
/// Returns whether an unexpired lock was there. With or without a [`FakeClock`].
pub fn force_expire(uri: &str, collection: Option<&str>, key: &str) -> Result<bool> {
    let curi = cstring("uri", uri)?;
    let ccoll = collection.map(|c| cstring("collection", c)).transpose()?;
    let ckey = cstring("key", key)?;
    let mut held: c_int = 0;
    check(unsafe {
        sys::mongoelector_memory_force_expire(
            curi.as_ptr(),
            ccoll.as_ref().map_or(ptr::null(), |c| c.as_ptr()),
            ckey.as_ptr(),
            &mut held,
        )
    })?;
    Ok(held != 0)
}

/// Makes the `memory://` backend `uri` fail every call at once (`down`), as a server that
/// is down: holders keep their locks until their renew deadline and then report them
/// lost, electors step down, acquires fail with `Error::Unavailable`. `false` makes it
/// answer again. Turning it on for a name nothing in this process uses is
/// `Error::InvalidArgument` (the setting would vanish with the unused backend).
pub fn set_unavailable(uri: &str, down: bool) -> Result<()> {
    let curi = cstring("uri", uri)?;
    check(unsafe { sys::mongoelector_memory_set_unavailable(curi.as_ptr(), c_int::from(down)) })
}
