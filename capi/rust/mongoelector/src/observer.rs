use crate::client::{Client, ClientInner};
use crate::error::{check, cstring, Error, Result};
use crate::status::Timestamp;
use mongoelector_sys as sys;
use std::ffi::CStr;
use std::fmt;
use std::os::raw::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// The node leading a key, as a [`LeaderObserver`] saw it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Leader {
    /// The leader's [`Elector::uuid`](crate::Elector::uuid).
    pub uuid: String,
    /// The leader's host name.
    pub host: String,
    /// The leader's process id on `host`.
    pub pid: i64,
    /// The fencing token of the leader's term.
    pub fence: i64,
}

/// What a [`LeaderObserver`] can tell about an elector key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum LeaderStatus {
    /// Nobody leads: the lock is absent, released or expired.
    NoLeader,
    /// [`LeaderState::leader`] leads.
    Leads,
    /// A [`transfer`](crate::Elector::transfer) to [`LeaderState::handover_to`] is
    /// written and the target has not taken it yet (it leads only after a renewal of its
    /// own): nobody leads.
    HandoverPending,
    /// The observer's reads fail and the lease it last saw has ended on its estimate of
    /// the server's clock: it cannot tell who leads.
    Unknown,
}

/// Who leads an elector key: `leader` is `None` when nobody does (the lock absent,
/// released or expired on the server's clock, a hand-over pending, or the observer
/// cannot tell: see `status`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct LeaderState {
    pub leader: Option<Leader>,
    /// When it was read, on the server's clock (the library's estimate of it).
    pub observed_at: Timestamp,
    /// Which of the cases above this is.
    pub status: LeaderStatus,
    /// When the lease ends unless renewed, on the server's clock: the leader's
    /// ([`Leads`](LeaderStatus::Leads)), the hand-over's
    /// ([`HandoverPending`](LeaderStatus::HandoverPending): a target that never takes it
    /// frees the lock then), the one that ended unseen ([`Unknown`](LeaderStatus::Unknown));
    /// `None` for [`NoLeader`](LeaderStatus::NoLeader). A leader is reported only while
    /// its lease surely runs on the observer's estimate.
    pub expires_at: Option<Timestamp>,
    /// The target of a pending hand-over, with the token it will lead with
    /// ([`HandoverPending`](LeaderStatus::HandoverPending) only).
    pub handover_to: Option<Leader>,
    /// The leader's payload ([`ElectorBuilder::payload`](crate::ElectorBuilder::payload)),
    /// JSON object text read with its term; `None` when it has none or nobody leads. A new
    /// payload of the same leader is reported as a change. [`LeaderState::payload_value`]
    /// parses it.
    pub payload: Option<String>,
}

impl LeaderState {
    /// The leader's payload as a JSON value (`None` when it has none).
    pub fn payload_value(&self) -> Option<serde_json::Value> {
        self.payload
            .as_deref()
            .and_then(|p| serde_json::from_str(p).ok())
    }
    /// Someone leads.
    pub fn has_leader(&self) -> bool {
        self.leader.is_some()
    }

    /// The leader's uuid, `None` when nobody leads.
    pub fn uuid(&self) -> Option<&str> {
        self.leader.as_ref().map(|l| l.uuid.as_str())
    }

    /// The leader's fencing token, `None` when nobody leads.
    pub fn fence(&self) -> Option<i64> {
        self.leader.as_ref().map(|l| l.fence)
    }

    /// # Safety
    /// `s` is a state filled by the library (version 2) whose strings are still valid.
    unsafe fn from_c(s: &sys::mongoelector_leader_state) -> LeaderState {
        let text = |p: *const c_char| CStr::from_ptr(p).to_string_lossy().into_owned();
        // `status` is an int field holding a mongoelector_leader_status.
        let status = match s.status as sys::mongoelector_leader_status {
            sys::MONGOELECTOR_LEADER_LEADS => LeaderStatus::Leads,
            sys::MONGOELECTOR_LEADER_PENDING => LeaderStatus::HandoverPending,
            sys::MONGOELECTOR_LEADER_UNKNOWN => LeaderStatus::Unknown,
            _ => LeaderStatus::NoLeader,
        };
        LeaderState {
            leader: (s.has_leader != 0).then(|| Leader {
                uuid: text(s.uuid),
                host: text(s.host),
                pid: s.pid,
                fence: s.fence,
            }),
            observed_at: Timestamp::from_millis(s.server_time_ms),
            status,
            expires_at: (s.expire_ms != 0).then(|| Timestamp::from_millis(s.expire_ms)),
            handover_to: (status == LeaderStatus::HandoverPending).then(|| Leader {
                uuid: text(s.handover_uuid),
                host: text(s.handover_host),
                pid: s.handover_pid,
                fence: s.handover_fence,
            }),
            payload: (s.version >= 3 && s.has_leader != 0 && !s.payload_json.is_null())
                .then(|| text(s.payload_json))
                .filter(|p| !p.is_empty()),
        }
    }
}

/// What user_data points to: the sending side of the observer's channel. Only the
/// observer's library thread uses it, and only until mongoelector_observer_free returns.
type Sink = Sender<LeaderState>;

unsafe extern "C" fn on_change_tramp(
    state: *const sys::mongoelector_leader_state,
    ud: *mut c_void,
) {
    // Nothing may unwind into C (a panicking allocator, say): drop the report instead.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let tx = &*(ud as *const Sink);
        // The receiver lives as long as the observer: a send cannot fail before free.
        let _ = tx.send(LeaderState::from_c(&*state));
    }));
}

/// Builds a [`LeaderObserver`]: `LeaderObserver::builder(&client, "key").interval(..).build()?`.
/// Unset options keep the library's defaults: a read every second, each bounded by
/// 1.5 s.
#[must_use = "a builder does nothing until build()"]
pub struct LeaderObserverBuilder<'a> {
    client: &'a Client,
    key: String,
    interval: Option<Duration>,
    op_timeout: Option<Duration>,
}

impl<'a> LeaderObserverBuilder<'a> {
    /// Time between two reads of the lock (default 1 s; at most 1e6 s).
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = Some(interval);
        self
    }

    /// Time bound of one read. `Duration::ZERO`: the default, 1.5 s.
    pub fn op_timeout(mut self, timeout: Duration) -> Self {
        self.op_timeout = Some(timeout);
        self
    }

    /// Starts observing: the library's thread reads the lock at once, then every
    /// interval (no round trip in this call).
    pub fn build(self) -> Result<LeaderObserver> {
        crate::log::sync()?;
        let ckey = cstring("key", &self.key)?;
        // SAFETY: all-zero is a valid value of the C struct; init writes every field.
        let mut c: sys::mongoelector_observer_config = unsafe { std::mem::zeroed() };
        check(unsafe {
            sys::mongoelector_observer_config_init(
                &mut c,
                sys::MONGOELECTOR_OBSERVER_CONFIG_VERSION,
            )
        })?;
        if let Some(i) = self.interval {
            c.interval_seconds = i.as_secs_f64();
        }
        if let Some(t) = self.op_timeout {
            c.op_timeout_seconds = t.as_secs_f64();
        }
        let (tx, rx) = mpsc::channel();
        let sink = Box::into_raw(Box::new(tx));
        let mut ptr = ptr::null_mut();
        let st = unsafe {
            sys::mongoelector_observer_new(
                self.client.inner.ptr,
                ckey.as_ptr(),
                &c,
                Some(on_change_tramp),
                sink as *mut c_void,
                &mut ptr,
            )
        };
        if let Err(e) = check(st) {
            drop(unsafe { Box::from_raw(sink) });
            return Err(e);
        }
        Ok(LeaderObserver {
            handle: RwLock::new(Some(Handle { ptr, sink })),
            rx: Mutex::new(rx),
            _client: self.client.inner.clone(),
        })
    }
}

struct Handle {
    ptr: *mut sys::mongoelector_observer,
    sink: *mut Sink,
}

impl Handle {
    /// Stops the observer's thread (no report after it returns), then drops the sender:
    /// receivers get what was sent, then the end of the stream.
    fn free(self) {
        unsafe {
            sys::mongoelector_observer_free(self.ptr);
            drop(Box::from_raw(self.sink));
        }
    }
}

// The C observer may be read from any thread while its own thread runs; the sender is
// used by that thread only (and dropped after it stopped).
unsafe impl Send for Handle {}
unsafe impl Sync for Handle {}

/// Watches an elector key from outside the election (any process, no elector needed)
/// and reports who leads it: the current state first, then every change of leader, a
/// state without leader included, so that a client never keeps talking to a leader that
/// is gone. The library reads the key's lock document once per interval on a thread of
/// its own and never writes.
///
/// The reports are a blocking stream: iterate the observer (`for state in &observer`,
/// or by value), or use [`recv`](Self::recv), [`recv_timeout`](Self::recv_timeout),
/// [`try_recv`](Self::try_recv). Nothing is lost while nobody reads: states queue up.
/// The stream ends after [`close`](Self::close) (from any thread: it unblocks a thread
/// iterating) or when the observer is dropped.
///
/// A change is a new [`status`](LeaderState::status) or a new (uuid, fence) (the
/// leader's, or a pending hand-over's target's): a
/// [`transfer`](crate::Elector::transfer) always shows; a leader that resigns and wins
/// again between two reads does not. After a transfer the observer reports
/// [`HandoverPending`](LeaderStatus::HandoverPending) (the target in `handover_to`) until
/// the target has taken the hand-over with its own renewal (its `is_leader` turns true
/// then, at its next look, about ttl/4), and only then the target as leader; a dead
/// target stays pending until the hand-over's expiry.
///
/// A leader is reported only while its lease surely runs (`expires_at` against the
/// latest the server's clock can read on the observer's estimate). A read that fails
/// (server unreachable) is logged and retried at the next interval; it reports nothing,
/// except [`Unknown`](LeaderStatus::Unknown), at the instant the lease last seen ends.
///
/// `Send + Sync`: share it through an `Arc` to close it from another thread.
pub struct LeaderObserver {
    handle: RwLock<Option<Handle>>, // None once closed
    rx: Mutex<Receiver<LeaderState>>,
    _client: Arc<ClientInner>,
}

impl LeaderObserver {
    /// A builder for an observer of the elector key `key`.
    pub fn builder<'a>(client: &'a Client, key: &str) -> LeaderObserverBuilder<'a> {
        LeaderObserverBuilder {
            client,
            key: key.to_owned(),
            interval: None,
            op_timeout: None,
        }
    }

    /// Observes `key` with the default options.
    pub fn new(client: &Client, key: &str) -> Result<LeaderObserver> {
        LeaderObserver::builder(client, key).build()
    }

    /// The state now (one round trip), whatever the stream reported: it neither reports
    /// to the stream nor changes what the next change is compared with. Never
    /// [`Unknown`](LeaderStatus::Unknown): a failed read is an error. Any thread.
    pub fn read(&self) -> Result<LeaderState> {
        let guard = self.handle.read().unwrap_or_else(|e| e.into_inner());
        let h = guard
            .as_ref()
            .ok_or_else(|| Error::invalid("the observer is closed"))?;
        // SAFETY: all-zero is a valid value; the library writes the fields of `version`.
        let mut s: sys::mongoelector_leader_state = unsafe { std::mem::zeroed() };
        s.version = sys::MONGOELECTOR_LEADER_STATE_VERSION;
        check(unsafe { sys::mongoelector_observer_read(h.ptr, &mut s) })?;
        // The strings live until the next read on this thread: copied now.
        Ok(unsafe { LeaderState::from_c(&s) })
    }

    /// The next state, blocking until there is one; `None` once the observer is closed
    /// and every state sent before was received.
    pub fn recv(&self) -> Option<LeaderState> {
        self.receiver().recv().ok()
    }

    /// The next state within `timeout`. `Err(Timeout)`: none yet;
    /// `Err(Disconnected)`: closed, and every state sent before was received.
    pub fn recv_timeout(
        &self,
        timeout: Duration,
    ) -> std::result::Result<LeaderState, RecvTimeoutError> {
        self.receiver().recv_timeout(timeout)
    }

    /// The next state if one is queued, without blocking.
    pub fn try_recv(&self) -> std::result::Result<LeaderState, TryRecvError> {
        self.receiver().try_recv()
    }

    /// A blocking iterator over the states (see [`recv`](Self::recv)).
    pub fn iter(&self) -> LeaderStates<'_> {
        LeaderStates { observer: self }
    }

    /// Stops the library's thread and frees it (waiting for a [`read`](Self::read) in
    /// progress); the stream ends once the states already sent are received, and
    /// [`read`](Self::read) answers `InvalidArgument`. Idempotent; any thread. Dropping
    /// the observer closes it.
    pub fn close(&self) {
        let h = self
            .handle
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(h) = h {
            h.free();
        }
    }

    /// One consumer at a time: another thread's recv waits for this one.
    fn receiver(&self) -> std::sync::MutexGuard<'_, Receiver<LeaderState>> {
        self.rx.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for LeaderObserver {
    fn drop(&mut self) {
        self.close();
    }
}

impl fmt::Debug for LeaderObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderObserver").finish_non_exhaustive()
    }
}

/// The blocking iterator of [`LeaderObserver::iter`]: ends when the observer is closed.
#[derive(Debug)]
pub struct LeaderStates<'a> {
    observer: &'a LeaderObserver,
}

impl Iterator for LeaderStates<'_> {
    type Item = LeaderState;
    fn next(&mut self) -> Option<LeaderState> {
        self.observer.recv()
    }
}

impl<'a> IntoIterator for &'a LeaderObserver {
    type Item = LeaderState;
    type IntoIter = LeaderStates<'a>;
    fn into_iter(self) -> LeaderStates<'a> {
        self.iter()
    }
}

/// Iterating by value: the observer is freed when the iterator is dropped.
impl Iterator for LeaderObserver {
    type Item = LeaderState;
    fn next(&mut self) -> Option<LeaderState> {
        self.recv()
    }
}
