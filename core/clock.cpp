#include "clock.h"

#include <chrono>
#include <thread>

namespace mongoelector {

namespace {
using std::chrono::duration_cast;
using std::chrono::milliseconds;
}  // namespace

std::int64_t SystemClock::mono_ms() {
  return duration_cast<milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::int64_t SystemClock::wall_ms() {
  return duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

bool SystemClock::wait_until(std::unique_lock<std::mutex>& lk, std::condition_variable& cv,
                             std::int64_t deadline_mono_ms, const std::function<bool()>& wake) {
  auto deadline = std::chrono::steady_clock::time_point(milliseconds(deadline_mono_ms));
  return cv.wait_until(lk, deadline, wake);
}

void SystemClock::sleep_ms(std::int64_t ms) {
  if (ms > 0) std::this_thread::sleep_for(milliseconds(ms));
}

bool Clock::try_lock_until(std::timed_mutex& m, std::int64_t deadline_mono_ms) {
  return m.try_lock_until(std::chrono::steady_clock::time_point(milliseconds(deadline_mono_ms)));
}

std::thread start_clock_thread(Clock& clock, std::function<void()> body) {
  clock.worker_spawning();
  try {
    return std::thread([&clock, body = std::move(body)] {
      clock.worker_begins();
      body();
    });
  } catch (...) {
    clock.worker_spawn_failed();
    throw;
  }
}

std::shared_ptr<Clock> system_clock() {
  static std::shared_ptr<Clock> clock = std::make_shared<SystemClock>();
  return clock;
}

std::int64_t FakeClock::mono_ms() {
  std::lock_guard<std::mutex> g(mu_);
  std::int64_t now = mono_;
  mono_ += tick_;
  wall_ += tick_;
  return now;
}

void FakeClock::set_tick_ms(std::int64_t ms) {
  std::lock_guard<std::mutex> g(mu_);
  tick_ = ms;
}

std::int64_t FakeClock::wall_ms() {
  std::lock_guard<std::mutex> g(mu_);
  return wall_;
}

bool FakeClock::wait_until(std::unique_lock<std::mutex>& lk, std::condition_variable&,
                           std::int64_t deadline_mono_ms, const std::function<bool()>& wake) {
  if (wake()) return true;
  std::int64_t now;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (deadline_mono_ms > mono_) {
      wall_ += deadline_mono_ms - mono_;
      mono_ = deadline_mono_ms;
    }
    now = mono_;
  }
  // The caller's mutex is released while timers run: they may need it.
  lk.unlock();
  run_due(now);
  lk.lock();
  return false;
}

void FakeClock::sleep_ms(std::int64_t ms) { advance(ms); }

bool FakeClock::try_lock_until(std::timed_mutex& m, std::int64_t) {
  return m.try_lock_for(std::chrono::seconds(1));
}

void FakeClock::advance(std::int64_t ms) {
  std::int64_t now;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (ms > 0) {
      mono_ += ms;
      wall_ += ms;
    }
    now = mono_;
  }
  run_due(now);  // outside mu_: tasks read the clock
}

void FakeClock::run_due(std::int64_t now) {
  timer_.run_due(now);
  dispatcher_.run_pending();
}

void FakeClock::jump_wall(std::int64_t ms) {
  std::lock_guard<std::mutex> g(mu_);
  wall_ += ms;
}

}  // namespace mongoelector
