// Where user callbacks run when no thread of the caller's is at hand: a keep-alive or
// semaphore lease's on_lost, an elector's on_leader_loss at a missed renew deadline (and
// the log lines that announce them: a log callback is user code too).
//
// Why not on the deadline timer (deadline_timer.h): the timer is one thread per process.
// A user callback is arbitrary code (a Python callable first waits for the GIL; a C one
// may block): run there, one slow callback held back every other announcement of the
// process, and, while loss was a flag that the timer set, every other lease read "held"
// past its deadline. Loss is now read from the deadline and the monotonic clock
// (lease/hold_loss.h, Elector::is_leader()); the timer only strands holds and hands the
// announcement over to here, and never runs user code.
//
// Design:
//  * A CallbackJob runs exactly once: whichever comes first of a dispatcher thread and
//    its owner's finish() (a lease's close(), ~Elector) claims it, and finish() waits for
//    a job that runs elsewhere (never for one on its own thread). So a callback never
//    runs after its owner is gone, and a close() made inside another callback never
//    waits for a job queued behind that callback: it runs the job itself.
//  * The thread-backed dispatcher grows on demand: a job queued while every thread is
//    busy in a callback gets a new thread, up to kMaxThreads. So up to kMaxThreads - 1
//    slow callbacks delay no one else's; idle threads stay for the next job (threads
//    never grow with holds: most processes have one). Threads are started through
//    start_clock_thread() and wait on their clock, so a ManualClock counts them: its
//    advance() returns once the callbacks it caused have run.
//  * system_callback_dispatcher(): the process-wide one (steady clock), started on first
//    use and re-created in a fork()ed child, like the timer. A job that was running in
//    the parent at fork() is not waited for in the child (its thread is not there).
//  * A ManualClock owns one; a FakeClock has a thread-less one, run on the thread that
//    moves its time, after its timers.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace mongoelector {

class Clock;

class CallbackJob {
 public:
  explicit CallbackJob(std::function<void()> fn) : fn_(std::move(fn)) {}
  CallbackJob(const CallbackJob&) = delete;
  CallbackJob& operator=(const CallbackJob&) = delete;

  // Runs the job on this thread unless it has begun elsewhere, then waits (on `clock`:
  // the job may wait on it) until it has returned; returns at once if it is running on
  // this very thread.
  void finish(Clock& clock);
  // The dispatcher's side: runs it unless someone has.
  void run_if_pending();
  // True while it runs on the calling thread.
  bool running_here();

 private:
  bool claim_locked();  // mu_ held: Pending -> Running on this thread
  bool running_here_locked() const;
  void run_claimed();

  enum class State { Pending, Running, Done };
  std::mutex mu_;
  std::condition_variable done_;
  State state_ = State::Pending;
  std::thread::id runner_;
  pid_t runner_pid_ = 0;
  std::function<void()> fn_;
};

class CallbackDispatcher {
 public:
  virtual ~CallbackDispatcher() = default;
  // Queues `job` to run soon (a thread-less dispatcher: at its next run_pending()).
  virtual void post(std::shared_ptr<CallbackJob> job);
  // Runs every queued job on the calling thread (thread-less dispatchers).
  void run_pending();

 protected:
  std::mutex mu_;
  std::deque<std::shared_ptr<CallbackJob>> queue_;
};

class ThreadedDispatcher final : public CallbackDispatcher {
 public:
  static constexpr int kMaxThreads = 4;

  // `clock`: the time its threads wait on (a ManualClock counts them). Must outlive it.
  explicit ThreadedDispatcher(Clock& clock, int max_threads = kMaxThreads);
  // Stops and joins the threads; jobs still queued are left to their owners' finish().
  ~ThreadedDispatcher() override;
  void post(std::shared_ptr<CallbackJob> job) override;
  std::size_t threads();  // started so far (tests)

 private:
  void worker();

  Clock& clock_;
  const int max_threads_;
  std::condition_variable cv_;
  int idle_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// The process-wide dispatcher on the system clock (Clock::dispatcher()'s default).
CallbackDispatcher& system_callback_dispatcher();

}  // namespace mongoelector
