//! Who waits in a key's fair queue: the fair waiters of a lock, a semaphore or a
//! read-write lock, read without joining (nothing written).
use crate::client::Client;
use crate::error::{check, cstring, Error, Result};
use crate::locker::take_c_string;
use crate::status::Timestamp;
use mongoelector_sys as sys;
#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::os::raw::c_char;
use std::ptr;

/// Whose fair queue [`read_queue`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub enum QueueOf {
    /// A plain lock's: the blocking acquires of fair [`Locker`](crate::Locker)s.
    Lock,
    /// A [`Semaphore`](crate::Semaphore)'s.
    Semaphore,
    /// A [`RwLock`](crate::RwLock)'s: its fair writers.
    RwLock,
}

impl QueueOf {
    fn raw(self) -> sys::mongoelector_queue_of {
        match self {
            QueueOf::Lock => sys::MONGOELECTOR_QUEUE_LOCK,
            QueueOf::Semaphore => sys::MONGOELECTOR_QUEUE_SEMAPHORE,
            QueueOf::RwLock => sys::MONGOELECTOR_QUEUE_RWLOCK,
        }
    }
}

/// Who waits in a key's fair queue.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct QueueStatus {
    /// When it was read: the earliest the server's clock could read.
    pub server_time: Timestamp,
    /// The live waiters, first in line first; empty when nobody waits.
    pub waiting: Vec<QueuedWaiter>,
}

/// One fair waiter still queued for a key.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct QueuedWaiter {
    /// The waiting locker's, semaphore's or read-write lock's identity.
    pub uuid: String,
    /// Its place in the line: smaller tickets are served first.
    pub ticket: i64,
    /// When its entry expires unless renewed (server time).
    pub expires: Timestamp,
}

/// Who waits for `key` in its fair queue, read without joining it (nothing written):
/// the blocking acquires that found the key taken, of fair lockers ([`QueueOf::Lock`]),
/// semaphores ([`QueueOf::Semaphore`]) or read-write lock writers ([`QueueOf::RwLock`]).
/// `collection`: the lock's, semaphore's or read-write lock's collection, `None` for the
/// default of its kind. One read plus, now and then, a sample of the server's clock.
pub fn read_queue(
    client: &Client,
    of: QueueOf,
    collection: Option<&str>,
    key: &str,
) -> Result<QueueStatus> {
    let ckey = cstring("key", key)?;
    let ccoll = collection.map(|c| cstring("collection", c)).transpose()?;
    let mut s: *mut c_char = ptr::null_mut();
    check(unsafe {
        sys::mongoelector_client_read_queue(
            client.inner.ptr,
            of.raw(),
            ccoll.as_ref().map_or(ptr::null(), |c| c.as_ptr()),
            ckey.as_ptr(),
            &mut s,
        )
    })?;
    parse_queue(&unsafe { take_c_string(s) })
}

fn parse_queue(text: &str) -> Result<QueueStatus> {
    let bad = || Error::internal(format!("unexpected queue status from the library: {text}"));
    let v: Value = serde_json::from_str(text).map_err(|_| bad())?;
    let int = |v: &Value, k: &str| v.get(k).and_then(Value::as_i64);
    let waiting = v
        .get("waiting")
        .and_then(Value::as_array)
        .ok_or_else(bad)?
        .iter()
        .map(|w| {
            Some(QueuedWaiter {
                uuid: w.get("uuid").and_then(Value::as_str)?.to_owned(),
                ticket: int(w, "ticket")?,
                expires: Timestamp::from_millis(int(w, "expire_ms")?),
            })
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(bad)?;
    Ok(QueueStatus {
        server_time: Timestamp::from_millis(int(&v, "server_time_ms").ok_or_else(bad)?),
        waiting,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_library_json() {
        let st = parse_queue(
            r#"{"server_time_ms": 1000, "waiting": [{"uuid": "u1", "ticket": 3, "expire_ms": 31000}]}"#,
        )
        .unwrap();
        assert_eq!(st.server_time.as_millis(), 1000);
        assert_eq!(
            st.waiting,
            vec![QueuedWaiter {
                uuid: "u1".into(),
                ticket: 3,
                expires: Timestamp::from_millis(31000)
            }]
        );
        let empty = parse_queue(r#"{"server_time_ms": 5, "waiting": []}"#).unwrap();
        assert!(empty.waiting.is_empty());
        assert!(parse_queue(r#"{"server_time_ms": 5}"#).is_err());
        assert!(parse_queue(r#"{"server_time_ms": 5, "waiting": [{"uuid": "u"}]}"#).is_err());
    }
}
