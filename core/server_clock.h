// Estimates the server's clock so that every lock expiry is computed and compared on
// ONE time base (the server's), whatever each host's wall clock says.
//
// A sample sends `hello` at host mono t0 and gets localTime S at mono t1: the server
// read its clock somewhere in [t0, t1], so server_now ≈ S + (mono_now - (t0+t1)/2) with
// uncertainty ≤ (t1-t0)/2 (+ clock drift since the sample). Monotonic time carries the
// estimate forward, so a wall-clock step on the host changes nothing.
//
// Safety (protocol notes, "both clocks count"):
//  * The best sample is kept: a new one replaces it only when its half round trip is no
//    larger than the kept one's uncertainty now (half round trip + drift since). A sample
//    slower than `max_half_rtt_ms` is refused outright.
//  * A new sample that disagrees with the kept one by more than both uncertainties is a
//    JUMP of the server's clock (a step on the primary, a failover to a member whose clock
//    differs): it replaces the kept one and is counted (jumps()); holders treat their
//    leases as lost (Locker::refresh_clock).
//  * No I/O ever happens under the mutex: a slow round trip of one thread never blocks
//    another thread's estimate (a renewal reads the estimate without any I/O).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "clock.h"

namespace mongoelector {

class Storage;  // storage/storage.h

struct ServerTime {
  std::int64_t now_ms = 0;          // estimated server time now
  std::int64_t uncertainty_ms = 0;  // |estimate - server| is at most this
  // The earliest the server's clock can read now: what a CLAIMING side compares with.
  std::int64_t earliest_ms() const { return now_ms - uncertainty_ms; }
  // The latest it can read now: a bound on when something the server did before now
  // happened at the latest (Locker::release_min_hold counts from it).
  std::int64_t latest_ms() const { return now_ms + uncertainty_ms; }
};

// The freshest server-time sample taken through one client, shared by the ServerClocks of
// every locker of that client (Storage::clock_sample_board()): a process holding N keys
// sends one `hello` per refresh period, not N. Thread-safe.
class ClockSampleBoard {
 public:
  struct Entry {
    const Clock* clock = nullptr;  // samples only mean something on the clock that took them
    std::int64_t mono_mid = 0;
    std::int64_t server_ms = 0;
    std::int64_t half_rtt = 0;
    std::int64_t taken_mono = 0;  // host mono when the reply arrived
  };
  void publish(const Entry& e);
  std::optional<Entry> latest(const Clock* clock) const;

 private:
  mutable std::mutex mu_;
  std::optional<Entry> latest_;
};

class ServerClock {
 public:
  // refresh_ms: a sample older than this is stale (refreshed by the next sampling call).
  // max_half_rtt_ms: samples with a slower half round trip are refused (0: no cap).
  ServerClock(std::shared_ptr<Clock> clock, Storage& storage, std::int64_t refresh_ms = 60000,
              std::int64_t max_half_rtt_ms = 0);

  // The estimate from the kept sample, without I/O; nullopt before the first sample. At
  // host mono `at_mono` (default: now).
  std::optional<ServerTime> estimate(std::optional<std::int64_t> at_mono = std::nullopt);
  // Like estimate(), sampling first (one round trip) if there is no sample or it is stale.
  ServerTime estimate_sampling();
  // estimate_sampling().now_ms.
  std::int64_t now_ms();
  // Uncertainty of the kept sample now (half round trip plus drift), 0 without one.
  std::int64_t uncertainty_ms();
  // Server clock minus host wall clock, in seconds (positive: server ahead). Samples if
  // needed.
  double offset_s();
  // No sample yet, or the last one is older than refresh_ms.
  bool stale();
  // Takes a sample now (one round trip, no lock held). Returns true when it revealed a
  // jump of the server's clock. Throws StorageUnavailable when refused (too slow) and no
  // sample is kept.
  // With the storage's ClockSampleBoard, a sample another clock of the same client took
  // less than refresh_ms/2 ago (and fast enough for this clock's cap) is used instead of
  // a round trip; every sample taken is published there.
  bool refresh();
  // How many jumps were detected so far.
  std::uint64_t jumps() const { return jumps_.load(); }

 private:
  struct Sample {
    std::int64_t mono_mid;   // host mono at the midpoint of the round trip
    std::int64_t server_ms;  // server localTime
    std::int64_t half_rtt;
  };
  std::int64_t uncertainty_locked(const Sample& s, std::int64_t mono_now) const;
  ServerTime estimate_locked(std::int64_t mono_now) const;  // sample_ set, mu_ held
  bool install_locked(const Sample& s);                     // true on a jump

  std::shared_ptr<Clock> clock_;
  Storage& storage_;
  std::int64_t refresh_ms_;
  std::int64_t max_half_rtt_ms_;
  std::shared_ptr<ClockSampleBoard> board_;  // may be null
  std::mutex mu_;
  std::optional<Sample> sample_;
  std::int64_t last_sampled_mono_ = 0;
  std::atomic<std::uint64_t> jumps_{0};
};

}  // namespace mongoelector
