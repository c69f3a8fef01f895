// Hand-over storage: the leader's write that hands its lock to a named member
// (Elector::transfer, core/election/handover.cpp), one interface of the storage seam
// (storage.h). The document helpers are in handover_doc.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "../value.h"
#include "lock_storage.h"

namespace mongoelector {

class HandOverStorage {
 public:
  virtual ~HandOverStorage() = default;

  // What the leader writes to hand its lock to a named member.
  struct HandOver {
    std::string key;
    std::string from_uuid;        // the current holder (the caller)
    std::int64_t from_fence = 0;  // its hold's token
    std::string to_uuid;          // the member that takes over
    std::string to_host;          // "" when unknown
    std::int64_t to_pid = 0;      // 0 when unknown
    std::int64_t to_fence = 0;    // the new token: strictly greater than from_fence
    std::int64_t now_ms = 0;      // server time: becomes ts_created
    std::int64_t expire_ms = 0;   // becomes ts_expire
    // The fields the hand-over sets (the $set of document servers), in one place for
    // every backend.
    Document fields() const;
    // For backends that edit documents themselves (memory, SQLite): applies the hand-over
    // to `doc` if it matches as described below; false (doc untouched) otherwise.
    bool apply_to(Document& doc) const;
    // `doc` carries the mark of a hand-over to its current hold (handover_fence == fence).
    static bool marks(const LockDoc& doc);
    // ... and its target has not taken it yet: ts_expire is still the hand-over's
    // (handover_expire), which the target's first renewal moves later.
    static bool pending_in(const LockDoc& doc);
  };
  // ONE atomic conditional write: if the lock is {_id: key, locked: true, uuid:
  // from_uuid, fence: from_fence} and unexpired (ts_expire > now_ms), sets uuid, host,
  // pid, fence = to_fence, ts_created = now_ms, ts_expire = expire_ms, and the mark
  // handover_from = from_uuid, handover_fence = to_fence, handover_expire = expire_ms
  // (the target takes the lock only while handover_fence equals fence; a later claim's
  // $inc voids the mark; observers show the hand-over as pending while ts_expire equals
  // handover_expire). True if matched.
  virtual bool hand_over(const std::string& collection, const HandOver& h) = 0;
};

}  // namespace mongoelector
