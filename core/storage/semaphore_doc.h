// Helpers shared by the backends that store a semaphore document themselves (memory,
// SQLite): the slots a claim writes, the renewal of a slot, and a flat form of the
// document for stores that hold only top-level scalar fields (the SQLite rows are
// Extended JSON of a flat Document, see storage/document_json.h). MongoDB and pymongo
// store the nested form of storage.h: {_id, limit, fence, slots: [{uuid, host, pid,
// fence, ts_created, ts_expire}, ...]}.
#pragma once

#include <cstdint>
#include <string>

#include "../value.h"
#include "semaphore_storage.h"

namespace mongoelector::semaphore_doc {

// The largest limit a semaphore may have (and a read-write lock's max_readers): the
// whole slot array is one document that every acquirer reads (about 150 bytes a slot).
constexpr std::int64_t kMaxLimit = 1000;
// The `kind` of a read-write lock's document (a semaphore's has none).
constexpr const char* kRwLockKind = "rwlock";
// The most slots a document has: a read-write lock's limit + 2.
constexpr std::int64_t kMaxSlots = kMaxLimit + 2;

// The number of slots of a document of `kind` and `limit`: limit for a semaphore ("");
// limit + 2 for a read-write lock (readers, the writer, the writer-waiting mark); -1 for
// an unknown kind.
std::int64_t slot_count(const std::string& kind, std::int64_t limit);

// An empty slot: uuid "", fence 0, dates at the Unix epoch (free at any time).
SemaphoreSlot empty_slot();
// Empty as written by a release or a claim's clear_slots (no hold's name left).
bool is_empty(const SemaphoreSlot& slot);
// The slot a claim writes.
SemaphoreSlot claimed_slot(const SemaphoreClaim& claim);
// The document create_semaphore writes: slot_count(kind, limit) slots, the claim in
// claim.slot.
SemaphoreDoc created_doc(const SemaphoreClaim& claim);

// Storage::claim_semaphore on the document (the memory and SQLite backends; MongoDB's
// filter is commands::claim_semaphore): if the document matches the claim's
// compare-and-set (limit, fence, slot free, every clear slot free or the claimant's own
// hold), writes the claim and empties the clear slots, returning true; else false, doc
// untouched.
bool apply_claim(SemaphoreDoc& doc, const SemaphoreClaim& claim);
// apply_claim's two halves: the filter, and the write (also a holder's copy of the
// document after its claim matched at the server).
bool claim_matches(const SemaphoreDoc& doc, const SemaphoreClaim& claim);
void put_claim(SemaphoreDoc& doc, const SemaphoreClaim& claim);
// InvalidArgument when claim.clear_slots names a negative index, the claimed slot, or
// one slot twice (MongoDB refuses two $set of one path).
void check_clear_slots(const SemaphoreClaim& claim);

// Fair queueing on the document (the memory and SQLite backends; MongoDB's commands are
// commands::claim_semaphore, renew_queue_entry, leave_queue). The entry an enqueue
// appends: {uuid, ticket: new_fence, ts_expire: expire_ms}.
QueueEntry queued_entry(const SemaphoreClaim& claim);
// The last ticket a claim removes from the queue (every entry with a ticket up to it:
// queue_passed and queue_own, which are the first entries); 0: none.
std::int64_t queue_removed_through(const SemaphoreClaim& claim);
// InvalidArgument when an enqueue also names slots to clear or queue entries to pass.
void check_queue_fields(const SemaphoreClaim& claim);
// Storage::renew_queue_entry / leave_queue on the document: true when matched (and
// written).
bool renew_queue_entry(SemaphoreDoc& doc, std::int64_t index, const std::string& uuid,
                       std::int64_t ticket, std::int64_t now_ms, std::int64_t expire_ms);
bool leave_queue(SemaphoreDoc& doc, const std::string& uuid, std::int64_t ticket);

// Storage::renew_semaphore on the document: if slot `slot` is {uuid, fence} and
// unexpired at now_ms, moves its ts_expire to expire_ms unless later already (monotonic)
// and returns true; else false, doc untouched.
bool renew_slot(SemaphoreDoc& doc, std::int64_t slot, const std::string& uuid, std::int64_t fence,
                std::int64_t now_ms, std::int64_t expire_ms);

// Flat form: {_id, [kind,] limit, fence, "slots.<i>.uuid", "slots.<i>.host", "slots.<i>.pid",
// "slots.<i>.fence", "slots.<i>.ts_created", "slots.<i>.ts_expire", ..., and per queue
// entry "queue.<j>.uuid", "queue.<j>.ticket", "queue.<j>.ts_expire"}.
Document to_flat(const SemaphoreDoc& doc);
// Reads the flat form back; odd or missing fields take their defaults (a slot count
// other than `limit` is kept as read, for the Semaphore to refuse).
SemaphoreDoc from_flat(const Document& flat);

// A document that the protocol can use: a known kind, limit in [1, kMaxLimit], exactly
// slot_count(kind, limit) slots. Empty string if fine, else what is wrong.
std::string malformed(const SemaphoreDoc& doc);

}  // namespace mongoelector::semaphore_doc
