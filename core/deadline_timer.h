// Deadline timers: tasks that must run at a monotonic instant whatever any other thread
// is doing. The elector announces the end of a leadership term through one, so that
// on_leader_loss fires at the renew deadline even while its loop thread hangs in I/O
// (protocol notes: "loss must be announced by a timer no I/O can delay").
//
// One process-wide thread serves every elector (threads do not grow with electors);
// FakeClock owns a thread-less instance that runs due tasks as the fake time advances.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

namespace mongoelector {

class DeadlineTimer {
 public:
  using Id = std::uint64_t;
  using Task = std::function<void()>;

  virtual ~DeadlineTimer() = default;

  // Runs `task` once, at or soon after host mono time `deadline_mono_ms`. Never 0.
  Id schedule(std::int64_t deadline_mono_ms, Task task);
  // Removes a task that has not run. With `wait`, if it is running on another thread,
  // waits until it has returned (so its captures may be destroyed afterwards).
  void cancel(Id id, bool wait = true);
  // Runs, on the calling thread, every task due at `now_mono_ms`, earliest first.
  void run_due(std::int64_t now_mono_ms);

 protected:
  // Called (without the mutex) after a task was added: a thread-backed timer wakes up.
  virtual void scheduled() {}
  // The earliest deadline, if any (for the thread-backed timer).
  bool next_deadline(std::int64_t* out);

  std::mutex mu_;
  std::condition_variable done_;  // a task returned (cancel waits on it)

 private:
  std::map<std::pair<std::int64_t, Id>, Task> queue_;
  std::map<Id, std::int64_t> deadline_of_;
  std::map<Id, std::thread::id> running_;
  Id next_id_ = 1;
};

// The process-wide timer on std::chrono::steady_clock (SystemClock's mono time): one
// thread, started on first use and re-created in a fork()ed child. Tasks run on that
// thread, one at a time: keep them short.
DeadlineTimer& system_deadline_timer();

}  // namespace mongoelector
