//! Elector against a real server, including failover between OS processes.

mod common;

use common::wire::{self, Bson};
use common::{unique_key, wait_for, Helper};
use mongoelector::{Elector, Timestamp};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

#[test]
fn helper_process() {
    if common::run_helper() {
        std::process::exit(0);
    }
}

fn counter() -> (Arc<AtomicUsize>, impl FnMut() + Send + 'static) {
    let n = Arc::new(AtomicUsize::new(0));
    let m = n.clone();
    (n, move || {
        m.fetch_add(1, Ordering::SeqCst);
    })
}

#[test]
fn poll_callbacks_status_and_release() {
    let Some(c) = common::test_client() else {
        return;
    };
    let key = unique_key("poll");
    let (leader, on_leader) = counter();
    let (loss, on_loss) = counter();
    let (loops, mut on_loop) = counter();
    let a = Elector::builder(&c, &key)
        .ttl(Duration::from_secs(4))
        .app_version("rust-test")
        .on_leader(on_leader)
        .on_leader_loss(on_loss)
        .on_loop(move || {
            on_loop();
            panic!("a panicking callback must not unwind into C");
        })
        .build()
        .unwrap();
    let b = Elector::builder(&c, &key)
        .ttl(Duration::from_secs(4))
        .build()
        .unwrap();

    a.poll().unwrap();
    assert_eq!(
        (leader.load(Ordering::SeqCst), loops.load(Ordering::SeqCst)),
        (1, 1)
    );
    assert!(a.is_leader().unwrap());
    let fence = a.fence().unwrap();
    assert!(fence > 0);
    assert_eq!(a.poll_wait().unwrap(), Duration::from_secs(2));
    b.poll().unwrap();
    assert!(!b.is_leader().unwrap() && b.leader_exists().unwrap());
    assert_eq!(b.poll_wait().unwrap(), Duration::from_secs(4));
    assert_eq!(b.fence().unwrap(), 0);

    let st = a.node_status().unwrap();
    assert!(st.is_leader && st.lock_owned, "{st:?}");
    assert!(!st.elector_running, "{st:?}");
    assert_eq!(st.uuid, a.uuid().unwrap(), "{st:?}");
    assert_eq!(st.key, key);
    assert_eq!(st.ttl, 4.0);
    assert_eq!(st.pid, std::process::id() as i64);
    assert_eq!(st.app_version.as_deref(), Some("rust-test"));
    let now = Timestamp::from(std::time::SystemTime::now()).as_millis();
    assert!((st.timestamp.as_millis() - now).abs() < 60_000, "{st:?}");
    let (created, expires) = (st.lock_created.unwrap(), st.lock_expires.unwrap());
    assert!(
        created < expires && expires.as_millis() - created.as_millis() <= 4_000,
        "{st:?}"
    );
    assert!(st.last_poll.is_some());
    let sb = b.node_status().unwrap();
    assert!(
        !sb.is_leader && sb.lock_created.is_none() && sb.app_version.is_none(),
        "{sb:?}"
    );
    let detail = b.cluster_detail().unwrap();
    let leader = detail.leader.as_ref().expect("a leader");
    assert_eq!(leader.uuid, a.uuid().unwrap(), "{detail:?}");
    assert_eq!(leader.pid, std::process::id() as i64);
    let me = detail
        .member_detail
        .iter()
        .find(|m| m.uuid == a.uuid().unwrap())
        .unwrap_or_else(|| panic!("a's status is not reported: {detail:?}"));
    assert!(me.is_leader && me.key == key, "{me:?}");
    assert!(detail.timestamp >= st.timestamp);
    assert!(b
        .cluster_detail_json()
        .unwrap()
        .contains("\"member_detail\""));

    a.release().unwrap();
    assert_eq!(loss.load(Ordering::SeqCst), 1);
    assert!(!a.is_leader().unwrap());
    b.poll().unwrap();
    assert!(b.is_leader().unwrap());
    assert!(b.fence().unwrap() > fence);
}

#[test]
fn a_lone_leader_keeps_leading() {
    let Some(c) = common::test_client() else {
        return;
    };
    let (loss, on_loss) = counter();
    let (tx, rx) = channel();
    let ttl = Duration::from_secs(2);
    let e = Elector::builder(&c, &unique_key("lone"))
        .ttl(ttl)
        .on_leader(move || {
            let _ = tx.send(());
        })
        .on_leader_loss(on_loss)
        .build()
        .unwrap();
    e.start().unwrap();
    rx.recv_timeout(Duration::from_secs(5))
        .expect("sole elector becomes leader");
    let fence = e.fence().unwrap();
    std::thread::sleep(ttl * 3);
    assert_eq!(
        loss.load(Ordering::SeqCst),
        0,
        "a healthy leader stepped down (renewals not keeping up)"
    );
    assert!(e.is_leader().unwrap());
    assert_eq!(e.fence().unwrap(), fence, "leadership was lost and re-won");
    e.stop().unwrap();
    assert!(!e.running().unwrap());
    assert_eq!(loss.load(Ordering::SeqCst), 1, "stop releases leadership");
}

#[test]
fn closures_are_dropped_with_the_elector() {
    let Some(c) = common::test_client() else {
        return;
    };
    let marker = Arc::new(());
    let m1 = marker.clone();
    let m2 = marker.clone();
    let e = Elector::builder(&c, &unique_key("drop"))
        .ttl(Duration::from_secs(2))
        .on_leader(move || drop(m1.clone()))
        .on_loop(move || drop(m2.clone()))
        .build()
        .unwrap();
    e.start().unwrap();
    wait_for("leadership", Duration::from_secs(5), || {
        e.is_leader().unwrap()
    });
    assert_eq!(Arc::strong_count(&marker), 3);
    drop(e);
    assert_eq!(
        Arc::strong_count(&marker),
        1,
        "closures outlived the elector"
    );
}

#[test]
fn dropping_the_last_reference_inside_a_callback() {
    let Some(c) = common::test_client() else {
        return;
    };
    let key = unique_key("self-drop");
    let slot: Arc<std::sync::Mutex<Option<Arc<Elector>>>> = Arc::default();
    let (tx, rx) = channel();
    let slot2 = slot.clone();
    let marker = Arc::new(());
    let m = marker.clone();
    let (loss, on_loss) = counter();
    let e = Arc::new(
        Elector::builder(&c, &key)
            .ttl(Duration::from_secs(30))
            .on_leader(move || {
                let _keep = &m;
                // The callback takes the only strong reference and drops it here: the
                // C elector is freed from its own callback (allowed since 1.1).
                let e = slot2.lock().unwrap().take();
                drop(e);
                let _ = tx.send(());
            })
            .on_leader_loss(on_loss)
            .build()
            .unwrap(),
    );
    let weak: Weak<Elector> = Arc::downgrade(&e);
    {
        // Started under the slot's lock: on_leader's take() waits for it, so the
        // callback holds the last reference when it drops it.
        let mut s = slot.lock().unwrap();
        e.start().unwrap();
        *s = Some(e);
    }
    rx.recv_timeout(Duration::from_secs(10))
        .expect("on_leader fired and returned (no deadlock)");
    wait_for(
        "the elector and its closures to be freed",
        Duration::from_secs(5),
        || weak.upgrade().is_none() && Arc::strong_count(&marker) == 1,
    );
    assert_eq!(
        loss.load(Ordering::SeqCst),
        0,
        "no callback starts after the free"
    );
    // The library stops it and releases leadership on another thread: the next elector
    // leads at once (ttl 30 s: waiting for expiry would time out).
    let next = Elector::builder(&c, &key)
        .ttl(Duration::from_secs(30))
        .build()
        .unwrap();
    wait_for(
        "leadership released by the freed elector",
        Duration::from_secs(5),
        || {
            next.poll().unwrap();
            next.is_leader().unwrap()
        },
    );
}

#[test]
fn dropping_from_on_loop_while_polled_by_the_loop() {
    let Some(c) = common::test_client() else {
        return;
    };
    let slot: Arc<std::sync::Mutex<Option<Elector>>> = Arc::default();
    let slot2 = slot.clone();
    let (tx, rx) = channel();
    let e = Elector::builder(&c, &unique_key("loop-drop"))
        .ttl(Duration::from_secs(2))
        .on_loop(move || {
            if let Some(e) = slot2.lock().unwrap().take() {
                assert!(e.running().unwrap());
                drop(e);
                let _ = tx.send(());
            }
        })
        .build()
        .unwrap();
    {
        let mut s = slot.lock().unwrap();
        e.start().unwrap();
        *s = Some(e);
    }
    rx.recv_timeout(Duration::from_secs(10))
        .expect("on_loop dropped its elector and returned");
    // Drop the slot (and with it the closure's last other reference) a little later:
    // nothing of the freed elector may call into it.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(Arc::strong_count(&slot), 1, "the closure was not dropped");
}

/// Documents with `_id: key` in the electors' lock collection (count command).
fn lock_documents(uri: &str, key: &str) -> f64 {
    let reply = wire::command(
        uri,
        common::DB,
        wire::doc(vec![
            ("count", Bson::Str("elector.locks".into())),
            (
                "query",
                Bson::Doc(wire::doc(vec![("_id", Bson::Str(key.into()))])),
            ),
        ]),
    );
    reply
        .iter()
        .find(|(k, _)| k == "n")
        .and_then(|(_, v)| *v)
        .unwrap_or_else(|| panic!("count: {reply:?}"))
}

#[test]
fn delete_on_release_is_on_by_default_for_electors() {
    let Some(uri) = common::test_uri() else {
        return;
    };
    if !uri.starts_with("mongodb://") {
        return;
    }
    let c = common::client(&uri);
    for (setting, left) in [(None, 0.0), (Some(true), 0.0), (Some(false), 1.0)] {
        let key = unique_key("delete-on-release");
        let mut b = Elector::builder(&c, &key).ttl(Duration::from_secs(5));
        if let Some(on) = setting {
            b = b.delete_on_release(on);
        }
        let e = b.op_timeout(Duration::from_secs(1)).build().unwrap();
        e.poll().unwrap();
        assert!(e.is_leader().unwrap());
        assert_eq!(lock_documents(&uri, &key), 1.0);
        e.release().unwrap();
        assert_eq!(
            lock_documents(&uri, &key),
            left,
            "delete_on_release {setting:?}: documents left after release"
        );
    }
}

#[test]
fn failover_between_processes() {
    let Some(c) = common::test_client() else {
        return;
    };
    let key = unique_key("failover");
    let ttl = Duration::from_secs(2);
    let mut h = Helper::start_on("elect", &key, ttl, &[]);
    let child_fence = h.expect_fence("LEADER");

    let (tx, rx) = channel();
    let e = Elector::builder(&c, &key)
        .ttl(ttl)
        .on_leader(move || {
            let _ = tx.send(Instant::now());
        })
        .build()
        .unwrap();
    e.start().unwrap();
    wait_for(
        "the follower to see the other process lead",
        Duration::from_secs(5),
        || e.leader_exists().unwrap(),
    );
    assert!(
        rx.recv_timeout(ttl * 2).is_err(),
        "follower took over from a live leader"
    );
    let losses = h.seen("LOSS");
    assert!(
        losses.is_empty(),
        "the live leader stepped down: {losses:?}"
    );
    h.kill();
    let killed = Instant::now();
    let at = rx
        .recv_timeout(ttl * 4)
        .expect("no failover after the leader was killed");
    let took = at - killed;
    eprintln!("failover took {took:?} (ttl {ttl:?})");
    assert!(
        took <= ttl + Duration::from_millis(1500),
        "failover took {took:?}"
    );
    assert!(e.fence().unwrap() > child_fence);
}

#[test]
fn log_handler_receives_library_messages() {
    let Some(c) = common::test_client() else {
        return;
    };
    let key = unique_key("log");
    let (tx, rx) = channel::<String>();
    let tx = std::sync::Mutex::new(tx);
    mongoelector::set_log_handler(Some(Box::new(move |_level, msg: &str| {
        let _ = tx.lock().unwrap().send(msg.to_owned());
        panic!("a panicking log handler must not unwind into C");
    })))
    .unwrap();
    let e = Elector::builder(&c, &key)
        .ttl(Duration::from_secs(2))
        .build()
        .unwrap();
    e.poll().unwrap();
    let want = format!("became leader of {key}");
    let deadline = Instant::now() + Duration::from_secs(2);
    let found = std::iter::from_fn(|| {
        rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .ok()
    })
    .any(|m| m == want);
    mongoelector::set_log_handler(None).unwrap();
    assert!(found, "no {want:?} log message delivered");
}
