//! The partitioner (two members sharing a group: graceful moves, tokens, status, a drop
//! from a member's own callback) and fair queueing (`fair` on semaphores and read-write
//! lock writers), on memory:// driven by a fake clock, and two members against the server.

mod common;

use mongoelector::testing::FakeClock;
use mongoelector::{
    partition_status, AcquireOptions, Client, Error, Partitioner, RwLock, RwSide, Semaphore,
};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const N: i64 = 8;

/// 2030-01-01T00:00:00Z
fn start() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_893_456_000)
}

fn world() -> (FakeClock, Client) {
    let clock = FakeClock::new(start()).expect("FakeClock::new");
    let uri = clock.memory_uri(None).expect("memory_uri");
    let client = Client::new(&uri, "").expect("Client::new");
    (clock, client)
}

/// What the members' callbacks said, in one order: (member, assigned?, partition, token).
type Log = Arc<Mutex<Vec<(char, bool, i64, i64)>>>;

fn member(client: &Client, group: &str, name: char, log: &Log, ttl: Duration) -> Partitioner {
    let (a, r) = (log.clone(), log.clone());
    Partitioner::builder(client, group, N)
        .ttl(ttl)
        .on_assigned(move |p, token| a.lock().unwrap().push((name, true, p, token)))
        .on_revoked(move |p| r.lock().unwrap().push((name, false, p, 0)))
        .build()
        .expect("partitioner")
}

/// The partitions `name` was assigned and not revoked since, with their tokens.
fn believed(log: &Log, name: char) -> BTreeMap<i64, i64> {
    let mut out = BTreeMap::new();
    for &(m, assigned, p, token) in log.lock().unwrap().iter() {
        if m != name {
            continue;
        }
        if assigned {
            out.insert(p, token);
        } else {
            out.remove(&p);
        }
    }
    out
}

/// Every partition that passed from `from` to `to` was revoked at `from` first, and came
/// with a greater token; `expected` partitions moved.
fn check_handovers(log: &Log, from: char, to: char, expected: usize) {
    let ev = log.lock().unwrap().clone();
    let mut moved = 0;
    for (i, &(m, assigned, p, token)) in ev.iter().enumerate() {
        if m != to || !assigned {
            continue;
        }
        let before: Vec<_> = ev[..i].iter().filter(|e| e.0 == from && e.2 == p).collect();
        let Some(last) = before.last() else { continue };
        assert!(!last.1, "{to} got {p} before {from} revoked it: {ev:?}");
        let prev = before.iter().rev().find(|e| e.1).unwrap();
        assert!(
            prev.3 < token,
            "partition {p}: token {token} after {}",
            prev.3
        );
        moved += 1;
    }
    assert_eq!(moved, expected, "moves from {from} to {to}: {ev:?}");
}

/// A alone owns every partition; B joins and the group splits with graceful moves; B
/// leaves and A takes everything back. `step` moves time until the condition holds.
fn scenario(client: &Client, ttl: Duration, step: &dyn Fn(&str, &dyn Fn() -> bool)) {
    let log: Log = Arc::default();
    let group = common::unique_key("partitioner");
    let a = member(client, &group, 'A', &log, ttl);
    let b = member(client, &group, 'B', &log, ttl);
    assert_ne!(a.uuid(), b.uuid());
    a.start().unwrap();
    let a_all = || {
        let o = a.owned().unwrap();
        o.len() as i64 == N && o == believed(&log, 'A')
    };
    step("A owns all", &a_all);
    for (p, t) in a.owned().unwrap() {
        assert_eq!(a.token(p).unwrap(), Some(t));
    }
    let st = a.status().unwrap();
    assert!(
        st.settled && st.partitions == N && st.members.len() == 1,
        "{st:?}"
    );
    assert!(st
        .owners
        .iter()
        .all(|o| o.owner.as_deref() == Some(a.uuid()) && o.token > 0));
    let read = partition_status(client, &group, None).unwrap();
    assert_eq!(read.partitions, N);

    // Another partition count is refused at start.
    let odd = Partitioner::builder(client, &group, N + 1)
        .ttl(ttl)
        .build()
        .unwrap();
    assert!(matches!(odd.start(), Err(Error::InvalidArgument(_))));

    b.start().unwrap();
    // Both live, each partition held by the member rendezvous hashing assigns it (one of
    // them may be assigned none).
    step("split", &|| {
        let (oa, ob) = (a.owned().unwrap(), b.owned().unwrap());
        if (oa.len() + ob.len()) as i64 != N
            || oa != believed(&log, 'A')
            || ob != believed(&log, 'B')
        {
            return false;
        }
        let st = partition_status(client, &group, Some(N)).unwrap();
        st.settled && st.members.iter().filter(|m| m.live).count() == 2
    });
    let nb = b.owned().unwrap().len();
    check_handovers(&log, 'A', 'B', nb); // all of B's came from A

    b.stop().unwrap();
    assert!(!b.running().unwrap());
    assert!(believed(&log, 'B').is_empty(), "B believes after stop");
    step("A owns all again", &a_all);
    check_handovers(&log, 'B', 'A', nb); // and went back
    drop(b);
    drop(a); // leaves: on_revoked for all it held
    assert!(believed(&log, 'A').is_empty(), "A believes after drop");
}

#[test]
fn two_members_share_a_group_on_a_fake_clock() {
    let (clock, client) = world();
    scenario(&client, Duration::from_secs(6), &|what, cond| {
        for _ in 0..100 {
            if cond() {
                return;
            }
            clock.advance(Duration::from_millis(500)).unwrap();
        }
        assert!(cond(), "{what}: not after 50 s of fake time");
    });
}

#[test]
fn two_members_share_a_group_on_the_server() {
    let Some(client) = common::test_client() else {
        return;
    };
    scenario(&client, Duration::from_secs(4), &|what, cond| {
        let end = Instant::now() + Duration::from_secs(40);
        while !cond() {
            assert!(Instant::now() < end, "{what}: not within 40 s");
            thread::sleep(Duration::from_millis(50));
        }
    });
}

#[test]
fn bad_input_is_refused_by_name() {
    let (_clock, client) = world();
    let says = |r: Result<Partitioner, Error>, text: &str| match r {
        Err(Error::InvalidArgument(d)) => assert!(d.to_string().contains(text), "{d}"),
        other => panic!("{other:?}: want InvalidArgument saying {text}"),
    };
    says(Partitioner::builder(&client, "g", 0).build(), "got 0");
    says(
        Partitioner::builder(&client, "g", 100_001).build(),
        "got 100001",
    );
    says(
        Partitioner::builder(&client, "g", 4)
            .ttl(Duration::from_secs(6))
            .poll(Duration::from_secs(4))
            .build(),
        "poll",
    );
    says(
        Partitioner::builder(&client, "g", 4)
            .locks_collection("x")
            .members_collection("x")
            .build(),
        "two collections",
    );
    let p = Partitioner::builder(&client, "g", 4).build().unwrap();
    assert!(matches!(p.token(4), Err(Error::InvalidArgument(_))));
    assert_eq!(p.token(0).unwrap(), None);
    assert!(matches!(
        partition_status(&client, "nobody", None),
        Err(Error::InvalidArgument(_))
    ));
}

/// A partitioner dropped from its own on_assigned: no callback after it, and the group
/// forgets it.
#[test]
fn dropped_from_its_own_callback() {
    let (clock, client) = world();
    let group = common::unique_key("dropped");
    let slot: Arc<Mutex<Option<Partitioner>>> = Arc::default();
    let calls = Arc::new(Mutex::new(0));
    let (s, c) = (slot.clone(), calls.clone());
    let p = Partitioner::builder(&client, &group, N)
        .ttl(Duration::from_secs(6))
        .on_assigned(move |_, _| {
            *c.lock().unwrap() += 1;
            drop(s.lock().unwrap().take());
        })
        .build()
        .unwrap();
    p.start().unwrap();
    *slot.lock().unwrap() = Some(p);
    for i in 0.. {
        clock.advance(Duration::from_millis(500)).unwrap();
        let st = partition_status(&client, &group, Some(N)).unwrap();
        if *calls.lock().unwrap() > 0
            && st.members.iter().all(|m| !m.live)
            && st.owners.iter().all(|o| o.owner.is_none())
        {
            break;
        }
        assert!(i < 100, "the member did not leave: {st:?}");
    }
    assert_eq!(*calls.lock().unwrap(), 1);
}

/// A fair waiter queued behind a holder keeps a latecomer's try out once the holder
/// releases; without fair the latecomer gets in.
#[test]
fn fair_waiters_are_not_passed() {
    for fair in [true, false] {
        let (clock, client) = world();
        let key = common::unique_key("fair-sem");
        let sem = || {
            Semaphore::builder(&client, &key)
                .ttl(Duration::from_secs(30))
                .fair(fair)
                .build()
                .unwrap()
        };
        let (holder, waiter, late) = (sem(), sem(), sem());
        let held = holder.try_acquire().unwrap();
        let first = held.fence();
        let n = clock.wait_for_waiters(0, Duration::ZERO).unwrap();
        thread::scope(|s| {
            let w = s.spawn(|| {
                waiter
                    .acquire_with(&AcquireOptions::new().step(Duration::from_millis(500)))
                    .map(|g| g.leak())
            });
            clock
                .wait_for_waiters(n + 1, Duration::from_secs(10))
                .unwrap();
            drop(held);
            match late.try_acquire() {
                Err(Error::LockHeld(_)) if fair => {}
                Ok(g) if !fair => drop(g),
                other => panic!("fair {fair}: latecomer got {other:?}"),
            }
            clock.advance(Duration::from_secs(1)).unwrap();
            let fence = w.join().unwrap().unwrap();
            assert!(fence > first);
            waiter.release().unwrap();
        });
    }
}

#[test]
fn fair_writers_are_not_passed() {
    let (clock, client) = world();
    let key = common::unique_key("fair-rw");
    let rw = || {
        RwLock::builder(&client, &key)
            .ttl(Duration::from_secs(30))
            .writer_preference(false)
            .fair(true)
            .build()
            .unwrap()
    };
    let (holder, waiter, late) = (rw(), rw(), rw());
    let held = holder.try_write().unwrap();
    let n = clock.wait_for_waiters(0, Duration::ZERO).unwrap();
    thread::scope(|s| {
        let w = s.spawn(|| {
            waiter
                .acquire_with(
                    RwSide::Write,
                    &AcquireOptions::new().step(Duration::from_millis(500)),
                )
                .map(|g| g.leak())
        });
        clock
            .wait_for_waiters(n + 1, Duration::from_secs(10))
            .unwrap();
        drop(held);
        assert!(matches!(late.try_write(), Err(Error::LockHeld(_))));
        clock.advance(Duration::from_secs(1)).unwrap();
        w.join().unwrap().unwrap();
        waiter.release().unwrap();
    });
}
