#include "commands.h"

#include <unordered_set>
#include <utility>

#include "../exceptions.h"
#include "semaphore_doc.h"

namespace mongoelector::commands {

Node Node::doc(std::vector<Node> fields) {
  Node n;
  n.kind = Kind::document;
  n.children = std::move(fields);
  return n;
}

Node Node::array(std::vector<Node> elements) {
  Node n;
  n.kind = Kind::array;
  n.children = std::move(elements);
  for (Node& e : n.children) e.name.clear();
  return n;
}

Node Node::of(const Document& d) {
  Node n;
  n.children.reserve(d.fields().size());
  for (const auto& f : d.fields()) n.children.emplace_back(f.first, f.second);
  return n;
}

namespace {

Command make(Op op, std::string collection, Node filter, Node update, std::string what) {
  Command c;
  c.op = op;
  c.collection = std::move(collection);
  c.filter = std::move(filter);
  c.update = std::move(update);
  c.what = std::move(what);
  return c;
}

// {$gt: now}: unexpired at server time now_ms.
Node later_than(std::int64_t now_ms) { return Node::doc({{"$gt", DateTime{now_ms}}}); }

// {$max: {field: expire}}: a renewal never lowers an expiry (storage.h, renew()); with
// `exact`, set_expiry's {$set: {field: expire}}.
Node expiry_update(std::string field, std::int64_t expire_ms, bool exact = false) {
  return Node::doc(
      {{exact ? "$set" : "$max", Node::doc({{std::move(field), DateTime{expire_ms}}})}});
}

// renew()'s filter (and set_expiry's, hand_over's): {_id, locked: true, uuid,
// ts_expire: {$gt: now}, fence (unless 0)}.
Node renew_filter(const std::string& key, const std::string& uuid, std::int64_t fence,
                  std::int64_t now_ms) {
  Node f = Node::doc(
      {{"_id", key}, {"locked", true}, {"uuid", uuid}, {"ts_expire", later_than(now_ms)}});
  if (fence != 0) f.add("fence", fence);
  return f;
}

std::string slot_path(std::int64_t slot, const char* field = nullptr) {
  std::string p = "slots." + std::to_string(slot);
  if (field) p += std::string(".") + field;
  return p;
}

Node slot_node(const SemaphoreSlot& s) {
  return Node::doc({{"uuid", s.uuid},
                    {"host", s.host},
                    {"pid", s.pid},
                    {"fence", s.fence},
                    {"ts_created", DateTime{s.ts_created ? s.ts_created->ms : 0}},
                    {"ts_expire", DateTime{s.ts_expire ? s.ts_expire->ms : 0}}});
}

// The filter naming slot `slot`'s hold: {_id, slots.<i>.uuid, slots.<i>.fence}. By index:
// mongo-java-server rejects the positional operator after $elemMatch, mongomock resolves
// `$` to the wrong element (storage.h).
Node slot_filter(const std::string& key, std::int64_t slot, const std::string& uuid,
                 std::int64_t fence) {
  return Node::doc(
      {{"_id", key}, {slot_path(slot, "uuid"), uuid}, {slot_path(slot, "fence"), fence}});
}

Node in_list(std::vector<Node> elements) {
  return Node::doc({{"$in", Node::array(std::move(elements))}});
}

}  // namespace

Command claim(const std::string& collection, const LockClaim& c, bool force) {
  Node filter = Node::doc({{"_id", c.key}});
  if (!force) {
    // Not held: NOT (locked == true AND ts_expire > now), the negation of
    // LockDoc::held_at. For the documents we and original nodes write this is "released
    // or expired"; a document with an odd-typed or missing locked/ts_expire cannot block
    // the key forever. When held, the upsert becomes an insert of the same _id, which
    // fails with E11000: that is how "held" is reported atomically.
    filter.add(
        "$or",
        Node::array({Node::doc({{"locked", Node::doc({{"$ne", true}})}}),
                     Node::doc({{"ts_expire", Node::doc({{"$not", later_than(c.now_ms)}})}})}));
  }
  Node set = Node::doc({{"locked", true},
                        {"host", c.host},
                        {"uuid", c.uuid},
                        {"pid", c.pid},
                        {"ts_created", DateTime{c.now_ms}},
                        {"ts_expire", DateTime{c.expire_ms}}});
  // An elector's payload comes with its claim, in the same atomic write.
  if (c.payload) {
    const Document fields = c.payload->fields();
    for (const Document::Field& f : fields.fields()) set.add(f.first, f.second);
  }
  Node update =
      Node::doc({{"$set", std::move(set)}, {"$inc", Node::doc({{"fence", std::int64_t{1}}})}});
  return make(Op::find_and_modify, collection, std::move(filter), std::move(update),
              "findAndModify (claim " + c.key + ")");
}

Command insert_claim(const std::string& collection, const LockClaim& c) {
  return make(Op::insert_one, collection, Node(), Node::of(c.document()),
              "insert (claim " + c.key + ")");
}

Command bump_epoch(const std::string& collection, const std::string& key) {
  return make(Op::find_and_modify, collection + ".fences", Node::doc({{"_id", key}}),
              Node::doc({{"$inc", Node::doc({{"epoch", std::int64_t{1}}})}}),
              "findAndModify (epoch of " + key + ")");
}

Command set_fence(const std::string& collection, const std::string& key, const std::string& uuid,
                  std::int64_t old_fence, std::int64_t created_ms, std::int64_t new_fence) {
  return make(Op::update_one, collection,
              Node::doc({{"_id", key},
                         {"locked", true},
                         {"uuid", uuid},
                         {"fence", old_fence},
                         {"ts_created", DateTime{created_ms}}}),
              Node::doc({{"$set", Node::doc({{"fence", new_fence}})}}), "update (set_fence)");
}

Command renew(const std::string& collection, const std::string& key, const std::string& uuid,
              std::int64_t fence, std::int64_t now_ms, std::int64_t expire_ms, bool exact,
              std::int64_t created_ms) {
  Node filter = renew_filter(key, uuid, fence, now_ms);
  if (created_ms != 0) filter.add("ts_created", DateTime{created_ms});
  return make(Op::update_one, collection, std::move(filter),
              expiry_update("ts_expire", expire_ms, exact),
              exact ? "update (set expiry)" : "update (renew)");
}

Command renew_group(const std::string& collection, const std::vector<RenewRequest>& requests,
                    const RenewGroup& g, std::int64_t now_ms) {
  // renew()'s filter with $in lists of the group's keys, uuids (and fences): see
  // renew_groups in storage.h for why they match the same documents.
  std::vector<Node> keys, uuids, fences;
  keys.reserve(g.members.size());
  uuids.reserve(g.members.size());
  if (g.fenced) fences.reserve(g.members.size());
  for (std::size_t i : g.members) {
    keys.push_back(Node::scalar(requests[i].key));
    uuids.push_back(Node::scalar(requests[i].uuid));
    if (g.fenced) fences.push_back(Node::scalar(requests[i].fence));
  }
  Node filter = Node::doc({{"_id", in_list(std::move(keys))},
                           {"locked", true},
                           {"uuid", in_list(std::move(uuids))},
                           {"ts_expire", later_than(now_ms)}});
  if (g.fenced) filter.add("fence", in_list(std::move(fences)));
  return make(Op::update_many, collection, std::move(filter),
              expiry_update("ts_expire", g.expire_ms), "update (renew_many)");
}

Command read_keys(const std::string& collection, const std::vector<std::string>& keys) {
  std::vector<Node> list;
  list.reserve(keys.size());
  for (const std::string& k : keys) list.push_back(Node::scalar(k));
  Command c = make(Op::find, collection, Node::doc({{"_id", in_list(std::move(list))}}), Node(),
                   "find (read back)");
  c.limit = static_cast<std::int64_t>(keys.size());
  return c;
}

Command release(const std::string& collection, const std::string& key,
                const std::optional<std::string>& uuid, std::int64_t fence, std::int64_t now_ms,
                bool delete_document) {
  Node filter = Node::doc({{"_id", key}});
  if (uuid) {
    filter.add("uuid", *uuid);
    // Names the hold, not just the owner: a release that runs late (timed out at the
    // client, applied later) cannot free a newer hold of the same owner.
    if (fence != 0) filter.add("fence", fence);
  }
  if (delete_document)
    return make(Op::delete_one, collection, std::move(filter), Node(), "delete (release)");
  return make(
      Op::update_one, collection, std::move(filter),
      Node::doc({{"$set", Node::doc({{"locked", false}, {"ts_expire", DateTime{now_ms}}})}}),
      "update (release)");
}

Command set_payload(const std::string& collection, const PayloadWrite& w) {
  // Names the hold (uuid AND fence): a late one never touches a later term; payload_version
  // below ours (or absent: $not $gte): a late one never brings back an older payload.
  Node filter =
      Node::doc({{"_id", w.key},
                 {"locked", true},
                 {"uuid", w.uuid},
                 {"fence", w.fence},
                 {"payload_version", Node::doc({{"$not", Node::doc({{"$gte", w.version}})}})}});
  return make(Op::update_one, collection, std::move(filter),
              Node::doc({{"$set", Node::of(w.fields())}}), "update (payload of " + w.key + ")");
}

Command read(const std::string& collection, const std::string& key) {
  Command c =
      make(Op::find, collection, Node::doc({{"_id", key}}), Node(), "find (read " + key + ")");
  c.limit = 1;
  c.one = true;
  return c;
}

Command hand_over(const std::string& collection, const Storage::HandOver& h) {
  // renew()'s filter (uuid, fence, unexpired): one atomic update_one.
  return make(Op::update_one, collection, renew_filter(h.key, h.from_uuid, h.from_fence, h.now_ms),
              Node::doc({{"$set", Node::of(h.fields())}}), "update (hand over " + h.key + ")");
}

Command create_semaphore(const std::string& collection, const SemaphoreClaim& c) {
  const SemaphoreDoc d = semaphore_doc::created_doc(c);  // checks limit and slot
  std::vector<Node> slots;
  slots.reserve(d.slots.size());
  for (const SemaphoreSlot& s : d.slots) slots.push_back(slot_node(s));
  Node doc = Node::doc({{"_id", c.key}});
  if (!d.kind.empty()) doc.add("kind", d.kind);  // a semaphore's document has none
  doc.add("limit", d.limit);
  doc.add("fence", d.fence);
  doc.add("slots", Node::array(std::move(slots)));
  return make(Op::insert_one, collection, Node(), std::move(doc),
              "insert (create semaphore " + c.key + ")");
}

namespace {
std::string queue_path(std::size_t i, const char* field) {
  return "queue." + std::to_string(i) + "." + field;
}

Node queue_entry_node(const QueueEntry& e) {
  return Node::doc({{"uuid", e.uuid}, {"ticket", e.ticket}, {"ts_expire", DateTime{e.expire_ms}}});
}

// An enqueue (SemaphoreClaim::enqueue): compare-and-set on the fence, the entry appended.
Command enqueue(const std::string& collection, const SemaphoreClaim& c) {
  semaphore_doc::check_queue_fields(c);
  return make(
      Op::update_one, collection,
      Node::doc({{"_id", c.key}, {"limit", c.limit}, {"fence", c.old_fence}}),
      Node::doc(
          {{"$set", Node::doc({{"fence", c.new_fence}})},
           {"$push", Node::doc({{"queue", queue_entry_node(semaphore_doc::queued_entry(c))}})}}),
      "update (enqueue on semaphore " + c.key + ")");
}
}  // namespace

Command claim_semaphore(const std::string& collection, const SemaphoreClaim& c) {
  if (c.enqueue) return enqueue(collection, c);
  // Free: NOT (ts_expire > now), the negation of SemaphoreSlot::held_at.
  auto free_at = [&](std::int64_t slot) {
    return Node(slot_path(slot, "ts_expire"), Node::doc({{"$not", later_than(c.now_ms)}}));
  };
  Node filter = Node::doc({{"_id", c.key}, {"limit", c.limit}, {"fence", c.old_fence}});
  filter.children.push_back(free_at(c.slot));
  // The queue entries passed: the first ones, by index, each still {uuid, ticket} and
  // expired now (a renewal since would show); then the claimant's own.
  for (std::size_t i = 0; i < c.queue_passed.size(); ++i) {
    filter.add(queue_path(i, "uuid"), c.queue_passed[i].uuid);
    filter.add(queue_path(i, "ticket"), c.queue_passed[i].ticket);
    filter.add(queue_path(i, "ts_expire"), Node::doc({{"$not", later_than(c.now_ms)}}));
  }
  if (c.queue_own) {
    filter.add(queue_path(c.queue_passed.size(), "uuid"), c.queue_own->uuid);
    filter.add(queue_path(c.queue_passed.size(), "ticket"), c.queue_own->ticket);
  }
  Node set = Node::doc({{"fence", c.new_fence}});
  // clear_slots: each free at now (a plain condition), or, for the claimant's own hold,
  // {$or: [free, {uuid, fence}]} (several under one $and: a filter has one $or).
  semaphore_doc::check_clear_slots(c);
  std::vector<Node> either;
  for (const SlotClear& x : c.clear_slots) {
    if (x.own_fence == 0)
      filter.children.push_back(free_at(x.slot));
    else
      either.push_back(Node::doc(
          {{"$or", Node::array({Node::doc({free_at(x.slot)}),
                                Node::doc({{slot_path(x.slot, "uuid"), c.uuid},
                                           {slot_path(x.slot, "fence"), x.own_fence}})})}}));
    set.add(slot_path(x.slot), slot_node(semaphore_doc::empty_slot()));
  }
  if (either.size() == 1)
    filter.children.push_back(std::move(either.front().children.front()));
  else if (!either.empty())
    filter.add("$and", Node::array(std::move(either)));
  set.add(slot_path(c.slot), slot_node(semaphore_doc::claimed_slot(c)));
  Node update = Node::doc({{"$set", std::move(set)}});
  // Tickets increase along the array, so "up to the last one removed" is exactly the
  // entries the filter named (checked at the same instant, atomically).
  if (const std::int64_t through = semaphore_doc::queue_removed_through(c); through != 0)
    update.add("$pull",
               Node::doc({{"queue", Node::doc({{"ticket", Node::doc({{"$lte", through}})}})}}));
  return make(Op::update_one, collection, std::move(filter), std::move(update),
              "update (claim semaphore " + c.key + ")");
}

Command renew_queue_entry(const std::string& collection, const std::string& key, std::int64_t index,
                          const std::string& uuid, std::int64_t ticket, std::int64_t now_ms,
                          std::int64_t expire_ms) {
  const auto i = static_cast<std::size_t>(std::max<std::int64_t>(index, 0));
  return make(Op::update_one, collection,
              Node::doc({{"_id", key},
                         {queue_path(i, "uuid"), uuid},
                         {queue_path(i, "ticket"), ticket},
                         {queue_path(i, "ts_expire"), later_than(now_ms)}}),
              expiry_update(queue_path(i, "ts_expire"), expire_ms),
              "update (renew queue entry on " + key + ")");
}

Command leave_queue(const std::string& collection, const std::string& key, const std::string& uuid,
                    std::int64_t ticket) {
  Node entry = Node::doc({{"uuid", uuid}, {"ticket", ticket}});
  return make(Op::update_one, collection,
              Node::doc({{"_id", key}, {"queue", Node::doc({{"$elemMatch", entry}})}}),
              Node::doc({{"$pull", Node::doc({{"queue", entry}})}}),
              "update (leave queue of " + key + ")");
}

namespace {
// renew_semaphore's statement: the slot's hold, unexpired; {$max: its ts_expire}.
Statement slot_renewal(const std::string& key, std::int64_t slot, const std::string& uuid,
                       std::int64_t fence, std::int64_t now_ms, std::int64_t expire_ms) {
  Node filter = slot_filter(key, slot, uuid, fence);
  filter.add(slot_path(slot, "ts_expire"), later_than(now_ms));
  return Statement{std::move(filter), expiry_update(slot_path(slot, "ts_expire"), expire_ms)};
}
}  // namespace

Command renew_semaphore(const std::string& collection, const std::string& key, std::int64_t slot,
                        const std::string& uuid, std::int64_t fence, std::int64_t now_ms,
                        std::int64_t expire_ms) {
  Statement s = slot_renewal(key, slot, uuid, fence, now_ms, expire_ms);
  return make(Op::update_one, collection, std::move(s.filter), std::move(s.update),
              "update (renew semaphore " + key + ")");
}

Command renew_semaphores(const std::string& collection,
                         const std::vector<SemaphoreRenewRequest>& requests, std::size_t from,
                         std::size_t to, std::int64_t now_ms) {
  Command c = make(Op::bulk_update, collection, Node(), Node(), "update (renew semaphores)");
  c.statements.reserve(to - from);
  for (std::size_t i = from; i < to; ++i) {
    const SemaphoreRenewRequest& r = requests[i];
    c.statements.push_back(slot_renewal(r.key, r.slot, r.uuid, r.fence, now_ms, r.expire_ms));
  }
  return c;
}

std::vector<std::string> semaphore_keys(const std::vector<SemaphoreRenewRequest>& requests,
                                        std::size_t from, std::size_t to) {
  std::vector<std::string> keys;
  keys.reserve(to - from);
  std::unordered_set<std::string> seen;
  for (std::size_t i = from; i < to; ++i)
    if (seen.insert(requests[i].key).second) keys.push_back(requests[i].key);
  return keys;
}

Command release_semaphore(const std::string& collection, const std::string& key, std::int64_t slot,
                          const std::string& uuid, std::int64_t fence) {
  return make(
      Op::update_one, collection, slot_filter(key, slot, uuid, fence),
      Node::doc({{"$set", Node::doc({{slot_path(slot), slot_node(semaphore_doc::empty_slot())}})}}),
      "update (release semaphore " + key + ")");
}

Command put_status(const std::string& collection, const Document& doc) {
  const Value* id = doc.get("_id");
  if (id == nullptr) throw InvalidArgument("status document has no _id");
  Command c = make(Op::replace_one, collection, Node::doc({{"_id", *id}}), Node::of(doc),
                   "replace (status)");
  return c;
}

Command list_status(const std::string& collection, const std::string& key) {
  Command c =
      make(Op::find, collection, Node::doc({{"key", key}}), Node(), "find (status of " + key + ")");
  c.sort = Node::doc({{"timestamp", std::int64_t{-1}}});
  return c;
}

std::vector<IndexSpec> lock_indexes() { return {IndexSpec{"ts_expire", 0}}; }

std::vector<IndexSpec> status_indexes(std::int64_t ttl_s) {
  if (ttl_s < 0) throw InvalidArgument("status TTL must not be negative");
  return {IndexSpec{"timestamp", ttl_s}, IndexSpec{"key", std::nullopt}};
}

}  // namespace mongoelector::commands
