#include "lease.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "../exceptions.h"
#include "../log.h"
#include "../metrics.h"

namespace mongoelector {

namespace {
// Waits on the system clock are cut into pieces of this size (an absolute deadline
// "forever" would overflow steady_clock's nanoseconds).
constexpr std::int64_t kWaitSliceMs = 60 * 60 * 1000;
}  // namespace

std::int64_t renew_margin_ms(std::int64_t ttl_ms, std::int64_t uncertainty_ms) {
  return std::max<std::int64_t>(ttl_ms / 10, 2 * uncertainty_ms + 50);
}

class KeepAliveLease::State final : public Renewable,
                                    public std::enable_shared_from_this<KeepAliveLease::State> {
 public:
  State(std::shared_ptr<Locker> l, std::shared_ptr<Clock> c, std::function<void()> cb)
      : locker(std::move(l)), clock(std::move(c)), on_lost(std::move(cb)) {
    ttl_ms = locker->ttl_ms();
    call_bound_ms = locker->storage().call_bound_ms();
    backoff_ms = std::max<std::int64_t>(1, std::min<std::int64_t>(ttl_ms / 20, 250));
    domain = locker->storage().batch_domain();
  }

  std::optional<std::int64_t> renew_step() override;
  const void* batch_domain() const override { return domain; }
  // Up to half an interval early: a renewal never comes sooner than ttl/6 after the last.
  std::int64_t early_ok(std::int64_t due) const override { return due - interval_ms() / 2; }
  BatchStart begin_batched(std::int64_t sent) override;
  std::optional<std::int64_t> finish_batched(bool renewed, const char* error) override;
  std::int64_t interval_ms() const { return ttl_ms / 3; }
  // The common start of a renewal: a value when the step ends without one (closed,
  // lost, past the deadline, a clock jump or a failed sample), nullopt to renew now.
  std::optional<std::optional<std::int64_t>> before_renewal(bool may_sample);
  // The common end: the locker's new lease end (nullopt: not ours any more).
  std::optional<std::int64_t> after_renewal(std::optional<std::int64_t> end);
  std::optional<std::int64_t> after_failure(const char* what);
  // mu held: (re)arms the deadline-timer task at `at`.
  void arm_locked(std::int64_t at, bool forced);
  // From the renewer: the lock is no longer ours; the timer thread announces it now.
  void declare_lost_soon(const std::string& why);
  void on_timer(bool forced);
  // After loss: releases (fenced) whatever the locker may still hold of this lease.
  std::optional<std::int64_t> clean_up(std::int64_t now);

  const std::shared_ptr<Locker> locker;
  const std::shared_ptr<Clock> clock;
  const std::function<void()> on_lost;
  std::int64_t ttl_ms = 0;
  std::int64_t call_bound_ms = 0;
  std::int64_t backoff_ms = 1;
  std::int64_t fence = 0;  // set once, before the lease is shared
  const void* domain = nullptr;
  std::optional<Locker::RenewTicket> ticket;  // between begin_batched and finish_batched

  mutable std::mutex mu;
  std::condition_variable cv;  // lost, or a callback returned
  bool lost = false;
  bool closed = false;
  bool in_callback = false;
  std::thread::id callback_thread;
  std::string reason;          // why it was lost
  std::string pending_reason;  // a forced loss waiting for the timer thread
  std::int64_t lease_end = 0;  // host mono
  std::int64_t deadline = 0;   // lease_end - margin
  std::int64_t clean_up_until = 0;
  DeadlineTimer::Id task = 0;
};

void KeepAliveLease::State::arm_locked(std::int64_t at, bool forced) {
  // Never waits: the task takes mu, which the caller holds. A task that is already
  // running finds the deadline moved (or the loss declared) and returns.
  if (task) clock->timer().cancel(task, /*wait=*/false);
  std::weak_ptr<State> self = shared_from_this();
  task = clock->timer().schedule(at, [self, forced] {
    if (auto s = self.lock()) s->on_timer(forced);
  });
}

void KeepAliveLease::State::declare_lost_soon(const std::string& why) {
  std::lock_guard<std::mutex> g(mu);
  if (lost || closed) return;
  pending_reason = why;
  arm_locked(clock->mono_ms(), /*forced=*/true);
}

void KeepAliveLease::State::on_timer(bool forced) {
  std::string why;
  {
    std::lock_guard<std::mutex> g(mu);
    if (closed || lost) return;
    if (!forced && clock->mono_ms() < deadline) return;  // moved by a renewal
    lost = true;
    task = 0;
    why = forced && !pending_reason.empty()
              ? pending_reason
              : "its renew deadline passed without a successful renewal";
    reason = why;
    clean_up_until = lease_end + ttl_ms;
    in_callback = true;
    callback_thread = std::this_thread::get_id();
  }
  // Given up locally before anyone hears of the loss; a renewal still in flight finds
  // the hold changed and the renewer releases what is left (fenced).
  locker->strand(fence);
  cv.notify_all();
  log(LogLevel::Warning,
      "keep-alive lease of " + locker->key() + " (fence " + std::to_string(fence) + ") lost: " + why,
      locker->log_fields(LogEvent::LeaseLost, fence));
  if (on_lost) {
    try {
      on_lost();
    } catch (const std::exception& ex) {
      log(LogLevel::Error, std::string("on_lost raised: ") + ex.what(),
          locker->log_fields(LogEvent::CallbackFailed, fence));
    } catch (...) {
      log(LogLevel::Error, "on_lost raised", locker->log_fields(LogEvent::CallbackFailed, fence));
    }
  }
  {
    std::lock_guard<std::mutex> g(mu);
    in_callback = false;
    callback_thread = std::thread::id();
  }
  cv.notify_all();
}

std::optional<std::int64_t> KeepAliveLease::State::clean_up(std::int64_t now) {
  {
    std::lock_guard<std::mutex> g(mu);
    if (closed) return std::nullopt;
    if (now > clean_up_until && clean_up_until != 0) {
      log(LogLevel::Warning, "keep-alive lease of " + locker->key() +
                                 ": gave up releasing the lost hold (it has expired; the "
                                 "locker's next acquire releases it first)");
      return std::nullopt;
    }
  }
  try {
    // No hold and nothing stranded (taken over): no round trip.
    locker->release();
    return std::nullopt;
  } catch (const std::exception& ex) {
    log(LogLevel::Warning, "keep-alive lease of " + locker->key() +
                               ": could not release the lost hold yet: " + ex.what());
    return now + backoff_ms;
  }
}

std::optional<std::optional<std::int64_t>> KeepAliveLease::State::before_renewal(bool may_sample) {
  const std::int64_t now = clock->mono_ms();
  std::int64_t dl;
  bool was_lost_before;
  {
    std::lock_guard<std::mutex> g(mu);
    if (closed) return std::optional<std::int64_t>();
    was_lost_before = lost;
    dl = deadline;
  }
  if (was_lost_before) return clean_up(now);  // lost: release what is left, never renew
  if (now >= dl) {
    // Past the deadline (a paused process, a long queue): no renewal may revive it; the
    // timer declares the loss (now, if it has not yet), then the hold is released.
    declare_lost_soon("its renew deadline passed without a successful renewal");
    return std::optional<std::int64_t>(now + backoff_ms);
  }
  // A stale clock sample is refreshed as a call of its own, only when it and the
  // renewal both fit before the deadline (as the elector does). Several leases of one
  // client share one sample (ClockSampleBoard): one round trip for all of them.
  if (may_sample && locker->server_clock().stale() &&
      (call_bound_ms <= 0 || now + 2 * call_bound_ms <= dl)) {
    try {
      if (locker->refresh_clock()) {  // a jump: the lease was written on the old base
        declare_lost_soon("the server's clock jumped");
        return std::optional<std::int64_t>(clock->mono_ms() + backoff_ms);
      }
    } catch (const std::exception& ex) {
      return after_failure(ex.what());
    }
  }
  return std::nullopt;  // renew now
}

std::optional<std::int64_t> KeepAliveLease::State::after_renewal(std::optional<std::int64_t> end) {
  // Started whenever the deadline had not passed, even if it could still be running
  // then: the timer announced the loss at the deadline whatever the call did.
  const std::int64_t margin = renew_margin_ms(ttl_ms, locker->server_clock().uncertainty_ms());
  bool was_lost;
  {
    std::lock_guard<std::mutex> g(mu);
    if (closed) return std::nullopt;
    was_lost = lost;
    if (!lost && end) {
      lease_end = *end;
      deadline = *end - margin;
      arm_locked(deadline, /*forced=*/false);
      return (*end - ttl_ms) + interval_ms();  // an interval after the send
    }
  }
  if (!was_lost) {
    declare_lost_soon("the lock is no longer ours (taken over, expired or released)");
    return clock->mono_ms() + backoff_ms;  // then release what may be left (nothing, usually)
  }
  // Lost while the call ran: never taken back, released (fenced).
  return clean_up(clock->mono_ms());
}

std::optional<std::int64_t> KeepAliveLease::State::after_failure(const char* what) {
  log(LogLevel::Warning,
      "renewal of the keep-alive lease of " + locker->key() + " failed: " + what,
      locker->log_fields(LogEvent::RenewFailed, fence));
  return clock->mono_ms() + backoff_ms;
}

std::optional<std::int64_t> KeepAliveLease::State::renew_step() {
  if (auto done = before_renewal(/*may_sample=*/true)) return *done;
  try {
    return after_renewal(locker->renew());
  } catch (const std::exception& ex) {
    return after_failure(ex.what());
  }
}

Renewable::BatchStart KeepAliveLease::State::begin_batched(std::int64_t sent) {
  BatchStart start;
  if (auto done = before_renewal(/*may_sample=*/true)) {
    start.next = *done;
    return start;
  }
  ticket = locker->begin_renew(sent);
  start.request = ticket->request;
  start.collection = locker->options().collection;
  start.storage = &locker->storage();
  start.now_ms = ticket->at.now_ms;
  return start;
}

std::optional<std::int64_t> KeepAliveLease::State::finish_batched(bool renewed, const char* error) {
  if (!ticket) return clock->mono_ms() + backoff_ms;
  Locker::RenewTicket t = std::move(*ticket);
  ticket.reset();
  if (error) {  // the hold stays as it was; the io lock goes with `t`
    metrics::record_renewal(false);
    return after_failure(error);
  }
  const std::optional<std::int64_t> end = locker->finish_renew(t, renewed);
  metrics::record_renewal(end.has_value());
  return after_renewal(end);
}

std::unique_ptr<KeepAliveLease> KeepAliveLease::acquire(std::shared_ptr<Locker> locker,
                                                        KeepAliveOptions options,
                                                        Renewer* renewer) {
  if (!locker) throw InvalidArgument("locker must not be null");
  locker->acquire(options.blocking, options.timeout_s, options.step_s, options.force,
                  options.cancel);
  return std::make_unique<KeepAliveLease>(std::move(locker), std::move(options.on_lost), renewer);
}

KeepAliveLease::KeepAliveLease(std::shared_ptr<Locker> locker, std::function<void()> on_lost,
                               Renewer* renewer)
    : renewer_(renewer ? renewer : locker ? &Renewer::for_clock(locker->clock()) : &Renewer::system()) {
  if (!locker) throw InvalidArgument("locker must not be null");
  if (&locker->clock() != &renewer_->clock())
    throw InvalidArgument("the renewer must run on the locker's clock");
  try {
    locker->token();  // a deferred token (lazy_token) is assigned now: the lease hands it out
  } catch (...) {
    try {
      locker->release();  // not kept: the caller gets no lease to release it with
    } catch (const std::exception& ex) {
      log(LogLevel::Warning, "could not release " + locker->key() + ": " + ex.what());
    }
    throw;
  }
  auto lease = locker->lease();
  if (!lease) throw InvalidArgument("the locker of " + locker->key() + " holds no lock to keep alive");
  auto state = std::make_shared<State>(locker, renewer_->clock_ptr(), std::move(on_lost));
  const std::int64_t margin =
      renew_margin_ms(state->ttl_ms, locker->server_clock().uncertainty_ms());
  const std::int64_t now = state->clock->mono_ms();
  if (now >= lease->end_mono - margin) {
    // Won too late (a slow claim): its renew deadline has passed. Not announced.
    try {
      locker->release();
    } catch (const std::exception& ex) {
      log(LogLevel::Warning, "could not release a lock won too late: " + std::string(ex.what()));
    }
    throw StorageUnavailable("the lock " + locker->key() +
                             " was won too late to keep (its renew deadline had passed)");
  }
  state->fence = lease->fence;
  {
    std::lock_guard<std::mutex> g(state->mu);
    state->lease_end = lease->end_mono;
    state->deadline = lease->end_mono - margin;
    state->arm_locked(state->deadline, /*forced=*/false);
  }
  state_ = state;
  renewer_->add(state, lease->end_mono - state->ttl_ms + state->interval_ms());
}

KeepAliveLease::~KeepAliveLease() {
  try {
    close();
  } catch (...) {
  }
}

const std::shared_ptr<Locker>& KeepAliveLease::locker() const { return state_->locker; }

std::int64_t KeepAliveLease::fence() const { return state_->fence; }

bool KeepAliveLease::lost() const {
  std::lock_guard<std::mutex> g(state_->mu);
  return state_->lost;
}

std::string KeepAliveLease::lost_reason() const {
  std::lock_guard<std::mutex> g(state_->mu);
  return state_->reason;
}

std::int64_t KeepAliveLease::renew_deadline_mono() const {
  std::lock_guard<std::mutex> g(state_->mu);
  return state_->deadline;
}

bool KeepAliveLease::wait_lost(std::optional<std::int64_t> timeout_ms) {
  State& s = *state_;
  std::unique_lock<std::mutex> lk(s.mu);
  if (s.lost) return true;
  if (timeout_ms && *timeout_ms <= 0) return false;
  ClockCall call(*s.clock);
  const std::int64_t start = s.clock->mono_ms();
  for (;;) {
    if (s.lost) return true;
    const std::int64_t now = s.clock->mono_ms();
    std::int64_t until = now + kWaitSliceMs;
    if (timeout_ms) {
      if (now - start >= *timeout_ms) return false;
      until = std::min(until, start + *timeout_ms);
    }
    s.clock->wait_until(lk, s.cv, until, [&s] { return s.lost; });
  }
}

void KeepAliveLease::close(double min_hold_s) {
  if (!std::isfinite(min_hold_s) || min_hold_s < 0 || min_hold_s > 1e9)
    throw InvalidArgument("min_hold must be a finite number of seconds >= 0");
  if (!state_) return;
  State& s = *state_;
  DeadlineTimer::Id task;
  {
    std::lock_guard<std::mutex> g(s.mu);
    if (s.closed) return;
    s.closed = true;
    task = s.task;
    s.task = 0;
  }
  renewer_->remove(&s);  // waits for a renewal in flight (bounded by the call bound)
  if (task) s.clock->timer().cancel(task, /*wait=*/false);
  bool lost;
  {
    std::unique_lock<std::mutex> lk(s.mu);
    // An on_lost that is running (unless it is this very thread) finishes first.
    s.cv.wait(lk, [&s] {
      return !s.in_callback || s.callback_thread == std::this_thread::get_id();
    });
    lost = s.lost;
  }
  if (lost) return;  // a lost lease is not released (its hold stays stranded in the locker)
  try {
    if (min_hold_s > 0)
      s.locker->release_min_hold(min_hold_s);
    else
      s.locker->release();
  } catch (const std::exception& ex) {
    log(LogLevel::Warning,
        "releasing the keep-alive lease of " + s.locker->key() +
            " failed (it expires at its ttl): " + ex.what(),
        s.locker->log_fields(LogEvent::ReleaseFailed, s.fence));
  }
}

}  // namespace mongoelector
