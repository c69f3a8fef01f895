#include "server_clock.h"

#include "storage/storage.h"

#include "metrics.h"

#include <cstdlib>
#include <string>

#include "exceptions.h"
#include "log.h"

namespace mongoelector {

namespace {
// Allowance for the host's monotonic clock drifting against the server's since the
// sample: 100 ppm, generous for NTP-disciplined or free-running quartz clocks.
constexpr std::int64_t kDriftPpm = 100;
// Slack for millisecond rounding of localTime and of our mono readings.
constexpr std::int64_t kRoundingMs = 5;
// 9999-12-31T23:59:59.999Z: the latest server clock reading accepted.
constexpr std::int64_t kMaxServerMs = 253402300799999;
}  // namespace

ServerClock::ServerClock(std::shared_ptr<Clock> clock, Storage& storage, std::int64_t refresh_ms,
                         std::int64_t max_half_rtt_ms)
    : clock_(std::move(clock)),
      storage_(storage),
      refresh_ms_(refresh_ms),
      max_half_rtt_ms_(max_half_rtt_ms),
      board_(storage.clock_sample_board()) {}

void ClockSampleBoard::publish(const Entry& e) {
  std::lock_guard<std::mutex> g(mu_);
  if (!latest_ || latest_->clock != e.clock || e.taken_mono >= latest_->taken_mono) latest_ = e;
}

std::optional<ClockSampleBoard::Entry> ClockSampleBoard::latest(const Clock* clock) const {
  std::lock_guard<std::mutex> g(mu_);
  if (!latest_ || latest_->clock != clock) return std::nullopt;
  return latest_;
}

std::int64_t ServerClock::uncertainty_locked(const Sample& s, std::int64_t mono_now) const {
  std::int64_t age = std::max<std::int64_t>(0, mono_now - s.mono_mid);
  return s.half_rtt + age * kDriftPpm / 1000000;
}

ServerTime ServerClock::estimate_locked(std::int64_t mono_now) const {
  return ServerTime{sample_->server_ms + (mono_now - sample_->mono_mid),
                    uncertainty_locked(*sample_, mono_now)};
}

bool ServerClock::install_locked(const Sample& s) {
  if (!sample_) {
    sample_ = s;
    return false;
  }
  const std::int64_t kept_uncertainty = uncertainty_locked(*sample_, s.mono_mid);
  const std::int64_t predicted = sample_->server_ms + (s.mono_mid - sample_->mono_mid);
  const std::int64_t step = s.server_ms - predicted;
  if (std::llabs(step) > s.half_rtt + kept_uncertainty + kRoundingMs) {
    // The server's clock is not where the kept sample says: the old base is wrong.
    sample_ = s;
    jumps_.fetch_add(1);
    log(LogLevel::Warning,
        "server clock jumped by " + std::to_string(step) +
            " ms since the last estimate; leases held on the old time "
            "base are treated as lost",
        LogFields{LogEvent::ClockJump, {}, 0, {}, {}});
    return true;
  }
  if (s.half_rtt <= kept_uncertainty) sample_ = s;  // keep the better of the two
  return false;
}

bool ServerClock::refresh() {
  if (board_) {
    const auto e = board_->latest(clock_.get());
    const std::int64_t now = clock_->mono_ms();
    if (e && now - e->taken_mono <= refresh_ms_ / 2 &&
        (max_half_rtt_ms_ <= 0 || e->half_rtt <= max_half_rtt_ms_)) {
      std::lock_guard<std::mutex> g(mu_);
      // Only a sample newer than ours: an older one would make this clock stale again.
      if (e->taken_mono > last_sampled_mono_) {
        last_sampled_mono_ = e->taken_mono;
        return install_locked(Sample{e->mono_mid, e->server_ms, e->half_rtt});
      }
    }
  }
  const std::int64_t t0 = clock_->mono_ms();
  const std::int64_t server = storage_.server_time_ms();
  // Every lease is computed from this reading: refuse a clock outside the years
  // 1970..9999 (a broken server or reply) rather than overflow the arithmetic on it.
  if (server < 0 || server > kMaxServerMs)
    throw StorageError("the server's clock reads " + std::to_string(server) +
                       " ms since the Unix epoch, outside the years 1970..9999");
  const std::int64_t t1 = clock_->mono_ms();
  const Sample s{t0 + (t1 - t0) / 2, server, (t1 - t0 + 1) / 2};
  // Host wall time at the sample's midpoint, for the offset gauge.
  metrics::record_clock_sample(server - (clock_->wall_ms() - (t1 - s.mono_mid)), s.half_rtt);
  if (board_) board_->publish({clock_.get(), s.mono_mid, s.server_ms, s.half_rtt, t1});
  std::lock_guard<std::mutex> g(mu_);
  last_sampled_mono_ = t1;
  if (max_half_rtt_ms_ > 0 && s.half_rtt > max_half_rtt_ms_) {
    const std::string msg = "a server time sample took " + std::to_string(t1 - t0) +
                            " ms round trip (more than " + std::to_string(2 * max_half_rtt_ms_) +
                            " ms): refused";
    if (!sample_) throw StorageUnavailable(msg);
    log(LogLevel::Warning, msg + "; keeping the previous sample");
    return false;
  }
  return install_locked(s);
}

bool ServerClock::stale() {
  std::lock_guard<std::mutex> g(mu_);
  return !sample_ || clock_->mono_ms() - last_sampled_mono_ > refresh_ms_;
}

std::optional<ServerTime> ServerClock::estimate(std::optional<std::int64_t> at_mono) {
  std::lock_guard<std::mutex> g(mu_);
  if (!sample_) return std::nullopt;
  return estimate_locked(at_mono ? *at_mono : clock_->mono_ms());
}

ServerTime ServerClock::estimate_sampling() {
  if (stale()) refresh();
  std::lock_guard<std::mutex> g(mu_);
  return estimate_locked(clock_->mono_ms());
}

std::int64_t ServerClock::now_ms() { return estimate_sampling().now_ms; }

std::int64_t ServerClock::uncertainty_ms() {
  auto e = estimate();
  return e ? e->uncertainty_ms : 0;
}

double ServerClock::offset_s() {
  const std::int64_t server_now = now_ms();
  return static_cast<double>(server_now - clock_->wall_ms()) / 1000.0;
}

}  // namespace mongoelector
