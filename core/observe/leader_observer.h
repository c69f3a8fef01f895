// LeaderObserver: watches one elector key from the outside and reports every change of
// leader, "no leader" included (etcd #18163: an observer that never says "nobody leads"
// lets clients keep talking to a dead leader). It polls the lock document (one read per
// interval; no writes) and compares on the server's time base.
//
// It names a leader only while that leader's lease surely runs: the lease's end (the
// lock's ts_expire, carried in the state) is compared with the LATEST the server's clock
// can read on this observer's estimate (estimate + uncertainty). That is the
// conservative side for the question an observer answers ("whom do I talk to?"): the
// leader it names has not passed its lease end under any clock error the estimate
// allows; the cost is that a lease running out unrenewed is reported gone up to twice
// the uncertainty early (the leader itself steps down earlier still: its renew
// deadline keeps a margin of at least 2 x its own uncertainty + 50 ms). The same rule
// holds without a fresh read: once the last lease seen (a leader's or a pending
// hand-over's) has passed on that estimate while the reads fail, the state becomes
// UNKNOWN, reported once, at that instant (the thread wakes for it, and does not start a
// read shortly before it that could still be running then). With reads working, the
// thread reads at that instant instead and reports what follows the lease.
//
// A hand-over (Elector::transfer) the target has not taken yet is PENDING: nobody leads
// (the old leader stepped down before writing it, the target leads only after its own
// renewal); the target is named in handover_*. A dead target stays pending until the
// hand-over's expiry, then the key shows no leader.
//
// A change is reported when the status, the named member's (uuid, fence) or the leader's
// payload differs from the last report. A leader that resigns and wins again shows as two changes only if a
// poll saw the gap; a hand-over always shows (pending, then the target with its new
// fence). The first poll always reports the current state.
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
#include "../storage/storage.h"

namespace mongoelector {

enum class LeaderStatus : int {
  kNone = 0,     // nobody leads: the lock is absent, released, expired, or claimed
                 // and its token not assigned yet
  kLeader = 1,   // `uuid` leads, until `expire_ms` unless renewed
  kPending = 2,  // a hand-over to handover_uuid is written, not taken yet: nobody leads
  kUnknown = 3,  // the reads fail and the lease last seen has ended: cannot tell
};

struct LeaderState {
  bool has_leader = false;  // status == kLeader
  std::string uuid;         // the leader's; "" without a leader
  std::string host;
  std::int64_t pid = 0;
  std::int64_t fence = 0;
  std::int64_t server_time_ms = 0;  // when it was observed (server time estimate)
  LeaderStatus status = LeaderStatus::kNone;
  // Server time (ms) at which the lease ends unless renewed: kLeader the leader's,
  // kPending the hand-over's (a target that never takes it lets the lock expire then),
  // kUnknown the lease that ended unseen; 0 for kNone.
  std::int64_t expire_ms = 0;
  // kPending: the member the lock is handed to and the token it will lead with.
  std::string handover_uuid;
  std::string handover_host;
  std::int64_t handover_pid = 0;
  std::int64_t handover_fence = 0;
  // kLeader: the leader's payload (JSON object text, core/storage/payload_storage.h),
  // read with its term in the same document; nullopt when it has none.
  std::optional<std::string> payload;

  // A status whose lease may still run (kLeader, kPending): it lapses at expire_ms.
  bool has_lease() const {
    return status == LeaderStatus::kLeader || status == LeaderStatus::kPending;
  }
  // Same status naming the same term (the leader's or the hand-over target's uuid and
  // fence) with the same payload, whenever observed and however often renewed.
  bool same_leader(const LeaderState& o) const {
    return status == o.status && uuid == o.uuid && fence == o.fence &&
           handover_uuid == o.handover_uuid && handover_fence == o.handover_fence &&
           payload == o.payload;
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
  // Storage errors propagate (never kUnknown: that is a judgement on reads over time).
  LeaderState read();
  // read(), and the state if it differs from the last one poll() returned (or reported).
  // When the read fails: the kUnknown state if the lease last seen has ended on this
  // observer's estimate (once), else the read's error is thrown.
  std::optional<LeaderState> poll();
  // Polls every interval on a thread of its own, calling on_change (on that thread) for
  // each change; errors are logged and retried at the next interval. It also reads one
  // call's bound before the lease last seen ends and at that end, whatever the interval;
  // while reads fail it reports kUnknown at that end, without a read (a read still in
  // flight then, started before the failures showed, delays it by at most its bound).
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
