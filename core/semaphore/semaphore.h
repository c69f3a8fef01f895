// Semaphore: at most `limit` holders of one key at any instant (distributex's
// `maxlocks` pools, Curator's InterProcessSemaphoreV2), each with a lease (ttl) and a
// fencing token. The rules are the Locker's (locker.h, README "Protocol"), per slot, and
// the hold's bookkeeping is the same HoldState (hold/hold_state.h):
//
//  * One document per key with a FIXED array of `limit` slots (storage/semaphore_storage.h,
//    SemaphoreDoc). A holder is a slot; a slot has one hold at a time. So the number of
//    unexpired holders can never exceed `limit` (invariant 1, per slot as for a lock):
//    a claim is ONE atomic single-document write that fills a slot only if the slot is
//    free at the claimant's time -- not (ts_expire > now) -- AND the document's fence is
//    still the one the claimant read (compare-and-set).
//  * Fencing (invariant 2): token = epoch << 32 | n, as for locks. The document's
//    `fence` is the key's counter; a claim moves it from F to F+1 in the same write that
//    stores F+1 in its slot, so tokens strictly increase across all slots, releases and
//    expiries. The epoch ("<collection>.fences", which nothing deletes) is bumped when
//    the document is created (first use, or after someone deleted it) and when the
//    counter would run into the next epoch (2^32 claims): tokens keep increasing across
//    deletions.
//  * Time (invariant 1): a claim compares with the EARLIEST the server's clock can read
//    (estimate minus uncertainty); ts_created/ts_expire are server-time dates. A dead
//    holder's slot frees at its ts_expire (invariant 4), no clean-up needed.
//  The machinery of a slot hold (the attempt, fencing, the hold's lease, release and
//  renewal) is SlotHolder's (slot_holder.h), shared with the read-write lock (rwlock.h);
//  the Semaphore adds its claim rule: any slot free at the claimant's earliest time.
//  * Lease (invariant 3): counted from the moment the successful write was SENT, on the
//    host's monotonic clock (read before the server-time estimate the write carries).
//  * Every write that assumes a hold names it by slot, uuid AND fence (renew, release):
//    a request that runs late at the server cannot touch a newer hold. An instance never
//    sends two claims with one fence (attempted_fence_), so a name is never reused, not
//    even after a claim that failed and never landed. Renewals are
//    monotonic (Storage::renew_semaphore): a late one cannot shorten the slot's lease.
//  * A hold whose state on the server is unknown (an error after the claim may have been
//    applied, a failed release, a lost keep-alive lease) is kept as STRANDED and released
//    (fenced) before this instance's next claim.
//
// Round trips (the claim needs the document's fence and a free slot index):
//  * acquire with a current copy of the document (this instance's last claim, release
//    or read, nobody else claimed since): ONE round trip, the compare-and-set.
//  * acquire without one (a new instance, or someone else claimed since): TWO, a read
//    then the compare-and-set (a stale copy costs one failed compare-and-set first: 3).
//  * first use of a key (no document): three, read + bump the epoch + insert.
//  * attempt on a full semaphore: one read; a lost race (someone else claimed between
//    our read and our write) is retried at once, at most limit + 1 times per attempt.
//  * release, touch/renew: one. holders(): one.
//  Plus, as for locks, one `hello` per minute for the server's clock (and the cached
//  timeparanoid check).
//
// Limit changes: the limit is fixed when the key's document is created. An instance
// asking for another limit is refused with InvalidArgument ("semaphore 'k' has limit 3
// ..."), at its first acquire or holders(); nothing is written. To change a key's
// limit, delete its document while nobody holds it (tokens stay increasing: the epoch).
//
// Servers: needs single-document atomic writes (MongoDB, mongo-java-server, SQLite,
// memory). Refused (UnsafeServer) on servers whose findAndModify/update is not atomic
// (FerretDB) unless allow_unsafe_server, exactly as the Locker.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "slot_holder.h"

namespace mongoelector {

struct SemaphoreDefaults {
  static constexpr const char* collection = "mongosemaphore";
  static constexpr double ttl_s = 600;
  static constexpr bool timeparanoid = true;
  static constexpr double maxoffset_s = 0.5;
  static constexpr bool allow_unsafe_server = false;
};

struct SemaphoreOptions {
  std::string key;
  std::int64_t limit = 1;  // 1..1000 (semaphore_doc::kMaxLimit)
  std::string collection = SemaphoreDefaults::collection;
  double ttl_s = SemaphoreDefaults::ttl_s;
  bool timeparanoid = SemaphoreDefaults::timeparanoid;
  double maxoffset_s = SemaphoreDefaults::maxoffset_s;
  bool allow_unsafe_server = SemaphoreDefaults::allow_unsafe_server;
  // Accept a storage whose calls have no known time bound (see LockerOptions).
  bool allow_unbounded_calls = false;
  // Fair (FIFO) queueing (hold/fair_queue.h): a blocking acquire that finds every slot
  // held waits in the key's queue and is served in arrival order. Every claim of this
  // version honours a live queue (fair or not); this decides whether THIS instance's
  // blocking acquires join it.
  bool fair = false;
};

// This instance's view of its hold (one slot: Hold::slot; fence is the token).
using SemaphoreHold = Hold;

class Semaphore : public SlotHolder {
 public:
  Semaphore(std::shared_ptr<Storage> storage, SemaphoreOptions options,
            std::shared_ptr<Clock> clock = nullptr, Identity identity = Identity::generate());

  // Takes one slot: the fencing token. Same rules as Locker::acquire (blocking=false with
  // a timeout -> InvalidArgument; non-blocking and full -> LockExists("<key>: all N
  // slots held by ..."); blocking: retries every `step_s` until `timeout_s` ->
  // AcquireTimeout; `cancel` -> Cancelled; timeparanoid -> verify_time() first).
  // An instance holds at most one slot: acquiring while its lease runs -> InvalidArgument.
  // Fair: waits in the key's queue; a timeout, a cancel or an error leaves it.
  // A limit other than the document's -> InvalidArgument; so is a key whose document is
  // a read-write lock's.
  std::int64_t acquire(bool blocking = true, std::optional<double> timeout_s = std::nullopt,
                       double step_s = 0.25, const CancelFn& cancel = {});
  // The same acquire as a state machine its caller drives (see Locker::start_acquire).
  std::unique_ptr<AcquireRun> start_acquire(bool blocking = true,
                                            std::optional<double> timeout_s = std::nullopt,
                                            double step_s = 0.25);
  // One attempt, no time check, no waiting: the token, or nullopt when every slot is
  // held (or every try lost a race with other claimants). Releases a stranded hold
  // first. Throws StorageUnavailable when the claim completed only after its lease
  // had ended (the hold is released, not reported).
  std::optional<std::int64_t> try_acquire();
  // try_acquire, or (`queue`) the attempt of a fair blocking acquire.
  std::optional<std::int64_t> attempt(bool queue);

  // The unexpired holders (one round trip), in slot order; "unexpired" at the earliest
  // the server's clock can read, as claimants see them. Checks the limit.
  std::vector<SemaphoreSlot> holders();

  const char* unit() const override { return "slot"; }
  const SemaphoreOptions& options() const { return options_; }
  std::int64_t limit() const { return options_.limit; }

 private:
  void check_server_safety() override;
  std::string already_holding(const Lease& live) const override;
  std::string full_message(const std::optional<SemaphoreDoc>& doc);

  SemaphoreOptions options_;
};

}  // namespace mongoelector
