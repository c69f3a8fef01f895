//! Keep-alive leases (`Locker::hold`) against a real server and on the embedded SQLite
//! backend.

mod common;

use common::{locker, unique_key};
use mongoelector::{AcquireOptions, CancelToken, Client, Error, Locker};
use std::time::{Duration, Instant};

fn sqlite_client() -> (Client, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!(
        "rs-lease-{}-{}",
        std::process::id(),
        unique_key("d")
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let uri = format!("sqlite://{}", dir.join("locks.db").display());
    (Client::new(&uri, "").expect("sqlite client"), dir)
}

fn suite(c: &Client) {
    let ttl = Duration::from_secs(1);
    let key = unique_key("lease");
    let a = locker(c, &key, ttl);
    let b = locker(c, &key, ttl);

    // Held and kept alive while the holder is idle for 3 ttl.
    let lease = a.hold(Some(Duration::from_secs(5))).unwrap();
    let fence = lease.fence();
    assert!(fence > 0);
    assert_eq!(a.fence().unwrap(), fence);
    assert!(
        matches!(a.try_hold(), Err(Error::InvalidArgument(_))),
        "one lease per locker"
    );
    assert!(!lease.wait_lost(Some(Duration::from_millis(100))).unwrap());
    std::thread::sleep(3 * ttl);
    assert!(!lease.is_lost());
    assert!(a.owned().unwrap());
    assert!(matches!(b.try_hold(), Err(Error::LockHeld(_))));
    let t0 = Instant::now();
    assert!(matches!(
        b.hold(Some(Duration::from_millis(300))),
        Err(Error::Timeout(_))
    ));
    assert!(t0.elapsed() >= Duration::from_millis(290));

    // Drop releases: b takes it at once, with a greater token.
    drop(lease);
    assert!(!a.locked().unwrap());
    let lb = b.try_hold().unwrap();
    assert!(lb.fence() > fence);

    // Taken by force: b's lease is lost within about ttl/3, for good.
    let g3 = a
        .acquire_with(&AcquireOptions::new().blocking(false).force(true))
        .unwrap();
    let f3 = g3.fence();
    let t0 = Instant::now();
    assert!(lb.wait_lost(Some(3 * ttl)).unwrap());
    assert!(
        t0.elapsed() < ttl / 3 + Duration::from_millis(500),
        "{:?}",
        t0.elapsed()
    );
    assert!(lb.is_lost());
    assert!(lb.wait_lost(None).unwrap());
    // Dropping a lost lease releases nothing: a keeps its hold.
    drop(lb);
    assert!(a.owned().unwrap());
    assert_eq!(a.fence().unwrap(), f3);
    g3.release().unwrap();

    // The guard keeps its locker's handle alive.
    let lease = {
        let l = Locker::builder(c, &unique_key("own"))
            .ttl(ttl)
            .build()
            .unwrap();
        l.try_hold().unwrap()
    };
    assert!(!lease.is_lost());
    std::thread::spawn(move || assert!(!lease.is_lost()))
        .join()
        .unwrap();

    // A cancel token stops the wait for the lock of a lease.
    let key = unique_key("lease-cancel");
    let holder = locker(c, &key, ttl);
    let _held = holder.hold(None).unwrap();
    let waiter = locker(c, &key, ttl);
    let cancel = CancelToken::new();
    let canceller = cancel.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        canceller.cancel();
    });
    let t0 = Instant::now();
    let r = waiter.hold_with(&AcquireOptions::new().cancel(&cancel));
    assert!(matches!(r, Err(Error::Cancelled(_))), "{:?}", r.err());
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    t.join().unwrap();
}

#[test]
fn lease_on_sqlite() {
    let (c, dir) = sqlite_client();
    suite(&c);
    drop(c);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn lease_on_the_server() {
    let Some(c) = common::test_client() else {
        return;
    };
    suite(&c);
}
