use crate::cancel::CancelToken;
use crate::client::{Client, ClientInner};
use crate::error::{check, cstring, Error, Result};
use crate::status::Timestamp;
use mongoelector_sys as sys;
use std::ffi::CStr;
use std::fmt;
use std::os::raw::{c_char, c_int};
use std::ptr;
use std::sync::Arc;
use std::time::Duration;

/// The C configuration as mongoelector_locker_config_init() sets it up (the library's
/// defaults, shared by every binding).
fn c_config() -> Result<sys::mongoelector_locker_config> {
    // SAFETY: all-zero is a valid value of the C struct; init writes every field.
    let mut c: sys::mongoelector_locker_config = unsafe { std::mem::zeroed() };
    check(unsafe {
        sys::mongoelector_locker_config_init(&mut c, sys::MONGOELECTOR_LOCKER_CONFIG_VERSION)
    })?;
    Ok(c)
}

/// Builds a [`Locker`]: `Locker::builder(&client, "key").ttl(..).build()?`. Every option
/// left unset keeps the library's default (from `mongoelector_locker_config_init`, the
/// same for every binding): collection "mongolocker", ttl 600 s, timeparanoid on, max
/// offset 0.5 s, delete_on_release off, allow_unsafe_server off, per-call timeout ttl/10
/// clamped to [0.1 s, 5 s], fair off.
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until build()"]
pub struct LockerBuilder<'a> {
    client: &'a Client,
    key: String,
    collection: Option<String>,
    ttl: Option<Duration>,
    timeparanoid: Option<bool>,
    max_offset: Option<Duration>,
    delete_on_release: Option<bool>,
    allow_unsafe_server: Option<bool>,
    op_timeout: Option<Duration>,
    fair: Option<bool>,
}

impl<'a> LockerBuilder<'a> {
    /// Collection of the lock documents (default "mongolocker"; the fencing epochs live
    /// in `"<collection>.fences"`).
    pub fn collection(mut self, name: &str) -> Self {
        self.collection = Some(name.to_owned());
        self
    }
    /// Lease of a lock: how long a crashed holder blocks the key (default 600 s).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }
    /// Check the host clock against the server's before acquiring (default true).
    pub fn timeparanoid(mut self, on: bool) -> Self {
        self.timeparanoid = Some(on);
        self
    }
    /// Allowed host/server clock difference (default 0.5 s).
    pub fn max_offset(mut self, max: Duration) -> Self {
        self.max_offset = Some(max);
        self
    }
    /// Release deletes the lock document, as the original mongoelector does (mixed
    /// fleets, see the repository's README; default false).
    pub fn delete_on_release(mut self, on: bool) -> Self {
        self.delete_on_release = Some(on);
        self
    }
    /// Run on servers with non-atomic findAndModify such as FerretDB: mutual exclusion is
    /// then NOT guaranteed under contention (default false: such servers are refused).
    pub fn allow_unsafe_server(mut self, on: bool) -> Self {
        self.allow_unsafe_server = Some(on);
        self
    }
    /// Time bound of one round trip (server selection, connect, socket, maxTimeMS); at
    /// most ttl/2. `Duration::ZERO`: the default, ttl/10 clamped to [0.1 s, 5 s].
    pub fn op_timeout(mut self, timeout: Duration) -> Self {
        self.op_timeout = Some(timeout);
        self
    }
    /// Fair (FIFO) locking (default false): a blocking acquire that finds the lock held
    /// waits in the key's queue and is served in arrival order (a waiter that dies holds
    /// the queue up for at most one ttl; a timeout or a cancel leaves the queue). Every
    /// acquire of a fair locker honours the live queue: `try_acquire` while others wait
    /// is `Error::LockHeld`, naming the waiters. A locker without it does not queue and
    /// may pass them: make every locker of the key fair.
    pub fn fair(mut self, on: bool) -> Self {
        self.fair = Some(on);
        self
    }

    /// Creates the locker and ensures the collection's TTL index (one round trip).
    /// `Error::InvalidArgument` for a bad key (empty, over 1024 bytes, NUL) or option.
    pub fn build(self) -> Result<Locker> {
        crate::log::sync()?;
        let ckey = cstring("key", &self.key)?;
        let coll = self
            .collection
            .as_deref()
            .map(|c| cstring("collection", c))
            .transpose()?;
        let mut c = c_config()?;
        if let Some(coll) = &coll {
            c.collection = coll.as_ptr();
        }
        if let Some(t) = self.ttl {
            c.ttl_seconds = t.as_secs_f64();
        }
        if let Some(on) = self.timeparanoid {
            c.timeparanoid = on as c_int;
        }
        if let Some(m) = self.max_offset {
            c.max_offset_seconds = m.as_secs_f64();
        }
        if let Some(on) = self.delete_on_release {
            c.delete_on_release = on as c_int;
        }
        if let Some(on) = self.allow_unsafe_server {
            c.allow_unsafe_server = on as c_int;
        }
        if let Some(t) = self.op_timeout {
            c.op_timeout_seconds = t.as_secs_f64();
        }
        if let Some(on) = self.fair {
            c.fair = on as c_int;
        }
        let mut ptr = ptr::null_mut();
        check(unsafe {
            sys::mongoelector_locker_new_with(self.client.inner.ptr, ckey.as_ptr(), &c, &mut ptr)
        })?;
        Ok(Locker {
            inner: Arc::new(LockerInner {
                ptr,
                _client: self.client.inner.clone(),
            }),
            key: self.key,
        })
    }
}

/// How to acquire: `AcquireOptions::new().timeout(d).cancel(&token)`, for
/// [`Locker::acquire_with`], [`Locker::hold_with`] and
/// [`Semaphore::acquire_with`](crate::Semaphore::acquire_with). Unset options keep the
/// library's defaults (`mongoelector_acquire_options_init`): blocking, no time limit, a
/// retry every 250 ms, not forced, no cancel token.
#[derive(Debug, Clone, Default)]
#[must_use = "options do nothing until passed to acquire_with/hold_with"]
pub struct AcquireOptions {
    blocking: Option<bool>,
    timeout: Option<Duration>,
    step: Option<Duration>,
    force: Option<bool>,
    cancel: Option<CancelToken>,
}

impl AcquireOptions {
    pub fn new() -> AcquireOptions {
        AcquireOptions::default()
    }
    /// false: one attempt, `Error::LockHeld` when held (a timeout is then
    /// `Error::InvalidArgument`). Default true: wait for the lock.
    pub fn blocking(mut self, on: bool) -> Self {
        self.blocking = Some(on);
        self
    }
    /// Blocking only: give up after this long with `Error::Timeout` (default: no limit).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
    /// Blocking only: interval between attempts (default 250 ms).
    pub fn step(mut self, step: Duration) -> Self {
        self.step = Some(step);
        self
    }
    /// Take the lock whoever holds it (default false).
    pub fn force(mut self, on: bool) -> Self {
        self.force = Some(on);
        self
    }
    /// The call returns `Error::Cancelled` once `token` is cancelled (at once if it
    /// already is). The options keep a clone of the token.
    pub fn cancel(mut self, token: &CancelToken) -> Self {
        self.cancel = Some(token.clone());
        self
    }

    /// The C struct; valid while `self` lives (it borrows the token).
    pub(crate) fn to_c(&self) -> Result<sys::mongoelector_acquire_options> {
        // SAFETY: all-zero is a valid value of the C struct; init writes every field.
        let mut o: sys::mongoelector_acquire_options = unsafe { std::mem::zeroed() };
        check(unsafe {
            sys::mongoelector_acquire_options_init(
                &mut o,
                sys::MONGOELECTOR_ACQUIRE_OPTIONS_VERSION,
            )
        })?;
        if let Some(b) = self.blocking {
            o.blocking = b as c_int;
        }
        if let Some(t) = self.timeout {
            o.timeout_seconds = t.as_secs_f64();
        }
        if let Some(s) = self.step {
            o.step_seconds = s.as_secs_f64();
        }
        if let Some(f) = self.force {
            o.force = f as c_int;
        }
        if let Some(c) = &self.cancel {
            o.cancel = c.as_ptr();
        }
        Ok(o)
    }
}

/// The current, unexpired lock document of a key.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    /// The holder's identity (its locker's [`Locker::uuid`]).
    pub uuid: String,
    pub host: String,
    pub pid: i64,
    /// Server time.
    pub created: Timestamp,
    /// Server time.
    pub expire: Timestamp,
    /// 0 if written by a node without fencing (the original mongoelector).
    pub fence: i64,
}

pub(crate) struct LockerInner {
    pub(crate) ptr: *mut sys::mongoelector_locker,
    _client: Arc<ClientInner>,
}

// The header: a locker may be used from any thread, by several at once.
unsafe impl Send for LockerInner {}
unsafe impl Sync for LockerInner {}

impl Drop for LockerInner {
    fn drop(&mut self) {
        unsafe { sys::mongoelector_locker_free(self.ptr) }
    }
}

/// A distributed lock on one key. `Send + Sync`: share it with `Arc` or borrow it into
/// scoped threads.
///
/// [`Locker::acquire`] returns a [`LockGuard`] that releases the lock when dropped
/// (an early return, `?`, a panic), like a `MutexGuard`. Dropping the `Locker` itself
/// releases nothing (a leaked hold expires at its ttl).
pub struct Locker {
    pub(crate) inner: Arc<LockerInner>,
    key: String,
}

impl fmt::Debug for Locker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Locker")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

pub(crate) unsafe fn owned_c_string(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// A string the library handed over (`char **` out parameters): copied, then released
/// with mongoelector_free.
///
/// # Safety
/// `p` is NULL or a string the library returned for the caller to free.
pub(crate) unsafe fn take_c_string(p: *mut c_char) -> String {
    let s = owned_c_string(p);
    sys::mongoelector_free(p as *mut std::os::raw::c_void);
    s
}

impl Locker {
    /// A builder for a locker on `key` (non-empty UTF-8, at most 1024 bytes).
    pub fn builder<'a>(client: &'a Client, key: &str) -> LockerBuilder<'a> {
        LockerBuilder {
            client,
            key: key.to_owned(),
            collection: None,
            ttl: None,
            timeparanoid: None,
            max_offset: None,
            delete_on_release: None,
            allow_unsafe_server: None,
            op_timeout: None,
            fair: None,
        }
    }

    /// A locker on `key` with the library's defaults (`Locker::builder(client, key).build()`).
    pub fn new(client: &Client, key: &str) -> Result<Locker> {
        Locker::builder(client, key).build()
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    /// Waits for the lock (at most `timeout`, then `Error::Timeout`; None: forever) and
    /// returns the guard of the hold, whose [`LockGuard::fence`] is the fencing token:
    /// strictly greater than every token handed out before for this key.
    pub fn acquire(&self, timeout: Option<Duration>) -> Result<LockGuard<'_>> {
        let mut o = AcquireOptions::new();
        if let Some(t) = timeout {
            o = o.timeout(t);
        }
        self.acquire_with(&o)
    }

    /// One attempt: the guard, or `Error::LockHeld`.
    pub fn try_acquire(&self) -> Result<LockGuard<'_>> {
        self.acquire_with(&AcquireOptions::new().blocking(false))
    }

    /// Acquires as `options` say (blocking or not, timeout, retry step, force, cancel
    /// token). The wait does not block other calls on this locker.
    pub fn acquire_with(&self, options: &AcquireOptions) -> Result<LockGuard<'_>> {
        let o = options.to_c()?;
        let mut fence = 0i64;
        check(unsafe { sys::mongoelector_locker_acquire_with(self.inner.ptr, &o, &mut fence) })?;
        Ok(LockGuard {
            locker: self,
            fence,
            armed: true,
        })
    }

    /// Releases this locker's hold (fenced: a hold it lost to another is not touched),
    /// whichever guard acquired it. Not holding is not an error.
    pub fn release(&self) -> Result<()> {
        check(unsafe { sys::mongoelector_locker_release(self.inner.ptr, 0) })
    }

    /// Releases the lock whoever holds it.
    pub fn force_release(&self) -> Result<()> {
        check(unsafe { sys::mongoelector_locker_release(self.inner.ptr, 1) })
    }

    /// Renews a held, unexpired lock: the new expiry (server time), or None when this
    /// locker no longer holds it.
    pub fn touch(&self) -> Result<Option<Timestamp>> {
        let mut renewed: c_int = 0;
        let mut ms = 0i64;
        check(unsafe { sys::mongoelector_locker_touch(self.inner.ptr, &mut renewed, &mut ms) })?;
        Ok((renewed != 0).then_some(Timestamp::from_millis(ms)))
    }

    /// Anyone holds an unexpired lock on the key (one round trip).
    pub fn locked(&self) -> Result<bool> {
        let mut out: c_int = 0;
        check(unsafe { sys::mongoelector_locker_locked(self.inner.ptr, &mut out) })?;
        Ok(out != 0)
    }

    /// This locker holds the lock (one round trip).
    pub fn owned(&self) -> Result<bool> {
        let mut out: c_int = 0;
        check(unsafe { sys::mongoelector_locker_owned(self.inner.ptr, &mut out) })?;
        Ok(out != 0)
    }

    /// The fencing token of this locker's current hold, 0 when holding nothing (no round
    /// trip). Pass it with every write the lock guards; the resource refuses tokens below
    /// the highest it has seen, and so every superseded holder.
    pub fn fence(&self) -> Result<i64> {
        let mut out = 0i64;
        check(unsafe { sys::mongoelector_locker_fence(self.inner.ptr, &mut out) })?;
        Ok(out)
    }

    /// This locker's identity in the lock document.
    pub fn uuid(&self) -> Result<String> {
        let mut s = ptr::null();
        check(unsafe { sys::mongoelector_locker_uuid(self.inner.ptr, &mut s) })?;
        Ok(unsafe { owned_c_string(s) })
    }

    /// Server minus host clock, in seconds (one round trip unless a good result is
    /// cached). Beyond max_offset: `Error::ClockOffset` with the measured `offset`.
    pub fn verify_time(&self) -> Result<f64> {
        let mut off = f64::NAN;
        let r = check(unsafe { sys::mongoelector_locker_verify_time(self.inner.ptr, &mut off) });
        match r {
            Ok(()) => Ok(off),
            Err(Error::ClockOffset { detail, .. }) => Err(Error::ClockOffset {
                offset: (!off.is_nan()).then_some(off),
                detail,
            }),
            Err(e) => Err(e),
        }
    }

    /// The unexpired lock document of the key, None when nobody holds it (one round trip).
    pub fn current(&self) -> Result<Option<LockInfo>> {
        // SAFETY: all-zero is a valid value (null strings); version set as required.
        let mut d: sys::mongoelector_lock_details = unsafe { std::mem::zeroed() };
        d.version = sys::MONGOELECTOR_LOCK_DETAILS_VERSION;
        let mut found: c_int = 0;
        let st =
            unsafe { sys::mongoelector_locker_current_details(self.inner.ptr, &mut d, &mut found) };
        let r = check(st);
        let info = (r.is_ok() && found != 0).then(|| LockInfo {
            uuid: unsafe { owned_c_string(d.uuid) },
            host: unsafe { owned_c_string(d.host) },
            pid: d.pid,
            created: Timestamp::from_millis(d.created_ms),
            expire: Timestamp::from_millis(d.expire_ms),
            fence: d.fence,
        });
        // Frees what the struct holds (NULL strings are fine), after the error was read.
        unsafe { sys::mongoelector_lock_details_clear(&mut d) };
        r.map(|()| info)
    }
}

/// The hold of a lock, from [`Locker::acquire`] & co. Dropping it releases the lock at
/// once (fenced), so that `?`, an early return or a panic between acquire and release
/// frees the key for the next holder right away instead of at the ttl. A release that
/// fails on drop is logged (target "mongoelector", warn), never panics: the hold then
/// stays until its ttl or this locker's next acquire or release. Use
/// [`LockGuard::release`] to see that error.
///
/// The guard releases only the hold it acquired: if the locker lost it and acquired
/// again meanwhile, the newer hold belongs to the newer guard.
#[must_use = "dropping the guard releases the lock at once"]
pub struct LockGuard<'a> {
    locker: &'a Locker,
    fence: i64,
    armed: bool,
}

impl<'a> LockGuard<'a> {
    /// The fencing token of this hold.
    pub fn fence(&self) -> i64 {
        self.fence
    }

    /// The locker holding.
    pub fn locker(&self) -> &'a Locker {
        self.locker
    }

    /// Renews the hold (see [`Locker::touch`]): the new expiry, None once lost.
    pub fn touch(&self) -> Result<Option<Timestamp>> {
        if self.locker.fence()? != self.fence {
            return Ok(None);
        }
        self.locker.touch()
    }

    /// Releases the lock now and returns the release's error, if any (the hold is then
    /// kept as stranded by the library: released by this locker's next acquire or
    /// release, or expiring at its ttl).
    pub fn release(mut self) -> Result<()> {
        self.armed = false;
        self.release_hold()
    }

    /// Ends the guard WITHOUT releasing: the lock stays held until its ttl or an explicit
    /// [`Locker::release`] (from this process or, by `force_release`, any other). Returns
    /// the fencing token.
    pub fn leak(mut self) -> i64 {
        self.armed = false;
        self.fence
    }

    fn release_hold(&self) -> Result<()> {
        // Only this guard's hold: after a loss and a new acquire through the same locker,
        // the locker's hold is another guard's.
        if self.locker.fence()? != self.fence {
            return Ok(());
        }
        self.locker.release()
    }
}

impl Drop for LockGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Err(e) = self.release_hold() {
            ::log::warn!(
                target: crate::LOG_TARGET,
                "releasing {} (fence {}) on drop failed: {e}; the lock stays held until its ttl \
                 or this locker's next acquire or release",
                self.locker.key,
                self.fence
            );
        }
    }
}

impl fmt::Debug for LockGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("key", &self.locker.key)
            .field("fence", &self.fence)
            .finish()
    }
}
