//! Fair (FIFO) plain locks (`.fair(true)` on the locker builder) on memory:// driven by a
//! fake clock: waiters served in arrival order, a latecomer's try refused while they wait.

use mongoelector::testing::FakeClock;
use mongoelector::{AcquireOptions, Client, Error, Locker};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, UNIX_EPOCH};

fn world() -> (FakeClock, Client) {
    // 2030-01-01T00:00:00Z
    let clock =
        FakeClock::new(UNIX_EPOCH + Duration::from_secs(1_893_456_000)).expect("FakeClock::new");
    let uri = clock.memory_uri(None).expect("memory_uri");
    let client = Client::new(&uri, "").expect("Client::new");
    (clock, client)
}

/// A blocking acquire of `l` (retrying every `step`) on a thread of `s`, which pushes
/// `name` into `turns` once it holds the lock; returns once the acquire waits on `clock`.
fn wait<'s, 'e>(
    s: &'s thread::Scope<'s, 'e>,
    clock: &FakeClock,
    turns: &'e Mutex<Vec<char>>,
    name: char,
    l: &'e Locker,
    step: Duration,
) -> thread::ScopedJoinHandle<'s, i64> {
    let n = clock.wait_for_waiters(0, Duration::ZERO).unwrap();
    let h = s.spawn(move || {
        let fence = l
            .acquire_with(&AcquireOptions::new().step(step))
            .map(|g| g.leak())
            .unwrap();
        turns.lock().unwrap().push(name);
        fence
    });
    clock
        .wait_for_waiters(n + 1, Duration::from_secs(10))
        .unwrap();
    h
}

/// A holder, then waiter A (retrying every 10 s), then waiter B (every 250 ms). The holder
/// releases; one second later B looks again, long before A. Fair: B is behind A in the
/// queue and keeps waiting, A gets the lock at its next look and B after A. Not fair: B
/// takes the free lock first.
#[test]
fn fair_waiters_are_served_in_arrival_order() {
    for fair in [true, false] {
        let (clock, client) = world();
        let key = format!("fair-lock-{}-{fair}", std::process::id());
        let locker = || {
            Locker::builder(&client, &key)
                .ttl(Duration::from_secs(30))
                .fair(fair)
                .build()
                .unwrap()
        };
        let (holder, a, b, late) = (locker(), locker(), locker(), locker());
        let held = holder.try_acquire().unwrap();
        let first = held.fence();
        let turns = Mutex::new(Vec::new());
        thread::scope(|s| {
            let wa = wait(s, &clock, &turns, 'A', &a, Duration::from_secs(10));
            let wb = wait(s, &clock, &turns, 'B', &b, Duration::from_millis(250));
            drop(held);
            if fair {
                match late.try_acquire() {
                    Err(Error::LockHeld(d)) => {
                        assert!(d.message().contains("2 waiter(s)"), "{d:?}")
                    }
                    other => panic!("a latecomer passed the queued waiters: {other:?}"),
                }
            }
            clock.advance(Duration::from_secs(1)).unwrap(); // B looks, A does not yet
            let (fa, fb);
            if fair {
                assert!(!b.owned().unwrap(), "B passed A");
                clock.advance(Duration::from_secs(10)).unwrap(); // A's turn
                fa = wa.join().unwrap();
                assert!(!b.owned().unwrap(), "B holds with A");
                a.release().unwrap();
                clock.advance(Duration::from_secs(1)).unwrap();
                fb = wb.join().unwrap();
                b.release().unwrap();
                assert!(fb > fa);
            } else {
                fb = wb.join().unwrap();
                b.release().unwrap();
                clock.advance(Duration::from_secs(10)).unwrap();
                fa = wa.join().unwrap();
                a.release().unwrap();
            }
            assert!(fa > first && fb > first);
        });
        let want = if fair { vec!['A', 'B'] } else { vec!['B', 'A'] };
        assert_eq!(*turns.lock().unwrap(), want, "fair {fair}");
    }
}
