#include "lease.h"

#include <algorithm>
#include <cmath>
#include <exception>

#include "../exceptions.h"
#include "../log.h"
#include "../metrics.h"
#include "hold_loss.h"

namespace mongoelector {

class KeepAliveLease::State final : public Renewable {
 public:
  State(std::shared_ptr<Holdable> h, std::shared_ptr<Clock> c)
      : hold(std::move(h)), clock(std::move(c)) {
    ttl_ms = hold->ttl_ms();
    call_bound_ms = hold->storage().call_bound_ms();
    backoff_ms = std::max<std::int64_t>(1, std::min<std::int64_t>(ttl_ms / 20, 250));
    domain = hold->storage().batch_domain();
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
  // The common end: the holder's new lease end (nullopt: not ours any more).
  std::optional<std::int64_t> after_renewal(std::optional<std::int64_t> end);
  std::optional<std::int64_t> after_failure(const char* what);
  // After loss: releases (fenced) whatever the holder may still hold of this lease.
  std::optional<std::int64_t> clean_up(std::int64_t now) {
    return loss->clean_up(
        now, [this] { hold->release(); }, backoff_ms);
  }

  const std::shared_ptr<Holdable> hold;
  const std::shared_ptr<Clock> clock;
  std::int64_t ttl_ms = 0;
  std::int64_t call_bound_ms = 0;
  std::int64_t backoff_ms = 1;
  std::int64_t fence = 0;  // set once, before the lease is shared
  const void* domain = nullptr;
  std::shared_ptr<HoldLoss> loss;     // set once, before the lease is shared
  std::optional<RenewTicket> ticket;  // between begin_batched and finish_batched
};

std::optional<std::optional<std::int64_t>> KeepAliveLease::State::before_renewal(bool may_sample) {
  const std::int64_t now = clock->mono_ms();
  const HoldLoss::View v = loss->view(now);
  if (v.phase == HoldLoss::Phase::Closed) return std::optional<std::int64_t>();
  // Lost (past the deadline too: a paused process, a long queue): never renewed; what
  // is left is released, fenced.
  if (v.phase == HoldLoss::Phase::Lost) return clean_up(now);
  // A stale clock sample is refreshed as a call of its own, only when it and the
  // renewal both fit before the deadline (as the elector does). Several leases of one
  // client share one sample (ClockSampleBoard): one round trip for all of them.
  if (may_sample && hold->server_clock().stale() &&
      (call_bound_ms <= 0 || now + 2 * call_bound_ms <= v.deadline)) {
    try {
      if (hold->refresh_clock()) {  // a jump: the lease was written on the old base
        loss->declare_lost("the server's clock jumped");
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
  // then: the lease was lost at the deadline whatever the call did.
  const std::int64_t margin = hold->renew_margin_ms();
  const std::string not_ours =
      std::string("the ") + hold->unit() + " is no longer ours (taken over, expired or released)";
  switch (loss->renewed(end, margin, not_ours)) {
    case HoldLoss::Outcome::Extended:
      return (*end - ttl_ms) + interval_ms();  // an interval after the send
    case HoldLoss::Outcome::NowLost:
      return clock->mono_ms() + backoff_ms;  // then release what may be left (nothing, usually)
    case HoldLoss::Outcome::WasLost:
      return clean_up(clock->mono_ms());  // lost while the call ran: never taken back
    case HoldLoss::Outcome::Closed:
      break;
  }
  return std::nullopt;
}

std::optional<std::int64_t> KeepAliveLease::State::after_failure(const char* what) {
  log(LogLevel::Warning,
      "renewal of the keep-alive lease of " + hold->describe() + " failed: " + what,
      hold->log_fields(LogEvent::RenewFailed, fence));
  return clock->mono_ms() + backoff_ms;
}

std::optional<std::int64_t> KeepAliveLease::State::renew_step() {
  if (auto done = before_renewal(/*may_sample=*/true)) return *done;
  std::optional<std::int64_t> end;
  try {
    RenewTicket t = hold->begin_renew(clock->mono_ms());  // `sent` before the estimate
    const bool ok = renew_one(hold->storage(), hold->collection(), t);
    end = hold->finish_renew(t, ok);
  } catch (const std::exception& ex) {
    metrics::record_renewal(false);
    return after_failure(ex.what());
  }
  metrics::record_renewal(end.has_value());
  return after_renewal(end);
}

Renewable::BatchStart KeepAliveLease::State::begin_batched(std::int64_t sent) {
  BatchStart start;
  if (auto done = before_renewal(/*may_sample=*/true)) {
    start.next = *done;
    return start;
  }
  ticket = hold->begin_renew(sent);
  start.ticket = &*ticket;
  start.collection = hold->collection();
  start.storage = &hold->storage();
  return start;
}

std::optional<std::int64_t> KeepAliveLease::State::finish_batched(bool renewed, const char* error) {
  if (!ticket) return clock->mono_ms() + backoff_ms;
  RenewTicket t = std::move(*ticket);
  ticket.reset();
  if (error) {  // the hold stays as it was; the io lock goes with `t`
    metrics::record_renewal(false);
    return after_failure(error);
  }
  const std::optional<std::int64_t> end = hold->finish_renew(t, renewed);
  metrics::record_renewal(end.has_value());
  return after_renewal(end);
}

namespace {
// A lazy_token locker's deferred token is assigned before its lease starts (the lease
// hands it out); a hold that cannot get one is released, not kept.
std::shared_ptr<Holdable> with_token(const std::shared_ptr<Locker>& locker) {
  if (!locker) throw InvalidArgument("locker must not be null");
  try {
    locker->token();
  } catch (...) {
    try {
      locker->release();  // not kept: the caller gets no lease to release it with
    } catch (const std::exception& ex) {
      log(LogLevel::Warning, "could not release " + locker->key() + ": " + ex.what());
    }
    throw;
  }
  return locker;
}

template <class T>
std::shared_ptr<Holdable> require(const std::shared_ptr<T>& holder, const char* what) {
  if (!holder) throw InvalidArgument(std::string(what) + " must not be null");
  return holder;
}
}  // namespace

std::unique_ptr<KeepAliveLease> KeepAliveLease::acquire(std::shared_ptr<Locker> locker,
                                                        KeepAliveOptions options,
                                                        Renewer* renewer) {
  if (!locker) throw InvalidArgument("locker must not be null");
  locker->acquire(options.blocking, options.timeout_s, options.step_s, options.force,
                  options.cancel);
  return std::make_unique<KeepAliveLease>(std::move(locker), std::move(options.on_lost), renewer);
}

std::unique_ptr<KeepAliveLease> KeepAliveLease::acquire(std::shared_ptr<Semaphore> semaphore,
                                                        KeepAliveOptions options,
                                                        Renewer* renewer) {
  if (!semaphore) throw InvalidArgument("semaphore must not be null");
  if (options.force) throw InvalidArgument("a semaphore slot cannot be forced");
  semaphore->acquire(options.blocking, options.timeout_s, options.step_s, options.cancel);
  return std::make_unique<KeepAliveLease>(std::move(semaphore), std::move(options.on_lost),
                                          renewer);
}

std::unique_ptr<KeepAliveLease> KeepAliveLease::acquire(std::shared_ptr<RwLock> rwlock, RwSide side,
                                                        KeepAliveOptions options,
                                                        Renewer* renewer) {
  if (!rwlock) throw InvalidArgument("read-write lock must not be null");
  if (options.force) throw InvalidArgument("a read-write lock's hold cannot be forced");
  rwlock->acquire(side, options.blocking, options.timeout_s, options.step_s, options.cancel);
  return std::make_unique<KeepAliveLease>(std::move(rwlock), std::move(options.on_lost), renewer);
}

KeepAliveLease::KeepAliveLease(std::shared_ptr<Locker> locker, std::function<void()> on_lost,
                               Renewer* renewer)
    : KeepAliveLease(Holder{with_token(locker), locker, nullptr, nullptr}, std::move(on_lost),
                     renewer) {}

KeepAliveLease::KeepAliveLease(std::shared_ptr<Semaphore> semaphore, std::function<void()> on_lost,
                               Renewer* renewer)
    : KeepAliveLease(Holder{require(semaphore, "semaphore"), nullptr, semaphore, nullptr},
                     std::move(on_lost), renewer) {}

KeepAliveLease::KeepAliveLease(std::shared_ptr<RwLock> rwlock, std::function<void()> on_lost,
                               Renewer* renewer)
    : KeepAliveLease(Holder{require(rwlock, "read-write lock"), nullptr, nullptr, rwlock},
                     std::move(on_lost), renewer) {}

KeepAliveLease::KeepAliveLease(Holder holder, std::function<void()> on_lost, Renewer* renewer)
    : locker_(std::move(holder.locker)),
      semaphore_(std::move(holder.semaphore)),
      rwlock_(std::move(holder.rwlock)),
      renewer_(renewer ? renewer : &Renewer::for_clock(holder.hold->clock())) {
  const std::shared_ptr<Holdable> hold = std::move(holder.hold);
  if (&hold->clock() != &renewer_->clock())
    throw InvalidArgument(std::string("the renewer must run on the ") +
                          (locker_   ? "locker's"
                           : rwlock_ ? "read-write lock's"
                                     : "semaphore's") +
                          " clock");
  auto lease = hold->lease();
  if (!lease)
    throw InvalidArgument("the " + std::string(locker_ ? "locker of " : "") + hold->describe() +
                          " holds no " + hold->unit() + " to keep alive");
  auto state = std::make_shared<State>(hold, renewer_->clock_ptr());
  const std::int64_t margin = hold->renew_margin_ms();
  const std::int64_t now = state->clock->mono_ms();
  if (now >= lease->end_mono - margin) {
    // Won too late (a slow claim): its renew deadline has passed. Not announced.
    try {
      hold->release();
    } catch (const std::exception& ex) {
      log(LogLevel::Warning,
          "could not release a " + std::string(hold->unit()) + " won too late: " + ex.what());
    }
    throw StorageUnavailable("the " + std::string(hold->unit()) + " of " + hold->describe() +
                             " was won too late to keep (its renew deadline had passed)");
  }
  state->fence = lease->fence;
  state->loss = HoldLoss::watch(state->clock, state->ttl_ms, std::move(on_lost), hold, lease->fence,
                                "keep-alive lease of " + hold->describe(), lease->end_mono, margin);
  state_ = state;
  renewer_->add(state, lease->end_mono - state->ttl_ms + state->interval_ms());
}

KeepAliveLease::~KeepAliveLease() {
  try {
    close();
  } catch (...) {
  }
}

std::int64_t KeepAliveLease::fence() const { return state_->fence; }

bool KeepAliveLease::lost() const { return state_->loss->lost(); }

std::string KeepAliveLease::lost_reason() const { return state_->loss->reason(); }

std::int64_t KeepAliveLease::renew_deadline_mono() const { return state_->loss->renew_deadline(); }

bool KeepAliveLease::wait_lost(std::optional<std::int64_t> timeout_ms) {
  return state_->loss->wait_lost(timeout_ms);
}

void KeepAliveLease::close(double min_hold_s) {
  if (!std::isfinite(min_hold_s) || min_hold_s < 0 || min_hold_s > 1e9)
    throw InvalidArgument("min_hold must be a finite number of seconds >= 0");
  if (min_hold_s > 0 && !locker_)
    throw InvalidArgument("min_hold applies to locks: a semaphore slot is released at close");
  if (!state_) return;
  State& s = *state_;
  // Decided first (a deadline already passed: lost, not released); on_lost has run.
  const std::optional<bool> closed = s.loss->close();
  if (!closed) return;  // closed before
  const bool lost = *closed;
  renewer_->remove(&s);  // waits for a renewal in flight (bounded by the call bound)
  if (lost) {
    // A lost lease is not released (its hold stays stranded in the holder); a minimum
    // hold asked for cannot be kept, and the caller must know it.
    if (min_hold_s > 0)
      throw LockLost("the keep-alive lease of " + s.hold->describe() +
                     " was lost before it was closed: the lock is not kept taken until its "
                     "minimum hold");
    return;
  }
  // A minimum hold is a promise to the caller: its failures are theirs to know (LockLost:
  // not kept; a storage failure: in doubt, the write may still land).
  if (min_hold_s > 0) {
    locker_->release_min_hold(min_hold_s);
    return;
  }
  try {
    s.hold->release();
  } catch (const std::exception& ex) {
    log(LogLevel::Warning,
        "releasing the keep-alive lease of " + s.hold->describe() +
            " failed (it expires at its ttl): " + ex.what(),
        s.hold->log_fields(LogEvent::ReleaseFailed, s.fence));
  }
}

}  // namespace mongoelector
