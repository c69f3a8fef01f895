#include "elector.h"

#include "../metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "../exceptions.h"
#include "../log.h"
#include "../user_code.h"

namespace mongoelector {

namespace {
Value ttl_value(double ttl_s) {  // also priorities
  // Keep an integral ttl an integer in status documents, as the original does.
  if (ttl_s == std::floor(ttl_s) && std::fabs(ttl_s) < 9e15)
    return static_cast<std::int64_t>(ttl_s);
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
      clock_(clock_or_storage_clock(clock, storage)),
      rng_(clock_ ? clock_->next_random_seed().value_or(std::random_device{}())
                  : std::random_device{}()) {
  if (options_.allow_unsafe_server)
    throw InvalidArgument(
        "allow_unsafe_server is refused for electors: on a server whose findAndModify is "
        "not atomic two nodes could both lead and their fencing tokens could repeat");
  validate_collection(options_.status_collection);  // before the locker's first round trip
  if (options_.handover_poll_s &&
      (!std::isfinite(*options_.handover_poll_s) || *options_.handover_poll_s < 0 ||
       *options_.handover_poll_s > 1e9))
    throw InvalidArgument("handover_poll must be a finite number of seconds in [0, 1e9]");
  validate_priority_options();
  if (!storage) throw InvalidArgument("storage must not be null");
  if (options_.payload) validate_payload(*options_.payload);
  payload_ = options_.payload;
  call_bound_ms_ = storage->call_bound_ms();
  if (call_bound_ms_ <= 0 && !options_.allow_unbounded_calls)
    throw InvalidArgument(
        "the storage cannot bound the time of one call (a driver timeout set to 0?), so a "
        "hung renewal could keep a node leading past its lease; set finite timeouts, or "
        "allow_unbounded_calls to accept the risk");
  LockerOptions lo;
  lo.key = options_.key;
  lo.collection = options_.lock_collection;
  lo.ttl_s = options_.ttl_s;
  lo.timeparanoid = true;  // checked before every claim (poll_follower)
  lo.allow_unsafe_server = false;
  lo.ensure_indexes = options_.ensure_indexes;
  lo.delete_on_release = options_.delete_on_release;
  lo.allow_unbounded_calls = options_.allow_unbounded_calls;
  locker_ = std::make_shared<Locker>(storage, lo, clock_, std::move(identity));
  // Every claim starts its term with this node's payload (or none), in the claim's own
  // write: a new term never shows the previous leader's payload.
  locker_->set_claim_payload([this] {
    std::lock_guard<std::mutex> g(payload_mu_);
    claim_version_ = payload_version_;
    return ClaimPayload{payload_, payload_version_};
  });
  // A leader renews at ttl/3 and must be done by the renew deadline (0.9 ttl).
  const std::int64_t bound = call_bound_ms_;
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
  // The deadline task points at this object: remove it, waiting if it is running
  // (unless this IS the task's thread, destroying the elector from on_leader_loss).
  DeadlineTimer::Id task;
  {
    std::lock_guard<std::mutex> g(mu_);
    task = deadline_task_;
    deadline_task_ = 0;
  }
  if (task) clock_->timer().cancel(task, /*wait=*/true);
  // A task that already began (its id cleared by on_deadline itself, or replaced by a
  // newer term's) may still be ending a term on the timer thread: it uses this object
  // until it returns.
  std::shared_ptr<CallbackJob> job;
  {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [this] { return deadline_tasks_running_ == 0; });
    job = std::move(loss_job_);
  }
  // Its announcement (on_leader_loss) too: run here if no dispatcher thread has begun it.
  if (job) {
    if (job->running_here()) {
      log(LogLevel::Error, "Elector destroyed from its own on_leader_loss; aborting");
      std::abort();
    }
    job->finish(*clock_);
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
  thread_ = start_clock_thread(*clock_, [this] { run_loop(); });
}

void Elector::run_loop() {
  {
    std::lock_guard<std::mutex> g(mu_);
    loop_thread_id_ = std::this_thread::get_id();
    running_ = true;
    // Priority leaders: a loop that starts again reports at its first poll (its last
    // report, at its stop, said it no longer runs).
    if (options_.priority) last_report_mono_ = -1;
  }
  for (;;) {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (stop_requested_) break;
    }
    poll();
    std::unique_lock<std::mutex> lk(mu_);
    std::int64_t wake = next_poll_mono_;
    // Wake at the renew deadline too (the timer announces the loss; the loop then tries
    // to take the lease back or release it as soon as the server answers).
    if (leader_) {
      if (auto d = renew_deadline_locked()) wake = std::min(wake, *d);
    }
    clock_->wait_until(lk, cv_, wake, [this] { return stop_requested_; });
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    running_ = false;
    loop_thread_id_ = std::thread::id();
  }
  release();
  // Priority leaders: a last report (elector_running: false) tells the leader at once
  // that this member no longer stands; else it would look live for up to 1.5 ttl.
  if (options_.priority && options_.report_status) report_status();
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

std::optional<std::int64_t> Elector::renew_deadline_locked() const {
  if (!leader_) return std::nullopt;
  auto lease = locker_->lease();  // locker mutex nested in mu_: the locker never calls back
  if (!lease || lease->fence != term_fence_) return std::nullopt;
  return lease->end_mono - term_margin_ms_;
}

bool Elector::fits_before_deadline(std::int64_t now, int calls) const {
  std::optional<std::int64_t> d;
  {
    std::lock_guard<std::mutex> g(mu_);
    d = renew_deadline_locked();
  }
  if (!d) return false;
  return call_bound_ms_ <= 0 || now + calls * call_bound_ms_ <= *d;
}

void Elector::schedule_deadline_locked(std::int64_t deadline) {
  cancel_deadline_locked();
  const std::uint64_t term = term_;
  deadline_task_ = clock_->timer().schedule(deadline, [this, term] { on_deadline(term); });
}

void Elector::cancel_deadline_locked() {
  // Never waits: the task takes mu_, which the caller holds.
  if (deadline_task_) clock_->timer().cancel(deadline_task_, /*wait=*/false);
  deadline_task_ = 0;
}

void Elector::on_deadline(std::uint64_t term) {
  // Counted while it runs: ~Elector waits for every task that began (see there).
  struct Running {
    Elector* e;
    explicit Running(Elector* el) : e(el) {
      std::lock_guard<std::mutex> g(e->mu_);
      ++e->deadline_tasks_running_;
    }
    ~Running() {
      // Notified under the mutex: ~Elector, waiting on cv_, cannot see the count reach
      // 0 and destroy cv_ while this notify is still running.
      std::lock_guard<std::mutex> g(e->mu_);
      --e->deadline_tasks_running_;
      e->cv_.notify_all();
    }
  } running(this);
  announce_deadline(term);
}

void Elector::announce_deadline(std::uint64_t term) {
  std::shared_ptr<CallbackJob> job;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!leader_ || term_ != term) return;
    auto d = renew_deadline_locked();
    if (d && clock_->mono_ms() < *d) return;  // moved by a renewal (its own task is queued)
    leader_ = false;
    leader_exists_ = false;
    deadline_task_ = 0;
    loss_in_progress_ = true;
    next_poll_mono_ = clock_->mono_ms();
    const std::int64_t fence = term_fence_;
    // The term has ended (is_leader() read the clock anyway). The news, log lines and
    // on_leader_loss, is user code: it runs on the clock's callback dispatcher, never on
    // the timer's thread, where a slow callback would hold back every other elector's
    // and lease's announcement (callback_dispatcher.h). Until it has run, no new term
    // begins (loss_in_progress_): on_leader never overtakes on_leader_loss.
    job = std::make_shared<CallbackJob>([this, fence] {
      log(LogLevel::Warning,
          "leader of " + options_.key + " reached its renew deadline: stepping down",
          log_fields(LogEvent::StepDown, fence));
      fire(Event::LostLeader);
      // Kept visible to the callback (locker().hold()); now it may still be ours on the
      // server: the loop takes it back or releases it.
      locker_->strand(fence);
      // Notified under the mutex: once it is released a new term may begin, whose own
      // announcement is the one ~Elector waits for; nothing here touches the object after.
      std::lock_guard<std::mutex> s(mu_);
      loss_in_progress_ = false;
      cv_.notify_all();
    });
    loss_job_ = job;
  }
  cv_.notify_all();
  metrics::record_step_down();
  clock_->dispatcher().post(std::move(job));
}

bool Elector::end_term() {
  std::lock_guard<std::mutex> g(mu_);
  if (!leader_) return false;  // the timer (or release()) ended it and announced it
  leader_ = false;
  leader_exists_ = false;
  cancel_deadline_locked();
  return true;  // the hold is stranded after the announcement (poll)
}

bool Elector::lock_for_poll(std::unique_lock<std::timed_mutex>& lk) {
  std::optional<std::int64_t> d;
  {
    std::lock_guard<std::mutex> g(mu_);
    d = renew_deadline_locked();
  }
  if (!d) {
    lk.lock();
    return true;
  }
  if (!clock_->try_lock_until(poll_mu_, *d)) return false;
  lk = std::unique_lock<std::timed_mutex>(poll_mu_, std::adopt_lock);
  return true;
}

void Elector::retry_soon() {
  const std::int64_t backoff =
      std::max<std::int64_t>(1, std::min<std::int64_t>(locker_->ttl_ms() / 20, 250));
  std::lock_guard<std::mutex> g(mu_);
  next_poll_mono_ = clock_->mono_ms() + backoff;
}

void Elector::poll() {
  std::unique_lock<std::timed_mutex> lk(poll_mu_, std::defer_lock);
  if (!lock_for_poll(lk)) {
    log(LogLevel::Warning,
        "poll of " + options_.key + " waited for another thread until its renew deadline");
    retry_soon();
    return;
  }
  Event first = poll_locked();
  Event second = first;
  if (first == Event::LostLeader) {
    std::int64_t fence;
    {
      std::lock_guard<std::mutex> g(mu_);
      fence = term_fence_;
    }
    // Tell the application at once, before any further I/O that might hang.
    lk.unlock();
    fire(first);
    // The hold may still be ours on the server: keep it as stranded (retaken or released
    // by the next poll_locked()).
    locker_->strand(fence);
    // Then look for a leader in the same cycle, as the original does (and take a
    // stranded lease back at once if it is still ours).
    lk.lock();
    second = poll_locked();
  }
  {
    std::lock_guard<std::mutex> s(mu_);
    last_poll_ = DateTime{clock_->wall_ms()};  // before the report, which carries it
  }
  if (payload_dirty() && fits_before_deadline(clock_->mono_ms(), 1)) {
    // A payload the term's document may lack (set_payload during the claim, a failed
    // write, a hand-over taken, a hold retaken): one fenced write.
    try {
      sync_payload();
    } catch (const std::exception& ex) {
      log(LogLevel::Warning, "payload write of " + options_.key + " failed: " + ex.what(),
          log_fields(LogEvent::None));
    }
  }
  if (options_.report_status) {
    // Peeks (handover_poll_s) do not multiply status writes: a follower reports at most
    // every T/2 unless something changed.
    bool due;
    {
      std::lock_guard<std::mutex> s(mu_);
      due = leader_ || first != Event::None || second != Event::None || last_report_mono_ < 0 ||
            clock_->mono_ms() - last_report_mono_ >= locker_->ttl_ms() / 2;
    }
    if (due) report_status();
  }
  // Priority leaders: after the renewal and the report, never inside their budgets.
  std::optional<std::string> hand_to;
  if (options_.priority && second == Event::None) hand_to = priority_poll();
  lk.unlock();
  if (second != Event::None) fire(second);
  if (hand_to) transfer_to_priority(*hand_to);  // takes poll_mu_ itself
  call(callbacks_.on_loop, "on_loop");
}

Elector::Event Elector::poll_locked() {
  bool leader;
  {
    std::lock_guard<std::mutex> g(mu_);
    leader = leader_;
  }
  const std::int64_t now = clock_->mono_ms();
  return leader ? poll_leader(now) : poll_follower(now);
}

Elector::Event Elector::poll_leader(std::int64_t now) {
  std::optional<std::int64_t> deadline;
  {
    std::lock_guard<std::mutex> g(mu_);
    deadline = renew_deadline_locked();
  }
  if (!deadline) {
    log(LogLevel::Warning, "leader of " + options_.key + " no longer holds its lock (released)",
        log_fields(LogEvent::LeaderLost));
    return end_term() ? Event::LostLeader : Event::None;
  }
  if (now >= *deadline) {
    log(LogLevel::Warning,
        "leader of " + options_.key + " missed its renew deadline: stepping down",
        log_fields(LogEvent::StepDown));
    metrics::record_step_down();
    return end_term() ? Event::LostLeader : Event::None;
  }
  // A stale clock sample is refreshed as a call of its own, only when it and the renewal
  // both fit before the deadline (never inside the renewal's budget).
  if (locker_->server_clock().stale() && fits_before_deadline(now, 2)) {
    try {
      if (locker_->refresh_clock()) {  // a jump: the lease was written on the old base
        log(LogLevel::Warning,
            "leader of " + options_.key + " steps down: the server's clock jumped",
            log_fields(LogEvent::ClockJump));
        metrics::record_step_down();
        return end_term() ? Event::LostLeader : Event::None;
      }
    } catch (const std::exception& ex) {
      log(LogLevel::Error, "clock sample for " + options_.key + " failed: " + ex.what());
      retry_soon();
      return Event::None;
    }
    now = clock_->mono_ms();
  }
  // A renewal is started whenever the deadline has not passed, even one that could
  // still be running then: the timer announces the loss at the deadline whatever the
  // call does, and a renewal that lands late can only extend a lease this node still
  // holds (its filter names uuid, fence and an unexpired ts_expire, its write is
  // monotonic -- $max, Storage::renew -- and the lease counts from the send), which the
  // loop then takes back or releases. Stopping earlier, when
  // a whole call bound no longer fits, would turn every server pause longer than
  // ttl - (ttl/3 + margin + bound) into a lost leadership (issue #7, hole 2).
  try {
    std::optional<std::int64_t> lease_end = locker_->renew();
    if (!lease_end) {
      log(LogLevel::Warning,
          "leader of " + options_.key + " lost its lock (taken over, expired or released)",
          log_fields(LogEvent::LeaderLost));
      return end_term() ? Event::LostLeader : Event::None;
    }
    const std::int64_t margin = locker_->renew_margin_ms();
    std::lock_guard<std::mutex> g(mu_);
    if (!leader_) return Event::None;  // the timer ended the term while the call ran
    term_margin_ms_ = margin;
    schedule_deadline_locked(*lease_end - margin);
    next_poll_mono_ = now + locker_->ttl_ms() / 3;
    leader_exists_ = true;
    return Event::None;
  } catch (const std::exception& ex) {
    // Keep trying, with short pauses, for as long as a call fits before the deadline.
    log(LogLevel::Warning, "renewal of " + options_.key + " failed: " + ex.what(),
        log_fields(LogEvent::RenewFailed));
    retry_soon();
    return Event::None;
  }
}

Elector::Event Elector::poll_follower(std::int64_t now) {
  const std::int64_t ttl = locker_->ttl_ms();
  bool holding_off;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (loss_in_progress_) {  // the previous term's loss is still being announced
      next_poll_mono_ = now + 1;
      return Event::None;
    }
    if (handing_over_) {  // transfer() is announcing the loss: its hold is not ours to take
      next_poll_mono_ = now + std::max<std::int64_t>(1, std::min<std::int64_t>(ttl / 20, 250));
      return Event::None;
    }
    holding_off = now < hold_off_until_mono_;
  }
  try {
    // Our own stranded lease first: take it back (one renewal) or release it (fenced).
    // resign()'s hold-off never takes it back.
    if (holding_off && locker_->has_stranded()) {
      locker_->release(false);
    } else if (locker_->has_stranded()) {
      if (locker_->retake()) {
        // Same hold, same document: what it carries is what this node wrote for it
        // (payload_fence_), else unknown (the loop writes it, payload_dirty()).
        if (auto lease = locker_->lease()) return begin_term(now, *lease);
      }
    }
    std::optional<LockDoc> doc =
        locker_->storage().read(locker_->options().collection, options_.key);
    // Held while a claimant could still see it held: compare with the earliest server time.
    const std::int64_t server_now = locker_->server_clock().estimate_sampling().earliest_ms();
    const std::int64_t peek = handover_poll_ms();
    if (doc && doc->held_at(server_now)) {
      // A hand-over to this node (transfer() elsewhere): one renewal of its own.
      if (!holding_off) {
        if (auto ev = accept_handover(now, *doc)) return *ev;
      }
      std::int64_t until_expiry = doc->ts_expire->ms - server_now;
      std::int64_t wait = std::min(ttl, until_expiry);
      if (peek > 0) wait = std::min(wait, peek);
      wait += jitter_ms();
      std::lock_guard<std::mutex> g(mu_);
      leader_exists_ = true;
      next_poll_mono_ = now + std::max<std::int64_t>(wait, 1);
      return Event::None;
    }
    if (holding_off) {  // resign(): free, but not ours to take yet
      std::lock_guard<std::mutex> g(mu_);
      leader_exists_ = false;
      next_poll_mono_ = std::min(hold_off_until_mono_, now + (peek > 0 ? peek : ttl));
      return Event::None;
    }
    if (locker_->options().timeparanoid) locker_->verify_time();  // cached 10 minutes
    {
      std::lock_guard<std::mutex> g(payload_mu_);
      claim_version_ = 0;
    }
    if (locker_->try_acquire(false)) {
      if (auto lease = locker_->lease()) {
        {
          // The claim wrote its payload version with this hold (set_fence keeps it).
          std::lock_guard<std::mutex> g(payload_mu_);
          payload_fence_ = lease->fence;
          payload_written_ = claim_version_;
        }
        return begin_term(now, *lease);
      }
      return Event::None;  // released through locker() meanwhile
    }
    // Someone else won the race: its lease is about a full ttl.
    std::int64_t wait = (peek > 0 ? std::min(ttl / 2, peek) : ttl / 2) + jitter_ms();
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

Elector::Event Elector::begin_term(std::int64_t now, const Lease& lease) {
  const std::int64_t margin = locker_->renew_margin_ms();
  const std::int64_t deadline = lease.end_mono - margin;
  if (clock_->mono_ms() >= deadline) {
    // The claim (and its epoch round trips) ate the lease: never announce a lease that
    // is already over; free it for the others.
    log(LogLevel::Warning, "lock of " + options_.key +
                               " was won too late to lead (its renew "
                               "deadline had passed): releasing it");
    try {
      locker_->release(false);
    } catch (const std::exception& ex) {
      log(LogLevel::Warning, "release of " + options_.key + " failed: " + ex.what(),
          log_fields(LogEvent::ReleaseFailed));
    }
    std::lock_guard<std::mutex> g(mu_);
    next_poll_mono_ = clock_->mono_ms();
    return Event::None;
  }
  std::lock_guard<std::mutex> g(mu_);
  leader_ = true;
  leader_exists_ = true;
  ++term_;
  term_fence_ = lease.fence;
  priority_candidate_.clear();  // each term sees its candidate for the whole delay
  term_margin_ms_ = margin;
  schedule_deadline_locked(deadline);
  next_poll_mono_ = now + locker_->ttl_ms() / 3;
  return Event::BecameLeader;
}

void Elector::report_status() {
  {
    // Like a renewal, a status write must not be able to hang past the renew deadline.
    std::lock_guard<std::mutex> g(mu_);
    auto d = renew_deadline_locked();
    if (d && call_bound_ms_ > 0 && clock_->mono_ms() + call_bound_ms_ > *d) return;
  }
  try {
    locker_->storage().put_status(options_.status_collection, report_document());
    std::lock_guard<std::mutex> g(mu_);
    last_report_mono_ = clock_->mono_ms();
  } catch (const std::exception& ex) {
    log(LogLevel::Error, "status report of " + options_.key + " failed: " + ex.what());
  }
}

void Elector::release() {
  bool was_leader;
  {
    std::lock_guard<std::timed_mutex> g(poll_mu_);
    {
      std::lock_guard<std::mutex> s(mu_);
      was_leader = leader_;
      leader_ = false;
      cancel_deadline_locked();
    }
    try {
      locker_->release(false);  // the hold and any stranded one, fenced; no-op without
      std::lock_guard<std::mutex> s(mu_);
      leader_exists_ = false;
    } catch (const std::exception& ex) {
      log(LogLevel::Warning, "release of " + options_.key + " failed: " + ex.what(),
          log_fields(LogEvent::ReleaseFailed));
    }
  }
  if (was_leader) fire(Event::LostLeader);
}

LogFields Elector::log_fields(LogEvent event, std::int64_t fence) const {
  LogFields f;
  f.event = event;
  f.key = options_.key;
  f.fence = fence;
  f.uuid = locker_->identity().uuid;
  f.host = locker_->identity().host;
  return f;
}

void Elector::fire(Event e) {
  if (e == Event::BecameLeader) {
    metrics::record_leadership(true);
    log(LogLevel::Info, "became leader of " + options_.key,
        log_fields(LogEvent::LeaderElected, locker_->fence()));
    call(callbacks_.on_leader, "on_leader");
  } else if (e == Event::LostLeader) {
    metrics::record_leadership(false);
    log(LogLevel::Info, "lost leadership of " + options_.key, log_fields(LogEvent::LeaderLost));
    call(callbacks_.on_leader_loss, "on_leader_loss");
  }
}

void Elector::call(const std::function<void()>& fn, const char* name) {
  call_user_code(fn, [&](const char* what) {
    log(LogLevel::Error,
        std::string(name) + (what ? std::string(" callback raised: ") + what
                                  : std::string(" callback raised an unknown exception")),
        log_fields(LogEvent::CallbackFailed));
  });
}

bool Elector::set_payload(std::optional<std::string> json) {
  if (json) validate_payload(*json);
  {
    std::lock_guard<std::mutex> g(payload_mu_);
    payload_ = std::move(json);
    ++payload_version_;
  }
  return sync_payload();
}

std::optional<std::string> Elector::payload() const {
  std::lock_guard<std::mutex> g(payload_mu_);
  return payload_;
}

bool Elector::payload_dirty() const {
  std::optional<std::int64_t> fence;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (renew_deadline_locked()) fence = term_fence_;
  }
  if (!fence) return false;
  std::lock_guard<std::mutex> g(payload_mu_);
  return payload_fence_ != *fence || payload_written_ < payload_version_;
}

bool Elector::sync_payload() {
  const std::optional<std::int64_t> fence = leader_fence();
  if (!fence) return false;
  PayloadWrite w;
  w.key = options_.key;
  w.uuid = locker_->identity().uuid;
  w.fence = *fence;
  {
    std::lock_guard<std::mutex> g(payload_mu_);
    w.json = payload_;
    w.version = payload_version_;
  }
  // Names this term (uuid AND fence) and only raises the version: landing late, it can
  // neither reach a later term nor bring back an older payload of this one.
  const bool applied = locker_->storage().set_payload(options_.lock_collection, w);
  std::lock_guard<std::mutex> g(payload_mu_);
  if (payload_fence_ != *fence) {
    payload_fence_ = *fence;
    payload_written_ = 0;
  }
  // Not applied with our term still on the server: a newer version of ours is there.
  if (applied) payload_written_ = std::max(payload_written_, w.version);
  return applied;
}

bool Elector::running() const {
  std::lock_guard<std::mutex> g(mu_);
  return running_;
}

bool Elector::is_leader() {
  std::lock_guard<std::mutex> g(mu_);
  auto d = renew_deadline_locked();
  return d && clock_->mono_ms() < *d;  // the clock read under the lock (#14.8)
}

std::optional<std::int64_t> Elector::leader_fence() {
  std::lock_guard<std::mutex> g(mu_);
  auto d = renew_deadline_locked();
  if (!d || clock_->mono_ms() >= *d) return std::nullopt;
  return term_fence_;
}

bool Elector::on_loop_thread() const {
  std::lock_guard<std::mutex> g(mu_);
  return loop_thread_id_ == std::this_thread::get_id();
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
  return renew_deadline_locked();
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

Document Elector::node_status(bool may_sample) { return build_status(may_sample); }

Document Elector::build_status(bool may_sample) {
  // Built from local knowledge (no extra round trip): this node owns the lock exactly
  // while it leads. The loop's own report never samples the clock (a round trip
  // outside its budget): it stamps with the current estimate.
  bool leading = is_leader();
  auto hold = locker_->hold();
  std::int64_t timestamp;
  auto estimate = locker_->server_clock().estimate();
  if (estimate && !may_sample)
    timestamp = estimate->now_ms;
  else if (estimate && !locker_->server_clock().stale())
    timestamp = estimate->now_ms;
  else
    timestamp = may_sample ? locker_->server_now_ms() : clock_->wall_ms();
  Document d;
  d.set("uuid", locker_->identity().uuid);
  d.set("key", locker_->key());
  d.set("ttl", ttl_value(locker_->ttl_s()));
  d.set("timestamp", DateTime{timestamp});
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
  if (options_.priority) {
    // Published while this node stands for election: during a resign() hold-off it would
    // not take a hand-over, so no leader may pick it.
    bool standing;
    {
      std::lock_guard<std::mutex> g(mu_);
      standing = clock_->mono_ms() >= hold_off_until_mono_;
    }
    if (standing) d.set("priority", ttl_value(*options_.priority));
  }
  return d;
}

Document Elector::report_document() {
  // The report also carries this process's metrics (flat "stat_" fields: documents here
  // are flat), so that `mongoelector status` shows each member's counters.
  Document d = build_status(/*may_sample=*/false);
  const metrics::Snapshot m = metrics::snapshot();
  const auto n = [](std::uint64_t v) { return static_cast<std::int64_t>(v); };
  for (std::size_t i = 0; i < metrics::kAcquireOutcomes; ++i) {
    d.set(std::string("stat_acquires_") +
              metrics::acquire_outcome_name(static_cast<metrics::AcquireOutcome>(i)),
          n(m.acquires[i]));
  }
  d.set("stat_renewals", n(m.renewals));
  d.set("stat_renewal_failures", n(m.renewal_failures));
  d.set("stat_leader_elected", n(m.leader_elected));
  d.set("stat_leader_lost", n(m.leader_lost));
  d.set("stat_step_downs", n(m.step_downs));
  d.set("stat_clock_offset_ms", static_cast<std::int64_t>(std::llround(m.clock_offset_s * 1000)));
  d.set("stat_clock_uncertainty_ms",
        static_cast<std::int64_t>(std::llround(m.clock_uncertainty_s * 1000)));
  d.set("stat_round_trips", n(m.round_trips));
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
