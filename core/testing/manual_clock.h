// ManualClock: the testing kit's fake clock (README, "Testing your code"). Users attach
// one to a memory:// backend; every locker, lease, elector, semaphore and observer made
// on that backend then runs on it, and a test drives renewals, expiry and elections
// deterministically, in milliseconds, with no sleeps.
//
// Time moves only through advance(). The library's own threads (election loops, the
// clock's renewer and callback dispatcher, observers) still run for real, but every wait
// of theirs is on this clock. advance(ms) walks time forward to each pending deadline in turn (a renewal due,
// a lease's renew deadline, an elector's next poll, a deadline-timer task) up to now+ms;
// at each step it runs the due timer tasks on the calling thread, wakes the threads whose
// wait ended (the callbacks those tasks announced run on the clock's own dispatcher
// threads), and waits, in real time, until all of them are idle again before the next
// step. So advance(60 s) on a lease of ttl 15 s renews it 12 times, as 60 real seconds
// would, and what an election does within a ttl has been done when advance(ttl) returns.
//
// "Idle" means: every thread started through start_clock_thread() is waiting on this
// clock, and has looked at its wake condition since the last step. A thread blocked on
// anything else (a callback waiting for the advancing thread, a hung call) cannot
// settle: advance() then returns false after settle_timeout_ms of real time.
//
// Every other wait on this clock (a blocking acquire's pause, wait_lost(timeout)) is in
// fake time too: it returns when advance() reaches its deadline, so call those from a
// thread other than the one that advances, or with a zero timeout.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "../clock.h"
#include "../deadline_timer.h"

namespace mongoelector {

class Renewer;  // lease/keepalive.h: this clock's own, registered with Renewer::use_for

namespace detail {
struct ManualClockState;
}

class ManualClock final : public Clock {
 public:
  // wall_start_ms: the wall clock (and so the memory backend's server clock) at the
  // start; the monotonic clock starts at 0.
  explicit ManualClock(std::int64_t wall_start_ms, std::int64_t settle_timeout_ms = 10000);
  ~ManualClock() override;
  ManualClock(const ManualClock&) = delete;
  ManualClock& operator=(const ManualClock&) = delete;

  std::int64_t mono_ms() override;
  std::int64_t wall_ms() override;
  bool wait_until(std::unique_lock<std::mutex>& lk, std::condition_variable& cv,
                  std::int64_t deadline_mono_ms, const std::function<bool()>& wake) override;
  void sleep_ms(std::int64_t ms) override;
  DeadlineTimer& timer() override;
  CallbackDispatcher& dispatcher() override;
  // A mutex held by a running thread is waited for in real time (up to the settle bound).
  bool try_lock_until(std::timed_mutex& m, std::int64_t deadline_mono_ms) override;
  std::optional<std::uint64_t> next_random_seed() override;
  void worker_spawning() override;
  void worker_spawn_failed() override;
  void worker_begins() override;
  void call_begins() override;
  void call_ends() override;

  // Moves time forward by ms (>= 0), one pending deadline at a time (see above). False if
  // the threads did not settle at some step within the real-time bound.
  bool advance(std::int64_t ms);
  // Waits until the threads are idle and runs the timer tasks already due (what advance(0)
  // does). False on the real-time bound.
  bool settle();
  // Steps only the wall clock (and so the memory backend's server clock), as NTP would:
  // intervals measured on the monotonic clock do not change.
  void jump_wall(std::int64_t ms);
  // How many threads wait on this clock now (the library's and any other: a blocking
  // acquire's pause, a wait_lost with a timeout).
  std::size_t waiters();
  // Blocks, in real time, until at least `n` threads wait on this clock (a test's own
  // thread has reached its blocking call: only then may advance() pass its deadline);
  // false after `real_timeout_ms`.
  bool block_until_waiters(std::size_t n, std::int64_t real_timeout_ms);

 private:
  using Shared = detail::ManualClockState;
  class Timer;
  std::optional<std::int64_t> next_deadline_after(std::int64_t now);
  bool settle_once();
  // The renewer of leases on this clock (Renewer::use_for), made on first use.
  Renewer& own_renewer();

  std::shared_ptr<Shared> s_;
  std::unique_ptr<Timer> timer_;
  std::mutex renewer_mu_;
  std::unique_ptr<Renewer> renewer_;  // destroyed first: its thread waits on this clock
  std::unique_ptr<ThreadedDispatcher> dispatcher_;  // as the renewer (same mutex)
};

}  // namespace mongoelector
