use crate::error::{check, Result};
use mongoelector_sys as sys;
use std::ffi::CStr;
use std::os::raw::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, RwLock};

/// Level of a library log message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug,
    Info,
    Warning,
    Error,
}

/// What [`set_log_handler`] takes.
pub type LogHandler = dyn Fn(LogLevel, &str) + Send + Sync + 'static;
type Handler = Arc<LogHandler>;
static HANDLER: RwLock<Option<Handler>> = RwLock::new(None);

unsafe extern "C" fn log_tramp(
    level: sys::mongoelector_log_level,
    msg: *const c_char,
    _ud: *mut c_void,
) {
    let h = HANDLER.read().unwrap_or_else(|e| e.into_inner()).clone();
    if let Some(h) = h {
        let level = match level {
            l if l >= sys::MONGOELECTOR_LOG_ERROR => LogLevel::Error,
            l if l >= sys::MONGOELECTOR_LOG_WARNING => LogLevel::Warning,
            l if l >= sys::MONGOELECTOR_LOG_INFO => LogLevel::Info,
            _ => LogLevel::Debug,
        };
        let text = CStr::from_ptr(msg).to_string_lossy();
        let _ = catch_unwind(AssertUnwindSafe(|| h(level, &text)));
    }
}

/// Sends every library log message to `handler` (None restores the default: warnings
/// and errors to stderr). It runs on whichever thread logs, often an elector thread.
/// Process-wide.
pub fn set_log_handler(handler: Option<Box<LogHandler>>) -> Result<()> {
    let on = handler.is_some();
    *HANDLER.write().unwrap_or_else(|e| e.into_inner()) = handler.map(Arc::from);
    let f: sys::mongoelector_log_fn = if on { Some(log_tramp) } else { None };
    check(unsafe { sys::mongoelector_set_log_callback(f, std::ptr::null_mut()) })
}
