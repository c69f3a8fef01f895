// Status storage: the elector's member reports ({_id: node uuid, key, ..., timestamp:
// date} in elector.leader_status), one interface of the storage seam (storage.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../value.h"

namespace mongoelector {

class StatusStorage {
 public:
  virtual ~StatusStorage() = default;

  // Status collection: TTL index on `timestamp` (expireAfterSeconds = ttl_s) and an
  // index on `key`; same tolerance as ensure_lock_indexes.
  virtual void ensure_status_indexes(const std::string& collection, std::int64_t ttl_s) = 0;
  // Upserts (replaces) the document whose _id is doc["_id"].
  virtual void put_status(const std::string& collection, const Document& doc) = 0;
  // Status documents whose `key` equals key, newest `timestamp` first.
  virtual std::vector<Document> list_status(const std::string& collection,
                                            const std::string& key) = 0;
};

}  // namespace mongoelector
