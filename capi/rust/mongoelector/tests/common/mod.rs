//! Shared test scaffolding: the server from MONGOELECTOR_TEST_URI, unique keys, and
//! helper processes (this test binary re-executed with MONGOELECTOR_RS_HELPER set, its
//! `helper_process` test doing the work) so that contention and failover are tested
//! between OS processes.
#![allow(dead_code)]

pub mod wire;

use mongoelector::{AcquireOptions, Client, Elector, Error, Locker};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

pub const DB: &str = "mongoelector_rust_test";
pub const HELPER_ENV: &str = "MONGOELECTOR_RS_HELPER";

/// The test server's URI, or None (the test then returns early, reported as skipped).
pub fn test_uri() -> Option<String> {
    match std::env::var("MONGOELECTOR_TEST_URI") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            eprintln!("SKIPPED: MONGOELECTOR_TEST_URI is not set (tests/servers/testserver.sh run java -- cargo test)");
            None
        }
    }
}

pub fn client(uri: &str) -> Client {
    Client::new(uri, DB).expect("Client::new")
}

/// A client of the test server, or None (see [`test_uri`]).
pub fn test_client() -> Option<Client> {
    test_uri().map(|u| client(&u))
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

pub fn unique_key(name: &str) -> String {
    format!(
        "rs-{name}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::SeqCst)
    )
}

pub fn locker(c: &Client, key: &str, ttl: Duration) -> Locker {
    Locker::builder(c, key)
        .ttl(ttl)
        .build()
        .expect("Locker::new")
}

pub struct Helper {
    pub child: Child,
    lines: Receiver<String>,
}

impl Helper {
    /// Runs this test binary's `helper_process` test in `role` with extra env vars.
    pub fn start(role: &str, env: &[(&str, String)]) -> Helper {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "helper_process",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HELPER_ENV, role)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
        for (k, v) in env {
            cmd.env(k, v);
        }
        Helper::spawn(cmd)
    }

    /// Runs the prepared command (this test binary as a helper).
    fn spawn(mut cmd: Command) -> Helper {
        let mut child = cmd.spawn().expect("spawn helper");
        let out = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(|l| l.ok()) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Helper { child, lines: rx }
    }

    /// Runs `role` on `key` with a lease of `ttl` (HELPER_TTL_MS) and extra env vars.
    pub fn start_on(role: &str, key: &str, ttl: Duration, extra: &[(&str, String)]) -> Helper {
        let mut env = vec![
            ("HELPER_KEY", key.to_owned()),
            ("HELPER_TTL_MS", ttl.as_millis().to_string()),
        ];
        env.extend(extra.iter().cloned());
        Helper::start(role, &env)
    }

    /// Writes `line` to the helper's stdin.
    pub fn send(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().expect("helper stdin");
        writeln!(stdin, "{line}").expect("write to helper");
        stdin.flush().unwrap();
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for a line "HELPER <word> <rest>" and returns <rest>.
    pub fn expect(&self, word: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        let prefix = format!("HELPER {word}");
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                // The harness may print "test helper_process ... " just before our line.
                Ok(line) => {
                    if let Some(i) = line.find(&prefix) {
                        return line[i + prefix.len()..].trim().to_string();
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!("helper did not print {prefix:?} within {timeout:?}")
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("helper exited before printing {prefix:?}")
                }
            }
        }
    }

    /// Waits for "HELPER <word> <fence>" (30 s at most) and returns the fence.
    pub fn expect_fence(&self, word: &str) -> i64 {
        let rest = self.expect(word, Duration::from_secs(30));
        rest.parse()
            .unwrap_or_else(|e| panic!("HELPER {word} {rest:?}: not a fence: {e}"))
    }

    /// Lines printed so far that start with "HELPER <word>".
    pub fn seen(&self, word: &str) -> Vec<String> {
        let prefix = format!("HELPER {word}");
        self.lines
            .try_iter()
            .filter(|l| l.contains(&prefix))
            .collect()
    }

    pub fn kill(&mut self) {
        // SIGKILL: no release, no cleanup, exactly like a crash.
        self.child.kill().expect("kill helper");
        self.child.wait().unwrap();
    }

    pub fn wait_success(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                assert!(st.success(), "helper failed: {st}");
                return;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("helper did not exit within {timeout:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn env_ms(name: &str, default: u64) -> Duration {
    Duration::from_millis(
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default),
    )
}

/// Body of the `helper_process` test when re-executed as a helper; returns false when
/// this process is not a helper.
pub fn run_helper() -> bool {
    let Ok(role) = std::env::var(HELPER_ENV) else {
        return false;
    };
    let uri = std::env::var("MONGOELECTOR_TEST_URI").unwrap();
    let key = std::env::var("HELPER_KEY").unwrap();
    let ttl = env_ms("HELPER_TTL_MS", 10_000);
    let c = client(&uri);
    match role.as_str() {
        // acquire, print ACQUIRED <fence>, hold HELPER_HOLD_MS (0: until killed), release
        "hold" => {
            let l = locker(&c, &key, ttl);
            let guard = l
                .acquire(Some(Duration::from_secs(30)))
                .expect("helper acquire");
            println!("HELPER ACQUIRED {}", guard.fence());
            let hold = env_ms("HELPER_HOLD_MS", 0);
            if hold.is_zero() {
                loop {
                    std::thread::park();
                }
            }
            std::thread::sleep(hold);
            guard.release().expect("helper release");
            println!("HELPER RELEASED");
        }
        // HELPER_N rounds of read-modify-write of a file, guarded by the lock
        "count" => {
            let n: usize = std::env::var("HELPER_N").unwrap().parse().unwrap();
            let file = std::env::var("HELPER_FILE").unwrap();
            let l = locker(&c, &key, ttl);
            let opts = AcquireOptions::new()
                .timeout(Duration::from_secs(60))
                .step(Duration::from_millis(20));
            for _ in 0..n {
                let guard = l.acquire_with(&opts).expect("helper acquire");
                let text = std::fs::read_to_string(&file).unwrap();
                let mut lines: Vec<String> = text.lines().map(String::from).collect();
                let count: u64 = lines[0].parse().unwrap();
                std::thread::sleep(Duration::from_millis(5)); // widen a broken lock's race window
                lines[0] = (count + 1).to_string();
                lines.push(format!("{} {}", guard.fence(), std::process::id()));
                std::fs::write(&file, lines.join("\n") + "\n").unwrap();
                guard.release().expect("helper release");
            }
            println!("HELPER DONE");
        }
        // prints READY, then one non-blocking acquire per stdin line: HELD <message>, or
        // ACQUIRED <fence> (then releases and exits)
        "probe" => {
            let l = locker(&c, &key, ttl);
            println!("HELPER READY");
            for line in std::io::stdin().lines() {
                line.unwrap();
                match l.try_acquire() {
                    Ok(guard) => {
                        println!("HELPER ACQUIRED {}", guard.fence());
                        guard.release().expect("probe release");
                        break;
                    }
                    Err(Error::LockHeld(d)) => println!("HELPER HELD {d}"),
                    Err(e) => panic!("probe: {e}"),
                }
            }
        }
        // (run with a skewed clock) verify_time, then an acquire: OFFSET <seconds>, then
        // ACQUIRE-OFFSET <None|Some(seconds)> from the acquire's ClockOffset error
        "clock" => {
            let l = locker(&c, &key, ttl);
            match l.verify_time() {
                Err(Error::ClockOffset {
                    offset: Some(off),
                    detail,
                }) => {
                    eprintln!("helper: {detail}");
                    println!("HELPER OFFSET {off}");
                }
                other => panic!("verify_time with a skewed clock: {other:?}"),
            }
            match l.try_acquire().map(|g| g.leak()) {
                Err(Error::ClockOffset { offset, .. }) => {
                    println!("HELPER ACQUIRE-OFFSET {offset:?}")
                }
                other => panic!("acquire with a skewed clock: {other:?}"),
            }
        }
        // an elector until killed: LEADER <fence> / LOSS
        "elect" => {
            let (tx, rx) = channel();
            let e = Elector::builder(&c, &key)
                .ttl(ttl)
                .on_leader(move || {
                    let _ = tx.send(());
                })
                .on_leader_loss(|| println!("HELPER LOSS"))
                .build()
                .expect("helper elector");
            e.start().unwrap();
            for () in rx {
                println!("HELPER LEADER {}", e.fence().unwrap());
            }
        }
        other => panic!("unknown helper role {other}"),
    }
    true
}

pub fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
