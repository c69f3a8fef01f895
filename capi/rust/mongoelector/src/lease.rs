//! Keep-alive leases: a held lock, or a side of a read-write lock, renewed by the library
//! until the guard is dropped.
use crate::error::{check, Result};
use crate::locker::{AcquireOptions, Locker};
use mongoelector_sys as sys;
use std::os::raw::c_int;
use std::ptr;
use std::sync::Arc;
use std::time::Duration;

/// A lock ([`Locker::hold`]) or a side of a read-write lock
/// ([`RwLock::hold_read`](crate::RwLock::hold_read), [`RwLock::hold_write`](crate::RwLock::hold_write))
/// kept alive by the library's renewer threads (a few per process, renewing in batches)
/// until dropped.
///
/// The lease renews about every ttl/3 and is declared LOST on this host's monotonic clock
/// at its renew deadline (lease end minus a margin, before anyone else can take the
/// lock), whether or not a renewal call is still hanging, or as soon as a renewal finds
/// the lock taken. Loss is final. Check [`LeaseGuard::is_lost`] (or pass
/// [`LeaseGuard::fence`] to the resource) before acting on the lock.
///
/// Dropping the guard stops the renewals and releases the lock (fenced); a lost lease is
/// not released. `Send + Sync`: query it from any thread.
pub struct LeaseGuard {
    ptr: LeasePtr,
    // The C holder (locker, read-write lock) must outlive the lease: the guard keeps it
    // alive.
    _holder: Arc<dyn Send + Sync>,
}

/// The C lease handle, of whichever kind of hold.
pub(crate) enum LeasePtr {
    Lock(*mut sys::mongoelector_lease),
    RwLock(*mut sys::mongoelector_rwlock_lease),
}

// The header: fence, lost and wait_lost may be called from any thread at once; free
// (Drop) runs with no other call in flight (it takes the guard by value).
unsafe impl Send for LeaseGuard {}
unsafe impl Sync for LeaseGuard {}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        match self.ptr {
            LeasePtr::Lock(p) => unsafe { sys::mongoelector_lease_free(p) },
            LeasePtr::RwLock(p) => unsafe { sys::mongoelector_rwlock_lease_free(p) },
        }
    }
}

impl std::fmt::Debug for LeaseGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseGuard")
            .field("fence", &self.fence())
            .field("lost", &self.is_lost())
            .finish()
    }
}

impl LeaseGuard {
    /// A guard of the C lease `ptr`, keeping `holder` (its C holder) alive.
    pub(crate) fn new(ptr: LeasePtr, holder: Arc<dyn Send + Sync>) -> LeaseGuard {
        LeaseGuard {
            ptr,
            _holder: holder,
        }
    }

    /// The fencing token of the lease's hold.
    pub fn fence(&self) -> i64 {
        let mut out = 0i64;
        // Cannot fail on a live handle with a valid out pointer.
        let _ = match self.ptr {
            LeasePtr::Lock(p) => unsafe { sys::mongoelector_lease_fence(p, &mut out) },
            LeasePtr::RwLock(p) => unsafe { sys::mongoelector_rwlock_lease_fence(p, &mut out) },
        };
        out
    }

    /// True once the lease is lost (never goes back to false).
    pub fn is_lost(&self) -> bool {
        let mut out: c_int = 0;
        let _ = match self.ptr {
            LeasePtr::Lock(p) => unsafe { sys::mongoelector_lease_lost(p, &mut out) },
            LeasePtr::RwLock(p) => unsafe { sys::mongoelector_rwlock_lease_lost(p, &mut out) },
        };
        out != 0
    }

    /// Blocks until the lease is lost (true) or `timeout` passes (false); None waits forever.
    pub fn wait_lost(&self, timeout: Option<Duration>) -> Result<bool> {
        let mut out: c_int = 0;
        let t = timeout.map_or(-1.0, |d| d.as_secs_f64());
        check(match self.ptr {
            LeasePtr::Lock(p) => unsafe { sys::mongoelector_lease_wait_lost(p, t, &mut out) },
            LeasePtr::RwLock(p) => unsafe {
                sys::mongoelector_rwlock_lease_wait_lost(p, t, &mut out)
            },
        })?;
        Ok(out != 0)
    }
}

impl Locker {
    /// Waits for the lock (at most `timeout`; None: forever; `Error::Timeout` after it)
    /// and keeps it alive until the returned guard is dropped. One live lease per locker
    /// (`Error::InvalidArgument` otherwise).
    pub fn hold(&self, timeout: Option<Duration>) -> Result<LeaseGuard> {
        let mut o = AcquireOptions::new();
        if let Some(t) = timeout {
            o = o.timeout(t);
        }
        self.hold_with(&o)
    }

    /// One attempt (`Error::LockHeld` when held), then kept alive as [`Locker::hold`].
    pub fn try_hold(&self) -> Result<LeaseGuard> {
        self.hold_with(&AcquireOptions::new().blocking(false))
    }

    /// Acquires as `options` say (their cancel token cancels the wait for the lock, not
    /// the lease), then keeps the lock alive as [`Locker::hold`].
    pub fn hold_with(&self, options: &AcquireOptions) -> Result<LeaseGuard> {
        let o = options.to_c()?;
        let mut p = ptr::null_mut();
        check(unsafe {
            sys::mongoelector_lease_acquire_with(self.inner.ptr, &o, None, ptr::null_mut(), &mut p)
        })?;
        Ok(LeaseGuard::new(LeasePtr::Lock(p), self.inner.clone()))
    }
}
