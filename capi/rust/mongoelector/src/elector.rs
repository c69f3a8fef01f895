use crate::client::{Client, ClientInner};
use crate::error::{check, cstring, Error, Result};
use crate::status::{ClusterDetail, NodeStatus};
use mongoelector_sys as sys;
use std::ffi::CStr;
use std::fmt;
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};
use std::time::Duration;

type Callback = Box<dyn FnMut() + Send + 'static>;

/// One callback. FnMut needs exclusive access, yet C may call it from the elector thread
/// and from a thread in poll() at once: the mutex serialises them. A callback that
/// re-enters its own slot on the same thread (on_loop calling poll()) is skipped rather
/// than deadlocking.
struct Slot {
    name: &'static str,
    f: Mutex<Option<Callback>>,
    owner: Mutex<Option<ThreadId>>,
}

impl Slot {
    fn new(name: &'static str, f: Option<Callback>) -> Slot {
        Slot {
            name,
            f: Mutex::new(f),
            owner: Mutex::new(None),
        }
    }

    fn call(&self) {
        let me = thread::current().id();
        if *self.owner.lock().unwrap_or_else(|e| e.into_inner()) == Some(me) {
            ::log::error!(
                target: crate::LOG_TARGET,
                "{} re-entered itself on one thread: nested call skipped",
                self.name
            );
            return;
        }
        let mut f = self.f.lock().unwrap_or_else(|e| e.into_inner());
        *self.owner.lock().unwrap_or_else(|e| e.into_inner()) = Some(me);
        if let Some(f) = f.as_mut() {
            call_user(self.name, f);
        }
        *self.owner.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Runs a user callback on a library thread. A panic must not unwind into C: it is
/// reported like the library reports exceptions thrown by callbacks, and the library goes
/// on.
pub(crate) fn call_user(name: &str, f: impl FnOnce()) {
    if let Err(p) = catch_unwind(AssertUnwindSafe(f)) {
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(non-string panic)".into());
        ::log::error!(target: crate::LOG_TARGET, "{name} callback panicked: {msg}");
    }
}

/// What user_data points to. Freed when both the Elector is dropped (after
/// mongoelector_elector_free returned) and no trampoline is running: see `ORPHANED`.
struct Callbacks {
    on_leader: Slot,
    on_leader_loss: Slot,
    on_loop: Slot,
    state: AtomicUsize,
}

/// `Callbacks::state`: the number of trampolines running, plus ORPHANED once the Elector
/// dropped it. Whoever brings it to exactly ORPHANED (Drop with none running, or the
/// last trampoline to return after Drop) frees the Callbacks. Since 1.1 the C elector
/// may be freed from one of its own callbacks: mongoelector_elector_free then returns at
/// once and no callback starts after it, but the one running (this very trampoline, or
/// one on a library callback thread) still uses its closure.
const ORPHANED: usize = 1 << (usize::BITS - 1);

unsafe fn free_callbacks(p: *const Callbacks) {
    drop(Box::from_raw(p as *mut Callbacks));
}

unsafe fn trampoline(user_data: *mut c_void, pick: fn(&Callbacks) -> &Slot) {
    let cbs = user_data as *const Callbacks;
    (*cbs).state.fetch_add(1, Ordering::SeqCst);
    // Nothing may unwind into C: Slot::call catches the closure's panic, this one what
    // is left (a panicking logger).
    let _ = catch_unwind(AssertUnwindSafe(|| pick(&*cbs).call()));
    if (*cbs).state.fetch_sub(1, Ordering::SeqCst) == ORPHANED | 1 {
        // The Elector was dropped while this callback ran (from inside it, typically).
        let _ = catch_unwind(AssertUnwindSafe(|| free_callbacks(cbs)));
    }
}

unsafe extern "C" fn on_leader_tramp(ud: *mut c_void) {
    trampoline(ud, |c| &c.on_leader)
}
unsafe extern "C" fn on_leader_loss_tramp(ud: *mut c_void) {
    trampoline(ud, |c| &c.on_leader_loss)
}
unsafe extern "C" fn on_loop_tramp(ud: *mut c_void) {
    trampoline(ud, |c| &c.on_loop)
}

/// Builds an [`Elector`]: `Elector::builder(&client, "key").ttl(..).on_leader(..).build()?`.
/// Every option left unset keeps the library's default (from
/// `mongoelector_elector_config_init`, the same for every binding): ttl 15 s,
/// report_status on, delete_on_release ON, per-call timeout as for lockers.
#[must_use = "a builder does nothing until build()"]
pub struct ElectorBuilder<'a> {
    client: &'a Client,
    key: String,
    ttl: Option<Duration>,
    report_status: Option<bool>,
    app_version: Option<String>,
    delete_on_release: Option<bool>,
    op_timeout: Option<Duration>,
    handover_poll: Option<Option<Duration>>,
    payload: Option<String>,
    priority: Option<f64>,
    priority_stability: Option<Duration>,
    on_leader: Option<Callback>,
    on_leader_loss: Option<Callback>,
    on_loop: Option<Callback>,
}

impl<'a> ElectorBuilder<'a> {
    /// The leader's lease (default 15 s): failover after a leader crash takes about this.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }
    /// Write this node's status document, read by [`Elector::cluster_detail`] (default
    /// true).
    pub fn report_status(mut self, on: bool) -> Self {
        self.report_status = Some(on);
        self
    }
    /// Reported in the status document.
    pub fn app_version(mut self, v: &str) -> Self {
        self.app_version = Some(v.to_owned());
        self
    }
    /// A leader that stops deletes its lock document, so that nodes of the original
    /// mongoelector take over at once during a rolling upgrade (default TRUE for
    /// electors; the next leader pays two extra round trips).
    pub fn delete_on_release(mut self, on: bool) -> Self {
        self.delete_on_release = Some(on);
        self
    }
    /// Time bound of one round trip, at most ttl/2. `Duration::ZERO`: the default,
    /// ttl/10 clamped to [0.1 s, 5 s].
    pub fn op_timeout(mut self, timeout: Duration) -> Self {
        self.op_timeout = Some(timeout);
        self
    }
    /// While another node leads, this follower reads the lock document every
    /// `Some(interval)` (one read, no write), so that a [`Elector::resign`] or
    /// [`Elector::transfer`] elsewhere is noticed within about that; `None` (or zero)
    /// turns the reads off: a follower then wakes only when the leader's lease can expire
    /// (about a ttl after a hand-over). Default: ttl/4.
    pub fn handover_poll(mut self, interval: Option<Duration>) -> Self {
        self.handover_poll = Some(interval);
        self
    }
    /// The leader payload: a JSON object (an endpoint, a version, ...) published with
    /// every term this node leads, at most 16 KiB encoded. Observers
    /// ([`LeaderState::payload`](crate::LeaderState::payload)), the cluster detail and
    /// `mongoelector status` show it; the claim that starts a term writes it, so a new
    /// term never shows the previous leader's payload. `build()` fails with
    /// InvalidArgument when it is not an object. See [`Elector::set_payload`].
    pub fn payload(mut self, payload: &serde_json::Value) -> Self {
        self.payload = Some(payload.to_string());
        self
    }
    /// Priority leaders (off by default; docs/handover.md): this node publishes
    /// `priority` in its status report and, while leading, hands leadership over (as
    /// [`Elector::transfer`]) to the running member of highest priority strictly above
    /// its own, once that member has been seen live at every poll for
    /// [`priority_stability`](Self::priority_stability). A tie never moves leadership;
    /// members without a priority are never chosen. Needs the status report. `build()`
    /// fails with InvalidArgument, naming the field, when it is not finite.
    pub fn priority(mut self, priority: f64) -> Self {
        self.priority = Some(priority);
        self
    }
    /// The delay of [`priority`](Self::priority) (default: one ttl), counted while THIS
    /// node leads: give every member the same. Used only with a priority; `build()` fails
    /// with InvalidArgument, naming the field, above 1e9 s.
    pub fn priority_stability(mut self, delay: Duration) -> Self {
        self.priority_stability = Some(delay);
        self
    }
    /// Runs when this node becomes leader, on the elector's thread (or the thread in
    /// poll/release/stop). It may call stop()/release() on the elector, and may drop the
    /// last reference to it (capture a `Weak<Elector>` to reach it: an `Arc` would keep
    /// the elector alive forever).
    pub fn on_leader(mut self, f: impl FnMut() + Send + 'static) -> Self {
        self.on_leader = Some(Box::new(f));
        self
    }
    /// Runs when leadership ends: on a release or stop, or at a missed renew deadline on
    /// a library callback thread (keep it short).
    pub fn on_leader_loss(mut self, f: impl FnMut() + Send + 'static) -> Self {
        self.on_leader_loss = Some(Box::new(f));
        self
    }
    /// After each poll.
    pub fn on_loop(mut self, f: impl FnMut() + Send + 'static) -> Self {
        self.on_loop = Some(Box::new(f));
        self
    }

    /// Creates the elector (it does not poll until [`Elector::start`] or
    /// [`Elector::poll`]).
    pub fn build(self) -> Result<Elector> {
        crate::log::sync()?;
        let ckey = cstring("key", &self.key)?;
        let cver = self
            .app_version
            .as_deref()
            .map(|v| cstring("app version", v))
            .transpose()?;
        let cpayload = self
            .payload
            .as_deref()
            .map(|p| cstring("payload", p))
            .transpose()?;
        // SAFETY: all-zero is a valid value of the C struct; init writes every field.
        let mut c: sys::mongoelector_elector_config = unsafe { std::mem::zeroed() };
        check(unsafe {
            sys::mongoelector_elector_config_init(&mut c, sys::MONGOELECTOR_ELECTOR_CONFIG_VERSION)
        })?;
        if let Some(t) = self.ttl {
            c.ttl_seconds = t.as_secs_f64();
        }
        if let Some(on) = self.report_status {
            c.report_status = on as c_int;
        }
        c.app_version = cver.as_ref().map_or(ptr::null(), |v| v.as_ptr());
        if let Some(on) = self.delete_on_release {
            c.delete_on_release = on as c_int;
        }
        if let Some(t) = self.op_timeout {
            c.op_timeout_seconds = t.as_secs_f64();
        }
        if let Some(p) = self.handover_poll {
            c.handover_poll_seconds = p.map_or(0.0, |d| d.as_secs_f64());
        }
        c.payload_json = cpayload.as_ref().map_or(ptr::null(), |p| p.as_ptr());
        if let Some(p) = self.priority {
            // The library refuses NaN, infinities and a stability out of range by name.
            c.has_priority = 1;
            c.priority = p;
            if let Some(d) = self.priority_stability {
                c.priority_stability_seconds = d.as_secs_f64();
            }
        }
        let tramp = |set: bool, f: unsafe extern "C" fn(*mut c_void)| set.then_some(f);
        c.on_leader = tramp(self.on_leader.is_some(), on_leader_tramp);
        c.on_leader_loss = tramp(self.on_leader_loss.is_some(), on_leader_loss_tramp);
        c.on_loop = tramp(self.on_loop.is_some(), on_loop_tramp);
        let cbs = Box::into_raw(Box::new(Callbacks {
            on_leader: Slot::new("on_leader", self.on_leader),
            on_leader_loss: Slot::new("on_leader_loss", self.on_leader_loss),
            on_loop: Slot::new("on_loop", self.on_loop),
            state: AtomicUsize::new(0),
        }));
        c.user_data = cbs as *mut c_void;
        let mut ptr = ptr::null_mut();
        let st = unsafe {
            sys::mongoelector_elector_new_with(self.client.inner.ptr, ckey.as_ptr(), &c, &mut ptr)
        };
        if let Err(e) = check(st) {
            unsafe { free_callbacks(cbs) };
            return Err(e);
        }
        Ok(Elector {
            ptr,
            cbs,
            _client: self.client.inner.clone(),
        })
    }
}

/// A leader election on one key. `Send + Sync`. Dropping it stops the loop (releasing
/// leadership; on_leader_loss fires if it led), frees it, then drops the closures.
/// Dropping it from inside one of its own callbacks is allowed: the drop returns at once,
/// no callback starts after it, and the library stops the elector and releases
/// leadership on another thread shortly after; the closures are dropped when the
/// running callback returns.
pub struct Elector {
    ptr: *mut sys::mongoelector_elector,
    cbs: *mut Callbacks,
    _client: Arc<ClientInner>,
}

// The C elector is internally synchronised (its callbacks may even call stop/release
// from the loop thread); the closures are `Send` and serialised by their Slot mutexes.
unsafe impl Send for Elector {}
unsafe impl Sync for Elector {}

impl Drop for Elector {
    fn drop(&mut self) {
        unsafe {
            // From any thread it returns with no callback of this elector running, except
            // when called from inside one (then it returns at once, see Callbacks::state).
            sys::mongoelector_elector_free(self.ptr);
            if (*self.cbs).state.fetch_or(ORPHANED, Ordering::SeqCst) == 0 {
                free_callbacks(self.cbs);
            }
        }
    }
}

impl fmt::Debug for Elector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Elector").finish_non_exhaustive()
    }
}

impl Elector {
    /// A builder for an elector on `key` (collections "elector.locks" and
    /// "elector.leader_status").
    pub fn builder<'a>(client: &'a Client, key: &str) -> ElectorBuilder<'a> {
        ElectorBuilder {
            client,
            key: key.to_owned(),
            ttl: None,
            report_status: None,
            app_version: None,
            delete_on_release: None,
            op_timeout: None,
            handover_poll: None,
            payload: None,
            priority: None,
            priority_stability: None,
            on_leader: None,
            on_leader_loss: None,
            on_loop: None,
        }
    }

    /// Starts the election loop on a new native thread (no-op if running).
    pub fn start(&self) -> Result<()> {
        check(unsafe { sys::mongoelector_elector_start(self.ptr) })
    }
    /// Ends the loop, waits for its thread (unless called from a callback), releases
    /// leadership.
    pub fn stop(&self) -> Result<()> {
        check(unsafe { sys::mongoelector_elector_stop(self.ptr) })
    }
    /// One poll cycle on the calling thread (callbacks run on it).
    pub fn poll(&self) -> Result<()> {
        check(unsafe { sys::mongoelector_elector_poll(self.ptr) })
    }
    /// Gives up leadership now (on_leader_loss fires if it led).
    pub fn release(&self) -> Result<()> {
        check(unsafe { sys::mongoelector_elector_release(self.ptr) })
    }

    /// Gives up leadership now (fenced; `on_leader_loss` runs and returns before the
    /// release is sent) and keeps the loop running, but does not stand again for
    /// `hold_off` (None: the ttl), so another member takes over in about ttl/4.
    pub fn resign(&self, hold_off: Option<std::time::Duration>) -> Result<()> {
        let secs = hold_off.map_or(-1.0, |d| d.as_secs_f64());
        check(unsafe { sys::mongoelector_elector_resign(self.ptr, secs) })
    }
    /// Hands leadership to the member with uuid `to_uuid`; it takes over at its next
    /// peek (about ttl/4) with one renewal of its own. InvalidArgument unless this node
    /// leads and `to_uuid` is a member.
    pub fn transfer(&self, to_uuid: &str) -> Result<()> {
        let c = cstring("to_uuid", to_uuid)?;
        check(unsafe { sys::mongoelector_elector_transfer(self.ptr, c.as_ptr()) })
    }

    /// Replaces the payload this node publishes with its terms (`None`: none). While
    /// leading, one write that names this term (uuid and fence) with a version above
    /// every earlier one: `Ok(true)` once applied; a write that lands late changes this
    /// term's payload only, never back to an older one. Not leading: kept for the next
    /// claim, `Ok(false)`. InvalidArgument when it is not a JSON object or above 16 KiB
    /// encoded; a storage error when the write failed (the loop writes it again at its
    /// next poll while it leads).
    pub fn set_payload(&self, payload: Option<&serde_json::Value>) -> Result<bool> {
        let c = payload
            .map(|p| cstring("payload", &p.to_string()))
            .transpose()?;
        let mut written: c_int = 0;
        check(unsafe {
            sys::mongoelector_elector_set_payload(
                self.ptr,
                c.as_ref().map_or(ptr::null(), |p| p.as_ptr()),
                &mut written,
            )
        })?;
        Ok(written != 0)
    }

    fn flag(
        &self,
        f: unsafe extern "C" fn(
            *mut sys::mongoelector_elector,
            *mut c_int,
        ) -> sys::mongoelector_status,
    ) -> Result<bool> {
        let mut out: c_int = 0;
        check(unsafe { f(self.ptr, &mut out) })?;
        Ok(out != 0)
    }

    /// Leader now: false the moment the renew deadline passes, even if a renewal hangs.
    pub fn is_leader(&self) -> Result<bool> {
        self.flag(sys::mongoelector_elector_is_leader)
    }
    pub fn leader_exists(&self) -> Result<bool> {
        self.flag(sys::mongoelector_elector_leader_exists)
    }
    pub fn running(&self) -> Result<bool> {
        self.flag(sys::mongoelector_elector_running)
    }

    /// Longest time between polls: ttl/2 as leader, ttl as follower.
    pub fn poll_wait(&self) -> Result<Duration> {
        let mut s = 0f64;
        check(unsafe { sys::mongoelector_elector_poll_wait(self.ptr, &mut s) })?;
        Duration::try_from_secs_f64(s).map_err(|e| Error::internal(format!("poll wait {s}: {e}")))
    }

    /// Fencing token of the current leadership, 0 when not leader.
    pub fn fence(&self) -> Result<i64> {
        let mut f = 0i64;
        check(unsafe { sys::mongoelector_elector_fence(self.ptr, &mut f) })?;
        Ok(f)
    }

    pub fn uuid(&self) -> Result<String> {
        let mut s = ptr::null();
        check(unsafe { sys::mongoelector_elector_uuid(self.ptr, &mut s) })?;
        Ok(unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
    }

    fn json(
        &self,
        f: unsafe extern "C" fn(
            *mut sys::mongoelector_elector,
            *mut *mut c_char,
        ) -> sys::mongoelector_status,
    ) -> Result<String> {
        let mut s: *mut c_char = ptr::null_mut();
        check(unsafe { f(self.ptr, &mut s) })?;
        Ok(unsafe { crate::locker::take_c_string(s) })
    }

    /// This node's status (local state, no round trip).
    pub fn node_status(&self) -> Result<NodeStatus> {
        crate::status::parse_node_status(&self.node_status_json()?)
    }

    /// Every node's last reported status, the leader, and the server time (one round
    /// trip).
    pub fn cluster_detail(&self) -> Result<ClusterDetail> {
        crate::status::parse_cluster_detail(&self.cluster_detail_json()?)
    }

    /// [`Elector::node_status`] as the library's JSON (MongoDB relaxed Extended JSON v2:
    /// dates as `{"$date": "2026-11-23T17:38:28.123Z"}`).
    pub fn node_status_json(&self) -> Result<String> {
        self.json(sys::mongoelector_elector_node_status)
    }

    /// [`Elector::cluster_detail`] as the library's JSON: `{"member_detail": [...],
    /// "leader": {"host", "process_id", "uuid"} | null, "timestamp"}`.
    pub fn cluster_detail_json(&self) -> Result<String> {
        self.json(sys::mongoelector_elector_cluster_detail)
    }
}
