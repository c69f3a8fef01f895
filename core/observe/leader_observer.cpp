#include "leader_observer.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>

#include "../exceptions.h"
#include "../identity.h"
#include "../log.h"

namespace mongoelector {

struct LeaderObserver::Shared {
  Shared(std::shared_ptr<Storage> s, LeaderObserverOptions o, OnChange cb, std::shared_ptr<Clock> c)
      : storage(std::move(s)),
        options(std::move(o)),
        on_change(std::move(cb)),
        clock(clock_or_storage_clock(std::move(c), storage)),
        server_clock(clock, require_storage(storage)) {}

  LeaderState read();
  // read() and the change, if any. A failed read leaves its error in `error` and gives
  // lapse() instead.
  std::optional<LeaderState> poll(std::exception_ptr& error);
  // kUnknown, once, when the last read failed and the lease last seen has ended on the
  // estimate (no I/O).
  std::optional<LeaderState> lapse();
  bool failing();
  // Host mono ms at which the lease last seen ends on the estimate, if it may still run.
  std::optional<std::int64_t> lapse_mono();
  void dispatch(const std::optional<LeaderState>& change);

  std::shared_ptr<Storage> storage;
  LeaderObserverOptions options;
  OnChange on_change;
  std::shared_ptr<Clock> clock;
  ServerClock server_clock;
  std::mutex mu;
  std::condition_variable cv;
  // The state of the last successful read (or kUnknown after a lapse): what the next
  // one is compared with, and whose expiry a lapse is measured against.
  std::optional<LeaderState> last;
  bool read_failed = false;  // the last read failed
  bool stop_requested = false;
};

namespace {

// The latest the server's clock can read now: a lease is taken to run only before it.
std::int64_t latest_ms(const ServerTime& t) { return t.now_ms + t.uncertainty_ms; }

LeaderState state_of(const std::optional<LockDoc>& doc, const ServerTime& t) {
  LeaderState s;
  s.server_time_ms = t.now_ms;
  if (!doc || !doc->held_at(latest_ms(t))) return s;  // kNone (held_at: ts_expire set)
  // A claim whose token is not assigned yet: the claimant leads only once it is (an
  // original node's document has no fence at all, 0, and its holder leads).
  if (doc->fence > 0 && doc->fence < LockDoc::kEpochUnit) return s;
  s.expire_ms = doc->ts_expire->ms;
  if (Storage::HandOver::pending_in(*doc)) {
    s.status = LeaderStatus::kPending;
    s.handover_uuid = doc->uuid;
    s.handover_host = doc->host;
    s.handover_pid = doc->pid;
    s.handover_fence = doc->fence;
    return s;
  }
  s.status = LeaderStatus::kLeader;
  s.has_leader = true;
  s.uuid = doc->uuid;
  s.host = doc->host;
  s.pid = doc->pid;
  s.fence = doc->fence;
  s.payload = doc->payload;
  return s;
}

}  // namespace

LeaderObserver::LeaderObserver(std::shared_ptr<Storage> storage, LeaderObserverOptions options,
                               OnChange on_change, std::shared_ptr<Clock> clock)
    : shared_(std::make_shared<Shared>(std::move(storage), std::move(options), std::move(on_change),
                                       std::move(clock))) {
  const LeaderObserverOptions& o = shared_->options;
  validate_key(o.key);
  validate_collection(o.lock_collection);
  if (!std::isfinite(o.interval_s) || o.interval_s <= 0 || o.interval_s > 1e6)
    throw InvalidArgument("interval must be a finite number of seconds in (0, 1e6]");
}

LeaderObserver::~LeaderObserver() { stop(); }

LeaderState LeaderObserver::read() { return shared_->read(); }

std::optional<LeaderState> LeaderObserver::poll() {
  std::exception_ptr error;
  std::optional<LeaderState> change = shared_->poll(error);
  if (!change && error) std::rethrow_exception(error);
  return change;
}

LeaderState LeaderObserver::Shared::read() {
  std::optional<LockDoc> doc = storage->read(options.lock_collection, options.key);
  // Sampled after the reply: the state the document showed can only be older.
  return state_of(doc, server_clock.estimate_sampling());
}

std::optional<LeaderState> LeaderObserver::Shared::poll(std::exception_ptr& error) {
  LeaderState s;
  try {
    s = read();
  } catch (...) {
    error = std::current_exception();
    {
      std::lock_guard<std::mutex> g(mu);
      read_failed = true;
    }
    return lapse();
  }
  std::lock_guard<std::mutex> g(mu);
  read_failed = false;
  const bool same = last && last->same_leader(s);
  last = s;  // also when the same: its renewed expiry is what a lapse is measured against
  if (same) return std::nullopt;
  return s;
}

std::optional<LeaderState> LeaderObserver::Shared::lapse() {
  const std::optional<ServerTime> t = server_clock.estimate();
  if (!t) return std::nullopt;  // nothing was ever read
  std::lock_guard<std::mutex> g(mu);
  // With reads working, the next read says what follows the lease (the thread reads at
  // its end): "unknown" is for when the observer cannot look.
  if (!read_failed || !last || !last->has_lease() || latest_ms(*t) < last->expire_ms)
    return std::nullopt;
  LeaderState u;
  u.status = LeaderStatus::kUnknown;
  u.server_time_ms = t->now_ms;
  u.expire_ms = last->expire_ms;
  last = u;
  return u;
}

std::optional<std::int64_t> LeaderObserver::Shared::lapse_mono() {
  std::int64_t expire;
  {
    std::lock_guard<std::mutex> g(mu);
    if (!last || !last->has_lease()) return std::nullopt;
    expire = last->expire_ms;
  }
  const std::int64_t now = clock->mono_ms();
  const std::optional<ServerTime> t = server_clock.estimate(now);
  if (!t) return std::nullopt;
  // The uncertainty grows with time (drift allowance): the latest reading reaches the
  // expiry no later than this, so lapse() finds it due then.
  return now + std::max<std::int64_t>(0, expire - latest_ms(*t));
}

bool LeaderObserver::Shared::failing() {
  std::lock_guard<std::mutex> g(mu);
  return read_failed;
}

void LeaderObserver::Shared::dispatch(const std::optional<LeaderState>& change) {
  try {
    if (change && on_change) on_change(*change);
  } catch (const std::exception& ex) {
    log(LogLevel::Error, "a leader-change callback for " + options.key + " raised: " + ex.what());
  }
}

void LeaderObserver::start() {
  std::lock_guard<std::mutex> g(shared_->mu);
  if (thread_.joinable()) return;
  shared_->stop_requested = false;
  thread_ = start_clock_thread(*shared_->clock, [shared = shared_] { run(shared); });
}

void LeaderObserver::stop() {
  {
    std::lock_guard<std::mutex> g(shared_->mu);
    shared_->stop_requested = true;
  }
  shared_->cv.notify_all();
  if (thread_.joinable()) {
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();  // from on_change: the loop sees stop_requested and returns
      return;
    }
    thread_.join();
  }
}

void LeaderObserver::run(const std::shared_ptr<Shared>& s) {
  const auto interval = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(std::llround(s->options.interval_s * 1000.0)));
  // Reads happen every interval, and around the end of the lease last seen (a leader's
  // or a pending hand-over's): one call's bound before it (`lead`), so that a renewal or
  // a failure is known by then, and at it, to see what follows. While reads fail, the
  // end is reported as kUnknown at that instant, without a read, and a read that could
  // still be running then is not started shortly before it.
  const std::int64_t bound = s->storage->call_bound_ms();
  const std::int64_t lead = bound > 0 ? bound : std::min<std::int64_t>(interval, 1000);
  std::int64_t next_read = s->clock->mono_ms();
  std::int64_t last_read = std::numeric_limits<std::int64_t>::min();
  const auto read_at = [&](const std::optional<std::int64_t>& end, bool failing) {
    std::int64_t t = next_read;
    if (!end) return t;
    const std::int64_t before = *end - lead;
    if (last_read < before)
      t = std::min(t, before);
    else if (last_read < *end)
      t = std::min(t, *end);
    if (failing && t > before && t < *end) t = *end;
    return t;
  };
  bool warned = false;  // a failed read warns once; the repeats until it recovers do not
  for (;;) {
    s->dispatch(s->lapse());  // the lease ended while reads fail: no read needed to say so
    const std::int64_t now = s->clock->mono_ms();
    if (now >= read_at(s->lapse_mono(), s->failing())) {
      last_read = now;
      std::exception_ptr error;
      const std::optional<LeaderState> change = s->poll(error);
      try {
        if (error) std::rethrow_exception(error);
        if (warned) log(LogLevel::Info, "observing " + s->options.key + " works again");
        warned = false;
      } catch (const std::exception& ex) {
        log(warned ? LogLevel::Debug : LogLevel::Warning,
            "observing " + s->options.key + " failed (retried every interval): " + ex.what());
        warned = true;
      } catch (...) {
        warned = true;
      }
      next_read = s->clock->mono_ms() + interval;
      s->dispatch(change);
    }
    const std::optional<std::int64_t> end = s->lapse_mono();
    std::int64_t wake = read_at(end, s->failing());
    if (end && s->failing()) wake = std::min(wake, *end);
    std::unique_lock<std::mutex> lk(s->mu);
    if (s->stop_requested) return;
    s->clock->wait_until(lk, s->cv, wake, [&s] { return s->stop_requested; });
    if (s->stop_requested) return;
  }
}

}  // namespace mongoelector
