//! The library's log messages reach the `log` crate with no setup call (target
//! "mongoelector", levels mapped), and a handler set with `set_log_handler` takes them
//! instead until `None` gives them back. On the embedded SQLite backend: no server.
//! Its own test binary: a `log` logger is process-wide.
use mongoelector::{Client, Elector, LogLevel};
use std::sync::{Arc, Mutex};

struct Recorder(Mutex<Vec<(log::Level, String, String)>>);

impl log::Log for Recorder {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }
    fn log(&self, record: &log::Record) {
        self.0.lock().unwrap().push((
            record.level(),
            record.target().to_owned(),
            record.args().to_string(),
        ));
    }
    fn flush(&self) {}
}

static RECORDER: Recorder = Recorder(Mutex::new(Vec::new()));

fn records() -> Vec<(log::Level, String, String)> {
    std::mem::take(&mut *RECORDER.0.lock().unwrap())
}

/// One poll of a fresh elector on its own SQLite file: it becomes leader and the
/// library logs "became leader of <key>" at info.
fn lead(dir: &std::path::Path, key: &str) {
    let client = Client::new(&format!("sqlite://{}/locks.db", dir.display()), "").unwrap();
    let e = Elector::builder(&client, key).build().unwrap();
    e.poll().unwrap();
    assert!(e.is_leader().unwrap());
}

#[test]
fn messages_reach_the_log_crate_by_default_and_a_handler_on_request() {
    log::set_logger(&RECORDER).unwrap();
    log::set_max_level(log::LevelFilter::Debug);
    let dir = std::env::temp_dir().join(format!("mongoelector-rs-log-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    // Default: no setup call.
    lead(&dir, "log-default");
    let got = records();
    assert!(
        got.iter()
            .any(|(level, target, msg)| *level == log::Level::Info
                && target == "mongoelector"
                && msg == "became leader of log-default"),
        "no info record 'became leader of log-default' with target mongoelector: {got:?}"
    );

    // A handler takes them instead of the log crate.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    mongoelector::set_log_handler(Some(Box::new(move |level, msg: &str| {
        s.lock().unwrap().push((level, msg.to_owned()));
    })))
    .unwrap();
    lead(&dir, "log-handler");
    assert!(
        seen.lock()
            .unwrap()
            .contains(&(LogLevel::Info, "became leader of log-handler".to_owned())),
        "handler did not get the message: {:?}",
        seen.lock().unwrap()
    );
    assert!(
        !records().iter().any(|(_, _, m)| m.contains("log-handler")),
        "the log crate got a message while a handler was set"
    );

    // The hand-over: a replaced handler is dropped once no call of it is in flight, on
    // the replacing thread if none is...
    let marker = Arc::new(());
    let m = marker.clone();
    mongoelector::set_log_handler(Some(Box::new(move |_, _: &str| {
        let _ = &m;
    })))
    .unwrap();
    assert_eq!(Arc::strong_count(&marker), 2);
    // ...else on the thread whose call ends last.
    let (entered_tx, entered) = std::sync::mpsc::channel();
    let entered_tx = Mutex::new(entered_tx);
    let m = marker.clone();
    mongoelector::set_log_handler(Some(Box::new(move |_, msg: &str| {
        let _ = &m;
        if msg == "became leader of log-slow" {
            let _ = entered_tx.lock().unwrap().send(());
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
    })))
    .unwrap();
    assert_eq!(
        Arc::strong_count(&marker),
        2,
        "the first handler was not released"
    );
    let d = dir.clone();
    let slow = std::thread::spawn(move || lead(&d, "log-slow"));
    entered
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the slow handler was called");
    // None: back to the log crate. Messages below log's max level are not formatted.
    mongoelector::set_log_handler(None).unwrap();
    assert_eq!(
        Arc::strong_count(&marker),
        2,
        "a handler in flight was released under its feet"
    );
    slow.join().unwrap();
    assert_eq!(
        Arc::strong_count(&marker),
        1,
        "the replaced handler was not released after its last call"
    );
    log::set_max_level(log::LevelFilter::Warn);
    lead(&dir, "log-filtered");
    assert!(!records().iter().any(|(_, _, m)| m.contains("log-filtered")));
    log::set_max_level(log::LevelFilter::Info);
    lead(&dir, "log-back");
    assert!(records()
        .iter()
        .any(|(_, t, m)| t == "mongoelector" && m == "became leader of log-back"));
    let _ = std::fs::remove_dir_all(&dir);
}
