#include "keepalive.h"

#include <pthread.h>

#include <algorithm>
#include <exception>

#include "../log.h"

namespace mongoelector {

namespace {
// Idle workers wake at least this often (the clock's wait takes an absolute deadline;
// "forever" would overflow steady_clock's nanoseconds).
constexpr std::int64_t kIdleWaitMs = 60 * 60 * 1000;

Renewer* g_renewer = nullptr;
std::once_flag g_renewer_once;

// A fork()ed child has none of the parent's threads (and maybe a mutex held by one of
// them): it starts over with a fresh renewer. The old one is leaked.
void reset_in_child() { g_renewer = new Renewer(system_clock(), Renewer::kSystemThreads); }
}  // namespace

Renewer::Renewer(std::shared_ptr<Clock> clock, int threads)
    : clock_(std::move(clock)), threads_(std::max(0, threads)) {}

Renewer::~Renewer() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
    ++changes_;
  }
  cv_.notify_all();
  for (auto& t : workers_) {
    if (t.joinable()) t.join();
  }
}

Renewer& Renewer::system() {
  std::call_once(g_renewer_once, [] {
    g_renewer = new Renewer(system_clock(), kSystemThreads);
    pthread_atfork(nullptr, nullptr, reset_in_child);
  });
  return *g_renewer;
}

void Renewer::add(std::shared_ptr<Renewable> r, std::int64_t due_mono_ms) {
  const Renewable* key = r.get();
  {
    std::lock_guard<std::mutex> g(mu_);
    auto& slot = slots_[key];
    if (slot.r) return;  // already queued or running
    slot.r = std::move(r);
    Key k{due_mono_ms, ++seq_};
    queue_.emplace(k, key);
    slot.queued = k;
    ++changes_;
    if (!started_ && threads_ > 0) {
      started_ = true;
      workers_.reserve(static_cast<std::size_t>(threads_));
      for (int i = 0; i < threads_; ++i) workers_.emplace_back([this] { worker(); });
    }
  }
  cv_.notify_one();
}

void Renewer::remove(const Renewable* r) {
  std::unique_lock<std::mutex> lk(mu_);
  auto it = slots_.find(r);
  if (it == slots_.end()) return;
  if (it->second.queued) {
    queue_.erase(*it->second.queued);
    slots_.erase(it);
    ++changes_;
    return;
  }
  // A step is running: it drops the slot when it returns.
  it->second.removed = true;
  done_cv_.wait(lk, [&] { return slots_.find(r) == slots_.end(); });
}

std::shared_ptr<Renewable> Renewer::pop_due_locked(std::int64_t now) {
  if (queue_.empty() || queue_.begin()->first.first > now) return nullptr;
  const Renewable* key = queue_.begin()->second;
  queue_.erase(queue_.begin());
  auto& slot = slots_.at(key);
  slot.queued.reset();
  return slot.r;
}

void Renewer::run_step(const std::shared_ptr<Renewable>& r) {
  std::optional<std::int64_t> next;
  try {
    next = r->renew_step();
  } catch (const std::exception& ex) {
    log(LogLevel::Error, std::string("a keep-alive renewal raised; dropped: ") + ex.what());
  } catch (...) {
    log(LogLevel::Error, "a keep-alive renewal raised; dropped");
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    auto it = slots_.find(r.get());
    if (it != slots_.end()) {
      if (it->second.removed || !next) {
        slots_.erase(it);
      } else {
        Key k{*next, ++seq_};
        queue_.emplace(k, r.get());
        it->second.queued = k;
      }
      ++changes_;
    }
  }
  done_cv_.notify_all();
  cv_.notify_one();
}

int Renewer::run_due() {
  int n = 0;
  for (;;) {
    std::shared_ptr<Renewable> r;
    {
      std::lock_guard<std::mutex> g(mu_);
      r = pop_due_locked(clock_->mono_ms());
    }
    if (!r) return n;
    run_step(r);
    ++n;
  }
}

void Renewer::worker() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    const std::int64_t now = clock_->mono_ms();
    if (auto r = pop_due_locked(now)) {
      lk.unlock();
      run_step(r);
      r.reset();  // never the last reference under mu_ (its destructor may remove())
      lk.lock();
      continue;
    }
    std::int64_t wake = now + kIdleWaitMs;
    if (!queue_.empty()) wake = std::min(wake, queue_.begin()->first.first);
    const std::uint64_t seen = changes_;
    clock_->wait_until(lk, cv_, wake, [&] { return stop_ || changes_ != seen; });
  }
}

std::optional<std::int64_t> Renewer::next_due() const {
  std::lock_guard<std::mutex> g(mu_);
  if (queue_.empty()) return std::nullopt;
  return queue_.begin()->first.first;
}

std::size_t Renewer::size() const {
  std::lock_guard<std::mutex> g(mu_);
  return slots_.size();
}

}  // namespace mongoelector
