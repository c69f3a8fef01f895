// The outcome and duration of an acquire call, recorded in core/metrics.h: shared by every
// kind of hold (Locker, Semaphore) so that they count outcomes the same way.
#pragma once

#include <cstdint>

#include "clock.h"
#include "exceptions.h"
#include "metrics.h"

namespace mongoelector {

// Runs `acquire` (which returns the token or throws) and records its outcome: acquired,
// held (LockExists), timeout, cancelled, or error; a caller's mistake (InvalidArgument) is
// not an outcome.
template <class Acquire>
std::int64_t with_acquire_metrics(Clock& clock, Acquire&& acquire) {
  using metrics::AcquireOutcome;
  const std::int64_t start = clock.mono_ms();
  const auto record = [&](AcquireOutcome outcome) {
    metrics::record_acquire(outcome, static_cast<double>(clock.mono_ms() - start) / 1000.0);
  };
  try {
    const std::int64_t token = acquire();
    record(AcquireOutcome::Acquired);
    return token;
  } catch (const LockExists&) {
    record(AcquireOutcome::Held);
    throw;
  } catch (const AcquireTimeout&) {
    record(AcquireOutcome::Timeout);
    throw;
  } catch (const Cancelled&) {
    record(AcquireOutcome::Cancelled);
    throw;
  } catch (const InvalidArgument&) {
    throw;
  } catch (...) {
    record(AcquireOutcome::Error);
    throw;
  }
}

}  // namespace mongoelector
