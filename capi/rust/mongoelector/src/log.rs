//! The library's log messages. By default they go to the [`log`](https://docs.rs/log)
//! crate, target [`LOG_TARGET`] ("mongoelector"), levels mapped one to one (debug,
//! info, warn, error): whatever logger the application installed (env_logger,
//! tracing-log, ...) shows them, e.g. `RUST_LOG=mongoelector=info`. No setup call is
//! needed: the first [`crate::Client::new`] routes them (no logger installed: they are
//! dropped, as every `log` record is). [`set_log_handler`] sends them elsewhere.
use crate::error::{check, Result};
use mongoelector_sys as sys;
use std::ffi::CStr;
use std::os::raw::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Once, RwLock};

/// The `log` target of the library's messages.
pub const LOG_TARGET: &str = "mongoelector";

/// Level of a library log message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug,
    Info,
    Warning,
    Error,
}

impl LogLevel {
    fn from_c(level: sys::mongoelector_log_level) -> LogLevel {
        match level {
            l if l >= sys::MONGOELECTOR_LOG_ERROR => LogLevel::Error,
            l if l >= sys::MONGOELECTOR_LOG_WARNING => LogLevel::Warning,
            l if l >= sys::MONGOELECTOR_LOG_INFO => LogLevel::Info,
            _ => LogLevel::Debug,
        }
    }
}

impl From<LogLevel> for ::log::Level {
    fn from(l: LogLevel) -> ::log::Level {
        match l {
            LogLevel::Debug => ::log::Level::Debug,
            LogLevel::Info => ::log::Level::Info,
            LogLevel::Warning => ::log::Level::Warn,
            LogLevel::Error => ::log::Level::Error,
        }
    }
}

/// What [`set_log_handler`] takes.
pub type LogHandler = dyn Fn(LogLevel, &str) + Send + Sync + 'static;
type Handler = Arc<LogHandler>;
/// None: the `log` crate.
static HANDLER: RwLock<Option<Handler>> = RwLock::new(None);
static INSTALL: Once = Once::new();

unsafe extern "C" fn log_tramp(
    level: sys::mongoelector_log_level,
    msg: *const c_char,
    _ud: *mut c_void,
) {
    if msg.is_null() {
        return;
    }
    // Never unwind into C: a panicking handler or logger loses its message only.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let level = LogLevel::from_c(level);
        let handler = HANDLER.read().unwrap_or_else(|e| e.into_inner()).clone();
        match handler {
            Some(h) => h(level, &CStr::from_ptr(msg).to_string_lossy()),
            None => {
                let level = ::log::Level::from(level);
                if level <= ::log::max_level() {
                    let text = CStr::from_ptr(msg).to_string_lossy();
                    ::log::log!(target: LOG_TARGET, level, "{text}");
                }
            }
        }
    }));
}

/// Points the C library's process-wide log callback at this crate, once. Called by
/// `Client::new` and `set_log_handler`.
pub(crate) fn install() -> Result<()> {
    let mut status = sys::MONGOELECTOR_OK;
    INSTALL.call_once(|| {
        status =
            unsafe { sys::mongoelector_set_log_callback(Some(log_tramp), std::ptr::null_mut()) };
    });
    check(status)
}

/// Sends every library log message to `handler` instead of the `log` crate; `None`
/// restores the default (the `log` crate, target [`LOG_TARGET`]). The handler runs on
/// whichever thread logs, often an elector thread; a panic in it is caught. Process-wide.
///
/// The library logs through one process-wide C callback: this crate installs its own
/// (at the first `Client::new` or here), replacing one set through `mongoelector-sys`.
pub fn set_log_handler(handler: Option<Box<LogHandler>>) -> Result<()> {
    *HANDLER.write().unwrap_or_else(|e| e.into_inner()) = handler.map(Arc::from);
    install()
}
