use mongoelector_sys as sys;
use std::ffi::CStr;
use std::fmt;

/// Every failure of the library, with the message it gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Bad argument: empty/too long/non-UTF-8 key, ttl <= 0, bad URI, NUL in a string.
    InvalidArgument(String),
    /// Non-blocking acquire: another holds the lock (`"<key> owned by <host> pid <pid>"`).
    LockHeld(String),
    /// A blocking acquire ran past its timeout.
    Timeout(String),
    /// The host clock differs from the server's by more than max_offset.
    ClockOffset(String),
    /// A blocking acquire was cancelled through a [`crate::CancelHandle`].
    Cancelled(String),
    /// The server could not be reached or did not answer in time.
    Unavailable(String),
    /// The server answered with an error or an unusable document.
    Server(String),
    /// The server cannot run the protocol safely (non-atomic findAndModify).
    UnsafeServer(String),
    /// A bug in the library, out of memory, or a status this crate does not know.
    Internal(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn from_status(status: sys::mongoelector_status, message: String) -> Error {
        match status {
            sys::MONGOELECTOR_ERR_INVALID_ARGUMENT => Error::InvalidArgument(message),
            sys::MONGOELECTOR_ERR_LOCK_EXISTS => Error::LockHeld(message),
            sys::MONGOELECTOR_ERR_TIMEOUT => Error::Timeout(message),
            sys::MONGOELECTOR_ERR_TIME_OFFSET => Error::ClockOffset(message),
            sys::MONGOELECTOR_ERR_CANCELLED => Error::Cancelled(message),
            sys::MONGOELECTOR_ERR_UNAVAILABLE => Error::Unavailable(message),
            sys::MONGOELECTOR_ERR_SERVER => Error::Server(message),
            sys::MONGOELECTOR_ERR_UNSAFE_SERVER => Error::UnsafeServer(message),
            sys::MONGOELECTOR_ERR_INTERNAL => Error::Internal(message),
            other => Error::Internal(format!("unknown status {other}: {message}")),
        }
    }

    /// The C status code of this error.
    pub fn status(&self) -> sys::mongoelector_status {
        match self {
            Error::InvalidArgument(_) => sys::MONGOELECTOR_ERR_INVALID_ARGUMENT,
            Error::LockHeld(_) => sys::MONGOELECTOR_ERR_LOCK_EXISTS,
            Error::Timeout(_) => sys::MONGOELECTOR_ERR_TIMEOUT,
            Error::ClockOffset(_) => sys::MONGOELECTOR_ERR_TIME_OFFSET,
            Error::Cancelled(_) => sys::MONGOELECTOR_ERR_CANCELLED,
            Error::Unavailable(_) => sys::MONGOELECTOR_ERR_UNAVAILABLE,
            Error::Server(_) => sys::MONGOELECTOR_ERR_SERVER,
            Error::UnsafeServer(_) => sys::MONGOELECTOR_ERR_UNSAFE_SERVER,
            Error::Internal(_) => sys::MONGOELECTOR_ERR_INTERNAL,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Error::InvalidArgument(m)
            | Error::LockHeld(m)
            | Error::Timeout(m)
            | Error::ClockOffset(m)
            | Error::Cancelled(m)
            | Error::Unavailable(m)
            | Error::Server(m)
            | Error::UnsafeServer(m)
            | Error::Internal(m) => m,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = unsafe { CStr::from_ptr(sys::mongoelector_status_name(self.status())) };
        write!(f, "{}: {}", name.to_string_lossy(), self.message())
    }
}

impl std::error::Error for Error {}

/// Turns a status into a Result, reading the thread-local message right away (same
/// thread, before any other library call).
pub(crate) fn check(status: sys::mongoelector_status) -> Result<()> {
    if status == sys::MONGOELECTOR_OK {
        return Ok(());
    }
    let msg = unsafe { CStr::from_ptr(sys::mongoelector_last_error()) }
        .to_string_lossy()
        .into_owned();
    Err(Error::from_status(status, msg))
}

pub(crate) fn cstring(what: &str, s: &str) -> Result<std::ffi::CString> {
    std::ffi::CString::new(s)
        .map_err(|_| Error::InvalidArgument(format!("{what} contains a NUL byte")))
}
