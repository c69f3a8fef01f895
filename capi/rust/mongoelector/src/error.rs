use mongoelector_sys as sys;
use std::ffi::CStr;
use std::fmt;
use std::os::raw::c_char;

/// What the library knows about a failure: its message and, when the backend answered
/// with an error, the backend's code, MongoDB's `codeName` and `errorLabels`.
///
/// Read from `mongoelector_last_error_info` on the failing call's thread, right after it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorDetail {
    message: String,
    server_code: Option<i32>,
    code_name: Option<String>,
    labels: Vec<String>,
}

impl ErrorDetail {
    /// A detail with a message and no server information (e.g. for tests of your own).
    pub fn new(message: impl Into<String>) -> ErrorDetail {
        ErrorDetail {
            message: message.into(),
            ..Default::default()
        }
    }

    /// The same detail with a backend error code, code name and labels.
    pub fn with_server_error(
        mut self,
        code: i32,
        code_name: impl Into<String>,
        labels: impl IntoIterator<Item = impl Into<String>>,
    ) -> ErrorDetail {
        let name = code_name.into();
        self.server_code = (code != 0).then_some(code);
        self.code_name = (!name.is_empty()).then_some(name);
        self.labels = labels.into_iter().map(Into::into).collect();
        self
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// The backend's error code: a MongoDB server code (11000, 13, 14, 18, 50, ...) or an
    /// SQLite extended result code; None when the failure has none (no answer, a bad
    /// argument, a failure of the library's own).
    pub fn server_code(&self) -> Option<i32> {
        self.server_code
    }

    /// MongoDB's `codeName` ("Unauthorized", "TypeMismatch", ...), None if none.
    pub fn code_name(&self) -> Option<&str> {
        self.code_name.as_deref()
    }

    /// MongoDB's `errorLabels` ("RetryableWriteError", ...).
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    pub fn has_label(&self, label: &str) -> bool {
        self.labels.iter().any(|l| l == label)
    }
}

impl fmt::Display for ErrorDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// The kind of an [`Error`], without its data (`err.kind()`).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    InvalidArgument,
    LockHeld,
    Timeout,
    ClockOffset,
    Cancelled,
    Unavailable,
    Server,
    UnsafeServer,
    Lost,
    Internal,
    /// A status this crate does not know (a newer library): see [`Error::Unknown`].
    Unknown,
}

/// Every failure of the library. Match on the variant (new ones may be added: keep a
/// `_` arm) or on [`Error::kind`]; [`Error::server_code`], [`Error::code_name`] and
/// [`Error::labels`] tell what the backend answered.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// Bad argument: empty/too long/non-UTF-8 key, ttl <= 0, bad URI, NUL in a string,
    /// a non-blocking acquire given a timeout.
    InvalidArgument(ErrorDetail),
    /// Non-blocking acquire: another holds the lock (`"<key> owned by <host> pid <pid>"`),
    /// or a fair one found others waiting in its queue.
    LockHeld(ErrorDetail),
    /// A blocking acquire ran past its timeout.
    Timeout(ErrorDetail),
    /// The host clock differs from the server's by more than max_offset. `offset` is the
    /// measured server-minus-host offset in seconds when the failing call measured it
    /// ([`crate::Locker::verify_time`]); None when the call does not report it (an acquire
    /// with timeparanoid: its message names the offset).
    ClockOffset {
        offset: Option<f64>,
        detail: ErrorDetail,
    },
    /// A blocking acquire was cancelled through its [`crate::CancelToken`].
    Cancelled(ErrorDetail),
    /// The server could not be reached or did not answer in time (or answered "not
    /// now": its code is kept).
    Unavailable(ErrorDetail),
    /// The server answered with an error or an unusable document.
    Server(ErrorDetail),
    /// The server cannot run the protocol safely (non-atomic findAndModify).
    UnsafeServer(ErrorDetail),
    /// A minimum hold could not be kept: the hold had already ended at the server when
    /// its write landed (it expired, or another holder took the lock), or the keep-alive
    /// lease was lost before it was released (a release with a minimum hold). Nothing
    /// is left to retry.
    Lost(ErrorDetail),
    /// A bug in the library or out of memory.
    Internal(ErrorDetail),
    /// A status this crate does not know (from a newer library), with its number.
    Unknown { status: i32, detail: ErrorDetail },
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The error of a C status (not OK) with `detail`. A C `mongoelector_status` is an
    /// `int` on the wire; the -sys crate types it as bindgen does (`c_uint`), this API
    /// keeps `i32`.
    pub fn from_status(status: i32, detail: ErrorDetail) -> Error {
        match status as sys::mongoelector_status {
            sys::MONGOELECTOR_ERR_INVALID_ARGUMENT => Error::InvalidArgument(detail),
            sys::MONGOELECTOR_ERR_LOCK_EXISTS => Error::LockHeld(detail),
            sys::MONGOELECTOR_ERR_TIMEOUT => Error::Timeout(detail),
            sys::MONGOELECTOR_ERR_TIME_OFFSET => Error::ClockOffset {
                offset: None,
                detail,
            },
            sys::MONGOELECTOR_ERR_CANCELLED => Error::Cancelled(detail),
            sys::MONGOELECTOR_ERR_UNAVAILABLE => Error::Unavailable(detail),
            sys::MONGOELECTOR_ERR_SERVER => Error::Server(detail),
            sys::MONGOELECTOR_ERR_UNSAFE_SERVER => Error::UnsafeServer(detail),
            sys::MONGOELECTOR_ERR_LOST => Error::Lost(detail),
            sys::MONGOELECTOR_ERR_INTERNAL => Error::Internal(detail),
            _ => Error::Unknown { status, detail },
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Error {
        Error::InvalidArgument(ErrorDetail::new(message))
    }

    pub(crate) fn internal(message: impl Into<String>) -> Error {
        Error::Internal(ErrorDetail::new(message))
    }

    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::LockHeld(_) => ErrorKind::LockHeld,
            Error::Timeout(_) => ErrorKind::Timeout,
            Error::ClockOffset { .. } => ErrorKind::ClockOffset,
            Error::Cancelled(_) => ErrorKind::Cancelled,
            Error::Unavailable(_) => ErrorKind::Unavailable,
            Error::Server(_) => ErrorKind::Server,
            Error::UnsafeServer(_) => ErrorKind::UnsafeServer,
            Error::Lost(_) => ErrorKind::Lost,
            Error::Internal(_) => ErrorKind::Internal,
            Error::Unknown { .. } => ErrorKind::Unknown,
        }
    }

    /// The C status code of this error (`MONGOELECTOR_ERR_*`; an unknown one as given).
    pub fn status(&self) -> i32 {
        let status = match self {
            Error::InvalidArgument(_) => sys::MONGOELECTOR_ERR_INVALID_ARGUMENT,
            Error::LockHeld(_) => sys::MONGOELECTOR_ERR_LOCK_EXISTS,
            Error::Timeout(_) => sys::MONGOELECTOR_ERR_TIMEOUT,
            Error::ClockOffset { .. } => sys::MONGOELECTOR_ERR_TIME_OFFSET,
            Error::Cancelled(_) => sys::MONGOELECTOR_ERR_CANCELLED,
            Error::Unavailable(_) => sys::MONGOELECTOR_ERR_UNAVAILABLE,
            Error::Server(_) => sys::MONGOELECTOR_ERR_SERVER,
            Error::UnsafeServer(_) => sys::MONGOELECTOR_ERR_UNSAFE_SERVER,
            Error::Lost(_) => sys::MONGOELECTOR_ERR_LOST,
            Error::Internal(_) => sys::MONGOELECTOR_ERR_INTERNAL,
            Error::Unknown { status, .. } => return *status,
        };
        status as i32
    }

    pub fn detail(&self) -> &ErrorDetail {
        match self {
            Error::InvalidArgument(d)
            | Error::LockHeld(d)
            | Error::Timeout(d)
            | Error::ClockOffset { detail: d, .. }
            | Error::Cancelled(d)
            | Error::Unavailable(d)
            | Error::Server(d)
            | Error::UnsafeServer(d)
            | Error::Lost(d)
            | Error::Internal(d)
            | Error::Unknown { detail: d, .. } => d,
        }
    }

    /// The library's message.
    pub fn message(&self) -> &str {
        self.detail().message()
    }

    /// The backend's error code (MongoDB server code, SQLite extended result code), None
    /// when the failure has none. See [`ErrorDetail::server_code`].
    pub fn server_code(&self) -> Option<i32> {
        self.detail().server_code()
    }

    /// MongoDB's `codeName`, None if none.
    pub fn code_name(&self) -> Option<&str> {
        self.detail().code_name()
    }

    /// MongoDB's `errorLabels`.
    pub fn labels(&self) -> &[String] {
        self.detail().labels()
    }

    /// The failure carried the error label `label` (e.g. "RetryableWriteError").
    pub fn has_label(&self, label: &str) -> bool {
        self.detail().has_label(label)
    }
}

impl fmt::Display for Error {
    /// `"MONGOELECTOR_ERR_SERVER: <message>"`, then the backend's code and code name in
    /// brackets when there is one.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Unknown { status, .. } => write!(f, "unknown status {status}")?,
            _ => {
                let name = unsafe {
                    CStr::from_ptr(sys::mongoelector_status_name(
                        self.status() as sys::mongoelector_status
                    ))
                };
                f.write_str(&name.to_string_lossy())?;
            }
        }
        write!(f, ": {}", self.message())?;
        match (self.server_code(), self.code_name()) {
            (Some(c), Some(n)) => write!(f, " [code {c} {n}]"),
            (Some(c), None) => write!(f, " [code {c}]"),
            _ => Ok(()),
        }
    }
}

impl std::error::Error for Error {}

unsafe fn c_str(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// What the last failed call on this thread left: read right after it, on its thread,
/// before any other library call.
pub(crate) fn last_error_detail() -> ErrorDetail {
    // SAFETY: all-zero is a valid value of this plain C struct (null pointers, 0).
    let mut info: sys::mongoelector_error_info = unsafe { std::mem::zeroed() };
    info.version = sys::MONGOELECTOR_ERROR_INFO_VERSION;
    let st = unsafe { sys::mongoelector_last_error_info(&mut info) };
    if st != sys::MONGOELECTOR_OK {
        return ErrorDetail::new(unsafe { c_str(sys::mongoelector_last_error()) });
    }
    let labels = if info.labels.is_null() || info.label_count == 0 {
        Vec::new()
    } else {
        // SAFETY: label_count pointers to NUL-terminated strings, owned by the library
        // until this thread's next call into it (we copy them now).
        unsafe { std::slice::from_raw_parts(info.labels, info.label_count) }
            .iter()
            .map(|p| unsafe { c_str(*p) })
            .collect()
    };
    ErrorDetail::new(unsafe { c_str(info.message) }).with_server_error(
        info.code,
        unsafe { c_str(info.code_name) },
        labels,
    )
}

/// Turns a status into a Result, reading the thread-local error right away (same
/// thread, before any other library call).
pub(crate) fn check(status: sys::mongoelector_status) -> Result<()> {
    if status == sys::MONGOELECTOR_OK {
        return Ok(());
    }
    Err(Error::from_status(status as i32, last_error_detail()))
}

pub(crate) fn cstring(what: &str, s: &str) -> Result<std::ffi::CString> {
    std::ffi::CString::new(s).map_err(|_| Error::invalid(format!("{what} contains a NUL byte")))
}
