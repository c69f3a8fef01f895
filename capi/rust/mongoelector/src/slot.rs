//! What [`Semaphore`](crate::Semaphore) and [`RwLock`](crate::RwLock) share (both hold
//! one slot of a key's slot document in the library): the options of their builders
//! besides the feature's own, the holder records, and the release of a guard's hold.
use crate::error::{cstring, Result};
use crate::locker::owned_c_string;
use crate::semaphore::SemaphoreHolder;
use crate::status::Timestamp;
use std::ffi::CString;
use std::os::raw::{c_char, c_int};
use std::time::Duration;

/// The builder options every slot feature has; None keeps the library's default.
#[derive(Debug, Clone, Default)]
pub(crate) struct SlotConfig {
    pub(crate) collection: Option<String>,
    pub(crate) ttl: Option<Duration>,
    pub(crate) timeparanoid: Option<bool>,
    pub(crate) max_offset: Option<Duration>,
    pub(crate) allow_unsafe_server: Option<bool>,
    pub(crate) op_timeout: Option<Duration>,
    pub(crate) fair: Option<bool>,
}

/// The fields of a C config (mongoelector_semaphore_config, _rwlock_config) that
/// [`SlotConfig`] sets: `slot_fields!(c)` borrows them.
pub(crate) struct SlotFields<'c> {
    pub(crate) collection: &'c mut *const c_char,
    pub(crate) ttl_seconds: &'c mut f64,
    pub(crate) timeparanoid: &'c mut c_int,
    pub(crate) max_offset_seconds: &'c mut f64,
    pub(crate) allow_unsafe_server: &'c mut c_int,
    pub(crate) op_timeout_seconds: &'c mut f64,
    pub(crate) fair: &'c mut c_int,
}

macro_rules! slot_fields {
    ($c:expr) => {
        $crate::slot::SlotFields {
            collection: &mut $c.collection,
            ttl_seconds: &mut $c.ttl_seconds,
            timeparanoid: &mut $c.timeparanoid,
            max_offset_seconds: &mut $c.max_offset_seconds,
            allow_unsafe_server: &mut $c.allow_unsafe_server,
            op_timeout_seconds: &mut $c.op_timeout_seconds,
            fair: &mut $c.fair,
        }
    };
}
pub(crate) use slot_fields;

impl SlotConfig {
    /// Writes the options set into `f`. The returned string backs the collection pointer:
    /// keep it until the C call that copies it.
    pub(crate) fn apply(&self, f: SlotFields<'_>) -> Result<Option<CString>> {
        let coll = self
            .collection
            .as_deref()
            .map(|c| cstring("collection", c))
            .transpose()?;
        if let Some(coll) = &coll {
            *f.collection = coll.as_ptr();
        }
        if let Some(t) = self.ttl {
            *f.ttl_seconds = t.as_secs_f64();
        }
        if let Some(on) = self.timeparanoid {
            *f.timeparanoid = on as c_int;
        }
        if let Some(m) = self.max_offset {
            *f.max_offset_seconds = m.as_secs_f64();
        }
        if let Some(on) = self.allow_unsafe_server {
            *f.allow_unsafe_server = on as c_int;
        }
        if let Some(t) = self.op_timeout {
            *f.op_timeout_seconds = t.as_secs_f64();
        }
        if let Some(on) = self.fair {
            *f.fair = on as c_int;
        }
        Ok(coll)
    }
}

/// The setters of the [`SlotConfig`] options, for a builder whose field `slot` holds
/// them; `$what` names the hold in the docs ("a slot", "a hold").
macro_rules! slot_setters {
    ($what:literal, $default_collection:literal) => {
        #[doc = concat!("Collection of the documents (default \"", $default_collection, "\"; the fencing")]
        /// epochs live in `"<collection>.fences"`).
        pub fn collection(mut self, name: &str) -> Self {
            self.slot.collection = Some(name.to_owned());
            self
        }
        #[doc = concat!("Lease of ", $what, ": how long a crashed holder keeps it (default 600 s).")]
        pub fn ttl(mut self, ttl: Duration) -> Self {
            self.slot.ttl = Some(ttl);
            self
        }
        /// Check the host clock against the server's before acquiring (default true).
        pub fn timeparanoid(mut self, on: bool) -> Self {
            self.slot.timeparanoid = Some(on);
            self
        }
        /// Allowed host/server clock difference (default 0.5 s).
        pub fn max_offset(mut self, max: Duration) -> Self {
            self.slot.max_offset = Some(max);
            self
        }
        /// Run on servers with non-atomic findAndModify such as FerretDB: exclusion is
        /// then NOT guaranteed under contention (default false: such servers are refused).
        pub fn allow_unsafe_server(mut self, on: bool) -> Self {
            self.slot.allow_unsafe_server = Some(on);
            self
        }
        /// Time bound of one round trip (server selection, connect, socket, maxTimeMS); at
        /// most ttl/2. `Duration::ZERO`: the default, ttl/10 clamped to [0.1 s, 5 s].
        pub fn op_timeout(mut self, timeout: Duration) -> Self {
            self.slot.op_timeout = Some(timeout);
            self
        }
        /// Fair (FIFO) queueing (default false): a blocking acquire that finds the key
        /// taken (for a read-write lock: a writer) waits in the key's queue and is served
        /// in arrival order; a waiter that dies holds the queue up for at most one ttl.
        /// Every acquire honours a live queue, fair or not: a `try_` acquire never passes
        /// a queued waiter.
        pub fn fair(mut self, on: bool) -> Self {
            self.slot.fair = Some(on);
            self
        }
    };
}
pub(crate) use slot_setters;

/// A holder record of the C API (uuid and host malloc'd by the library, freed by the
/// caller's *_holders_free afterwards).
///
/// # Safety
/// `uuid` and `host` are NULL or valid NUL-terminated strings.
pub(crate) unsafe fn holder_from_c(
    uuid: *const c_char,
    host: *const c_char,
    pid: i64,
    fence: i64,
    created_ms: i64,
    expire_ms: i64,
) -> SemaphoreHolder {
    SemaphoreHolder {
        uuid: owned_c_string(uuid),
        host: owned_c_string(host),
        pid,
        fence,
        created: Timestamp::from_millis(created_ms),
        expire: Timestamp::from_millis(expire_ms),
    }
}

/// The methods of a guard of one hold: `$guard<'a>` has the fields `$holder: &'a $H`
/// (whose `fence`, `touch` and `release` it calls), `fence: i64` and `armed: bool`, and a
/// `Drop` that calls `release_hold` while armed. `$hold` names the hold in the docs.
macro_rules! hold_guard {
    ($guard:ident, $holder:ident, $H:ident, $hold:literal) => {
        impl<'a> $guard<'a> {
            /// The fencing token of this hold.
            pub fn fence(&self) -> i64 {
                self.fence
            }

            #[doc = concat!("The ", stringify!($H), " holding.")]
            pub fn $holder(&self) -> &'a $H {
                self.$holder
            }

            #[doc = concat!("Renews the hold (see [`", stringify!($H), "::touch`]): the new expiry, None once lost.")]
            pub fn touch(&self) -> Result<Option<Timestamp>> {
                if self.$holder.fence()? != self.fence {
                    return Ok(None);
                }
                self.$holder.touch()
            }

            #[doc = concat!("Releases the ", $hold, " now and returns the release's error, if any (the hold is")]
            /// then kept as stranded by the library: released by its handle's next acquire
            /// or release, or expiring at its ttl).
            pub fn release(mut self) -> Result<()> {
                self.armed = false;
                self.release_hold()
            }

            #[doc = concat!("Ends the guard WITHOUT releasing: the ", $hold, " stays held until its ttl or an")]
            #[doc = concat!("explicit [`", stringify!($H), "::release`]. Returns the fencing token.")]
            pub fn leak(mut self) -> i64 {
                self.armed = false;
                self.fence
            }

            // Only this guard's hold: after a loss and a new acquire through the same
            // handle, the handle's hold is another guard's.
            fn release_hold(&self) -> Result<()> {
                if self.$holder.fence()? != self.fence {
                    return Ok(());
                }
                self.$holder.release()
            }
        }
    };
}
pub(crate) use hold_guard;

/// A guard dropped without release(): releases, and logs (never panics) a failure.
pub(crate) fn release_on_drop(result: Result<()>, what: &str, key: &str, fence: i64) {
    if let Err(e) = result {
        ::log::warn!(
            target: crate::LOG_TARGET,
            "releasing {what} {key} (fence {fence}) on drop failed: {e}; it stays held until \
             its ttl or the handle's next acquire or release"
        );
    }
}
