//! Raw declarations of the C API of libmongoelector (`mongoelector.h`), written by hand.
//! Most users want the safe [`mongoelector`](https://docs.rs/mongoelector) crate. Read
//! the header for ownership and thread rules.
//!
//! # Linking
//!
//! The C library is not built by this crate: install it first (`cmake --install <build>
//! --prefix <prefix>`). The build script then finds it, first match wins, through
//!
//! * `MONGOELECTOR_LIB_DIR=<directory holding libmongoelector.so>` (overrides pkg-config),
//! * `pkg-config mongoelector` (>= 1.1.0; `PKG_CONFIG_PATH=<prefix>/lib/pkgconfig` unless
//!   the prefix is a system one),
//!
//! and fails with a message naming both when neither finds it. At run time the loader
//! must find `libmongoelector.so.1`: `LD_LIBRARY_PATH=<that directory>` unless it is a
//! system one.
//!
//! # Drift
//!
//! The workspace's `header-drift` crate (not published) runs bindgen on the header and
//! fails when a function, callback type, struct field, enum value or version macro here
//! differs from it, or a size, alignment or offset differs from clang's:
//! `cargo test -p mongoelector-header-drift` in `capi/rust` (needs libclang).
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_double, c_int, c_void};

pub const MONGOELECTOR_VERSION_MAJOR: c_int = 1;
pub const MONGOELECTOR_VERSION_MINOR: c_int = 1;
pub const MONGOELECTOR_VERSION_PATCH: c_int = 0;
pub const MONGOELECTOR_VERSION_STRING: &str = "1.1.0";
pub const MONGOELECTOR_VERSION_NUMBER: c_int = MONGOELECTOR_VERSION_MAJOR * 10000
    + MONGOELECTOR_VERSION_MINOR * 100
    + MONGOELECTOR_VERSION_PATCH;

/// A C enum: `int`-sized on every ABI we target (the drift test checks the size).
pub type mongoelector_status = c_int;
pub const MONGOELECTOR_OK: mongoelector_status = 0;
pub const MONGOELECTOR_ERR_INVALID_ARGUMENT: mongoelector_status = 1;
pub const MONGOELECTOR_ERR_LOCK_EXISTS: mongoelector_status = 2;
pub const MONGOELECTOR_ERR_TIMEOUT: mongoelector_status = 3;
pub const MONGOELECTOR_ERR_TIME_OFFSET: mongoelector_status = 4;
pub const MONGOELECTOR_ERR_CANCELLED: mongoelector_status = 5;
pub const MONGOELECTOR_ERR_UNAVAILABLE: mongoelector_status = 6;
pub const MONGOELECTOR_ERR_SERVER: mongoelector_status = 7;
pub const MONGOELECTOR_ERR_UNSAFE_SERVER: mongoelector_status = 8;
pub const MONGOELECTOR_ERR_INTERNAL: mongoelector_status = 100;

pub type mongoelector_log_level = c_int;
pub const MONGOELECTOR_LOG_DEBUG: mongoelector_log_level = 10;
pub const MONGOELECTOR_LOG_INFO: mongoelector_log_level = 20;
pub const MONGOELECTOR_LOG_WARNING: mongoelector_log_level = 30;
pub const MONGOELECTOR_LOG_ERROR: mongoelector_log_level = 40;

/// Opaque handles.
#[repr(C)]
pub struct mongoelector_client {
    _private: [u8; 0],
}
#[repr(C)]
pub struct mongoelector_locker {
    _private: [u8; 0],
}
#[repr(C)]
pub struct mongoelector_elector {
    _private: [u8; 0],
}
#[repr(C)]
pub struct mongoelector_lease {
    _private: [u8; 0],
}
/// Since 1.1.
#[repr(C)]
pub struct mongoelector_cancel_token {
    _private: [u8; 0],
}
/// Since 1.1.
#[repr(C)]
pub struct mongoelector_semaphore {
    _private: [u8; 0],
}
/// Since 1.1: a semaphore slot kept alive by the library's renewer.
#[repr(C)]
pub struct mongoelector_semaphore_lease {
    _private: [u8; 0],
}
/// Since 1.1: watches who leads an elector key (mongoelector_observer_*).
#[repr(C)]
pub struct mongoelector_observer {
    _private: [u8; 0],
}
/// Since 1.1: the testing kit's fake clock (mongoelector_fake_clock_*).
#[repr(C)]
pub struct mongoelector_fake_clock {
    _private: [u8; 0],
}

pub type mongoelector_log_fn = Option<
    unsafe extern "C" fn(
        level: mongoelector_log_level,
        message: *const c_char,
        user_data: *mut c_void,
    ),
>;
pub type mongoelector_callback_fn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;
/// Since 1.1: receives the user_data of a replaced log handler once no thread can call
/// that handler any more.
pub type mongoelector_release_fn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

/// Since 1.1: what a structured log record is about (numbers are stable).
pub type mongoelector_log_event = c_int;
pub const MONGOELECTOR_EVENT_NONE: mongoelector_log_event = 0;
pub const MONGOELECTOR_EVENT_LEADER_ELECTED: mongoelector_log_event = 1;
pub const MONGOELECTOR_EVENT_LEADER_LOST: mongoelector_log_event = 2;
pub const MONGOELECTOR_EVENT_STEP_DOWN: mongoelector_log_event = 3;
pub const MONGOELECTOR_EVENT_RENEW_FAILED: mongoelector_log_event = 4;
pub const MONGOELECTOR_EVENT_LEASE_LOST: mongoelector_log_event = 5;
pub const MONGOELECTOR_EVENT_CLOCK_JUMP: mongoelector_log_event = 6;
pub const MONGOELECTOR_EVENT_UNSAFE_SERVER: mongoelector_log_event = 7;
pub const MONGOELECTOR_EVENT_RELEASE_FAILED: mongoelector_log_event = 8;
pub const MONGOELECTOR_EVENT_CALLBACK_FAILED: mongoelector_log_event = 9;

/// Since 1.1: the `version` the library writes into the records it passes.
pub const MONGOELECTOR_LOG_RECORD_VERSION: u32 = 1;
/// Since 1.1: a log record, valid only during the record callback. Fields are only ever
/// appended (read those of `version`); strings are never NULL ("" when absent), `fence`
/// is 0 when none.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mongoelector_log_record {
    pub version: u32,
    pub level: mongoelector_log_level,
    pub event: mongoelector_log_event,
    pub message: *const c_char,
    pub key: *const c_char,
    pub fence: i64,
    pub uuid: *const c_char,
    pub host: *const c_char,
}
/// Since 1.1.
pub type mongoelector_log_record_fn =
    Option<unsafe extern "C" fn(record: *const mongoelector_log_record, user_data: *mut c_void)>;

/// Since 1.1.
pub const MONGOELECTOR_STATS_VERSION: u32 = 1;
/// Since 1.1: buckets of the acquire latency histogram (one more than its bounds).
pub const MONGOELECTOR_STATS_LATENCY_BUCKETS: usize = 15;
/// Since 1.1: process-wide metrics, filled by mongoelector_stats_get() (the caller sets
/// `version`). The array lengths are MONGOELECTOR_STATS_LATENCY_BUCKETS - 1 and
/// MONGOELECTOR_STATS_LATENCY_BUCKETS (written as numbers for the drift check).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mongoelector_stats {
    pub version: u32,
    pub acquires_acquired: u64,
    pub acquires_held: u64,
    pub acquires_timeout: u64,
    pub acquires_cancelled: u64,
    pub acquires_error: u64,
    pub acquire_latency_bounds: [c_double; 14],
    pub acquire_latency_buckets: [u64; 15],
    pub acquire_latency_count: u64,
    pub acquire_latency_sum_seconds: c_double,
    pub renewals: u64,
    pub renewal_failures: u64,
    pub leader_elected: u64,
    pub leader_lost: u64,
    pub step_downs: u64,
    pub clock_samples: u64,
    pub clock_offset_seconds: c_double,
    pub clock_uncertainty_seconds: c_double,
    pub round_trips: u64,
}
const _: () = assert!(
    MONGOELECTOR_STATS_LATENCY_BUCKETS == 15,
    "update the array lengths of mongoelector_stats"
);

/// Since 1.1.
pub const MONGOELECTOR_ERROR_INFO_VERSION: u32 = 1;
/// Since 1.1: filled by mongoelector_last_error_info() (the caller sets `version`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mongoelector_error_info {
    pub version: u32,
    pub status: mongoelector_status,
    pub message: *const c_char,
    pub code: i32,
    pub code_name: *const c_char,
    pub labels: *const *const c_char,
    pub label_count: usize,
}

pub const MONGOELECTOR_LOCKER_OPTIONS_VERSION: u32 = 1;
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mongoelector_locker_options {
    pub version: u32,
    pub collection: *const c_char,
    pub ttl_seconds: c_double,
    pub timeparanoid: c_int,
    pub max_offset_seconds: c_double,
    pub delete_on_release: c_int,
    pub allow_unsafe_server: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct mongoelector_lock_info {
    pub uuid: [c_char; 64],
    pub host: [c_char; 256],
    pub pid: i64,
    pub created_ms: i64,
    pub expire_ms: i64,
    pub fence: i64,
}

/// Since 1.1.
pub const MONGOELECTOR_LOCKER_CONFIG_VERSION: u32 = 1;
/// Since 1.1: initialise with mongoelector_locker_config_init(&mut c, MONGOELECTOR_LOCKER_CONFIG_VERSION).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mongoelector_locker_config {
    pub version: u32,
    pub collection: *const c_char,
    pub ttl_seconds: c_double,
    pub timeparanoid: c_int,
    pub max_offset_seconds: c_double,
    pub delete_on_release: c_int,
    pub allow_unsafe_server: c_int,
    pub op_timeout_seconds: c_double,
}

/// Since 1.1.
pub const MONGOELECTOR_ACQUIRE_OPTIONS_VERSION: u32 = 1;
/// Since 1.1: initialise with mongoelector_acquire_options_init(&mut o, MONGOELECTOR_ACQUIRE_OPTIONS_VERSION).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mongoelector_acquire_options {
    pub version: u32,
    pub blocking: c_int,
    pub timeout_seconds: c_double,
    pub step_seconds: c_double,
    pub force: c_int,
    pub cancel: *mut mongoelector_cancel_token,
}

/// Since 1.1.
pub const MONGOELECTOR_LOCK_DETAILS_VERSION: u32 = 1;
/// Since 1.1: the strings are owned by the struct (mongoelector_lock_details_clear).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mongoelector_lock_details {
    pub version: u32,
    pub uuid: *mut c_char,
    pub host: *mut c_char,
    pub pid: i64,
    pub created_ms: i64,
    pub expire_ms: i64,
    pub fence: i64,
}

pub const MONGOELECTOR_ELECTOR_OPTIONS_VERSION: u32 = 1;
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mongoelector_elector_options {
    pub version: u32,
    pub ttl_seconds: c_double,
    pub report_status: c_int,
    pub app_version: *const c_char,
    pub on_leader: mongoelector_callback_fn,
    pub on_leader_loss: mongoelector_callback_fn,
    pub on_loop: mongoelector_callback_fn,
    pub user_data: *mut c_void,
    pub allow_unsafe_server: c_int,
}

/// Since 1.1; 2 adds handover_poll_seconds.
pub const MONGOELECTOR_ELECTOR_CONFIG_VERSION: u32 = 2;
/// Since 1.1: initialise with mongoelector_elector_config_init(&mut c, MONGOELECTOR_ELECTOR_CONFIG_VERSION).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mongoelector_elector_config {
    pub version: u32,
    pub ttl_seconds: c_double,
    pub report_status: c_int,
    pub app_version: *const c_char,
    pub on_leader: mongoelector_callback_fn,
    pub on_leader_loss: mongoelector_callback_fn,
    pub on_loop: mongoelector_callback_fn,
    pub user_data: *mut c_void,
    pub delete_on_release: c_int,
    pub op_timeout_seconds: c_double,
    /// Version 2: < 0 ttl/4 (default -1), 0 off, else seconds between a follower's reads.
    pub handover_poll_seconds: c_double,
}

/// Since 1.1: who leads a key, filled by the library (in a callback: valid only during
/// the call; from mongoelector_observer_read: strings valid until the next read on the
/// calling thread).
pub const MONGOELECTOR_LEADER_STATE_VERSION: u32 = 2;
/// Since 1.1 (leader state version 2): what the observer can tell.
pub type mongoelector_leader_status = c_int;
pub const MONGOELECTOR_LEADER_NONE: mongoelector_leader_status = 0;
pub const MONGOELECTOR_LEADER_LEADS: mongoelector_leader_status = 1;
pub const MONGOELECTOR_LEADER_PENDING: mongoelector_leader_status = 2;
pub const MONGOELECTOR_LEADER_UNKNOWN: mongoelector_leader_status = 3;
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mongoelector_leader_state {
    pub version: u32,
    pub has_leader: c_int,
    pub uuid: *const c_char,
    pub host: *const c_char,
    pub pid: i64,
    pub fence: i64,
    pub server_time_ms: i64,
    /// Version 2: a `mongoelector_leader_status`.
    pub status: c_int,
    /// Version 2: server time (ms) at which the lease ends unless renewed; 0 for NONE.
    pub expire_ms: i64,
    /// Version 2: PENDING: the hand-over's target ("" otherwise).
    pub handover_uuid: *const c_char,
    pub handover_host: *const c_char,
    pub handover_pid: i64,
    pub handover_fence: i64,
}
/// Since 1.1: runs on the observer's own thread at each change of leader.
pub type mongoelector_leader_change_fn =
    Option<unsafe extern "C" fn(state: *const mongoelector_leader_state, user_data: *mut c_void)>;

/// Since 1.1.
pub const MONGOELECTOR_OBSERVER_CONFIG_VERSION: u32 = 1;
/// Since 1.1: initialise with mongoelector_observer_config_init(&mut c, MONGOELECTOR_OBSERVER_CONFIG_VERSION).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mongoelector_observer_config {
    pub version: u32,
    pub interval_seconds: c_double,
    pub op_timeout_seconds: c_double,
}

/// Since 1.1.
pub const MONGOELECTOR_SEMAPHORE_CONFIG_VERSION: u32 = 1;
/// Since 1.1: initialise with mongoelector_semaphore_config_init(&mut c, MONGOELECTOR_SEMAPHORE_CONFIG_VERSION).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mongoelector_semaphore_config {
    pub version: u32,
    pub collection: *const c_char,
    pub limit: i64,
    pub ttl_seconds: c_double,
    pub timeparanoid: c_int,
    pub max_offset_seconds: c_double,
    pub allow_unsafe_server: c_int,
    pub op_timeout_seconds: c_double,
}

/// Since 1.1: one holder listed by mongoelector_semaphore_holders (a fixed struct; the
/// strings are malloc'd, freed by mongoelector_semaphore_holders_free).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mongoelector_semaphore_holder {
    pub uuid: *mut c_char,
    pub host: *mut c_char,
    pub pid: i64,
    pub fence: i64,
    pub created_ms: i64,
    pub expire_ms: i64,
}

/// Runs once, on the library's deadline-timer thread, when the lease is declared lost.
pub type mongoelector_lease_lost_fn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

pub const MONGOELECTOR_LEASE_OPTIONS_VERSION: u32 = 1;
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mongoelector_lease_options {
    pub version: u32,
    pub blocking: c_int,
    pub timeout_seconds: c_double,
    pub step_seconds: c_double,
    pub on_lost: mongoelector_lease_lost_fn,
    pub user_data: *mut c_void,
}

extern "C" {
    // ---- Library
    pub fn mongoelector_version() -> *const c_char;
    pub fn mongoelector_version_number() -> c_int;
    pub fn mongoelector_status_name(status: mongoelector_status) -> *const c_char;
    pub fn mongoelector_last_error() -> *const c_char;
    pub fn mongoelector_free(ptr: *mut c_void);
    pub fn mongoelector_set_log_callback(
        fn_: mongoelector_log_fn,
        user_data: *mut c_void,
    ) -> mongoelector_status;
    /// Since 1.1.
    pub fn mongoelector_set_log_handler(
        min_level: mongoelector_log_level,
        fn_: mongoelector_log_fn,
        user_data: *mut c_void,
        release: mongoelector_release_fn,
    ) -> mongoelector_status;
    /// Since 1.1.
    pub fn mongoelector_set_log_record_handler(
        min_level: mongoelector_log_level,
        fn_: mongoelector_log_record_fn,
        user_data: *mut c_void,
        release: mongoelector_release_fn,
    ) -> mongoelector_status;
    /// Since 1.1: a static name ("leader_elected"), "unknown" for an unknown event.
    pub fn mongoelector_log_event_name(event: mongoelector_log_event) -> *const c_char;
    /// Since 1.1: set `out.version = MONGOELECTOR_STATS_VERSION` first.
    pub fn mongoelector_stats_get(out: *mut mongoelector_stats) -> mongoelector_status;
    /// Since 1.1.
    pub fn mongoelector_last_error_info(out: *mut mongoelector_error_info) -> mongoelector_status;
    /// Since 1.1.
    pub fn mongoelector_last_error_has_label(label: *const c_char) -> c_int;

    // ---- Cancel token (since 1.1)
    pub fn mongoelector_cancel_token_new(
        out: *mut *mut mongoelector_cancel_token,
    ) -> mongoelector_status;
    pub fn mongoelector_cancel_token_cancel(
        token: *mut mongoelector_cancel_token,
    ) -> mongoelector_status;
    pub fn mongoelector_cancel_token_is_cancelled(
        token: *mut mongoelector_cancel_token,
        out: *mut c_int,
    ) -> mongoelector_status;
    pub fn mongoelector_cancel_token_free(token: *mut mongoelector_cancel_token);

    // ---- Client
    pub fn mongoelector_client_new(
        uri: *const c_char,
        database: *const c_char,
        out: *mut *mut mongoelector_client,
    ) -> mongoelector_status;
    pub fn mongoelector_client_free(client: *mut mongoelector_client);
    pub fn mongoelector_client_server_info(
        client: *mut mongoelector_client,
        name_out: *mut *const c_char,
        version_out: *mut *const c_char,
    ) -> mongoelector_status;
    /// Since 1.1.
    pub fn mongoelector_client_server_info_copy(
        client: *mut mongoelector_client,
        name_out: *mut *mut c_char,
        version_out: *mut *mut c_char,
    ) -> mongoelector_status;

    // ---- Locker
    pub fn mongoelector_locker_options_init(options: *mut mongoelector_locker_options);
    pub fn mongoelector_locker_new(
        client: *mut mongoelector_client,
        key: *const c_char,
        options: *const mongoelector_locker_options,
        out: *mut *mut mongoelector_locker,
    ) -> mongoelector_status;
    pub fn mongoelector_locker_free(locker: *mut mongoelector_locker);
    pub fn mongoelector_locker_acquire(
        locker: *mut mongoelector_locker,
        blocking: c_int,
        timeout_seconds: c_double,
        step_seconds: c_double,
        force: c_int,
        fence_out: *mut i64,
    ) -> mongoelector_status;
    pub fn mongoelector_locker_cancel(locker: *mut mongoelector_locker) -> mongoelector_status;
    pub fn mongoelector_locker_release(
        locker: *mut mongoelector_locker,
        force: c_int,
    ) -> mongoelector_status;
    pub fn mongoelector_locker_release_min_hold(
        locker: *mut mongoelector_locker,
        min_hold_seconds: c_double,
        frees_at_ms_out: *mut i64,
    ) -> mongoelector_status;
    pub fn mongoelector_locker_claim_window(
        locker: *mut mongoelector_locker,
        window_seconds: c_double,
        claimed_out: *mut c_int,
        window_start_ms_out: *mut i64,
    ) -> mongoelector_status;
    pub fn mongoelector_locker_touch(
        locker: *mut mongoelector_locker,
        renewed_out: *mut c_int,
        expire_ms_out: *mut i64,
    ) -> mongoelector_status;
    pub fn mongoelector_locker_locked(
        locker: *mut mongoelector_locker,
        out: *mut c_int,
    ) -> mongoelector_status;
    pub fn mongoelector_locker_owned(
        locker: *mut mongoelector_locker,
        out: *mut c_int,
    ) -> mongoelector_status;
    pub fn mongoelector_locker_fence(
        locker: *mut mongoelector_locker,
        out: *mut i64,
    ) -> mongoelector_status;
    pub fn mongoelector_locker_uuid(
        locker: *mut mongoelector_locker,
        out: *mut *const c_char,
    ) -> mongoelector_status;
    pub fn mongoelector_locker_verify_time(
        locker: *mut mongoelector_locker,
        offset_seconds_out: *mut c_double,
    ) -> mongoelector_status;
    pub fn mongoelector_locker_current(
        locker: *mut mongoelector_locker,
        out: *mut mongoelector_lock_info,
        found_out: *mut c_int,
    ) -> mongoelector_status;
    /// Since 1.1.
    pub fn mongoelector_locker_config_init(
        config: *mut mongoelector_locker_config,
        version: u32,
    ) -> mongoelector_status;
    /// Since 1.1.
    pub fn mongoelector_locker_new_with(
        client: *mut mongoelector_client,
        key: *const c_char,
        config: *const mongoelector_locker_config,
        out: *mut *mut mongoelector_locker,
    ) -> mongoelector_status;
    /// Since 1.1.
    pub fn mongoelector_acquire_options_init(
        options: *mut mongoelector_acquire_options,
        version: u32,
    ) -> mongoelector_status;
    /// Since 1.1.
    pub fn mongoelector_locker_acquire_with(
        locker: *mut mongoelector_locker,
        options: *const mongoelector_acquire_options,
        fence_out: *mut i64,
    ) -> mongoelector_status;
    /// Since 1.1.
    pub fn mongoelector_locker_current_details(
        locker: *mut mongoelector_locker,
        details: *mut mongoelector_lock_details,
        found_out: *mut c_int,
    ) -> mongoelector_status;
    /// Since 1.1.
    pub fn mongoelector_lock_details_clear(details: *mut mongoelector_lock_details);

    // ---- Elector
    pub fn mongoelector_elector_options_init(options: *mut mongoelector_elector_options);
    pub fn mongoelector_elector_new(
        client: *mut mongoelector_client,
        key: *const c_char,
        options: *const mongoelector_elector_options,
        out: *mut *mut mongoelector_elector,
    ) -> mongoelector_status;
    /// Since 1.1 also from one of the elector's own callbacks (returns at once; the
    /// stop and free happen on another library thread).
    pub fn mongoelector_elector_free(elector: *mut mongoelector_elector);
    /// Since 1.1.
    pub fn mongoelector_elector_config_init(
        config: *mut mongoelector_elector_config,
        version: u32,
    ) -> mongoelector_status;
    /// Since 1.1.
    pub fn mongoelector_elector_new_with(
        client: *mut mongoelector_client,
        key: *const c_char,
        config: *const mongoelector_elector_config,
        out: *mut *mut mongoelector_elector,
    ) -> mongoelector_status;
    pub fn mongoelector_elector_start(elector: *mut mongoelector_elector) -> mongoelector_status;
    pub fn mongoelector_elector_stop(elector: *mut mongoelector_elector) -> mongoelector_status;
    pub fn mongoelector_elector_poll(elector: *mut mongoelector_elector) -> mongoelector_status;
    pub fn mongoelector_elector_release(elector: *mut mongoelector_elector) -> mongoelector_status;
    pub fn mongoelector_elector_is_leader(
        elector: *mut mongoelector_elector,
        out: *mut c_int,
    ) -> mongoelector_status;
    pub fn mongoelector_elector_leader_exists(
        elector: *mut mongoelector_elector,
        out: *mut c_int,
    ) -> mongoelector_status;
    pub fn mongoelector_elector_running(
        elector: *mut mongoelector_elector,
        out: *mut c_int,
    ) -> mongoelector_status;
    pub fn mongoelector_elector_poll_wait(
        elector: *mut mongoelector_elector,
        out: *mut c_double,
    ) -> mongoelector_status;
    pub fn mongoelector_elector_fence(
        elector: *mut mongoelector_elector,
        out: *mut i64,
    ) -> mongoelector_status;
    pub fn mongoelector_elector_uuid(
        elector: *mut mongoelector_elector,
        out: *mut *const c_char,
    ) -> mongoelector_status;
    pub fn mongoelector_elector_node_status(
        elector: *mut mongoelector_elector,
        json_out: *mut *mut c_char,
    ) -> mongoelector_status;
    pub fn mongoelector_elector_cluster_detail(
        elector: *mut mongoelector_elector,
        json_out: *mut *mut c_char,
    ) -> mongoelector_status;
    pub fn mongoelector_elector_resign(
        elector: *mut mongoelector_elector,
        hold_off_seconds: f64,
    ) -> mongoelector_status;
    pub fn mongoelector_elector_transfer(
        elector: *mut mongoelector_elector,
        to_uuid: *const c_char,
    ) -> mongoelector_status;

    // ---- Leader observer (since 1.1)
    pub fn mongoelector_observer_config_init(
        config: *mut mongoelector_observer_config,
        version: u32,
    ) -> mongoelector_status;
    pub fn mongoelector_observer_new(
        client: *mut mongoelector_client,
        key: *const c_char,
        config: *const mongoelector_observer_config,
        on_change: mongoelector_leader_change_fn,
        user_data: *mut c_void,
        out: *mut *mut mongoelector_observer,
    ) -> mongoelector_status;
    pub fn mongoelector_observer_read(
        observer: *mut mongoelector_observer,
        out: *mut mongoelector_leader_state,
    ) -> mongoelector_status;
    pub fn mongoelector_observer_free(observer: *mut mongoelector_observer);

    // ---- Keep-alive lease
    pub fn mongoelector_lease_options_init(options: *mut mongoelector_lease_options);
    pub fn mongoelector_lease_acquire(
        locker: *mut mongoelector_locker,
        options: *const mongoelector_lease_options,
        out: *mut *mut mongoelector_lease,
    ) -> mongoelector_status;
    /// Since 1.1.
    pub fn mongoelector_lease_acquire_with(
        locker: *mut mongoelector_locker,
        acquire: *const mongoelector_acquire_options,
        on_lost: mongoelector_lease_lost_fn,
        user_data: *mut c_void,
        out: *mut *mut mongoelector_lease,
    ) -> mongoelector_status;
    pub fn mongoelector_lease_fence(
        lease: *mut mongoelector_lease,
        out: *mut i64,
    ) -> mongoelector_status;
    pub fn mongoelector_lease_lost(
        lease: *mut mongoelector_lease,
        out: *mut c_int,
    ) -> mongoelector_status;
    pub fn mongoelector_lease_wait_lost(
        lease: *mut mongoelector_lease,
        timeout_seconds: c_double,
        lost_out: *mut c_int,
    ) -> mongoelector_status;
    pub fn mongoelector_lease_release(
        lease: *mut mongoelector_lease,
        min_hold_seconds: c_double,
    ) -> mongoelector_status;
    pub fn mongoelector_lease_free(lease: *mut mongoelector_lease);

    // ---- Semaphore (since 1.1)
    pub fn mongoelector_semaphore_config_init(
        config: *mut mongoelector_semaphore_config,
        version: u32,
    ) -> mongoelector_status;
    pub fn mongoelector_semaphore_new(
        client: *mut mongoelector_client,
        key: *const c_char,
        config: *const mongoelector_semaphore_config,
        out: *mut *mut mongoelector_semaphore,
    ) -> mongoelector_status;
    /// Does NOT release (a held slot ends at its ttl). NULL ok.
    pub fn mongoelector_semaphore_free(semaphore: *mut mongoelector_semaphore);
    pub fn mongoelector_semaphore_acquire(
        semaphore: *mut mongoelector_semaphore,
        options: *const mongoelector_acquire_options,
        fence_out: *mut i64,
    ) -> mongoelector_status;
    pub fn mongoelector_semaphore_release(
        semaphore: *mut mongoelector_semaphore,
    ) -> mongoelector_status;
    pub fn mongoelector_semaphore_touch(
        semaphore: *mut mongoelector_semaphore,
        renewed_out: *mut c_int,
        expire_ms_out: *mut i64,
    ) -> mongoelector_status;
    pub fn mongoelector_semaphore_fence(
        semaphore: *mut mongoelector_semaphore,
        out: *mut i64,
    ) -> mongoelector_status;
    pub fn mongoelector_semaphore_holders(
        semaphore: *mut mongoelector_semaphore,
        holders_out: *mut *mut mongoelector_semaphore_holder,
        count_out: *mut usize,
    ) -> mongoelector_status;
    pub fn mongoelector_semaphore_holders_free(
        holders: *mut mongoelector_semaphore_holder,
        count: usize,
    );
    pub fn mongoelector_semaphore_lease_acquire(
        semaphore: *mut mongoelector_semaphore,
        acquire: *const mongoelector_acquire_options,
        on_lost: mongoelector_lease_lost_fn,
        user_data: *mut c_void,
        out: *mut *mut mongoelector_semaphore_lease,
    ) -> mongoelector_status;
    pub fn mongoelector_semaphore_lease_fence(
        lease: *mut mongoelector_semaphore_lease,
        out: *mut i64,
    ) -> mongoelector_status;
    pub fn mongoelector_semaphore_lease_lost(
        lease: *mut mongoelector_semaphore_lease,
        out: *mut c_int,
    ) -> mongoelector_status;
    pub fn mongoelector_semaphore_lease_wait_lost(
        lease: *mut mongoelector_semaphore_lease,
        timeout_seconds: c_double,
        lost_out: *mut c_int,
    ) -> mongoelector_status;
    pub fn mongoelector_semaphore_lease_free(lease: *mut mongoelector_semaphore_lease);

    // ---- Testing kit (since 1.1): a fake clock for memory:// backends, and levers
    pub fn mongoelector_fake_clock_new(
        wall_start_ms: i64,
        settle_timeout_ms: i64,
        out: *mut *mut mongoelector_fake_clock,
    ) -> mongoelector_status;
    /// NULL ok. Not from a callback that this clock's advance/settle runs.
    pub fn mongoelector_fake_clock_free(clock: *mut mongoelector_fake_clock);
    pub fn mongoelector_fake_clock_attach(
        clock: *mut mongoelector_fake_clock,
        memory_uri: *const c_char,
    ) -> mongoelector_status;
    /// Blocking (real time: until the library's threads are idle at each step).
    pub fn mongoelector_fake_clock_advance(
        clock: *mut mongoelector_fake_clock,
        ms: i64,
    ) -> mongoelector_status;
    pub fn mongoelector_fake_clock_settle(
        clock: *mut mongoelector_fake_clock,
    ) -> mongoelector_status;
    /// Real time; `real_timeout_ms < 0`: 10 s; `waiting_out` may be NULL.
    pub fn mongoelector_fake_clock_wait_for_waiters(
        clock: *mut mongoelector_fake_clock,
        n: usize,
        real_timeout_ms: i64,
        waiting_out: *mut usize,
    ) -> mongoelector_status;
    /// Either out may be NULL, not both.
    pub fn mongoelector_fake_clock_now(
        clock: *mut mongoelector_fake_clock,
        wall_ms_out: *mut i64,
        mono_ms_out: *mut i64,
    ) -> mongoelector_status;
    pub fn mongoelector_fake_clock_jump_wall(
        clock: *mut mongoelector_fake_clock,
        ms: i64,
    ) -> mongoelector_status;
    /// collection NULL: "mongolocker"; was_held_out may be NULL.
    pub fn mongoelector_memory_force_expire(
        memory_uri: *const c_char,
        collection: *const c_char,
        key: *const c_char,
        was_held_out: *mut c_int,
    ) -> mongoelector_status;
    pub fn mongoelector_memory_set_unavailable(
        memory_uri: *const c_char,
        unavailable: c_int,
    ) -> mongoelector_status;
}
