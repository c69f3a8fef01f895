use crate::client::{Client, ClientInner};
use crate::error::{check, cstring, Result};
use crate::locker::AcquireOptions;
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

/// The C configuration as mongoelector_semaphore_config_init() sets it up (the library's
/// defaults, shared by every binding).
fn c_config() -> Result<sys::mongoelector_semaphore_config> {
    // SAFETY: all-zero is a valid value of the C struct; init writes every field.
    let mut c: sys::mongoelector_semaphore_config = unsafe { std::mem::zeroed() };
    check(unsafe {
        sys::mongoelector_semaphore_config_init(&mut c, sys::MONGOELECTOR_SEMAPHORE_CONFIG_VERSION)
    })?;
    Ok(c)
}

/// Builds a [`Semaphore`]: `Semaphore::builder(&client, "key").limit(3).build()?`. Every
/// option left unset keeps the library's default (from
/// `mongoelector_semaphore_config_init`, the same for every binding): limit 1, collection
/// "mongosemaphore", ttl 600 s, timeparanoid on, max offset 0.5 s, allow_unsafe_server
/// off, per-call timeout ttl/10 clamped to [0.1 s, 5 s].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until build()"]
pub struct SemaphoreBuilder<'a> {
    client: &'a Client,
    key: String,
    limit: Option<i64>,
    slot: SlotConfig,
}

impl<'a> SemaphoreBuilder<'a> {
    /// How many holders may hold the key at once, 1..=1000 (default 1). Fixed when the
    /// key's document is created: a semaphore asking for another limit gets
    /// `Error::InvalidArgument` at its first acquire or [`Semaphore::holders`].
    pub fn limit(mut self, limit: i64) -> Self {
        self.limit = Some(limit);
        self
    }
    slot_setters!("a slot", "mongosemaphore");

    /// Creates the semaphore (no round trip). `Error::InvalidArgument` for a bad key
    /// (empty, over 1024 bytes, NUL) or option (a limit outside 1..=1000, ...).
    pub fn build(self) -> Result<Semaphore> {
        crate::log::sync()?;
        let ckey = cstring("key", &self.key)?;
        let mut c = c_config()?;
        let _coll = self.slot.apply(slot_fields!(c))?;
        if let Some(n) = self.limit {
            c.limit = n;
        }
        let mut ptr = ptr::null_mut();
        check(unsafe {
            sys::mongoelector_semaphore_new(self.client.inner.ptr, ckey.as_ptr(), &c, &mut ptr)
        })?;
        Ok(Semaphore {
            inner: Arc::new(SemaphoreInner {
                ptr,
                _client: self.client.inner.clone(),
            }),
            key: self.key,
            limit: c.limit,
        })
    }
}

/// One unexpired holder of a semaphore's key, from [`Semaphore::holders`].
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SemaphoreHolder {
    /// The holder's identity (one per semaphore handle).
    pub uuid: String,
    pub host: String,
    pub pid: i64,
    /// The fencing token of this hold.
    pub fence: i64,
    /// Server time.
    pub created: Timestamp,
    /// Server time.
    pub expire: Timestamp,
}

struct SemaphoreInner {
    ptr: *mut sys::mongoelector_semaphore,
    _client: Arc<ClientInner>,
}

// The header: "Other calls on the handle answer while it waits"; handles are used from
// any thread, by several at once, as lockers are.
unsafe impl Send for SemaphoreInner {}
unsafe impl Sync for SemaphoreInner {}

impl Drop for SemaphoreInner {
    fn drop(&mut self) {
        unsafe { sys::mongoelector_semaphore_free(self.ptr) }
    }
}

/// A distributed counting semaphore: at most `limit` unexpired holders of one key at any
/// instant, each with a lease (ttl) and a fencing token strictly increasing per key.
/// `Send + Sync`: share it with `Arc` or borrow it into scoped threads.
///
/// One `Semaphore` holds at most ONE slot: make one per concurrent holder (acquiring
/// again while holding is `Error::InvalidArgument`). [`Semaphore::acquire`] returns a
/// [`SemaphoreGuard`] that releases the slot when dropped. Dropping the `Semaphore`
/// itself releases nothing (a leaked slot expires at its ttl).
pub struct Semaphore {
    inner: Arc<SemaphoreInner>,
    key: String,
    limit: i64,
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("key", &self.key)
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl Semaphore {
    /// A builder for a semaphore on `key` (non-empty UTF-8, at most 1024 bytes).
    pub fn builder<'a>(client: &'a Client, key: &str) -> SemaphoreBuilder<'a> {
        SemaphoreBuilder {
            client,
            key: key.to_owned(),
            limit: None,
            slot: SlotConfig::default(),
        }
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    /// The limit this semaphore was built with.
    pub fn limit(&self) -> i64 {
        self.limit
    }

    /// Waits for a slot (at most `timeout`, then `Error::Timeout`; None: forever) and
    /// returns the guard of the hold, whose [`SemaphoreGuard::fence`] is the fencing
    /// token: strictly greater than every token handed out before for this key.
    pub fn acquire(&self, timeout: Option<Duration>) -> Result<SemaphoreGuard<'_>> {
        let mut o = AcquireOptions::new();
        if let Some(t) = timeout {
            o = o.timeout(t);
        }
        self.acquire_with(&o)
    }

    /// One attempt: the guard, or `Error::LockHeld` when every slot is held.
    pub fn try_acquire(&self) -> Result<SemaphoreGuard<'_>> {
        self.acquire_with(&AcquireOptions::new().blocking(false))
    }

    /// Acquires as `options` say (blocking or not, timeout, retry step, cancel token;
    /// `force(true)` is `Error::InvalidArgument`: a slot is never taken from a holder).
    /// The wait does not block other calls on this semaphore.
    pub fn acquire_with(&self, options: &AcquireOptions) -> Result<SemaphoreGuard<'_>> {
        let o = options.to_c()?;
        let mut fence = 0i64;
        check(unsafe { sys::mongoelector_semaphore_acquire(self.inner.ptr, &o, &mut fence) })?;
        Ok(SemaphoreGuard {
            semaphore: self,
            fence,
            armed: true,
        })
    }

    /// Releases this semaphore's slot (fenced: a hold that expired and was taken by
    /// another is not touched), whichever guard acquired it. Not holding is not an error.
    pub fn release(&self) -> Result<()> {
        check(unsafe { sys::mongoelector_semaphore_release(self.inner.ptr) })
    }

    /// Renews a held, unexpired slot to now + ttl: the new expiry (server time), or None
    /// when this semaphore no longer holds one.
    pub fn touch(&self) -> Result<Option<Timestamp>> {
        let mut renewed: c_int = 0;
        let mut ms = 0i64;
        check(unsafe { sys::mongoelector_semaphore_touch(self.inner.ptr, &mut renewed, &mut ms) })?;
        Ok((renewed != 0).then_some(Timestamp::from_millis(ms)))
    }

    /// The fencing token of this semaphore's current hold, 0 when holding nothing (no
    /// round trip).
    pub fn fence(&self) -> Result<i64> {
        let mut out = 0i64;
        check(unsafe { sys::mongoelector_semaphore_fence(self.inner.ptr, &mut out) })?;
        Ok(out)
    }

    /// The unexpired holders of the key, in slot order (one round trip).
    pub fn holders(&self) -> Result<Vec<SemaphoreHolder>> {
        let mut arr: *mut sys::mongoelector_semaphore_holder = ptr::null_mut();
        let mut n: usize = 0;
        check(unsafe { sys::mongoelector_semaphore_holders(self.inner.ptr, &mut arr, &mut n) })?;
        if arr.is_null() || n == 0 {
            return Ok(Vec::new());
        }
        // SAFETY: on success the library hands over an array of `n` initialised entries,
        // freed below (once) after copying.
        let list = unsafe { std::slice::from_raw_parts(arr, n) }
            .iter()
            .map(|h| unsafe {
                holder_from_c(h.uuid, h.host, h.pid, h.fence, h.created_ms, h.expire_ms)
            })
            .collect();
        unsafe { sys::mongoelector_semaphore_holders_free(arr, n) };
        Ok(list)
    }
}

/// The hold of one slot, from [`Semaphore::acquire`] & co. Dropping it releases the slot
/// at once (fenced), so that `?`, an early return or a panic between acquire and release
/// frees the slot for the next holder right away instead of at the ttl. A release that
/// fails on drop is logged (target "mongoelector", warn), never panics: the slot then
/// stays held until its ttl or this semaphore's next acquire or release. Use
/// [`SemaphoreGuard::release`] to see that error.
///
/// The guard releases only the hold it acquired: if the semaphore lost it and acquired
/// again meanwhile, the newer hold belongs to the newer guard.
#[must_use = "dropping the guard releases the slot at once"]
pub struct SemaphoreGuard<'a> {
    semaphore: &'a Semaphore,
    fence: i64,
    armed: bool,
}

hold_guard!(SemaphoreGuard, semaphore, Semaphore, "slot");

impl Drop for SemaphoreGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            let r = self.release_hold();
            release_on_drop(r, "a slot of semaphore", &self.semaphore.key, self.fence);
        }
    }
}

impl fmt::Debug for SemaphoreGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphoreGuard")
            .field("key", &self.semaphore.key)
            .field("fence", &self.fence)
            .finish()
    }
}
