use crate::client::{Client, ClientInner};
use crate::error::{check, cstring, Error, Result};
use mongoelector_sys as sys;
use std::cell::RefCell;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
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

    fn is_set(&self) -> bool {
        self.f.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    fn call(&self) {
        let me = thread::current().id();
        if *self.owner.lock().unwrap_or_else(|e| e.into_inner()) == Some(me) {
            eprintln!(
                "mongoelector: {} re-entered itself on one thread: nested call skipped",
                self.name
            );
            return;
        }
        let mut f = self.f.lock().unwrap_or_else(|e| e.into_inner());
        *self.owner.lock().unwrap_or_else(|e| e.into_inner()) = Some(me);
        if let Some(f) = f.as_mut() {
            // A panic must not unwind into C: report it like the library reports
            // exceptions thrown by callbacks, and go on.
            if let Err(p) = catch_unwind(AssertUnwindSafe(f)) {
                let msg = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "(non-string panic)".into());
                eprintln!("mongoelector: {} callback panicked: {msg}", self.name);
            }
        }
        *self.owner.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// What user_data points to: owned by the Elector, freed after the C elector.
struct Callbacks {
    on_leader: Slot,
    on_leader_loss: Slot,
    on_loop: Slot,
}

thread_local! {
    // Callbacks running on this thread (addresses of their Callbacks), so that Drop can
    // tell it is being run from inside one of its own callbacks.
    static ACTIVE: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

unsafe fn trampoline(user_data: *mut c_void, pick: fn(&Callbacks) -> &Slot) {
    let cbs = &*(user_data as *const Callbacks);
    ACTIVE.with(|a| a.borrow_mut().push(user_data as usize));
    // Nothing may unwind into C: Slot::call catches the closure's panic, this one what
    // is left (eprintln! panics when stderr cannot be written).
    let _ = catch_unwind(AssertUnwindSafe(|| pick(cbs).call()));
    ACTIVE.with(|a| {
        a.borrow_mut().pop();
    });
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

/// Builds an [`Elector`]: `Elector::builder(&client, "key").ttl(..).on_leader(..).build()`.
pub struct ElectorBuilder<'a> {
    client: &'a Client,
    key: String,
    ttl: Option<Duration>,
    report_status: bool,
    app_version: Option<String>,
    allow_unsafe_server: bool,
    on_leader: Option<Callback>,
    on_leader_loss: Option<Callback>,
    on_loop: Option<Callback>,
}

impl<'a> ElectorBuilder<'a> {
    /// The leader's lease (default 15 s).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }
    /// Write this node's status document (default true).
    pub fn report_status(mut self, on: bool) -> Self {
        self.report_status = on;
        self
    }
    pub fn app_version(mut self, v: &str) -> Self {
        self.app_version = Some(v.to_owned());
        self
    }
    /// Run on servers with non-atomic findAndModify such as FerretDB.
    pub fn allow_unsafe_server(mut self, on: bool) -> Self {
        self.allow_unsafe_server = on;
        self
    }
    /// Runs when this node becomes leader, on the elector's thread (or the thread in
    /// poll/release/stop). It may call stop()/release() on the elector (capture a
    /// `Weak<Elector>` to reach it: an `Arc` would keep the elector alive forever).
    pub fn on_leader(mut self, f: impl FnMut() + Send + 'static) -> Self {
        self.on_leader = Some(Box::new(f));
        self
    }
    pub fn on_leader_loss(mut self, f: impl FnMut() + Send + 'static) -> Self {
        self.on_leader_loss = Some(Box::new(f));
        self
    }
    /// After each poll.
    pub fn on_loop(mut self, f: impl FnMut() + Send + 'static) -> Self {
        self.on_loop = Some(Box::new(f));
        self
    }

    pub fn build(self) -> Result<Elector> {
        let ckey = cstring("key", &self.key)?;
        let cver = self
            .app_version
            .as_deref()
            .map(|v| cstring("app version", v))
            .transpose()?;
        let cbs = Box::new(Callbacks {
            on_leader: Slot::new("on_leader", self.on_leader),
            on_leader_loss: Slot::new("on_leader_loss", self.on_leader_loss),
            on_loop: Slot::new("on_loop", self.on_loop),
        });
        let mut o = std::mem::MaybeUninit::<sys::mongoelector_elector_options>::zeroed();
        let mut o = unsafe {
            sys::mongoelector_elector_options_init(o.as_mut_ptr());
            o.assume_init()
        };
        if let Some(t) = self.ttl {
            o.ttl_seconds = t.as_secs_f64();
        }
        o.report_status = self.report_status as c_int;
        o.app_version = cver.as_ref().map_or(ptr::null(), |v| v.as_ptr());
        o.allow_unsafe_server = self.allow_unsafe_server as c_int;
        o.on_leader = cbs
            .on_leader
            .is_set()
            .then_some(on_leader_tramp as unsafe extern "C" fn(*mut c_void));
        o.on_leader_loss = cbs
            .on_leader_loss
            .is_set()
            .then_some(on_leader_loss_tramp as unsafe extern "C" fn(*mut c_void));
        o.on_loop = cbs
            .on_loop
            .is_set()
            .then_some(on_loop_tramp as unsafe extern "C" fn(*mut c_void));
        let cbs = Box::into_raw(cbs);
        o.user_data = cbs as *mut c_void;
        let mut ptr = ptr::null_mut();
        let st = unsafe {
            sys::mongoelector_elector_new(self.client.inner.ptr, ckey.as_ptr(), &o, &mut ptr)
        };
        if let Err(e) = check(st) {
            drop(unsafe { Box::from_raw(cbs) });
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
pub struct Elector {
    ptr: *mut sys::mongoelector_elector,
    cbs: *mut Callbacks,
    _client: Arc<ClientInner>,
}

// The C elector is internally synchronised (its callbacks may even call stop/release
// from the loop thread); the closures are `Send` and serialised by their Slot mutexes.
unsafe impl Send for Elector {}
unsafe impl Sync for Elector {}

struct Owned(
    *mut sys::mongoelector_elector,
    *mut Callbacks,
    Arc<ClientInner>,
);
unsafe impl Send for Owned {}

impl Owned {
    fn free(self) {
        unsafe {
            sys::mongoelector_elector_free(self.0);
            // No callback can run any more: the closures may go.
            drop(Box::from_raw(self.1));
        }
        drop(self.2);
    }
}

impl Drop for Elector {
    fn drop(&mut self) {
        let owned = Owned(self.ptr, self.cbs, self._client.clone());
        let inside_own_callback = ACTIVE.with(|a| a.borrow().contains(&(self.cbs as usize)));
        if inside_own_callback {
            // C forbids freeing an elector from its own callback (the free would join the
            // thread running it). Free it from another thread once the callback returns.
            thread::spawn(move || owned.free());
        } else {
            owned.free();
        }
    }
}

impl Elector {
    pub fn builder<'a>(client: &'a Client, key: &str) -> ElectorBuilder<'a> {
        ElectorBuilder {
            client,
            key: key.to_owned(),
            ttl: None,
            report_status: true,
            app_version: None,
            allow_unsafe_server: false,
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
        Duration::try_from_secs_f64(s).map_err(|e| Error::Internal(format!("poll wait {s}: {e}")))
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
    ) -> Result<serde_json::Value> {
        let mut s: *mut c_char = ptr::null_mut();
        check(unsafe { f(self.ptr, &mut s) })?;
        let text = unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned();
        unsafe { sys::mongoelector_free(s as *mut c_void) };
        serde_json::from_str(&text)
            .map_err(|e| Error::Internal(format!("library returned invalid JSON: {e}")))
    }

    /// This node's status document (relaxed Extended JSON: dates as `{"$date": "ISO-8601"}`).
    /// No round trip.
    pub fn node_status(&self) -> Result<serde_json::Value> {
        self.json(sys::mongoelector_elector_node_status)
    }

    /// {member_detail: [...], leader: {...} | null, timestamp}. One round trip.
    pub fn cluster_detail(&self) -> Result<serde_json::Value> {
        self.json(sys::mongoelector_elector_cluster_detail)
    }
}
