//! Semaphore against a real server: the limit, fencing tokens, holders, guards that
//! release on drop, and threads contending for the slots.

mod common;

use common::unique_key;
use mongoelector::{AcquireOptions, CancelToken, Client, Error, Semaphore, Timestamp};
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

fn semaphore(c: &Client, key: &str, limit: i64) -> Semaphore {
    Semaphore::builder(c, key)
        .limit(limit)
        .ttl(Duration::from_secs(10))
        .op_timeout(Duration::from_secs(2))
        .build()
        .expect("Semaphore::build")
}

#[test]
fn limit_tokens_holders_and_guards() {
    let Some(c) = common::test_client() else {
        return;
    };
    let key = unique_key("sem");
    let a = semaphore(&c, &key, 2);
    let b = semaphore(&c, &key, 2);
    let third = semaphore(&c, &key, 2);
    assert_eq!((a.key(), a.limit()), (key.as_str(), 2));
    assert!(a.holders().unwrap().is_empty());
    assert_eq!(a.fence().unwrap(), 0);

    let ga = a.acquire(Some(Duration::from_secs(5))).unwrap();
    let gb = b.try_acquire().unwrap();
    let (fa, fb) = (ga.fence(), gb.fence());
    assert!(fa > 0 && fb > fa, "tokens {fa} then {fb}");
    assert_eq!((a.fence().unwrap(), b.fence().unwrap()), (fa, fb));

    // Full: one attempt says held, a bounded wait times out.
    assert!(
        matches!(third.try_acquire(), Err(Error::LockHeld(_))),
        "third holder of a limit-2 semaphore"
    );
    let t0 = Instant::now();
    match third.acquire(Some(Duration::from_millis(200))) {
        Err(Error::Timeout(_)) => {}
        other => panic!("expected Timeout, got {other:?}"),
    }
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(150) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    assert_eq!(third.fence().unwrap(), 0);
    assert_eq!(third.touch().unwrap(), None);

    let holders = third.holders().unwrap();
    assert_eq!(holders.len(), 2, "{holders:?}");
    let fences: HashSet<i64> = holders.iter().map(|h| h.fence).collect();
    assert_eq!(fences, HashSet::from([fa, fb]));
    assert_ne!(holders[0].uuid, holders[1].uuid);
    let now = Timestamp::from(std::time::SystemTime::now()).as_millis();
    for h in &holders {
        assert_eq!(h.pid, std::process::id() as i64);
        assert!(!h.host.is_empty() && !h.uuid.is_empty(), "{h:?}");
        assert!(h.expire > h.created, "{h:?}");
        assert!((h.created.as_millis() - now).abs() < 60_000, "{h:?}");
    }

    // Renewal moves the expiry of this hold only.
    let before = holders.iter().find(|h| h.fence == fb).unwrap().expire;
    let exp = gb.touch().unwrap().expect("holder renews");
    assert!(exp >= before, "{exp:?} < {before:?}");

    // Acquiring again through a handle that holds a slot is refused.
    assert!(matches!(
        a.try_acquire().map(|g| g.leak()),
        Err(Error::InvalidArgument(_))
    ));

    // Dropping a guard frees its slot at once: the third gets in, with a larger token.
    drop(ga);
    assert_eq!(a.fence().unwrap(), 0);
    let gc = third.try_acquire().unwrap();
    let fc = gc.fence();
    assert!(fc > fb, "token {fc} after {fb}");
    let fences: HashSet<i64> = a.holders().unwrap().iter().map(|h| h.fence).collect();
    assert_eq!(fences, HashSet::from([fb, fc]));

    gb.release().unwrap();
    b.release().unwrap(); // not holding is not an error
    drop(gc);
    assert!(a.holders().unwrap().is_empty());

    // A later hold keeps the tokens increasing.
    let g = a.try_acquire().unwrap();
    assert!(g.fence() > fc);
}

#[test]
fn limit_mismatch_and_bad_options_are_invalid_arguments() {
    let Some(c) = common::test_client() else {
        return;
    };
    let key = unique_key("sem-limit");
    let two = semaphore(&c, &key, 2);
    let g = two.try_acquire().unwrap(); // creates the key's document with limit 2
    let three = semaphore(&c, &key, 3);
    match three.try_acquire().map(|g| g.leak()) {
        Err(Error::InvalidArgument(d)) => eprintln!("limit mismatch: {d}"),
        other => panic!("expected InvalidArgument for limit 3 on a limit-2 key, got {other:?}"),
    }
    assert!(matches!(
        three
            .acquire(Some(Duration::from_secs(1)))
            .map(|g| g.leak()),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(three.holders(), Err(Error::InvalidArgument(_))));
    assert_eq!(two.holders().unwrap().len(), 1);
    drop(g);
    assert!(two.holders().unwrap().is_empty());

    // Options the library refuses.
    for bad in [0, 1001] {
        let r = Semaphore::builder(&c, &unique_key("sem-bad"))
            .limit(bad)
            .build()
            .and_then(|s| s.try_acquire().map(|g| g.leak()));
        assert!(
            matches!(r, Err(Error::InvalidArgument(_))),
            "limit {bad}: {r:?}"
        );
    }
    assert!(matches!(
        Semaphore::builder(&c, "").build(),
        Err(Error::InvalidArgument(_))
    ));
    let s = semaphore(&c, &unique_key("sem-force"), 1);
    assert!(matches!(
        s.acquire_with(&AcquireOptions::new().force(true))
            .map(|g| g.leak()),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn a_cancelled_token_ends_the_wait() {
    let Some(c) = common::test_client() else {
        return;
    };
    let key = unique_key("sem-cancel");
    let holder = semaphore(&c, &key, 1);
    let waiter = semaphore(&c, &key, 1);
    let _g = holder.try_acquire().unwrap();
    let token = CancelToken::new();
    let t0 = Instant::now();
    std::thread::scope(|s| {
        let canceller = token.clone();
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            canceller.cancel();
        });
        let r = waiter.acquire_with(
            &AcquireOptions::new()
                .timeout(Duration::from_secs(30))
                .step(Duration::from_millis(50))
                .cancel(&token),
        );
        assert!(matches!(r, Err(Error::Cancelled(_))), "{r:?}");
    });
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert_eq!(waiter.fence().unwrap(), 0);
}

#[test]
fn contending_threads_never_exceed_the_limit() {
    let Some(c) = common::test_client() else {
        return;
    };
    const THREADS: usize = 8;
    const ROUNDS: usize = 10;
    const LIMIT: usize = 3;
    let key = unique_key("sem-contention");
    let current = AtomicUsize::new(0);
    let most = AtomicUsize::new(0);
    let fences = Mutex::new(Vec::new());
    let opts = AcquireOptions::new()
        .timeout(Duration::from_secs(60))
        .step(Duration::from_millis(20));
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            let (c, key, opts) = (&c, &key, &opts);
            let (current, most, fences) = (&current, &most, &fences);
            s.spawn(move || {
                let sem = semaphore(c, key, LIMIT as i64); // one handle per holder
                for _ in 0..ROUNDS {
                    let guard = sem.acquire_with(opts).expect("acquire");
                    // Counted after the acquire and uncounted before the release: never
                    // more than the real holders.
                    let n = current.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(n, Ordering::SeqCst);
                    assert!(n <= LIMIT, "{n} holders of a limit-{LIMIT} semaphore");
                    std::thread::sleep(Duration::from_millis(5));
                    fences.lock().unwrap().push(guard.fence());
                    current.fetch_sub(1, Ordering::SeqCst);
                    guard.release().expect("release");
                }
            });
        }
    });
    let most = most.load(Ordering::SeqCst);
    assert!(most <= LIMIT, "at most {most} holders");
    assert!(most >= 2, "the semaphore never had two holders at once");
    let fences = fences.into_inner().unwrap();
    assert_eq!(fences.len(), THREADS * ROUNDS);
    let unique: HashSet<i64> = fences.iter().copied().collect();
    assert_eq!(
        unique.len(),
        fences.len(),
        "a fencing token was handed out twice"
    );
    eprintln!("contention: at most {most} of {LIMIT} holders at once");
}
