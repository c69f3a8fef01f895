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
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "../clock.h"
#include "../hold/hold_state.h"
#include "../hold/holdable.h"
#include "../identity.h"
#include "../log.h"
#include "../server_clock.h"
#include "../storage/storage.h"

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
};

// This instance's view of its hold (one slot: Hold::slot; fence is the token).
using SemaphoreHold = Hold;

class Semaphore : public Holdable {
 public:
  Semaphore(std::shared_ptr<Storage> storage, SemaphoreOptions options,
            std::shared_ptr<Clock> clock = nullptr, Identity identity = Identity::generate());

  // Takes one slot: the fencing token. Same rules as Locker::acquire (blocking=false with
  // a timeout -> InvalidArgument; non-blocking and full -> LockExists("<key>: all N
  // slots held by ..."); blocking: retries every `step_s` until `timeout_s` ->
  // AcquireTimeout; `cancel` -> Cancelled; timeparanoid -> verify_time() first).
  // An instance holds at most one slot: acquiring while its lease runs -> InvalidArgument.
  // A limit other than the document's -> InvalidArgument.
  std::int64_t acquire(bool blocking = true, std::optional<double> timeout_s = std::nullopt,
                       double step_s = 0.25, const CancelFn& cancel = {});
  // The same acquire as a state machine its caller drives (see Locker::start_acquire).
  std::unique_ptr<AcquireRun> start_acquire(bool blocking = true,
                                            std::optional<double> timeout_s = std::nullopt,
                                            double step_s = 0.25);
  // Releases this instance's slot only if it is the hold of `fence` (fenced, as
  // release()). True when released; false (no write) otherwise.
  bool release_if(std::int64_t fence);
  // One attempt, no time check, no waiting: the token, or nullopt when every slot is
  // held (or every try lost a race with other claimants). Releases a stranded hold
  // first. Throws StorageUnavailable when the claim completed only after its lease
  // had ended (the hold is released, not reported).
  std::optional<std::int64_t> try_acquire();

  // Releases this instance's hold (fenced: slot, uuid and fence). Not holding is not an
  // error (no round trip, unless a stranded hold is left to release). On failure the
  // hold is kept as stranded (released before the next claim) and the error raised.
  void release() override;

  // Pushes this instance's slot to now+ttl if it still holds it unexpired: the new
  // expiry (server time, ms), else nullopt (the local hold is dropped).
  std::optional<std::int64_t> touch();
  // Renewal for the keep-alive lease: the new lease end (host mono), nullopt when the
  // slot is no longer ours (the hold is dropped) or the hold changed while the call ran.
  // Storage errors propagate and leave the hold as it was.
  std::optional<std::int64_t> renew();
  // renew() in two halves, for the batched renewer (Holdable; kind Semaphore). No
  // metrics are recorded.
  RenewTicket begin_renew(std::int64_t sent) override;
  std::optional<std::int64_t> finish_renew(RenewTicket& ticket, bool renewed) override;

  // The unexpired holders (one round trip), in slot order; "unexpired" at the earliest
  // the server's clock can read, as claimants see them. Checks the limit.
  std::vector<SemaphoreSlot> holders();
  // The key's document as stored (no checks), or nullopt. One round trip.
  std::optional<SemaphoreDoc> read();

  // See Locker::verify_time, Locker::refresh_clock (a jump strands the hold).
  double verify_time() { return state_.verify_time(); }
  bool refresh_clock() override { return state_.refresh_clock(); }
  ServerClock& server_clock() override { return state_.server_clock(); }

  // Local state (no round trip).
  std::optional<SemaphoreHold> hold() const { return state_.hold(); }
  std::int64_t fence() const { return state_.fence(); }  // of the current hold, 0 when none
  // Host mono ms at which this instance's lease may end at the earliest (send + ttl).
  std::optional<std::int64_t> lease_deadline_mono() const { return state_.lease_deadline_mono(); }
  // fence and lease end in one read
  std::optional<Lease> lease() const override { return state_.lease(); }
  bool has_stranded() const { return state_.has_stranded(); }
  // For the keep-alive lease: gives the hold up locally, remembering it as stranded
  // (released, fenced, before the next claim or by release()). Only a hold with `fence`
  // when it is not 0. Returns the fence stranded, 0 if none.
  std::int64_t strand(std::int64_t fence = 0) override { return state_.strand(fence, false); }

  LogFields log_fields(LogEvent event, std::int64_t fence = 0) const override {
    return state_.log_fields(event, fence);
  }
  std::string describe() const override { return "semaphore " + options_.key; }
  const char* unit() const override { return "slot"; }
  const std::string& collection() const override { return options_.collection; }
  const SemaphoreOptions& options() const { return options_; }
  const Identity& identity() const { return state_.identity(); }
  const std::string& key() const { return options_.key; }
  std::int64_t limit() const { return options_.limit; }
  double ttl_s() const { return options_.ttl_s; }
  std::int64_t ttl_ms() const override { return state_.ttl_ms(); }
  Storage& storage() override { return state_.storage(); }
  Clock& clock() override { return state_.clock(); }
  std::int64_t server_now_ms() { return server_clock().now_ms(); }

 private:
  void check_server_safety();
  std::optional<std::int64_t> try_acquire_locked();  // attempt_mu_ held
  // Reads the document, refreshes the cached copy, refuses a limit mismatch or a
  // malformed document.
  std::optional<SemaphoreDoc> read_checked();
  void check_doc(const SemaphoreDoc& doc) const;
  // The token after `fence` (F+1, or a fresh epoch when F+1 would enter the next one).
  std::int64_t next_fence(std::int64_t fence);
  std::int64_t attempted_fence() const;  // see attempted_fence_
  // Writes a claim (claim_semaphore, or create_semaphore when `create`): true when
  // written. Errors strand the claim's hold and propagate.
  bool write_claim(const SemaphoreClaim& claim, bool create, std::int64_t sent);
  // Installs a hold won by `claim` sent at `sent` (or releases it when its lease ended).
  std::int64_t install(const SemaphoreClaim& claim, std::int64_t sent);
  std::string full_message(const std::optional<SemaphoreDoc>& doc);
  // The fenced release of `h` (slot, uuid and fence); the cached copy forgets it.
  void release_slot(const Hold& h);

  SemaphoreOptions options_;
  HoldState state_;  // the hold, stranded holds, the clocks and the storage

  // One claim attempt at a time per instance: two threads acquiring at once must not
  // both take a slot (the second would orphan the first's until it expires).
  std::mutex attempt_mu_;
  mutable std::mutex mu_;  // guards the semaphore's own state below; never held across I/O
  // The highest fence this instance sent in a claim. A claim never reuses one: a claim
  // that failed may never land while the release of its stranded hold (named by slot,
  // uuid and that fence) is still in flight, and would free a new hold with the same
  // name. So a new claim's fence is above it (tokens still strictly increase; gaps are
  // fine).
  std::int64_t attempted_fence_ = 0;
  // The document as this instance last wrote or read it: lets the next claim skip the
  // read (one round trip) while nobody else claimed since.
  std::optional<SemaphoreDoc> cache_;
};

}  // namespace mongoelector
