#include "hold_loss.h"

#include <algorithm>
#include <exception>

#include "../user_code.h"

namespace mongoelector {

namespace {
// Waits on the system clock are cut into pieces of this size (an absolute deadline
// "forever" would overflow steady_clock's nanoseconds).
constexpr std::int64_t kWaitSliceMs = 60 * 60 * 1000;
}  // namespace

std::shared_ptr<HoldLoss> HoldLoss::watch(const std::shared_ptr<Clock>& clock, std::int64_t ttl_ms,
                                          std::function<void()> on_lost,
                                          const std::shared_ptr<Holdable>& holder,
                                          std::int64_t fence, const std::string& what,
                                          std::int64_t lease_end, std::int64_t margin) {
  Hooks hooks;
  hooks.strand = [holder, fence] { holder->strand(fence); };
  hooks.log = [holder, fence](LogLevel level, const std::string& message, LogEvent event) {
    log(level, message, holder->log_fields(event, fence));
  };
  hooks.what = what + " (fence " + std::to_string(fence) + ")";
  auto loss = std::make_shared<HoldLoss>(clock, ttl_ms, std::move(on_lost), std::move(hooks));
  loss->start(lease_end, margin);
  return loss;
}

HoldLoss::HoldLoss(std::shared_ptr<Clock> clock, std::int64_t ttl_ms, std::function<void()> on_lost,
                   Hooks hooks)
    : clock_(std::move(clock)),
      ttl_ms_(ttl_ms),
      on_lost_(std::move(on_lost)),
      hooks_(std::move(hooks)) {}

void HoldLoss::start(std::int64_t lease_end, std::int64_t margin) {
  std::lock_guard<std::mutex> g(mu_);
  lease_end_ = lease_end;
  deadline_ = lease_end - margin;
  arm_locked(deadline_);
}

bool HoldLoss::lost_locked(std::int64_t now) {
  if (lost_) return true;
  if (closed_ || now < deadline_) return false;
  mark_lost_locked(kDeadlinePassed);
  return true;
}

void HoldLoss::mark_lost_locked(const std::string& why) {
  lost_ = true;
  reason_ = why;
  clean_up_until_ = lease_end_ + ttl_ms_;
  cv_.notify_all();
}

void HoldLoss::arm_locked(std::int64_t at) {
  // Never waits: the task takes mu_, which the caller holds. A task that is already
  // running finds the deadline moved (or the loss announced) and returns.
  if (task_) clock_->timer().cancel(task_, /*wait=*/false);
  std::weak_ptr<HoldLoss> self = shared_from_this();
  task_ = clock_->timer().schedule(at, [self] {
    if (auto s = self.lock()) s->on_timer();
  });
}

std::shared_ptr<CallbackJob> HoldLoss::announce_locked() {
  announced_ = true;
  // Given up locally before anyone hears of the loss; a renewal still in flight finds
  // the hold changed and the renewer releases what is left (fenced). Local: no I/O.
  if (hooks_.strand) hooks_.strand();
  std::weak_ptr<HoldLoss> self = shared_from_this();
  job_ = std::make_shared<CallbackJob>([self, why = reason_] {
    auto s = self.lock();
    if (!s) return;
    if (s->hooks_.log)
      s->hooks_.log(LogLevel::Warning, s->hooks_.what + " lost: " + why, LogEvent::LeaseLost);
    call_user_code(s->on_lost_, [&](const char* what) {
      if (s->hooks_.log)
        s->hooks_.log(LogLevel::Error,
                      what ? std::string("on_lost raised: ") + what : "on_lost raised",
                      LogEvent::CallbackFailed);
    });
  });
  return job_;
}

void HoldLoss::on_timer() {
  std::shared_ptr<CallbackJob> job;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (announced_ || !lost_locked(clock_->mono_ms())) return;  // closed, or moved by a renewal
    task_ = 0;
    job = announce_locked();
  }
  clock_->dispatcher().post(std::move(job));
}

HoldLoss::View HoldLoss::view(std::int64_t now) {
  std::lock_guard<std::mutex> g(mu_);
  if (closed_) return {Phase::Closed, deadline_};
  if (lost_locked(now)) return {Phase::Lost, deadline_};
  return {Phase::Live, deadline_};
}

HoldLoss::Outcome HoldLoss::renewed(std::optional<std::int64_t> lease_end, std::int64_t margin,
                                    const std::string& not_ours) {
  std::lock_guard<std::mutex> g(mu_);
  if (closed_) return Outcome::Closed;
  // Read on return: a reply after the deadline comes after the loss (final), whenever
  // the call was sent.
  const std::int64_t now = clock_->mono_ms();
  if (lost_locked(now)) return Outcome::WasLost;
  if (!lease_end) {
    mark_lost_locked(not_ours);
    arm_locked(now);  // announced at once
    return Outcome::NowLost;
  }
  lease_end_ = *lease_end;
  deadline_ = *lease_end - margin;
  arm_locked(deadline_);
  return Outcome::Extended;
}

void HoldLoss::declare_lost(const std::string& why) {
  std::lock_guard<std::mutex> g(mu_);
  if (closed_ || lost_) return;
  mark_lost_locked(why);
  arm_locked(clock_->mono_ms());
}

std::optional<std::int64_t> HoldLoss::clean_up(std::int64_t now,
                                               const std::function<void()>& release,
                                               std::int64_t retry_ms) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (closed_) return std::nullopt;
    if (now < lease_end_) return lease_end_;  // the holder's step-down comes first
    if (now > clean_up_until_) {
      if (hooks_.log)
        hooks_.log(LogLevel::Warning,
                   hooks_.what +
                       ": gave up releasing the lost hold (it has expired; it is "
                       "released before the next acquire)",
                   LogEvent::None);
      return std::nullopt;
    }
  }
  try {
    release();  // no hold and nothing stranded (taken over): no round trip
    return std::nullopt;
  } catch (const std::exception& ex) {
    if (hooks_.log)
      hooks_.log(LogLevel::Warning,
                 hooks_.what + ": could not release the lost hold yet: " + ex.what(),
                 LogEvent::None);
    return now + retry_ms;
  }
}

bool HoldLoss::lost() {
  std::lock_guard<std::mutex> g(mu_);
  return lost_locked(clock_->mono_ms());
}

std::string HoldLoss::reason() {
  std::lock_guard<std::mutex> g(mu_);
  lost_locked(clock_->mono_ms());
  return reason_;
}

std::int64_t HoldLoss::renew_deadline() {
  std::lock_guard<std::mutex> g(mu_);
  return deadline_;
}

bool HoldLoss::wait_lost(std::optional<std::int64_t> timeout_ms) {
  std::unique_lock<std::mutex> lk(mu_);
  const std::int64_t start = clock_->mono_ms();
  if (lost_locked(start)) return true;
  if (timeout_ms && *timeout_ms <= 0) return false;
  ClockCall call(*clock_);
  for (;;) {
    const std::int64_t now = clock_->mono_ms();
    if (lost_locked(now)) return true;
    if (timeout_ms && now - start >= *timeout_ms) return false;
    std::int64_t until = now + kWaitSliceMs;
    if (timeout_ms) until = std::min(until, start + *timeout_ms);
    // The deadline itself ends the wait: nobody has to say so. (A renewal moves it
    // later: the loop then waits again.)
    if (!closed_) until = std::min(until, deadline_);
    clock_->wait_until(lk, cv_, until, [this] { return lost_; });
  }
}

std::optional<bool> HoldLoss::close() {
  std::shared_ptr<CallbackJob> job;
  DeadlineTimer::Id task = 0;
  bool lost;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (closed_) return std::nullopt;
    lost_locked(clock_->mono_ms());  // a deadline already passed: the loss stands
    closed_ = true;
    task = task_;
    task_ = 0;
    job = lost_ && !announced_ ? announce_locked() : job_;
    lost = lost_;
  }
  cv_.notify_all();
  if (task) clock_->timer().cancel(task, /*wait=*/false);
  // on_lost has run when close() returns: here, if no dispatcher thread has begun it
  // (not when this IS on_lost's thread).
  if (job) job->finish(*clock_);
  return lost;
}

}  // namespace mongoelector
