// Deterministic fake time for the simulation: one Scheduler per schedule, one NodeClock
// per simulated node (process).
//
// Every thread that runs library code (election loops, renewers, each node's deadline
// timer, the workload's actors) is a "sim thread": it is started through
// start_clock_thread() on its node's clock and then runs only when the driver grants it
// the baton. Exactly one sim thread runs at a time; it runs until it waits on the clock
// (every wait of the library goes through Clock::wait_until / sleep_ms / wait_for_work)
// or exits. The driver picks the next runnable thread (deadline reached, or its wake
// condition true -- evaluated under the waiter's own mutex, so a notify is never needed
// and never lost) in an order drawn from the schedule's seed. Time moves only in the driver, to the next
// instant something is due. So a schedule's execution depends on its seed alone. The
// driver's work between two instants (checks, moving time, the server applying calls)
// is done by the sim thread that finds nothing runnable, acting as the driver
// (idle_step): a step then costs one handoff instead of two.
//
// Why not the testing kit's ManualClock: it runs every deadline-timer task on the
// advancing thread (so a slow loss callback could not delay other leases of one process
// as the real one timer thread does), wakes every waiter at every step (slow with 30
// threads), and lets woken threads run concurrently (their order is then the OS's).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "callback_dispatcher.h"
#include "clock.h"
#include "deadline_timer.h"
#include "lease/keepalive.h"

namespace sim {

namespace me = mongoelector;

inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}
inline std::uint64_t hash64(std::uint64_t a, std::uint64_t b, std::uint64_t c = 0,
                            std::uint64_t d = 0) {
  return mix64(mix64(mix64(mix64(a) ^ b) ^ c) ^ d);
}

// A small counter-based generator (splitmix64).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next() { return mix64(s_++ * 0xD1B54A32D192ED03ULL); }
  // Uniform in [lo, hi] (hi >= lo).
  std::int64_t range(std::int64_t lo, std::int64_t hi) {
    if (hi <= lo) return lo;
    return lo + static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(hi - lo + 1));
  }
  double unit() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  bool chance(double p) { return unit() < p; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<std::size_t>(next() % v.size())];
  }

 private:
  std::uint64_t s_;
};

// A sim thread blocked in a real-time wait (a mutex or condition variable outside the
// clock) while holding the baton: the schedule cannot go on.
struct Stall : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Scheduler;

struct SimThread {
  std::uint64_t id = 0;
  std::string label;
  int node = -1;
  Scheduler* sched = nullptr;
  // Guarded by the scheduler's mutex.
  bool waiting = false;  // in a clock wait (else: registered and ready, or running)
  std::mutex* lk_mutex = nullptr;
  const std::function<bool()>* wake = nullptr;  // null: a deadline-only wait
  std::int64_t deadline = 0;
  std::atomic<int> go{0};  // 1: granted the baton (a futex word: no mutex on the handoff)
  // Set by the storage wrapper while this thread is inside a storage call.
  std::atomic<bool> in_call{false};
  // Its process crashed (a fair actor's instance, actors.cpp): its storage calls are never
  // sent from then on (they fail at once), until the actor starts as a new process.
  bool crashed = false;
  std::string role;          // label without its node (grants by role)
  std::uint64_t grants = 0;  // guarded by the scheduler's mutex
};

class Scheduler {
 public:
  Scheduler(std::uint64_t seed, std::int64_t wall0, bool shuffle, std::int64_t stall_ms);
  ~Scheduler();

  std::int64_t mono() const { return mono_.load(std::memory_order_acquire); }
  std::int64_t wall() const { return wall_.load(std::memory_order_acquire); }
  // Steps the server's clock (and the hosts' wall clocks, which follow it).
  void jump_wall(std::int64_t delta) { wall_.fetch_add(delta); }
  // Driver: time moves to `t` (>= now).
  void set_now(std::int64_t t);

  // ---- sim-thread side (through NodeClock) ----
  void spawning(int node);
  void spawn_failed();
  void begins(int node);
  // The running thread waits (real time) until the threads it started have registered,
  // so that registration order, and so thread ids, follow the order of spawning.
  void await_registered();
  // The label the next thread spawned by `node` gets.
  void set_spawn_label(int node, const std::string& label);
  bool wait(int node, std::unique_lock<std::mutex>& lk, std::int64_t deadline,
            const std::function<bool()>* wake);
  static SimThread* self();
  // Label of the calling thread ("driver" outside sim threads).
  static std::string self_label();

  // ---- driver side ----
  // Runs runnable threads, one at a time, until none is runnable at this instant.
  // Throws Stall when a running thread does not come back within the real-time bound.
  void run_instant();
  // Earliest deadline after now among waiting threads.
  std::optional<std::int64_t> next_deadline();
  // Teardown: from now on every wait returns at once, and nothing is serialised.
  void free_run();
  bool free_running() const { return free_.load(); }
  // Whether `node`'s threads may run now (pauses). Set by the world before running.
  std::function<bool(int node)> paused;
  // The driver's work between two instants (checks, time moves, the server applies
  // calls), run by the sim thread that finds no thread runnable, so that a step costs
  // one handoff instead of two (to the driver and back). False: the schedule is over
  // (the driver takes over). While it runs, self() is null and self_label() "driver":
  // it runs as the driver would.
  std::function<bool()> idle_step;
  // Whether an idle_step ended the schedule.
  bool halted() {
    std::lock_guard<std::mutex> g(m_);
    return halted_;
  }
  SimThread* find(const std::string& label);
  // When `t`, waiting inside a storage call, gets its answer (nullopt: not in a call).
  std::optional<std::int64_t> call_ends_at(SimThread* t);
  std::size_t live_threads();
  std::uint64_t grants() const { return grants_; }
  // Grants per thread role (label without its node), for tuning.
  std::map<std::string, std::uint64_t> grants_by_role();
  std::uint64_t foreign_threads() const { return foreign_; }
  std::uint64_t contended() const { return contended_; }

  void exited(SimThread* t);  // thread-exit hook

 private:
  void wait_idle(std::unique_lock<std::mutex>& g);
  // m_ held, no sim thread running: grants the baton to a runnable thread (true), or
  // leaves it with the driver (false). Called by the thread that gives it up, so that
  // a handoff costs one context switch.
  SimThread* pass_locked();
  static void grant(SimThread* t);
  void await_grant(SimThread* me);
  SimThread* register_locked(int node, const std::string& label);

  std::uint64_t seed_;
  bool shuffle_;
  std::int64_t stall_ms_;
  std::atomic<std::int64_t> mono_{0};
  std::atomic<std::int64_t> wall_{0};
  std::atomic<bool> free_{false};
  std::mutex m_;
  std::condition_variable driver_cv_;
  SimThread* current_ = nullptr;
  int spawning_ = 0;
  std::vector<SimThread*> threads_;  // registration order
  std::vector<SimThread*> runnable_;
  std::map<int, std::deque<std::string>> pending_labels_;
  std::map<int, std::string> next_label_;
  std::map<int, int> spawned_per_node_;
  std::uint64_t next_id_ = 1;
  std::uint64_t grants_ = 0;
  std::map<std::string, std::uint64_t> by_role_;  // of threads that exited
  std::vector<signed char> paused_cache_;         // per node, during one pass_locked
  std::uint64_t foreign_ = 0;
  std::uint64_t contended_ = 0;
  bool halted_ = false;
  std::uint64_t progress_ = 0;  // moves at every pass and step: the driver's stall bound
};

class NodeClock;

// Each node's deadline timer: ONE thread per process, as the real system_deadline_timer,
// waiting on the node's fake time. A slow task (a loss callback) delays every later task
// of that node, exactly as in a real process.
class NodeTimer final : public me::DeadlineTimer {
 public:
  explicit NodeTimer(NodeClock& clock) : clock_(clock) {}
  ~NodeTimer() override;
  void start();
  void stop();  // joins; only once the scheduler free-runs

 protected:
  void scheduled() override;

 private:
  void loop();
  NodeClock& clock_;
  std::condition_variable cv_;
  std::uint64_t changes_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

// A node's clock: the shared fake monotonic time, its host wall clock (the server's plus
// a fixed offset), its own deadline timer and renewer (one process each), and pauses.
class NodeClock final : public me::Clock {
 public:
  NodeClock(Scheduler& s, int node, std::int64_t wall_offset_ms, std::uint64_t seed);
  ~NodeClock() override;

  std::int64_t mono_ms() override { return s_.mono(); }
  std::int64_t wall_ms() override { return s_.wall() + wall_offset_; }
  bool wait_until(std::unique_lock<std::mutex>& lk, std::condition_variable& cv,
                  std::int64_t deadline_mono_ms, const std::function<bool()>& wake) override;
  void sleep_ms(std::int64_t ms) override;
  // The thread finishing that work runs only once this one gives the baton up.
  void wait_for_work(std::unique_lock<std::mutex>& lk, std::condition_variable& cv,
                     const std::function<bool()>& done) override;
  // Sleeps until mono time `t` (nothing if past).
  void sleep_until(std::int64_t t);
  me::DeadlineTimer& timer() override { return timer_; }
  bool try_lock_until(std::timed_mutex& m, std::int64_t deadline_mono_ms) override;
  // Each node's callback dispatcher: its threads wait on this node's fake time, as the
  // process-wide one's wait on the real clock (threads start on first use).
  me::CallbackDispatcher& dispatcher() override {
    return dispatcher_ ? *dispatcher_ : stopped_dispatcher_;  // after stop(): owners finish jobs
  }
  std::optional<std::uint64_t> next_random_seed() override;
  void worker_spawning() override { s_.spawning(node_); }
  void worker_spawn_failed() override { s_.spawn_failed(); }
  void worker_begins() override { s_.begins(node_); }
  void call_begins() override {}
  void call_ends() override {}

  // Starts the timer thread and the renewer's thread (labels "<name>.timer",
  // "<name>.renewer"). From a sim thread of this node or from the driver.
  void start(const std::string& name);
  void stop();  // teardown (free-running): renewer and timer joined
  Scheduler& scheduler() { return s_; }
  int node() const { return node_; }
  SimThread* renewer_thread() const { return renewer_thread_; }

 private:
  Scheduler& s_;
  int node_;
  std::int64_t wall_offset_;
  std::uint64_t seed_;
  std::uint64_t seeds_ = 0;
  NodeTimer timer_;
  std::unique_ptr<me::Renewer> renewer_;
  std::unique_ptr<me::ThreadedDispatcher> dispatcher_;
  me::CallbackDispatcher stopped_dispatcher_;  // thread-less
  SimThread* renewer_thread_ = nullptr;
};

}  // namespace sim
