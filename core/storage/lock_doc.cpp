#include "storage.h"

#include <map>
#include <utility>

#include "../exceptions.h"

namespace mongoelector {

LockDoc LockDoc::from_document(const Document& raw) {
  LockDoc d;
  d.raw = raw;
  d.key = raw.get_string("_id").value_or("");
  d.locked = raw.get_bool("locked").value_or(false);
  d.host = raw.get_string("host").value_or("");
  d.uuid = raw.get_string("uuid").value_or("");
  d.pid = raw.get_int("pid").value_or(0);
  d.ts_created = raw.get_date("ts_created");
  d.ts_expire = raw.get_date("ts_expire");
  d.fence = raw.get_int("fence").value_or(0);
  d.payload = raw.get_string("payload");
  return d;
}

void LockClaim::apply_to(Document& doc, std::int64_t fence) const {
  doc.set("locked", true);
  doc.set("host", host);
  doc.set("uuid", uuid);
  doc.set("pid", pid);
  doc.set("ts_created", DateTime{now_ms});
  doc.set("ts_expire", DateTime{expire_ms});
  if (payload) payload->set_on(doc);
  doc.set("fence", fence);
}

Document LockClaim::document() const {
  Document doc{{"_id", key}};
  apply_to(doc, 1);
  return doc;
}

bool set_fence_on(Document& doc, const std::string& uuid, std::int64_t old_fence,
                  std::int64_t created_ms, std::int64_t new_fence) {
  const LockDoc cur = LockDoc::from_document(doc);
  if (!cur.locked || cur.uuid != uuid || cur.fence != old_fence || !cur.ts_created ||
      cur.ts_created->ms != created_ms)
    return false;
  doc.set("fence", new_fence);
  return true;
}

bool LockDoc::held_at(std::int64_t now_ms) const {
  // A document without a usable expiry is treated as expired: it cannot block forever.
  return locked && ts_expire.has_value() && ts_expire->ms > now_ms;
}

std::vector<bool> LockStorage::renew_many(const std::string& collection,
                                          const std::vector<RenewRequest>& requests,
                                          std::int64_t now_ms) {
  std::vector<bool> renewed;
  renewed.reserve(requests.size());
  for (const RenewRequest& r : requests)
    renewed.push_back(renew(collection, r.key, r.uuid, r.fence, now_ms, r.expire_ms));
  return renewed;
}

std::vector<std::optional<LockDoc>> LockStorage::read_many(const std::string& collection,
                                                           const std::vector<std::string>& keys) {
  std::vector<std::optional<LockDoc>> docs;
  docs.reserve(keys.size());
  for (const std::string& k : keys) docs.push_back(read(collection, k));
  return docs;
}

std::vector<RenewGroup> renew_groups(const std::vector<RenewRequest>& requests, std::size_t from,
                                     std::size_t to) {
  std::map<std::pair<std::int64_t, bool>, std::vector<std::size_t>> by;
  for (std::size_t i = from; i < to; ++i)
    by[{requests[i].expire_ms, requests[i].fence != 0}].push_back(i);
  std::vector<RenewGroup> groups;
  for (auto& [k, members] : by) groups.push_back(RenewGroup{k.first, k.second, std::move(members)});
  return groups;
}

bool RenewRequest::renewed_by(const LockDoc& doc) const {
  return doc.locked && doc.uuid == uuid && (fence == 0 || doc.fence == fence) &&
         doc.ts_expire.has_value() && doc.ts_expire->ms >= expire_ms;
}

bool RenewRequest::apply_to(Document& doc, std::int64_t now_ms, bool exact) const {
  const LockDoc cur = LockDoc::from_document(doc);
  if (!cur.locked || cur.uuid != uuid || (fence != 0 && cur.fence != fence) || !cur.held_at(now_ms))
    return false;
  if (created_ms != 0 && (!cur.ts_created || cur.ts_created->ms != created_ms)) return false;
  if (exact || cur.ts_expire->ms < expire_ms) doc.set("ts_expire", DateTime{expire_ms});
  return true;
}

}  // namespace mongoelector
