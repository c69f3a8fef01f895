#include "semaphore_doc.h"

#include <algorithm>
#include <set>
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

bool SemaphoreStorage::renew_queue_entry(const std::string&, const std::string& key, std::int64_t,
                                         const std::string&, std::int64_t, std::int64_t,
                                         std::int64_t) {
  throw StorageError("this storage has no fair queueing (renew_queue_entry of '" + key + "')");
}

bool SemaphoreStorage::leave_queue(const std::string&, const std::string& key, const std::string&,
                                   std::int64_t) {
  throw StorageError("this storage has no fair queueing (leave_queue of '" + key + "')");
}

bool SemaphoreRenewRequest::renewed_by(const SemaphoreDoc& doc) const {
  if (doc.key != key || slot < 0 || slot >= static_cast<std::int64_t>(doc.slots.size()))
    return false;
  const SemaphoreSlot& s = doc.slots[static_cast<std::size_t>(slot)];
  return s.uuid == uuid && s.fence == fence && s.ts_expire.has_value() &&
         s.ts_expire->ms >= expire_ms;
}

namespace semaphore_doc {

std::int64_t slot_count(const std::string& kind, std::int64_t limit) {
  if (kind.empty()) return limit;
  if (kind == kRwLockKind) return limit + 2;
  return -1;
}

SemaphoreSlot empty_slot() {
  SemaphoreSlot s;
  s.ts_created = DateTime{0};
  s.ts_expire = DateTime{0};
  return s;
}

bool is_empty(const SemaphoreSlot& s) { return s.uuid.empty() && s.fence == 0; }

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
  const std::int64_t n = slot_count(c.kind, c.limit);
  if (n < 0) throw InvalidArgument("unknown semaphore document kind '" + c.kind + "'");
  if (c.slot < 0 || c.slot >= n) throw InvalidArgument("semaphore slot out of range");
  SemaphoreDoc d;
  d.key = c.key;
  d.kind = c.kind;
  d.limit = c.limit;
  d.fence = c.new_fence;
  d.slots.assign(static_cast<std::size_t>(n), empty_slot());
  d.slots[static_cast<std::size_t>(c.slot)] = claimed_slot(c);
  return d;
}

void check_clear_slots(const SemaphoreClaim& c) {
  std::set<std::int64_t> seen;
  for (const SlotClear& x : c.clear_slots)
    if (x.slot < 0 || x.slot == c.slot || !seen.insert(x.slot).second)
      throw InvalidArgument("semaphore claim: bad slot to clear (" + std::to_string(x.slot) + ")");
}

QueueEntry queued_entry(const SemaphoreClaim& c) {
  return QueueEntry{c.uuid, c.new_fence, c.expire_ms};
}

void check_queue_fields(const SemaphoreClaim& c) {
  if (c.enqueue && (!c.clear_slots.empty() || !c.queue_passed.empty() || c.queue_own))
    throw InvalidArgument("semaphore claim: an enqueue claims nothing else");
}

namespace {
// The queue part of claim_matches: queue_passed are the first entries, each still named
// so and expired at now; queue_own follows them.
bool queue_matches(const SemaphoreDoc& doc, const SemaphoreClaim& c) {
  const std::size_t n = c.queue_passed.size() + (c.queue_own ? 1 : 0);
  if (doc.queue.size() < n) return false;
  for (std::size_t i = 0; i < c.queue_passed.size(); ++i) {
    const QueueEntry& e = doc.queue[i];
    if (!e.is(c.queue_passed[i].uuid, c.queue_passed[i].ticket) || e.live_at(c.now_ms))
      return false;
  }
  return !c.queue_own ||
         doc.queue[c.queue_passed.size()].is(c.queue_own->uuid, c.queue_own->ticket);
}
}  // namespace

std::int64_t queue_removed_through(const SemaphoreClaim& c) {
  if (c.queue_own) return c.queue_own->ticket;
  return c.queue_passed.empty() ? 0 : c.queue_passed.back().ticket;
}

bool claim_matches(const SemaphoreDoc& doc, const SemaphoreClaim& c) {
  // {_id, limit, fence: old_fence, "slots.<i>.ts_expire": {$not: {$gt: now}}, and per
  // clear slot j: free, or {slots.<j>.uuid: uuid, slots.<j>.fence: own_fence}, and the
  // queue entries passed (expired) and own}
  check_clear_slots(c);
  check_queue_fields(c);
  if (doc.limit != c.limit || doc.fence != c.old_fence) return false;
  if (c.enqueue) return true;
  if (!queue_matches(doc, c)) return false;
  const auto n = static_cast<std::int64_t>(doc.slots.size());
  if (c.slot < 0 || c.slot >= n) return false;
  if (doc.slots[static_cast<std::size_t>(c.slot)].held_at(c.now_ms)) return false;
  for (const SlotClear& x : c.clear_slots) {
    if (x.slot >= n) return false;
    const SemaphoreSlot& s = doc.slots[static_cast<std::size_t>(x.slot)];
    const bool own = x.own_fence != 0 && s.uuid == c.uuid && s.fence == x.own_fence;
    if (s.held_at(c.now_ms) && !own) return false;
  }
  return true;
}

void put_claim(SemaphoreDoc& doc, const SemaphoreClaim& c) {
  doc.fence = c.new_fence;
  if (c.enqueue) {
    doc.queue.push_back(queued_entry(c));
    return;
  }
  if (const std::int64_t through = queue_removed_through(c); through != 0)
    doc.queue.erase(std::remove_if(doc.queue.begin(), doc.queue.end(),
                                   [through](const QueueEntry& e) { return e.ticket <= through; }),
                    doc.queue.end());
  for (const SlotClear& x : c.clear_slots)
    if (x.slot >= 0 && x.slot < static_cast<std::int64_t>(doc.slots.size()))
      doc.slots[static_cast<std::size_t>(x.slot)] = empty_slot();
  if (c.slot >= 0 && c.slot < static_cast<std::int64_t>(doc.slots.size()))
    doc.slots[static_cast<std::size_t>(c.slot)] = claimed_slot(c);
}

bool renew_queue_entry(SemaphoreDoc& doc, std::int64_t index, const std::string& uuid,
                       std::int64_t ticket, std::int64_t now_ms, std::int64_t expire_ms) {
  if (index < 0 || index >= static_cast<std::int64_t>(doc.queue.size())) return false;
  QueueEntry& e = doc.queue[static_cast<std::size_t>(index)];
  if (!e.is(uuid, ticket) || !e.live_at(now_ms)) return false;
  e.expire_ms = std::max(e.expire_ms, expire_ms);  // $max
  return true;
}

bool leave_queue(SemaphoreDoc& doc, const std::string& uuid, std::int64_t ticket) {
  const auto it = std::find_if(doc.queue.begin(), doc.queue.end(),
                               [&](const QueueEntry& e) { return e.is(uuid, ticket); });
  if (it == doc.queue.end()) return false;
  doc.queue.erase(it);
  return true;
}

bool apply_claim(SemaphoreDoc& doc, const SemaphoreClaim& c) {
  if (!claim_matches(doc, c)) return false;
  put_claim(doc, c);
  return true;
}

namespace {
std::string field(std::size_t i, const char* name) {
  return "slots." + std::to_string(i) + "." + name;
}
std::string queue_field(std::size_t i, const char* name) {
  return "queue." + std::to_string(i) + "." + name;
}
}  // namespace

Document to_flat(const SemaphoreDoc& d) {
  Document f{{"_id", d.key}};
  if (!d.kind.empty()) f.set("kind", d.kind);
  f.set("limit", d.limit);
  f.set("fence", d.fence);
  for (std::size_t i = 0; i < d.slots.size(); ++i) {
    const SemaphoreSlot& s = d.slots[i];
    f.set(field(i, "uuid"), s.uuid);
    f.set(field(i, "host"), s.host);
    f.set(field(i, "pid"), s.pid);
    f.set(field(i, "fence"), s.fence);
    if (s.ts_created) f.set(field(i, "ts_created"), *s.ts_created);
    if (s.ts_expire) f.set(field(i, "ts_expire"), *s.ts_expire);
  }
  for (std::size_t i = 0; i < d.queue.size(); ++i) {
    f.set(queue_field(i, "uuid"), d.queue[i].uuid);
    f.set(queue_field(i, "ticket"), d.queue[i].ticket);
    f.set(queue_field(i, "ts_expire"), DateTime{d.queue[i].expire_ms});
  }
  return f;
}

SemaphoreDoc from_flat(const Document& f) {
  SemaphoreDoc d;
  d.key = f.get_string("_id").value_or("");
  // A kind of another type: unknown (refused, never taken for a semaphore's document).
  if (f.has("kind")) d.kind = f.get_string("kind").value_or("?");
  d.limit = f.get_int("limit").value_or(0);
  d.fence = f.get_int("fence").value_or(0);
  // Slots are numbered 0..n-1 without gaps; reading stops at the first index without a
  // single field (a bounded loop: at most kMaxSlots + 1 slots are looked at).
  for (std::size_t i = 0; i <= static_cast<std::size_t>(kMaxSlots); ++i) {
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
  // Queue entries likewise, 0..m-1 without gaps (each enqueue is one waiter's write).
  for (std::size_t i = 0; f.has(queue_field(i, "uuid")) || f.has(queue_field(i, "ticket")); ++i) {
    QueueEntry e;
    e.uuid = f.get_string(queue_field(i, "uuid")).value_or("");
    e.ticket = f.get_int(queue_field(i, "ticket")).value_or(0);
    const std::optional<DateTime> t = f.get_date(queue_field(i, "ts_expire"));
    e.expire_ms = t ? t->ms : 0;
    d.queue.push_back(std::move(e));
  }
  return d;
}

std::string malformed(const SemaphoreDoc& d) {
  const std::int64_t n = slot_count(d.kind, d.limit);
  if (n < 0) return "its kind ('" + d.kind + "') is unknown";
  if (d.limit < 1 || d.limit > kMaxLimit)
    return "its limit (" + std::to_string(d.limit) + ") is not between 1 and " +
           std::to_string(kMaxLimit);
  if (static_cast<std::int64_t>(d.slots.size()) != n)
    return "it has " + std::to_string(d.slots.size()) + " slots for a limit of " +
           std::to_string(d.limit) + (d.kind.empty() ? "" : " (kind '" + d.kind + "')");
  return "";
}

}  // namespace semaphore_doc
}  // namespace mongoelector
