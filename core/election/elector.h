// MongoLeaderElector: leader election on top of a Locker ("elector.locks"), with node
// status in "elector.leader_status". The election loop is Elector::run_loop().
//
// Timing (T = ttl):
//  * Leader renews every T/2 (one round trip); after a failed renewal it retries every
//    min(T/10, 1 s). Its RENEW DEADLINE is lease_start + T - margin, margin =
//    max(T/10, 2*clock uncertainty + 50 ms), on the host's monotonic clock, where
//    lease_start is when the last successful write was SENT. Past the deadline it steps
//    down locally (is_leader() turns false at once; on_leader_loss fires on the loop
//    thread), i.e. strictly before anyone else can take the lease at lease_start + T.
//    A renewal is only started if it cannot still be running at the deadline
//    (Storage::call_bound_ms), so a hung call cannot outlive the lease.
//  * Follower reads the lock (one round trip) and sleeps until the leader's lease can
//    expire, plus jitter, at most T; then tries one conditional acquire. Failover after a
//    leader crash is therefore about T, not T + TTL-monitor delay + T.
//  * Callbacks run on the thread that polls, never while an internal mutex is held, so
//    they may call stop() or release().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "../locker.h"

namespace mongoelector {

struct ElectorOptions {
  std::string key;
  double ttl_s = 15;
  bool report_status = true;
  std::optional<std::string> app_version;
  std::string lock_collection = "elector.locks";
  std::string status_collection = "elector.leader_status";
  bool allow_unsafe_server = false;
  bool ensure_indexes = true;
  // As LockerOptions::delete_on_release: lets original electors take over at once after
  // this node releases (rolling upgrades); costs the next leader two round trips.
  bool delete_on_release = false;
};

struct ElectorCallbacks {
  std::function<void()> on_leader;
  std::function<void()> on_leader_loss;
  std::function<void()> on_loop;
};

class Elector {
 public:
  Elector(std::shared_ptr<Storage> storage, ElectorOptions options, ElectorCallbacks callbacks,
          std::shared_ptr<Clock> clock = system_clock(), Identity identity = Identity::generate());
  // Stops the loop and joins its thread. Must not run on the loop thread (from one of
  // its own callbacks): the loop still uses the object after the callback returns.
  // Bindings whose last reference may drop inside a callback hand the destruction to
  // another thread (the Python module does).
  ~Elector();

  Elector(const Elector&) = delete;
  Elector& operator=(const Elector&) = delete;

  // Starts the loop on a new native thread. No-op if running.
  void start();
  // Runs the loop on the calling thread until stop() (start(blocking=True)).
  void run_loop();
  // Ends the loop, waits for the thread unless called from it, releases leadership.
  void stop();
  // One cycle (see class comment). Storage errors are logged, not thrown.
  void poll();
  // Gives up leadership now; fires on_leader_loss if it was leader.
  void release();

  bool running() const;
  // Leader, and the renew deadline has not passed (local clock: true even while a
  // renewal call hangs, false the moment the deadline passes).
  bool is_leader();
  bool leader_exists() const;
  // Longest wait between polls as in the original: T/2 as leader, T as follower. The
  // loop may wake earlier (lease expiry, deadline, retry after failure).
  double poll_wait() const;
  // Host mono ms of the next scheduled poll (tests), and of the renew deadline.
  std::int64_t next_poll_mono() const;
  std::optional<std::int64_t> renew_deadline_mono() const;

  // Locker status plus _id, is_leader, elector_running, last_poll, app_version.
  Document node_status();
  // {member_detail: [...], leader: {host, process_id, uuid} | None, timestamp} is
  // structured by the bindings from these parts.
  struct ClusterDetail {
    std::vector<Document> member_detail;  // newest first, without _id
    std::optional<LockDoc> leader;
    DateTime timestamp;
  };
  ClusterDetail cluster_detail();

  Locker& locker() { return *locker_; }
  std::shared_ptr<Locker> locker_ptr() { return locker_; }
  const ElectorOptions& options() const { return options_; }
  std::optional<DateTime> last_poll() const;

  // The locker's status fields as in MongoLocker.status (uuid, key, ttl, timestamp,
  // host, pid, lock_owned, lock_created, lock_expires); one round trip.
  static Document locker_status(Locker& locker);

 private:
  enum class Event { None, BecameLeader, LostLeader };
  Event poll_locked();
  void fire(Event e);
  void call(const std::function<void()>& fn, const char* name);
  std::int64_t jitter_ms();
  std::int64_t margin_ms();
  void step_down_if_late(Event& event);
  void report_status();

  ElectorOptions options_;
  ElectorCallbacks callbacks_;
  std::shared_ptr<Clock> clock_;
  std::shared_ptr<Locker> locker_;

  std::mutex poll_mu_;  // serialises poll() and release() (storage calls)
  mutable std::mutex mu_;  // guards the state below; never held across I/O or callbacks
  std::condition_variable cv_;
  bool leader_ = false;
  bool leader_exists_ = false;
  bool stop_requested_ = false;
  bool running_ = false;
  std::int64_t next_poll_mono_ = 0;
  std::optional<std::int64_t> renew_deadline_;
  std::optional<DateTime> last_poll_;
  std::thread thread_;
  std::thread::id loop_thread_id_;
  std::mt19937_64 rng_;
};

}  // namespace mongoelector
