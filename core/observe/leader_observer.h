// LeaderObserver: watches one elector key from the outside and reports every change of
// leader, "no leader" included (etcd #18163: an observer that never says "nobody leads"
// lets clients keep talking to a dead leader). It polls the lock document (one read per
// interval; no writes) and compares on the server's time base, as claimants do.
//
// A change is reported when the leader's (uuid, fence) differs from the last report, or
// when the key goes from led to not led or back. A leader that resigns and wins again
// shows as two changes only if a poll saw the gap; a hand-over (transfer) always shows,
// its fence being new. The first poll always reports the current state.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "../clock.h"
#include "../server_clock.h"
#include "../storage.h"

namespace mongoelector {

struct LeaderState {
  bool has_leader = false;  // false: nobody leads (absent, released or expired)
  std::string uuid;         // "" without a leader
  std::string host;
  std::int64_t pid = 0;
  std::int64_t fence = 0;
  std::int64_t server_time_ms = 0;  // when it was observed (server time estimate)

  bool same_leader(const LeaderState& o) const {
    return has_leader == o.has_leader && (!has_leader || (uuid == o.uuid && fence == o.fence));
  }
};

struct LeaderObserverOptions {
  std::string key;
  std::string lock_collection = "elector.locks";
  double interval_s = 1.0;  // between polls of the background thread
};

class LeaderObserver {
 public:
  using OnChange = std::function<void(const LeaderState&)>;
  LeaderObserver(std::shared_ptr<Storage> storage, LeaderObserverOptions options,
                 OnChange on_change = {}, std::shared_ptr<Clock> clock = nullptr);
  // Stops the thread (waits for it unless called from on_change: then the thread ends
  // after on_change returns, and may outlive this object).
  ~LeaderObserver();
  LeaderObserver(const LeaderObserver&) = delete;
  LeaderObserver& operator=(const LeaderObserver&) = delete;

  // The state now (one read, and a clock sample when stale). Never calls on_change.
  LeaderState read();
  // read(), and the state if it differs from the last one poll() returned (or reported).
  std::optional<LeaderState> poll();
  // Polls every interval on a thread of its own, calling on_change (on that thread) for
  // each change; errors are logged and retried at the next interval.
  void start();
  void stop();

 private:
  // Everything the polling thread uses: the thread holds it too, so that an observer
  // stopped from its own on_change and then destroyed leaves it valid until the thread
  // has returned.
  struct Shared;
  static void run(const std::shared_ptr<Shared>& shared);

  std::shared_ptr<Shared> shared_;
  std::thread thread_;
};

}  // namespace mongoelector
