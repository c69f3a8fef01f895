#include "leader_observer.h"

#include <cmath>

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
  std::optional<LeaderState> poll();

  std::shared_ptr<Storage> storage;
  LeaderObserverOptions options;
  OnChange on_change;
  std::shared_ptr<Clock> clock;
  ServerClock server_clock;
  std::mutex mu;
  std::condition_variable cv;
  std::optional<LeaderState> last;
  bool stop_requested = false;
};

LeaderObserver::LeaderObserver(std::shared_ptr<Storage> storage, LeaderObserverOptions options,
                               OnChange on_change, std::shared_ptr<Clock> clock)
    : shared_(std::make_shared<Shared>(std::move(storage), std::move(options),
                                       std::move(on_change), std::move(clock))) {
  const LeaderObserverOptions& o = shared_->options;
  validate_key(o.key);
  validate_collection(o.lock_collection);
  if (!std::isfinite(o.interval_s) || o.interval_s <= 0 || o.interval_s > 1e6)
    throw InvalidArgument("interval must be a finite number of seconds in (0, 1e6]");
}

LeaderObserver::~LeaderObserver() { stop(); }

LeaderState LeaderObserver::read() { return shared_->read(); }
std::optional<LeaderState> LeaderObserver::poll() { return shared_->poll(); }

LeaderState LeaderObserver::Shared::read() {
  std::optional<LockDoc> doc = storage->read(options.lock_collection, options.key);
  // Led while a claimant could still see it held: the earliest the server's clock reads.
  const ServerTime t = server_clock.estimate_sampling();
  LeaderState s;
  s.server_time_ms = t.now_ms;
  if (doc && doc->held_at(t.earliest_ms())) {
    s.has_leader = true;
    s.uuid = doc->uuid;
    s.host = doc->host;
    s.pid = doc->pid;
    s.fence = doc->fence;
  }
  return s;
}

std::optional<LeaderState> LeaderObserver::Shared::poll() {
  LeaderState s = read();
  std::lock_guard<std::mutex> g(mu);
  if (last && last->same_leader(s)) return std::nullopt;
  last = s;
  return s;
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
  const auto interval = static_cast<std::int64_t>(std::llround(s->options.interval_s * 1000.0));
  bool failing = false;  // a failed poll warns once; the repeats until it recovers do not
  for (;;) {
    std::optional<LeaderState> change;
    try {
      change = s->poll();
      if (failing) log(LogLevel::Info, "observing " + s->options.key + " works again");
      failing = false;
    } catch (const std::exception& ex) {
      log(failing ? LogLevel::Debug : LogLevel::Warning,
          "observing " + s->options.key + " failed (retried every interval): " + ex.what());
      failing = true;
    }
    try {
      if (change && s->on_change) s->on_change(*change);
    } catch (const std::exception& ex) {
      log(LogLevel::Error, "a leader-change callback for " + s->options.key + " raised: " + ex.what());
    }
    std::unique_lock<std::mutex> lk(s->mu);
    if (s->stop_requested) return;
    s->clock->wait_until(lk, s->cv, s->clock->mono_ms() + std::max<std::int64_t>(1, interval),
                         [&s] { return s->stop_requested; });
    if (s->stop_requested) return;
  }
}

}  // namespace mongoelector
