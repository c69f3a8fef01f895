//! Priority leaders (`ElectorBuilder::priority`, `priority_stability`) on the testing
//! kit: a `FakeClock` drives memory:// electors, so the delay is fake time, no sleeps. The
//! leader hands over to a running member of strictly higher priority after the delay, not
//! before, and a tie moves nothing; bad values are refused by name.

use mongoelector::testing::FakeClock;
use mongoelector::{Client, Elector, Error};
use std::time::{Duration, UNIX_EPOCH};

const TTL: Duration = Duration::from_secs(8);

fn world() -> (FakeClock, Client) {
    let start = UNIX_EPOCH + Duration::from_secs(1_893_456_000); // 2030-01-01
    let clock = FakeClock::new(start).expect("FakeClock::new");
    let uri = clock.memory_uri(None).expect("memory_uri");
    let client = Client::new(&uri, "").expect("Client::new");
    (clock, client)
}

fn elector(client: &Client, priority: f64, stability: Duration) -> Elector {
    Elector::builder(client, "svc")
        .ttl(TTL)
        .priority(priority)
        .priority_stability(stability)
        .build()
        .expect("elector")
}

fn leaders(electors: &[&Elector]) -> Vec<usize> {
    (0..electors.len())
        .filter(|&i| electors[i].is_leader().unwrap())
        .collect()
}

#[test]
fn the_leader_hands_over_to_a_higher_member_after_the_delay_not_before() {
    let (clock, client) = world();
    let delay = Duration::from_secs(5);
    let low = elector(&client, 1.0, delay);
    low.start().unwrap();
    clock.advance(Duration::ZERO).unwrap();
    assert!(low.is_leader().unwrap(), "the first elector leads");
    let fence = low.fence().unwrap();
    let high = elector(&client, 5.0, delay);
    high.start().unwrap();
    for _ in 0..19 {
        // 4.75 s: the delay has not passed
        clock.advance(Duration::from_millis(250)).unwrap();
        assert_eq!(leaders(&[&low, &high]), [0], "handed over before the delay");
    }
    // The leader's poll at the end of the delay, then the follower's peek.
    clock
        .advance(TTL / 3 + TTL / 4 + Duration::from_secs(2))
        .unwrap();
    assert_eq!(
        leaders(&[&low, &high]),
        [1],
        "the higher member does not lead"
    );
    assert!(high.fence().unwrap() > fence, "tokens increase");
    clock.advance(TTL * 5).unwrap();
    assert_eq!(
        leaders(&[&low, &high]),
        [1],
        "handed back to a lower member"
    );
    low.stop().unwrap();
    high.stop().unwrap();
}

#[test]
fn a_tie_never_moves_leadership_and_no_priority_is_never_chosen() {
    let (clock, client) = world();
    let a = elector(&client, 3.0, Duration::ZERO);
    a.start().unwrap();
    clock.advance(Duration::ZERO).unwrap();
    assert!(a.is_leader().unwrap());
    let b = elector(&client, 3.0, Duration::ZERO);
    let c = Elector::builder(&client, "svc").ttl(TTL).build().unwrap(); // off: the default
    b.start().unwrap();
    c.start().unwrap();
    clock.advance(TTL * 10).unwrap();
    assert_eq!(leaders(&[&a, &b, &c]), [0]);
    for e in [&a, &b, &c] {
        e.stop().unwrap();
    }
}

#[test]
fn bad_values_are_refused_by_name() {
    let (_clock, client) = world();
    let refused = |b: mongoelector::ElectorBuilder<'_>, field: &str| match b.build() {
        Err(Error::InvalidArgument(d)) => {
            assert!(d.message().contains(field), "{field}: {}", d.message())
        }
        other => panic!("{field}: {other:?}, want InvalidArgument"),
    };
    let b = || Elector::builder(&client, "svc").ttl(TTL);
    refused(b().priority(f64::NAN), "priority");
    refused(b().priority(f64::INFINITY), "priority");
    refused(
        b().priority(1.0)
            .priority_stability(Duration::from_secs(2_000_000_000)),
        "priority_stability",
    );
    refused(b().priority(1.0).report_status(false), "priority");
    // A stability alone (no priority) is unused, and accepted.
    b().priority_stability(Duration::from_secs(1))
        .build()
        .unwrap();
}
