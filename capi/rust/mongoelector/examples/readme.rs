//! The README's Rust example, as a program: `cargo run --example readme -- <uri>`.
use mongoelector::{Client, Elector, Error, Locker, LockerOptions};
use std::time::Duration;

fn write_report(fence: i64) {
    println!("report written with fencing token {fence}");
}

fn main() -> Result<(), Error> {
    let uri = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "mongodb://127.0.0.1:27017/".into());
    let client = Client::new(&uri, "app")?;
    let lock = Locker::new(
        &client,
        "nightly-report",
        &LockerOptions::default().ttl(Duration::from_secs(60)),
    )?;
    match lock.acquire(Some(Duration::from_secs(10))) {
        Ok(fence) => {
            write_report(fence);
            lock.release()?;
        }
        Err(Error::Timeout(msg)) => eprintln!("busy: {msg}"),
        Err(e) => return Err(e),
    }
    let elector = Elector::builder(&client, "scheduler")
        .on_leader(|| println!("leading"))
        .build()?;
    elector.start()?; // dropped: stops, releases leadership, frees the closures
    std::thread::sleep(Duration::from_secs(1));
    Ok(())
}
