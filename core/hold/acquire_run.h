// AcquireRun: the one acquire loop of every kind of hold (lock, semaphore slot), as a
// state machine its caller drives. HoldState::acquire (the blocking acquire of C, Go,
// Rust, Python's sync classes) is a thin driver of it that sleeps on its thread; an
// event loop (Python's asyncio classes) drives the same machine, sleeping on the loop
// and running each attempt as one call. So the retry rule (the contract's
// _acquireretry), the step, the timeout's end, the time check, cancellation and the
// acquire metrics exist once.
//
//   next()     where the loop is, at the clock's now: TryNow, Wait (until a monotonic
//              time), or a final step (Acquired, Held, TimedOut, Cancelled, Failed).
//   attempt()  one claim (preceded, on the first, by the time check when timeparanoid):
//              the next step. Errors of the claim end the run (counted as "error") and
//              are thrown.
//   cancel()   ends the run as Cancelled (counted once). A claim in flight when cancel()
//              is called (an attempt running on another thread) that lands is released
//              by that attempt, fenced by its own token (the feature's release_if), so a
//              cancelled acquire never leaves a holder.
//   abandon()  the run acquired, but its caller gave up before taking the outcome (an
//              event loop's task cancelled as the attempt ended): releases that hold,
//              fenced, as a claim landing after cancel() is.
//   give_up()  the run ends without the hold (timed out, cancelled, failed): undoes what
//              its waiting wrote at the server (the feature's hook: a fair waiter's queue
//              entry, a waiting writer's mark), once. An attempt in flight on another
//              thread runs it as that attempt ends instead, after its own writes: an entry
//              it writes after its caller gave up would otherwise hold the queue back for
//              up to a ttl.
//
// attempt() is begin_attempt(), the time check, the feature's claim and end_attempt().
// A caller that sends the claim's write itself (an event loop awaiting its driver) runs
// those parts itself: begin_attempt(/*round_trips=*/false) starts an attempt only when
// its time check needs no round trip; the caller claims, then end_attempt() with what
// it got, or fail_attempt() when the claim failed or was abandoned.
//
// Every final step is counted once in the acquire metrics, with the run's duration. A
// caller's mistake (InvalidArgument, from the constructor) is not counted.
//
// Thread safety: next() and cancel() may be called from any thread while an attempt()
// runs on another; attempts must not overlap (a second concurrent attempt() only reads
// the step). No lock is held across the claim.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

namespace mongoelector {

class Clock;
class HoldState;

// What one attempt of a feature returns when it took the hold: the token the caller
// gets (a lock with lazy_token: 0 while deferred) and the fence of the hold installed
// (what release_if names).
struct Claimed {
  std::int64_t token = 0;
  std::int64_t fence = 0;
};

struct AcquireStep {
  // Failed: an attempt threw (the error went to that attempt's caller; result() throws
  // it again).
  enum class Kind { TryNow, Wait, Acquired, Held, TimedOut, Cancelled, Failed };
  Kind kind = Kind::TryNow;
  std::int64_t wake_mono = 0;  // Wait: the monotonic ms to attempt again at
  std::int64_t token = 0;      // Acquired
  bool final() const { return kind != Kind::TryNow && kind != Kind::Wait; }
};

struct AcquireOptions {
  bool blocking = true;
  std::optional<double> timeout_s;
  double step_s = 0.25;
  bool timeparanoid = true;
};

class AcquireRun {
 public:
  using Attempt = std::function<std::optional<Claimed>()>;    // nullopt: held
  using HeldMessage = std::function<std::string()>;           // "KEY owned by ..."
  using ReleaseIf = std::function<bool(std::int64_t fence)>;  // fenced release of a claim

  // Validates the options (InvalidArgument: a timeout without blocking, a negative or
  // non-finite timeout or step). The run starts now, on the state's clock.
  AcquireRun(HoldState& state, const AcquireOptions& options, Attempt attempt, HeldMessage held,
             ReleaseIf release_if);
  AcquireRun(const AcquireRun&) = delete;
  AcquireRun& operator=(const AcquireRun&) = delete;

  // The wait after a refused attempt, given the step (fair queueing: a waiter far back in
  // its key's queue looks less often, fair_queue.h). Default: the step. Set before the
  // run is driven.
  using Pace = std::function<std::int64_t(std::int64_t step_ms)>;
  void set_pace(Pace pace) { pace_ = std::move(pace); }
  // What give_up() undoes (round trips; errors are the hook's to log). Default: nothing.
  // Set before the run is driven.
  using UndoWait = std::function<void()>;
  void set_undo_wait(UndoWait undo) { undo_wait_ = std::move(undo); }

  AcquireStep next();
  AcquireStep attempt();
  AcquireStep cancel();

  // attempt() in parts (see above). begin_attempt: nullopt when an attempt has begun
  // (end_attempt or fail_attempt must follow; with round_trips, after the time check
  // when check_time() says so); otherwise the step to act on instead -- TryNow when
  // this attempt needs round trips that were not allowed (run attempt() on a thread).
  std::optional<AcquireStep> begin_attempt(bool round_trips);
  bool check_time() const;  // the begun attempt must run the time check first
  // The begun attempt's outcome: the hold it took, or nullopt when held by another, with
  // `held` naming the holder when not blocking. As attempt()'s step.
  AcquireStep end_attempt(std::optional<Claimed> got, std::string held);
  // The begun attempt failed (`error`; result() throws it) or was abandoned after
  // cancel(): nothing it may have taken is reported.
  void fail_attempt(std::exception_ptr error);

  // The run ended Acquired but its outcome reached nobody (its caller was cancelled
  // before it resumed): releases that hold, fenced by its fence (a newer hold is left
  // alone). Round trips. Whether it released; false for any other final step.
  bool abandon();

  // The caller stops waiting without the hold (the blocking driver on any outcome but
  // Acquired; an event loop whose task was cancelled or failed): ends the run as cancel()
  // does when it has not ended, then runs the undo hook -- round trips, so call it where
  // blocking is allowed -- unless the run acquired (the claim removed what it wrote) or
  // the hook ran already. With an attempt in flight, that attempt runs the hook when it
  // ends (attempt() does; a caller driving attempts in parts calls give_up() again after
  // end_attempt or fail_attempt). The final step.
  AcquireStep give_up();

  // The final step as the blocking API reports it: the token, or LockExists (Held),
  // AcquireTimeout (TimedOut), Cancelled. Not final yet: std::logic_error.
  std::int64_t result() const;
  const std::string& held_message() const { return held_message_; }
  std::string timeout_message() const;
  std::string cancelled_message() const;
  // Monotonic ms on the run's clock (what Wait's wake_mono is measured on).
  std::int64_t now_ms() const;

 private:
  AcquireStep next_locked(std::int64_t now);    // mu_ held
  AcquireStep finish_locked(AcquireStep step);  // mu_ held: the final step, counted once
  // Releases a hold nobody will take (a cancelled acquire's), fenced, and logs it.
  bool release_unclaimed(std::int64_t fence);
  // The undo hook, when give_up() asked for it and no attempt is in flight (once).
  void undo_wait_if_due();

  HoldState& state_;
  Clock& clock_;
  const AcquireOptions options_;
  const Attempt attempt_;
  const HeldMessage held_;
  const ReleaseIf release_if_;
  const std::int64_t start_;
  std::int64_t step_ms_ = 1;
  Pace pace_;  // empty: the step
  UndoWait undo_wait_;

  mutable std::mutex mu_;  // never held across a claim
  std::int64_t count_ = 0;
  std::optional<std::int64_t> wake_;  // waiting until
  std::optional<AcquireStep> final_;
  std::exception_ptr failed_;                   // Failed: what the attempt threw
  std::optional<std::int64_t> acquired_fence_;  // Acquired: the hold's fence
  bool in_flight_ = false;
  bool time_checked_ = false;
  bool check_time_ = false;  // the attempt in flight runs the time check first
  bool undo_due_ = false;    // give_up() asked; runs once no attempt is in flight
  bool undone_ = false;      // the undo hook ran
  std::string held_message_;
};

}  // namespace mongoelector
