use mongoelector_sys as sys;
use std::fmt;
use std::os::raw::c_int;
use std::ptr;
use std::sync::Arc;

struct TokenInner {
    ptr: *mut sys::mongoelector_cancel_token,
}

// The header: a cancel token "may be used from any thread, and by several threads at
// once"; it is freed (Drop of the last clone) only when no call holds it any more: every
// call given the token borrows a clone of it for its duration.
unsafe impl Send for TokenInner {}
unsafe impl Sync for TokenInner {}

impl Drop for TokenInner {
    fn drop(&mut self) {
        unsafe { sys::mongoelector_cancel_token_free(self.ptr) }
    }
}

/// A one-shot cancellation flag for the calls given it (through
/// [`crate::AcquireOptions::cancel`]): once cancelled it stays cancelled, and a call given
/// a cancelled token returns `Error::Cancelled` at once; a waiting call notices within
/// about 100 ms. Cancelling affects only the calls given this token, so a cancel issued
/// while no call is waiting cannot fail some later, unrelated acquire: use one token per
/// call (or per scope whose calls should all stop together).
///
/// Cheap to clone (the clones are the same token): hand a clone to the thread that
/// cancels.
///
/// ```no_run
/// # use mongoelector::{AcquireOptions, CancelToken, Locker};
/// # fn f(locker: &Locker) -> mongoelector::Result<()> {
/// let cancel = CancelToken::new();
/// let canceller = cancel.clone();
/// std::thread::spawn(move || {
///     std::thread::sleep(std::time::Duration::from_secs(5));
///     canceller.cancel(); // the acquire below returns Err(Error::Cancelled(_))
/// });
/// let guard = locker.acquire_with(&AcquireOptions::new().cancel(&cancel))?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct CancelToken {
    inner: Arc<TokenInner>,
}

impl CancelToken {
    /// A new, not cancelled token.
    ///
    /// # Panics
    /// When the library cannot allocate it (out of memory).
    pub fn new() -> CancelToken {
        let mut p = ptr::null_mut();
        let st = unsafe { sys::mongoelector_cancel_token_new(&mut p) };
        if st != sys::MONGOELECTOR_OK || p.is_null() {
            panic!(
                "mongoelector_cancel_token_new failed: {}",
                crate::error::last_error_detail()
            );
        }
        CancelToken {
            inner: Arc::new(TokenInner { ptr: p }),
        }
    }

    /// Cancels every call given this token, now and later. Any thread, any number of
    /// times.
    pub fn cancel(&self) {
        let st = unsafe { sys::mongoelector_cancel_token_cancel(self.inner.ptr) };
        debug_assert_eq!(st, sys::MONGOELECTOR_OK);
    }

    /// True once cancelled (never goes back).
    pub fn is_cancelled(&self) -> bool {
        let mut out: c_int = 0;
        let st = unsafe { sys::mongoelector_cancel_token_is_cancelled(self.inner.ptr, &mut out) };
        debug_assert_eq!(st, sys::MONGOELECTOR_OK);
        out != 0
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::mongoelector_cancel_token {
        self.inner.ptr
    }
}

impl Default for CancelToken {
    fn default() -> Self {
        CancelToken::new()
    }
}

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}
