//! The testing kit (`mongoelector::testing`): leases, stolen locks and elections on
//! `memory://` backends driven by a `FakeClock`. No server, no sleeps: every instant
//! asserted is fake time.

use mongoelector::testing::{self, FakeClock};
use mongoelector::{AcquireOptions, Client, Elector, Error, LeaseGuard, Locker};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// 2030-01-01T00:00:00Z
fn start() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_893_456_000)
}

/// A fake clock with a fresh memory:// backend attached, and a client on it.
fn world() -> (FakeClock, String, Client) {
    let clock = FakeClock::new(start()).expect("FakeClock::new");
    let uri = clock.memory_uri(None).expect("memory_uri");
    let client = Client::new(&uri, "").expect("Client::new");
    (clock, uri, client)
}

fn locker(client: &Client, key: &str, ttl_s: u64) -> Locker {
    Locker::builder(client, key)
        .ttl(Duration::from_secs(ttl_s))
        .build()
        .expect("locker")
}

const MS: Duration = Duration::from_millis(1);

/// A lease on "job" on a fresh fake world, and a second locker of the key: a peer, or a
/// thief. Fields drop in order: the lease, the other locker, then the clock.
struct HeldLease {
    lease: LeaseGuard,
    other: Locker,
    uri: String,
    clock: FakeClock,
}

fn held_lease(ttl_s: u64) -> HeldLease {
    let (clock, uri, client) = world();
    let lease = locker(&client, "job", ttl_s).hold(None).unwrap();
    let other = locker(&client, "job", ttl_s);
    HeldLease {
        lease,
        other,
        uri,
        clock,
    }
}

#[test]
fn a_lease_lives_an_hour_then_is_lost_exactly_at_its_deadline() {
    let w = held_lease(15);
    let (clock, uri, lease, peer) = (&w.clock, &w.uri, &w.lease, &w.other);
    clock.advance(Duration::from_secs(3600)).unwrap();
    assert!(!lease.is_lost(), "lost within an hour of renewals");
    // (The renewal counter of stats() is process-wide: the other tests of this binary run
    // at the same time. The C and Go tests count the hour's 720 renewals.)
    let info = peer.current().unwrap().expect("held");
    let expire = info.expire.to_system_time();
    assert_eq!(
        expire,
        clock.now() + Duration::from_secs(15),
        "renewed just now: a full ttl ahead"
    );

    // Cut off: lost at lease end minus ttl/10, not a millisecond before.
    let deadline = expire - Duration::from_millis(1500);
    testing::set_unavailable(uri, true).unwrap();
    clock
        .advance(deadline.duration_since(clock.now()).unwrap() - MS)
        .unwrap();
    assert!(!lease.is_lost(), "lost 1 ms before its renew deadline");
    clock.advance(MS).unwrap();
    assert!(lease.is_lost(), "not lost at its renew deadline");
    assert_eq!(clock.now(), deadline);
    // wait_lost is in fake time: with a zero timeout it answers at once.
    assert!(lease.wait_lost(Some(Duration::ZERO)).unwrap());
    testing::set_unavailable(uri, false).unwrap();
}

#[test]
fn a_stolen_lock_is_lost_at_the_next_renewal_not_before() {
    let HeldLease {
        lease,
        other: thief,
        clock,
        ..
    } = held_lease(9);
    clock.advance(Duration::from_secs(6)).unwrap(); // two renewals: the schedule runs from the last
    let stolen = thief
        .acquire_with(&AcquireOptions::new().blocking(false).force(true))
        .unwrap();
    assert!(stolen.fence() > lease.fence());
    clock.advance(Duration::from_millis(2999)).unwrap();
    assert!(
        !lease.is_lost(),
        "lost before its next renewal (every ttl/3 = 3 s)"
    );
    clock.advance(MS).unwrap();
    assert!(
        lease.is_lost(),
        "the renewal at 9 s did not find the lock taken"
    );
    assert_eq!(clock.elapsed(), Duration::from_secs(9));
    assert!(thief.owned().unwrap(), "the thief keeps the lock");
    drop(lease);
    assert!(
        thief.owned().unwrap(),
        "dropping a lost lease releases nothing"
    );
    stolen.release().unwrap();
}

/// An elector of ttl 10 s on `key`, with counters of its on_leader and on_leader_loss.
fn counting_elector(client: &Client, key: &str) -> (Elector, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let (led, lost) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (l1, l2) = (led.clone(), lost.clone());
    let e = Elector::builder(client, key)
        .ttl(Duration::from_secs(10))
        .on_leader(move || {
            l1.fetch_add(1, Ordering::SeqCst);
        })
        .on_leader_loss(move || {
            l2.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    (e, led, lost)
}

#[test]
fn a_follower_takes_over_within_half_a_ttl_of_a_force_expire() {
    let (clock, uri, client) = world();
    let (a, a_led, a_lost) = counting_elector(&client, "svc");
    let (b, b_led, b_lost) = counting_elector(&client, "svc");
    a.start().unwrap();
    clock.settle().unwrap();
    assert_eq!(clock.elapsed(), Duration::ZERO);
    assert!(
        a.is_leader().unwrap(),
        "the first elector leads once settled"
    );
    b.start().unwrap();
    clock.advance(Duration::from_secs(600)).unwrap();
    assert!(a.is_leader().unwrap() && !b.is_leader().unwrap());
    let fa = a.fence().unwrap();

    assert!(testing::force_expire(&uri, Some("elector.locks"), "svc").unwrap());
    assert!(
        a.is_leader().unwrap(),
        "force_expire happens behind the leader's back"
    );
    let t0 = clock.elapsed();
    let (mut b_at, mut a_off_at) = (None, None);
    for _ in 0..50 {
        clock.advance(Duration::from_millis(100)).unwrap();
        if b_at.is_none() && b.is_leader().unwrap() {
            b_at = Some(clock.elapsed() - t0);
        }
        if a_off_at.is_none() && !a.is_leader().unwrap() {
            a_off_at = Some(clock.elapsed() - t0);
        }
        if b_at.is_some() && a_off_at.is_some() {
            break;
        }
    }
    eprintln!(
        "after force_expire: follower leads at {b_at:?}, leader stepped down at {a_off_at:?}"
    );
    assert!(b_at.is_some(), "no takeover within ttl/2");
    assert!(
        a_off_at.is_some(),
        "the old leader did not step down within ttl/2"
    );
    let n = |c: &AtomicUsize| c.load(Ordering::SeqCst);
    assert_eq!((n(&a_led), n(&a_lost)), (1, 1));
    assert_eq!((n(&b_led), n(&b_lost)), (1, 0));
    assert!(b.fence().unwrap() > fa);
    clock.advance(Duration::from_secs(60)).unwrap();
    assert!(b.is_leader().unwrap() && !a.is_leader().unwrap());
    a.stop().unwrap();
    b.stop().unwrap();
}

#[test]
fn a_blocked_callback_is_reported_not_hung() {
    let clock = FakeClock::with_settle_timeout(start(), Duration::from_millis(200)).unwrap();
    let uri = clock.memory_uri(None).unwrap();
    let client = Client::new(&uri, "").unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let rx = std::sync::Mutex::new(rx);
    let e = Elector::builder(&client, "svc")
        .ttl(Duration::from_secs(10))
        .on_leader(move || {
            // Blocks until the test thread says so (a safety net of 30 s).
            let _ = rx.lock().unwrap().recv_timeout(Duration::from_secs(30));
        })
        .build()
        .unwrap();
    e.start().unwrap();
    match clock.settle() {
        Err(Error::Timeout(d)) => assert!(
            d.message().contains("did not become idle within 200 ms"),
            "{}",
            d.message()
        ),
        other => panic!("settle with a blocked callback: {other:?}"),
    }
    tx.send(()).unwrap();
    clock.settle().unwrap();
    assert!(e.is_leader().unwrap());
    e.stop().unwrap();
}

#[test]
fn clock_arguments_and_levers() {
    let clock = FakeClock::new(start()).unwrap();
    assert_eq!((clock.now(), clock.elapsed()), (start(), Duration::ZERO));
    clock.advance(Duration::from_millis(1500)).unwrap();
    assert_eq!(clock.now(), start() + Duration::from_millis(1500));
    assert_eq!(clock.elapsed(), Duration::from_millis(1500));
    clock.advance(Duration::from_micros(400)).unwrap(); // rounded to the millisecond
    assert_eq!(clock.elapsed(), Duration::from_millis(1500));
    clock.jump_wall(-60_000).unwrap();
    assert_eq!(
        clock.now(),
        start() + Duration::from_millis(1500) - Duration::from_secs(60)
    );
    assert_eq!(
        clock.elapsed(),
        Duration::from_millis(1500),
        "intervals do not jump"
    );
    assert!(matches!(
        clock.jump_wall(-2_000_000_000_000),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        clock.advance(Duration::MAX),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        FakeClock::new(UNIX_EPOCH - Duration::from_secs(1)),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        FakeClock::with_settle_timeout(start(), Duration::from_secs(7200)),
        Err(Error::InvalidArgument(_))
    ));
    assert!(format!("{clock:?}").contains("elapsed: 1.5s"));

    // Names: fresh ones differ; one may be attached to its clock again, not to another
    // clock, nor once a client opened it (on the system clock).
    let u1 = clock.memory_uri(None).unwrap();
    let u2 = clock.memory_uri(None).unwrap();
    assert!(u1 != u2 && u1.starts_with("memory://"));
    let name = u1.trim_start_matches("memory://");
    assert_eq!(clock.memory_uri(Some(name)).unwrap(), u1);
    let other = FakeClock::new(start()).unwrap();
    assert!(matches!(
        other.memory_uri(Some(name)),
        Err(Error::InvalidArgument(_))
    ));
    let sys_name = format!("rust-kit-system-clock-{}", std::process::id());
    let _system = Client::new(&format!("memory://{sys_name}"), "").unwrap();
    match clock.memory_uri(Some(&sys_name)) {
        Err(Error::InvalidArgument(d)) => assert!(d.message().contains("another clock")),
        other => panic!("attach of a name open on the system clock: {other:?}"),
    }
    assert!(matches!(
        clock.memory_uri(Some("bad\0name")),
        Err(Error::InvalidArgument(_))
    ));

    // The levers.
    assert!(matches!(
        testing::force_expire("mongodb://127.0.0.1:1/", None, "k"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        testing::force_expire(&u1, Some(""), "k"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(!testing::force_expire(&u1, None, "free").unwrap());
    let unused = format!("memory://rust-kit-unused-{}", std::process::id());
    assert!(matches!(
        testing::set_unavailable(&unused, true),
        Err(Error::InvalidArgument(_))
    ));
    testing::set_unavailable(&unused, false).unwrap();
    let client = Client::new(&u1, "").unwrap();
    let l = locker(&client, "k", 60);
    testing::set_unavailable(&u1, true).unwrap();
    assert!(matches!(l.try_acquire(), Err(Error::Unavailable(_))));
    testing::set_unavailable(&u1, false).unwrap();
    let g = l.try_acquire().unwrap();
    assert!(testing::force_expire(&u1, None, "k").unwrap());
    assert!(!l.locked().unwrap(), "expired now");
    drop(g);
}

#[test]
fn a_blocking_acquire_times_out_in_fake_time() {
    let (clock, _uri, client) = world();
    let holder = locker(&client, "job", 20);
    let other = locker(&client, "job", 20);
    let held = holder.acquire(None).expect("holder acquires");
    let idle = clock.wait_for_waiters(0, Duration::from_secs(10)).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            let outcome = other
                .acquire(Some(Duration::from_secs(5)))
                .map(|g| g.fence());
            tx.send(outcome).unwrap();
        });
        clock
            .wait_for_waiters(idle + 1, Duration::from_secs(30))
            .expect("the acquire waits on the clock");
        clock.advance(Duration::from_millis(4999)).unwrap();
        assert!(rx.try_recv().is_err(), "returned before its fake deadline");
        clock.advance(MS).unwrap();
        match rx.recv().unwrap() {
            Err(Error::Timeout(_)) => {}
            other => panic!("acquire: {other:?}, want Error::Timeout"),
        }
    });
    assert!(matches!(
        clock.wait_for_waiters(idle + 50, Duration::from_millis(10)),
        Err(Error::Timeout(_))
    ));
    drop(held);
}
