#include "semaphore_doc.h"

#include <string>

#include "../exceptions.h"

namespace mongoelector {

std::vector<bool> SemaphoreStorage::renew_semaphores(
    const std::string& collection, const std::vector<SemaphoreRenewRequest>& requests,
    std::int64_t now_ms) {
  std::vector<bool> renewed;
  renewed.reserve(requests.size());
  for (const SemaphoreRenewRequest& r : requests)
    renewed.push_back(
        renew_semaphore(collection, r.key, r.slot, r.uuid, r.fence, now_ms, r.expire_ms));
  return renewed;
}

bool SemaphoreRenewRequest::renewed_by(const SemaphoreDoc& doc) const {
  if (doc.key != key || slot < 0 || slot >= static_cast<std::int64_t>(doc.slots.size()))
    return false;
  const SemaphoreSlot& s = doc.slots[static_cast<std::size_t>(slot)];
  return s.uuid == uuid && s.fence == fence && s.ts_expire.has_value() &&
         s.ts_expire->ms >= expire_ms;
}

namespace semaphore_doc {

SemaphoreSlot empty_slot() {
  SemaphoreSlot s;
  s.ts_created = DateTime{0};
  s.ts_expire = DateTime{0};
  return s;
}

SemaphoreSlot claimed_slot(const SemaphoreClaim& c) {
  SemaphoreSlot s;
  s.uuid = c.uuid;
  s.host = c.host;
  s.pid = c.pid;
  s.fence = c.new_fence;
  s.ts_created = DateTime{c.now_ms};
  s.ts_expire = DateTime{c.expire_ms};
  return s;
}

bool renew_slot(SemaphoreDoc& doc, std::int64_t slot, const std::string& uuid, std::int64_t fence,
                std::int64_t now_ms, std::int64_t expire_ms) {
  if (slot < 0 || slot >= static_cast<std::int64_t>(doc.slots.size())) return false;
  SemaphoreSlot& s = doc.slots[static_cast<std::size_t>(slot)];
  if (s.uuid != uuid || s.fence != fence || !s.held_at(now_ms)) return false;
  if (s.ts_expire->ms < expire_ms) s.ts_expire = DateTime{expire_ms};  // $max
  return true;
}

SemaphoreDoc created_doc(const SemaphoreClaim& c) {
  if (c.limit < 1 || c.limit > kMaxLimit)
    throw InvalidArgument("semaphore limit must be between 1 and " + std::to_string(kMaxLimit));
  if (c.slot < 0 || c.slot >= c.limit) throw InvalidArgument("semaphore slot out of range");
  SemaphoreDoc d;
  d.key = c.key;
  d.limit = c.limit;
  d.fence = c.new_fence;
  d.slots.assign(static_cast<std::size_t>(c.limit), empty_slot());
  d.slots[static_cast<std::size_t>(c.slot)] = claimed_slot(c);
  return d;
}

namespace {
std::string field(std::size_t i, const char* name) {
  return "slots." + std::to_string(i) + "." + name;
}
}  // namespace

Document to_flat(const SemaphoreDoc& d) {
  Document f{{"_id", d.key}, {"limit", d.limit}, {"fence", d.fence}};
  for (std::size_t i = 0; i < d.slots.size(); ++i) {
    const SemaphoreSlot& s = d.slots[i];
    f.set(field(i, "uuid"), s.uuid);
    f.set(field(i, "host"), s.host);
    f.set(field(i, "pid"), s.pid);
    f.set(field(i, "fence"), s.fence);
    if (s.ts_created) f.set(field(i, "ts_created"), *s.ts_created);
    if (s.ts_expire) f.set(field(i, "ts_expire"), *s.ts_expire);
  }
  return f;
}

SemaphoreDoc from_flat(const Document& f) {
  SemaphoreDoc d;
  d.key = f.get_string("_id").value_or("");
  d.limit = f.get_int("limit").value_or(0);
  d.fence = f.get_int("fence").value_or(0);
  // Slots are numbered 0..n-1 without gaps; reading stops at the first index without a
  // single field (a bounded loop: at most kMaxLimit + 1 slots are looked at).
  for (std::size_t i = 0; i <= static_cast<std::size_t>(kMaxLimit); ++i) {
    const bool any =
        f.has(field(i, "uuid")) || f.has(field(i, "fence")) || f.has(field(i, "ts_expire"));
    if (!any) break;
    SemaphoreSlot s;
    s.uuid = f.get_string(field(i, "uuid")).value_or("");
    s.host = f.get_string(field(i, "host")).value_or("");
    s.pid = f.get_int(field(i, "pid")).value_or(0);
    s.fence = f.get_int(field(i, "fence")).value_or(0);
    s.ts_created = f.get_date(field(i, "ts_created"));
    s.ts_expire = f.get_date(field(i, "ts_expire"));
    d.slots.push_back(std::move(s));
  }
  return d;
}

std::string malformed(const SemaphoreDoc& d) {
  if (d.limit < 1 || d.limit > kMaxLimit)
    return "its limit (" + std::to_string(d.limit) + ") is not between 1 and " +
           std::to_string(kMaxLimit);
  if (static_cast<std::int64_t>(d.slots.size()) != d.limit)
    return "it has " + std::to_string(d.slots.size()) + " slots for a limit of " +
           std::to_string(d.limit);
  return "";
}

}  // namespace semaphore_doc
}  // namespace mongoelector
