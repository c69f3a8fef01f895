//! Typed status documents ([`NodeStatus`], [`ClusterDetail`]) parsed from the library's
//! JSON (MongoDB relaxed Extended JSON v2 written by libbson), and [`Timestamp`], the
//! server-clock instants they and the locker report.
use crate::error::{Error, Result};
use serde_json::{Map, Value};
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};

const MS_PER_DAY: i64 = 86_400_000;

/// An instant as milliseconds since the Unix epoch, UTC (BSON's date): the lock and
/// status times of the library, on the SERVER's clock. Displays as RFC 3339
/// (`2026-11-23T17:38:28.123Z`); with the `serde` feature it serializes as that string
/// and deserializes from it or from an integer of milliseconds.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    pub const fn from_millis(ms: i64) -> Timestamp {
        Timestamp(ms)
    }

    /// Milliseconds since the Unix epoch.
    pub const fn as_millis(self) -> i64 {
        self.0
    }

    pub fn to_system_time(self) -> SystemTime {
        if self.0 >= 0 {
            UNIX_EPOCH + Duration::from_millis(self.0 as u64)
        } else {
            UNIX_EPOCH - Duration::from_millis(self.0.unsigned_abs())
        }
    }

    /// The instant of `t`, truncated to milliseconds (saturating outside i64's range).
    pub fn from_system_time(t: SystemTime) -> Timestamp {
        let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        match t.duration_since(UNIX_EPOCH) {
            Ok(d) => Timestamp(ms(d)),
            Err(e) => Timestamp(ms(e.duration()).saturating_neg()),
        }
    }

    /// Parses RFC 3339 / ISO 8601 with a time zone: `YYYY-MM-DDTHH:MM:SS[.fff]` then `Z`
    /// or `±HH:MM`. Digits past milliseconds are truncated. Years outside 0000..9999 as
    /// [`Timestamp`]'s `Display` writes them (ISO 8601's expanded form: `+10000-...`,
    /// `-0001-...`).
    pub fn parse_rfc3339(s: &str) -> Option<Timestamp> {
        let (sign, rest) = match s.as_bytes().first()? {
            b'+' => (1, &s[1..]),
            b'-' => (-1, &s[1..]),
            _ => (1, s),
        };
        let b = rest.as_bytes();
        let year_len = b.iter().position(|c| !c.is_ascii_digit())?;
        if !(4..=12).contains(&year_len) || (year_len > 4 && sign == 1 && s.as_bytes()[0] != b'+') {
            return None;
        }
        let num = |from: usize, len: usize| -> Option<i64> {
            let part = b.get(from..from + len)?;
            if !part.iter().all(u8::is_ascii_digit) {
                return None;
            }
            std::str::from_utf8(part).ok()?.parse().ok()
        };
        let y = sign * num(0, year_len)?;
        let b = &b[year_len - 4..]; // the rest at the offsets of a 4-digit year
        let num = |from: usize, len: usize| -> Option<i64> {
            let part = b.get(from..from + len)?;
            if !part.iter().all(u8::is_ascii_digit) {
                return None;
            }
            std::str::from_utf8(part).ok()?.parse().ok()
        };
        let (mo, d) = (num(5, 2)?, num(8, 2)?);
        if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
            return None;
        }
        if !matches!(b.get(10), Some(b'T' | b't' | b' ')) {
            return None;
        }
        let (h, mi, sec) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
        if b.get(13) != Some(&b':') || b.get(16) != Some(&b':') {
            return None;
        }
        if !(1..=12).contains(&mo)
            || d < 1
            || d > days_in_month(y, mo)
            || h > 23
            || mi > 59
            || sec > 60
        {
            return None;
        }
        let mut i = 19;
        let mut ms = 0i64;
        if b.get(i) == Some(&b'.') {
            i += 1;
            let start = i;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                if i - start < 3 {
                    ms = ms * 10 + i64::from(b[i] - b'0');
                }
                i += 1;
            }
            if i == start {
                return None;
            }
            for _ in (i - start)..3 {
                ms *= 10;
            }
        }
        let offset_min = match b.get(i) {
            Some(b'Z' | b'z') if i + 1 == b.len() => 0,
            Some(&sign @ (b'+' | b'-')) => {
                let oh = num(i + 1, 2)?;
                let (om, end) = if b.get(i + 3) == Some(&b':') {
                    (num(i + 4, 2)?, i + 6)
                } else {
                    (num(i + 3, 2)?, i + 5)
                };
                if end != b.len() || oh > 23 || om > 59 {
                    return None;
                }
                let m = oh * 60 + om;
                if sign == b'+' {
                    m
                } else {
                    -m
                }
            }
            _ => return None,
        };
        let days = days_from_civil(y, mo, d);
        let secs = days
            .checked_mul(86_400)?
            .checked_add(h * 3600 + mi * 60 + sec - offset_min * 60)?;
        secs.checked_mul(1000)?.checked_add(ms).map(Timestamp)
    }
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

// Howard Hinnant's days_from_civil / civil_from_days (proleptic Gregorian).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = self.0.div_euclid(MS_PER_DAY);
        let rem = self.0.rem_euclid(MS_PER_DAY);
        let (y, m, d) = civil_from_days(days);
        let (h, rem) = (rem / 3_600_000, rem % 3_600_000);
        let (mi, rem) = (rem / 60_000, rem % 60_000);
        match y {
            0..=9999 => write!(f, "{y:04}")?,
            10_000.. => write!(f, "+{y}")?,
            _ => write!(f, "-{:04}", y.unsigned_abs())?,
        }
        write!(
            f,
            "-{m:02}-{d:02}T{h:02}:{mi:02}:{:02}.{:03}Z",
            rem / 1000,
            rem % 1000
        )
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Timestamp({self})")
    }
}

impl From<Timestamp> for SystemTime {
    fn from(t: Timestamp) -> SystemTime {
        t.to_system_time()
    }
}

impl From<SystemTime> for Timestamp {
    fn from(t: SystemTime) -> Timestamp {
        Timestamp::from_system_time(t)
    }
}

#[cfg(feature = "serde")]
impl Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(feature = "serde")]
impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Timestamp;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an RFC 3339 date-time or milliseconds since the Unix epoch")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<Timestamp, E> {
                Timestamp::parse_rfc3339(v)
                    .ok_or_else(|| E::custom(format!("not an RFC 3339 date-time: {v:?}")))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<Timestamp, E> {
                Ok(Timestamp(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<Timestamp, E> {
                i64::try_from(v)
                    .map(Timestamp)
                    .map_err(|_| E::custom("milliseconds out of range"))
            }
        }
        d.deserialize_any(V)
    }
}

/// One elector node's status: [`crate::Elector::node_status`] for this node, and the
/// entries of [`ClusterDetail::member_detail`] (documents the nodes of the key wrote).
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct NodeStatus {
    /// The node's identity in the lock document.
    pub uuid: String,
    /// The election's key.
    pub key: String,
    /// The leader's lease, in seconds.
    pub ttl: f64,
    /// When the status was taken (server time).
    pub timestamp: Timestamp,
    pub host: String,
    pub pid: i64,
    /// The node holds the election's lock (leads).
    pub lock_owned: bool,
    /// The leader's hold: written and expiry (server time); None when not leading.
    pub lock_created: Option<Timestamp>,
    pub lock_expires: Option<Timestamp>,
    pub is_leader: bool,
    pub elector_running: bool,
    /// The node's last poll, None before the first.
    pub last_poll: Option<Timestamp>,
    /// As given to [`crate::ElectorBuilder::app_version`].
    pub app_version: Option<String>,
}

/// The leader named by the lock document.
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct LeaderInfo {
    pub host: String,
    pub pid: i64,
    pub uuid: String,
    /// The leader's payload ([`crate::ElectorBuilder::payload`]) as JSON text, `None` when
    /// it has none.
    pub payload: Option<String>,
}

/// What [`crate::Elector::cluster_detail`] reads: every node's last reported status
/// (newest first), the current leader, and the server time of the read.
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct ClusterDetail {
    /// Status documents of the key's nodes, newest first. A document written by another
    /// implementation may lack fields or type them differently: those fields read as
    /// their defaults (empty, 0, false, None).
    pub member_detail: Vec<NodeStatus>,
    /// None when nobody holds the lock.
    pub leader: Option<LeaderInfo>,
    pub timestamp: Timestamp,
}

// ---- Extended JSON ----------------------------------------------------------------------

/// A date of relaxed or canonical Extended JSON: {"$date": "<ISO-8601>"},
/// {"$date": {"$numberLong": "<ms>"}} or {"$date": <ms>}.
fn ext_date(v: &Value) -> Option<Timestamp> {
    match v.as_object()?.get("$date")? {
        Value::String(s) => Timestamp::parse_rfc3339(s),
        Value::Object(o) => o.get("$numberLong")?.as_str()?.parse().ok().map(Timestamp),
        Value::Number(n) => n.as_i64().map(Timestamp),
        _ => None,
    }
}

fn ext_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::Object(o) if o.len() == 1 => {
            let (k, v) = o.iter().next()?;
            let s = v.as_str()?;
            match k.as_str() {
                "$numberDouble" => match s {
                    "NaN" => Some(f64::NAN),
                    "Infinity" => Some(f64::INFINITY),
                    "-Infinity" => Some(f64::NEG_INFINITY),
                    _ => s.parse().ok(),
                },
                "$numberLong" | "$numberInt" => s.parse::<i64>().ok().map(|i| i as f64),
                _ => None,
            }
        }
        _ => None,
    }
}

fn ext_i64(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| {
            let f = n.as_f64()?;
            (f.fract() == 0.0 && f.abs() < 9.2e18).then_some(f as i64)
        }),
        Value::Object(o) if o.len() == 1 => {
            let (k, v) = o.iter().next()?;
            match k.as_str() {
                "$numberLong" | "$numberInt" => v.as_str()?.parse().ok(),
                "$numberDouble" => {
                    let f = ext_f64(&Value::Object(o.clone()))?;
                    (f.fract() == 0.0 && f.abs() < 9.2e18).then_some(f as i64)
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// Reads the fields of one object. Strict: a missing or mistyped field is an error (our
/// own documents); lenient: it reads as its default (documents of other nodes).
struct Fields<'a> {
    obj: &'a Map<String, Value>,
    strict: bool,
    what: &'static str,
}

impl<'a> Fields<'a> {
    fn new(v: &'a Value, strict: bool, what: &'static str) -> Result<Fields<'a>> {
        match v.as_object() {
            Some(obj) => Ok(Fields { obj, strict, what }),
            None => Err(Error::internal(format!("{what}: not a JSON object: {v}"))),
        }
    }

    fn get<T: Default>(&self, name: &str, conv: impl Fn(&Value) -> Option<T>) -> Result<T> {
        match self.obj.get(name) {
            Some(v) => match conv(v) {
                Some(t) => Ok(t),
                None if self.strict => Err(Error::internal(format!(
                    "{}: field {name} has an unexpected value: {v}",
                    self.what
                ))),
                None => Ok(T::default()),
            },
            None if self.strict => Err(Error::internal(format!(
                "{}: field {name} is missing",
                self.what
            ))),
            None => Ok(T::default()),
        }
    }

    /// Missing or null: None.
    fn opt<T>(&self, name: &str, conv: impl Fn(&Value) -> Option<T>) -> Result<Option<T>> {
        match self.obj.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => match conv(v) {
                Some(t) => Ok(Some(t)),
                None if self.strict => Err(Error::internal(format!(
                    "{}: field {name} has an unexpected value: {v}",
                    self.what
                ))),
                None => Ok(None),
            },
        }
    }

    fn string(&self, name: &str) -> Result<String> {
        self.get(name, |v| v.as_str().map(str::to_owned))
    }
    fn int(&self, name: &str) -> Result<i64> {
        self.get(name, ext_i64)
    }
    fn double(&self, name: &str) -> Result<f64> {
        self.get(name, ext_f64)
    }
    fn boolean(&self, name: &str) -> Result<bool> {
        self.get(name, Value::as_bool)
    }
    fn date(&self, name: &str) -> Result<Timestamp> {
        self.get(name, ext_date)
    }
    fn opt_date(&self, name: &str) -> Result<Option<Timestamp>> {
        self.opt(name, ext_date)
    }
}

fn node_status_from(v: &Value, strict: bool) -> Result<NodeStatus> {
    let f = Fields::new(v, strict, "node status")?;
    Ok(NodeStatus {
        uuid: f.string("uuid")?,
        key: f.string("key")?,
        ttl: f.double("ttl")?,
        timestamp: f.date("timestamp")?,
        host: f.string("host")?,
        pid: f.int("pid")?,
        lock_owned: f.boolean("lock_owned")?,
        lock_created: f.opt_date("lock_created")?,
        lock_expires: f.opt_date("lock_expires")?,
        is_leader: f.boolean("is_leader")?,
        elector_running: f.boolean("elector_running")?,
        last_poll: f.opt_date("last_poll")?,
        app_version: f.opt("app_version", |v| v.as_str().map(str::to_owned))?,
    })
}

fn parse_json(text: &str) -> Result<Value> {
    serde_json::from_str(text)
        .map_err(|e| Error::internal(format!("the library returned invalid JSON ({e}): {text}")))
}

/// This node's status from mongoelector_elector_node_status's JSON.
pub(crate) fn parse_node_status(text: &str) -> Result<NodeStatus> {
    node_status_from(&parse_json(text)?, true)
}

/// mongoelector_elector_cluster_detail's JSON.
pub(crate) fn parse_cluster_detail(text: &str) -> Result<ClusterDetail> {
    let v = parse_json(text)?;
    let f = Fields::new(&v, true, "cluster detail")?;
    let members = f.get("member_detail", |v| v.as_array().cloned())?;
    let leader = match f.obj.get("leader") {
        None | Some(Value::Null) => None,
        Some(l) => {
            let lf = Fields::new(l, true, "cluster detail leader")?;
            Some(LeaderInfo {
                host: lf.string("host")?,
                pid: lf.int("process_id")?,
                uuid: lf.string("uuid")?,
                payload: l
                    .get("payload")
                    .filter(|p| p.is_object())
                    .map(|p| p.to_string()),
            })
        }
    };
    Ok(ClusterDetail {
        member_detail: members
            .iter()
            .map(|m| node_status_from(m, false))
            .collect::<Result<_>>()?,
        leader,
        timestamp: f.date("timestamp")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_format_and_parse() {
        let t = Timestamp::parse_rfc3339("2026-11-23T17:38:28.123Z").unwrap();
        assert_eq!(t.as_millis(), 1_795_455_508_123);
        assert_eq!(t.to_string(), "2026-11-23T17:38:28.123Z");
        assert_eq!(
            Timestamp::parse_rfc3339("1970-01-01T00:00:00Z"),
            Some(Timestamp(0))
        );
        assert_eq!(
            Timestamp::parse_rfc3339("1970-01-01T01:00:00.5+01:00"),
            Some(Timestamp(500))
        );
        assert_eq!(
            Timestamp::parse_rfc3339("2000-02-29T00:00:00.123456-0030"),
            Some(Timestamp(951_784_200_123))
        );
        assert_eq!(Timestamp(-1).to_string(), "1969-12-31T23:59:59.999Z");
        for bad in [
            "",
            "2026-11-23",
            "2026-11-23T17:38:28",
            "2026-13-01T00:00:00Z",
            "2026-02-30T00:00:00Z",
            "2026-11-23T17:38:28.Z",
            "2026-11-23T17:38:28ZZ",
        ] {
            assert_eq!(Timestamp::parse_rfc3339(bad), None, "{bad:?}");
        }
        assert_eq!(
            Timestamp(253_402_300_800_000).to_string(),
            "+10000-01-01T00:00:00.000Z"
        );
        assert_eq!(
            Timestamp(-62_167_219_200_001).to_string(),
            "-0001-12-31T23:59:59.999Z"
        );
        assert_eq!(Timestamp::parse_rfc3339("10000-01-01T00:00:00Z"), None);
        for ms in [
            0,
            1,
            951_782_400_000,
            253_402_300_799_999,
            253_402_300_800_000,
            -86_400_001,
            -62_167_219_200_001,
            i64::MAX / 2,
            i64::MIN / 2,
        ] {
            let t = Timestamp(ms);
            assert_eq!(Timestamp::parse_rfc3339(&t.to_string()), Some(t), "{t}");
        }
        let st = SystemTime::UNIX_EPOCH + Duration::from_millis(1234);
        assert_eq!(Timestamp::from(st), Timestamp(1234));
        assert_eq!(SystemTime::from(Timestamp(1234)), st);
    }

    #[test]
    fn extended_json_values() {
        let j: Value = serde_json::from_str(
            r#"{"a":{"$date":"2026-11-23T17:38:28.123Z"},"b":{"$date":{"$numberLong":"-5"}},
                "c":{"$numberDouble":"NaN"},"d":{"$numberDouble":"-Infinity"},"e":7,"f":2.5,
                "g":{"$numberLong":"9007199254740993"},"h":3.0}"#,
        )
        .unwrap();
        assert_eq!(ext_date(&j["a"]), Some(Timestamp(1_795_455_508_123)));
        assert_eq!(ext_date(&j["b"]), Some(Timestamp(-5)));
        assert!(ext_f64(&j["c"]).unwrap().is_nan());
        assert_eq!(ext_f64(&j["d"]), Some(f64::NEG_INFINITY));
        assert_eq!(ext_f64(&j["e"]), Some(7.0));
        assert_eq!(ext_i64(&j["g"]), Some(9_007_199_254_740_993));
        assert_eq!(ext_i64(&j["h"]), Some(3));
        assert_eq!(ext_i64(&j["f"]), None);
    }

    const NODE: &str = r#"{ "uuid" : "u1", "key" : "k", "ttl" : 15, "timestamp" : { "$date" : "2026-11-23T17:38:28.123Z" }, "host" : "h", "pid" : 42, "lock_owned" : true, "lock_created" : { "$date" : "2026-11-23T17:38:20Z" }, "lock_expires" : { "$date" : { "$numberLong" : "253402300800000" } }, "_id" : "u1", "is_leader" : true, "elector_running" : false, "last_poll" : null, "app_version" : "v1" }"#;

    #[test]
    fn node_status_parses_and_is_strict() {
        let s = parse_node_status(NODE).unwrap();
        assert_eq!(
            (s.uuid.as_str(), s.key.as_str(), s.ttl, s.pid),
            ("u1", "k", 15.0, 42)
        );
        assert_eq!(s.timestamp, Timestamp(1_795_455_508_123));
        assert_eq!(s.lock_created, Some(Timestamp(1_795_455_500_000)));
        assert_eq!(s.lock_expires, Some(Timestamp(253_402_300_800_000)));
        assert!(s.lock_owned && s.is_leader && !s.elector_running);
        assert_eq!((s.last_poll, s.app_version.as_deref()), (None, Some("v1")));
        let err = parse_node_status(&NODE.replace(r#""pid" : 42"#, r#""pid" : "x""#)).unwrap_err();
        assert!(err.message().contains("pid"), "{err}");
        let err = parse_node_status(&NODE.replace(r#""host" : "h", "#, "")).unwrap_err();
        assert!(err.message().contains("host is missing"), "{err}");
        assert!(matches!(parse_node_status("{"), Err(Error::Internal(_))));
    }

    #[test]
    fn cluster_detail_parses_foreign_members_leniently() {
        let text = format!(
            r#"{{ "member_detail" : [ {NODE}, {{ "uuid" : "old", "ttl" : {{ "$numberDouble" : "2.5" }}, "pid" : "odd" }} ], "leader" : {{ "host" : "h", "process_id" : 42, "uuid" : "u1" }}, "timestamp" : {{ "$date" : "2026-11-23T17:38:29Z" }} }}"#
        );
        let d = parse_cluster_detail(&text).unwrap();
        assert_eq!(d.member_detail.len(), 2);
        assert_eq!(d.member_detail[0], parse_node_status(NODE).unwrap());
        assert_eq!(d.member_detail[1].uuid, "old");
        assert_eq!((d.member_detail[1].ttl, d.member_detail[1].pid), (2.5, 0));
        let l = d.leader.unwrap();
        assert_eq!((l.host.as_str(), l.pid, l.uuid.as_str()), ("h", 42, "u1"));
        assert_eq!(d.timestamp, Timestamp(1_795_455_509_000));
        let none = parse_cluster_detail(
            r#"{"member_detail":[],"leader":null,"timestamp":{"$date":"1970-01-01T00:00:00Z"}}"#,
        )
        .unwrap();
        assert_eq!((none.leader, none.member_detail.len()), (None, 0));
    }

    #[cfg(feature = "serde")]
    #[test]
    fn serde_round_trip() {
        let s = parse_node_status(NODE).unwrap();
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["timestamp"], "2026-11-23T17:38:28.123Z");
        assert_eq!(json["last_poll"], Value::Null);
        assert_eq!(serde_json::from_value::<NodeStatus>(json).unwrap(), s);
        let t: Timestamp = serde_json::from_str("1234").unwrap();
        assert_eq!(t, Timestamp(1234));
        assert!(serde_json::from_str::<Timestamp>("\"yesterday\"").is_err());
    }
}
