//! Just enough of the MongoDB wire protocol (OP_MSG, a few BSON types) to write a
//! document the library would never write, e.g. a lock document whose fence is a string,
//! so that tests can make the server answer the library with a real error code.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

pub enum Bson {
    Str(String),
    Bool(bool),
    I32(i32),
    I64(i64),
    /// Milliseconds since the epoch.
    Date(i64),
    Doc(Vec<(String, Bson)>),
    Arr(Vec<Bson>),
}

fn cstr(out: &mut Vec<u8>, s: &str) {
    assert!(!s.contains('\0'));
    out.extend_from_slice(s.as_bytes());
    out.push(0);
}

pub fn encode(fields: &[(String, Bson)]) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, v) in fields {
        let (tag, bytes) = match v {
            Bson::Str(s) => {
                let mut b = ((s.len() + 1) as i32).to_le_bytes().to_vec();
                cstr(&mut b, s);
                (0x02u8, b)
            }
            Bson::Bool(x) => (0x08, vec![*x as u8]),
            Bson::I32(x) => (0x10, x.to_le_bytes().to_vec()),
            Bson::I64(x) => (0x12, x.to_le_bytes().to_vec()),
            Bson::Date(x) => (0x09, x.to_le_bytes().to_vec()),
            Bson::Doc(d) => (0x03, encode(d)),
            Bson::Arr(a) => {
                let d: Vec<(String, Bson)> = a
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (i.to_string(), clone(v)))
                    .collect();
                (0x04, encode(&d))
            }
        };
        body.push(tag);
        cstr(&mut body, name);
        body.extend_from_slice(&bytes);
    }
    let mut out = ((body.len() + 5) as i32).to_le_bytes().to_vec();
    out.extend_from_slice(&body);
    out.push(0);
    out
}

fn clone(v: &Bson) -> Bson {
    match v {
        Bson::Str(s) => Bson::Str(s.clone()),
        Bson::Bool(x) => Bson::Bool(*x),
        Bson::I32(x) => Bson::I32(*x),
        Bson::I64(x) => Bson::I64(*x),
        Bson::Date(x) => Bson::Date(*x),
        Bson::Doc(d) => Bson::Doc(d.iter().map(|(k, v)| (k.clone(), clone(v))).collect()),
        Bson::Arr(a) => Bson::Arr(a.iter().map(clone).collect()),
    }
}

pub fn doc(fields: Vec<(&str, Bson)>) -> Vec<(String, Bson)> {
    fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// The top-level field names of a BSON document and, for numbers, their value.
fn top_level(doc: &[u8]) -> Vec<(String, Option<f64>)> {
    let mut out = Vec::new();
    let mut i = 4;
    while i < doc.len() && doc[i] != 0 {
        let tag = doc[i];
        i += 1;
        let end = i + doc[i..].iter().position(|&b| b == 0).unwrap();
        let name = String::from_utf8_lossy(&doc[i..end]).into_owned();
        i = end + 1;
        let le32 = |at: usize| i32::from_le_bytes(doc[at..at + 4].try_into().unwrap()) as usize;
        let (len, num) = match tag {
            0x01 => (
                8,
                Some(f64::from_le_bytes(doc[i..i + 8].try_into().unwrap())),
            ),
            0x10 => (4, Some(le32(i) as i32 as f64)),
            0x12 => (
                8,
                Some(i64::from_le_bytes(doc[i..i + 8].try_into().unwrap()) as f64),
            ),
            0x02 => (4 + le32(i), None),
            0x03 | 0x04 => (le32(i), None),
            0x05 => (5 + le32(i), None),
            0x07 => (12, None),
            0x08 => (1, None),
            0x09 | 0x11 => (8, None),
            0x0A => (0, None),
            other => panic!("unexpected BSON type {other:#x} in a reply"),
        };
        out.push((name, num));
        i += len;
    }
    out
}

/// host:port of a "mongodb://host:port/..." URI.
fn address(uri: &str) -> String {
    let rest = uri.strip_prefix("mongodb://").expect("a mongodb:// URI");
    let hosts = rest.split(['/', '?']).next().unwrap();
    let host = hosts.split(',').next().unwrap();
    host.rsplit('@').next().unwrap().to_owned()
}

/// Runs `command` (with $db = `db`) on the server of `uri`, returns the reply's
/// top-level fields.
pub fn command(
    uri: &str,
    db: &str,
    mut command: Vec<(String, Bson)>,
) -> Vec<(String, Option<f64>)> {
    command.push(("$db".to_owned(), Bson::Str(db.to_owned())));
    let body = encode(&command);
    let mut msg = Vec::new();
    let len = 16 + 4 + 1 + body.len();
    msg.extend_from_slice(&(len as i32).to_le_bytes());
    msg.extend_from_slice(&7i32.to_le_bytes()); // requestID
    msg.extend_from_slice(&0i32.to_le_bytes()); // responseTo
    msg.extend_from_slice(&2013i32.to_le_bytes()); // OP_MSG
    msg.extend_from_slice(&0u32.to_le_bytes()); // flagBits
    msg.push(0); // section kind 0: the body
    msg.extend_from_slice(&body);
    let mut s = TcpStream::connect(address(uri)).expect("connect to the test server");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&msg).unwrap();
    let mut header = [0u8; 16];
    s.read_exact(&mut header).unwrap();
    let total = i32::from_le_bytes(header[0..4].try_into().unwrap()) as usize;
    let mut rest = vec![0u8; total - 16];
    s.read_exact(&mut rest).unwrap();
    assert_eq!(
        i32::from_le_bytes(header[12..16].try_into().unwrap()),
        2013,
        "not an OP_MSG reply"
    );
    assert_eq!(rest[4], 0, "reply section kind");
    top_level(&rest[5..])
}

/// Inserts `document` into `db.collection`; panics unless the server says ok without
/// write errors.
pub fn insert(uri: &str, db: &str, collection: &str, document: Vec<(String, Bson)>) {
    let reply = command(
        uri,
        db,
        doc(vec![
            ("insert", Bson::Str(collection.to_owned())),
            ("documents", Bson::Arr(vec![Bson::Doc(document)])),
        ]),
    );
    let ok = reply.iter().find(|(k, _)| k == "ok").and_then(|(_, v)| *v);
    assert_eq!(ok, Some(1.0), "insert failed: {reply:?}");
    assert!(
        !reply.iter().any(|(k, _)| k == "writeErrors"),
        "insert had write errors: {reply:?}"
    );
}
