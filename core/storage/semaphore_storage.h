// Semaphore storage: the operations on semaphore documents (core/semaphore/semaphore.h:
// N holders of one key), one interface of the storage seam (storage.h). Every write is
// ONE atomic single-document command (one round trip); a write that assumes a hold
// names it by slot, uuid AND fence. The epochs are LockStorage::bump_epoch's.
//
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../value.h"

namespace mongoelector {

// One document per key in the semaphore collection (default "mongosemaphore"), with a
// FIXED array of `limit` slots, created with the document and never resized:
//   {_id: key, limit: int64, fence: int64,
//    slots: [{uuid, host, pid, fence, ts_created: date, ts_expire: date}, ...]}
// A slot is free when it is NOT (ts_expire > now) -- empty slots (uuid "", fence 0,
// dates at the epoch), released ones and expired ones alike. The document's `fence` is
// the key's token counter: every claim sets it from old_fence to new_fence in the same
// atomic write that fills a slot (compare-and-set on `fence`), so tokens strictly
// increase across all slots. The epoch high-water mark is bump_epoch's
// "<collection>.fences", as for locks. Slots are addressed by index ("slots.2.uuid"):
// mongo-java-server 1.47 rejects the positional operator after $elemMatch, and mongomock
// resolves `$` to the wrong element.
//
// A read-write lock (core/semaphore/rwlock.h) is the same document with `kind: "rwlock"`
// and `limit` + 2 slots (readers, the writer, the writer-waiting mark); a semaphore's
// document has no `kind`. Each feature refuses the other's documents.
//
// Fair queueing (core/hold/fair_queue.h) adds an optional array to the same document:
//   queue: [{uuid, ticket: int64, ts_expire: date}, ...]
// in ticket order. An entry is appended only by a claim_semaphore with `enqueue` (a
// compare-and-set on `fence` whose new fence is the entry's ticket, so tickets strictly
// increase and every enqueue moves the fence: a copy of the document read before it fails
// its compare-and-set). An entry is removed only by its owner (leave_queue, named by uuid
// AND ticket) or by a claim that passes it (SemaphoreClaim::queue_passed: expired at the
// claim's time, checked by the write's filter) or that is its owner's (queue_own).
// Renewals ($max, renew_queue_entry) only move an entry's expiry later. A document
// without the field has an empty queue; nodes without fair queueing ignore it.

// One slot of a semaphore document.
struct SemaphoreSlot {
  std::string uuid;  // "" when empty
  std::string host;
  std::int64_t pid = 0;
  std::int64_t fence = 0;  // the hold's token (0 when empty)
  std::optional<DateTime> ts_created;
  std::optional<DateTime> ts_expire;
  // Held at server time `now_ms`: ts_expire > now (the negation of the claim filter).
  bool held_at(std::int64_t now_ms) const {
    return ts_expire.has_value() && ts_expire->ms > now_ms;
  }
};

// One waiter of a key's fair queue (see above). Live at server time `now_ms` while
// ts_expire > now_ms (a dead waiter's entry stops counting one ttl after its last
// renewal).
struct QueueEntry {
  std::string uuid;
  std::int64_t ticket = 0;
  std::int64_t expire_ms = 0;  // ts_expire, server time
  bool live_at(std::int64_t now_ms) const { return expire_ms > now_ms; }
  bool is(const std::string& u, std::int64_t t) const { return uuid == u && ticket == t; }
};

// A semaphore document as read from the database. Missing or odd-typed fields take
// their defaults (limit 0, fence 0, no slots): the Semaphore refuses such a document.
struct SemaphoreDoc {
  std::string key;
  std::string kind;  // "" (a semaphore: no field) or "rwlock"
  std::int64_t limit = 0;
  std::int64_t fence = 0;
  std::vector<SemaphoreSlot> slots;
  std::vector<QueueEntry> queue;  // fair queueing: in ticket order (empty: no field)
};

// One renewal of a batch (Storage::renew_semaphores): what renew_semaphore() takes.
struct SemaphoreRenewRequest {
  std::string key;
  std::int64_t slot = 0;
  std::string uuid;
  std::int64_t fence = 0;
  std::int64_t expire_ms = 0;  // the slot's new ts_expire, at least (monotonic)
  // The document, read after the batch's write, shows this slot kept at least as long
  // as asked: slot `slot` is {uuid, fence} with ts_expire >= expire_ms. Sound for the
  // reasons RenewRequest::renewed_by gives (only its holder shortens or empties a slot,
  // after letting go; a claim changes the slot's fence for good).
  bool renewed_by(const SemaphoreDoc& doc) const;
};

// A slot that a claim empties in the same atomic write (SemaphoreClaim::clear_slots).
struct SlotClear {
  std::int64_t slot = 0;
  // 0: the slot must be free at the claim's now_ms (NOT ts_expire > now_ms). Otherwise
  // it may also be exactly the claimant's own hold {claim.uuid, own_fence} (a
  // read-write lock writer's waiting mark, emptied by its own claim).
  std::int64_t own_fence = 0;
};

// What a claiming node writes: slot `slot` becomes {uuid, host, pid, fence: new_fence,
// ts_created: now_ms, ts_expire: expire_ms}, the document's fence new_fence, and every
// slot of clear_slots becomes empty.
struct SemaphoreClaim {
  std::string key;
  std::int64_t limit = 0;
  std::int64_t slot = 0;
  std::int64_t old_fence = 0;  // claim_semaphore: the document's fence must be this
  std::int64_t new_fence = 0;
  std::string uuid;
  std::string host;
  std::int64_t pid = 0;
  std::int64_t now_ms = 0;
  std::int64_t expire_ms = 0;
  // claim_semaphore: slots emptied in the same write, each free at now_ms (or the
  // claimant's own hold, see SlotClear), else nothing is written. A claim that relies on
  // OTHER slots being free (a read-write lock's writer on the reader slots, a reader on
  // the writer slot) empties them: a late renewal of an expired hold (sent before its
  // holder's deadline, landing after the slot expired) would otherwise match its {uuid,
  // fence} and revive it next to the new hold -- renewals compare with the renewer's
  // own now, and only claims change a slot's name. Ignored by create_semaphore.
  std::vector<SlotClear> clear_slots;
  std::string kind;  // create_semaphore: the document's kind ("" or "rwlock")
  // Fair queueing (claim_semaphore only; create_semaphore writes an empty queue):
  //  * queue_passed: the document's FIRST entries, in order, each still {uuid, ticket}
  //    and expired at now_ms (NOT ts_expire > now_ms), else nothing is written; removed
  //    by the write. A claim passes only waiters that are gone.
  //  * queue_own: the claimant's entry, right after queue_passed; removed by the write.
  //  * enqueue: the write claims NO slot (`slot` is ignored) and appends the claimant's
  //    entry {uuid, ticket: new_fence, ts_expire: expire_ms}; clear_slots and the queue
  //    fields above must be empty.
  std::vector<QueueEntry> queue_passed;
  std::optional<QueueEntry> queue_own;
  bool enqueue = false;
};

class SemaphoreStorage {
 public:
  virtual ~SemaphoreStorage() = default;

  // The semaphore document of `key`, or nullopt. One round trip.
  virtual std::optional<SemaphoreDoc> read_semaphore(const std::string& collection,
                                                     const std::string& key) = 0;
  // Inserts {_id: key, [kind,] limit, fence: new_fence, slots: [n slots]} whose slot
  // claim.slot holds the claim and the others are empty (old_fence is ignored); n is
  // limit for a semaphore, limit + 2 for a read-write lock (semaphore_doc::slot_count).
  // False when a document of that key exists already (duplicate key, E11000): nothing
  // written.
  virtual bool create_semaphore(const std::string& collection, const SemaphoreClaim& claim) = 0;
  // Compare-and-set: if the document is {_id: key, limit, fence: old_fence}, slot
  // claim.slot is free at claim.now_ms (NOT ts_expire > now_ms) and every slot of
  // claim.clear_slots is free then too (or the claimant's own, see SlotClear), writes the
  // claim into that slot, empties the clear_slots and sets fence = new_fence. True if it
  // matched (and was written).
  virtual bool claim_semaphore(const std::string& collection, const SemaphoreClaim& claim) = 0;
  // If slot `slot` is {uuid, fence} and unexpired (ts_expire > now_ms), moves its
  // ts_expire to expire_ms unless it is later already (monotonic, as renew()). True if
  // matched, including "matched but already later".
  virtual bool renew_semaphore(const std::string& collection, const std::string& key,
                               std::int64_t slot, const std::string& uuid, std::int64_t fence,
                               std::int64_t now_ms, std::int64_t expire_ms) = 0;
  // Batched renew_semaphore (keep-alive leases over semaphore slots, as renew_many for
  // locks): renews every request as renew_semaphore() would at server time now_ms
  // (monotonic) and returns, per request in order, whether its slot is renewed, decided
  // by reading the documents back (SemaphoreRenewRequest::renewed_by), never by counts.
  // Requests may name the same key (several slots of one client). Throws when the batch
  // fails as a whole: the caller then treats none of it as renewed. Default:
  // renew_semaphore() one by one. MongoDB (libmongoc and pymongo): per chunk of
  // max_renew_batch(), one unordered bulk `update` with a statement per slot ($max on
  // "slots.<i>.ts_expire", filtered by that slot's uuid, fence and expiry), then one find
  // over the keys (core/storage/commands.h). SQLite: one transaction. Memory: one call.
  virtual std::vector<bool> renew_semaphores(const std::string& collection,
                                             const std::vector<SemaphoreRenewRequest>& requests,
                                             std::int64_t now_ms);
  // If slot `slot` is {uuid, fence}, empties it (the document and its fence stay).
  // True if matched.
  virtual bool release_semaphore(const std::string& collection, const std::string& key,
                                 std::int64_t slot, const std::string& uuid,
                                 std::int64_t fence) = 0;

  // Fair queueing. If queue entry `index` is {uuid, ticket} and live at now_ms, moves its
  // ts_expire to expire_ms unless later already (monotonic). True if matched. By index,
  // as slots (a removal before it shifts it: the caller reads again). Default: throws
  // StorageError (a storage without fair queueing).
  virtual bool renew_queue_entry(const std::string& collection, const std::string& key,
                                 std::int64_t index, const std::string& uuid, std::int64_t ticket,
                                 std::int64_t now_ms, std::int64_t expire_ms);
  // Removes the queue entry {uuid, ticket}, wherever it is (a waiter that gave up). True if
  // there was one. Default: throws StorageError.
  virtual bool leave_queue(const std::string& collection, const std::string& key,
                           const std::string& uuid, std::int64_t ticket);
};

}  // namespace mongoelector
