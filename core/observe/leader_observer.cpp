#include "leader_observer.h"

#include <cmath>

#include "../exceptions.h"
#include "../identity.h"
#include "../log.h"

namespace mongoelector {

namespace {
Storage& non_null_storage(const std::shared_ptr<Storage>& storage) {
  if (!storage) throw InvalidArgument("storage must not be null");
  return *storage;
}
}  // namespace

LeaderObserver::LeaderObserver(std::shared_ptr<Storage> storage, LeaderObserverOptions options,
                               OnChange on_change, std::shared_ptr<Clock> clock)
    : storage_(std::move(storage)),
      options_(std::move(options)),
      on_change_(std::move(on_change)),
      clock_(clock ? std::move(clock) : storage_ ? storage_->clock() : nullptr),
      server_clock_(clock_, non_null_storage(storage_)) {
  validate_key(options_.key);
  validate_collection(options_.lock_collection);
  if (!std::isfinite(options_.interval_s) || options_.interval_s <= 0 || options_.interval_s > 1e6)
    throw InvalidArgument("interval must be a finite number of seconds in (0, 1e6]");
}

LeaderObserver::~LeaderObserver() { stop(); }

LeaderState LeaderObserver::read() {
  std::optional<LockDoc> doc = storage_->read(options_.lock_collection, options_.key);
  // Led while a claimant could still see it held: the earliest the server's clock reads.
  const ServerTime t = server_clock_.estimate_sampling();
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

std::optional<LeaderState> LeaderObserver::poll() {
  LeaderState s = read();
  std::lock_guard<std::mutex> g(mu_);
  if (last_ && last_->same_leader(s)) return std::nullopt;
  last_ = s;
  return s;
}

void LeaderObserver::start() {
  std::lock_guard<std::mutex> g(mu_);
  if (thread_.joinable()) return;
  stop_requested_ = false;
  thread_ = start_clock_thread(*clock_, [this] { run(); });
}

void LeaderObserver::stop() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_requested_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();  // from on_change: the loop sees stop_requested_ and returns
      return;
    }
    thread_.join();
  }
}

void LeaderObserver::run() {
  const auto interval = static_cast<std::int64_t>(std::llround(options_.interval_s * 1000.0));
  for (;;) {
    try {
      if (auto change = poll()) {
        if (on_change_) on_change_(*change);
      }
    } catch (const std::exception& ex) {
      log(LogLevel::Warning, "observing " + options_.key + " failed: " + ex.what());
    }
    std::unique_lock<std::mutex> lk(mu_);
    if (stop_requested_) return;
    clock_->wait_until(lk, cv_, clock_->mono_ms() + std::max<std::int64_t>(1, interval),
                       [this] { return stop_requested_; });
    if (stop_requested_) return;
  }
}

}  // namespace mongoelector
