//! read_queue: a fair waiter blocked while another holds is listed (its uuid, a ticket,
//! an expiry after the reading's server time); before it queues and once it has had its
//! turn, nobody is. For a lock, a semaphore and a read-write lock, on the test server and
//! on SQLite.

mod common;

use mongoelector::{
    read_queue, AcquireOptions, Client, Error, Locker, QueueOf, QueueStatus, RwLock, RwSide,
    Semaphore,
};
use std::thread;
use std::time::{Duration, Instant};

const TTL: Duration = Duration::from_secs(30);
const STEP: Duration = Duration::from_millis(20);

fn read(c: &Client, of: QueueOf, key: &str) -> QueueStatus {
    read_queue(c, of, None, key).unwrap_or_else(|e| panic!("read_queue({of:?}, {key}): {e}"))
}

/// With the key held, runs `wait` (a fair blocking acquire that returns the waiter's
/// uuid once it holds) on a thread, waits until the queue lists one waiter, then runs
/// `release` and checks that the listed waiter was the one that got its turn.
fn check_queue(
    c: &Client,
    of: QueueOf,
    key: &str,
    wait: impl FnOnce() -> String + Send,
    release: impl FnOnce(),
) {
    assert!(read(c, of, key).waiting.is_empty(), "held, nobody waiting");
    thread::scope(|s| {
        let waiter = s.spawn(wait);
        // Queued: the listing itself says so, within a deadline.
        let deadline = Instant::now() + Duration::from_secs(20);
        let st = loop {
            let st = read(c, of, key);
            if !st.waiting.is_empty() {
                break st;
            }
            assert!(!waiter.is_finished(), "the waiter did not wait");
            assert!(
                Instant::now() < deadline,
                "the fair waiter was never listed"
            );
            thread::sleep(Duration::from_millis(10)); // the next look
        };
        assert_eq!(st.waiting.len(), 1, "{st:?}");
        let queued = &st.waiting[0];
        assert!(
            queued.ticket > 0 && queued.expires > st.server_time,
            "{st:?}"
        );
        release();
        let uuid = waiter.join().expect("the waiter's turn");
        assert_eq!(
            queued.uuid, uuid,
            "the listed waiter is not the one that waited"
        );
    });
    assert!(read(c, of, key).waiting.is_empty(), "served, still listed");
}

fn every_queue(c: &Client) {
    let opts = AcquireOptions::new().step(STEP);
    for of in [QueueOf::Lock, QueueOf::Semaphore, QueueOf::RwLock] {
        let key = common::unique_key("queue");
        let st = read(c, of, &key);
        assert!(
            st.waiting.is_empty() && st.server_time.as_millis() > 0,
            "{st:?}"
        );
        match of {
            QueueOf::Lock => {
                let mk = || {
                    Locker::builder(c, &key)
                        .ttl(TTL)
                        .fair(true)
                        .build()
                        .unwrap()
                };
                let (holder, waiter) = (mk(), mk());
                let held = holder.try_acquire().unwrap();
                check_queue(
                    c,
                    of,
                    &key,
                    || {
                        waiter.acquire_with(&opts).unwrap().leak();
                        waiter.uuid().unwrap()
                    },
                    || held.release().unwrap(),
                );
            }
            QueueOf::Semaphore => {
                let mk = || {
                    Semaphore::builder(c, &key)
                        .limit(1)
                        .ttl(TTL)
                        .fair(true)
                        .build()
                        .unwrap()
                };
                let (holder, waiter) = (mk(), mk());
                let held = holder.try_acquire().unwrap();
                check_queue(
                    c,
                    of,
                    &key,
                    || {
                        let fence = waiter.acquire_with(&opts).unwrap().leak();
                        // A semaphore shows its identity in the holders once it holds.
                        let holders = waiter.holders().unwrap();
                        let mine = holders.iter().find(|h| h.fence == fence).unwrap();
                        mine.uuid.clone()
                    },
                    || held.release().unwrap(),
                );
            }
            QueueOf::RwLock => {
                let mk = || {
                    RwLock::builder(c, &key)
                        .ttl(TTL)
                        .fair(true)
                        .build()
                        .unwrap()
                };
                let (holder, waiter) = (mk(), mk());
                let held = holder.try_write().unwrap();
                check_queue(
                    c,
                    of,
                    &key,
                    || {
                        waiter.acquire_with(RwSide::Write, &opts).unwrap().leak();
                        waiter.uuid()
                    },
                    || held.release().unwrap(),
                );
            }
        }
    }
}

#[test]
fn fair_waiters_are_listed_on_the_server() {
    let Some(c) = common::test_client() else {
        return;
    };
    every_queue(&c);
}

#[test]
fn fair_waiters_are_listed_on_sqlite() {
    let dir = std::env::temp_dir().join(format!("rs-queue-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("locks.db");
    let _ = std::fs::remove_file(&db);
    let c = Client::new(&format!("sqlite://{}", db.display()), "").unwrap();
    every_queue(&c);
}

#[test]
fn read_queue_checks_its_arguments() {
    let dir = std::env::temp_dir().join(format!("rs-queue-args-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let c = Client::new(&format!("sqlite://{}", dir.join("locks.db").display()), "").unwrap();
    assert!(matches!(
        read_queue(&c, QueueOf::Lock, None, ""),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        read_queue(&c, QueueOf::Semaphore, Some(""), "k"),
        Err(Error::InvalidArgument(_))
    ));
}
