//! The fenced partitioner: a group's partitions shared by its live members, each owned
//! through a keep-alive lease with its own fencing token.
use crate::client::{Client, ClientInner};
use crate::elector::call_user;
use crate::error::{check, cstring, Error, Result};
use crate::locker::take_c_string;
use crate::status::Timestamp;
use mongoelector_sys as sys;
#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::{c_char, c_int, c_void};
use std::ptr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The most partitions a group may have.
pub const MAX_PARTITIONS: i64 = sys::MONGOELECTOR_PARTITIONS_MAX as i64;

type Assigned = Box<dyn FnMut(i64, i64) + Send + 'static>;
type Revoked = Box<dyn FnMut(i64) + Send + 'static>;

/// What user_data points to: an `Arc` handed to C with `Arc::into_raw`. Each trampoline
/// holds a reference while it runs, so a partitioner dropped from its own callback (the C
/// free then returns at once and no callback starts after it) frees the closures only
/// once that callback has returned.
struct Callbacks {
    on_assigned: Mutex<Option<Assigned>>,
    on_revoked: Mutex<Option<Revoked>>,
}

/// # Safety
/// `ud` is the pointer of a live `Arc<Callbacks>` (the partitioner's reference is given
/// up only after the C free, which waits for callbacks on other threads).
unsafe fn callbacks(ud: *mut c_void) -> Arc<Callbacks> {
    let p = ud as *const Callbacks;
    Arc::increment_strong_count(p);
    Arc::from_raw(p)
}

unsafe extern "C" fn on_assigned_tramp(partition: i64, token: i64, ud: *mut c_void) {
    let cbs = callbacks(ud);
    // The C library runs one callback at a time per partitioner: the lock never waits.
    let mut f = cbs.on_assigned.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(f) = f.as_mut() {
        call_user("on_assigned", || f(partition, token));
    }
}

unsafe extern "C" fn on_revoked_tramp(partition: i64, ud: *mut c_void) {
    let cbs = callbacks(ud);
    let mut f = cbs.on_revoked.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(f) = f.as_mut() {
        call_user("on_revoked", || f(partition));
    }
}

/// Builds a [`Partitioner`]: `Partitioner::builder(&client, "ingest", 32).on_assigned(..)
/// .on_revoked(..).build()?`. Every option left unset keeps the library's default (from
/// `mongoelector_partitioner_config_init`, the same for every binding): ttl 15 s, poll
/// ttl/3, collections "partitioner.locks" and "partitioner.members", per-call timeout
/// ttl/10 clamped to [0.1 s, 5 s].
#[must_use = "a builder does nothing until build()"]
pub struct PartitionerBuilder<'a> {
    client: &'a Client,
    group: String,
    partitions: i64,
    ttl: Option<Duration>,
    poll: Option<Duration>,
    locks_collection: Option<String>,
    members_collection: Option<String>,
    op_timeout: Option<Duration>,
    on_assigned: Option<Assigned>,
    on_revoked: Option<Revoked>,
}

impl<'a> PartitionerBuilder<'a> {
    /// How long a lease (and a member's report) lives unrenewed (default 15 s): a dead
    /// member's partitions move about this long after its death.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }
    /// Time between the member's looks at the group (default ttl/3, at most ttl/2).
    pub fn poll(mut self, poll: Duration) -> Self {
        self.poll = Some(poll);
        self
    }
    /// Collection of the partitions' locks (default "partitioner.locks"; the fencing
    /// epochs live in `"<collection>.fences"`).
    pub fn locks_collection(mut self, name: &str) -> Self {
        self.locks_collection = Some(name.to_owned());
        self
    }
    /// Collection of the members' reports (default "partitioner.members").
    pub fn members_collection(mut self, name: &str) -> Self {
        self.members_collection = Some(name.to_owned());
        self
    }
    /// Time bound of one round trip; at most ttl/2. `Duration::ZERO`: the default.
    pub fn op_timeout(mut self, timeout: Duration) -> Self {
        self.op_timeout = Some(timeout);
        self
    }
    /// Called when this member starts owning a partition, with the partition's fencing
    /// token (strictly increasing per partition across owners).
    pub fn on_assigned(mut self, f: impl FnMut(i64, i64) + Send + 'static) -> Self {
        self.on_assigned = Some(Box::new(f));
        self
    }
    /// Called when this member stops owning a partition. On a graceful move the
    /// partition is released only once it has returned, so the next owner's
    /// `on_assigned` comes after it.
    pub fn on_revoked(mut self, f: impl FnMut(i64) + Send + 'static) -> Self {
        self.on_revoked = Some(Box::new(f));
        self
    }

    /// Creates the member (making the collections' indexes: round trips on MongoDB); it
    /// joins at [`Partitioner::start`]. `Error::InvalidArgument`, naming the option, for
    /// partitions outside 1..=MAX_PARTITIONS, a ttl, poll or collection that cannot be
    /// used.
    pub fn build(self) -> Result<Partitioner> {
        crate::log::sync()?;
        let cgroup = cstring("group", &self.group)?;
        // SAFETY: all-zero is a valid value of the C struct; init writes every field.
        let mut c: sys::mongoelector_partitioner_config = unsafe { std::mem::zeroed() };
        check(unsafe {
            sys::mongoelector_partitioner_config_init(
                &mut c,
                sys::MONGOELECTOR_PARTITIONER_CONFIG_VERSION,
            )
        })?;
        c.partitions = self.partitions;
        if let Some(t) = self.ttl {
            c.ttl_seconds = t.as_secs_f64();
        }
        if let Some(p) = self.poll {
            c.poll_seconds = p.as_secs_f64();
        }
        if let Some(t) = self.op_timeout {
            c.op_timeout_seconds = t.as_secs_f64();
        }
        let coll = |what, v: &Option<String>| v.as_deref().map(|s| cstring(what, s)).transpose();
        let locks: Option<CString> = coll("locks collection", &self.locks_collection)?;
        let members: Option<CString> = coll("members collection", &self.members_collection)?;
        c.locks_collection = locks.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        c.members_collection = members.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        if self.on_assigned.is_some() {
            c.on_assigned = Some(on_assigned_tramp);
        }
        if self.on_revoked.is_some() {
            c.on_revoked = Some(on_revoked_tramp);
        }
        let cbs = Arc::into_raw(Arc::new(Callbacks {
            on_assigned: Mutex::new(self.on_assigned),
            on_revoked: Mutex::new(self.on_revoked),
        }));
        c.user_data = cbs as *mut c_void;
        let mut ptr = ptr::null_mut();
        let st = unsafe {
            sys::mongoelector_partitioner_new(self.client.inner.ptr, cgroup.as_ptr(), &c, &mut ptr)
        };
        if let Err(e) = check(st) {
            // SAFETY: C refused it: no callback can run, the reference is ours again.
            drop(unsafe { Arc::from_raw(cbs) });
            return Err(e);
        }
        let mut uuid: *const c_char = ptr::null();
        check(unsafe { sys::mongoelector_partitioner_uuid(ptr, &mut uuid) })?;
        let uuid = unsafe { CStr::from_ptr(uuid) }
            .to_string_lossy()
            .into_owned();
        Ok(Partitioner {
            ptr,
            cbs,
            _client: self.client.inner.clone(),
            group: self.group,
            partitions: self.partitions,
            uuid,
        })
    }
}

/// A member of a partitioned group. The group's partitions are shared by its live
/// members (rendezvous hashing), each owned through a keep-alive lease on the
/// partition's lock with its own fencing token. When a member joins, leaves or dies only
/// the partitions concerned move: a graceful move runs the old owner's `on_revoked` to
/// completion before the new owner's `on_assigned`; a dead member's partitions move
/// when their leases expire (about one ttl).
///
/// The callbacks run on library threads, one at a time per partitioner; per partition
/// always `on_assigned`, then `on_revoked`. A partition whose lease is lost (the member
/// cut off from the database past its renew deadline) is revoked too, but another member
/// may take it while that `on_revoked` still runs: fence the writes with the token. A
/// panicking callback is caught and logged, never unwinds into C.
///
/// Dropped: leaves the group (`on_revoked` runs for what it holds, each partition is
/// released once it has returned) and frees the closures; from inside one of its own
/// callbacks the leave happens on a library thread once the callback has returned.
pub struct Partitioner {
    ptr: *mut sys::mongoelector_partitioner,
    cbs: *const Callbacks,
    _client: Arc<ClientInner>,
    group: String,
    partitions: i64,
    uuid: String,
}

// SAFETY: the C partitioner is thread-safe; the closures are Send and called one at a
// time by the library.
unsafe impl Send for Partitioner {}
unsafe impl Sync for Partitioner {}

impl Drop for Partitioner {
    fn drop(&mut self) {
        unsafe {
            sys::mongoelector_partitioner_free(self.ptr);
            // No callback starts after the free; one running holds its own reference.
            drop(Arc::from_raw(self.cbs));
        }
    }
}

impl fmt::Debug for Partitioner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Partitioner")
            .field("group", &self.group)
            .field("partitions", &self.partitions)
            .field("uuid", &self.uuid)
            .finish_non_exhaustive()
    }
}

impl Partitioner {
    /// A builder for a member of `group` with `partitions` partitions (the same for every
    /// member of the group: a member of another count is refused at start).
    pub fn builder<'a>(client: &'a Client, group: &str, partitions: i64) -> PartitionerBuilder<'a> {
        PartitionerBuilder {
            client,
            group: group.to_owned(),
            partitions,
            ttl: None,
            poll: None,
            locks_collection: None,
            members_collection: None,
            op_timeout: None,
            on_assigned: None,
            on_revoked: None,
        }
    }

    pub fn group(&self) -> &str {
        &self.group
    }
    pub fn partitions(&self) -> i64 {
        self.partitions
    }
    /// This member's uuid, the owner named in the partitions' lock documents.
    pub fn uuid(&self) -> &str {
        &self.uuid
    }

    /// Joins the group: one read of the members' reports (`Error::InvalidArgument`,
    /// nothing written, when the group's key holds another kind of document or a live
    /// member has another number of partitions), then the member loop starts on a
    /// library thread. No-op while running.
    pub fn start(&self) -> Result<()> {
        check(unsafe { sys::mongoelector_partitioner_start(self.ptr) })
    }

    /// Leaves the group: `on_revoked` runs for every partition held and each is released
    /// (fenced) once it has returned. Waits for all of it; from one of this
    /// partitioner's callbacks it only asks. `start` joins again.
    pub fn stop(&self) -> Result<()> {
        check(unsafe { sys::mongoelector_partitioner_stop(self.ptr) })
    }

    /// True while the member loop runs (start until stop).
    pub fn running(&self) -> Result<bool> {
        let mut out: c_int = 0;
        check(unsafe { sys::mongoelector_partitioner_running(self.ptr, &mut out) })?;
        Ok(out != 0)
    }

    /// The partitions this member owns now, with their fencing tokens. Owned means: the
    /// lease is not lost (read from its renew deadline and the monotonic clock) and no
    /// release of it is under way. No round trip.
    pub fn owned(&self) -> Result<BTreeMap<i64, i64>> {
        let mut arr: *mut sys::mongoelector_partition_token = ptr::null_mut();
        let mut n: usize = 0;
        check(unsafe { sys::mongoelector_partitioner_owned(self.ptr, &mut arr, &mut n) })?;
        let mut out = BTreeMap::new();
        if !arr.is_null() {
            // SAFETY: the library wrote n entries.
            for t in unsafe { std::slice::from_raw_parts(arr, n) } {
                out.insert(t.partition, t.token);
            }
            unsafe { sys::mongoelector_free(arr as *mut c_void) };
        }
        Ok(out)
    }

    /// The fencing token of `partition` while this member owns it. InvalidArgument for a
    /// partition outside 0..partitions. No round trip.
    pub fn token(&self, partition: i64) -> Result<Option<i64>> {
        let mut t = 0i64;
        check(unsafe { sys::mongoelector_partitioner_token(self.ptr, partition, &mut t) })?;
        Ok((t != 0).then_some(t))
    }

    /// The group's assignment as its documents show it (one read of the reports, one per
    /// partition).
    pub fn status(&self) -> Result<PartitionStatus> {
        let mut s: *mut c_char = ptr::null_mut();
        check(unsafe { sys::mongoelector_partitioner_status(self.ptr, &mut s) })?;
        parse_status(&unsafe { take_c_string(s) })
    }
}

/// The assignment of `group` read without joining it (nothing written or created).
/// `partitions`: the group's number of partitions, or `None` to take it from the live
/// members' reports (`Error::InvalidArgument` when none is live).
pub fn partition_status(
    client: &Client,
    group: &str,
    partitions: Option<i64>,
) -> Result<PartitionStatus> {
    let cgroup = cstring("group", group)?;
    let mut s: *mut c_char = ptr::null_mut();
    check(unsafe {
        sys::mongoelector_client_partition_status(
            client.inner.ptr,
            cgroup.as_ptr(),
            partitions.unwrap_or(0),
            ptr::null(),
            ptr::null(),
            &mut s,
        )
    })?;
    parse_status(&unsafe { take_c_string(s) })
}

/// A group's assignment as its documents show it.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct PartitionStatus {
    pub group: String,
    pub partitions: i64,
    /// When it was read, on the server's clock.
    pub server_time: Timestamp,
    /// Every partition is held by the member rendezvous hashing assigns it.
    pub settled: bool,
    /// Every report of the group, live or not.
    pub members: Vec<PartitionMember>,
    /// One per partition, in order.
    pub owners: Vec<PartitionOwner>,
    /// Reports that cannot be the group's, and why.
    pub conflicts: Vec<String>,
}

/// One member's report.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct PartitionMember {
    pub uuid: String,
    pub host: String,
    pub pid: i64,
    /// Counts for the assignment.
    pub live: bool,
    /// False once it left.
    pub running: bool,
    pub expires: Option<Timestamp>,
    /// Partitions it holds now.
    pub owned: i64,
    /// Partitions rendezvous hashing gives it.
    pub assigned: i64,
}

/// One partition's lock.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct PartitionOwner {
    pub partition: i64,
    /// `"<group>/<partition>"`: the partition's lock.
    pub key: String,
    /// The holder's uuid while held.
    pub owner: Option<String>,
    pub host: Option<String>,
    pub pid: Option<i64>,
    /// The lock's fencing token (0: never held).
    pub token: i64,
    pub expires: Option<Timestamp>,
    /// The member rendezvous hashing gives it (None without live members).
    pub assigned: Option<String>,
    /// Another kind of document at `key`.
    pub conflict: Option<String>,
}

fn parse_status(text: &str) -> Result<PartitionStatus> {
    let bad = || {
        Error::internal(format!(
            "unexpected partition status from the library: {text}"
        ))
    };
    let v: Value = serde_json::from_str(text).map_err(|_| bad())?;
    let int = |v: &Value, k: &str| v.get(k).and_then(Value::as_i64);
    let string = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let boolean = |v: &Value, k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
    let list = |k: &str| {
        v.get(k)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    Ok(PartitionStatus {
        group: string(&v, "group").ok_or_else(bad)?,
        partitions: int(&v, "partitions").ok_or_else(bad)?,
        server_time: Timestamp::from_millis(int(&v, "server_time_ms").unwrap_or(0)),
        settled: boolean(&v, "settled"),
        members: list("members")
            .iter()
            .map(|m| PartitionMember {
                uuid: string(m, "uuid").unwrap_or_default(),
                host: string(m, "host").unwrap_or_default(),
                pid: int(m, "pid").unwrap_or(0),
                live: boolean(m, "live"),
                running: boolean(m, "running"),
                expires: int(m, "expire_ms").map(Timestamp::from_millis),
                owned: int(m, "owned").unwrap_or(0),
                assigned: int(m, "assigned").unwrap_or(0),
            })
            .collect(),
        owners: list("owners")
            .iter()
            .map(|o| PartitionOwner {
                partition: int(o, "partition").unwrap_or(0),
                key: string(o, "key").unwrap_or_default(),
                owner: string(o, "owner"),
                host: string(o, "host"),
                pid: int(o, "pid"),
                token: int(o, "token").unwrap_or(0),
                expires: int(o, "expire_ms").map(Timestamp::from_millis),
                assigned: string(o, "assigned"),
                conflict: string(o, "conflict"),
            })
            .collect(),
        conflicts: list("conflicts")
            .iter()
            .filter_map(|c| string(c, "message"))
            .collect(),
    })
}
