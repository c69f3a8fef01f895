use crate::client::{Client, ClientInner};
use crate::error::{check, cstring, Result};
use mongoelector_sys as sys;
use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Locker configuration; `Default` gives the library's defaults.
#[derive(Debug, Clone)]
pub struct LockerOptions {
    /// Collection of the lock documents (default "mongolocker").
    pub collection: Option<String>,
    /// Lease of a lock (default 600 s).
    pub ttl: Duration,
    /// Check the host clock against the server's before acquiring (default true).
    pub timeparanoid: bool,
    /// Allowed host/server clock difference (default 0.5 s).
    pub max_offset: Duration,
    /// Release deletes the document (mixed fleets, see README; default false).
    pub delete_on_release: bool,
    /// Run on servers with non-atomic findAndModify such as FerretDB (default false).
    pub allow_unsafe_server: bool,
}

/// The C options struct as mongoelector_locker_options_init() sets it up.
fn c_options() -> sys::mongoelector_locker_options {
    let mut o = std::mem::MaybeUninit::<sys::mongoelector_locker_options>::zeroed();
    unsafe {
        sys::mongoelector_locker_options_init(o.as_mut_ptr());
        o.assume_init()
    }
}

impl Default for LockerOptions {
    fn default() -> Self {
        let o = c_options();
        LockerOptions {
            collection: None,
            ttl: Duration::from_secs_f64(o.ttl_seconds),
            timeparanoid: o.timeparanoid != 0,
            max_offset: Duration::from_secs_f64(o.max_offset_seconds),
            delete_on_release: o.delete_on_release != 0,
            allow_unsafe_server: o.allow_unsafe_server != 0,
        }
    }
}

impl LockerOptions {
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }
}

/// How to acquire: see [`Locker::acquire_with`].
#[derive(Debug, Clone)]
pub struct AcquireOptions {
    /// false: one attempt (`Error::LockHeld` when held).
    pub blocking: bool,
    /// Blocking only: give up after this long (`Error::Timeout`); None waits forever.
    pub timeout: Option<Duration>,
    /// Blocking only: interval between attempts (default 250 ms).
    pub step: Duration,
    /// Take the lock whoever holds it.
    pub force: bool,
}

impl Default for AcquireOptions {
    fn default() -> Self {
        AcquireOptions {
            blocking: true,
            timeout: None,
            step: Duration::from_millis(250),
            force: false,
        }
    }
}

/// The current, unexpired lock document of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    pub uuid: String,
    pub host: String,
    pub pid: i64,
    /// Server time.
    pub created: SystemTime,
    /// Server time.
    pub expire: SystemTime,
    /// 0 if written by a node without fencing.
    pub fence: i64,
}

pub(crate) struct LockerInner {
    pub(crate) ptr: *mut sys::mongoelector_locker,
    _client: Arc<ClientInner>,
}

// The header: "A locker may be used from several threads; calls on it are serialised
// except mongoelector_locker_cancel()", which is itself callable from any thread.
unsafe impl Send for LockerInner {}
unsafe impl Sync for LockerInner {}

impl Drop for LockerInner {
    fn drop(&mut self) {
        unsafe { sys::mongoelector_locker_free(self.ptr) }
    }
}

/// A distributed lock on one key. `Send + Sync`: share it with `Arc` or borrow it into
/// scoped threads. Dropping it frees the handle but does NOT release a held lock (it
/// expires at its ttl): call [`Locker::release`] first.
pub struct Locker {
    pub(crate) inner: Arc<LockerInner>,
    key: String,
}

/// Cancels a blocking acquire running on another thread: it returns
/// `Error::Cancelled` within about 100 ms. A cancel issued while no acquire runs stays
/// pending and cancels the next blocking acquire (so a cancel racing just ahead of the
/// acquire is not lost). Keeps the locker's handle alive.
#[derive(Clone)]
pub struct CancelHandle {
    inner: Arc<LockerInner>,
}

impl CancelHandle {
    pub fn cancel(&self) -> Result<()> {
        check(unsafe { sys::mongoelector_locker_cancel(self.inner.ptr) })
    }
}

fn from_ms(ms: i64) -> SystemTime {
    if ms >= 0 {
        UNIX_EPOCH + Duration::from_millis(ms as u64)
    } else {
        UNIX_EPOCH - Duration::from_millis(ms.unsigned_abs())
    }
}

fn c_string(buf: &[std::os::raw::c_char]) -> String {
    // Guard against a missing NUL even though the header promises one.
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

impl Locker {
    /// Creates a locker for `key` (non-empty UTF-8, at most 1024 bytes) and ensures the
    /// collection's TTL index (one round trip).
    pub fn new(client: &Client, key: &str, options: &LockerOptions) -> Result<Locker> {
        let ckey = cstring("key", key)?;
        let coll = options
            .collection
            .as_deref()
            .map(|c| cstring("collection", c))
            .transpose()?;
        let mut o = c_options();
        if let Some(c) = &coll {
            o.collection = c.as_ptr();
        }
        o.ttl_seconds = options.ttl.as_secs_f64();
        o.timeparanoid = options.timeparanoid as c_int;
        o.max_offset_seconds = options.max_offset.as_secs_f64();
        o.delete_on_release = options.delete_on_release as c_int;
        o.allow_unsafe_server = options.allow_unsafe_server as c_int;
        let mut ptr = ptr::null_mut();
        check(unsafe {
            sys::mongoelector_locker_new(client.inner.ptr, ckey.as_ptr(), &o, &mut ptr)
        })?;
        Ok(Locker {
            inner: Arc::new(LockerInner {
                ptr,
                _client: client.inner.clone(),
            }),
            key: key.to_owned(),
        })
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    /// Waits for the lock (at most `timeout`; None: forever) and returns the fencing
    /// token, strictly greater than every token handed out before for this key.
    pub fn acquire(&self, timeout: Option<Duration>) -> Result<i64> {
        self.acquire_with(&AcquireOptions {
            timeout,
            ..Default::default()
        })
    }

    /// One attempt: the fencing token, or `Error::LockHeld`.
    pub fn try_acquire(&self) -> Result<i64> {
        self.acquire_with(&AcquireOptions {
            blocking: false,
            ..Default::default()
        })
    }

    /// Acquires as `o` says. A non-blocking acquire with a timeout is
    /// `Error::InvalidArgument` (the C library checks it).
    pub fn acquire_with(&self, o: &AcquireOptions) -> Result<i64> {
        // C: a negative timeout is "none".
        let timeout = o.timeout.map_or(-1.0, |t| t.as_secs_f64());
        let mut fence = 0i64;
        check(unsafe {
            sys::mongoelector_locker_acquire(
                self.inner.ptr,
                o.blocking as c_int,
                timeout,
                o.step.as_secs_f64(),
                o.force as c_int,
                &mut fence,
            )
        })?;
        Ok(fence)
    }

    /// A handle that cancels a blocking acquire from another thread.
    pub fn cancel_handle(&self) -> CancelHandle {
        CancelHandle {
            inner: self.inner.clone(),
        }
    }

    /// Releases this locker's lock. Not holding it is not an error.
    pub fn release(&self) -> Result<()> {
        check(unsafe { sys::mongoelector_locker_release(self.inner.ptr, 0) })
    }

    /// Releases the lock whoever holds it.
    pub fn force_release(&self) -> Result<()> {
        check(unsafe { sys::mongoelector_locker_release(self.inner.ptr, 1) })
    }

    /// Renews a held, unexpired lock: the new expiry (server time), or None when this
    /// locker no longer holds it.
    pub fn touch(&self) -> Result<Option<SystemTime>> {
        let mut renewed: c_int = 0;
        let mut ms = 0i64;
        check(unsafe { sys::mongoelector_locker_touch(self.inner.ptr, &mut renewed, &mut ms) })?;
        Ok((renewed != 0).then(|| from_ms(ms)))
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

    /// The fencing token of the current hold, 0 when holding nothing (no round trip).
    /// Pass it with every write the lock guards; the resource refuses tokens below the
    /// highest it has seen, and so every superseded holder.
    pub fn fence(&self) -> Result<i64> {
        let mut out = 0i64;
        check(unsafe { sys::mongoelector_locker_fence(self.inner.ptr, &mut out) })?;
        Ok(out)
    }

    /// This locker's identity in the lock document.
    pub fn uuid(&self) -> Result<String> {
        let mut s = ptr::null();
        check(unsafe { sys::mongoelector_locker_uuid(self.inner.ptr, &mut s) })?;
        Ok(unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
    }

    /// Server minus host clock, in seconds; `Error::ClockOffset` beyond max_offset.
    pub fn verify_time(&self) -> Result<f64> {
        let mut off = 0f64;
        check(unsafe { sys::mongoelector_locker_verify_time(self.inner.ptr, &mut off) })?;
        Ok(off)
    }

    /// The unexpired lock document of the key, None when nobody holds it.
    pub fn current(&self) -> Result<Option<LockInfo>> {
        let mut info = std::mem::MaybeUninit::<sys::mongoelector_lock_info>::zeroed();
        let mut found: c_int = 0;
        check(unsafe {
            sys::mongoelector_locker_current(self.inner.ptr, info.as_mut_ptr(), &mut found)
        })?;
        if found == 0 {
            return Ok(None);
        }
        let info = unsafe { info.assume_init() };
        Ok(Some(LockInfo {
            uuid: c_string(&info.uuid),
            host: c_string(&info.host),
            pid: info.pid,
            created: from_ms(info.created_ms),
            expire: from_ms(info.expire_ms),
            fence: info.fence,
        }))
    }
}
