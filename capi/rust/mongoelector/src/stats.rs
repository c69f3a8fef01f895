//! The library's process-wide metrics ([`stats`]): acquire outcomes and latency,
//! renewals, leadership transitions, the server clock's offset, round trips.
use crate::error::{check, Result};
use mongoelector_sys as sys;
use std::time::Duration;

#[cfg(feature = "serde")]
use serde::{Deserialize, Serialize};

/// A snapshot of the metrics of every locker, elector and lease of the process (all
/// clients; the C library keeps them, so other bindings in the same process count too).
/// Counters only grow: compare two snapshots for a rate. Taken by [`stats`] without I/O
/// or locks, cheap enough for every scrape of a metrics endpoint.
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct Stats {
    /// Acquire calls by outcome (calls refused for a bad argument are not counted).
    pub acquires: AcquireCounts,
    /// Latency of every counted acquire call, whatever its outcome.
    pub acquire_latency: LatencyHistogram,
    /// Renewals of held locks (electors, keep-alive leases, `touch`).
    pub renewals: u64,
    /// Of [`Stats::renewals`], those that failed or found the hold gone.
    pub renewal_failures: u64,
    /// Times a node of this process became leader (`on_leader`).
    pub leader_elected: u64,
    /// Times a node of this process stopped leading (`on_leader_loss`).
    pub leader_lost: u64,
    /// Leaders that stepped down before their lease expired (renew deadline, clock jump).
    pub step_downs: u64,
    /// Server-time samples taken.
    pub clock_samples: u64,
    /// Server clock minus this host's, in seconds, at the last sample (0 before the
    /// first, see [`Stats::clock_samples`]). Signed, like
    /// [`Error::ClockOffset`](crate::Error::ClockOffset)'s offset.
    pub clock_offset: f64,
    /// How far off [`Stats::clock_offset`] may be, in seconds: half the round trip of
    /// the last sample.
    pub clock_uncertainty: f64,
    /// Commands sent to servers (SQLite: transactions).
    pub round_trips: u64,
}

/// Acquire calls by outcome.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct AcquireCounts {
    /// The lock was acquired.
    pub acquired: u64,
    /// Non-blocking, the lock was held by another ([`Error::LockHeld`](crate::Error::LockHeld)).
    pub held: u64,
    /// The timeout passed ([`Error::Timeout`](crate::Error::Timeout)).
    pub timeout: u64,
    /// Cancelled ([`Error::Cancelled`](crate::Error::Cancelled)).
    pub cancelled: u64,
    /// The server failed or could not be reached.
    pub error: u64,
}

impl AcquireCounts {
    /// Every counted acquire call.
    pub fn total(&self) -> u64 {
        self.acquired
            .wrapping_add(self.held)
            .wrapping_add(self.timeout)
            .wrapping_add(self.cancelled)
            .wrapping_add(self.error)
    }
}

/// A latency histogram with fixed buckets. `buckets[i]` counts the calls that took more
/// than `bounds[i - 1]` and at most `bounds[i]`; the last bucket (`buckets.len() ==
/// bounds.len() + 1`) those above the last bound. Not cumulative: see
/// [`LatencyHistogram::cumulative`] for Prometheus' `le` buckets.
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
pub struct LatencyHistogram {
    /// Upper bounds of the buckets, increasing.
    pub bounds: Vec<Duration>,
    /// Calls per bucket.
    pub buckets: Vec<u64>,
    /// Calls in all buckets.
    pub count: u64,
    /// Their total time.
    pub sum: Duration,
}

impl LatencyHistogram {
    /// `(upper bound, calls at most that long)` per bucket, the last with bound `None`
    /// (+Inf, its count equals [`LatencyHistogram::count`] when read from one snapshot).
    pub fn cumulative(&self) -> Vec<(Option<Duration>, u64)> {
        let mut total = 0u64;
        self.buckets
            .iter()
            .enumerate()
            .map(|(i, n)| {
                total = total.wrapping_add(*n);
                (self.bounds.get(i).copied(), total)
            })
            .collect()
    }
}

/// Seconds from C as a Duration; a negative or non-finite value (never written by the
/// library) reads as zero.
fn secs(s: f64) -> Duration {
    Duration::try_from_secs_f64(s).unwrap_or_default()
}

impl Stats {
    pub(crate) fn from_c(s: &sys::mongoelector_stats) -> Stats {
        Stats {
            acquires: AcquireCounts {
                acquired: s.acquires_acquired,
                held: s.acquires_held,
                timeout: s.acquires_timeout,
                cancelled: s.acquires_cancelled,
                error: s.acquires_error,
            },
            acquire_latency: LatencyHistogram {
                bounds: s.acquire_latency_bounds.iter().map(|b| secs(*b)).collect(),
                buckets: s.acquire_latency_buckets.to_vec(),
                count: s.acquire_latency_count,
                sum: secs(s.acquire_latency_sum_seconds),
            },
            renewals: s.renewals,
            renewal_failures: s.renewal_failures,
            leader_elected: s.leader_elected,
            leader_lost: s.leader_lost,
            step_downs: s.step_downs,
            clock_samples: s.clock_samples,
            clock_offset: s.clock_offset_seconds,
            clock_uncertainty: s.clock_uncertainty_seconds,
            round_trips: s.round_trips,
        }
    }
}

/// The library's metrics now ([`Stats`]): process-wide, no I/O, any thread.
pub fn stats() -> Result<Stats> {
    // SAFETY: all-zero is a valid value of this plain C struct (numbers only).
    let mut out: sys::mongoelector_stats = unsafe { std::mem::zeroed() };
    out.version = sys::MONGOELECTOR_STATS_VERSION;
    check(unsafe { sys::mongoelector_stats_get(&mut out) })?;
    Ok(Stats::from_c(&out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_is_consistent() {
        let a = stats().unwrap();
        let h = &a.acquire_latency;
        assert_eq!(
            h.bounds.len(),
            sys::MONGOELECTOR_STATS_LATENCY_BUCKETS as usize - 1
        );
        assert_eq!(h.buckets.len(), h.bounds.len() + 1);
        assert!(h.bounds.windows(2).all(|w| w[0] < w[1]), "{:?}", h.bounds);
        assert!(h.bounds[0] > Duration::ZERO);
        let cum = h.cumulative();
        assert_eq!(cum.len(), h.buckets.len());
        assert_eq!(cum.last().unwrap().0, None);
        assert_eq!(cum[0], (Some(h.bounds[0]), h.buckets[0]));
        assert!(cum.windows(2).all(|w| w[0].1 <= w[1].1));
        let b = stats().unwrap();
        assert!(b.acquires.total() >= a.acquires.total());
        assert!(b.round_trips >= a.round_trips && b.renewals >= a.renewals);
    }

    /// A C struct with a distinct value in every field.
    fn sample() -> sys::mongoelector_stats {
        let mut c: sys::mongoelector_stats = unsafe { std::mem::zeroed() };
        (c.acquires_acquired, c.acquires_held, c.acquires_timeout) = (1, 2, 3);
        (c.acquires_cancelled, c.acquires_error) = (4, 5);
        for i in 0..c.acquire_latency_bounds.len() {
            c.acquire_latency_bounds[i] = 0.001 * (i + 1) as f64;
        }
        c.acquire_latency_buckets[0] = 7;
        c.acquire_latency_buckets[14] = 8;
        (c.acquire_latency_count, c.acquire_latency_sum_seconds) = (15, 2.5);
        (c.renewals, c.renewal_failures, c.leader_elected) = (9, 10, 11);
        (c.leader_lost, c.step_downs, c.clock_samples) = (12, 13, 14);
        (c.clock_offset_seconds, c.clock_uncertainty_seconds) = (-0.25, 0.125);
        c.round_trips = 16;
        c
    }

    #[test]
    fn from_c_maps_every_field() {
        let c = sample();
        let s = Stats::from_c(&c);
        assert_eq!(
            s.acquires,
            AcquireCounts {
                acquired: 1,
                held: 2,
                timeout: 3,
                cancelled: 4,
                error: 5
            }
        );
        assert_eq!(s.acquires.total(), 15);
        let h = &s.acquire_latency;
        assert_eq!(h.bounds[0], Duration::from_millis(1));
        assert_eq!(h.bounds[13], Duration::from_millis(14));
        assert_eq!((h.buckets[0], h.buckets[14], h.count), (7, 8, 15));
        assert_eq!(h.sum, Duration::from_millis(2500));
        assert_eq!(h.cumulative().last(), Some(&(None, 15)));
        assert_eq!(
            (
                s.renewals,
                s.renewal_failures,
                s.leader_elected,
                s.leader_lost
            ),
            (9, 10, 11, 12)
        );
        assert_eq!((s.step_downs, s.clock_samples, s.round_trips), (13, 14, 16));
        assert_eq!((s.clock_offset, s.clock_uncertainty), (-0.25, 0.125));
        assert_eq!(secs(f64::NAN), Duration::ZERO);
        assert_eq!(secs(-1.0), Duration::ZERO);
    }

    #[cfg(feature = "serde")]
    #[test]
    fn serde_round_trip() {
        serde_json::to_string(&stats().unwrap()).unwrap();
        // Exact values (f64 through JSON) from a sample.
        let s = Stats::from_c(&sample());
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["clock_offset"], -0.25);
        assert!(json["acquires"]["acquired"].is_u64(), "{json}");
        assert!(json["acquire_latency"]["bounds"].is_array(), "{json}");
        assert_eq!(serde_json::from_value::<Stats>(json).unwrap(), s);
    }
}
