// SlotHolder: the machinery of a hold that is ONE slot of a key's slot document
// (storage/semaphore_storage.h), shared by the features built on that document: the
// Semaphore (semaphore.h: any free slot of `limit`) and the read-write lock (rwlock.h: a
// reader slot, or the writer slot). They differ only in their CLAIM RULE (SlotRule: which
// slot a claim may take in a copy of the document, and which other slots it empties in
// the same write); everything else is here, once:
//
//  * The attempt (try_claim): the current copy of the document (this instance's last
//    write or read) or a read, the rule's choice at the claimant's EARLIEST server time,
//    then ONE compare-and-set write (claim_semaphore: the document's fence F -> F+1, F+1
//    in the slot, the rule's clear_slots emptied) -- or, on first use of the key, a fresh
//    epoch and an insert (create_semaphore). A lost race reads again, at most slots + 1
//    writes per attempt. A copy that says "refused" is read again before the attempt
//    reports the key held.
//  * Fencing (invariant 2): tokens are the document's counter, epoch << 32 | n, bumped
//    to a fresh epoch when the document is created and when the counter would run into
//    the next epoch (next_fence). A claim never reuses a fence this instance sent before
//    (attempted_fence_), even one that failed and never landed.
//  * The hold (HoldState: lease from the send, stranded holds settled by a fenced
//    release before the next claim, claims completed after their lease released), the
//    fenced release and renewal of the slot {slot, uuid, fence}, and the two halves of a
//    renewal for the batched renewer (Holdable, RenewTicket::Kind::Semaphore).
//  * The document's checks: its kind ("" for a semaphore, "rwlock"), its limit, its
//    shape (semaphore_doc::malformed), refused before anything is written.
//  * Fair queueing (hold/fair_queue.h, whose rules it applies): every claim passes the
//    queue's gate (invariant Q: never past a live entry; the entries it passes are named
//    and removed by the claim's own write); a fair blocking waiter (QueueMode::Wait)
//    refused on a fresh read enqueues ONCE (a compare-and-set write), renews its entry
//    when due on a later look (fenced by uuid and ticket, monotonic), paces its looks by
//    its place (AcquireRun::set_pace), removes live strays of its own
//    (QueuePlace::drop_strays), and leaves the queue (leave_queue) when it gives up or
//    releases. A run its caller stops driving leaves its entry to expire (one ttl).
//
// One hold per instance: acquiring while its lease runs is InvalidArgument.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "../clock.h"
#include "../hold/fair_queue.h"
#include "../hold/hold_state.h"
#include "../hold/holdable.h"
#include "../hold/queue_place.h"
#include "../identity.h"
#include "../log.h"
#include "../server_clock.h"
#include "../storage/storage.h"

namespace mongoelector {

// What a claim rule decides from a copy of the document.
struct SlotChoice {
  std::int64_t slot = -1;        // the slot to claim; -1: refused (the key is held)
  std::vector<SlotClear> clear;  // emptied in the same write (SemaphoreClaim::clear_slots)
};

// How a claim treats the key's fair queue (hold/fair_queue.h).
enum class QueueMode {
  Ignore,   // not at all (a reader without writer preference: it waits for no writer)
  Respect,  // invariant Q: never past a live entry; no entry of its own
  Wait,     // Respect, and enqueue when refused (a fair blocking waiter)
};

// A claim rule (a semaphore's counting rule, a read-write lock's reader or writer rule).
class SlotRule {
 public:
  virtual ~SlotRule() = default;
  virtual QueueMode queue_mode() const { return QueueMode::Respect; }
  // The slot a claim takes in the document it creates (first use of the key).
  virtual std::int64_t first_slot() const = 0;
  // The claim to make on `doc` at server time `now_ms` (the claimant's earliest): the
  // slot must be free then, and every slot the decision relies on being free must be
  // free then too (the write's filter checks them again, atomically).
  virtual SlotChoice choose(const SemaphoreDoc& doc, std::int64_t now_ms) const = 0;
  // choose() refused on a fresh read: a write the rule makes instead (a writer's waiting
  // mark). True: read again and choose again (that write lost a race). Counted as one
  // write of the attempt.
  virtual bool on_refused(const SemaphoreDoc& /*doc*/, std::int64_t /*now_ms*/) { return false; }
};

// What a feature tells the SlotHolder about its documents.
struct SlotDocSpec {
  std::string kind;                  // the documents' kind: "" (semaphore) or "rwlock"
  std::int64_t limit = 0;            // their `limit` field
  const char* limit_name = "limit";  // for messages: "limit" / "max_readers"
  bool timeparanoid = true;
  bool allow_unsafe_server = false;
};

class SlotHolder : public Holdable {
 public:
  // Releases this instance's hold only if it is the hold of `fence` (fenced, as
  // release()). True when released; false (no write) otherwise.
  bool release_if(std::int64_t fence);
  // Releases this instance's hold (fenced: slot, uuid and fence) and leaves the queue.
  // Not holding is not an error (no round trip, unless a stranded hold is left to release). On failure the
  // hold is kept as stranded (released before the next claim) and the error raised.
  void release() override;
  // Fair queueing: removes this instance's queue entry, if any (fenced: uuid and ticket).
  // Failures are logged (the entry expires within its ttl).
  void leave_queue();
  // This instance's queue entry as last written (ticket 0: none).
  QueueEntry queue_entry() const;

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

  // The key's document as stored (no checks), or nullopt. One round trip.
  std::optional<SemaphoreDoc> read();

  // See Locker::verify_time, Locker::refresh_clock (a jump strands the hold).
  double verify_time() { return state_.verify_time(); }
  bool refresh_clock() override { return state_.refresh_clock(); }
  ServerClock& server_clock() override { return state_.server_clock(); }

  // Local state (no round trip).
  std::optional<Hold> hold() const { return state_.hold(); }
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
  std::string describe() const override { return state_.describe(); }
  const std::string& collection() const override { return state_.spec().collection; }
  const Identity& identity() const { return state_.identity(); }
  const std::string& key() const { return state_.spec().key; }
  double ttl_s() const { return state_.spec().ttl_s; }
  std::int64_t ttl_ms() const override { return state_.ttl_ms(); }
  Storage& storage() override { return state_.storage(); }
  Clock& clock() override { return state_.clock(); }
  std::int64_t server_now_ms() { return server_clock().now_ms(); }

 protected:
  SlotHolder(std::shared_ptr<Storage> storage, HoldSpec hold, SlotDocSpec doc,
             std::shared_ptr<Clock> clock, Identity identity);

  // Refuses (UnsafeServer) or warns about a server whose single-document writes are not
  // atomic, with the feature's words.
  virtual void check_server_safety() = 0;
  // InvalidArgument's message when a claim is asked for while `live` is held.
  virtual std::string already_holding(const Lease& live) const = 0;

  // One attempt with `rule` (one claim attempt at a time per instance): the token, or
  // nullopt when refused (or every try lost a race). Releases a stranded hold first.
  // Throws StorageUnavailable when the claim completed only after its lease had ended.
  std::optional<std::int64_t> try_claim(SlotRule& rule);
  // The acquire loop over `attempt` (AcquireRun), `held` naming the holders from the
  // copy of the document the refusing attempt read.
  // A run that ends without the hold undoes what its waiting wrote (undo_wait()).
  std::unique_ptr<AcquireRun> make_run(
      bool blocking, std::optional<double> timeout_s, double step_s,
      std::function<std::optional<std::int64_t>()> attempt,
      std::function<std::string(const std::optional<SemaphoreDoc>&)> held);
  // What a waiter that gives up removes (round trips; failures logged): its queue entry.
  virtual void undo_wait() { leave_queue(); }
  std::int64_t run_blocking(AcquireRun& run, const CancelFn& cancel) {
    return state_.acquire(run, cancel);
  }

  // Reads the document, refreshes the copy, refuses another kind, another limit or a
  // malformed document (nothing written).
  std::optional<SemaphoreDoc> read_checked();
  // The copy of the document this instance last wrote or read (nullopt: unknown).
  std::optional<SemaphoreDoc> cached() const;
  // The earliest the server's clock can read now (sampling when there is no sample).
  std::int64_t earliest_now() { return server_clock().estimate_sampling().earliest_ms(); }

  // A write of the attempt that is not a hold of this instance (a writer's waiting
  // mark): claims `slot` of `doc` (compare-and-set, empties nothing), with expiry
  // earliest + ttl. True when written (the copy then shows it); false when the document
  // moved. `sent_fence` gets the fence sent (before the write: it may land even when the
  // call fails). Storage errors propagate (the copy is forgotten).
  bool claim_unheld(const SemaphoreDoc& doc, std::int64_t slot, std::int64_t& sent_fence);
  // The fenced release of a slot of this instance's that is not its hold.
  bool release_unheld(std::int64_t slot, std::int64_t fence);
  // The fenced renewal (monotonic) of a slot of this instance's that is not its hold, to
  // earliest + ttl: the new expiry, or nullopt when it is no longer ours.
  std::optional<std::int64_t> renew_unheld(std::int64_t slot, std::int64_t fence);

  HoldState& state() { return state_; }

 private:
  void check_doc(const SemaphoreDoc& doc) const;
  // A fair waiter refused on a fresh read: enqueues, or renews its entry when due. True:
  // read again (a write lost a race or the entry moved). Counted as one write.
  bool wait_in_queue(const SemaphoreDoc& doc, std::int64_t now_ms);
  // The wait after a refused attempt (AcquireRun::set_pace).
  std::int64_t pace_ms(std::int64_t step_ms) const;
  std::optional<std::int64_t> try_claim_locked(SlotRule& rule);  // attempt_mu_ held
  // The token after `fence` (F+1, or a fresh epoch when F+1 would enter the next one).
  std::int64_t next_fence(std::int64_t fence);
  std::int64_t fresh_epoch();            // bump_epoch, checked
  std::int64_t attempted_fence() const;  // see attempted_fence_
  // The claim of `slot` with the fences given, at server time `t`.
  SemaphoreClaim claim_of(std::int64_t slot, std::int64_t old_fence, std::int64_t new_fence,
                          const ServerTime& t, std::vector<SlotClear> clear) const;
  // Writes a claim (claim_semaphore, or create_semaphore when `create`): true when
  // written. Errors strand the claim's hold and propagate.
  bool write_claim(const SemaphoreClaim& claim, bool create, std::int64_t sent);
  // Installs a hold won by `claim` sent at `sent` (or releases it when its lease ended).
  std::int64_t install(const SemaphoreClaim& claim, std::int64_t sent);
  // The fenced release of `h` (slot, uuid and fence); the cached copy forgets it.
  void release_slot(const Hold& h);
  void forget_in_cache(std::int64_t slot, std::int64_t fence);  // mu_ not held

  const SlotDocSpec doc_;
  std::int64_t slots_ = 0;  // semaphore_doc::slot_count(kind, limit)
  HoldState state_;         // the hold, stranded holds, the clocks and the storage
  QueuePlace place_;        // fair queueing: this instance's place in the key's queue

  // One claim attempt at a time per instance: two threads acquiring at once must not
  // both take a slot (the second would orphan the first's until it expires).
  std::mutex attempt_mu_;
  mutable std::mutex mu_;  // guards the state below; never held across I/O
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
