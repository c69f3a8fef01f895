// Estimates the server's clock so that every lock expiry is computed and compared on
// ONE time base (the server's), whatever each host's wall clock says.
//
// A sample sends `hello` at host mono t0 and gets localTime S at mono t1: the server
// read its clock somewhere in [t0, t1], so server_now ≈ S + (mono_now - (t0+t1)/2) with
// uncertainty ≤ (t1-t0)/2 (+ clock drift since the sample). Monotonic time carries the
// estimate forward, so a wall-clock step on the host changes nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "clock.h"
#include "storage.h"

namespace mongoelector {

class ServerClock {
 public:
  // refresh_ms: a sample older than this is refreshed on the next now_ms() (one extra
  // round trip, amortised over every operation in between).
  ServerClock(std::shared_ptr<Clock> clock, Storage& storage, std::int64_t refresh_ms = 60000);

  // Estimated server time now. Samples first if there is no sample or it is stale.
  std::int64_t now_ms();
  // Half the round trip of the sample plus drift allowance (ms).
  std::int64_t uncertainty_ms();
  // Server clock minus host wall clock, in seconds (positive: server ahead). Samples if
  // needed.
  double offset_s();
  // Takes a new sample now (one round trip). Logs a clock jump when the new estimate
  // differs from the old one by more than their combined uncertainty.
  void refresh();

 private:
  struct Sample {
    std::int64_t mono_mid;  // host mono at the midpoint of the round trip
    std::int64_t server_ms;  // server localTime
    std::int64_t wall_mid;  // host wall at the midpoint
    std::int64_t half_rtt;
  };
  Sample sample_locked(bool force = false);

  std::shared_ptr<Clock> clock_;
  Storage& storage_;
  std::int64_t refresh_ms_;
  std::mutex mu_;
  std::optional<Sample> sample_;
};

}  // namespace mongoelector
