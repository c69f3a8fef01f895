//! Locker against a real server, including contention between OS processes.

mod common;

use common::{client, locker, unique_key, Helper};
use mongoelector::{AcquireOptions, Error};
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

    let f1 = a.acquire(Some(Duration::from_secs(5))).unwrap();
    assert!(f1 > 0);
    assert_eq!(a.fence().unwrap(), f1);
    assert!(a.owned().unwrap() && !b.owned().unwrap() && b.locked().unwrap());
    let info = b.current().unwrap().expect("held lock has a document");
    assert_eq!(info.uuid, a.uuid().unwrap());
    assert_eq!(info.pid, std::process::id() as i64);
    assert_eq!(info.fence, f1);
    assert!(info.expire > info.created);
    assert!(matches!(b.try_acquire(), Err(Error::LockHeld(_))));
    assert_eq!(b.fence().unwrap(), 0);

    let exp = a.touch().unwrap().expect("holder renews");
    assert!(exp >= info.expire);
    assert_eq!(b.touch().unwrap(), None);

    a.release().unwrap();
    a.release().unwrap(); // not holding is not an error
    assert_eq!(b.current().unwrap(), None);
    let f2 = b.try_acquire().unwrap();
    assert!(f2 > f1, "{f2} after {f1}");
    let f3 = a
        .acquire_with(&AcquireOptions {
            blocking: false,
            force: true,
            ..Default::default()
        })
        .unwrap();
    assert!(f3 > f2, "forced takeover token {f3} after {f2}");
    assert!(!b.owned().unwrap());
    b.force_release().unwrap();
    assert!(!a.locked().unwrap());
    let off = a.verify_time().unwrap();
    assert!(off.abs() < 1.0, "offset {off}");
}

#[test]
fn short_ttl_expires_without_renewal() {
    let Some(c) = common::test_client() else {
        return;
    };
    let key = unique_key("expiry");
    let a = locker(&c, &key, Duration::from_secs(1));
    let b = locker(&c, &key, Duration::from_secs(1));
    let fa = a.try_acquire().unwrap();
    assert!(matches!(b.try_acquire(), Err(Error::LockHeld(_))));
    std::thread::sleep(Duration::from_millis(1300));
    let fb = b
        .try_acquire()
        .expect("free at expiry, without any cleaner");
    assert!(fb > fa);
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
            m.contains(&h.pid().to_string()),
            "{m:?} lacks pid {}",
            h.pid()
        ),
        other => panic!("try_acquire while another process holds: {other:?}"),
    }
    let info = l.current().unwrap().unwrap();
    assert_eq!((info.pid, info.fence), (h.pid() as i64, child_fence));

    let start = Instant::now();
    let r = l.acquire_with(&AcquireOptions {
        timeout: Some(Duration::from_millis(500)),
        step: Duration::from_millis(50),
        ..Default::default()
    });
    assert!(matches!(r, Err(Error::Timeout(_))), "{r:?}");
    let el = start.elapsed();
    assert!(
        el >= Duration::from_millis(450) && el < Duration::from_secs(3),
        "500 ms timeout took {el:?}"
    );

    let fence = l.acquire(Some(Duration::from_secs(30))).unwrap();
    assert!(
        held_at.elapsed() >= Duration::from_millis(2500),
        "acquired while the other process held it"
    );
    assert!(fence > child_fence);
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
    let fence = l
        .acquire_with(&AcquireOptions {
            timeout: Some(Duration::from_secs(15)),
            step: Duration::from_millis(50),
            ..Default::default()
        })
        .unwrap();
    let el = acquired_at.elapsed();
    eprintln!("took over {el:?} after the killed holder acquired (ttl {ttl:?})");
    assert!(
        el + Duration::from_millis(300) >= ttl && el <= ttl + Duration::from_secs(2),
        "takeover after {el:?}"
    );
    assert!(fence > child_fence);
}

#[test]
fn cancel_handle_stops_a_blocking_acquire() {
    let Some(c) = common::test_client() else {
        return;
    };
    let key = unique_key("cancel");
    let holder = locker(&c, &key, Duration::from_secs(20));
    holder.try_acquire().unwrap();
    let l = Arc::new(locker(&c, &key, Duration::from_secs(20)));
    let cancel = l.cancel_handle();
    let waiter = {
        let l = Arc::clone(&l);
        std::thread::spawn(move || {
            let start = Instant::now();
            (l.acquire(None), start)
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let cancelled_at = Instant::now();
    cancel.cancel().unwrap();
    let (r, _) = waiter.join().unwrap();
    assert!(matches!(r, Err(Error::Cancelled(_))), "{r:?}");
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(1),
        "cancel took {:?}",
        cancelled_at.elapsed()
    );

    // The handle outlives the locker safely (it keeps the C handle alive).
    drop(l);
    cancel.cancel().unwrap();

    // Holder released: a new locker acquires normally.
    holder.release().unwrap();
    let l2 = locker(&c, &key, Duration::from_secs(20));
    assert!(l2.acquire(Some(Duration::from_secs(5))).unwrap() > 0);
}

#[test]
fn one_locker_used_from_many_threads() {
    let Some(c) = common::test_client() else {
        return;
    };
    let l = locker(&c, &unique_key("threads"), Duration::from_secs(10));
    let fence = l.try_acquire().unwrap();
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
    l.release().unwrap();
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
        .expect("locker works after its Client handle was dropped");
    l.release().unwrap();
    let (name, version) = client(&uri).server_info().unwrap();
    assert!(!name.is_empty() && !version.is_empty());
}
