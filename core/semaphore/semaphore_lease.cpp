// The keep-alive of a semaphore slot: core/lease/lease.cpp's state machine on a
// Semaphore hold (see semaphore_lease.h for the rules).
#include "semaphore_lease.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "../exceptions.h"
#include "../log.h"

namespace mongoelector {

namespace {
constexpr std::int64_t kWaitSliceMs = 60 * 60 * 1000;  // see lease.cpp
}  // namespace

class SemaphoreLease::State final : public Renewable,
                                    public std::enable_shared_from_this<SemaphoreLease::State> {
 public:
  State(std::shared_ptr<Semaphore> s, std::shared_ptr<Clock> c, std::function<void()> cb)
      : sem(std::move(s)), clock(std::move(c)), on_lost(std::move(cb)) {
    ttl_ms = sem->ttl_ms();
    call_bound_ms = sem->storage().call_bound_ms();
    backoff_ms = std::max<std::int64_t>(1, std::min<std::int64_t>(ttl_ms / 20, 250));
  }

  std::optional<std::int64_t> renew_step() override;
  void arm_locked(std::int64_t at, bool forced);  // mu held
  void declare_lost_soon(const std::string& why);
  void on_timer(bool forced);
  std::optional<std::int64_t> clean_up(std::int64_t now);

  const std::shared_ptr<Semaphore> sem;
  const std::shared_ptr<Clock> clock;
  const std::function<void()> on_lost;
  std::int64_t ttl_ms = 0;
  std::int64_t call_bound_ms = 0;
  std::int64_t backoff_ms = 1;
  std::int64_t fence = 0;  // set once, before the lease is shared

  mutable std::mutex mu;
  std::condition_variable cv;
  bool lost = false;
  bool closed = false;
  bool in_callback = false;
  std::thread::id callback_thread;
  std::string reason;
  std::string pending_reason;
  std::int64_t lease_end = 0;  // host mono
  std::int64_t deadline = 0;   // lease_end - margin
  std::int64_t clean_up_until = 0;
  DeadlineTimer::Id task = 0;
};

void SemaphoreLease::State::arm_locked(std::int64_t at, bool forced) {
  if (task) clock->timer().cancel(task, /*wait=*/false);
  std::weak_ptr<State> self = shared_from_this();
  task = clock->timer().schedule(at, [self, forced] {
    if (auto s = self.lock()) s->on_timer(forced);
  });
}

void SemaphoreLease::State::declare_lost_soon(const std::string& why) {
  std::lock_guard<std::mutex> g(mu);
  if (lost || closed) return;
  pending_reason = why;
  arm_locked(clock->mono_ms(), /*forced=*/true);
}

void SemaphoreLease::State::on_timer(bool forced) {
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
  // Given up locally before anyone hears of the loss.
  sem->strand(fence);
  cv.notify_all();
  log(LogLevel::Warning,
      "keep-alive lease of semaphore " + sem->key() + " (fence " + std::to_string(fence) +
          ") lost: " + why,
      sem->log_fields(LogEvent::LeaseLost, fence));
  if (on_lost) {
    try {
      on_lost();
    } catch (const std::exception& ex) {
      log(LogLevel::Error, std::string("on_lost raised: ") + ex.what(),
          sem->log_fields(LogEvent::CallbackFailed, fence));
    } catch (...) {
      log(LogLevel::Error, "on_lost raised", sem->log_fields(LogEvent::CallbackFailed, fence));
    }
  }
  {
    std::lock_guard<std::mutex> g(mu);
    in_callback = false;
    callback_thread = std::thread::id();
  }
  cv.notify_all();
}

std::optional<std::int64_t> SemaphoreLease::State::clean_up(std::int64_t now) {
  {
    std::lock_guard<std::mutex> g(mu);
    if (closed) return std::nullopt;
    if (now > clean_up_until && clean_up_until != 0) {
      log(LogLevel::Warning, "keep-alive lease of semaphore " + sem->key() +
                                 ": gave up releasing the lost hold (it has expired; the "
                                 "semaphore's next acquire releases it first)");
      return std::nullopt;
    }
  }
  try {
    sem->release();  // only the stranded hold (fenced); no round trip if none
    return std::nullopt;
  } catch (const std::exception& ex) {
    log(LogLevel::Warning, "keep-alive lease of semaphore " + sem->key() +
                               ": could not release the lost hold yet: " + ex.what());
    return now + backoff_ms;
  }
}

std::optional<std::int64_t> SemaphoreLease::State::renew_step() {
  std::int64_t now = clock->mono_ms();
  std::int64_t dl;
  bool was_lost_before;
  {
    std::lock_guard<std::mutex> g(mu);
    if (closed) return std::nullopt;
    was_lost_before = lost;
    dl = deadline;
  }
  if (was_lost_before) return clean_up(now);
  if (now >= dl) {
    declare_lost_soon("its renew deadline passed without a successful renewal");
    return now + backoff_ms;
  }
  try {
    if (sem->server_clock().stale() && (call_bound_ms <= 0 || now + 2 * call_bound_ms <= dl)) {
      if (sem->refresh_clock()) {
        declare_lost_soon("the server's clock jumped");
        return clock->mono_ms() + backoff_ms;
      }
      now = clock->mono_ms();
    }
    const std::optional<std::int64_t> end = sem->renew();
    const std::int64_t margin = renew_margin_ms(ttl_ms, sem->server_clock().uncertainty_ms());
    bool was_lost;
    {
      std::lock_guard<std::mutex> g(mu);
      if (closed) return std::nullopt;
      was_lost = lost;
      if (!lost && end) {
        lease_end = *end;
        deadline = *end - margin;
        arm_locked(deadline, /*forced=*/false);
        return (*end - ttl_ms) + ttl_ms / 3;
      }
    }
    if (!was_lost) {
      declare_lost_soon("the slot is no longer ours (taken over, expired or released)");
      return clock->mono_ms() + backoff_ms;
    }
    return clean_up(clock->mono_ms());
  } catch (const std::exception& ex) {
    log(LogLevel::Warning,
        "renewal of the keep-alive lease of semaphore " + sem->key() + " failed: " + ex.what(),
        sem->log_fields(LogEvent::RenewFailed, fence));
    return clock->mono_ms() + backoff_ms;
  }
}

std::unique_ptr<SemaphoreLease> SemaphoreLease::acquire(std::shared_ptr<Semaphore> semaphore,
                                                        KeepAliveOptions options,
                                                        Renewer* renewer) {
  if (!semaphore) throw InvalidArgument("semaphore must not be null");
  if (options.force) throw InvalidArgument("a semaphore slot cannot be forced");
  semaphore->acquire(options.blocking, options.timeout_s, options.step_s, options.cancel);
  return std::make_unique<SemaphoreLease>(std::move(semaphore), std::move(options.on_lost),
                                          renewer);
}

SemaphoreLease::SemaphoreLease(std::shared_ptr<Semaphore> semaphore,
                               std::function<void()> on_lost, Renewer* renewer)
    : renewer_(renewer ? renewer
                        : semaphore ? &Renewer::for_clock(semaphore->clock())
                                    : &Renewer::system()) {
  if (!semaphore) throw InvalidArgument("semaphore must not be null");
  if (&semaphore->clock() != &renewer_->clock())
    throw InvalidArgument("the renewer must run on the semaphore's clock");
  auto lease = semaphore->lease();
  if (!lease)
    throw InvalidArgument("the semaphore " + semaphore->key() + " holds no slot to keep alive");
  auto state = std::make_shared<State>(semaphore, renewer_->clock_ptr(), std::move(on_lost));
  const std::int64_t margin =
      renew_margin_ms(state->ttl_ms, semaphore->server_clock().uncertainty_ms());
  const std::int64_t now = state->clock->mono_ms();
  if (now >= lease->end_mono - margin) {
    try {
      semaphore->release();
    } catch (const std::exception& ex) {
      log(LogLevel::Warning, "could not release a slot won too late: " + std::string(ex.what()));
    }
    throw StorageUnavailable("the slot of semaphore " + semaphore->key() +
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
  renewer_->add(state, lease->end_mono - state->ttl_ms + state->ttl_ms / 3);
}

SemaphoreLease::~SemaphoreLease() {
  try {
    close();
  } catch (...) {
  }
}

const std::shared_ptr<Semaphore>& SemaphoreLease::semaphore() const { return state_->sem; }

std::int64_t SemaphoreLease::fence() const { return state_->fence; }

bool SemaphoreLease::lost() const {
  std::lock_guard<std::mutex> g(state_->mu);
  return state_->lost;
}

std::string SemaphoreLease::lost_reason() const {
  std::lock_guard<std::mutex> g(state_->mu);
  return state_->reason;
}

std::int64_t SemaphoreLease::renew_deadline_mono() const {
  std::lock_guard<std::mutex> g(state_->mu);
  return state_->deadline;
}

bool SemaphoreLease::wait_lost(std::optional<std::int64_t> timeout_ms) {
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

void SemaphoreLease::close() {
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
  renewer_->remove(&s);
  if (task) s.clock->timer().cancel(task, /*wait=*/false);
  bool lost;
  {
    std::unique_lock<std::mutex> lk(s.mu);
    s.cv.wait(lk, [&s] {
      return !s.in_callback || s.callback_thread == std::this_thread::get_id();
    });
    lost = s.lost;
  }
  if (lost) return;  // its hold is stranded in the semaphore: released before its next claim
  try {
    s.sem->release();
  } catch (const std::exception& ex) {
    log(LogLevel::Warning,
        "releasing the keep-alive lease of semaphore " + s.sem->key() +
            " failed (it expires at its ttl): " + ex.what(),
        s.sem->log_fields(LogEvent::ReleaseFailed, s.fence));
  }
}

}  // namespace mongoelector
