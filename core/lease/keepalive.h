// The renewer: the threads that keep every keep-alive lease of a process alive.
//
// Threads stay flat as leases grow (protocol notes, "cost per key"): a FIXED pool serves
// every lease of the process (Renewer::system(): kSystemThreads threads, started on first
// use, re-created in a fork()ed child), never a thread per lease. A lease is in the queue
// at most once and runs on one thread at a time; a renewal that hangs in I/O holds one
// worker for at most the storage's call bound, the others keep serving the queue. Loss is
// NOT decided here but by each lease's deadline-timer task (core/deadline_timer.h), so a
// worker stuck in a call (or a queue behind it) can delay a renewal, never a loss.
//
// A later issue batches the renewals of one storage into one round trip; the queue
// (due time -> lease) is the place where that will group them.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../clock.h"

namespace mongoelector {

// Work the renewer runs: one step at a time, on one of its threads.
class Renewable {
 public:
  virtual ~Renewable() = default;
  // One renewal (or clean-up) step. Returns the host mono ms of the next step, or nullopt
  // when there is nothing more to do (the renewable is then dropped from the queue).
  virtual std::optional<std::int64_t> renew_step() = 0;
};

class Renewer {
 public:
  static constexpr int kSystemThreads = 4;

  // threads = 0: no thread; the owner runs due steps with run_due() (fake-clock tests).
  // Threads are started on the first add().
  Renewer(std::shared_ptr<Clock> clock, int threads);
  // Stops and joins the threads. Every renewable should have been removed.
  ~Renewer();
  Renewer(const Renewer&) = delete;
  Renewer& operator=(const Renewer&) = delete;

  // The process-wide renewer on the system clock. Never destroyed.
  static Renewer& system();

  // Queues `r` to run at `due_mono_ms`. A renewable is queued at most once.
  void add(std::shared_ptr<Renewable> r, std::int64_t due_mono_ms);
  // Takes `r` out of the queue; if a step of it is running, waits until it has returned.
  // Must not be called from a renewer thread (a renewable's own step).
  void remove(const Renewable* r);
  // Runs, on the calling thread, every step due now (earliest first; a step that asks to
  // run again at or before now runs again). Returns how many steps ran.
  int run_due();
  // Earliest due time in the queue (tests).
  std::optional<std::int64_t> next_due() const;
  std::size_t size() const;  // renewables queued or running
  int threads() const { return threads_; }
  Clock& clock() { return *clock_; }
  const std::shared_ptr<Clock>& clock_ptr() const { return clock_; }

 private:
  using Key = std::pair<std::int64_t, std::uint64_t>;  // (due, seq)
  struct Slot {
    std::shared_ptr<Renewable> r;
    std::optional<Key> queued;  // nullopt while a step runs
    bool removed = false;       // remove() was called while a step ran
  };
  // Pops the earliest due step (mu_ held); nullptr if none is due.
  std::shared_ptr<Renewable> pop_due_locked(std::int64_t now);
  void run_step(const std::shared_ptr<Renewable>& r);
  void worker();

  std::shared_ptr<Clock> clock_;
  const int threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;       // queue changed / stop
  std::condition_variable done_cv_;  // a step returned
  std::map<Key, const Renewable*> queue_;
  std::unordered_map<const Renewable*, Slot> slots_;
  std::uint64_t seq_ = 0;
  std::uint64_t changes_ = 0;
  bool stop_ = false;
  bool started_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace mongoelector
