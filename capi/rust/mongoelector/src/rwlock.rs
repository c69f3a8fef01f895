//! Read-write locks: many readers or one writer on a key.
use crate::client::{Client, ClientInner};
use crate::error::{check, cstring, Result};
use crate::lease::{LeaseGuard, LeasePtr};
use crate::locker::{owned_c_string, AcquireOptions};
use crate::semaphore::SemaphoreHolder;
use crate::slot::{
    hold_guard, holder_from_c, release_on_drop, slot_fields, slot_setters, SlotConfig,
};
use crate::status::Timestamp;
use mongoelector_sys as sys;
use std::fmt;
use std::os::raw::c_int;
use std::ptr;
use std::sync::Arc;
use std::time::Duration;

/// A side of a read-write lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RwSide {
    /// Shared: up to `max_readers` holders at once, no writer.
    Read,
    /// Exclusive: one holder, no readers.
    Write,
}

impl RwSide {
    fn to_c(self) -> sys::mongoelector_rwlock_side {
        match self {
            RwSide::Read => sys::MONGOELECTOR_RWLOCK_READ,
            RwSide::Write => sys::MONGOELECTOR_RWLOCK_WRITE,
        }
    }
}

impl fmt::Display for RwSide {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RwSide::Read => "read",
            RwSide::Write => "write",
        })
    }
}

/// The C configuration as mongoelector_rwlock_config_init() sets it up (the library's
/// defaults, shared by every binding).
fn c_config() -> Result<sys::mongoelector_rwlock_config> {
    // SAFETY: all-zero is a valid value of the C struct; init writes every field.
    let mut c: sys::mongoelector_rwlock_config = unsafe { std::mem::zeroed() };
    check(unsafe {
        sys::mongoelector_rwlock_config_init(&mut c, sys::MONGOELECTOR_RWLOCK_CONFIG_VERSION)
    })?;
    Ok(c)
}

/// Builds a [`RwLock`]: `RwLock::builder(&client, "key").max_readers(8).build()?`. Every
/// option left unset keeps the library's default (from `mongoelector_rwlock_config_init`,
/// the same for every binding): max_readers 64, writer preference on, collection
/// "mongorwlock", ttl 600 s, timeparanoid on, max offset 0.5 s, allow_unsafe_server off,
/// per-call timeout ttl/10 clamped to [0.1 s, 5 s].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until build()"]
pub struct RwLockBuilder<'a> {
    client: &'a Client,
    key: String,
    max_readers: Option<i64>,
    writer_preference: Option<bool>,
    slot: SlotConfig,
}

impl<'a> RwLockBuilder<'a> {
    /// How many readers may hold the key at once, 1..=1000 (default 64). Fixed when the
    /// key's document is created: a lock asking for another number gets
    /// `Error::InvalidArgument` at its first acquire or [`RwLock::holders`].
    pub fn max_readers(mut self, n: i64) -> Self {
        self.max_readers = Some(n);
        self
    }
    /// Writer preference (default true): a writer waiting in [`RwLock::write`] stops NEW
    /// readers until it has the lock or gives up, so that overlapping readers cannot
    /// starve it. false: readers enter while a writer waits.
    pub fn writer_preference(mut self, on: bool) -> Self {
        self.writer_preference = Some(on);
        self
    }
    slot_setters!("a hold", "mongorwlock");

    /// Creates the lock (no round trip). `Error::InvalidArgument` for a bad key (empty,
    /// over 1024 bytes, NUL) or option (max_readers outside 1..=1000, ...).
    pub fn build(self) -> Result<RwLock> {
        crate::log::sync()?;
        let ckey = cstring("key", &self.key)?;
        let mut c = c_config()?;
        let _coll = self.slot.apply(slot_fields!(c))?;
        if let Some(n) = self.max_readers {
            c.max_readers = n;
        }
        if let Some(on) = self.writer_preference {
            c.writer_preference = on as c_int;
        }
        let mut ptr = ptr::null_mut();
        check(unsafe {
            sys::mongoelector_rwlock_new(self.client.inner.ptr, ckey.as_ptr(), &c, &mut ptr)
        })?;
        Ok(RwLock {
            inner: Arc::new(RwLockInner {
                ptr,
                _client: self.client.inner.clone(),
            }),
            key: self.key,
            max_readers: c.max_readers,
        })
    }
}

/// The unexpired holders of a read-write lock's key, from [`RwLock::holders`].
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RwLockHolders {
    /// In slot order.
    pub readers: Vec<SemaphoreHolder>,
    pub writer: Option<SemaphoreHolder>,
    /// A writer waiting for the key (writer preference): new readers wait for it. Its
    /// `fence` is its waiting mark's, not a hold's.
    pub waiting_writer: Option<SemaphoreHolder>,
}

struct RwLockInner {
    ptr: *mut sys::mongoelector_rwlock,
    _client: Arc<ClientInner>,
}

// The header: other calls on the handle answer while an acquire waits; handles are used
// from any thread, by several at once, as lockers are.
unsafe impl Send for RwLockInner {}
unsafe impl Sync for RwLockInner {}

impl Drop for RwLockInner {
    fn drop(&mut self) {
        unsafe { sys::mongoelector_rwlock_free(self.ptr) }
    }
}

/// A distributed read-write lock: many readers (up to `max_readers`) OR one writer hold
/// one key at any instant, each hold with a lease (ttl) and a fencing token; tokens
/// strictly increase per key across readers and writers, so a writer's token is greater
/// than every token granted before it. `Send + Sync`: share it with `Arc` or borrow it
/// into scoped threads.
///
/// One `RwLock` holds at most ONE hold, a read or the write: make one per concurrent
/// holder (acquiring again while holding is `Error::InvalidArgument`).
/// [`RwLock::read`] and [`RwLock::write`] return a [`RwLockGuard`] that releases the hold
/// when dropped; [`RwLock::hold_read`] and [`RwLock::hold_write`] a [`LeaseGuard`] that
/// the library renews until it is dropped. Dropping the `RwLock` itself releases nothing
/// (a leaked hold expires at its ttl).
pub struct RwLock {
    inner: Arc<RwLockInner>,
    key: String,
    max_readers: i64,
}

impl fmt::Debug for RwLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RwLock")
            .field("key", &self.key)
            .field("max_readers", &self.max_readers)
            .finish_non_exhaustive()
    }
}

fn waiting(timeout: Option<Duration>) -> AcquireOptions {
    match timeout {
        Some(t) => AcquireOptions::new().timeout(t),
        None => AcquireOptions::new(),
    }
}

impl RwLock {
    /// A builder for a read-write lock on `key` (non-empty UTF-8, at most 1024 bytes).
    pub fn builder<'a>(client: &'a Client, key: &str) -> RwLockBuilder<'a> {
        RwLockBuilder {
            client,
            key: key.to_owned(),
            max_readers: None,
            writer_preference: None,
            slot: SlotConfig::default(),
        }
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    /// The max_readers this lock was built with.
    pub fn max_readers(&self) -> i64 {
        self.max_readers
    }

    /// Waits for the read side (at most `timeout`, then `Error::Timeout`; None: forever)
    /// and returns the guard of the hold, whose [`RwLockGuard::fence`] is its fencing
    /// token. A writer that holds the key, or waits for it (writer preference), keeps it
    /// waiting; other readers do not.
    pub fn read(&self, timeout: Option<Duration>) -> Result<RwLockGuard<'_>> {
        self.acquire_with(RwSide::Read, &waiting(timeout))
    }

    /// One attempt at the read side: the guard, or `Error::LockHeld` (a writer holds or
    /// waits, or every read slot is held).
    pub fn try_read(&self) -> Result<RwLockGuard<'_>> {
        self.acquire_with(RwSide::Read, &AcquireOptions::new().blocking(false))
    }

    /// Waits for the write side (no reader, no other writer) as [`RwLock::read`] does;
    /// the token is greater than every token granted before it. While it waits, new
    /// readers wait too (writer preference).
    pub fn write(&self, timeout: Option<Duration>) -> Result<RwLockGuard<'_>> {
        self.acquire_with(RwSide::Write, &waiting(timeout))
    }

    /// One attempt at the write side: the guard, or `Error::LockHeld` when anyone holds
    /// the key. It does not stop new readers.
    pub fn try_write(&self) -> Result<RwLockGuard<'_>> {
        self.acquire_with(RwSide::Write, &AcquireOptions::new().blocking(false))
    }

    /// Acquires `side` as `options` say (blocking or not, timeout, retry step, cancel
    /// token; `force(true)` is `Error::InvalidArgument`: a hold is never taken from its
    /// holder). The wait does not block other calls on this lock.
    pub fn acquire_with(&self, side: RwSide, options: &AcquireOptions) -> Result<RwLockGuard<'_>> {
        let o = options.to_c()?;
        let mut fence = 0i64;
        check(unsafe {
            sys::mongoelector_rwlock_acquire(self.inner.ptr, side.to_c(), &o, &mut fence)
        })?;
        Ok(RwLockGuard {
            lock: self,
            side,
            fence,
            armed: true,
        })
    }

    /// Releases this lock's hold, read or write (fenced: a hold that expired and was
    /// taken over is not touched), whichever guard acquired it. Not holding is not an
    /// error.
    pub fn release(&self) -> Result<()> {
        check(unsafe { sys::mongoelector_rwlock_release(self.inner.ptr) })
    }

    /// Renews the held side to now + ttl: the new expiry (server time), or None when this
    /// lock no longer holds one.
    pub fn touch(&self) -> Result<Option<Timestamp>> {
        let mut renewed: c_int = 0;
        let mut ms = 0i64;
        check(unsafe { sys::mongoelector_rwlock_touch(self.inner.ptr, &mut renewed, &mut ms) })?;
        Ok((renewed != 0).then_some(Timestamp::from_millis(ms)))
    }

    /// The fencing token of this lock's current hold, 0 when holding nothing (no round
    /// trip).
    pub fn fence(&self) -> Result<i64> {
        let mut out = 0i64;
        check(unsafe { sys::mongoelector_rwlock_fence(self.inner.ptr, &mut out) })?;
        Ok(out)
    }

    /// The side this lock holds, None when it holds nothing (no round trip).
    pub fn side(&self) -> Result<Option<RwSide>> {
        let mut out: sys::mongoelector_rwlock_side = sys::MONGOELECTOR_RWLOCK_NONE;
        check(unsafe { sys::mongoelector_rwlock_held_side(self.inner.ptr, &mut out) })?;
        Ok(match out {
            sys::MONGOELECTOR_RWLOCK_READ => Some(RwSide::Read),
            sys::MONGOELECTOR_RWLOCK_WRITE => Some(RwSide::Write),
            _ => None,
        })
    }

    /// This lock's identity, the one its holds carry ([`RwLockHolders`]).
    pub fn uuid(&self) -> String {
        let mut p: *const std::os::raw::c_char = ptr::null();
        let _ = unsafe { sys::mongoelector_rwlock_uuid(self.inner.ptr, &mut p) };
        unsafe { owned_c_string(p) }
    }

    /// The unexpired holders of the key (one round trip).
    pub fn holders(&self) -> Result<RwLockHolders> {
        let mut arr: *mut sys::mongoelector_rwlock_holder = ptr::null_mut();
        let mut n: usize = 0;
        check(unsafe { sys::mongoelector_rwlock_holders(self.inner.ptr, &mut arr, &mut n) })?;
        let mut out = RwLockHolders::default();
        if arr.is_null() || n == 0 {
            return Ok(out);
        }
        // SAFETY: on success the library hands over an array of `n` initialised entries,
        // freed below (once) after copying.
        for h in unsafe { std::slice::from_raw_parts(arr, n) } {
            let holder =
                unsafe { holder_from_c(h.uuid, h.host, h.pid, h.fence, h.created_ms, h.expire_ms) };
            match h.side {
                sys::MONGOELECTOR_RWLOCK_READ => out.readers.push(holder),
                sys::MONGOELECTOR_RWLOCK_WRITE => out.writer = Some(holder),
                _ => out.waiting_writer = Some(holder),
            }
        }
        unsafe { sys::mongoelector_rwlock_holders_free(arr, n) };
        Ok(out)
    }

    /// Waits for the read side as [`RwLock::read`] does, then keeps it alive on the
    /// library's renewer until the returned guard is dropped (which releases it unless the
    /// lease was lost). One live lease per lock (`Error::InvalidArgument` otherwise).
    pub fn hold_read(&self, timeout: Option<Duration>) -> Result<LeaseGuard> {
        self.hold_with(RwSide::Read, &waiting(timeout))
    }

    /// [`RwLock::hold_read`] for the write side.
    pub fn hold_write(&self, timeout: Option<Duration>) -> Result<LeaseGuard> {
        self.hold_with(RwSide::Write, &waiting(timeout))
    }

    /// Acquires `side` as `options` say (their cancel token cancels the wait, not the
    /// lease), then keeps it alive as [`RwLock::hold_read`].
    pub fn hold_with(&self, side: RwSide, options: &AcquireOptions) -> Result<LeaseGuard> {
        let o = options.to_c()?;
        let mut p = ptr::null_mut();
        check(unsafe {
            sys::mongoelector_rwlock_lease_acquire(
                self.inner.ptr,
                side.to_c(),
                &o,
                None,
                ptr::null_mut(),
                &mut p,
            )
        })?;
        Ok(LeaseGuard::new(LeasePtr::RwLock(p), self.inner.clone()))
    }
}

/// The hold of one side, from [`RwLock::read`], [`RwLock::write`] & co. Dropping it
/// releases the hold at once (fenced), so that `?`, an early return or a panic frees the
/// key for the next holder right away instead of at the ttl. A release that fails on drop
/// is logged (target "mongoelector", warn), never panics: the hold then stays until its
/// ttl or this lock's next acquire or release. Use [`RwLockGuard::release`] to see that
/// error.
///
/// The guard releases only the hold it acquired: if the lock lost it and acquired again
/// meanwhile, the newer hold belongs to the newer guard.
#[must_use = "dropping the guard releases the hold at once"]
pub struct RwLockGuard<'a> {
    lock: &'a RwLock,
    side: RwSide,
    fence: i64,
    armed: bool,
}

hold_guard!(RwLockGuard, lock, RwLock, "hold");

impl RwLockGuard<'_> {
    /// The side held.
    pub fn side(&self) -> RwSide {
        self.side
    }
}

impl Drop for RwLockGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            let what = match self.side {
                RwSide::Read => "the read side of",
                RwSide::Write => "the write side of",
            };
            release_on_drop(self.release_hold(), what, &self.lock.key, self.fence);
        }
    }
}

impl fmt::Debug for RwLockGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RwLockGuard")
            .field("key", &self.lock.key)
            .field("side", &self.side)
            .field("fence", &self.fence)
            .finish()
    }
}
