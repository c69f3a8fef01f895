// The loss of a hold kept alive in the background by a keep-alive lease (lease.h), of a
// lock or a semaphore slot alike. One rule, one place.
//
//  * LOST IS READ FROM THE CLOCK, not set by a thread (protocol notes, "derive, don't
//    flag"): lost() is true once this host's monotonic clock reaches the renew deadline
//    (lease end - margin), or once a renewal found the hold no longer ours, whatever any
//    thread of the library is doing. A slow on_lost of another hold, a busy timer, or a
//    fork()ed child that has none of the library's threads cannot keep it reading "held"
//    (invariant 3: the holder stops before anyone can take over). wait_lost() waits on
//    the clock WITH that deadline: it wakes there by itself.
//  * Loss is final. A renewal that returns after the deadline extends nothing (the
//    renewer then releases that hold, fenced); close() after the deadline leaves the
//    lease lost, not released.
//  * The ANNOUNCEMENT follows from the clock's deadline timer: its task at the deadline
//    (at once, for a hold found taken) strands the hold, so it is given up locally before
//    anyone hears of the loss, and hands the log line and on_lost to the clock's callback
//    dispatcher (callback_dispatcher.h). No user code runs on the timer's thread.
//  * on_lost runs exactly once, never under a library lock. close() announces a loss the
//    timer has not announced yet, and returns only after on_lost has run (running it
//    itself if it is still queued), so no callback comes after close().
//  * The lost hold is released (fenced) only from its lease end on: until then the
//    holder's own step-down may still be under way (a command's grace between SIGTERM and
//    SIGKILL), and a release would let another holder start during it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "../clock.h"
#include "../hold/holdable.h"
#include "../log.h"

namespace mongoelector {

class HoldLoss : public std::enable_shared_from_this<HoldLoss> {
 public:
  struct Hooks {
    std::function<void()> strand;  // gives the hold up locally (Holdable::strand)
    std::function<void(LogLevel, const std::string&, LogEvent)> log;  // with the hold's fields
    std::string what;  // "keep-alive lease of KEY (fence F)", for messages
  };
  static constexpr const char* kDeadlinePassed =
      "its renew deadline passed without a successful renewal";

  HoldLoss(std::shared_ptr<Clock> clock, std::int64_t ttl_ms, std::function<void()> on_lost,
           Hooks hooks);
  HoldLoss(const HoldLoss&) = delete;
  HoldLoss& operator=(const HoldLoss&) = delete;

  // Watches a hold whose lease ends at host mono `lease_end`, with `margin`. Once, first.
  void start(std::int64_t lease_end, std::int64_t margin);
  // A started HoldLoss for the hold `fence` of `holder` (its strand(fence) and
  // log_fields(event, fence)); `what` names it in messages.
  static std::shared_ptr<HoldLoss> watch(const std::shared_ptr<Clock>& clock, std::int64_t ttl_ms,
                                         std::function<void()> on_lost,
                                         const std::shared_ptr<Holdable>& holder,
                                         std::int64_t fence, const std::string& what,
                                         std::int64_t lease_end, std::int64_t margin);

  // A renewal step at `now`: closed, lost (its deadline passed, or declared), or live
  // with its deadline.
  enum class Phase { Closed, Lost, Live };
  struct View {
    Phase phase;
    std::int64_t deadline;
  };
  View view(std::int64_t now);
  // A renewal returned: the hold's new lease end, nullopt if it is no longer ours. Lost
  // or closed meanwhile (by the clock too: the reply came after the deadline), the lease
  // stays as it is.
  enum class Outcome { Extended, NowLost, WasLost, Closed };
  Outcome renewed(std::optional<std::int64_t> lease_end, std::int64_t margin,
                  const std::string& not_ours);
  // A loss found by the renewer (hold taken, server clock jump): lost now, announced at once.
  void declare_lost(const std::string& why);
  // After loss: releases what is left of the hold with `release` (fenced) from its lease
  // end on. Returns the next step (nullopt: done).
  std::optional<std::int64_t> clean_up(std::int64_t now, const std::function<void()>& release,
                                       std::int64_t retry_ms);

  bool lost();
  std::string reason();  // "" while not lost
  std::int64_t renew_deadline();
  // Until lost or `timeout_ms` pass (nullopt: forever). True if lost.
  bool wait_lost(std::optional<std::int64_t> timeout_ms);
  // Stops watching (a deadline already passed: the lease stays lost); announces a loss
  // not announced yet; waits for on_lost. Returns whether lost; nullopt if already closed.
  std::optional<bool> close();

 private:
  bool lost_locked(std::int64_t now);  // marks a passed deadline as the loss
  void mark_lost_locked(const std::string& why);
  void arm_locked(std::int64_t at);
  void on_timer();
  // mu_ held, lost and not announced: strands the hold; the job that tells.
  std::shared_ptr<CallbackJob> announce_locked();

  const std::shared_ptr<Clock> clock_;
  const std::int64_t ttl_ms_;
  const std::function<void()> on_lost_;
  const Hooks hooks_;

  std::mutex mu_;
  std::condition_variable cv_;  // lost
  bool lost_ = false;
  bool closed_ = false;
  bool announced_ = false;
  std::string reason_;
  std::int64_t lease_end_ = 0;
  std::int64_t deadline_ = std::numeric_limits<std::int64_t>::max();
  std::int64_t clean_up_until_ = 0;
  DeadlineTimer::Id task_ = 0;
  std::shared_ptr<CallbackJob> job_;  // the announcement, once made
};

}  // namespace mongoelector
