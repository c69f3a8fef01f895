// Time sources. Everything in core/ reads time through Clock so that protocol and
// election timing are unit-tested with FakeClock, without real sleeps.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "callback_dispatcher.h"
#include "deadline_timer.h"

namespace mongoelector {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic milliseconds: used for every interval (leases, deadlines, timeouts).
  virtual std::int64_t mono_ms() = 0;
  // Host wall clock, ms since the Unix epoch: used only to estimate the server offset
  // and to stamp status documents.
  virtual std::int64_t wall_ms() = 0;
  // Blocks until mono_ms() >= deadline or until `wake()` returns true when checked
  // after a notify on `cv` (guarded by `mu`, which the caller holds). Returns
  // wake(). A FakeClock jumps straight to the deadline.
  virtual bool wait_until(std::unique_lock<std::mutex>& lk, std::condition_variable& cv,
                          std::int64_t deadline_mono_ms, const std::function<bool()>& wake) = 0;
  // Sleeps without a condition (blocking acquire's step).
  virtual void sleep_ms(std::int64_t ms) = 0;
  // Blocks until `done()` holds (checked after a notify on `cv`, under the caller's `lk`)
  // for work another thread of the library is finishing: a renewal in flight, a callback
  // being run. That thread may itself wait on this clock (a storage call's timeout, a
  // slow callback), so a clock whose threads run one at a time (the simulation's) must
  // let time move meanwhile. Default: a plain wait on `cv`.
  virtual void wait_for_work(std::unique_lock<std::mutex>& lk, std::condition_variable& cv,
                             const std::function<bool()>& done) {
    cv.wait(lk, done);
  }
  // Timers on this clock's mono time. Default: the process-wide steady-clock timer.
  virtual DeadlineTimer& timer() { return system_deadline_timer(); }
  // Where user callbacks announced by those timers run (callback_dispatcher.h): never on
  // the timer's thread. Default: the process-wide dispatcher.
  virtual CallbackDispatcher& dispatcher() { return system_callback_dispatcher(); }
  // Locks `m` unless that would take past `deadline_mono_ms`; false if it did not.
  // Default: std::timed_mutex::try_lock_until on the steady clock.
  virtual bool try_lock_until(std::timed_mutex& m, std::int64_t deadline_mono_ms);
  // A seed for the jitter of the next elector made on this clock; nullopt: a random one.
  // A ManualClock hands out a fixed sequence, so that a test's election timeline (who
  // claims first, and when) is the same at every run.
  virtual std::optional<std::uint64_t> next_random_seed() { return std::nullopt; }
  // Threads whose work runs on this clock's time (election loops, renewers, observers)
  // are started through start_clock_thread(), which calls these: a ManualClock counts
  // them, to know when all of them are idle. No-ops on the other clocks.
  virtual void worker_spawning() {}
  virtual void worker_spawn_failed() {}
  virtual void worker_begins() {}
  // A user's thread is inside a library call that may wait on this clock (a blocking
  // acquire, wait_lost): while it is, a ManualClock counts it with its workers, so that
  // advance() waits for it to act on each step instead of racing it. See ClockCall.
  virtual void call_begins() {}
  virtual void call_ends() {}
};

// Marks a library call that may wait on `clock` (see Clock::call_begins).
class ClockCall {
 public:
  explicit ClockCall(Clock& clock) : clock_(clock) { clock_.call_begins(); }
  ~ClockCall() { clock_.call_ends(); }
  ClockCall(const ClockCall&) = delete;
  ClockCall& operator=(const ClockCall&) = delete;

 private:
  Clock& clock_;
};

// Starts a thread that runs `body` on `clock`'s time (see Clock::worker_spawning).
std::thread start_clock_thread(Clock& clock, std::function<void()> body);

class SystemClock final : public Clock {
 public:
  std::int64_t mono_ms() override;
  std::int64_t wall_ms() override;
  bool wait_until(std::unique_lock<std::mutex>& lk, std::condition_variable& cv,
                  std::int64_t deadline_mono_ms, const std::function<bool()>& wake) override;
  void sleep_ms(std::int64_t ms) override;
};

std::shared_ptr<Clock> system_clock();

// Deterministic clock for tests: time moves only through advance() and through sleeps
// and waits, which jump to their deadline at once. Timers run, on the thread that
// moves the time, as soon as it reaches their deadline, and then the callbacks they
// handed to the dispatcher.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(std::int64_t wall_start_ms = 1700000000000, std::int64_t mono_start_ms = 1000)
      : wall_(wall_start_ms), mono_(mono_start_ms) {}
  std::int64_t mono_ms() override;
  std::int64_t wall_ms() override;
  bool wait_until(std::unique_lock<std::mutex>& lk, std::condition_variable& cv,
                  std::int64_t deadline_mono_ms, const std::function<bool()>& wake) override;
  void sleep_ms(std::int64_t ms) override;
  void advance(std::int64_t ms);
  // Steps only the wall clock, as NTP would: intervals must not change.
  void jump_wall(std::int64_t ms);
  // Every mono_ms() read moves time on by `ms` afterwards: makes the order of reads
  // observable (code that reads the clock twice sees two instants).
  void set_tick_ms(std::int64_t ms);
  DeadlineTimer& timer() override { return timer_; }
  CallbackDispatcher& dispatcher() override { return dispatcher_; }
  // Fake time cannot measure a real wait: tries for up to one second of real time.
  bool try_lock_until(std::timed_mutex& m, std::int64_t deadline_mono_ms) override;

 private:
  // Runs due timers, then the callbacks they posted, on the calling thread.
  void run_due(std::int64_t now);

  DeadlineTimer timer_;
  CallbackDispatcher dispatcher_;  // thread-less
  std::mutex mu_;
  std::int64_t tick_ = 0;
  std::int64_t wall_;
  std::int64_t mono_;
};

}  // namespace mongoelector
