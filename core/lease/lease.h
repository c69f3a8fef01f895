// Keep-alive leases: a held lock or semaphore slot (any Holdable, core/hold/holdable.h)
// renewed in the background until closed, with loss announced on the holder's own clock
// (README, "Keep-alive leases"). ONE lease for every kind of hold: the rules below exist
// here only.
//
// Rules (invariant numbers from the protocol notes):
//  * Renewals run on a Renewer (keepalive.h: a fixed pool per process) about every ttl/3
//    after the last successful renewal was SENT; a failed renewal is retried every
//    min(ttl/20, 250 ms) for as long as the renew deadline has not passed.
//  * The renew deadline is the elector's: lease end - margin, lease end = send of the last
//    successful write + ttl (host mono), margin = max(ttl/10, 2 * clock uncertainty +
//    50 ms). From the deadline on the lease is LOST: lost() reads the monotonic clock
//    against it (hold_loss.h), whatever a renewal call, the timer or a callback is doing,
//    in a fork()ed child too (invariant 3: step-down before takeover, as no claimant can
//    take the lock before the lease end).
//  * A renewal that finds the hold no longer ours (taken, released behind our back, a jump
//    of the server's clock) declares the loss at once.
//  * Loss is final. The holder's hold is stranded when the loss is announced (by the
//    clock's deadline timer); if a renewal started before it lands afterwards, or the
//    server answers again, the renewer releases that hold, fenced (uuid AND fence; a
//    slot also by its index), from the lease end on, instead of taking it back: a lost
//    lease never resurrects.
//  * close() stops the renewals and releases the hold (fenced) unless the lease was lost.
//  * on_lost runs exactly once, never under a library lock, on the clock's callback
//    dispatcher (callback_dispatcher.h), never on the timer's thread: a slow one delays
//    no other lease's loss. close() returns after it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "../hold/holdable.h"
#include "../locker.h"
#include "../semaphore/rwlock.h"
#include "../semaphore/semaphore.h"
#include "keepalive.h"

namespace mongoelector {

struct KeepAliveOptions {
  bool blocking = true;
  std::optional<double> timeout_s;  // blocking only; none: wait forever
  double step_s = 0.25;             // retry interval while waiting for the lock
  bool force = false;               // take the lock whoever holds it
  CancelFn cancel;                  // abandons a blocking wait (Cancelled)
  std::function<void()> on_lost;    // callback dispatcher's thread; exceptions are logged
};

class KeepAliveLease {
 public:
  // Acquires `locker`'s lock (Locker::acquire: LockExists, AcquireTimeout, Cancelled, ...)
  // and keeps it alive on `renewer` (default: the process-wide one) until close(). The
  // renewer's clock must be the locker's. While the lease lives, the locker must not be
  // acquired, released or touched by anyone else.
  static std::unique_ptr<KeepAliveLease> acquire(std::shared_ptr<Locker> locker,
                                                 KeepAliveOptions options = {},
                                                 Renewer* renewer = nullptr);
  // The same for a slot of `semaphore` (Semaphore::acquire with the options' blocking,
  // timeout, step and cancel; `force` is refused).
  static std::unique_ptr<KeepAliveLease> acquire(std::shared_ptr<Semaphore> semaphore,
                                                 KeepAliveOptions options = {},
                                                 Renewer* renewer = nullptr);
  // The same for a read or the write hold of `rwlock` (RwLock::acquire(side, ...);
  // `force` is refused).
  static std::unique_ptr<KeepAliveLease> acquire(std::shared_ptr<RwLock> rwlock, RwSide side,
                                                 KeepAliveOptions options = {},
                                                 Renewer* renewer = nullptr);
  // Keeps alive the hold `locker` (or `semaphore`, `rwlock`) has now (InvalidArgument if
  // none; StorageUnavailable, after releasing it, if its renew deadline has already
  // passed).
  KeepAliveLease(std::shared_ptr<Locker> locker, std::function<void()> on_lost,
                 Renewer* renewer = nullptr);
  KeepAliveLease(std::shared_ptr<Semaphore> semaphore, std::function<void()> on_lost,
                 Renewer* renewer = nullptr);
  KeepAliveLease(std::shared_ptr<RwLock> rwlock, std::function<void()> on_lost,
                 Renewer* renewer = nullptr);
  // close(). Must not run inside on_lost.
  ~KeepAliveLease();
  KeepAliveLease(const KeepAliveLease&) = delete;
  KeepAliveLease& operator=(const KeepAliveLease&) = delete;

  std::int64_t fence() const;  // the hold's token (kept after loss)
  // True from the renew deadline on (the clock is read: no thread has to say so), or
  // once a renewal found the hold no longer ours.
  bool lost() const;
  // Why the lease was lost ("" while it is not).
  std::string lost_reason() const;
  // Blocks until lost or `timeout_ms` pass (nullopt: forever): a wait on the clock that
  // ends at the renew deadline by itself. True if lost.
  bool wait_lost(std::optional<std::int64_t> timeout_ms);
  // Host mono ms of the current renew deadline, and of the next renewal (tests).
  std::int64_t renew_deadline_mono() const;
  // Stops renewing; waits for a running renewal or on_lost (runs on_lost here if it was
  // not begun, or if the deadline passed and nobody has announced it yet); releases the
  // hold (fenced) unless lost. Idempotent. A failed release is logged, not thrown (the
  // hold is then stranded in its holder: its next acquire releases it first, or it
  // expires). min_hold_s > 0 (locks only): the lock stays taken until min_hold_s after
  // it was acquired (Locker::release_min_hold); InvalidArgument (lease untouched) for a
  // bad value, or on a semaphore slot. When that minimum hold is not surely kept, the
  // lease is closed and the caller told: LockLost (the lease was lost, or the write
  // landed after the hold had ended), or the write's storage failure (it may still land;
  // otherwise the lock frees at its ttl).
  void close(double min_hold_s = 0);
  // The holder: the Locker of a lock's lease, the Semaphore of a slot's, the RwLock of a
  // read or write hold's (the others null).
  const std::shared_ptr<Locker>& locker() const { return locker_; }
  const std::shared_ptr<Semaphore>& semaphore() const { return semaphore_; }
  const std::shared_ptr<RwLock>& rwlock() const { return rwlock_; }

  class State;

 private:
  struct Holder {
    std::shared_ptr<Holdable> hold;
    std::shared_ptr<Locker> locker;
    std::shared_ptr<Semaphore> semaphore;
    std::shared_ptr<RwLock> rwlock;
  };
  KeepAliveLease(Holder holder, std::function<void()> on_lost, Renewer* renewer);

  std::shared_ptr<Locker> locker_;
  std::shared_ptr<Semaphore> semaphore_;
  std::shared_ptr<RwLock> rwlock_;
  std::shared_ptr<State> state_;
  Renewer* renewer_;
};

// A semaphore slot's keep-alive lease is the same lease.
using SemaphoreLease = KeepAliveLease;

}  // namespace mongoelector
