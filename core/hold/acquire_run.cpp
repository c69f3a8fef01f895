#include "acquire_run.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <utility>

#include "../exceptions.h"
#include "../log.h"
#include "../metrics.h"
#include "hold_state.h"

namespace mongoelector {

namespace {
std::string format_seconds(double s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

AcquireStep step_of(AcquireStep::Kind kind, std::int64_t wake = 0, std::int64_t token = 0) {
  AcquireStep s;
  s.kind = kind;
  s.wake_mono = wake;
  s.token = token;
  return s;
}
}  // namespace

AcquireRun::AcquireRun(HoldState& state, const AcquireOptions& options, Attempt attempt,
                       HeldMessage held, ReleaseIf release_if)
    : state_(state),
      clock_(state.clock()),
      options_(options),
      attempt_(std::move(attempt)),
      held_(std::move(held)),
      release_if_(std::move(release_if)),
      start_(clock_.mono_ms()) {
  if (!options_.blocking && options_.timeout_s)
    throw InvalidArgument("Cannot set timeout if blocking is False");
  if (options_.timeout_s && (!std::isfinite(*options_.timeout_s) || *options_.timeout_s < 0))
    throw InvalidArgument("timeout must be a number >= 0");
  if (!std::isfinite(options_.step_s) || options_.step_s < 0)
    throw InvalidArgument("step must be a number >= 0");
  // Clamped before the conversion: llround of a step beyond int64 ms is unspecified
  // (it came out as 1 ms, a busy retry loop against the server).
  step_ms_ = std::max<std::int64_t>(1, std::llround(std::min(options_.step_s * 1000.0, 1e15)));
}

std::int64_t AcquireRun::now_ms() const { return clock_.mono_ms(); }

AcquireStep AcquireRun::next() {
  const std::int64_t now = clock_.mono_ms();
  std::lock_guard<std::mutex> g(mu_);
  return next_locked(now);
}

AcquireStep AcquireRun::next_locked(std::int64_t now) {
  if (final_) return *final_;
  if (in_flight_) return step_of(AcquireStep::Kind::TryNow);  // the attempt decides
  if (wake_ && now < *wake_) return step_of(AcquireStep::Kind::Wait, *wake_);
  wake_.reset();
  if (HoldState::acquire_retry(options_.blocking, start_, now, options_.timeout_s, count_))
    return step_of(AcquireStep::Kind::TryNow);
  return finish_locked(step_of(AcquireStep::Kind::TimedOut));
}

AcquireStep AcquireRun::finish_locked(AcquireStep step) {
  using metrics::AcquireOutcome;
  final_ = step;
  AcquireOutcome outcome = AcquireOutcome::Acquired;
  switch (step.kind) {
    case AcquireStep::Kind::Held:
      outcome = AcquireOutcome::Held;
      break;
    case AcquireStep::Kind::TimedOut:
      outcome = AcquireOutcome::Timeout;
      break;
    case AcquireStep::Kind::Cancelled:
      outcome = AcquireOutcome::Cancelled;
      break;
    default:
      break;
  }
  metrics::record_acquire(outcome, static_cast<double>(clock_.mono_ms() - start_) / 1000.0);
  return step;
}

AcquireStep AcquireRun::attempt() {
  if (std::optional<AcquireStep> s = begin_attempt(/*round_trips=*/true)) return *s;
  std::optional<Claimed> got;
  std::string held;
  try {
    if (check_time()) {
      state_.verify_time();
      std::lock_guard<std::mutex> g(mu_);
      time_checked_ = true;
    }
    got = attempt_();
    // Non-blocking and held: who holds it (from what the attempt read, or one read).
    if (!got && !options_.blocking) held = held_();
  } catch (...) {
    fail_attempt(std::current_exception());
    undo_wait_if_due();  // the caller gave up while this attempt ran
    throw;
  }
  const AcquireStep step = end_attempt(got, std::move(held));
  undo_wait_if_due();
  return step;
}

std::optional<AcquireStep> AcquireRun::begin_attempt(bool round_trips) {
  const std::int64_t now = clock_.mono_ms();
  std::lock_guard<std::mutex> g(mu_);
  if (in_flight_) return step_of(AcquireStep::Kind::TryNow);  // attempts never overlap
  const AcquireStep s = next_locked(now);
  if (s.kind != AcquireStep::Kind::TryNow) return s;
  bool check = options_.timeparanoid && !time_checked_;
  if (check && state_.time_check_cached()) {
    time_checked_ = true;  // a recent good check stands (verify_time() would return it)
    check = false;
  }
  if (check && !round_trips) return s;  // the time check is a round trip: attempt()
  ++count_;
  in_flight_ = true;
  check_time_ = check;
  return std::nullopt;
}

bool AcquireRun::check_time() const {
  std::lock_guard<std::mutex> g(mu_);
  return check_time_;
}

void AcquireRun::fail_attempt(std::exception_ptr error) {
  bool caller_mistake = false;  // not an outcome of the acquire
  try {
    if (error) std::rethrow_exception(error);
  } catch (const InvalidArgument&) {
    caller_mistake = true;
  } catch (...) {
  }
  std::lock_guard<std::mutex> g(mu_);
  in_flight_ = false;
  if (!final_) {  // else cancelled meanwhile: counted then
    final_ = step_of(AcquireStep::Kind::Failed);
    failed_ = error;
    if (!caller_mistake)
      metrics::record_acquire(metrics::AcquireOutcome::Error,
                              static_cast<double>(clock_.mono_ms() - start_) / 1000.0);
  }
}

AcquireStep AcquireRun::end_attempt(std::optional<Claimed> got, std::string held) {
  std::unique_lock<std::mutex> lk(mu_);
  in_flight_ = false;
  if (final_) {
    // Cancelled while the claim was in flight: a claim that landed is nobody's; release
    // it, fenced by its own token, so the cancelled acquire leaves no holder.
    const AcquireStep cancelled = *final_;
    lk.unlock();
    if (got) release_unclaimed(got->fence);
    return cancelled;
  }
  if (got) {
    acquired_fence_ = got->fence;
    return finish_locked(step_of(AcquireStep::Kind::Acquired, 0, got->token));
  }
  if (!options_.blocking) {
    held_message_ = std::move(held);
    return finish_locked(step_of(AcquireStep::Kind::Held));
  }
  // Wait one step (or the pace's wait); a wait longer than what is left of the timeout
  // ends with it.
  const std::int64_t now = clock_.mono_ms();
  std::int64_t wake = now + (pace_ ? std::max<std::int64_t>(1, pace_(step_ms_)) : step_ms_);
  if (options_.timeout_s) {
    const double end = static_cast<double>(start_) + *options_.timeout_s * 1000.0;
    if (end < static_cast<double>(wake))
      wake = std::max(now + 1, static_cast<std::int64_t>(std::ceil(end)));
  }
  wake_ = wake;
  return step_of(AcquireStep::Kind::Wait, wake);
}

bool AcquireRun::abandon() {
  std::optional<std::int64_t> fence;
  {
    std::lock_guard<std::mutex> g(mu_);
    fence = std::exchange(acquired_fence_, std::nullopt);  // released once
  }
  return fence && release_unclaimed(*fence);
}

bool AcquireRun::release_unclaimed(std::int64_t fence) {
  if (!release_if_) return false;
  try {
    if (!release_if_(fence)) return false;
    log(LogLevel::Info,
        "released " + state_.describe() + " (fence " + std::to_string(fence) +
            ") taken by a cancelled acquire",
        state_.log_fields(LogEvent::None, fence));
    return true;
  } catch (const std::exception& ex) {
    // The hold stays stranded (released before this holder's next claim).
    log(LogLevel::Warning,
        "could not release " + state_.describe() +
            " taken by a cancelled acquire (released before the next claim): " + ex.what(),
        state_.log_fields(LogEvent::ReleaseFailed, fence));
    return false;
  }
}

AcquireStep AcquireRun::give_up() {
  AcquireStep step;
  {
    std::lock_guard<std::mutex> g(mu_);
    step = final_ ? *final_ : finish_locked(step_of(AcquireStep::Kind::Cancelled));
    if (step.kind == AcquireStep::Kind::Acquired || undone_) return step;
    undo_due_ = true;
  }
  undo_wait_if_due();
  return step;
}

void AcquireRun::undo_wait_if_due() {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!undo_due_ || in_flight_ || undone_) return;
    undone_ = true;
  }
  if (undo_wait_) undo_wait_();
}

AcquireStep AcquireRun::cancel() {
  std::lock_guard<std::mutex> g(mu_);
  if (final_) return *final_;
  return finish_locked(step_of(AcquireStep::Kind::Cancelled));
}

std::string AcquireRun::timeout_message() const {
  const HoldSpec& spec = state_.spec();
  return std::string("Timeout acquiring ") + spec.kind + " " + spec.key + " after " +
         format_seconds(options_.timeout_s.value_or(0)) + " seconds";
}

std::string AcquireRun::cancelled_message() const {
  return "acquire of " + state_.describe() + " was cancelled";
}

std::int64_t AcquireRun::result() const {
  std::optional<AcquireStep> s;
  std::exception_ptr failed;
  {
    std::lock_guard<std::mutex> g(mu_);
    s = final_;
    failed = failed_;
  }
  if (!s) throw std::logic_error("AcquireRun::result() before the run ended");
  switch (s->kind) {
    case AcquireStep::Kind::Acquired:
      return s->token;
    case AcquireStep::Kind::Held:
      throw LockExists(held_message_);
    case AcquireStep::Kind::TimedOut:
      throw AcquireTimeout(timeout_message());
    case AcquireStep::Kind::Cancelled:
      throw Cancelled(cancelled_message());
    case AcquireStep::Kind::Failed:
      std::rethrow_exception(failed);
    default:
      throw std::logic_error("AcquireRun::result() before the run ended");
  }
}

}  // namespace mongoelector
