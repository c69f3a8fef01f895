//! Locker against a real server, including contention between OS processes.

mod common;

use common::{client, locker, unique_key, Helper};
use mongoelector::{AcquireOptions, CancelToken, Error, ErrorKind, Locker, Timestamp};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Entry point of re-executed helper processes; a no-op in a normal run.
#[test]
fn helper_process() {
    if common::run_helper() {
        std::process::exit(0);
    }
}

#[test]
fn acquire_release_touch_and_fence() {
    let Some(c) = common::test_client() else {
        return;
    };
    let key = unique_key("basic");
    let a = locker(&c, &key, Duration::from_secs(5));
    let b = locker(&c, &key, Duration::from_secs(5));

    let g1 = a.acquire(Some(Duration::from_secs(5))).unwrap();
    let f1 = g1.fence();
    assert!(f1 > 0);
    assert_eq!(a.fence().unwrap(), f1);
    assert!(a.owned().unwrap() && !b.owned().unwrap() && b.locked().unwrap());
    let info = b.current().unwrap().expect("held lock has a document");
    assert_eq!(info.uuid, a.uuid().unwrap());
    assert_eq!(info.pid, std::process::id() as i64);
    assert_eq!(info.fence, f1);
    assert!(!info.host.is_empty());
    assert!(info.expire > info.created);
    let now = Timestamp::from(std::time::SystemTime::now()).as_millis();
    assert!((info.created.as_millis() - now).abs() < 60_000, "{info:?}");
    assert!(matches!(b.try_acquire(), Err(Error::LockHeld(_))));
    assert_eq!(b.fence().unwrap(), 0);

    let exp = g1.touch().unwrap().expect("holder renews");
    assert!(exp >= info.expire);
    assert_eq!(b.touch().unwrap(), None);

    g1.release().unwrap();
    a.release().unwrap(); // not holding is not an error
    assert_eq!(b.current().unwrap(), None);
    let g2 = b.try_acquire().unwrap();
    let f2 = g2.fence();
    assert!(f2 > f1, "{f2} after {f1}");
    let g3 = a
        .acquire_with(&AcquireOptions::new().blocking(false).force(true))
        .unwrap();
    assert!(
        g3.fence() > f2,
        "forced takeover token {} after {f2}",
        g3.fence()
    );
    assert!(!b.owned().unwrap());
    drop(g2); // b's lost hold: its release touches nothing (fenced)
    assert!(a.owned().unwrap());
    b.force_release().unwrap();
    assert!(!a.locked().unwrap());
    drop(g3);
    let off = a.verify_time().unwrap();
    assert!(off.abs() < 1.0, "offset {off}");
}

/// Acquires `key` through `l`, shows another process that it is held, then fails with
/// `?` half-way: the guard is dropped by the early return.
fn work_that_fails(l: &Locker, other: &Locker, probe: &mut Helper) -> Result<i64, Error> {
    let guard = l.acquire(Some(Duration::from_secs(10)))?;
    probe.send("try");
    let held = probe.expect("HELD", Duration::from_secs(10));
    assert!(held.contains(&std::process::id().to_string()), "{held}");
    // A real library error, propagated by `?` while the guard is alive.
    let _never = other.try_acquire()?;
    unreachable!("the key is held by {}", guard.fence())
}

#[test]
fn a_guard_dropped_by_question_mark_frees_the_key_for_another_process_at_once() {
    let Some(c) = common::test_client() else {
        return;
    };
    let key = unique_key("guard-drop");
    // ttl 60 s: a release that waited for expiry would be obvious.
    let ttl = Duration::from_secs(60);
    let mut probe = Helper::start_on("probe", &key, ttl, &[]);
    probe.expect("READY", Duration::from_secs(30));
    let l = locker(&c, &key, ttl);
    let other = locker(&c, &key, ttl);
    let fence = l.fence().unwrap();
    assert_eq!(fence, 0);
    let err = work_that_fails(&l, &other, &mut probe).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LockHeld, "{err}");
    // Dropped: released, fenced. Another process takes it with one non-blocking attempt.
    let t0 = Instant::now();
    probe.send("try");
    let child_fence = probe.expect_fence("ACQUIRED");
    let took = t0.elapsed();
    eprintln!("another process acquired {took:?} after the guard was dropped (ttl {ttl:?})");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(child_fence > 0);
    probe.wait_success(Duration::from_secs(10));
    assert_eq!(l.fence().unwrap(), 0, "the locker still thinks it holds");
}

#[test]
fn a_panic_while_holding_releases_the_key() {
    let Some(c) = common::test_client() else {
        return;
    };
    let key = unique_key("guard-panic");
    let ttl = Duration::from_secs(60);
    let mut probe = Helper::start_on("probe", &key, ttl, &[]);
    probe.expect("READY", Duration::from_secs(30));
    let l = locker(&c, &key, ttl);
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            let _guard = l.try_acquire().unwrap();
            panic!("boom while holding the lock");
        })
        .join()
    });
    assert!(r.is_err());
    let t0 = Instant::now();
    probe.send("try");
    probe.expect_fence("ACQUIRED");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
}

#[test]
fn a_guard_releases_only_its_own_hold_and_leak_keeps_it() {
    let Some(c) = common::test_client() else {
        return;
    };
    let key = unique_key("guard-own");
    let a = locker(&c, &key, Duration::from_secs(30));
    let b = locker(&c, &key, Duration::from_secs(30));
    let g1 = a.try_acquire().unwrap();
    a.release().unwrap(); // explicitly, behind the guard's back
    let g2 = a.try_acquire().unwrap();
    assert!(g2.fence() > g1.fence());
    drop(g1); // not its hold any more: g2's stays
    assert!(a.owned().unwrap());
    assert_eq!(a.fence().unwrap(), g2.fence());
    assert!(matches!(b.try_acquire(), Err(Error::LockHeld(_))));
    g2.release().unwrap();
    assert!(!a.locked().unwrap());

    // leak(): held past the guard, until an explicit release (or the ttl).
    let fence = a.try_acquire().unwrap().leak();
    assert!(a.owned().unwrap());
    assert_eq!(a.fence().unwrap(), fence);
    assert!(matches!(b.try_acquire(), Err(Error::LockHeld(_))));
    a.release().unwrap();
    let g = b.try_acquire().unwrap();
    assert!(g.fence() > fence);
    assert_eq!(g.locker().key(), key);
}

#[test]
fn short_ttl_expires_without_renewal() {
    let Some(c) = common::test_client() else {
        return;
    };
    let key = unique_key("expiry");
    let a = locker(&c, &key, Duration::from_secs(1));
    let b = locker(&c, &key, Duration::from_secs(1));
    let fa = a.try_acquire().unwrap().leak();
    assert!(matches!(b.try_acquire(), Err(Error::LockHeld(_))));
    std::thread::sleep(Duration::from_millis(1300));
    let gb = b
        .try_acquire()
        .expect("free at expiry, without any cleaner");
    assert!(gb.fence() > fa);
    assert_eq!(a.touch().unwrap(), None, "an expired holder must not renew");
}

#[test]
fn contention_between_processes() {
    let Some(c) = common::test_client() else {
        return;
    };
    let key = unique_key("contention");
    let mut h = Helper::start_on(
        "hold",
        &key,
        Duration::from_secs(20),
        &[("HELPER_HOLD_MS", "3000".into())],
    );
    let child_fence = h.expect_fence("ACQUIRED");
    let held_at = Instant::now();
    let l = locker(&c, &key, Duration::from_secs(20));
    match l.try_acquire() {
        Err(Error::LockHeld(m)) => assert!(
            m.message().contains(&h.pid().to_string()),
            "{m:?} lacks pid {}",
            h.pid()
        ),
        other => panic!("try_acquire while another process holds: {other:?}"),
    }
    let info = l.current().unwrap().unwrap();
    assert_eq!((info.pid, info.fence), (h.pid() as i64, child_fence));

    let start = Instant::now();
    let r = l.acquire_with(
        &AcquireOptions::new()
            .timeout(Duration::from_millis(500))
            .step(Duration::from_millis(50)),
    );
    assert!(matches!(r, Err(Error::Timeout(_))), "{r:?}");
    let el = start.elapsed();
    assert!(
        el >= Duration::from_millis(450) && el < Duration::from_secs(3),
        "500 ms timeout took {el:?}"
    );

    let guard = l.acquire(Some(Duration::from_secs(30))).unwrap();
    assert!(
        held_at.elapsed() >= Duration::from_millis(2500),
        "acquired while the other process held it"
    );
    assert!(guard.fence() > child_fence);
    h.expect("RELEASED", Duration::from_secs(5));
    h.wait_success(Duration::from_secs(10));
}

#[test]
fn mutual_exclusion_between_processes() {
    let Some(_) = common::test_uri() else { return };
    let key = unique_key("mutex");
    let dir = std::env::temp_dir().join(format!("mongoelector-rs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{key}.txt"));
    std::fs::write(&file, "0\n").unwrap();
    const ROUNDS: usize = 15;
    let env = [
        ("HELPER_FILE", file.display().to_string()),
        ("HELPER_N", ROUNDS.to_string()),
    ];
    let ttl = Duration::from_secs(30);
    let mut hs = vec![
        Helper::start_on("count", &key, ttl, &env),
        Helper::start_on("count", &key, ttl, &env),
    ];
    for h in &mut hs {
        h.expect("DONE", Duration::from_secs(120));
        h.wait_success(Duration::from_secs(10));
    }
    let text = std::fs::read_to_string(&file).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        (2 * ROUNDS).to_string(),
        "lost update: two holders at once"
    );
    assert_eq!(lines.len(), 2 * ROUNDS + 1);
    let mut last = 0i64;
    let mut pids = std::collections::BTreeSet::new();
    for l in &lines[1..] {
        let mut it = l.split_whitespace();
        let f: i64 = it.next().unwrap().parse().unwrap();
        assert!(
            f > last,
            "tokens not increasing in write order: {f} after {last}"
        );
        last = f;
        pids.insert(it.next().unwrap().to_string());
    }
    assert_eq!(pids.len(), 2, "writes from {pids:?}");
}

#[test]
fn expiry_takeover_after_holder_killed() {
    let Some(c) = common::test_client() else {
        return;
    };
    let key = unique_key("takeover");
    let ttl = Duration::from_secs(2);
    let mut h = Helper::start_on("hold", &key, ttl, &[]);
    let child_fence = h.expect_fence("ACQUIRED");
    let acquired_at = Instant::now();
    h.kill();
    let l = locker(&c, &key, Duration::from_secs(10));
    assert!(
        matches!(l.try_acquire(), Err(Error::LockHeld(_))),
        "a killed holder's lock lasts its ttl"
    );
    let guard = l
        .acquire_with(
            &AcquireOptions::new()
                .timeout(Duration::from_secs(15))
                .step(Duration::from_millis(50)),
        )
        .unwrap();
    let el = acquired_at.elapsed();
    eprintln!("took over {el:?} after the killed holder acquired (ttl {ttl:?})");
    assert!(
        el + Duration::from_millis(300) >= ttl && el <= ttl + Duration::from_secs(2),
        "takeover after {el:?}"
    );
    assert!(guard.fence() > child_fence);
}

#[test]
fn a_cancel_token_stops_a_blocking_acquire() {
    let Some(c) = common::test_client() else {
        return;
    };
    let key = unique_key("cancel");
    let holder = locker(&c, &key, Duration::from_secs(20));
    let held = holder.try_acquire().unwrap();
    let l = Arc::new(locker(&c, &key, Duration::from_secs(20)));
    let cancel = CancelToken::new();
    let waiter = {
        let l = Arc::clone(&l);
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            l.acquire_with(&AcquireOptions::new().cancel(&cancel))
                .map(|g| g.fence())
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    // The wait does not hold the locker: other calls on it answer meanwhile.
    let t0 = Instant::now();
    assert!(!l.owned().unwrap() && l.locked().unwrap() && l.current().unwrap().is_some());
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    let cancelled_at = Instant::now();
    cancel.cancel();
    let r = waiter.join().unwrap();
    assert!(matches!(r, Err(Error::Cancelled(_))), "{r:?}");
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(1),
        "cancel took {:?}",
        cancelled_at.elapsed()
    );
    // A cancelled token fails a call given it at once, even with the lock free...
    drop(held);
    let r = l.acquire_with(&AcquireOptions::new().cancel(&cancel));
    assert!(matches!(r, Err(Error::Cancelled(_))), "{r:?}");
    // ...and nothing else: the next acquire without it takes the lock.
    assert!(l.acquire(Some(Duration::from_secs(5))).unwrap().fence() > 0);
}

#[test]
fn a_cancel_with_no_acquire_in_flight_does_not_fail_the_next_acquire() {
    let Some(c) = common::test_client() else {
        return;
    };
    let l = locker(&c, &unique_key("cancel-idle"), Duration::from_secs(20));
    // A call that already returned, then its token is cancelled: no effect on later
    // calls (1.0's locker-wide cancel stayed pending and failed the next acquire).
    let token = CancelToken::new();
    let g = l
        .acquire_with(&AcquireOptions::new().cancel(&token))
        .unwrap();
    g.release().unwrap();
    token.cancel();
    assert!(token.is_cancelled());
    let g = l
        .acquire_with(&AcquireOptions::new().timeout(Duration::from_secs(5)))
        .expect("a cancel with no acquire in flight failed the next acquire");
    drop(g);
    // A per-scope token that is not cancelled does not get in the way either.
    let scope = CancelToken::new();
    let opts = AcquireOptions::new().cancel(&scope);
    for _ in 0..3 {
        l.acquire_with(&opts).unwrap().release().unwrap();
    }
    // The same for a keep-alive lease.
    let lease = l.hold_with(&opts).unwrap();
    assert!(lease.fence() > 0 && !lease.is_lost());
}

#[test]
fn one_locker_used_from_many_threads() {
    let Some(c) = common::test_client() else {
        return;
    };
    let l = locker(&c, &unique_key("threads"), Duration::from_secs(10));
    let guard = l.try_acquire().unwrap();
    let fence = guard.fence();
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..10 {
                    assert!(l.touch().unwrap().is_some(), "holder failed to renew");
                    assert_eq!(l.fence().unwrap(), fence);
                    assert!(l.locked().unwrap() && l.owned().unwrap());
                    assert_eq!(l.current().unwrap().unwrap().fence, fence);
                }
            });
        }
    });
    guard.release().unwrap();
    assert!(!l.locked().unwrap());
}

#[test]
fn lockers_keep_their_client_alive() {
    let Some(uri) = common::test_uri() else {
        return;
    };
    let c = client(&uri);
    let l = locker(&c, &unique_key("client-drop"), Duration::from_secs(5));
    drop(c);
    l.try_acquire()
        .expect("locker works after its Client handle was dropped")
        .release()
        .unwrap();
    let (name, version) = client(&uri).server_info().unwrap();
    assert!(!name.is_empty() && !version.is_empty());
}

#[test]
fn builder_options_reach_the_library() {
    let Some(c) = common::test_client() else {
        return;
    };
    let key = unique_key("builder");
    let coll = format!("rs_builder_{}", std::process::id());
    let a = Locker::builder(&c, &key)
        .collection(&coll)
        .ttl(Duration::from_secs(10))
        .op_timeout(Duration::from_secs(2))
        .delete_on_release(true)
        .timeparanoid(false)
        .max_offset(Duration::from_secs(1))
        .build()
        .unwrap();
    // Another collection: the same key there is another lock.
    let elsewhere = locker(&c, &key, Duration::from_secs(10));
    let g = a.try_acquire().unwrap();
    let g2 = elsewhere.try_acquire().unwrap();
    let same_coll = Locker::builder(&c, &key).collection(&coll).build().unwrap();
    assert!(matches!(same_coll.try_acquire(), Err(Error::LockHeld(_))));
    drop((g, g2));
    // op_timeout above ttl/2 is refused by the library.
    let r = Locker::builder(&c, &key)
        .ttl(Duration::from_secs(2))
        .op_timeout(Duration::from_secs(5))
        .build();
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    // Duration::ZERO: the default per-call timeout.
    Locker::builder(&c, &key)
        .op_timeout(Duration::ZERO)
        .build()
        .unwrap();
}

fn libfaketime() -> Option<String> {
    [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib",
    ]
    .iter()
    .map(|d| format!("{d}/faketime/libfaketime.so.1"))
    .find(|p| std::path::Path::new(p).exists())
}

#[test]
fn clock_offset_errors_keep_the_measured_offset() {
    let Some(_) = common::test_uri() else { return };
    let Some(lib) = libfaketime() else {
        eprintln!("SKIPPED: no libfaketime to skew a helper's clock with");
        return;
    };
    // A helper process whose wall clock runs 3 s ahead (far above max_offset 0.5 s).
    let mut h = Helper::start_on(
        "clock",
        &unique_key("clock"),
        Duration::from_secs(10),
        &[
            ("LD_PRELOAD", lib),
            ("FAKETIME", "+3".into()),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1".into()),
            ("FAKETIME_DONT_RESET", "1".into()),
        ],
    );
    let off: f64 = h.expect("OFFSET", Duration::from_secs(30)).parse().unwrap();
    // Server minus host.
    assert!((off + 3.0).abs() < 0.5, "measured offset {off}");
    // An acquire's time check reports no number (the C call gives none).
    assert_eq!(h.expect("ACQUIRE-OFFSET", Duration::from_secs(30)), "None");
    h.wait_success(Duration::from_secs(10));
}
