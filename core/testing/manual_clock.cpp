#include "manual_clock.h"

#include <algorithm>
#include <chrono>
#include <list>
#include <thread>
#include <utility>
#include <vector>

#include "../exceptions.h"
#include "../lease/keepalive.h"
#include "../log.h"

namespace mongoelector {

namespace {
// A waiter re-reads the clock this often in real time: a notify that raced with its
// wait is late by at most this much, never lost.
constexpr auto kRecheck = std::chrono::milliseconds(2);
}  // namespace

namespace detail {
struct ManualClockState {
  struct Waiter {
    std::condition_variable* cv;
    std::int64_t deadline;
    std::uint64_t checked = 0;  // the settle epoch of its last look at its wake condition
  };

  std::mutex mu;
  std::condition_variable changed;  // a waiter looked, a worker began, waited or ended
  std::int64_t mono = 0;
  std::int64_t wall = 0;
  std::uint64_t epoch = 0;
  std::list<Waiter> waiters;
  int spawning = 0;  // worker threads spawned that have not begun
  int running = 0;   // worker threads begun and not waiting on the clock
  std::int64_t settle_timeout_ms = 10000;
  std::uint64_t seeds = 0;  // handed out by next_random_seed()

  void wake_all_locked() {
    for (auto& w : waiters) w.cv->notify_all();
  }
};
}  // namespace detail

namespace {
// The clocks this thread counts for: as a worker (for its whole life) or while it is
// inside library calls (ClockCall); it stops counting as running when it ends.
struct WorkerMarks {
  struct Mark {
    const void* clock;
    std::weak_ptr<detail::ManualClockState> state;
    bool worker = false;
    int calls = 0;
  };
  std::vector<Mark> marks;

  Mark* find(const void* s) {
    for (auto& m : marks)
      if (m.clock == s) return &m;
    return nullptr;
  }
  bool counts_for(const void* s) {
    const Mark* m = find(s);
    return m != nullptr && (m->worker || m->calls > 0);
  }
  ~WorkerMarks() {
    for (auto& m : marks) {
      if (!m.worker && m.calls == 0) continue;
      if (auto s = m.state.lock()) {
        std::lock_guard<std::mutex> g(s->mu);
        --s->running;
        s->changed.notify_all();
      }
    }
  }
};
thread_local WorkerMarks t_marks;
}  // namespace

// Deadline tasks run on the advancing thread; the earliest one is a step of advance().
class ManualClock::Timer final : public DeadlineTimer {
 public:
  std::optional<std::int64_t> earliest() {
    std::lock_guard<std::mutex> g(mu_);
    std::int64_t t;
    if (next_deadline(&t)) return t;
    return std::nullopt;
  }
};

ManualClock::ManualClock(std::int64_t wall_start_ms, std::int64_t settle_timeout_ms)
    : s_(std::make_shared<Shared>()), timer_(std::make_unique<Timer>()) {
  if (settle_timeout_ms <= 0) throw InvalidArgument("settle timeout must be positive");
  s_->wall = wall_start_ms;
  s_->settle_timeout_ms = settle_timeout_ms;
  Renewer::use_for(this, [this]() -> Renewer& { return own_renewer(); });
}

ManualClock::~ManualClock() {
  Renewer::stop_using_for(this);
  std::lock_guard<std::mutex> g(renewer_mu_);
  dispatcher_.reset();
  renewer_.reset();
}

std::int64_t ManualClock::mono_ms() {
  std::lock_guard<std::mutex> g(s_->mu);
  return s_->mono;
}

std::int64_t ManualClock::wall_ms() {
  std::lock_guard<std::mutex> g(s_->mu);
  return s_->wall;
}

DeadlineTimer& ManualClock::timer() { return *timer_; }

CallbackDispatcher& ManualClock::dispatcher() {
  std::lock_guard<std::mutex> g(renewer_mu_);
  if (!dispatcher_) dispatcher_ = std::make_unique<ThreadedDispatcher>(*this);
  return *dispatcher_;
}

Renewer& ManualClock::own_renewer() {
  std::lock_guard<std::mutex> g(renewer_mu_);
  if (!renewer_) {
    // Not owning: the renewer lives inside this clock.
    renewer_ = std::make_unique<Renewer>(std::shared_ptr<Clock>(std::shared_ptr<Clock>(), this), 1);
  }
  return *renewer_;
}

std::optional<std::uint64_t> ManualClock::next_random_seed() {
  std::lock_guard<std::mutex> g(s_->mu);
  return 0x9E3779B97F4A7C15ULL * ++s_->seeds;
}

void ManualClock::worker_spawning() {
  std::lock_guard<std::mutex> g(s_->mu);
  ++s_->spawning;
}

void ManualClock::worker_spawn_failed() {
  std::lock_guard<std::mutex> g(s_->mu);
  --s_->spawning;
  s_->changed.notify_all();
}

void ManualClock::worker_begins() {
  t_marks.marks.push_back({s_.get(), s_, true, 0});
  std::lock_guard<std::mutex> g(s_->mu);
  --s_->spawning;
  ++s_->running;
  s_->changed.notify_all();
}

void ManualClock::call_begins() {
  WorkerMarks::Mark* m = t_marks.find(s_.get());
  if (m == nullptr) {
    t_marks.marks.push_back({s_.get(), s_, false, 0});
    m = &t_marks.marks.back();
  }
  if (m->worker || m->calls++ > 0) return;  // already counted
  std::lock_guard<std::mutex> g(s_->mu);
  ++s_->running;
}

void ManualClock::call_ends() {
  WorkerMarks::Mark* m = t_marks.find(s_.get());
  if (m == nullptr || m->worker || m->calls == 0 || --m->calls > 0) return;
  t_marks.marks.erase(t_marks.marks.begin() + (m - t_marks.marks.data()));
  std::lock_guard<std::mutex> g(s_->mu);
  --s_->running;
  s_->changed.notify_all();
}

bool ManualClock::wait_until(std::unique_lock<std::mutex>& lk, std::condition_variable& cv,
                             std::int64_t deadline_mono_ms, const std::function<bool()>& wake) {
  if (wake()) return true;
  const bool worker = t_marks.counts_for(s_.get());
  std::list<detail::ManualClockState::Waiter>::iterator me;
  {
    std::lock_guard<std::mutex> g(s_->mu);
    if (s_->mono >= deadline_mono_ms) return false;
    me = s_->waiters.insert(s_->waiters.end(),
                            detail::ManualClockState::Waiter{&cv, deadline_mono_ms});
    if (worker) --s_->running;
  }
  bool woken = false;
  for (;;) {
    // The wake condition is read under the caller's lock (as its notifier writes it), and
    // reported under the clock's: a settle sees every look that follows its epoch.
    woken = wake();
    bool due;
    {
      std::lock_guard<std::mutex> g(s_->mu);
      due = woken || s_->mono >= deadline_mono_ms;
      if (due) {
        s_->waiters.erase(me);
        if (worker) ++s_->running;
      } else {
        me->checked = s_->epoch;
      }
      s_->changed.notify_all();
    }
    if (due) return woken;
    cv.wait_for(lk, kRecheck);
  }
}

void ManualClock::sleep_ms(std::int64_t ms) {
  std::mutex m;
  std::condition_variable cv;
  std::unique_lock<std::mutex> lk(m);
  wait_until(lk, cv, mono_ms() + std::max<std::int64_t>(0, ms), [] { return false; });
}

bool ManualClock::try_lock_until(std::timed_mutex& m, std::int64_t) {
  return m.try_lock_for(std::chrono::milliseconds(s_->settle_timeout_ms));
}

bool ManualClock::settle_once() {
  std::unique_lock<std::mutex> lk(s_->mu);
  const std::uint64_t epoch = ++s_->epoch;
  s_->wake_all_locked();
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(s_->settle_timeout_ms);
  const bool idle = s_->changed.wait_until(lk, give_up, [&] {
    if (s_->spawning > 0 || s_->running > 0) return false;
    for (const auto& w : s_->waiters)
      if (w.checked < epoch) return false;
    return true;
  });
  if (!idle) {
    log(LogLevel::Warning, "ManualClock: " + std::to_string(s_->running + s_->spawning) +
                               " thread(s) still busy after " +
                               std::to_string(s_->settle_timeout_ms) +
                               " ms of real time (blocked outside the clock?)");
  }
  return idle;
}

bool ManualClock::settle() {
  bool ok = true;
  for (;;) {
    ok = settle_once() && ok;
    const std::int64_t now = mono_ms();
    auto due = timer_->earliest();
    if (!due || *due > now) return ok;
    timer_->run_due(now);  // may wake threads: settle again
  }
}

std::optional<std::int64_t> ManualClock::next_deadline_after(std::int64_t now) {
  std::optional<std::int64_t> next = timer_->earliest();
  std::lock_guard<std::mutex> g(s_->mu);
  for (const auto& w : s_->waiters) {
    if (w.deadline > now && (!next || w.deadline < *next)) next = w.deadline;
  }
  return next;
}

bool ManualClock::advance(std::int64_t ms) {
  if (ms < 0)
    throw InvalidArgument("a clock cannot go back (advance by " + std::to_string(ms) + " ms)");
  bool ok = settle();
  const std::int64_t target = mono_ms() + ms;
  for (;;) {
    const std::int64_t now = mono_ms();
    std::int64_t step = target;
    if (auto next = next_deadline_after(now)) step = std::min(step, *next);
    {
      std::lock_guard<std::mutex> g(s_->mu);
      s_->wall += step - s_->mono;
      s_->mono = step;
    }
    ok = settle() && ok;
    if (step >= target) return ok;
  }
}

std::size_t ManualClock::waiters() {
  std::lock_guard<std::mutex> g(s_->mu);
  return s_->waiters.size();
}

bool ManualClock::block_until_waiters(std::size_t n, std::int64_t real_timeout_ms) {
  std::unique_lock<std::mutex> lk(s_->mu);
  return s_->changed.wait_for(lk,
                              std::chrono::milliseconds(std::max<std::int64_t>(0, real_timeout_ms)),
                              [&] { return s_->waiters.size() >= n; });
}

void ManualClock::jump_wall(std::int64_t ms) {
  std::lock_guard<std::mutex> g(s_->mu);
  s_->wall += ms;
}

}  // namespace mongoelector
