//! The README's example: `cargo run --example readme -- [mongodb://host:port/ | sqlite:///path/locks.db]`
use mongoelector::{AcquireOptions, CancelToken, Client, Elector, Error, Locker};
use std::time::Duration;

fn write_report(fence: i64) -> Result<(), Error> {
    // Pass the fencing token with every write: the resource refuses tokens below the
    // highest it has seen, so a holder whose lock expired cannot overwrite a newer one.
    println!("report written with fencing token {fence}");
    Ok(())
}

fn nightly_report(lock: &Locker) -> Result<(), Error> {
    let guard = match lock.acquire(Some(Duration::from_secs(10))) {
        Ok(guard) => guard,
        Err(Error::Timeout(_)) => return Ok(()), // another node is writing it
        Err(e) => return Err(e),
    };
    write_report(guard.fence())?; // `?` drops the guard: the lock is released at once
    guard.release() // dropping it releases too; release() returns the error, if any
}

fn main() -> Result<(), Error> {
    let uri = std::env::args().nth(1);
    let uri = uri.as_deref().unwrap_or("mongodb://127.0.0.1:27017/");
    let client = Client::new(uri, "app")?;

    // Every option through a builder; unset ones keep the library's defaults.
    let lock = Locker::builder(&client, "nightly-report")
        .ttl(Duration::from_secs(60))
        .build()?;
    nightly_report(&lock)?;

    // Cancel a waiting acquire from another thread, through a token made for that call.
    let cancel = CancelToken::new();
    let canceller = cancel.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(5));
        canceller.cancel(); // the acquire below returns Err(Error::Cancelled(_))
    });
    let options = AcquireOptions::new()
        .timeout(Duration::from_secs(30))
        .cancel(&cancel);
    match lock.acquire_with(&options) {
        Ok(guard) => write_report(guard.fence())?,
        Err(Error::Cancelled(_)) => println!("cancelled"),
        // What the server answered: code, code name, labels.
        Err(e) if e.server_code() == Some(13) => eprintln!("not authorized: {e}"),
        Err(e) if e.has_label("RetryableWriteError") => eprintln!("transient, retry: {e}"),
        Err(e) => return Err(e),
    }

    let elector = Elector::builder(&client, "scheduler")
        .ttl(Duration::from_secs(15))
        .on_leader(|| println!("leading"))
        .on_leader_loss(|| println!("not leading any more"))
        .build()?;
    elector.start()?; // dropped: stops, releases leadership, frees the closures
    std::thread::sleep(Duration::from_secs(1));
    let status = elector.node_status()?; // typed: NodeStatus
    println!(
        "leader: {}, last poll: {:?}",
        status.is_leader, status.last_poll
    );
    Ok(())
}
