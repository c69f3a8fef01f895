// A semaphore slot kept alive in the background until closed: the keep-alive lease of
// core/lease/lease.h for a Semaphore hold, with the same rules and on the same
// process-wide Renewer (core/lease/keepalive.h: a fixed pool of threads, not one per
// hold) and deadline timer:
//  * renewals about every ttl/3 after the last successful renewal was SENT; a failed one
//    is retried every min(ttl/20, 250 ms) while the renew deadline has not passed;
//  * its OWN loss deadline: lease end - max(ttl/10, 2 x clock uncertainty + 50 ms),
//    lease end = send of the last successful write + ttl (host mono); from there on the
//    hold is LOST, read from the monotonic clock whatever a renewal call, the timer or a
//    callback is doing (invariant 3: nobody can take the slot before the lease end);
//  * a renewal that finds the slot no longer ours (taken after expiry, released behind
//    our back, a jump of the server's clock) declares the loss at once;
//  * loss is final: the semaphore's hold is stranded when the loss is announced and
//    released (fenced: slot, uuid AND fence) by the renewer from the lease end on, never
//    taken back;
//  * close() stops the renewals and releases the slot (fenced) unless lost;
//  * on_lost runs exactly once, never under a library lock, on the clock's callback
//    dispatcher (never the timer's thread). The shared rules: core/lease/hold_loss.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "../lease/keepalive.h"
#include "../lease/lease.h"
#include "semaphore.h"

namespace mongoelector {

class SemaphoreLease {
 public:
  // Acquires a slot of `semaphore` (Semaphore::acquire with the options' blocking,
  // timeout, step and cancel; `force` is refused) and keeps it alive on `renewer`
  // (default: the process-wide one, whose clock must be the semaphore's). While the lease
  // lives, the semaphore must not be acquired, released or touched by anyone else.
  static std::unique_ptr<SemaphoreLease> acquire(std::shared_ptr<Semaphore> semaphore,
                                                 KeepAliveOptions options = {},
                                                 Renewer* renewer = nullptr);
  // Keeps alive the hold `semaphore` has now (InvalidArgument if none; StorageUnavailable,
  // after releasing it, if its renew deadline has already passed).
  SemaphoreLease(std::shared_ptr<Semaphore> semaphore, std::function<void()> on_lost,
                 Renewer* renewer = nullptr);
  ~SemaphoreLease();  // close(); must not run inside on_lost
  SemaphoreLease(const SemaphoreLease&) = delete;
  SemaphoreLease& operator=(const SemaphoreLease&) = delete;

  std::int64_t fence() const;  // the hold's token (kept after loss)
  bool lost() const;
  std::string lost_reason() const;  // "" while not lost
  // Blocks until lost or `timeout_ms` pass (nullopt: forever). True if lost.
  bool wait_lost(std::optional<std::int64_t> timeout_ms);
  std::int64_t renew_deadline_mono() const;
  // Stops renewing; waits for a running renewal or on_lost; releases the slot (fenced)
  // unless lost. Idempotent; a failed release is logged (the slot then expires at its
  // ttl, and the semaphore releases it before its next claim).
  void close();
  const std::shared_ptr<Semaphore>& semaphore() const;

  class State;

 private:
  std::shared_ptr<State> state_;
  Renewer* renewer_;
};

}  // namespace mongoelector
