//! Error paths that need no server, plus "server down" against a closed port.

mod common;

use mongoelector::{Client, Elector, Error, Locker, LockerOptions};
use std::time::{Duration, Instant};

#[test]
fn bad_uri_is_invalid_argument() {
    assert!(matches!(
        Client::new("not a uri", "db"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        Client::new("mongodb://127.0.0.1:1/\0", "db"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        Client::new("mongodb://127.0.0.1:1/", "d\0b"),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn bad_keys_and_options_are_invalid_argument_without_a_round_trip() {
    let c = Client::new("mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=300", "db").unwrap();
    let long = "k".repeat(1025);
    for key in ["", long.as_str(), "a\0b"] {
        let start = Instant::now();
        let r = Locker::new(&c, key, &LockerOptions::default());
        assert!(
            matches!(r, Err(Error::InvalidArgument(_))),
            "key {key:.10?}: {:?}",
            r.err()
        );
        let r = Elector::builder(&c, key).build();
        assert!(
            matches!(r, Err(Error::InvalidArgument(_))),
            "elector key {key:.10?}: {:?}",
            r.err()
        );
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "rejecting a bad key needed the server"
        );
    }
    let r = Locker::new(&c, "k", &LockerOptions::default().ttl(Duration::ZERO));
    assert!(
        matches!(r, Err(Error::InvalidArgument(_))),
        "ttl 0: {:?}",
        r.err()
    );
    let r = Elector::builder(&c, "k").ttl(Duration::ZERO).build();
    assert!(
        matches!(r, Err(Error::InvalidArgument(_))),
        "elector ttl 0: {:?}",
        r.err()
    );
}

#[test]
fn non_blocking_acquire_rejects_a_timeout() {
    let Some(c) = common::test_client() else {
        return;
    };
    let l = common::locker(&c, &common::unique_key("nbt"), Duration::from_secs(5));
    let r = l.acquire_with(&mongoelector::AcquireOptions {
        blocking: false,
        timeout: Some(Duration::from_secs(1)),
        ..Default::default()
    });
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
}

#[test]
fn server_down_is_unavailable_in_bounded_time() {
    let c = Client::new(
        "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=500&connectTimeoutMS=500",
        "db",
    )
    .unwrap();
    let start = Instant::now();
    let r = c.server_info();
    assert!(
        matches!(r, Err(Error::Unavailable(_))),
        "server_info: {r:?}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "server_info took {:?}",
        start.elapsed()
    );

    let (r, took) = down_locker_try_acquire(&c);
    assert!(matches!(r, Err(Error::Unavailable(_))), "locker: {r:?}");
    assert!(took < Duration::from_secs(10), "locker calls took {took:?}");
}

/// A 2 s ttl locker on `c` (whose server is down) tries to acquire: the result and how
/// long it took.
fn down_locker_try_acquire(c: &Client) -> (mongoelector::Result<i64>, Duration) {
    let start = Instant::now();
    let r = Locker::new(
        c,
        "down",
        &LockerOptions::default().ttl(Duration::from_secs(2)),
    )
    .and_then(|l| l.try_acquire());
    (r, start.elapsed())
}

#[test]
fn errors_display_their_code_and_message() {
    let c = Client::new("mongodb://127.0.0.1:1/", "db").unwrap();
    let e = Locker::new(&c, "", &LockerOptions::default())
        .err()
        .unwrap();
    let s = e.to_string();
    assert!(s.starts_with("MONGOELECTOR_ERR_INVALID_ARGUMENT: "), "{s}");
    assert!(!e.message().is_empty());
}

#[test]
fn server_down_default_timeouts_follow_the_ttl() {
    // No timeouts in the URI: the library bounds each call from the locker's ttl.
    let c = Client::new("mongodb://127.0.0.1:1/", "db").unwrap();
    let (r, took) = down_locker_try_acquire(&c);
    assert!(matches!(r, Err(Error::Unavailable(_))), "{r:?}");
    assert!(
        took < Duration::from_secs(6),
        "a 2 s ttl locker took {took:?}"
    );
}
