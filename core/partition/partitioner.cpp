#include "partitioner.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <exception>

#include "../exceptions.h"
#include "../log.h"
#include "../user_code.h"
#include "rendezvous.h"

namespace mongoelector {

// This partitioner's callbacks, run one at a time in the order they were posted, on the
// clock's callback dispatcher: one CallbackJob drains the queue while it is not empty
// (so a slow callback delays only this partitioner's next ones).
class Partitioner::Strand : public std::enable_shared_from_this<Partitioner::Strand> {
 public:
  explicit Strand(std::shared_ptr<Clock> clock) : clock_(std::move(clock)) {}

  // Queues `fn` after every callback queued before it. Returns the drain job to hand to
  // the dispatcher (post_job), outside any lock of the caller's, or null when a drain
  // under way takes it: the order is the order of the calls to enqueue().
  std::shared_ptr<CallbackJob> enqueue(std::function<void()> fn) {
    std::lock_guard<std::mutex> g(mu_);
    queue_.push_back(std::move(fn));
    if (job_) return nullptr;
    auto self = shared_from_this();
    job_ = std::make_shared<CallbackJob>([self] { self->drain(); });
    return job_;
  }
  void post_job(std::shared_ptr<CallbackJob> job) {
    if (job) clock_->dispatcher().post(std::move(job));
  }

  // Until every callback posted so far (and any posted meanwhile) has returned, running
  // them on this thread when no dispatcher thread has begun them. Not from a callback.
  void finish() {
    for (;;) {
      std::shared_ptr<CallbackJob> job;
      {
        std::lock_guard<std::mutex> g(mu_);
        job = job_;
      }
      if (!job || job->running_here()) return;
      job->finish(*clock_);
      std::lock_guard<std::mutex> g(mu_);
      if (job_ == job) job_.reset();  // ended without finding the queue empty (cancelled)
    }
  }

  // True on the thread running one of these callbacks.
  bool running_here() {
    std::lock_guard<std::mutex> g(mu_);
    return draining_ && runner_ == std::this_thread::get_id();
  }

 private:
  void drain() {
    for (;;) {
      std::function<void()> fn;
      {
        std::lock_guard<std::mutex> g(mu_);
        if (queue_.empty()) {
          job_.reset();
          draining_ = false;
          return;
        }
        fn = std::move(queue_.front());
        queue_.pop_front();
        draining_ = true;
        runner_ = std::this_thread::get_id();
      }
      fn();  // each one reports its own errors (call_user_code)
    }
  }

  std::shared_ptr<Clock> clock_;
  std::mutex mu_;
  std::deque<std::function<void()>> queue_;
  std::shared_ptr<CallbackJob> job_;  // the drain posted and not yet over
  bool draining_ = false;
  std::thread::id runner_;
};

namespace {

constexpr std::int64_t kClockRefreshMs = 60 * 1000;

PartitionerOptions validated(PartitionerOptions o, const std::shared_ptr<Storage>& storage) {
  validate_group(o.group, o.partitions);
  if (!std::isfinite(o.ttl_s) || o.ttl_s <= 0 || o.ttl_s > 1e9)
    throw InvalidArgument("ttl must be a finite number of seconds > 0");
  if (o.poll_s && (!std::isfinite(*o.poll_s) || *o.poll_s <= 0 || *o.poll_s > o.ttl_s / 2))
    throw InvalidArgument(
        "poll must be a finite number of seconds in (0, ttl/2] (a member's report lives one "
        "ttl), got " +
        std::to_string(*o.poll_s));
  validate_collection(o.collections.locks);
  validate_collection(o.collections.members);
  if (o.collections.locks == o.collections.members)
    throw InvalidArgument("the partitions' locks and the members' reports need two collections, " +
                          o.collections.locks + " was given for both");
  Storage& s = require_storage(storage);
  if (s.call_bound_ms() <= 0 && !o.allow_unbounded_calls)
    throw InvalidArgument(
        "the storage cannot bound the time of one call (a driver timeout set to 0?), so a "
        "hung call could outlive a lease; set finite timeouts, or allow_unbounded_calls to "
        "accept the risk");
  return o;
}

std::int64_t half_rtt_cap_ms(double ttl_s) {  // as every hold's (hold_state.cpp)
  return std::max<std::int64_t>(1, std::llround(ttl_s * 250.0));
}

}  // namespace

Partitioner::Partitioner(std::shared_ptr<Storage> storage, PartitionerOptions options,
                         PartitionerCallbacks callbacks, std::shared_ptr<Clock> clock,
                         Identity identity)
    : options_(validated(std::move(options), storage)),
      callbacks_(std::move(callbacks)),
      storage_(std::move(storage)),
      clock_(clock_or_storage_clock(std::move(clock), storage_)),
      identity_(std::move(identity)),
      ttl_ms_(std::llround(options_.ttl_s * 1000.0)),
      poll_ms_(std::max<std::int64_t>(
          1, options_.poll_s ? std::llround(*options_.poll_s * 1000.0) : ttl_ms_ / 3)),
      server_clock_(clock_, *storage_, kClockRefreshMs, half_rtt_cap_ms(options_.ttl_s)),
      strand_(std::make_shared<Strand>(clock_)),
      slots_(static_cast<std::size_t>(options_.partitions)),
      rng_(clock_->next_random_seed().value_or(std::random_device{}())) {
  if (identity_.uuid.empty()) throw InvalidArgument("the member's uuid must not be empty");
  validate_key(identity_.uuid);
  if (options_.ensure_indexes) {
    storage_->ensure_lock_indexes(options_.collections.locks);
    storage_->ensure_status_indexes(
        options_.collections.members,
        std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(options_.ttl_s))));
  }
}

Partitioner::~Partitioner() {
  if (strand_->running_here()) {
    // A broken precondition (see the header): the callback still runs on this object.
    log(LogLevel::Error, "Partitioner destroyed from its own callback; aborting");
    std::abort();
  }
  stop();
  strand_->finish();  // no callback of ours may run after this object
}

LogFields Partitioner::log_fields(LogEvent event, std::int64_t p, std::int64_t fence) const {
  LogFields f;
  f.event = event;
  f.key = p < 0 ? options_.group : partition_key(options_.group, p);
  f.fence = fence;
  f.uuid = identity_.uuid;
  f.host = identity_.host;
  return f;
}

std::int64_t Partitioner::jitter_ms() {
  const std::int64_t span = std::min<std::int64_t>(poll_ms_ / 10, 500);
  if (span <= 0) return 0;
  std::lock_guard<std::mutex> g(mu_);
  return std::uniform_int_distribution<std::int64_t>(0, span)(rng_);
}

// ---- lifecycle ------------------------------------------------------------------------

void Partitioner::check_group() {
  const std::vector<Document> reports =
      storage_->list_status(options_.collections.members, options_.group);
  const ServerTime t = server_clock_.estimate_sampling();
  const GroupView v = read_group(reports, options_.group, options_.partitions, t.earliest_ms());
  if (v.conflicts.empty()) return;
  std::string more;
  if (v.conflicts.size() > 1) more = " (and " + std::to_string(v.conflicts.size() - 1) + " more)";
  throw InvalidArgument("cannot join group '" + options_.group + "': " + v.conflicts[0] + more);
}

void Partitioner::start() {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (running_) return;
  }
  check_group();  // before anything is written
  start_loop();
}

void Partitioner::start_loop() {
  std::lock_guard<std::mutex> g(mu_);
  if (running_) return;
  if (thread_.joinable()) {
    if (thread_.get_id() == std::this_thread::get_id()) return;
    thread_.join();
  }
  stop_requested_ = false;
  running_ = true;  // before the thread runs: running() is true on return
  thread_ = start_clock_thread(*clock_, [this] { run_loop(); });
}

void Partitioner::run_loop() {
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
    while (!stop_requested_) {
      if (work_) {  // a loss, or an on_revoked that returned: settle it now
        lk.unlock();
        settle_leases();
        lk.lock();
        continue;
      }
      if (clock_->mono_ms() >= next_poll_mono_) break;
      clock_->wait_until(lk, cv_, next_poll_mono_, [this] { return stop_requested_ || work_; });
    }
  }
  leave();
  {
    std::lock_guard<std::mutex> g(mu_);
    running_ = false;
    loop_thread_id_ = std::thread::id();
  }
  cv_.notify_all();
}

void Partitioner::request_stop() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_requested_ = true;
  }
  cv_.notify_all();
}

void Partitioner::stop() {
  const bool in_callback = strand_->running_here();
  bool own_thread, looping;
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_requested_ = true;
    own_thread = loop_thread_id_ == std::this_thread::get_id();
    looping = loop_thread_id_ != std::thread::id();
  }
  cv_.notify_all();
  // From a callback: the loop (or the destructor, or a later stop()) leaves once it
  // has returned -- waiting here would wait for this very callback.
  if (in_callback || own_thread) return;
  if (thread_.joinable()) {
    thread_.join();      // the loop left on its way out
  } else if (looping) {  // run_loop() on another thread of the caller's
    std::unique_lock<std::mutex> lk(mu_);
    clock_->wait_for_work(lk, cv_, [this] { return !running_; });
  }
  leave();  // nothing left to do when the loop left; else (never looped) leave now
}

bool Partitioner::in_callback() const { return strand_->running_here(); }

bool Partitioner::running() const {
  std::lock_guard<std::mutex> g(mu_);
  return running_;
}

std::int64_t Partitioner::next_poll_mono() const {
  std::lock_guard<std::mutex> g(mu_);
  return next_poll_mono_;
}

// ---- one poll -------------------------------------------------------------------------

void Partitioner::poll() {
  std::lock_guard<std::mutex> pg(poll_mu_);
  {
    std::lock_guard<std::mutex> g(mu_);
    if (stop_requested_) return;
    left_ = false;  // from the first report on, leaving has something to say
  }
  const std::int64_t start = clock_->mono_ms();
  settle_leases_locked();
  bool reported = false;
  try {
    report(true);
    reported = true;
  } catch (const std::exception& ex) {
    log(LogLevel::Warning,
        "report of member " + identity_.uuid + " of group " + options_.group +
            " failed: " + ex.what(),
        log_fields(LogEvent::None));
  }
  if (const std::optional<std::vector<std::string>> live = read_members(reported)) {
    const std::vector<std::int64_t> to_claim = apply_assignment(*live);
    const std::int64_t budget_end = start + std::max<std::int64_t>(1, poll_ms_ / 2);
    for (const std::int64_t p : to_claim) {
      {
        std::lock_guard<std::mutex> g(mu_);
        if (stop_requested_) break;
      }
      if (clock_->mono_ms() >= budget_end) break;  // the rest at the next poll
      try {
        claim(p);
      } catch (const StorageUnavailable& ex) {
        log(LogLevel::Warning,
            "claim of partition " + partition_key(options_.group, p) + " failed: " + ex.what(),
            log_fields(LogEvent::None, p));
        break;  // the server does not answer: the others at the next poll
      } catch (const std::exception& ex) {
        log(LogLevel::Warning,
            "claim of partition " + partition_key(options_.group, p) + " failed: " + ex.what(),
            log_fields(LogEvent::None, p));
      }
    }
  }
  const std::int64_t next = clock_->mono_ms() + poll_ms_ - std::min(poll_ms_ / 2, jitter_ms());
  std::lock_guard<std::mutex> g(mu_);
  next_poll_mono_ = std::max(next, start + 1);
}

void Partitioner::report(bool running) {
  const ServerTime t = server_clock_.estimate_sampling();
  MemberReportFields f;
  f.group = options_.group;
  f.uuid = identity_.uuid;
  f.host = identity_.host;
  f.pid = identity_.pid;
  f.partitions = options_.partitions;
  f.ttl_s = options_.ttl_s;
  f.running = running;
  f.now_ms = t.now_ms;
  f.expire_ms = running ? t.now_ms + ttl_ms_ : t.now_ms;
  storage_->put_status(options_.collections.members, member_report(f));
}

std::optional<std::vector<std::string>> Partitioner::read_members(bool reported) {
  GroupView v;
  try {
    const std::vector<Document> reports =
        storage_->list_status(options_.collections.members, options_.group);
    const ServerTime t = server_clock_.estimate_sampling();
    v = read_group(reports, options_.group, options_.partitions, t.earliest_ms());
  } catch (const std::exception& ex) {
    log(LogLevel::Warning,
        "reading the members of group " + options_.group + " failed: " + ex.what(),
        log_fields(LogEvent::None));
    return std::nullopt;
  }
  for (const std::string& c : v.conflicts) {
    bool said;
    {
      std::lock_guard<std::mutex> g(mu_);
      said = std::find(logged_conflicts_.begin(), logged_conflicts_.end(), c) !=
             logged_conflicts_.end();
      if (!said) logged_conflicts_.push_back(c);
    }
    if (!said)
      log(LogLevel::Error, "group " + options_.group + ": " + c + " (ignored)",
          log_fields(LogEvent::None));
  }
  if (reported && !std::binary_search(v.live.begin(), v.live.end(), identity_.uuid))
    v.live.insert(std::lower_bound(v.live.begin(), v.live.end(), identity_.uuid), identity_.uuid);
  return v.live;
}

std::vector<std::int64_t> Partitioner::apply_assignment(const std::vector<std::string>& live) {
  const std::vector<int> owner = rendezvous_assign(live, options_.partitions);
  int self = -1;
  for (std::size_t i = 0; i < live.size(); ++i)
    if (live[i] == identity_.uuid) self = static_cast<int>(i);
  std::vector<std::int64_t> to_claim;
  Jobs jobs;
  {
    std::lock_guard<std::mutex> g(mu_);
    live_ = live;
    assignment_.assign(static_cast<std::size_t>(options_.partitions), std::string());
    for (std::int64_t p = 0; p < options_.partitions; ++p) {
      const int o = owner[static_cast<std::size_t>(p)];
      if (o >= 0) assignment_[static_cast<std::size_t>(p)] = live[static_cast<std::size_t>(o)];
      const bool mine = o >= 0 && o == self;
      Slot& s = slots_[static_cast<std::size_t>(p)];
      if (s.lease) {
        // No longer ours: on_revoked first; its return lets settle_leases() release it.
        if (!mine && s.revoke == Revoke::None && !s.releasing && !s.lease->lost()) {
          s.revoke = Revoke::Queued;
          jobs.push_back(post_revoked(p, s.gen));
        }
      } else if (mine && !s.foreign) {
        to_claim.push_back(p);
      }
    }
  }
  post_jobs(jobs);
  return to_claim;
}

std::shared_ptr<Locker> Partitioner::locker_for(std::int64_t p) {
  {
    std::lock_guard<std::mutex> g(mu_);
    Slot& s = slots_[static_cast<std::size_t>(p)];
    if (s.locker) return s.locker;
  }
  LockerOptions lo;
  lo.key = partition_key(options_.group, p);
  lo.collection = options_.collections.locks;
  lo.ttl_s = options_.ttl_s;
  lo.timeparanoid = false;    // every expiry is on the server's clock (server_clock.h)
  lo.ensure_indexes = false;  // once, by the constructor
  lo.allow_unbounded_calls = options_.allow_unbounded_calls;
  // One Locker per partition for the member's lifetime, named by the member's uuid: the
  // lock documents show the owner, and a hold left stranded by a loss is settled by the
  // same Locker's next claim (its stranded-hold rules need one instance per key).
  auto locker = std::make_shared<Locker>(storage_, lo, clock_, identity_);
  std::lock_guard<std::mutex> g(mu_);
  Slot& s = slots_[static_cast<std::size_t>(p)];
  if (!s.locker) s.locker = std::move(locker);
  return s.locker;
}

void Partitioner::claim(std::int64_t p) {
  const std::shared_ptr<Locker> locker = locker_for(p);
  const std::string key = partition_key(options_.group, p);
  bool checked;
  {
    std::lock_guard<std::mutex> g(mu_);
    checked = slots_[static_cast<std::size_t>(p)].checked;
  }
  if (!checked) {
    // Once per partition: a key that holds another kind of document is never claimed
    // (the claim's update would write into it).
    const std::optional<LockDoc> doc = storage_->read(options_.collections.locks, key);
    if (doc) {
      if (const std::optional<std::string> foreign = foreign_lock_document(*doc)) {
        {
          std::lock_guard<std::mutex> g(mu_);
          slots_[static_cast<std::size_t>(p)].foreign = true;
        }
        log(LogLevel::Error, "group " + options_.group + ": " + *foreign,
            log_fields(LogEvent::None, p));
        return;
      }
    }
    std::lock_guard<std::mutex> g(mu_);
    slots_[static_cast<std::size_t>(p)].checked = true;
  }
  const std::optional<std::int64_t> token = locker->try_acquire(false);
  if (!token) return;  // held: its owner releases it once it sees the assignment
  std::uint64_t gen;
  {
    std::lock_guard<std::mutex> g(mu_);
    Slot& s = slots_[static_cast<std::size_t>(p)];
    gen = ++next_gen_;
    s.gen = gen;
    s.revoke = Revoke::None;
    s.announced = false;
    s.releasing = false;
  }
  std::unique_ptr<KeepAliveLease> lease;
  try {
    lease = std::make_unique<KeepAliveLease>(locker, [this, p, gen] { on_lost(p, gen); });
  } catch (const std::exception& ex) {
    // Won too late to keep (the lease released it): nobody was told.
    log(LogLevel::Warning, "partition " + key + " was won too late to keep: " + ex.what(),
        log_fields(LogEvent::None, p));
    return;
  }
  log(LogLevel::Info,
      "member " + identity_.uuid + " owns partition " + key + " (token " +
          std::to_string(lease->fence()) + ")",
      log_fields(LogEvent::None, p, lease->fence()));
  Jobs jobs;
  {
    std::lock_guard<std::mutex> g(mu_);
    Slot& s = slots_[static_cast<std::size_t>(p)];
    const std::int64_t fence = lease->fence();
    s.lease = std::move(lease);
    if (s.revoke == Revoke::ByLoss) {
      work_ = true;  // lost before anyone was told: closed by settle_leases(), never announced
      cv_.notify_all();
      return;
    }
    s.announced = true;
    jobs.push_back(post_assigned(p, fence));
  }
  post_jobs(jobs);
}

void Partitioner::on_lost(std::int64_t p, std::uint64_t gen) {
  // The lease's on_lost, on a dispatcher thread: after the lease's loss (its renew
  // deadline, or a renewal that found the lock taken). Queues on_revoked if on_assigned
  // was queued and no on_revoked is; settle_leases() closes the lease.
  Jobs jobs;
  {
    std::lock_guard<std::mutex> g(mu_);
    Slot& s = slots_[static_cast<std::size_t>(p)];
    if (s.gen != gen) return;
    if (s.revoke == Revoke::None) {
      s.revoke = Revoke::ByLoss;
      if (s.announced) jobs.push_back(post_revoked(p, 0));
    }
    work_ = true;
    cv_.notify_all();
  }
  post_jobs(jobs);
}

void Partitioner::post_jobs(Jobs& jobs) {
  for (auto& job : jobs) strand_->post_job(std::move(job));
  jobs.clear();
}

std::shared_ptr<CallbackJob> Partitioner::post_assigned(std::int64_t p, std::int64_t token) {
  auto fn = callbacks_.on_assigned;
  const LogFields f = log_fields(LogEvent::CallbackFailed, p, token);
  return strand_->enqueue([fn, p, token, f] {
    call_user_code(
        [&] {
          if (fn) fn(p, token);
        },
        [&](const char* what) {
          log(LogLevel::Error,
              what ? std::string("on_assigned callback raised: ") + what
                   : std::string("on_assigned callback raised an unknown exception"),
              f);
        });
  });
}

std::shared_ptr<CallbackJob> Partitioner::post_revoked(std::int64_t p, std::uint64_t gen) {
  auto fn = callbacks_.on_revoked;
  const LogFields f = log_fields(LogEvent::CallbackFailed, p);
  return strand_->enqueue([this, fn, p, gen, f] {
    call_user_code(
        [&] {
          if (fn) fn(p);
        },
        [&](const char* what) {
          log(LogLevel::Error,
              what ? std::string("on_revoked callback raised: ") + what
                   : std::string("on_revoked callback raised an unknown exception"),
              f);
        });
    if (gen == 0) return;  // a loss: nothing to release
    // A graceful revoke: the release may go now (the loop sends it).
    std::lock_guard<std::mutex> g(mu_);
    Slot& s = slots_[static_cast<std::size_t>(p)];
    if (s.gen == gen && s.revoke == Revoke::Queued) {
      s.revoke = Revoke::Done;
      work_ = true;
      cv_.notify_all();
    }
  });
}

void Partitioner::settle_leases() {
  std::lock_guard<std::mutex> pg(poll_mu_);
  settle_leases_locked();
}

void Partitioner::settle_leases_locked() {
  std::vector<std::int64_t> due;
  {
    std::lock_guard<std::mutex> g(mu_);
    work_ = false;
    for (std::int64_t p = 0; p < options_.partitions; ++p) {
      Slot& s = slots_[static_cast<std::size_t>(p)];
      if (!s.lease || s.releasing) continue;
      if (s.lease->lost() || s.revoke == Revoke::Done) {
        s.releasing = true;  // no longer believed from here on, before the release is sent
        due.push_back(p);
      }
    }
  }
  for (const std::int64_t p : due) close_lease(p);
}

void Partitioner::close_lease(std::int64_t p) {
  KeepAliveLease* lease;
  {
    std::lock_guard<std::mutex> g(mu_);
    lease = slots_[static_cast<std::size_t>(p)].lease.get();
  }
  if (!lease) return;
  const bool lost = lease->lost();
  const std::int64_t fence = lease->fence();
  try {
    lease->close();  // fenced release unless lost; waits for a renewal in flight and on_lost
  } catch (const std::exception& ex) {
    log(LogLevel::Warning,
        "release of partition " + partition_key(options_.group, p) + " failed: " + ex.what(),
        log_fields(LogEvent::ReleaseFailed, p, fence));
  }
  log(LogLevel::Info,
      "member " + identity_.uuid + (lost ? " lost partition " : " released partition ") +
          partition_key(options_.group, p) + " (token " + std::to_string(fence) + ")",
      log_fields(lost ? LogEvent::LeaseLost : LogEvent::None, p, fence));
  std::unique_ptr<KeepAliveLease> gone;
  {
    std::lock_guard<std::mutex> g(mu_);
    Slot& s = slots_[static_cast<std::size_t>(p)];
    gone = std::move(s.lease);
    s.releasing = false;
    s.revoke = Revoke::None;
    s.announced = false;
  }
}

void Partitioner::leave() {
  std::lock_guard<std::mutex> pg(poll_mu_);
  bool reported;
  Jobs jobs;
  {
    std::lock_guard<std::mutex> g(mu_);
    reported = !left_;
    left_ = true;
    // on_revoked for every partition held (a lost one has had its own, or gets it when
    // its loss is announced).
    for (std::int64_t p = 0; p < options_.partitions; ++p) {
      Slot& s = slots_[static_cast<std::size_t>(p)];
      if (s.lease && !s.releasing && s.revoke == Revoke::None && !s.lease->lost()) {
        s.revoke = Revoke::Queued;
        jobs.push_back(post_revoked(p, s.gen));
      }
    }
  }
  post_jobs(jobs);
  // First the report (others reassign at once), then the releases as on_revoked returns.
  if (reported) {
    try {
      report(false);
    } catch (const std::exception& ex) {
      log(LogLevel::Warning,
          "the leave report of member " + identity_.uuid +
              " failed (it expires at its ttl): " + ex.what(),
          log_fields(LogEvent::None));
    }
  }
  strand_->finish();  // every on_revoked has returned
  std::vector<std::int64_t> held;
  {
    std::lock_guard<std::mutex> g(mu_);
    work_ = false;
    for (std::int64_t p = 0; p < options_.partitions; ++p) {
      Slot& s = slots_[static_cast<std::size_t>(p)];
      if (s.lease && !s.releasing) {
        s.releasing = true;
        held.push_back(p);
      }
    }
  }
  for (const std::int64_t p : held) close_lease(p);
  // A lost lease's on_revoked, posted by close(): run before stop() returns.
  strand_->finish();
}

// ---- what this member knows ------------------------------------------------------------

std::map<std::int64_t, std::int64_t> Partitioner::owned() {
  std::map<std::int64_t, std::int64_t> out;
  std::lock_guard<std::mutex> g(mu_);
  for (std::int64_t p = 0; p < options_.partitions; ++p) {
    const Slot& s = slots_[static_cast<std::size_t>(p)];
    if (s.lease && !s.releasing && !s.lease->lost()) out.emplace(p, s.lease->fence());
  }
  return out;
}

std::optional<std::int64_t> Partitioner::token(std::int64_t partition) {
  if (partition < 0 || partition >= options_.partitions)
    throw InvalidArgument("partition must be in [0, " + std::to_string(options_.partitions) +
                          "), got " + std::to_string(partition));
  std::lock_guard<std::mutex> g(mu_);
  const Slot& s = slots_[static_cast<std::size_t>(partition)];
  if (s.lease && !s.releasing && !s.lease->lost()) return s.lease->fence();
  return std::nullopt;
}

std::vector<std::string> Partitioner::assignment() const {
  std::lock_guard<std::mutex> g(mu_);
  return assignment_;
}

std::vector<std::string> Partitioner::members() const {
  std::lock_guard<std::mutex> g(mu_);
  return live_;
}

PartitionStatus Partitioner::status() {
  return partition_status(*storage_, options_.collections, options_.group, options_.partitions,
                          server_clock_.estimate_sampling());
}

}  // namespace mongoelector
