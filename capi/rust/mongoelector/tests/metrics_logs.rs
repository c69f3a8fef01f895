//! `mongoelector::stats()` and the structured log records against a real server.
//! Its own test binary: it installs a process-wide `log` logger that keeps every record
//! with its key-values. The metrics are process-wide and the tests run in parallel
//! threads: they compare deltas, with >= where another test could add to a counter.

mod common;

use common::unique_key;
use mongoelector::{stats, Elector, Error, Stats};
use std::collections::BTreeMap;
use std::sync::{Mutex, Once};
use std::time::Duration;

/// One captured `log` record.
#[derive(Debug, Clone)]
struct Captured {
    level: log::Level,
    target: String,
    message: String,
    /// Key-values as text (Display of the value).
    kvs: BTreeMap<String, String>,
    /// The `fence` key-value as an integer, if it is one.
    fence: Option<i64>,
}

impl Captured {
    fn kv(&self, key: &str) -> Option<&str> {
        self.kvs.get(key).map(String::as_str)
    }
}

struct Capture(Mutex<Vec<Captured>>);

struct Collect<'a>(&'a mut Captured);

impl<'kvs> log::kv::VisitSource<'kvs> for Collect<'_> {
    fn visit_pair(
        &mut self,
        key: log::kv::Key<'kvs>,
        value: log::kv::Value<'kvs>,
    ) -> Result<(), log::kv::Error> {
        if key.as_str() == "fence" {
            self.0.fence = value.to_i64();
        }
        let dup = self
            .0
            .kvs
            .insert(key.as_str().to_owned(), value.to_string());
        assert!(dup.is_none(), "key-value {key} given twice");
        Ok(())
    }
}

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }
    fn log(&self, record: &log::Record) {
        let mut c = Captured {
            level: record.level(),
            target: record.target().to_owned(),
            message: record.args().to_string(),
            kvs: BTreeMap::new(),
            fence: None,
        };
        record
            .key_values()
            .visit(&mut Collect(&mut c))
            .expect("visit key-values");
        self.0.lock().unwrap().push(c);
    }
    fn flush(&self) {}
}

static CAPTURE: Capture = Capture(Mutex::new(Vec::new()));

/// Installs the capturing logger at info (before any client is made: the library's
/// minimum level follows log::max_level()).
fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        log::set_logger(&CAPTURE).unwrap();
        log::set_max_level(log::LevelFilter::Info);
    });
}

/// The records captured so far that are about `key` (its `key` key-value, or its name
/// in the message).
fn records_about(key: &str) -> Vec<Captured> {
    CAPTURE
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.kv("key") == Some(key) || r.message.contains(key))
        .cloned()
        .collect()
}

/// Calls in the latency buckets whose upper bound is at least `at_least` (+Inf included).
fn calls_in_buckets_above(s: &Stats, at_least: Duration) -> u64 {
    let h = &s.acquire_latency;
    h.buckets
        .iter()
        .enumerate()
        .filter(|(i, _)| h.bounds.get(*i).map_or(true, |b| *b >= at_least))
        .map(|(_, n)| n)
        .sum()
}

#[test]
fn stats_count_acquires_by_outcome_and_their_latency() {
    init();
    let Some(c) = common::test_client() else {
        return;
    };
    let key = unique_key("stats");
    let a = common::locker(&c, &key, Duration::from_secs(30));
    let b = common::locker(&c, &key, Duration::from_secs(30));

    // An acquire, then a renewal of the hold.
    let s0 = stats().unwrap();
    let guard = a.try_acquire().unwrap();
    let s1 = stats().unwrap();
    assert!(
        s1.acquires.acquired > s0.acquires.acquired,
        "{s0:?}\n{s1:?}"
    );
    assert!(s1.acquire_latency.count > s0.acquire_latency.count);
    assert!(s1.acquire_latency.sum >= s0.acquire_latency.sum);
    assert!(
        s1.round_trips > s0.round_trips,
        "the acquire went to the server"
    );
    assert!(guard.touch().unwrap().is_some(), "touch renews our hold");
    let s2 = stats().unwrap();
    assert!(s2.renewals > s1.renewals, "{s1:?}\n{s2:?}");

    // A non-blocking acquire of the held lock: LockHeld.
    assert!(matches!(b.try_acquire(), Err(Error::LockHeld(_))));
    let s3 = stats().unwrap();
    assert!(s3.acquires.held > s2.acquires.held, "{s2:?}\n{s3:?}");
    assert!(s3.acquire_latency.count > s2.acquire_latency.count);

    // A blocking acquire that times out: counted, and its latency (about the timeout;
    // half of it as a floor, the library times the call on its own) lands in a bucket
    // whose bound is at least that.
    let timeout = Duration::from_millis(600);
    let floor = timeout / 2;
    assert!(matches!(b.acquire(Some(timeout)), Err(Error::Timeout(_))));
    let s4 = stats().unwrap();
    assert!(s4.acquires.timeout > s3.acquires.timeout, "{s3:?}\n{s4:?}");
    assert!(
        calls_in_buckets_above(&s4, floor) > calls_in_buckets_above(&s3, floor),
        "the timed-out call is not in a bucket of at least {floor:?}: {:?}\n{:?}",
        s3.acquire_latency,
        s4.acquire_latency
    );
    assert!(s4.acquire_latency.sum >= s3.acquire_latency.sum + floor);

    // The process talked to a server: its clock was sampled.
    assert!(
        s4.clock_samples >= 1 && s4.clock_uncertainty >= 0.0,
        "{s4:?}"
    );
    assert!(s4.clock_offset.is_finite());
    // Counters only grow; the histogram adds up.
    assert!(s4.acquires.total() >= s0.acquires.total() + 3);
    assert_eq!(
        s4.acquire_latency.buckets.len(),
        s4.acquire_latency.bounds.len() + 1
    );
    guard.release().unwrap();
}

#[test]
fn leading_then_releasing_logs_two_info_records_with_key_values() {
    init();
    let Some(c) = common::test_client() else {
        return;
    };
    let key = unique_key("kvlog");
    let before = stats().unwrap();
    let e = Elector::builder(&c, &key)
        .ttl(Duration::from_secs(10))
        .build()
        .unwrap();
    e.poll().unwrap();
    assert!(e.is_leader().unwrap());
    let fence = e.fence().unwrap();
    let uuid = e.uuid().unwrap();
    let host = e.node_status().unwrap().host;
    assert!(fence > 0 && !uuid.is_empty() && !host.is_empty());
    let leading = stats().unwrap();
    assert!(
        leading.leader_elected > before.leader_elected,
        "{before:?}\n{leading:?}"
    );
    e.release().unwrap();
    assert!(!e.is_leader().unwrap());
    drop(e); // stops it: nothing more to log for this key
    let after = stats().unwrap();
    assert!(
        after.leader_lost > leading.leader_lost,
        "{leading:?}\n{after:?}"
    );

    let about = records_about(&key);
    let info: Vec<&Captured> = about
        .iter()
        .filter(|r| r.level == log::Level::Info)
        .collect();
    assert_eq!(
        info.len(),
        2,
        "expected exactly leader_elected and leader_lost at info for {key}: {about:#?}"
    );
    let (elected, lost) = (info[0], info[1]);
    for (r, event) in [(elected, "leader_elected"), (lost, "leader_lost")] {
        assert_eq!(r.target, "mongoelector", "{r:?}");
        assert_eq!(r.kv("event"), Some(event), "{r:?}");
        assert_eq!(r.kv("key"), Some(key.as_str()), "{r:?}");
        assert_eq!(r.kv("uuid"), Some(uuid.as_str()), "{r:?}");
        assert_eq!(r.kv("host"), Some(host.as_str()), "{r:?}");
        assert!(r.message.contains(&key), "{r:?}");
    }
    // The election's hold: its fencing token, as an integer.
    assert_eq!(elected.fence, Some(fence), "{elected:?}");
    assert_eq!(elected.kv("fence"), Some(fence.to_string().as_str()));
    // The end of a term may or may not name the hold; if it does, the same one.
    assert!(
        lost.fence.is_none() || lost.fence == Some(fence),
        "{lost:?}"
    );
}
