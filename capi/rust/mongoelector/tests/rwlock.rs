//! RwLock on memory:// (always) and against a real server: readers together, the writer
//! after them with a greater token, writer preference, guards that release on drop,
//! timeouts and cancel tokens, bad input refused by name, leases of both sides, and
//! threads contending for both sides.

mod common;

use common::unique_key;
use mongoelector::{AcquireOptions, CancelToken, Client, Error, RwLock, RwSide, Semaphore};
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The in-process backend (a name of this test's own), and the server when there is one.
fn clients(name: &str) -> Vec<(&'static str, Client)> {
    let mem = format!("memory://rs-rwlock-{name}-{}", std::process::id());
    let mut out = vec![("memory", Client::new(&mem, "").expect("memory client"))];
    if let Some(c) = common::test_client() {
        out.push(("server", c));
    }
    out
}

fn rwlock(c: &Client, key: &str, max_readers: i64) -> RwLock {
    RwLock::builder(c, key)
        .max_readers(max_readers)
        .ttl(Duration::from_secs(30))
        .max_offset(Duration::from_secs(2))
        .build()
        .expect("RwLock::build")
}

fn held(r: Result<impl std::fmt::Debug, Error>, text: &str) {
    match r {
        Err(Error::LockHeld(d)) => assert!(d.message().contains(text), "{d}: no '{text}'"),
        other => panic!("expected LockHeld ({text}), got {other:?}"),
    }
}

#[test]
fn readers_together_then_the_writer() {
    for (what, c) in clients("readers") {
        let key = unique_key("rw");
        let (r1, r2, r3) = (
            rwlock(&c, &key, 3),
            rwlock(&c, &key, 3),
            rwlock(&c, &key, 3),
        );
        let (w, late) = (rwlock(&c, &key, 3), rwlock(&c, &key, 3));
        assert_eq!((r1.key(), r1.max_readers()), (key.as_str(), 3));
        assert_eq!(r1.side().unwrap(), None);

        let g1 = r1.read(Some(Duration::from_secs(5))).unwrap();
        let g2 = r2.try_read().unwrap();
        let g3 = r3.read(None).unwrap();
        assert!(g1.fence() > 0 && g2.fence() > g1.fence() && g3.fence() > g2.fence());
        assert_eq!(
            (g1.side(), r1.side().unwrap()),
            (RwSide::Read, Some(RwSide::Read))
        );
        assert_eq!(r2.fence().unwrap(), g2.fence());
        held(late.try_read().map(|g| g.leak()), "all 3 read slots held");
        assert!(matches!(
            r1.try_write().map(|g| g.leak()),
            Err(Error::InvalidArgument(_))
        ));
        let hs = w.holders().unwrap();
        assert_eq!(hs.readers.len(), 3, "{what}: {hs:?}");
        assert!(hs.writer.is_none() && hs.waiting_writer.is_none());
        assert_eq!(hs.readers[0].uuid, r1.uuid());
        assert_eq!(hs.readers[0].pid, std::process::id() as i64);

        // The writer: refused, times out, then waits and stops new readers.
        held(w.try_write().map(|g| g.leak()), "held for reading");
        let t0 = Instant::now();
        assert!(matches!(
            w.write(Some(Duration::from_millis(200))).map(|g| g.leak()),
            Err(Error::Timeout(_))
        ));
        assert!(t0.elapsed() >= Duration::from_millis(150));
        drop(g3); // released at once
        let g4 = late.try_read().expect("a reader after the writer gave up"); // its mark is gone
        let last_read = g4.fence();
        drop(g4);
        std::thread::scope(|s| {
            let writer = s.spawn(|| {
                let g = w
                    .acquire_with(
                        RwSide::Write,
                        &AcquireOptions::new()
                            .timeout(Duration::from_secs(30))
                            .step(Duration::from_millis(20)),
                    )
                    .expect("the writer");
                g.leak()
            });
            let t0 = Instant::now();
            while r1.holders().unwrap().waiting_writer.map(|h| h.uuid) != Some(w.uuid()) {
                assert!(t0.elapsed() < Duration::from_secs(10), "no waiting writer");
                std::thread::sleep(Duration::from_millis(10));
            }
            held(late.try_read().map(|g| g.leak()), "a writer is waiting");
            assert!(g1.touch().unwrap().is_some(), "a reader in keeps renewing");
            drop(g1);
            g2.release().unwrap();
            let fw = writer.join().unwrap();
            assert!(fw > last_read, "{what}: writer {fw} after {last_read}");
        });
        assert_eq!(w.side().unwrap(), Some(RwSide::Write));
        held(r1.try_read().map(|g| g.leak()), "held for writing");
        held(late.try_write().map(|g| g.leak()), "held for writing");
        let hs = r1.holders().unwrap();
        assert!(hs.readers.is_empty() && hs.writer.map(|h| h.uuid) == Some(w.uuid()));
        w.release().unwrap();
        w.release().unwrap(); // not holding is not an error
        assert_eq!((w.fence().unwrap(), w.side().unwrap()), (0, None));
        let g = r1.try_read().unwrap();
        assert!(g.fence() > 0 && r1.holders().unwrap().writer.is_none());
    }
}

#[test]
fn bad_input_is_refused_by_name() {
    for (what, c) in clients("bad") {
        for bad in [0, -3, 1001] {
            match RwLock::builder(&c, "k").max_readers(bad).build() {
                Err(Error::InvalidArgument(d)) => assert!(d.message().contains("max_readers")),
                other => panic!("{what}: max_readers {bad}: {other:?}"),
            }
        }
        assert!(matches!(
            RwLock::builder(&c, "").build(),
            Err(Error::InvalidArgument(_))
        ));
        let key = unique_key("rw-bad");
        let two = rwlock(&c, &key, 2);
        let g = two.try_read().unwrap(); // the key's document: max_readers 2
        let five = rwlock(&c, &key, 5);
        match five.try_read().map(|g| g.leak()) {
            Err(Error::InvalidArgument(d)) => assert!(d.message().contains("max_readers 2"), "{d}"),
            other => panic!("{what}: another max_readers: {other:?}"),
        }
        assert!(matches!(five.holders(), Err(Error::InvalidArgument(_))));
        assert!(matches!(
            two.acquire_with(RwSide::Write, &AcquireOptions::new().force(true))
                .map(|g| g.leak()),
            Err(Error::InvalidArgument(_))
        ));
        // A key whose document is a semaphore's (same collection).
        let skey = unique_key("rw-sem");
        let sem = Semaphore::builder(&c, &skey)
            .limit(2)
            .collection("mongorwlock")
            .max_offset(Duration::from_secs(2))
            .build()
            .unwrap();
        let sg = sem.try_acquire().unwrap();
        let on_sem = rwlock(&c, &skey, 2);
        match on_sem.try_write().map(|g| g.leak()) {
            Err(Error::InvalidArgument(d)) => assert!(d.message().contains("semaphore"), "{d}"),
            other => panic!("{what}: a read-write lock on a semaphore's key: {other:?}"),
        }
        assert!(matches!(
            on_sem.hold_read(None).map(|l| l.fence()),
            Err(Error::InvalidArgument(_))
        ));
        drop(sg);
        // Still a working lock.
        drop(g);
        two.try_write()
            .expect("the writer after the bad calls")
            .release()
            .unwrap();
    }
}

#[test]
fn cancel_and_writer_preference_off() {
    for (what, c) in clients("cancel") {
        let key = unique_key("rw-cancel");
        let r = RwLock::builder(&c, &key)
            .writer_preference(false)
            .max_offset(Duration::from_secs(2))
            .build()
            .unwrap();
        let w = RwLock::builder(&c, &key)
            .writer_preference(false)
            .max_offset(Duration::from_secs(2))
            .build()
            .unwrap();
        let other = RwLock::builder(&c, &key)
            .writer_preference(false)
            .max_offset(Duration::from_secs(2))
            .build()
            .unwrap();
        let _g = r.try_read().unwrap();
        let token = CancelToken::new();
        let t0 = Instant::now();
        std::thread::scope(|s| {
            let canceller = token.clone();
            s.spawn(move || {
                std::thread::sleep(Duration::from_millis(200));
                canceller.cancel();
            });
            let opts = AcquireOptions::new()
                .step(Duration::from_millis(20))
                .cancel(&token);
            let res = w.acquire_with(RwSide::Write, &opts).map(|g| g.leak());
            assert!(matches!(res, Err(Error::Cancelled(_))), "{what}: {res:?}");
        });
        assert!(t0.elapsed() < Duration::from_secs(10));
        // Writer preference off: a reader enters while a writer waits.
        std::thread::scope(|s| {
            let writer = s.spawn(|| w.write(Some(Duration::from_secs(1))).map(|g| g.leak()));
            std::thread::sleep(Duration::from_millis(200));
            drop(other.try_read().expect("a reader next to a waiting writer"));
            assert!(matches!(writer.join().unwrap(), Err(Error::Timeout(_))));
        });
    }
}

#[test]
fn leases_of_both_sides() {
    for (what, c) in clients("leases") {
        let key = unique_key("rw-lease");
        let ttl = Duration::from_secs(1);
        let mk = || {
            RwLock::builder(&c, &key)
                .ttl(ttl)
                .max_offset(Duration::from_secs(2))
                .build()
                .unwrap()
        };
        let (a, b, w) = (mk(), mk(), mk());
        let la = a.hold_read(Some(Duration::from_secs(5))).unwrap();
        assert!(matches!(
            a.hold_read(None).map(|l| l.fence()),
            Err(Error::InvalidArgument(_))
        ));
        let lb = b
            .hold_with(RwSide::Read, &AcquireOptions::new().blocking(false))
            .unwrap();
        assert!(lb.fence() > la.fence());
        // Kept alive past three ttls while idle.
        assert!(!la.wait_lost(Some(ttl * 3)).unwrap(), "{what}");
        assert!(!lb.is_lost());
        assert!(matches!(
            w.hold_with(RwSide::Write, &AcquireOptions::new().blocking(false))
                .map(|l| l.fence()),
            Err(Error::LockHeld(_))
        ));
        let (fa, fb) = (la.fence(), lb.fence());
        drop(la);
        drop(lb); // the last reader: released at once
        let lw = w.hold_write(Some(Duration::from_secs(5))).unwrap();
        assert!(lw.fence() > fa.max(fb));
        assert_eq!(w.side().unwrap(), Some(RwSide::Write));
        held(a.try_read().map(|g| g.leak()), "held for writing");
        drop(lw);
        drop(a.try_read().expect("a reader after the write lease"));
    }
}

#[test]
fn contending_threads_keep_the_rules() {
    let Some(c) = common::test_client() else {
        return;
    };
    const THREADS: usize = 8;
    const ROUNDS: usize = 8;
    const MAX_READERS: usize = 3;
    let key = unique_key("rw-contention");
    let (readers, writers, most) = (
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    );
    let fences = Mutex::new(Vec::new());
    let opts = AcquireOptions::new()
        .timeout(Duration::from_secs(60))
        .step(Duration::from_millis(10));
    std::thread::scope(|s| {
        for i in 0..THREADS {
            let (c, key, opts, fences) = (&c, &key, &opts, &fences);
            let (readers, writers, most) = (&readers, &writers, &most);
            s.spawn(move || {
                let l = rwlock(c, key, MAX_READERS as i64); // one handle per holder
                let side = if i % 3 == 0 {
                    RwSide::Write
                } else {
                    RwSide::Read
                };
                let mut last = 0;
                for _ in 0..ROUNDS {
                    let g = l.acquire_with(side, opts).expect("acquire");
                    if side == RwSide::Write {
                        let n = writers.fetch_add(1, Ordering::SeqCst) + 1;
                        assert!(
                            n == 1 && readers.load(Ordering::SeqCst) == 0,
                            "writer not alone"
                        );
                    } else {
                        let n = readers.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(n, Ordering::SeqCst);
                        assert_eq!(writers.load(Ordering::SeqCst), 0, "reader next to a writer");
                    }
                    assert!(g.fence() > last);
                    last = g.fence();
                    fences.lock().unwrap().push(g.fence());
                    std::thread::sleep(Duration::from_millis(3));
                    let count = if side == RwSide::Write {
                        writers
                    } else {
                        readers
                    };
                    count.fetch_sub(1, Ordering::SeqCst);
                    g.release().expect("release");
                }
            });
        }
    });
    let fences = fences.into_inner().unwrap();
    let distinct: HashSet<i64> = fences.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        THREADS * ROUNDS,
        "a token was handed out twice"
    );
    let most = most.load(Ordering::SeqCst);
    assert!(most <= MAX_READERS, "{most} readers at once");
    eprintln!("at most {most} readers at once (max_readers {MAX_READERS}); writers alone");
}
