// Payload storage: the leader's payload, a small JSON object that an elector publishes
// with its term (endpoint, version, ...), one interface of the storage seam (storage.h).
//
//   lock:   {..., payload: "<JSON object text>" | null, payload_version: int64}
//
// The payload lives in the elector's lock document, so that a reader sees it with the
// term it belongs to in one read. It is written:
//  * by the claim that starts a term (LockClaim::payload): the new leader's payload, or
//    null, in the same atomic write that takes the lock, so a new term never shows the
//    previous leader's payload;
//  * by a hand-over (HandOver::fields): cleared, the target writes its own once it leads;
//  * by set_payload below, while leading: a write that names the hold (uuid AND fence), so
//    a late one (timed out at the client, applied later) can never touch a later term,
//    and is monotonic within the hold (payload_version only grows), so a late one cannot
//    bring back an older payload of the same term.
// Stored as JSON text (a string field): every backend keeps it as given, byte for byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "../value.h"

namespace mongoelector {

// Largest payload accepted, in bytes of its JSON text (UTF-8).
inline constexpr std::size_t kMaxPayloadBytes = 16 * 1024;

// `json` if it is a JSON object (UTF-8, at most kMaxPayloadBytes, nesting at most 64),
// else InvalidArgument naming what was passed.
std::string validate_payload(const std::string& json);

// The payload a claim writes (LockClaim::payload): json nullopt clears it.
struct ClaimPayload {
  std::optional<std::string> json;
  std::int64_t version = 0;
  // {payload: json | null, payload_version: version}: the fields the claim sets.
  Document fields() const;
  // Sets them on `doc` (backends that edit documents themselves: memory, SQLite).
  void set_on(Document& doc) const;
};

// A leader's payload update (PayloadStorage::set_payload).
struct PayloadWrite {
  std::string key;
  std::string uuid;
  std::int64_t fence = 0;  // the term's token (never 0)
  std::int64_t version = 0;
  std::optional<std::string> json;
  Document fields() const { return ClaimPayload{json, version}.fields(); }
  // For backends that edit documents themselves (memory, SQLite): set_payload's filter
  // and write on `doc`. False (doc untouched) unless doc is {locked: true, uuid, fence}
  // with payload_version absent or below `version`.
  bool apply_to(Document& doc) const;
};

class PayloadStorage {
 public:
  virtual ~PayloadStorage() = default;
  // ONE conditional write: if the lock is {_id: key, locked: true, uuid, fence} and its
  // payload_version is absent or below w.version, sets payload and payload_version. True
  // if matched. No expiry in the filter: a document still naming this hold is this
  // holder's to describe until the next claim, which replaces the payload atomically.
  virtual bool set_payload(const std::string& collection, const PayloadWrite& w) = 0;
};

}  // namespace mongoelector
