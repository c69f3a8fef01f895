#include "deadline_timer.h"

#include <pthread.h>

#include <chrono>

#include "log.h"
#include "user_code.h"

namespace mongoelector {

DeadlineTimer::Id DeadlineTimer::schedule(std::int64_t deadline_mono_ms, Task task) {
  Id id;
  {
    std::lock_guard<std::mutex> g(mu_);
    id = next_id_++;
    queue_.emplace(std::make_pair(deadline_mono_ms, id), std::move(task));
    deadline_of_[id] = deadline_mono_ms;
  }
  scheduled();
  return id;
}

void DeadlineTimer::cancel(Id id, bool wait) {
  std::unique_lock<std::mutex> lk(mu_);
  auto it = deadline_of_.find(id);
  if (it != deadline_of_.end()) {
    queue_.erase(std::make_pair(it->second, id));
    deadline_of_.erase(it);
    return;
  }
  if (!wait) return;
  done_.wait(lk, [&] {
    auto r = running_.find(id);
    return r == running_.end() || r->second == std::this_thread::get_id();
  });
}

void DeadlineTimer::run_due(std::int64_t now_mono_ms) {
  for (;;) {
    Task task;
    Id id;
    {
      std::lock_guard<std::mutex> g(mu_);
      if (queue_.empty() || queue_.begin()->first.first > now_mono_ms) return;
      id = queue_.begin()->first.second;
      task = std::move(queue_.begin()->second);
      queue_.erase(queue_.begin());
      deadline_of_.erase(id);
      running_[id] = std::this_thread::get_id();
    }
    // A task may reach user code (a log sink); its cancellation unwinds (user_code.h).
    call_user_code(task,
                   [](const char*) { log(LogLevel::Error, "a deadline task raised; ignored"); });
    {
      std::lock_guard<std::mutex> g(mu_);
      running_.erase(id);
    }
    done_.notify_all();
  }
}

bool DeadlineTimer::next_deadline(std::int64_t* out) {
  if (queue_.empty()) return false;
  *out = queue_.begin()->first.first;
  return true;
}

namespace {

std::int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class SystemTimer final : public DeadlineTimer {
 protected:
  void scheduled() override {
    std::call_once(started_, [this] { std::thread([this] { loop(); }).detach(); });
    wake_.notify_all();
  }

 private:
  // Sleeps until the earliest deadline (or a new task), then runs what is due.
  void loop() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lk(mu_);
        std::int64_t next;
        if (!next_deadline(&next)) {
          wake_.wait(lk);
        } else if (next > steady_ms()) {
          wake_.wait_until(lk,
                           std::chrono::steady_clock::time_point(std::chrono::milliseconds(next)));
        }
      }
      run_due(steady_ms());
    }
  }

  std::once_flag started_;
  std::condition_variable wake_;
};

// Leaked on purpose: detached threads use it until the process ends.
SystemTimer* g_timer = nullptr;
std::once_flag g_timer_once;

// A fork()ed child has no timer thread (and maybe a mutex locked by a thread that is gone):
// it starts over with a fresh timer.
void reset_in_child() { g_timer = new SystemTimer; }

}  // namespace

DeadlineTimer& system_deadline_timer() {
  std::call_once(g_timer_once, [] {
    g_timer = new SystemTimer;
    pthread_atfork(nullptr, nullptr, reset_in_child);
  });
  return *g_timer;
}

}  // namespace mongoelector
