#include "sched.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace sim {

namespace {

struct ThreadMark {
  SimThread* self = nullptr;
  ~ThreadMark() {
    if (self && self->sched) self->sched->exited(self);
  }
};
thread_local ThreadMark t_mark;
thread_local bool t_driving = false;  // this sim thread runs the driver's idle_step

struct Driving {
  Driving() { t_driving = true; }
  ~Driving() { t_driving = false; }
};

constexpr std::int64_t kFarMs = std::int64_t{1} << 50;

static_assert(sizeof(std::atomic<int>) == sizeof(int), "a futex word");
void futex_wait(std::atomic<int>* word, int expected) {
  syscall(SYS_futex, reinterpret_cast<int*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr,
          0);
}
void futex_wake(std::atomic<int>* word) {
  syscall(SYS_futex, reinterpret_cast<int*>(word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

// Renewable that does nothing: adding it starts a Renewer's worker thread.
class Noop final : public me::Renewable {
 public:
  std::optional<std::int64_t> renew_step() override { return std::nullopt; }
};

}  // namespace

Scheduler::Scheduler(std::uint64_t seed, std::int64_t wall0, bool shuffle, std::int64_t stall_ms)
    : seed_(seed), shuffle_(shuffle), stall_ms_(stall_ms) {
  wall_.store(wall0);
}

Scheduler::~Scheduler() {
  for (SimThread* t : threads_)
    t->sched = nullptr;  // leaked on purpose: a stalled thread may hold it
}

SimThread* Scheduler::self() { return t_driving ? nullptr : t_mark.self; }

std::string Scheduler::self_label() {
  SimThread* t = self();
  return t ? t->label : std::string("driver");
}

void Scheduler::set_now(std::int64_t t) {
  const std::int64_t now = mono_.load();
  if (t <= now) return;
  wall_.fetch_add(t - now);
  mono_.store(t, std::memory_order_release);
}

void Scheduler::set_spawn_label(int node, const std::string& label) {
  std::lock_guard<std::mutex> g(m_);
  next_label_[node] = label;
}

void Scheduler::spawning(int node) {
  std::lock_guard<std::mutex> g(m_);
  ++spawning_;
  std::string label;
  auto it = next_label_.find(node);
  if (it != next_label_.end() && !it->second.empty()) {
    label = it->second;
    it->second.clear();
  } else {
    label = "n" + std::to_string(node) + ".thread" + std::to_string(++spawned_per_node_[node]);
  }
  pending_labels_[node].push_back(label);
}

void Scheduler::spawn_failed() {
  std::lock_guard<std::mutex> g(m_);
  --spawning_;
  driver_cv_.notify_all();
}

SimThread* Scheduler::register_locked(int node, const std::string& label) {
  auto* t = new SimThread;
  t->id = next_id_++;
  t->label = label;
  t->role = label.substr(label.find('.') + 1);
  t->node = node;
  t->sched = this;
  threads_.push_back(t);
  t_mark.self = t;
  return t;
}

void Scheduler::begins(int node) {
  std::unique_lock<std::mutex> g(m_);
  std::string label;
  auto& q = pending_labels_[node];
  if (!q.empty()) {
    label = q.front();
    q.pop_front();
  } else {
    label = "n" + std::to_string(node) + ".unlabelled";
  }
  SimThread* me = register_locked(node, label);
  --spawning_;
  g.unlock();
  driver_cv_.notify_all();
  await_grant(me);  // runs only when granted (or at teardown)
}

void Scheduler::grant(SimThread* t) {
  t->go.store(1, std::memory_order_release);
  futex_wake(&t->go);
}

void Scheduler::await_grant(SimThread* me) {
  for (;;) {
    if (me->go.exchange(0, std::memory_order_acq_rel) == 1 || free_.load()) return;
    futex_wait(&me->go, 0);
  }
}

void Scheduler::await_registered() {
  std::unique_lock<std::mutex> g(m_);
  if (!driver_cv_.wait_for(g, std::chrono::milliseconds(stall_ms_), [&] { return spawning_ == 0; }))
    throw Stall("a spawned thread never began");
}

bool Scheduler::wait(int node, std::unique_lock<std::mutex>& lk, std::int64_t deadline,
                     const std::function<bool()>* wake) {
  if (wake && (*wake)()) return true;
  if (free_.load()) {
    lk.unlock();
    std::this_thread::yield();
    lk.lock();
    return wake ? (*wake)() : false;
  }
  SimThread* me = t_mark.self;
  if (mono() >= deadline) return false;
  lk.unlock();
  SimThread* next = nullptr;
  bool idle = false;
  {
    std::unique_lock<std::mutex> g(m_);
    if (!me || me->sched != this) {
      // A thread the library started some other way: it becomes a sim thread now.
      ++foreign_;
      me = register_locked(node, "n" + std::to_string(node) + ".foreign");
    }
    me->waiting = true;
    me->lk_mutex = lk.mutex();
    me->wake = wake;
    me->deadline = deadline;
    if (current_ == me) {
      for (;;) {
        current_ = nullptr;
        next = pass_locked();
        if (next) break;
        if (!idle_step || spawning_ > 0 || halted_ || free_.load()) {
          idle = true;
          break;
        }
        // Nothing runnable: the driver's step, here (no handoff to the driver and back).
        current_ = me;
        ++progress_;
        g.unlock();
        bool go_on;
        {
          Driving d;
          go_on = idle_step();
        }
        g.lock();
        if (!go_on) {
          halted_ = true;
          current_ = nullptr;
          idle = true;
          break;
        }
      }
    }
  }
  if (next == me) {
    // It picked itself (its wait is over after the step it ran): no wake-up to send.
    lk.lock();
    return wake ? (*wake)() : false;
  }
  if (next) grant(next);
  if (idle) driver_cv_.notify_all();
  await_grant(me);  // the granter cleared the wait's fields
  lk.lock();
  return wake ? (*wake)() : false;
}

void Scheduler::exited(SimThread* t) {
  SimThread* next = nullptr;
  {
    std::lock_guard<std::mutex> g(m_);
    threads_.erase(std::remove(threads_.begin(), threads_.end(), t), threads_.end());
    if (t->grants) by_role_[t->role] += t->grants;
    if (current_ == t) {
      current_ = nullptr;
      if (!free_.load()) next = pass_locked();
    }
  }
  delete t;
  if (next) grant(next);
  driver_cv_.notify_all();
}

void Scheduler::wait_idle(std::unique_lock<std::mutex>& g) {
  // Sim threads may run many steps without the driver: stalled only when nothing moved
  // for the whole bound.
  for (;;) {
    const std::uint64_t seen = progress_;
    if (driver_cv_.wait_for(g, std::chrono::milliseconds(stall_ms_),
                            [&] { return current_ == nullptr && spawning_ == 0; }))
      return;
    if (progress_ == seen) break;
  }
  std::string who = current_ ? current_->label : "a thread being spawned";
  throw Stall("sim thread " + who + " did not come back to the clock within " +
              std::to_string(stall_ms_) + " ms of real time at t=" + std::to_string(mono()) +
              " (blocked outside the clock)");
}

SimThread* Scheduler::pass_locked() {
  ++progress_;
  if (spawning_ > 0) return nullptr;  // the driver waits for it to register
  std::vector<SimThread*>& runnable = runnable_;
  runnable.clear();
  const std::int64_t now = mono();
  // Pauses depend on the node and the instant only: asked once per node.
  paused_cache_.assign(paused_cache_.size(), -1);
  for (SimThread* t : threads_) {
    if (paused && t->node >= 0) {
      const auto n = static_cast<std::size_t>(t->node);
      if (n >= paused_cache_.size()) paused_cache_.resize(n + 1, -1);
      if (paused_cache_[n] < 0) paused_cache_[n] = paused(t->node) ? 1 : 0;
      if (paused_cache_[n]) continue;
    } else if (paused && paused(t->node)) {
      continue;
    }
    if (!t->waiting || t->deadline <= now) {
      runnable.push_back(t);
      continue;
    }
    if (t->wake) {
      // No sim thread runs, so its mutex is free (try: never deadlock).
      std::unique_lock<std::mutex> l(*t->lk_mutex, std::try_to_lock);
      if (!l.owns_lock()) {
        ++contended_;
        continue;
      }
      if ((*t->wake)()) runnable.push_back(t);
    }
  }
  if (runnable.empty()) return nullptr;
  std::size_t i = 0;
  if (shuffle_ && runnable.size() > 1)
    i = static_cast<std::size_t>(hash64(seed_, static_cast<std::uint64_t>(now), grants_) %
                                 runnable.size());
  SimThread* pick = runnable[i];
  ++grants_;
  ++pick->grants;
  current_ = pick;
  pick->waiting = false;
  pick->wake = nullptr;
  pick->lk_mutex = nullptr;
  return pick;  // the caller grants it once m_ is released
}

void Scheduler::run_instant() {
  std::unique_lock<std::mutex> g(m_);
  for (;;) {
    wait_idle(g);
    if (halted_) return;
    SimThread* next = pass_locked();
    if (!next) return;
    g.unlock();
    grant(next);
    g.lock();
  }
}

std::optional<std::int64_t> Scheduler::next_deadline() {
  std::lock_guard<std::mutex> g(m_);
  std::optional<std::int64_t> best;
  const std::int64_t now = mono();
  for (SimThread* t : threads_) {
    if (!t->waiting || t->deadline <= now) continue;
    if (!best || t->deadline < *best) best = t->deadline;
  }
  return best;
}

void Scheduler::free_run() {
  std::lock_guard<std::mutex> g(m_);
  free_.store(true);
  for (SimThread* t : threads_) grant(t);
  current_ = nullptr;
}

SimThread* Scheduler::find(const std::string& label) {
  std::lock_guard<std::mutex> g(m_);
  for (SimThread* t : threads_)
    if (t->label == label) return t;
  return nullptr;
}

std::map<std::string, std::uint64_t> Scheduler::grants_by_role() {
  std::lock_guard<std::mutex> g(m_);
  std::map<std::string, std::uint64_t> out = by_role_;
  for (const SimThread* t : threads_)
    if (t->grants) out[t->role] += t->grants;
  return out;
}

std::optional<std::int64_t> Scheduler::call_ends_at(SimThread* t) {
  std::lock_guard<std::mutex> g(m_);
  if (!t->in_call.load()) return std::nullopt;
  if (!t->waiting) return mono();
  return t->deadline;
}

std::size_t Scheduler::live_threads() {
  std::lock_guard<std::mutex> g(m_);
  return threads_.size();
}

// ---- NodeTimer ----------------------------------------------------------------------

NodeTimer::~NodeTimer() { stop(); }

void NodeTimer::start() {
  thread_ = me::start_clock_thread(clock_, [this] { loop(); });
}

void NodeTimer::stop() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void NodeTimer::scheduled() {
  std::lock_guard<std::mutex> g(mu_);
  ++changes_;
}

void NodeTimer::loop() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    std::int64_t next = 0;
    const bool has = next_deadline(&next);
    const std::int64_t now = clock_.mono_ms();
    if (has && next <= now) {
      lk.unlock();
      run_due(now);
      lk.lock();
      continue;
    }
    const std::uint64_t seen = changes_;
    clock_.wait_until(lk, cv_, has ? next : now + kFarMs,
                      [&] { return stop_ || changes_ != seen; });
  }
}

// ---- NodeClock ----------------------------------------------------------------------

NodeClock::NodeClock(Scheduler& s, int node, std::int64_t wall_offset_ms, std::uint64_t seed)
    : s_(s),
      node_(node),
      wall_offset_(wall_offset_ms),
      seed_(seed),
      timer_(*this),
      dispatcher_(std::make_unique<me::ThreadedDispatcher>(*this)) {}

NodeClock::~NodeClock() { stop(); }

bool NodeClock::wait_until(std::unique_lock<std::mutex>& lk, std::condition_variable&,
                           std::int64_t deadline_mono_ms, const std::function<bool()>& wake) {
  return s_.wait(node_, lk, deadline_mono_ms, wake ? &wake : nullptr);
}

void NodeClock::wait_for_work(std::unique_lock<std::mutex>& lk, std::condition_variable& cv,
                              const std::function<bool()>& done) {
  while (!done()) {
    if (s_.free_running()) {  // teardown: threads run freely, a real wait is enough
      cv.wait(lk, done);
      return;
    }
    s_.wait(node_, lk, s_.mono() + kFarMs, &done);
  }
}

void NodeClock::sleep_ms(std::int64_t ms) {
  if (ms <= 0) return;
  sleep_until(mono_ms() + ms);
}

void NodeClock::sleep_until(std::int64_t t) {
  std::mutex m;
  std::unique_lock<std::mutex> lk(m);
  s_.wait(node_, lk, t, nullptr);
}

bool NodeClock::try_lock_until(std::timed_mutex& m, std::int64_t deadline_mono_ms) {
  for (;;) {
    if (m.try_lock()) return true;
    if (mono_ms() >= deadline_mono_ms || s_.free_running()) return false;
    sleep_ms(1);
  }
}

std::optional<std::uint64_t> NodeClock::next_random_seed() {
  return hash64(seed_, static_cast<std::uint64_t>(node_), ++seeds_, 0xE1EC7);
}

void NodeClock::start(const std::string& name) {
  s_.set_spawn_label(node_, name + ".timer");
  timer_.start();
  s_.await_registered();
  // One renewer thread per process (the real one has a fixed pool; one keeps the
  // batches of a node in one order).
  // Not owning: the renewer lives inside this clock.
  renewer_ = std::make_unique<me::Renewer>(
      std::shared_ptr<me::Clock>(std::shared_ptr<me::Clock>(), this), 1);
  s_.set_spawn_label(node_, name + ".renewer");
  renewer_->add(std::make_shared<Noop>(), 0);
  s_.await_registered();
  renewer_thread_ = s_.find(name + ".renewer");
  me::Renewer::use_for(this, [this]() -> me::Renewer& { return *renewer_; });
}

void NodeClock::stop() {
  me::Renewer::stop_using_for(this);
  renewer_.reset();
  dispatcher_.reset();  // joins its threads (jobs left queued are their owners' to finish)
  timer_.stop();
}

}  // namespace sim
