//! Error paths that need no server, plus "server down" against a closed port.

mod common;

use common::wire::{self, Bson};
use mongoelector::{AcquireOptions, Client, Elector, Error, ErrorKind, Locker};
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
        let r = Locker::new(&c, key);
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
    let r = Locker::builder(&c, "k").ttl(Duration::ZERO).build();
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
    let r = l.acquire_with(
        &AcquireOptions::new()
            .blocking(false)
            .timeout(Duration::from_secs(1)),
    );
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    let r = l.acquire_with(&AcquireOptions::new().step(Duration::ZERO));
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "step 0: {r:?}");
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
    let r = Locker::builder(c, "down")
        .ttl(Duration::from_secs(2))
        .build()
        .and_then(|l| l.try_acquire().map(|g| g.leak()));
    (r, start.elapsed())
}

#[test]
fn errors_display_their_code_and_message() {
    let c = Client::new("mongodb://127.0.0.1:1/", "db").unwrap();
    let e = Locker::new(&c, "").err().unwrap();
    let s = e.to_string();
    assert!(s.starts_with("MONGOELECTOR_ERR_INVALID_ARGUMENT: "), "{s}");
    assert!(!e.message().is_empty());
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    // A bad argument has no server code.
    assert_eq!(
        (e.server_code(), e.code_name(), e.labels().len()),
        (None, None, 0)
    );
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

#[test]
fn a_server_error_code_reaches_rust() {
    let Some(uri) = common::test_uri() else {
        return;
    };
    if !uri.starts_with("mongodb://") {
        eprintln!("SKIPPED: not a mongodb:// server");
        return;
    }
    let c = common::client(&uri);
    let key = common::unique_key("server-error");
    let coll = format!("rs_bad_fence_{}", std::process::id());
    // A released lock document whose fence is a string: the next claim matches it, and the
    // server's $inc of the fence fails (MongoDB: code 14 TypeMismatch). Written over the
    // wire protocol: the library never writes such a document.
    wire::insert(
        &uri,
        common::DB,
        &coll,
        wire::doc(vec![
            ("_id", Bson::Str(key.clone())),
            ("locked", Bson::Bool(false)),
            ("host", Bson::Str("nowhere".into())),
            ("uuid", Bson::Str("someone-else".into())),
            ("pid", Bson::I64(1)),
            ("ts_created", Bson::Date(0)),
            ("ts_expire", Bson::Date(0)),
            ("fence", Bson::Str("not a number".into())),
        ]),
    );
    let l = Locker::builder(&c, &key).collection(&coll).build().unwrap();
    let e = l.try_acquire().map(|g| g.leak()).unwrap_err();
    eprintln!("server error: {e}");
    assert!(matches!(e, Error::Server(_)), "{e:?}");
    let code = e.server_code().expect("the server's error code");
    assert_eq!(code, 14, "{e}");
    assert_eq!(e.code_name(), Some("TypeMismatch"), "{e}");
    assert!(!e.has_label("RetryableWriteError"), "{:?}", e.labels());
    assert!(e.to_string().contains("[code 14 TypeMismatch]"), "{e}");
    // The info is per failure: the next failure without a server answer has none.
    let e = l
        .acquire_with(
            &AcquireOptions::new()
                .blocking(false)
                .timeout(Duration::from_secs(1)),
        )
        .unwrap_err();
    assert_eq!(
        (e.kind(), e.server_code(), e.code_name()),
        (ErrorKind::InvalidArgument, None, None)
    );
}

#[test]
fn an_sqlite_error_keeps_its_extended_result_code() {
    // Triggers that refuse every write: SQLite answers
    // SQLITE_CONSTRAINT_TRIGGER (extended result code 1811).
    let Ok(out) = std::process::Command::new("sqlite3")
        .arg("-version")
        .output()
    else {
        eprintln!("SKIPPED: no sqlite3 command to add the trigger with");
        return;
    };
    assert!(out.status.success());
    let dir = std::env::temp_dir().join(format!("rs-sqlite-code-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("locks.db");
    let uri = format!("sqlite://{}", db.display());
    let c = Client::new(&uri, "").unwrap();
    let l = Locker::new(&c, "k").unwrap();
    l.try_acquire().unwrap().release().unwrap();
    let sql = "CREATE TRIGGER refuse_insert BEFORE INSERT ON documents \
               BEGIN SELECT RAISE(ABORT, 'refused by test'); END; \
               CREATE TRIGGER refuse_update BEFORE UPDATE ON documents \
               BEGIN SELECT RAISE(ABORT, 'refused by test'); END;";
    let st = std::process::Command::new("sqlite3")
        .arg(&db)
        .arg(sql)
        .status()
        .unwrap();
    assert!(st.success(), "{sql}");
    let e = l.try_acquire().map(|g| g.leak()).unwrap_err();
    eprintln!("SQLite error: {e}");
    assert!(matches!(e, Error::Server(_)), "{e:?}");
    assert_eq!(e.server_code(), Some(1811), "{e}"); // SQLITE_CONSTRAINT_TRIGGER
    assert_eq!(e.code_name(), None);
    drop((l, c));
    let _ = std::fs::remove_dir_all(&dir);
}
