#include "callback_dispatcher.h"

#include <pthread.h>
#include <unistd.h>

#include <exception>
#include <string>

#include "clock.h"
#include "log.h"
#include "user_code.h"

namespace mongoelector {

namespace {
// Idle threads wake at least this often (see keepalive.cpp: "forever" would overflow).
constexpr std::int64_t kIdleWaitMs = 60 * 60 * 1000;
}  // namespace

bool CallbackJob::claim_locked() {
  if (state_ != State::Pending) return false;
  state_ = State::Running;
  runner_ = std::this_thread::get_id();
  runner_pid_ = getpid();
  return true;
}

void CallbackJob::run_claimed() {
  // Done however the job ends, thread cancellation included (CPython ends threads that
  // wait for the GIL at exit that way): nobody waits for it forever.
  struct MarkDone {
    CallbackJob* job;
    ~MarkDone() {
      {
        std::lock_guard<std::mutex> g(job->mu_);
        job->state_ = State::Done;
      }
      job->done_.notify_all();
    }
  } mark{this};
  std::function<void()> fn = std::move(fn_);
  fn_ = nullptr;
  call_user_code(fn, [](const char* what) {
    log(LogLevel::Error, what ? std::string("a callback raised: ") + what
                              : std::string("a callback raised an unknown exception"));
  });
}

void CallbackJob::finish(Clock& clock) {
  std::unique_lock<std::mutex> lk(mu_);
  if (claim_locked()) {
    lk.unlock();
    run_claimed();
    return;
  }
  if (running_here_locked()) return;
  clock.wait_for_work(lk, done_, [this] {
    // A job that was running in the parent at fork() has no thread here.
    return state_ == State::Done || runner_pid_ != getpid();
  });
}

void CallbackJob::run_if_pending() {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!claim_locked()) return;
  }
  run_claimed();
}

bool CallbackJob::running_here_locked() const {
  return state_ == State::Running && runner_pid_ == getpid() &&
         runner_ == std::this_thread::get_id();
}

bool CallbackJob::running_here() {
  std::lock_guard<std::mutex> g(mu_);
  return running_here_locked();
}

void CallbackDispatcher::post(std::shared_ptr<CallbackJob> job) {
  std::lock_guard<std::mutex> g(mu_);
  queue_.push_back(std::move(job));
}

void CallbackDispatcher::run_pending() {
  for (;;) {
    std::shared_ptr<CallbackJob> job;
    {
      std::lock_guard<std::mutex> g(mu_);
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job->run_if_pending();
  }
}

ThreadedDispatcher::ThreadedDispatcher(Clock& clock, int max_threads)
    : clock_(clock), max_threads_(max_threads < 1 ? 1 : max_threads) {}

ThreadedDispatcher::~ThreadedDispatcher() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void ThreadedDispatcher::post(std::shared_ptr<CallbackJob> job) {
  std::string failed;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (stop_) return;  // its owner's finish() runs it
    queue_.push_back(std::move(job));
    // Every thread busy (a callback that takes long): one more, up to the limit.
    if (static_cast<int>(queue_.size()) > idle_ &&
        static_cast<int>(threads_.size()) < max_threads_) {
      try {
        threads_.push_back(start_clock_thread(clock_, [this] { worker(); }));
      } catch (const std::exception& ex) {
        failed = ex.what();
      }
    }
  }
  cv_.notify_one();
  if (!failed.empty())
    log(LogLevel::Error, "could not start a callback thread (" + failed +
                             "): callbacks wait for a busy one, or run at close");
}

std::size_t ThreadedDispatcher::threads() {
  std::lock_guard<std::mutex> g(mu_);
  return threads_.size();
}

void ThreadedDispatcher::worker() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    if (!queue_.empty()) {
      std::shared_ptr<CallbackJob> job = std::move(queue_.front());
      queue_.pop_front();
      lk.unlock();
      job->run_if_pending();
      job.reset();  // never the last reference under mu_
      lk.lock();
      continue;
    }
    ++idle_;
    clock_.wait_until(lk, cv_, clock_.mono_ms() + kIdleWaitMs,
                      [this] { return stop_ || !queue_.empty(); });
    --idle_;
  }
}

namespace {

// Leaked on purpose, with the clock its threads wait on: they run until the process ends.
CallbackDispatcher* g_dispatcher = nullptr;
std::once_flag g_dispatcher_once;

CallbackDispatcher* make_system_dispatcher() {
  static auto* clock = new std::shared_ptr<Clock>(system_clock());
  return new ThreadedDispatcher(**clock);
}

// A fork()ed child has none of the parent's threads (and maybe a mutex locked by one):
// it starts over with a fresh dispatcher.
void reset_in_child() { g_dispatcher = make_system_dispatcher(); }

}  // namespace

CallbackDispatcher& system_callback_dispatcher() {
  std::call_once(g_dispatcher_once, [] {
    g_dispatcher = make_system_dispatcher();
    pthread_atfork(nullptr, nullptr, reset_in_child);
  });
  return *g_dispatcher;
}

}  // namespace mongoelector
