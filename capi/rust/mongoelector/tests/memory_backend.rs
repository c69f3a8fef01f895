//! The testing kit from Rust: `memory://NAME` is an in-process backend with the semantics
//! of the MongoDB one, so a test of "what does my code do when it loses the lock" needs no
//! server. Every client of one name in this process shares its locks.

use mongoelector::{AcquireOptions, Client, Error, Locker};
use std::time::Duration;

#[test]
fn a_stolen_lease_is_reported_lost_without_a_server() {
    let client = Client::new("memory://rust-testing-kit", "").expect("memory client");
    let holder = Locker::builder(&client, "job")
        .ttl(Duration::from_secs(1))
        .build()
        .unwrap();
    let lease = holder.hold(Some(Duration::from_secs(5))).unwrap();

    // Another handle on the same name sees the lock; another name does not.
    let other = Locker::new(&client, "job").unwrap();
    assert!(matches!(other.try_acquire(), Err(Error::LockHeld(_))));
    let elsewhere = Client::new("memory://rust-testing-kit-2", "").unwrap();
    drop(
        Locker::new(&elsewhere, "job")
            .unwrap()
            .try_acquire()
            .expect("another world"),
    );

    // The test forces the lock away: the lease is lost at its next renewal.
    let thief = other
        .acquire_with(&AcquireOptions::new().blocking(false).force(true))
        .unwrap();
    assert!(lease.wait_lost(Some(Duration::from_secs(5))).unwrap());
    assert!(thief.fence() > lease.fence());
}
