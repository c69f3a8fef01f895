//! LeaderObserver and graceful handover (resign, transfer, handover_poll) on the
//! in-process memory:// backend and against the test server. Assertions are on what the
//! observer reports and in which order, never on durations: every wait has a deadline
//! about ten times what it should take.

mod common;

use common::{unique_key, wait_for};
use mongoelector::testing::{self, FakeClock};
use mongoelector::{Client, Elector, Error, LeaderObserver, LeaderState, LeaderStatus, Locker};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

const INTERVAL: Duration = Duration::from_millis(50);

fn memory_client(name: &str) -> Client {
    Client::new(&format!("memory://{}", unique_key(name)), "").expect("memory client")
}

fn observer(c: &Client, key: &str) -> LeaderObserver {
    LeaderObserver::builder(c, key)
        .interval(INTERVAL)
        .build()
        .expect("LeaderObserver")
}

fn next(o: &LeaderObserver, timeout: Duration) -> LeaderState {
    match o.recv_timeout(timeout) {
        Ok(s) => s,
        Err(e) => panic!("no leader state within {timeout:?}: {e:?}"),
    }
}

/// An elector whose loop runs and has polled once (its status document exists: it can
/// be a transfer target), with its uuid and a count of its on_leader_loss calls.
fn started(
    c: &Client,
    key: &str,
    ttl: Duration,
    handover_poll: Option<Option<Duration>>,
) -> (Elector, String, Arc<AtomicUsize>) {
    let (tx, rx) = channel();
    let losses = Arc::new(AtomicUsize::new(0));
    let l = losses.clone();
    let mut b = Elector::builder(c, key)
        .ttl(ttl)
        .on_loop(move || {
            let _ = tx.send(());
        })
        .on_leader_loss(move || {
            l.fetch_add(1, Ordering::SeqCst);
        });
    if let Some(p) = handover_poll {
        b = b.handover_poll(p);
    }
    let e = b.build().expect("Elector");
    e.start().unwrap();
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the elector did not poll within 10 s");
    let uuid = e.uuid().unwrap();
    (e, uuid, losses)
}

fn wait_leader(e: &Elector, timeout: Duration) -> i64 {
    wait_for("leadership", timeout, || e.is_leader().unwrap());
    let f = e.fence().unwrap();
    assert!(f > 0, "leader's fence {f}");
    f
}

fn assert_leader(s: &LeaderState, uuid: &str, fence: i64) {
    let l = s
        .leader
        .as_ref()
        .unwrap_or_else(|| panic!("nobody leads: {s:?}, want {uuid}"));
    assert_eq!((l.uuid.as_str(), l.fence), (uuid, fence), "{s:?}");
    assert_eq!(l.pid, std::process::id() as i64, "{s:?}");
    assert!(!l.host.is_empty(), "{s:?}");
    assert_eq!(s.status, LeaderStatus::Leads, "{s:?}");
    assert!(s.expires_at.unwrap() > s.observed_at, "{s:?}");
    assert!(s.handover_to.is_none(), "{s:?}");
}

fn assert_pending(s: &LeaderState, target: &str, fence: i64) {
    assert_eq!(s.status, LeaderStatus::HandoverPending, "{s:?}");
    assert!(
        s.leader.is_none(),
        "nobody leads while a hand-over is pending: {s:?}"
    );
    let t = s.handover_to.as_ref().expect("the target");
    assert_eq!((t.uuid.as_str(), t.fence), (target, fence), "{s:?}");
    assert_eq!(t.pid, std::process::id() as i64, "{s:?}");
    assert!(s.expires_at.unwrap() > s.observed_at, "{s:?}");
}

/// nobody -> A -> (transfer) B -> (resign) A -> (stop) nobody.
fn transfer_and_resign(c: &Client) {
    let ttl = Duration::from_secs(2);
    let key = unique_key("observe");
    let o = observer(c, &key);
    let first = next(&o, Duration::from_secs(10));
    assert!(!first.has_leader() && first.uuid().is_none(), "{first:?}");
    let now = std::time::SystemTime::now();
    let skew = (first.observed_at.as_millis()
        - mongoelector::Timestamp::from_system_time(now).as_millis())
    .abs();
    assert!(skew < 60_000, "observed_at {:?}", first.observed_at);

    let (a, auuid, a_losses) = started(c, &key, ttl, None);
    let fa = wait_leader(&a, Duration::from_secs(10));
    assert_leader(&next(&o, Duration::from_secs(10)), &auuid, fa);
    let (b, buuid, b_losses) = started(c, &key, ttl, None);
    assert_leader(&o.read().unwrap(), &auuid, fa);

    // Refused: from a follower, to itself, to nobody, to a uuid that never reported.
    for (what, r) in [
        ("from a follower", b.transfer(&auuid)),
        ("to itself", a.transfer(&auuid)),
        ("to nobody", a.transfer("")),
        ("to a stranger", a.transfer("no-such-member")),
        ("NUL", a.transfer("a\0b")),
    ] {
        assert!(
            matches!(r, Err(Error::InvalidArgument(_))),
            "transfer {what}: {r:?}"
        );
    }
    assert!(matches!(
        a.resign(Some(Duration::from_secs_f64(2e9))),
        Err(Error::InvalidArgument(_))
    ));
    assert!(a.is_leader().unwrap() && a.fence().unwrap() == fa);

    // transfer: A's term ends before the call returns; the observer shows the hand-over
    // to B pending (nobody leads; B named as the target with the next token) until B has
    // taken it, then B with that token. (A read may miss the pending state when B takes
    // the hand-over within one interval.)
    a.transfer(&buuid).unwrap();
    assert!(!a.is_leader().unwrap());
    assert_eq!(a_losses.load(Ordering::SeqCst), 1);
    let mut s = next(&o, ttl * 10);
    if s.status == LeaderStatus::HandoverPending {
        assert_pending(&s, &buuid, fa + 1);
        s = next(&o, ttl * 10);
    }
    assert_leader(&s, &buuid, fa + 1);
    assert_eq!(wait_leader(&b, ttl * 10), fa + 1);

    // resign for longer than the test: A takes over, newer token ("nobody" may show).
    b.resign(Some(Duration::from_secs(60))).unwrap();
    assert!(!b.is_leader().unwrap());
    assert_eq!(b_losses.load(Ordering::SeqCst), 1);
    let fa2 = wait_leader(&a, ttl * 10);
    assert!(fa2 > fa + 1, "A's new token {fa2} <= B's {}", fa + 1);
    s = next(&o, Duration::from_secs(10));
    if !s.has_leader() {
        assert_eq!(s.status, LeaderStatus::NoLeader, "{s:?}");
        s = next(&o, Duration::from_secs(10));
    }
    assert_leader(&s, &auuid, fa2);

    // Every node stops: the observer reports that nobody leads, then nothing more.
    a.stop().unwrap();
    b.stop().unwrap();
    let last = next(&o, ttl * 10);
    assert!(!last.has_leader(), "{last:?}");
    assert_eq!(
        (last.status, last.expires_at),
        (LeaderStatus::NoLeader, None)
    );
    assert!(!o.read().unwrap().has_leader());
    o.close();
    assert_eq!(o.recv(), None, "a report after the last change and close()");
}

/// handover_poll reaches the library: with a 60 s ttl (default look every 15 s) a
/// target looking every 50 ms takes a hand-over at once; with the looks off it has not
/// taken it a while later: the observer shows it pending, not leading.
fn handover_poll(c: &Client) {
    let ttl = Duration::from_secs(60);
    let key = unique_key("peek");
    let (a, _, _) = started(c, &key, ttl, None);
    let fa = wait_leader(&a, Duration::from_secs(10));
    let (fast, fast_uuid, _) = started(c, &key, ttl, Some(Some(Duration::from_millis(50))));
    let (off, off_uuid, _) = started(c, &key, ttl, Some(None));
    a.transfer(&fast_uuid).unwrap();
    // At the default (15 s after its first poll) it would not lead within 5 s.
    assert_eq!(wait_leader(&fast, Duration::from_secs(5)), fa + 1);
    fast.transfer(&off_uuid).unwrap();
    let o = LeaderObserver::new(c, &key).unwrap();
    assert_pending(&o.read().unwrap(), &off_uuid, fa + 2);
    std::thread::sleep(Duration::from_millis(1500)); // negative check: nothing may happen
    assert!(
        !off.is_leader().unwrap(),
        "a target without looks took over at once"
    );
    assert_pending(&o.read().unwrap(), &off_uuid, fa + 2);
}

/// On a fake clock: the holder's lease ends while every read fails; the observer reports
/// `Unknown` at that instant (no read needed), carrying the lease's end; once the
/// backend answers again, nobody leads.
#[test]
fn observer_reports_unknown_when_the_lease_ends_unseen() {
    let start = std::time::UNIX_EPOCH + Duration::from_secs(1_893_456_000);
    let clock = FakeClock::new(start).expect("FakeClock::new");
    let uri = clock.memory_uri(None).expect("memory_uri");
    let c = Client::new(&uri, "").expect("Client::new");
    let l = Locker::builder(&c, "svc")
        .collection("elector.locks")
        .ttl(Duration::from_secs(5))
        .build()
        .expect("locker");
    let guard = l.try_acquire().expect("try_acquire");
    let o = observer(&c, "svc");
    clock.settle().unwrap();
    let led = next(&o, Duration::from_secs(10));
    assert_eq!(led.status, LeaderStatus::Leads, "{led:?}");
    let end = led.expires_at.expect("the lease's end").as_millis();
    let now = mongoelector::Timestamp::from_system_time(clock.now()).as_millis();
    assert!(end > now && end <= now + 5000, "{led:?}");
    testing::set_unavailable(&uri, true).unwrap();
    clock
        .advance(Duration::from_millis((end - now - 100) as u64))
        .unwrap();
    assert!(o.try_recv().is_err(), "a report while the lease still runs");
    clock.advance(Duration::from_millis(200)).unwrap();
    let gone = next(&o, Duration::from_secs(10));
    assert_eq!(gone.status, LeaderStatus::Unknown, "{gone:?}");
    assert!(
        gone.leader.is_none() && gone.handover_to.is_none(),
        "{gone:?}"
    );
    assert_eq!(gone.expires_at, led.expires_at);
    testing::set_unavailable(&uri, false).unwrap();
    clock.advance(Duration::from_secs(1)).unwrap();
    assert_eq!(
        next(&o, Duration::from_secs(10)).status,
        LeaderStatus::NoLeader
    );
    o.close();
    drop(guard);
}

/// Runs `f` on memory:// and, when MONGOELECTOR_TEST_URI is set, on the server.
fn on_each_backend(name: &str, f: impl Fn(&Client)) {
    f(&memory_client(name));
    if let Some(c) = common::test_client() {
        f(&c);
    }
}

#[test]
fn observe_transfer_and_resign() {
    on_each_backend("observe", transfer_and_resign);
}

#[test]
fn handover_poll_reaches_the_elector() {
    on_each_backend("peek", handover_poll);
}

#[test]
fn observer_arguments_reads_and_the_end_of_the_stream() {
    let c = memory_client("args");
    let interval = |d| LeaderObserver::builder(&c, "k").interval(d).build();
    for (what, r) in [
        ("empty key", LeaderObserver::new(&c, "")),
        ("NUL in key", LeaderObserver::new(&c, "a\0b")),
        ("zero interval", interval(Duration::ZERO)),
        ("too long", interval(Duration::from_secs(2_000_000))),
    ] {
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{what}: {r:?}");
    }

    let o = Arc::new(observer(&c, "k"));
    // A thread iterating the stream ends when another closes the observer.
    let (tx, rx) = channel();
    let reader = {
        let o = o.clone();
        std::thread::spawn(move || {
            let mut n = 0;
            for s in o.iter() {
                n += 1;
                tx.send(s).unwrap();
            }
            n
        })
    };
    let s = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("first state");
    assert!(!s.has_leader(), "{s:?}");
    assert!(!o.read().unwrap().has_leader());
    let t0 = Instant::now();
    o.close();
    assert_eq!(reader.join().unwrap(), 1);
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert!(matches!(o.read(), Err(Error::InvalidArgument(_))));
    assert_eq!(
        o.recv_timeout(Duration::from_millis(10)),
        Err(RecvTimeoutError::Disconnected)
    );
    o.close(); // idempotent

    // By value: take what is needed, the observer is freed with the iterator.
    let first: Vec<LeaderState> = observer(&c, "k2").take(1).collect();
    assert_eq!(first.len(), 1);
    assert!(!first[0].has_leader());
}
