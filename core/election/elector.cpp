#include "elector.h"

#include <cxxabi.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "../errors.h"
#include "../log.h"

namespace mongoelector {

namespace {
Value ttl_value(double ttl_s) {
  // Keep an integral ttl an integer in status documents, as the original does.
  if (ttl_s == std::floor(ttl_s) && std::fabs(ttl_s) < 9e15) return static_cast<std::int64_t>(ttl_s);
  return ttl_s;
}

Value date_or_null(const std::optional<std::int64_t>& ms) {
  if (!ms) return Null{};
  return DateTime{*ms};
}
}  // namespace

Elector::Elector(std::shared_ptr<Storage> storage, ElectorOptions options,
                 ElectorCallbacks callbacks, std::shared_ptr<Clock> clock, Identity identity)
    : options_(std::move(options)),
      callbacks_(std::move(callbacks)),
      clock_(clock),
      rng_(std::random_device{}()) {
  validate_collection(options_.status_collection);  // before the locker's first round trip
  LockerOptions lo;
  lo.key = options_.key;
  lo.collection = options_.lock_collection;
  lo.ttl_s = options_.ttl_s;
  lo.timeparanoid = true;
  lo.allow_unsafe_server = options_.allow_unsafe_server;
  lo.ensure_indexes = options_.ensure_indexes;
  lo.delete_on_release = options_.delete_on_release;
  locker_ = std::make_shared<Locker>(storage, lo, clock_, std::move(identity));
  // A leader renews at ttl/2 and must be done by the renew deadline (0.9 ttl).
  const std::int64_t bound = storage->call_bound_ms();
  if (bound > 0 && bound * 10 > locker_->ttl_ms() * 4)
    log(LogLevel::Warning, "calls may take up to " + std::to_string(bound) +
                               " ms, too long for ttl " + std::to_string(locker_->ttl_ms()) +
                               " ms: the leader may step down before it can renew; lower the "
                               "driver timeouts or raise ttl");
  if (options_.ensure_indexes && options_.report_status) {
    auto ttl_s = static_cast<std::int64_t>(options_.ttl_s);
    storage->ensure_status_indexes(options_.status_collection, std::max<std::int64_t>(1, ttl_s));
  }
}

Elector::~Elector() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_requested_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    if (thread_.get_id() == std::this_thread::get_id()) {
      // A broken precondition (see elector.h): fail loudly rather than let the loop run
      // on freed memory.
      log(LogLevel::Error, "Elector destroyed from its own callback; aborting");
      std::abort();
    }
    thread_.join();
  }
}

void Elector::start() {
  std::lock_guard<std::mutex> g(mu_);
  if (running_) return;
  if (thread_.joinable()) {
    if (thread_.get_id() == std::this_thread::get_id()) return;
    thread_.join();
  }
  stop_requested_ = false;
  running_ = true;  // set before the thread runs, so running() is true on return
  thread_ = std::thread([this] { run_loop(); });
}

void Elector::run_loop() {
  {
    std::lock_guard<std::mutex> g(mu_);
    loop_thread_id_ = std::this_thread::get_id();
    running_ = true;
  }
  for (;;) {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (stop_requested_) break;
    }
    poll();
    std::unique_lock<std::mutex> lk(mu_);
    std::int64_t wake = next_poll_mono_;
    // Wake at the renew deadline too: stepping down must not wait for the next poll.
    if (leader_ && renew_deadline_) wake = std::min(wake, *renew_deadline_);
    clock_->wait_until(lk, cv_, wake, [this] { return stop_requested_; });
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    running_ = false;
    loop_thread_id_ = std::thread::id();
  }
  release();
}

void Elector::stop() {
  bool own_thread;
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_requested_ = true;
    own_thread = loop_thread_id_ == std::this_thread::get_id();
  }
  cv_.notify_all();
  if (!own_thread && thread_.joinable()) {
    thread_.join();  // run_loop() released leadership on its way out
    return;
  }
  // Never started, or called from a callback: release now (the loop, if any, exits
  // after the callback and finds nothing left to release).
  release();
}

std::int64_t Elector::jitter_ms() {
  std::int64_t span = std::min<std::int64_t>(locker_->ttl_ms() / 10, 500);
  if (span <= 0) return 0;
  std::lock_guard<std::mutex> g(mu_);
  return std::uniform_int_distribution<std::int64_t>(0, span)(rng_);
}

std::int64_t Elector::margin_ms() {
  // Room for both nodes' server-clock estimates and a scheduling hiccup (README).
  return std::max<std::int64_t>(locker_->ttl_ms() / 10,
                                2 * locker_->server_clock().uncertainty_ms() + 50);
}

void Elector::poll() {
  Event first;
  {
    std::lock_guard<std::mutex> g(poll_mu_);
    first = poll_locked();
  }
  Event second = Event::None;
  if (first == Event::LostLeader) {
    // Tell the application at once, before any further I/O that might hang.
    fire(first);
    // Then look for a leader in the same cycle, as the original does.
    std::lock_guard<std::mutex> g(poll_mu_);
    second = poll_locked();
  } else if (first != Event::None) {
    second = first;
  }
  {
    std::lock_guard<std::mutex> g(poll_mu_);
    {
      std::lock_guard<std::mutex> s(mu_);
      last_poll_ = DateTime{clock_->wall_ms()};  // before the report, which carries it
    }
    if (options_.report_status) report_status();
  }
  if (second != Event::None) fire(second);
  call(callbacks_.on_loop, "on_loop");
}

Elector::Event Elector::poll_locked() {
  const std::int64_t ttl = locker_->ttl_ms();
  const std::int64_t now = clock_->mono_ms();
  bool leader;
  std::optional<std::int64_t> deadline;
  {
    std::lock_guard<std::mutex> g(mu_);
    leader = leader_;
    deadline = renew_deadline_;
  }

  if (leader) {
    Event e = Event::None;
    const std::int64_t bound = locker_->storage().call_bound_ms();
    if (deadline && now >= *deadline) {
      log(LogLevel::Warning, "leader of " + options_.key + " missed its renew deadline: stepping down");
      e = Event::LostLeader;
    } else if (deadline && bound > 0 && now + bound > *deadline) {
      // A renewal started now could still hang at the deadline: wait for the deadline
      // instead and step down then (invariant 3).
      std::lock_guard<std::mutex> g(mu_);
      next_poll_mono_ = *deadline;
      return Event::None;
    } else {
      try {
        if (locker_->renew()) {
          auto lease_end = locker_->lease_deadline_mono();
          std::lock_guard<std::mutex> g(mu_);
          renew_deadline_ = *lease_end - margin_ms();
          next_poll_mono_ = now + ttl / 2;
          leader_exists_ = true;
          return Event::None;
        }
        log(LogLevel::Warning, "leader of " + options_.key + " lost its lock (taken over or expired)");
        e = Event::LostLeader;
      } catch (const std::exception& ex) {
        log(LogLevel::Error, "renewal of " + options_.key + " failed: " + ex.what());
        if (!deadline || clock_->mono_ms() >= *deadline) {
          e = Event::LostLeader;
        } else {
          std::lock_guard<std::mutex> g(mu_);
          next_poll_mono_ = clock_->mono_ms() + std::min<std::int64_t>(ttl / 10, 1000);
          return Event::None;
        }
      }
    }
    std::lock_guard<std::mutex> g(mu_);
    leader_ = false;
    renew_deadline_.reset();
    leader_exists_ = false;
    next_poll_mono_ = now;
    return e;
  }

  // Follower: one read; sleep until the leader's lease can expire, then one claim.
  try {
    std::optional<LockDoc> doc = locker_->storage().read(locker_->options().collection, options_.key);
    const std::int64_t server_now = locker_->server_now_ms();
    if (doc && doc->held_at(server_now)) {
      std::int64_t until_expiry = doc->ts_expire->ms - server_now;
      std::int64_t wait = std::min(ttl, until_expiry) + jitter_ms();
      std::lock_guard<std::mutex> g(mu_);
      leader_exists_ = true;
      next_poll_mono_ = now + std::max<std::int64_t>(wait, 1);
      return Event::None;
    }
    if (locker_->try_acquire(false)) {
      auto lease_end = locker_->lease_deadline_mono();
      std::lock_guard<std::mutex> g(mu_);
      leader_ = true;
      leader_exists_ = true;
      renew_deadline_ = *lease_end - margin_ms();
      next_poll_mono_ = now + ttl / 2;
      return Event::BecameLeader;
    }
    // Someone else won the race: its lease is about a full ttl.
    std::int64_t wait = ttl / 2 + jitter_ms();
    std::lock_guard<std::mutex> g(mu_);
    leader_exists_ = true;
    next_poll_mono_ = now + wait;
  } catch (const std::exception& ex) {
    log(LogLevel::Error, "poll of " + options_.key + " failed: " + ex.what());
    std::lock_guard<std::mutex> g(mu_);
    next_poll_mono_ = clock_->mono_ms() + std::min<std::int64_t>(ttl / 10, 1000) + 1;
  }
  return Event::None;
}

void Elector::report_status() {
  {
    // Like a renewal, a status write must not be able to hang past the renew deadline.
    const std::int64_t bound = locker_->storage().call_bound_ms();
    std::lock_guard<std::mutex> g(mu_);
    if (leader_ && renew_deadline_ && bound > 0 && clock_->mono_ms() + bound > *renew_deadline_)
      return;
  }
  try {
    locker_->storage().put_status(options_.status_collection, node_status());
  } catch (const std::exception& ex) {
    log(LogLevel::Error, "status report of " + options_.key + " failed: " + ex.what());
  }
}

void Elector::release() {
  bool was_leader;
  {
    std::lock_guard<std::mutex> g(poll_mu_);
    {
      std::lock_guard<std::mutex> s(mu_);
      was_leader = leader_;
      leader_ = false;
      renew_deadline_.reset();
    }
    if (was_leader || locker_->hold()) {
      try {
        locker_->release(false);
        std::lock_guard<std::mutex> s(mu_);
        leader_exists_ = false;
      } catch (const std::exception& ex) {
        log(LogLevel::Error, "release of " + options_.key + " failed: " + ex.what());
      }
    }
  }
  if (was_leader) fire(Event::LostLeader);
}

void Elector::fire(Event e) {
  if (e == Event::BecameLeader) {
    log(LogLevel::Info, "became leader of " + options_.key);
    call(callbacks_.on_leader, "on_leader");
  } else if (e == Event::LostLeader) {
    log(LogLevel::Info, "lost leadership of " + options_.key);
    call(callbacks_.on_leader_loss, "on_leader_loss");
  }
}

void Elector::call(const std::function<void()>& fn, const char* name) {
  if (!fn) return;
  try {
    fn();
  } catch (abi::__forced_unwind&) {
    throw;  // thread cancellation, not an error of the callback: must unwind
  } catch (const std::exception& ex) {
    log(LogLevel::Error, std::string(name) + " callback raised: " + ex.what());
  } catch (...) {
    log(LogLevel::Error, std::string(name) + " callback raised an unknown exception");
  }
}

bool Elector::running() const {
  std::lock_guard<std::mutex> g(mu_);
  return running_;
}

bool Elector::is_leader() {
  const std::int64_t now = clock_->mono_ms();
  std::lock_guard<std::mutex> g(mu_);
  return leader_ && renew_deadline_ && now < *renew_deadline_;
}

bool Elector::leader_exists() const {
  std::lock_guard<std::mutex> g(mu_);
  return leader_exists_;
}

double Elector::poll_wait() const {
  std::lock_guard<std::mutex> g(mu_);
  return leader_ ? options_.ttl_s / 2 : options_.ttl_s;
}

std::int64_t Elector::next_poll_mono() const {
  std::lock_guard<std::mutex> g(mu_);
  return next_poll_mono_;
}

std::optional<std::int64_t> Elector::renew_deadline_mono() const {
  std::lock_guard<std::mutex> g(mu_);
  return renew_deadline_;
}

std::optional<DateTime> Elector::last_poll() const {
  std::lock_guard<std::mutex> g(mu_);
  return last_poll_;
}

Document Elector::locker_status(Locker& locker) {
  bool owned = locker.owned();
  auto hold = locker.hold();
  Document d;
  d.set("uuid", locker.identity().uuid);
  d.set("key", locker.key());
  d.set("ttl", ttl_value(locker.ttl_s()));
  d.set("timestamp", DateTime{locker.server_now_ms()});
  d.set("host", locker.identity().host);
  d.set("pid", locker.identity().pid);
  d.set("lock_owned", owned);
  d.set("lock_created", owned && hold ? date_or_null(hold->created_ms) : Value(Null{}));
  d.set("lock_expires", owned && hold ? date_or_null(hold->expire_ms) : Value(Null{}));
  return d;
}

Document Elector::node_status() {
  // Built from local knowledge (no extra round trip): this node owns the lock exactly
  // while it leads.
  bool leading = is_leader();
  auto hold = locker_->hold();
  Document d;
  d.set("uuid", locker_->identity().uuid);
  d.set("key", locker_->key());
  d.set("ttl", ttl_value(locker_->ttl_s()));
  d.set("timestamp", DateTime{locker_->server_now_ms()});
  d.set("host", locker_->identity().host);
  d.set("pid", locker_->identity().pid);
  d.set("lock_owned", leading);
  d.set("lock_created", leading && hold ? date_or_null(hold->created_ms) : Value(Null{}));
  d.set("lock_expires", leading && hold ? date_or_null(hold->expire_ms) : Value(Null{}));
  d.set("_id", locker_->identity().uuid);
  d.set("is_leader", leading);
  d.set("elector_running", running());
  auto lp = last_poll();
  d.set("last_poll", lp ? Value(*lp) : Value(Null{}));
  if (options_.app_version) d.set("app_version", *options_.app_version);
  return d;
}

Elector::ClusterDetail Elector::cluster_detail() {
  ClusterDetail cd;
  cd.member_detail = locker_->storage().list_status(options_.status_collection, options_.key);
  for (auto& doc : cd.member_detail) doc.erase("_id");
  cd.leader = locker_->current();
  cd.timestamp = DateTime{locker_->server_now_ms()};
  return cd;
}

}  // namespace mongoelector
