//! The leader payload: a new term carries its leader's payload, observers (the C observe
//! stream) and the cluster detail show it, set_payload replaces it; validation. On the
//! in-process memory:// backend.

mod common;

use common::unique_key;
use mongoelector::{Client, Elector, Error, LeaderObserver};
use serde_json::json;
use std::time::{Duration, Instant};

fn lead(e: &Elector) {
    let until = Instant::now() + Duration::from_secs(10);
    while !e.is_leader().unwrap() {
        assert!(Instant::now() < until, "never led");
        e.poll().unwrap();
    }
}

#[test]
fn a_new_term_carries_its_leaders_payload() {
    let c = Client::new(&format!("memory://{}", unique_key("payload")), "").unwrap();
    let key = unique_key("payload-key");
    let a = Elector::builder(&c, &key)
        .ttl(Duration::from_secs(5))
        .payload(&json!({"endpoint": "10.0.0.1:8080"}))
        .build()
        .unwrap();
    let b = Elector::builder(&c, &key)
        .ttl(Duration::from_secs(5))
        .payload(&json!({"endpoint": "10.0.0.2:8080"}))
        .build()
        .unwrap();
    let o = LeaderObserver::builder(&c, &key)
        .interval(Duration::from_millis(50))
        .build()
        .unwrap();
    lead(&a);
    let s = o.read().unwrap();
    assert_eq!(
        s.payload_value(),
        Some(json!({"endpoint": "10.0.0.1:8080"})),
        "{s:?}"
    );
    assert!(a
        .set_payload(Some(&json!({"endpoint": "10.0.0.1:9090"})))
        .unwrap());
    let detail = a.cluster_detail().unwrap();
    let leader = detail.leader.expect("a leads");
    let p: serde_json::Value = serde_json::from_str(leader.payload.as_deref().unwrap()).unwrap();
    assert_eq!(p, json!({"endpoint": "10.0.0.1:9090"}));
    b.poll().unwrap();
    a.release().unwrap();
    lead(&b);
    let s = o.read().unwrap();
    assert_eq!(s.leader.as_ref().unwrap().uuid, b.uuid().unwrap());
    assert_eq!(
        s.payload_value(),
        Some(json!({"endpoint": "10.0.0.2:8080"})),
        "{s:?}"
    );
    assert!(b.set_payload(None).unwrap());
    assert_eq!(o.read().unwrap().payload, None);
}

#[test]
fn payloads_are_validated() {
    let c = Client::new(&format!("memory://{}", unique_key("payload-bad")), "").unwrap();
    for bad in [
        json!([1, 2]),
        json!("text"),
        json!(42),
        json!({"x": "y".repeat(20000)}),
    ] {
        let r = Elector::builder(&c, "k").payload(&bad).build();
        match r {
            Err(e @ Error::InvalidArgument(_)) => {
                assert!(e.to_string().contains("payload"), "{e}")
            }
            other => panic!("payload {bad}: {other:?}"),
        }
    }
    let e = Elector::builder(&c, "k").build().unwrap();
    assert!(matches!(
        e.set_payload(Some(&json!(["x"]))),
        Err(Error::InvalidArgument(_))
    ));
    assert!(
        !e.set_payload(Some(&json!({"ok": true}))).unwrap(),
        "not leading: kept"
    );
}
