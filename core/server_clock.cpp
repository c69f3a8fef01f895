#include "server_clock.h"

#include <cstdlib>
#include <string>

#include "log.h"

namespace mongoelector {

namespace {
// Allowance for the host's monotonic clock drifting against the server's since the
// sample: 100 ppm, generous for NTP-disciplined or free-running quartz clocks.
constexpr std::int64_t kDriftPpm = 100;
}  // namespace

ServerClock::ServerClock(std::shared_ptr<Clock> clock, Storage& storage, std::int64_t refresh_ms)
    : clock_(std::move(clock)), storage_(storage), refresh_ms_(refresh_ms) {}

ServerClock::Sample ServerClock::sample_locked(bool force) {
  if (force || !sample_ || clock_->mono_ms() - sample_->mono_mid > refresh_ms_) {
    std::int64_t t0 = clock_->mono_ms();
    std::int64_t w0 = clock_->wall_ms();
    std::int64_t server = storage_.server_time_ms();
    std::int64_t t1 = clock_->mono_ms();
    std::int64_t w1 = clock_->wall_ms();
    Sample s{t0 + (t1 - t0) / 2, server, w0 + (w1 - w0) / 2, (t1 - t0 + 1) / 2};
    if (sample_) {
      std::int64_t predicted = sample_->server_ms + (s.mono_mid - sample_->mono_mid);
      std::int64_t tolerance = s.half_rtt + sample_->half_rtt +
                               (s.mono_mid - sample_->mono_mid) * kDriftPpm / 1000000 + 5;
      if (std::llabs(predicted - s.server_ms) > tolerance)
        log(LogLevel::Warning, "server clock jumped by " +
                                   std::to_string(s.server_ms - predicted) +
                                   " ms since the last estimate");
    }
    sample_ = s;
  }
  return *sample_;
}

std::int64_t ServerClock::now_ms() {
  std::lock_guard<std::mutex> g(mu_);
  Sample s = sample_locked();
  return s.server_ms + (clock_->mono_ms() - s.mono_mid);
}

std::int64_t ServerClock::uncertainty_ms() {
  std::lock_guard<std::mutex> g(mu_);
  if (!sample_) return 0;
  std::int64_t age = clock_->mono_ms() - sample_->mono_mid;
  return sample_->half_rtt + age * kDriftPpm / 1000000;
}

double ServerClock::offset_s() {
  std::lock_guard<std::mutex> g(mu_);
  Sample s = sample_locked();
  // Compare the server with the host wall clock NOW (carried by mono since the sample).
  std::int64_t server_now = s.server_ms + (clock_->mono_ms() - s.mono_mid);
  return static_cast<double>(server_now - clock_->wall_ms()) / 1000.0;
}

void ServerClock::refresh() {
  std::lock_guard<std::mutex> g(mu_);
  sample_locked(/*force=*/true);
}

}  // namespace mongoelector
