#include "hold_state.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "../exceptions.h"
#include "../metrics.h"

namespace mongoelector {

namespace {
// A good time check is trusted this long (as in the original).
constexpr std::int64_t kTimeCheckCacheMs = 10 * 60 * 1000;
// Blocking waits check their cancel function at least this often.
constexpr std::int64_t kCancelPollMs = 100;
// Server-time samples are re-taken this often.
constexpr std::int64_t kClockRefreshMs = 60 * 1000;

std::string format_seconds(double s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

// Server-time samples slower than this (half round trip) are refused: a quarter of the
// ttl. Beyond it a leader's margin (2 x uncertainty + 50 ms) would eat more than half
// the lease, and renewals every ttl/3 would no longer fit before the renew deadline.
std::int64_t half_rtt_cap_ms(double ttl_s) {
  if (!std::isfinite(ttl_s) || ttl_s <= 0 || ttl_s > 1e9) return 0;  // rejected later
  return std::max<std::int64_t>(1, std::llround(ttl_s * 250.0));
}

}  // namespace

HoldState::HoldState(std::shared_ptr<Storage> storage, HoldSpec spec, std::shared_ptr<Clock> clock,
                     Identity identity, SettleFn settle)
    : storage_(std::move(storage)),
      spec_(std::move(spec)),
      clock_(clock_or_storage_clock(std::move(clock), storage_)),
      identity_(std::move(identity)),
      server_clock_(clock_, require_storage(storage_), kClockRefreshMs,
                    half_rtt_cap_ms(spec_.ttl_s)),
      settle_(std::move(settle)) {
  validate_key(spec_.key);
  validate_collection(spec_.collection);
  if (!std::isfinite(spec_.ttl_s) || spec_.ttl_s <= 0)
    throw InvalidArgument("ttl must be a number > 0");
  if (spec_.ttl_s > 1e9) throw InvalidArgument("ttl is too large");
  if (!std::isfinite(spec_.maxoffset_s) || spec_.maxoffset_s < 0)
    throw InvalidArgument("maxoffset must be a number >= 0");
  if (storage_->call_bound_ms() <= 0 && !spec_.allow_unbounded_calls)
    throw InvalidArgument(
        "the storage cannot bound the time of one call (a driver timeout set to 0?), so a "
        "hung call could outlive a lease; set finite timeouts, or allow_unbounded_calls to "
        "accept the risk");
  ttl_ms_ = static_cast<std::int64_t>(std::llround(spec_.ttl_s * 1000.0));
}

LogFields HoldState::log_fields(LogEvent event, std::int64_t fence) const {
  LogFields f;
  f.event = event;
  f.key = spec_.key;
  f.fence = fence;
  f.uuid = identity_.uuid;
  f.host = identity_.host;
  return f;
}

void HoldState::check_server_safety(bool allow_unsafe_server, const std::string& refusal,
                                    const std::string& warning) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (safety_checked_) return;
  }
  ServerInfo info = storage_->server_info();
  if (!info.atomic_find_and_modify) {
    std::string what = info.name + " " + info.version;
    if (!allow_unsafe_server) throw UnsafeServer(what + refusal);
    log(LogLevel::Warning, what + warning, log_fields(LogEvent::UnsafeServer));
  }
  std::lock_guard<std::mutex> g(mu_);
  safety_checked_ = true;
}

double HoldState::verify_time() {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (time_verified_mono_ && clock_->mono_ms() - *time_verified_mono_ < kTimeCheckCacheMs)
      return verified_offset_s_;
  }
  refresh_clock();
  const double offset = server_clock_.offset_s();
  // Only an offset that is certain counts: a slow sample cannot tell (its uncertainty
  // is already covered by the claims' conservative comparison).
  const double uncertainty_s = static_cast<double>(server_clock_.uncertainty_ms()) / 1000.0;
  if (std::fabs(offset) - uncertainty_s > spec_.maxoffset_s)
    throw TimeOffsetError("Host clock is " + format_seconds(offset) +
                              " seconds off the MongoDB server's clock (maxoffset " +
                              format_seconds(spec_.maxoffset_s) + ")",
                          offset);
  std::lock_guard<std::mutex> g(mu_);
  time_verified_mono_ = clock_->mono_ms();
  verified_offset_s_ = offset;
  return offset;
}

bool HoldState::time_check_cached() const {
  std::lock_guard<std::mutex> g(mu_);
  return time_verified_mono_ && clock_->mono_ms() - *time_verified_mono_ < kTimeCheckCacheMs;
}

bool HoldState::server_safety_known() const {
  std::lock_guard<std::mutex> g(mu_);
  return safety_checked_;
}

bool HoldState::refresh_clock() {
  if (!server_clock_.refresh()) return false;
  std::lock_guard<std::mutex> g(mu_);
  if (hold_) {
    log(LogLevel::Warning, "the server's clock jumped: " + spec_.lost_what + " is treated as lost",
        log_fields(LogEvent::ClockJump, hold_->fence));
    strand_locked();
  }
  return true;
}

ServerTime HoldState::server_time_for_write(std::optional<std::int64_t> at_mono) {
  if (auto t = server_clock_.estimate(at_mono)) return *t;
  server_clock_.refresh();  // first use only: a holder always has a sample
  return server_clock_.estimate(at_mono).value();
}

bool HoldState::acquire_retry(bool blocking, std::int64_t start_ms, std::int64_t now_ms,
                              std::optional<double> timeout_s, std::int64_t count) {
  if (!blocking && timeout_s) throw InvalidArgument("Cannot set timeout if blocking is False");
  if (!blocking) return count == 0;
  if (!timeout_s) return true;
  return static_cast<double>(now_ms - start_ms) < *timeout_s * 1000.0;
}

std::int64_t HoldState::acquire(AcquireRun& run, const CancelFn& cancel) {
  ClockCall call(*clock_);  // its pauses wait on the clock
  try {
    for (AcquireStep s = run.next();;) {
      if (s.final()) return run.result();
      if (cancel && cancel()) {
        s = run.cancel();
      } else if (s.kind == AcquireStep::Kind::TryNow) {
        s = run.attempt();
      } else {
        // Sleep in short slices so that cancellation is prompt.
        const std::int64_t now = clock_->mono_ms();
        if (now < s.wake_mono) clock_->sleep_ms(std::min(kCancelPollMs, s.wake_mono - now));
        s = run.next();
      }
    }
  } catch (...) {
    run.give_up();  // what the waiting wrote goes now: the next in line moves up at once
    throw;
  }
}

std::optional<Hold> HoldState::hold() const {
  std::lock_guard<std::mutex> g(mu_);
  return hold_;
}

std::int64_t HoldState::fence() const {
  std::lock_guard<std::mutex> g(mu_);
  return hold_ ? hold_->fence : 0;
}

std::optional<std::int64_t> HoldState::lease_deadline_mono() const {
  std::lock_guard<std::mutex> g(mu_);
  if (!hold_) return std::nullopt;
  return hold_->lease_start_mono + ttl_ms_;
}

std::optional<Lease> HoldState::lease() const {
  std::lock_guard<std::mutex> g(mu_);
  if (!hold_) return std::nullopt;
  return Lease{hold_->fence, hold_->lease_start_mono + ttl_ms_};
}

bool HoldState::has_stranded() const {
  std::lock_guard<std::mutex> g(mu_);
  return stranded_.has_value();
}

std::optional<Hold> HoldState::stranded() const {
  std::lock_guard<std::mutex> g(mu_);
  return stranded_;
}

bool HoldState::only_stranded() const {
  std::lock_guard<std::mutex> g(mu_);
  return !hold_ && stranded_;
}

HoldState::Snapshot HoldState::snapshot() const {
  std::lock_guard<std::mutex> g(mu_);
  return Snapshot{hold_, hold_gen_};
}

std::int64_t HoldState::install(const Hold& h, std::int64_t replied, bool round_trips) {
  if (replied >= h.lease_start_mono + ttl_ms_) {
    // The claim (and whatever came with it) outlasted its own lease: someone may hold it
    // now.
    if (round_trips)
      abandon_claim(h);
    else
      strand_claim(h);
    throw StorageUnavailable("acquiring " + spec_.describe + " took longer than its lease (ttl " +
                             format_seconds(spec_.ttl_s) + " s): not acquired");
  }
  std::lock_guard<std::mutex> g(mu_);
  hold_ = h;
  ++hold_gen_;
  return h.fence;
}

void HoldState::abandon_claim(const Hold& h) {
  strand_claim(h);
  settle_stranded_quietly();
}

void HoldState::strand_claim(const Hold& h) {
  std::lock_guard<std::mutex> g(mu_);
  stranded_ = h;
}

std::optional<Lease> HoldState::strand_if_over(std::int64_t now) {
  std::lock_guard<std::mutex> g(mu_);
  if (!hold_) return std::nullopt;
  if (now < hold_->lease_start_mono + ttl_ms_)
    return Lease{hold_->fence, hold_->lease_start_mono + ttl_ms_};
  strand_locked();
  return std::nullopt;
}

void HoldState::strand_locked() {
  if (!hold_) return;
  stranded_ = hold_;
  hold_.reset();
  ++hold_gen_;
}

std::int64_t HoldState::strand(std::int64_t only_fence, bool in_doubt) {
  std::lock_guard<std::mutex> g(mu_);
  if (!hold_ || (only_fence != 0 && hold_->fence != only_fence)) return 0;
  const std::int64_t fence = hold_->fence;
  strand_locked();
  if (in_doubt) stranded_->release_sent = true;
  return fence;
}

std::int64_t HoldState::strand_keeping(std::int64_t min_hold) {
  std::lock_guard<std::mutex> g(mu_);
  if (hold_) {
    // Counted from the latest the server's clock could read when the claim's reply
    // arrived, not from ts_created (the earliest at the send): the server took the lock
    // between the two, so counting from ts_created could end the hold up to a round
    // trip plus twice the sample's uncertainty early.
    if (min_hold > 0) hold_->keep_until_ms = hold_->acquired_latest_ms + min_hold;
    // Let go locally BEFORE the write that may shorten the hold: a renewal in flight
    // then finds the hold changed and is not counted on, and the hold is never taken
    // back with this fence (the write may land late, after a newer renewal).
    const std::int64_t fence = hold_->fence;
    strand_locked();
    stranded_->release_sent = true;
    return fence;
  }
  if (stranded_ && !stranded_->release_sent && stranded_->acquired_latest_ms > 0) {
    // A hold given up in doubt (a token() whose fence change may land, a clock jump)
    // that nothing released yet: still the caller's, so its minimum hold counts too.
    if (min_hold > 0) stranded_->keep_until_ms = stranded_->acquired_latest_ms + min_hold;
    return stranded_->fence;
  }
  return 0;
}

void HoldState::release(const std::function<void(const Hold&)>& write) {
  release_matching(std::nullopt, write);
}

bool HoldState::release_if(std::int64_t fence, const std::function<void(const Hold&)>& write) {
  return release_matching(fence, write);
}

bool HoldState::release_matching(std::optional<std::int64_t> only_fence,
                                 const std::function<void(const Hold&)>& write) {
  const std::optional<Hold> h = hold();
  if (only_fence && (!h || h->fence != *only_fence)) return false;
  if (h) {
    try {
      write(*h);
    } catch (...) {
      release_failed(*h);
      throw;
    }
    release_done(*h);
  }
  settle_stranded();
  return true;
}

void HoldState::release_done(const Hold& h) {
  std::lock_guard<std::mutex> g(mu_);
  if (hold_ && hold_->fence == h.fence) {
    hold_.reset();
    ++hold_gen_;
  }
}

void HoldState::release_failed(const Hold& h) {
  // It may still run at the server later: fenced, it cannot hurt a newer hold, and the
  // hold it names is never taken back with the same fence.
  std::lock_guard<std::mutex> g(mu_);
  if (hold_ && hold_->fence == h.fence) {
    strand_locked();
    stranded_->release_sent = true;
  }
}

void HoldState::forget() {
  std::lock_guard<std::mutex> g(mu_);
  hold_.reset();
  stranded_.reset();
  ++hold_gen_;
}

HoldState::Settled HoldState::settle_stranded() {
  std::optional<Hold> s;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (stranded_) stranded_->release_sent = true;
    s = stranded_;
  }
  if (!s) return {};
  const Settled settled = settle_(*s);
  std::lock_guard<std::mutex> g(mu_);
  if (stranded_ && stranded_->fence == s->fence) stranded_.reset();
  return settled;
}

void HoldState::settle_stranded_quietly() {
  try {
    settle_stranded();
  } catch (const std::exception& ex) {
    log(LogLevel::Warning,
        "could not release a stranded hold of " + spec_.describe +
            " yet (retried before the next claim): " + ex.what(),
        log_fields(LogEvent::ReleaseFailed));
  }
}

std::optional<std::int64_t> HoldState::finish_renew(const RenewTicket& t, bool ok,
                                                    std::int64_t expire_ms,
                                                    const std::function<Hold()>& adopt) {
  std::lock_guard<std::mutex> g(mu_);
  if (t.gen != hold_gen_) return std::nullopt;  // released or replaced while the call ran
  if (!ok) {
    if (hold_) {
      hold_.reset();
      ++hold_gen_;
    }
    return std::nullopt;
  }
  if (hold_) {
    hold_->expire_ms = expire_ms;
    hold_->lease_start_mono = t.sent;
  } else {
    if (!adopt) return std::nullopt;
    hold_ = adopt();
    ++hold_gen_;
  }
  return t.sent + ttl_ms_;
}

void HoldState::strand_nameless(std::uint64_t gen) {
  std::lock_guard<std::mutex> g(mu_);
  if (gen == hold_gen_ && hold_) {
    strand_locked();
    stranded_->fence = 0;
  }
}

std::optional<std::int64_t> HoldState::rename(std::uint64_t gen,
                                              std::optional<std::int64_t> fence) {
  std::lock_guard<std::mutex> g(mu_);
  if (gen != hold_gen_ || !hold_) return std::nullopt;  // replaced meanwhile
  if (!fence) {  // taken over, released or deleted: the hold is gone
    hold_.reset();
    ++hold_gen_;
    return std::nullopt;
  }
  hold_->fence = *fence;
  return fence;
}

std::optional<std::int64_t> HoldState::take_back(const Hold& s, std::int64_t sent,
                                                 std::int64_t expire_ms) {
  std::lock_guard<std::mutex> g(mu_);
  if (!stranded_ || stranded_->fence != s.fence || hold_) return std::nullopt;
  hold_ = Hold{};
  hold_->fence = s.fence;
  hold_->created_ms = s.created_ms;
  hold_->expire_ms = expire_ms;
  hold_->lease_start_mono = sent;
  hold_->acquired_latest_ms = s.acquired_latest_ms;
  stranded_.reset();
  ++hold_gen_;
  return sent + ttl_ms_;
}

}  // namespace mongoelector
