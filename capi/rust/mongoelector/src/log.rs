//! The library's log messages. By default they go to the [`log`](https://docs.rs/log)
//! crate, target [`LOG_TARGET`] ("mongoelector"), levels mapped one to one (debug,
//! info, warn, error): whatever logger the application installed (env_logger,
//! tracing-log, ...) shows them, e.g. `RUST_LOG=mongoelector=info`. No setup call is
//! needed: the first [`crate::Client::new`] routes them (no logger installed: they are
//! dropped, as every `log` record is). [`set_log_handler`] sends them elsewhere.
//!
//! Each record carries the library's structured fields as `log` key-values (the `kv`
//! API: [`log::Record::key_values`]; structured and JSON loggers show them), each only
//! when the record has it:
//!
//! * `event`: what happened, a static name: `"leader_elected"` (info), `"leader_lost"`
//!   (info; warn when the lock was lost rather than given up), and at warn
//!   `"step_down"`, `"renew_failed"`, `"lease_lost"`, `"clock_jump"`,
//!   `"unsafe_server"`, `"release_failed"`, at error `"callback_failed"`; none for
//!   free text;
//! * `key`: the lock or election key;
//! * `fence`: the hold's fencing token (i64; none when the record has no hold);
//! * `uuid`, `host`: the locker's or elector node's identity.
//!
//! The library drops messages below a minimum level before formatting them. For the `log`
//! crate that level follows [`log::max_level()`] as it is when a client, locker or
//! elector is made (or [`sync_log_level`] is called): install your logger and its level
//! filter first, or call [`sync_log_level`] after changing them.
use crate::error::{check, Result};
use ::log::kv;
use mongoelector_sys as sys;
use std::borrow::Cow;
use std::ffi::CStr;
use std::os::raw::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

/// The `log` target of the library's messages.
pub const LOG_TARGET: &str = "mongoelector";

/// Level of a library log message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
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

/// The state one installation hands to C as user_data: freed in `release_tramp`, which
/// the library calls once that installation was replaced and no call of it is in flight.
struct Installed {
    /// None: the `log` crate.
    handler: Option<Box<LogHandler>>,
}

/// What is installed, as far as this crate knows: (custom handler installed, min level
/// given to C). None: nothing installed by this crate yet.
static CURRENT: Mutex<Option<(bool, sys::mongoelector_log_level)>> = Mutex::new(None);

/// A C string of a record: "" for NULL (the library never passes NULL), lossy UTF-8.
unsafe fn c_text<'a>(p: *const c_char) -> Cow<'a, str> {
    if p.is_null() {
        Cow::Borrowed("")
    } else {
        CStr::from_ptr(p).to_string_lossy()
    }
}

/// The structured fields of one record as `log` key-values: only those present.
struct Fields<'a> {
    event: Option<&'static str>,
    key: Cow<'a, str>,
    fence: i64,
    uuid: Cow<'a, str>,
    host: Cow<'a, str>,
}

impl<'a> Fields<'a> {
    /// SAFETY: `r` is a record the library passed, read during its callback.
    unsafe fn from_c(r: &'a sys::mongoelector_log_record) -> Fields<'a> {
        Fields {
            event: event_name(r.event),
            key: c_text(r.key),
            fence: r.fence,
            uuid: c_text(r.uuid),
            host: c_text(r.host),
        }
    }
}

impl kv::Source for Fields<'_> {
    fn visit<'kvs>(
        &'kvs self,
        visitor: &mut dyn kv::VisitSource<'kvs>,
    ) -> std::result::Result<(), kv::Error> {
        /// A string field, unless empty (absent).
        fn text<'kvs>(
            visitor: &mut dyn kv::VisitSource<'kvs>,
            name: &'static str,
            value: &'kvs str,
        ) -> std::result::Result<(), kv::Error> {
            if value.is_empty() {
                return Ok(());
            }
            visitor.visit_pair(kv::Key::from_str(name), kv::Value::from(value))
        }
        text(visitor, "event", self.event.unwrap_or(""))?;
        text(visitor, "key", &self.key)?;
        if self.fence != 0 {
            visitor.visit_pair(kv::Key::from_str("fence"), kv::Value::from(self.fence))?;
        }
        text(visitor, "uuid", &self.uuid)?;
        text(visitor, "host", &self.host)
    }
}

/// The library's static name of an event ("leader_elected"); None for free text
/// (MONGOELECTOR_EVENT_NONE) and events it does not know.
fn event_name(event: sys::mongoelector_log_event) -> Option<&'static str> {
    if event == sys::MONGOELECTOR_EVENT_NONE {
        return None;
    }
    // SAFETY: a static NUL-terminated string for any value.
    let name = unsafe { sys::mongoelector_log_event_name(event) };
    if name.is_null() {
        return None;
    }
    match unsafe { CStr::from_ptr(name) }.to_str() {
        Ok("unknown") | Err(_) => None,
        Ok(n) => Some(n),
    }
}

unsafe extern "C" fn record_tramp(record: *const sys::mongoelector_log_record, ud: *mut c_void) {
    if record.is_null() || ud.is_null() {
        return;
    }
    // Never unwind into C: a panicking handler or logger loses its message only.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: ud is the Installed of this installation, alive until release_tramp;
        // the record and its strings are valid during this call.
        let installed = &*(ud as *const Installed);
        let r = &*record;
        let level = LogLevel::from_c(r.level);
        match &installed.handler {
            Some(h) => h(level, &c_text(r.message)),
            None => {
                let level = ::log::Level::from(level);
                if level <= ::log::STATIC_MAX_LEVEL && level <= ::log::max_level() {
                    let text = c_text(r.message);
                    let fields = Fields::from_c(r);
                    ::log::logger().log(
                        &::log::Record::builder()
                            .args(format_args!("{text}"))
                            .level(level)
                            .target(LOG_TARGET)
                            .module_path_static(Some(module_path!()))
                            .file_static(Some(file!()))
                            .line(Some(line!()))
                            .key_values(&fields)
                            .build(),
                    );
                }
            }
        }
    }));
}

unsafe extern "C" fn release_tramp(ud: *mut c_void) {
    if ud.is_null() {
        return;
    }
    // The hand-over point: no thread can call this installation's handler any more.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        drop(Box::from_raw(ud as *mut Installed))
    }));
}

/// The C minimum level for `log::max_level()`: messages the `log` crate would drop
/// are not even formatted. Off: errors only (nothing lower can pass).
fn min_level_for_log() -> sys::mongoelector_log_level {
    match ::log::max_level() {
        ::log::LevelFilter::Trace | ::log::LevelFilter::Debug => sys::MONGOELECTOR_LOG_DEBUG,
        ::log::LevelFilter::Info => sys::MONGOELECTOR_LOG_INFO,
        ::log::LevelFilter::Warn => sys::MONGOELECTOR_LOG_WARNING,
        ::log::LevelFilter::Error | ::log::LevelFilter::Off => sys::MONGOELECTOR_LOG_ERROR,
    }
}

fn install_locked(
    current: &mut Option<(bool, sys::mongoelector_log_level)>,
    handler: Option<Box<LogHandler>>,
) -> Result<()> {
    let custom = handler.is_some();
    let min = if custom {
        sys::MONGOELECTOR_LOG_DEBUG
    } else {
        min_level_for_log()
    };
    let ud = Box::into_raw(Box::new(Installed { handler })) as *mut c_void;
    let st = unsafe {
        sys::mongoelector_set_log_record_handler(min, Some(record_tramp), ud, Some(release_tramp))
    };
    if st != sys::MONGOELECTOR_OK {
        // Not installed: C never saw it.
        drop(unsafe { Box::from_raw(ud as *mut Installed) });
        return check(st);
    }
    *current = Some((custom, min));
    Ok(())
}

/// Routes the library's messages to the `log` crate unless this crate already installed
/// a handler; re-installs when `log::max_level()` changed since. Called by
/// `Client::new` and the builders' `build()`.
pub(crate) fn sync() -> Result<()> {
    let mut current = CURRENT.lock().unwrap_or_else(|e| e.into_inner());
    match *current {
        Some((true, _)) => Ok(()),
        Some((false, min)) if min == min_level_for_log() => Ok(()),
        _ => install_locked(&mut current, None),
    }
}

/// Makes the library's minimum level follow the current [`log::max_level()`] (when its
/// messages go to the `log` crate). Clients, lockers and electors do it when made; call
/// it after raising the `log` crate's level filter later on.
pub fn sync_log_level() -> Result<()> {
    sync()
}

/// Sends every library log message to `handler` instead of the `log` crate; `None`
/// restores the default (the `log` crate, target [`LOG_TARGET`]). The handler runs on
/// whichever thread logs, often an elector thread or the library's renewer; it must be
/// short and must not call `set_log_handler` itself. A panic in it is caught. The
/// previous handler is dropped once no thread is running it any more (the library's
/// hand-over point), on this thread if none is. Process-wide.
///
/// The library logs through one process-wide C handler: this crate installs its own
/// (at the first `Client::new` or here), replacing one set through `mongoelector-sys`.
pub fn set_log_handler(handler: Option<Box<LogHandler>>) -> Result<()> {
    let mut current = CURRENT.lock().unwrap_or_else(|e| e.into_inner());
    install_locked(&mut current, handler)
}
