// MongoLocker: a distributed lock with a lease (ttl) and a fencing token.
//
// Guarantees (see README, "Protocol"):
//  * Acquire is one atomic round trip in the common case (Storage::claim): a conditional
//    upsert that takes an absent, released or expired lock. Takeover happens at expiry
//    on the server's time base, never waiting for MongoDB's TTL monitor.
//  * Fencing: every successful acquisition returns a token strictly greater than every
//    token handed out before for that key, including after release, expiry, forced
//    takeover and deletion of the document by someone else. Token = epoch << 32 | n:
//    n counts acquisitions inside the document; the epoch lives in "<coll>.fences" and
//    is bumped (two extra round trips) only when the lock document had to be created or
//    carried no token of ours (first use, TTL deletion, an original node's document).
//  * The lease is counted from the moment the successful write was SENT, on the host's
//    monotonic clock (lease_deadline_mono()).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "clock.h"
#include "identity.h"
#include "server_clock.h"
#include "storage.h"

namespace mongoelector {

struct LockerOptions {
  std::string key;
  std::string collection = "mongolocker";
  double ttl_s = 600;
  bool timeparanoid = true;
  double maxoffset_s = 0.5;
  // Release deletes the document (as the original does) instead of marking it released.
  // Costs the next acquirer the epoch round trips; use it while original nodes still
  // run, so they can acquire without waiting for the TTL monitor.
  bool delete_on_release = false;
  // Run on servers whose findAndModify is not atomic (FerretDB): mutual exclusion is
  // then NOT guaranteed under contention. Off by default: such servers are refused.
  bool allow_unsafe_server = false;
  // Skip the index creation at construction (tests, read-only users).
  bool ensure_indexes = true;
};

// Returns true to abandon a blocking wait (Ctrl-C, cancelled context). Called between
// attempts, from the waiting thread, at least every 100 ms.
using CancelFn = std::function<bool()>;

// The lock's own view of a hold.
struct Hold {
  std::int64_t fence = 0;
  std::int64_t created_ms = 0;        // server time
  std::int64_t expire_ms = 0;         // server time
  std::int64_t lease_start_mono = 0;  // host mono when the successful write was sent
};

class Locker {
 public:
  Locker(std::shared_ptr<Storage> storage, LockerOptions options,
         std::shared_ptr<Clock> clock = system_clock(), Identity identity = Identity::generate());

  // Full acquire as in the contract. blocking=false with a timeout -> InvalidArgument.
  // Non-blocking and held -> LockExists("<key> owned by <host> pid <pid>"). Blocking:
  // retries every `step_s` until `timeout_s` (none: forever) -> AcquireTimeout.
  // With timeparanoid, first verify_time(). Returns the fencing token.
  std::int64_t acquire(bool blocking = true, std::optional<double> timeout_s = std::nullopt,
                       double step_s = 0.25, bool force = false, const CancelFn& cancel = {});

  // One attempt, no time check, no waiting: the token, or nullopt when held by another.
  std::optional<std::int64_t> try_acquire(bool force = false);

  // Releases this instance's lock (any holder's with force). Not holding is not an error.
  void release(bool force = false);

  // Pushes ts_expire to now+ttl if this instance holds an unexpired lock: the new expiry
  // (server time, ms), else nullopt (and the local hold is dropped).
  std::optional<std::int64_t> touch();

  bool locked();  // anyone holds an unexpired lock (one round trip)
  bool owned();   // this instance does (one round trip)
  std::optional<LockDoc> current();  // the unexpired lock document, or nullopt

  // Raises TimeOffsetError when |server - host| > maxoffset; a good result is cached
  // for 10 minutes. Returns the measured (or cached) offset in seconds.
  double verify_time();
  // The contract's retry rule (see _acquireretry): may a blocking/non-blocking loop try
  // attempt number `count` at mono time `now_ms` having started at `start_ms`?
  static bool acquire_retry(bool blocking, std::int64_t start_ms, std::int64_t now_ms,
                            std::optional<double> timeout_s, std::int64_t count);

  // Local state (no round trip).
  std::optional<Hold> hold() const;
  std::int64_t fence() const;  // token of the current hold, 0 when none
  // Host mono ms at which this instance's lease may end at the earliest (send + ttl).
  std::optional<std::int64_t> lease_deadline_mono() const;

  const LockerOptions& options() const { return options_; }
  const Identity& identity() const { return identity_; }
  const std::string& key() const { return options_.key; }
  double ttl_s() const { return options_.ttl_s; }
  std::int64_t ttl_ms() const;
  ServerClock& server_clock() { return server_clock_; }
  Storage& storage() { return *storage_; }
  Clock& clock() { return *clock_; }

  // Server time now (estimate): for status timestamps.
  std::int64_t server_now_ms() { return server_clock_.now_ms(); }

  // Renewal used by the elector: like touch() but returns false on no-match and lets
  // storage errors propagate, recording the send time of a successful renewal.
  bool renew();

 private:
  void check_server_safety();
  std::string held_message(const std::optional<LockDoc>& holder) const;
  std::optional<std::int64_t> anchor_epoch(const LockDoc& doc);

  std::shared_ptr<Storage> storage_;
  LockerOptions options_;
  std::shared_ptr<Clock> clock_;
  Identity identity_;
  ServerClock server_clock_;

  mutable std::mutex mu_;
  std::optional<Hold> hold_;
  std::optional<std::int64_t> time_verified_mono_;
  double verified_offset_s_ = 0;  // what the cached check measured
  bool safety_checked_ = false;
};

}  // namespace mongoelector
