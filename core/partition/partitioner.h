// Partitioner: the fenced partitioner. Members of a group report themselves; each of the
// group's N partitions is owned by the member that rendezvous hashing (rendezvous.h)
// picks among the LIVE members (members.h); ownership is a keep-alive lease on the
// partition's lock ("<group>/<p>", members.h) with its own fencing token, so fenced
// writes protect per-partition data as they protect a lock's.
//
// The member loop (one thread per partitioner; run_loop), every poll_s (default ttl/3):
//   1. report: this member's report, live until its server-time estimate + ttl (one write);
//   2. read the group's reports (one read): the live members, hence the assignment;
//   3. for each partition this member holds that is no longer its own: on_revoked(p) is
//      queued; once it has RETURNED, the lease is closed (fenced release). So a graceful
//      move runs on_revoked at the old owner before the new owner's claim can succeed,
//      and so before its on_assigned;
//   4. for each partition assigned to it that it does not hold: one claim (Locker's
//      conditional claim: free, released or expired at the earliest server time); won,
//      the hold becomes a keep-alive lease and on_assigned(p, token) is queued. Claims
//      stop for this poll once half the poll interval is spent (a slow server never
//      delays the next report by much).
// A partition held by a member that crashed frees at its lease's expiry; one ttl + one
// poll after the membership is stable every partition is held by its assigned member.
//
// Invariants (protocol notes):
//  * Derive, don't flag: "this member owns p" (owned()) is the lease of p not lost() --
//    read from its renew deadline and the monotonic clock (lease/hold_loss.h) -- and no
//    release of it under way; no thread sets it. Step-down before takeover: a lease is
//    lost at its renew deadline, before its lock can be claimed by anyone; its loss also
//    queues on_revoked(p) (loss path: on_lost on the callback dispatcher).
//  * Mutual exclusion and fencing per partition are the lock's (locker.h): one holder at a
//    time, tokens strictly increasing per partition.
//  * Cost per key: every lease of a member renews through the process's Renewer, which
//    carries the renewals of one client in ONE Storage::renew_many batch (keepalive.h);
//    the loop itself makes two round trips per poll when nothing moves.
//  * User code: on_assigned and on_revoked run on the clock's callback dispatcher
//    (callback_dispatcher.h), never on the loop, the renewer or the deadline timer, and
//    never under a library lock; ONE AT A TIME per partitioner, in the order the loop (or
//    a loss) decided them: per partition always on_assigned(p, t) before on_revoked(p),
//    alternating. A slow callback delays this partitioner's other callbacks, never a
//    renewal or a loss. A lease is kept renewed while its on_revoked runs.
//  * Members that disagree (another partition count, another kind of document under the
//    group's key, a partition key holding another kind of document) are refused with
//    InvalidArgument at start() before anything is written, and ignored (logged) if they
//    appear later; a partition whose key holds another kind of document is never claimed.
//
// Guarantee kept on graceful moves only: the old owner's on_revoked(p) returns before the
// new owner's on_assigned(p, token) is called. After a LOSS (expiry, a renewal that found
// the lock taken) the old owner stops believing at its renew deadline, before anyone can
// claim; its on_revoked is queued then but may still run when the new owner's on_assigned
// does: fence the writes.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../clock.h"
#include "../identity.h"
#include "../lease/lease.h"
#include "../locker.h"
#include "../server_clock.h"
#include "../storage/storage.h"
#include "members.h"

namespace mongoelector {

struct PartitionerDefaults {
  static constexpr double ttl_s = 15;
};

struct PartitionerOptions {
  std::string group;
  std::int64_t partitions = 0;  // 1 .. kMaxPartitions (members.h)
  double ttl_s = PartitionerDefaults::ttl_s;
  // Seconds between polls; nullopt: ttl/3. A finite number in (0, ttl/2] (a report lives
  // one ttl: a member must report at least twice per ttl).
  std::optional<double> poll_s;
  PartitionerCollections collections;
  bool ensure_indexes = true;
  // Accept a storage whose calls have no known time bound (as LockerOptions).
  bool allow_unbounded_calls = false;
};

struct PartitionerCallbacks {
  std::function<void(std::int64_t partition, std::int64_t token)> on_assigned;
  std::function<void(std::int64_t partition)> on_revoked;
};

class Partitioner {
 public:
  // InvalidArgument: partitions out of range, a bad group or collection, ttl or poll_s,
  // the same collection for locks and members, a storage without a call bound.
  Partitioner(std::shared_ptr<Storage> storage, PartitionerOptions options,
              PartitionerCallbacks callbacks, std::shared_ptr<Clock> clock = nullptr,
              Identity identity = Identity::generate());
  // stop(). Must not run inside one of its own callbacks.
  ~Partitioner();
  Partitioner(const Partitioner&) = delete;
  Partitioner& operator=(const Partitioner&) = delete;

  // Checks the group (check_group: one read; InvalidArgument, nothing written) and starts
  // the member loop on a new thread (start_loop). No-op if running.
  void start();
  // Starts the loop without the check (a caller that made it).
  void start_loop();
  // Asks the loop to leave the group and end, and returns at once (stop() waits).
  void request_stop();
  // The loop on the calling thread until stop(); leaves the group on its way out.
  void run_loop();
  // Leaves the group: the report says so at once (others reassign), on_revoked runs for
  // every partition held, each lease is released (fenced) after its on_revoked returned.
  // Waits for all that, unless called from one of this partitioner's callbacks (it then
  // only asks, and the loop leaves once the callback has returned).
  void stop();
  // One poll of the loop (tests; the loop calls it). Storage errors are logged.
  void poll();
  // One read of the group's reports: InvalidArgument when another kind of document uses
  // the group's key, or a live member runs with another number of partitions.
  void check_group();

  // partition -> fencing token of each partition this member holds now (derived: see
  // the class comment). No round trip.
  std::map<std::int64_t, std::int64_t> owned();
  // The fencing token of `partition` while owned, else nullopt.
  std::optional<std::int64_t> token(std::int64_t partition);
  // The assignment of the last poll that read the group: each partition's member uuid
  // ("" when no member was live). Empty before the first such poll.
  std::vector<std::string> assignment() const;
  // The live members of that poll (sorted uuids).
  std::vector<std::string> members() const;
  // The assignment as the documents show it now (partition_status: reads every partition).
  PartitionStatus status();

  bool running() const;
  // True on a thread that runs one of this partitioner's callbacks.
  bool in_callback() const;
  const PartitionerOptions& options() const { return options_; }
  const Identity& identity() const { return identity_; }
  std::int64_t ttl_ms() const { return ttl_ms_; }
  std::int64_t poll_ms() const { return poll_ms_; }
  std::int64_t next_poll_mono() const;
  ServerClock& server_clock() { return server_clock_; }
  Clock& clock() { return *clock_; }

  class Strand;  // partitioner.cpp: this partitioner's callbacks, one at a time

 private:
  enum class Revoke { None, Queued, Done, ByLoss };
  struct Slot {
    std::shared_ptr<Locker> locker;         // made at the first claim, kept (its stranded holds)
    std::unique_ptr<KeepAliveLease> lease;  // the current hold
    std::uint64_t gen = 0;                  // the hold's number (on_lost of an older one: ignored)
    Revoke revoke = Revoke::None;
    bool announced = false;  // on_assigned queued for this hold
    bool releasing = false;  // its release is under way: no longer believed
    bool checked = false;    // its document was read once (another kind of document?)
    bool foreign = false;    // it is: never claimed
  };

  void report(bool running);  // throws on failure
  // The live members (self included when this poll's report was written), nullopt on a
  // failed read. Logs conflicts.
  std::optional<std::vector<std::string>> read_members(bool reported);
  // Queues on_revoked for partitions held but not assigned; returns the partitions to claim.
  std::vector<std::int64_t> apply_assignment(const std::vector<std::string>& live);
  void claim(std::int64_t p);  // one attempt (a read first, once per partition)
  // Closes leases whose loss or on_revoked is over (fenced release unless lost).
  void settle_leases();
  void settle_leases_locked();       // poll_mu_ held
  void close_lease(std::int64_t p);  // releasing set by the caller
  void leave();
  std::shared_ptr<Locker> locker_for(std::int64_t p);
  void on_lost(std::int64_t p, std::uint64_t gen);
  // Queue a callback (mu_ held: the queue's order is the order of these decisions) and
  // return the job that post_jobs() hands to the dispatcher once mu_ is released (a
  // dispatcher may start a thread: never under a lock that a prober may take).
  using Jobs = std::vector<std::shared_ptr<CallbackJob>>;
  std::shared_ptr<CallbackJob> post_assigned(std::int64_t p, std::int64_t token);
  std::shared_ptr<CallbackJob> post_revoked(std::int64_t p, std::uint64_t gen);
  void post_jobs(Jobs& jobs);
  LogFields log_fields(LogEvent event, std::int64_t p = -1, std::int64_t fence = 0) const;
  std::int64_t jitter_ms();

  PartitionerOptions options_;
  PartitionerCallbacks callbacks_;
  std::shared_ptr<Storage> storage_;
  std::shared_ptr<Clock> clock_;
  Identity identity_;
  std::int64_t ttl_ms_ = 0;
  std::int64_t poll_ms_ = 0;
  ServerClock server_clock_;
  std::shared_ptr<Strand> strand_;

  std::mutex poll_mu_;     // one poll (or leave) at a time
  mutable std::mutex mu_;  // the state below; never held across I/O or user code
  std::condition_variable cv_;
  std::vector<Slot> slots_;
  std::uint64_t next_gen_ = 0;
  bool work_ = false;  // a loss or a returned on_revoked waits for settle_leases()
  bool stop_requested_ = false;
  bool running_ = false;
  bool left_ = true;  // nothing held, report says not running (true until the first poll)
  std::int64_t next_poll_mono_ = 0;
  std::vector<std::string> live_;
  std::vector<std::string> assignment_;
  std::vector<std::string> logged_conflicts_;  // each said once
  std::thread thread_;
  std::thread::id loop_thread_id_;
  std::mt19937_64 rng_;
};

}  // namespace mongoelector
