// The keep-alive of a semaphore slot: core/lease/lease.cpp's state machine on a
// Semaphore hold (see semaphore_lease.h for the rules).
#include "semaphore_lease.h"

#include <algorithm>
#include <exception>

#include "../exceptions.h"
#include "../lease/hold_loss.h"
#include "../log.h"

namespace mongoelector {

class SemaphoreLease::State final : public Renewable {
 public:
  State(std::shared_ptr<Semaphore> s, std::shared_ptr<Clock> c)
      : sem(std::move(s)), clock(std::move(c)) {
    ttl_ms = sem->ttl_ms();
    call_bound_ms = sem->storage().call_bound_ms();
    backoff_ms = std::max<std::int64_t>(1, std::min<std::int64_t>(ttl_ms / 20, 250));
  }

  std::optional<std::int64_t> renew_step() override;
  // After loss: releases (fenced) only the stranded hold; no round trip if none.
  std::optional<std::int64_t> clean_up(std::int64_t now) {
    return loss->clean_up(now, [this] { sem->release(); }, backoff_ms);
  }

  const std::shared_ptr<Semaphore> sem;
  const std::shared_ptr<Clock> clock;
  std::int64_t ttl_ms = 0;
  std::int64_t call_bound_ms = 0;
  std::int64_t backoff_ms = 1;
  std::int64_t fence = 0;          // set once, before the lease is shared
  std::shared_ptr<HoldLoss> loss;  // set once, before the lease is shared
};

std::optional<std::int64_t> SemaphoreLease::State::renew_step() {
  const std::int64_t now = clock->mono_ms();
  const HoldLoss::View v = loss->view(now);
  if (v.phase == HoldLoss::Phase::Closed) return std::nullopt;
  if (v.phase == HoldLoss::Phase::Lost) return clean_up(now);
  try {
    if (sem->server_clock().stale() && (call_bound_ms <= 0 || now + 2 * call_bound_ms <= v.deadline)) {
      if (sem->refresh_clock()) {
        loss->declare_lost("the server's clock jumped");
        return clock->mono_ms() + backoff_ms;
      }
    }
    const std::optional<std::int64_t> end = sem->renew();
    const std::int64_t margin = renew_margin_ms(ttl_ms, sem->server_clock().uncertainty_ms());
    switch (loss->renewed(end, margin, "the slot is no longer ours (taken over, expired or released)")) {
      case HoldLoss::Outcome::Extended:
        return (*end - ttl_ms) + ttl_ms / 3;
      case HoldLoss::Outcome::NowLost:
        return clock->mono_ms() + backoff_ms;
      case HoldLoss::Outcome::WasLost:
        return clean_up(clock->mono_ms());
      case HoldLoss::Outcome::Closed:
        break;
    }
    return std::nullopt;
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
  auto state = std::make_shared<State>(semaphore, renewer_->clock_ptr());
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
  state->loss = HoldLoss::watch(state->clock, state->ttl_ms, std::move(on_lost), semaphore,
                                lease->fence, "keep-alive lease of semaphore " + semaphore->key(),
                                lease->end_mono, margin);
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

bool SemaphoreLease::lost() const { return state_->loss->lost(); }

std::string SemaphoreLease::lost_reason() const { return state_->loss->reason(); }

std::int64_t SemaphoreLease::renew_deadline_mono() const { return state_->loss->renew_deadline(); }

bool SemaphoreLease::wait_lost(std::optional<std::int64_t> timeout_ms) {
  return state_->loss->wait_lost(timeout_ms);
}

void SemaphoreLease::close() {
  if (!state_) return;
  State& s = *state_;
  // Decided first (a deadline already passed: lost, not released); on_lost has run.
  const std::optional<bool> closed = s.loss->close();
  if (!closed) return;  // closed before
  const bool lost = *closed;
  renewer_->remove(&s);
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
