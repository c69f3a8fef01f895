#include "keepalive.h"

#include <pthread.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <string>
#include <unordered_map>

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
Renewer* make_system_renewer() {
  auto* r = new Renewer(system_clock(), Renewer::kSystemThreads);
  // Escape hatch and benchmark baseline: MONGOELECTOR_BATCH_RENEWALS=0 renews key by key.
  const char* env = std::getenv("MONGOELECTOR_BATCH_RENEWALS");
  if (env && std::string(env) == "0") r->set_batching(false);
  return r;
}
void reset_in_child() { g_renewer = make_system_renewer(); }

// Clocks with a renewer of their own (Renewer::use_for). Never destroyed: a clock may
// unregister during static destruction.
std::mutex& own_renewers_mu() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::unordered_map<const Clock*, std::function<Renewer&()>>& own_renewers() {
  static auto* m = new std::unordered_map<const Clock*, std::function<Renewer&()>>;
  return *m;
}
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
    g_renewer = make_system_renewer();
    pthread_atfork(nullptr, nullptr, reset_in_child);
  });
  return *g_renewer;
}

Renewer& Renewer::for_clock(Clock& clock) {
  std::function<Renewer&()> provide;
  {
    std::lock_guard<std::mutex> g(own_renewers_mu());
    auto it = own_renewers().find(&clock);
    if (it != own_renewers().end()) provide = it->second;
  }
  // Called outside the table's lock: it may make the renewer (and take the clock's own).
  return provide ? provide() : system();
}

void Renewer::use_for(const Clock* clock, std::function<Renewer&()> provide) {
  std::lock_guard<std::mutex> g(own_renewers_mu());
  own_renewers()[clock] = std::move(provide);
}

void Renewer::stop_using_for(const Clock* clock) {
  std::lock_guard<std::mutex> g(own_renewers_mu());
  own_renewers().erase(clock);
}

void Renewer::add(std::shared_ptr<Renewable> r, std::int64_t due_mono_ms) {
  const Renewable* key = r.get();
  {
    std::lock_guard<std::mutex> g(mu_);
    auto& slot = slots_[key];
    if (slot.r) return;  // already queued or running
    slot.domain = r->batch_domain();
    slot.early_ok = r->early_ok(due_mono_ms);
    slot.registered = ++registrations_;
    slot.r = std::move(r);
    Key k{due_mono_ms, ++seq_};
    queue_.emplace(k, key);
    slot.queued = k;
    ++changes_;
    if (!started_ && threads_ > 0) {
      started_ = true;
      workers_.reserve(static_cast<std::size_t>(threads_));
      for (int i = 0; i < threads_; ++i)
        workers_.push_back(start_clock_thread(*clock_, [this] { worker(); }));
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
  clock_->wait_for_work(lk, done_cv_, [&] { return slots_.find(r) == slots_.end(); });
}

std::shared_ptr<Renewable> Renewer::pop_due_locked(std::int64_t now) {
  if (queue_.empty() || queue_.begin()->first.first > now) return nullptr;
  const Renewable* key = queue_.begin()->second;
  queue_.erase(queue_.begin());
  auto& slot = slots_.at(key);
  slot.queued.reset();
  return slot.r;
}

void Renewer::requeue_locked(const Renewable* r, const std::optional<std::int64_t>& next) {
  auto it = slots_.find(r);
  if (it == slots_.end()) return;
  if (it->second.removed || !next) {
    slots_.erase(it);
  } else {
    Key k{*next, ++seq_};
    queue_.emplace(k, r);
    it->second.queued = k;
    it->second.early_ok = r->early_ok(*next);
  }
  ++changes_;
}

namespace {
template <class F>
std::optional<std::int64_t> guarded_step(F&& step) {
  try {
    return step();
  } catch (const std::exception& ex) {
    log(LogLevel::Error, std::string("a keep-alive renewal raised; dropped: ") + ex.what());
  } catch (...) {
    log(LogLevel::Error, "a keep-alive renewal raised; dropped");
  }
  return std::nullopt;
}
}  // namespace

void Renewer::run_step(const std::shared_ptr<Renewable>& r) {
  const std::optional<std::int64_t> next = guarded_step([&] { return r->renew_step(); });
  {
    std::lock_guard<std::mutex> g(mu_);
    requeue_locked(r.get(), next);
  }
  done_cv_.notify_all();
  cv_.notify_one();
}

void Renewer::pop_batch_locked(const void* domain, std::int64_t now,
                               std::vector<std::shared_ptr<Renewable>>& out) {
  for (auto& [key, slot] : slots_) {
    if (slot.domain != domain || !slot.queued || slot.early_ok > now) continue;
    queue_.erase(*slot.queued);
    slot.queued.reset();
    out.push_back(slot.r);
  }
  // slots_ is keyed by address: its order changes from run to run of the same program.
  std::sort(out.begin(), out.end(), [this](const auto& a, const auto& b) {
    return slots_.at(a.get()).registered < slots_.at(b.get()).registered;
  });
}

namespace {
// One call for renewals of one kind and collection at server time now_ms: per ticket,
// whether its hold is renewed. A single one goes alone (one command instead of update +
// find).
std::vector<bool> renew_batch(Storage& via, const std::string& collection,
                              const std::vector<RenewTicket>& tickets, std::int64_t now_ms) {
  if (tickets.size() == 1) return {renew_one(via, collection, tickets[0])};
  if (tickets[0].kind == RenewTicket::Kind::Lock) {
    std::vector<RenewRequest> requests;
    requests.reserve(tickets.size());
    for (const auto& t : tickets) requests.push_back(t.request);
    return via.renew_many(collection, requests, now_ms);
  }
  std::vector<SemaphoreRenewRequest> requests;
  requests.reserve(tickets.size());
  for (const auto& t : tickets) requests.push_back(t.semaphore);
  return via.renew_semaphores(collection, requests, now_ms);
}
}  // namespace

void Renewer::run_batch(std::vector<std::shared_ptr<Renewable>> batch) {
  const std::size_t n = batch.size();
  std::vector<std::optional<std::int64_t>> next(n);
  std::vector<Renewable::BatchStart> starts(n);
  // One `sent` for the whole batch, read before any request is computed or sent: every
  // lease of it is measured from here (never later than its real send).
  const std::int64_t sent = clock_->mono_ms();
  for (std::size_t i = 0; i < n; ++i) {
    bool ok = false;
    next[i] = guarded_step([&] {
      starts[i] = batch[i]->begin_batched(sent);
      ok = true;
      return starts[i].next;
    });
    if (!ok) starts[i].ticket = nullptr;
  }
  // Renewals by kind (one batch call each) and collection, in chunks of the storage's
  // batch size.
  std::map<std::pair<RenewTicket::Kind, std::string>, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < n; ++i)
    if (starts[i].ticket) groups[{starts[i].ticket->kind, starts[i].collection}].push_back(i);
  std::uint64_t sent_batches = 0, carried = 0;
  for (const auto& [group, members] : groups) {
    const auto& [kind, collection] = group;
    const std::size_t chunk =
        std::max<std::size_t>(1, starts[members[0]].storage->max_renew_batch());
    for (std::size_t from = 0; from < members.size(); from += chunk) {
      const std::size_t to = std::min(members.size(), from + chunk);
      // Sent through the member with the shortest call bound, so that no member's call
      // runs longer than its own bound allows; filtered at the latest estimate of now.
      Storage* via = starts[members[from]].storage;
      std::int64_t now_ms = starts[members[from]].ticket->at.now_ms;
      for (std::size_t j = from; j < to; ++j) {
        const auto& st = starts[members[j]];
        now_ms = std::max(now_ms, st.ticket->at.now_ms);
        const std::int64_t b = st.storage->call_bound_ms();
        if (b > 0 && (via->call_bound_ms() <= 0 || b < via->call_bound_ms())) via = st.storage;
      }
      // Leases whose holders sampled the server's clock apart compute expiries a few ms
      // apart: each is raised to the batch's latest now + its own lease length, so that
      // one ttl makes one update. Only ever LATER than the lease's own computation: the
      // server keeps the hold at least as long as the holder counts on it.
      std::vector<RenewTicket> tickets;  // copies of the requests, raised
      tickets.reserve(to - from);
      for (std::size_t j = from; j < to; ++j) {
        const RenewTicket& t = *starts[members[j]].ticket;
        RenewTicket& c = tickets.emplace_back();
        c.kind = t.kind;
        c.at = t.at;
        c.request = t.request;
        c.semaphore = t.semaphore;
        c.raise_expire(now_ms + (t.expire_ms() - t.at.now_ms));
        c.at.now_ms = now_ms;
      }
      std::vector<bool> renewed;
      std::string error;
      try {
        renewed = renew_batch(*via, collection, tickets, now_ms);
        if (renewed.size() != tickets.size())
          error = "the storage answered " + std::to_string(renewed.size()) + " results for " +
                  std::to_string(tickets.size()) + " renewals";
      } catch (const std::exception& ex) {
        error = ex.what();
        if (error.empty()) error = "batched renewal failed";
      } catch (...) {
        error = "batched renewal failed";
      }
      ++sent_batches;
      carried += tickets.size();
      for (std::size_t j = from; j < to; ++j) {
        const std::size_t i = members[j];
        const bool ok = error.empty() && renewed[j - from];
        next[i] = guarded_step(
            [&] { return batch[i]->finish_batched(ok, error.empty() ? nullptr : error.c_str()); });
      }
    }
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    for (std::size_t i = 0; i < n; ++i) requeue_locked(batch[i].get(), next[i]);
    batches_ += sent_batches;
    batched_ += carried;
  }
  done_cv_.notify_all();
  cv_.notify_all();
}

void Renewer::set_batching(bool on) {
  std::lock_guard<std::mutex> g(mu_);
  batching_ = on;
}

std::uint64_t Renewer::batches_sent() const {
  std::lock_guard<std::mutex> g(mu_);
  return batches_;
}

std::uint64_t Renewer::batched_renewals() const {
  std::lock_guard<std::mutex> g(mu_);
  return batched_;
}

std::optional<bool> Renewer::take_due_locked(std::int64_t now,
                                             std::vector<std::shared_ptr<Renewable>>& out) {
  auto r = pop_due_locked(now);
  if (!r) return std::nullopt;
  const void* domain = batching_ ? slots_.at(r.get()).domain : nullptr;
  out.push_back(std::move(r));
  if (domain) pop_batch_locked(domain, now, out);
  return domain != nullptr;
}

void Renewer::run_taken(std::vector<std::shared_ptr<Renewable>>& taken, bool batched) {
  if (batched) {
    run_batch(std::move(taken));
  } else {
    run_step(taken[0]);
  }
  taken.clear();  // never the last reference under mu_ (its destructor may remove())
}

int Renewer::run_due() {
  int n = 0;
  std::vector<std::shared_ptr<Renewable>> taken;
  for (;;) {
    std::optional<bool> batched;
    {
      std::lock_guard<std::mutex> g(mu_);
      batched = take_due_locked(clock_->mono_ms(), taken);
    }
    if (!batched) return n;
    n += static_cast<int>(taken.size());
    run_taken(taken, *batched);
  }
}

void Renewer::worker() {
  std::vector<std::shared_ptr<Renewable>> taken;
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    const std::int64_t now = clock_->mono_ms();
    if (auto batched = take_due_locked(now, taken)) {
      lk.unlock();
      run_taken(taken, *batched);
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
