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

// The largest limit a semaphore may have: the whole slot array is one document that
// every acquirer reads (about 150 bytes a slot).
constexpr std::int64_t kMaxLimit = 1000;

// An empty slot: uuid "", fence 0, dates at the Unix epoch (free at any time).
SemaphoreSlot empty_slot();
// The slot a claim writes.
SemaphoreSlot claimed_slot(const SemaphoreClaim& claim);
// The document create_semaphore writes: `limit` slots, the claim in claim.slot.
SemaphoreDoc created_doc(const SemaphoreClaim& claim);

// Storage::renew_semaphore on the document: if slot `slot` is {uuid, fence} and
// unexpired at now_ms, moves its ts_expire to expire_ms unless later already (monotonic)
// and returns true; else false, doc untouched.
bool renew_slot(SemaphoreDoc& doc, std::int64_t slot, const std::string& uuid, std::int64_t fence,
                std::int64_t now_ms, std::int64_t expire_ms);

// Flat form: {_id, limit, fence, "slots.<i>.uuid", "slots.<i>.host", "slots.<i>.pid",
// "slots.<i>.fence", "slots.<i>.ts_created", "slots.<i>.ts_expire", ...}.
Document to_flat(const SemaphoreDoc& doc);
// Reads the flat form back; odd or missing fields take their defaults (a slot count
// other than `limit` is kept as read, for the Semaphore to refuse).
SemaphoreDoc from_flat(const Document& flat);

// A semaphore document that the protocol can use: limit in [1, kMaxLimit], exactly
// `limit` slots. Empty string if fine, else what is wrong.
std::string malformed(const SemaphoreDoc& doc);

}  // namespace mongoelector::semaphore_doc
