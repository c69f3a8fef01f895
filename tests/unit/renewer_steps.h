// Drives a Renewer without threads (Renewer(clock, 0)) on a FakeClock, for the tests of
// keep-alive leases.
#pragma once

#include <algorithm>
#include <cstdint>

#include "clock.h"
#include "lease/keepalive.h"

namespace mongoelector::testing {

// Advances the fake time to the renewer's next due step (not past `limit`) and runs it.
inline void step_renewer(FakeClock& clock, Renewer& renewer, std::int64_t limit = INT64_MAX) {
  const auto due = renewer.next_due();
  const std::int64_t to = due ? std::min(*due, limit) : limit;
  if (to > clock.mono_ms()) clock.advance(to - clock.mono_ms());
  renewer.run_due();
}

// Runs every step due in the next `ms` of fake time.
inline void run_renewer_for(FakeClock& clock, Renewer& renewer, std::int64_t ms) {
  const std::int64_t end = clock.mono_ms() + ms;
  while (clock.mono_ms() < end) step_renewer(clock, renewer, end);
}

}  // namespace mongoelector::testing
