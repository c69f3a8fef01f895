#include "members.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "../exceptions.h"
#include "../identity.h"
#include "rendezvous.h"

namespace mongoelector {

std::string partition_key(const std::string& group, std::int64_t partition) {
  return group + "/" + std::to_string(partition);
}

void validate_group(const std::string& group, std::int64_t partitions) {
  if (partitions < 1 || partitions > kMaxPartitions)
    throw InvalidArgument("partitions must be a whole number in [1, " +
                          std::to_string(kMaxPartitions) + "], got " + std::to_string(partitions));
  if (group.empty()) throw InvalidArgument("group must be a non-empty string");
  validate_key(group);
  validate_key(partition_key(group, partitions - 1));  // the longest key
}

MemberReport MemberReport::from_document(const Document& d) {
  MemberReport r;
  r.uuid = d.get_string("uuid").value_or(d.get_string("_id").value_or(""));
  r.host = d.get_string("host").value_or("");
  r.pid = d.get_int("pid").value_or(0);
  r.kind = d.get_string("kind").value_or("");
  r.partitions = d.get_int("partitions").value_or(0);
  r.running = d.get_bool("running").value_or(false);
  if (auto e = d.get_date("ts_expire")) r.expire_ms = e->ms;
  if (auto t = d.get_date("timestamp")) r.timestamp_ms = t->ms;
  return r;
}

bool MemberReport::live_at(std::int64_t earliest_ms, std::int64_t n) const {
  return kind == kPartitionerKind && partitions == n && running && !uuid.empty() && expire_ms &&
         *expire_ms > earliest_ms;
}

Document member_report(const MemberReportFields& f) {
  Document d;
  d.set("_id", f.uuid);
  d.set("key", f.group);
  d.set("kind", std::string(kPartitionerKind));
  d.set("uuid", f.uuid);
  d.set("host", f.host);
  d.set("pid", f.pid);
  d.set("partitions", f.partitions);
  if (f.ttl_s == std::floor(f.ttl_s) && std::fabs(f.ttl_s) < 9e15)
    d.set("ttl", static_cast<std::int64_t>(f.ttl_s));
  else
    d.set("ttl", f.ttl_s);
  d.set("running", f.running);
  d.set("timestamp", DateTime{f.now_ms});
  d.set("ts_expire", DateTime{f.expire_ms});
  return d;
}

GroupView read_group(const std::vector<Document>& reports, const std::string& group,
                     std::int64_t partitions, std::int64_t earliest_ms) {
  GroupView v;
  for (const Document& d : reports) {
    const MemberReport r = MemberReport::from_document(d);
    const std::string id = d.get_string("_id").value_or(r.uuid);
    if (r.kind != kPartitionerKind) {
      v.conflicts.push_back("the document " + id + " under group '" + group +
                            "' is not a partitioner member's report (" +
                            (r.kind.empty() ? std::string("no kind") : "kind '" + r.kind + "'") +
                            "): another kind of document uses this key");
      continue;
    }
    if (r.partitions != partitions) {
      // Only a live one disagrees: a stopped member of an earlier configuration is history.
      if (r.running && r.expire_ms && *r.expire_ms > earliest_ms)
        v.conflicts.push_back("member " + r.uuid + " (" + r.host + " pid " + std::to_string(r.pid) +
                              ") of group '" + group + "' runs with " +
                              std::to_string(r.partitions) + " partitions, not " +
                              std::to_string(partitions));
      continue;
    }
    if (r.live_at(earliest_ms, partitions)) v.live.push_back(r.uuid);
  }
  std::sort(v.live.begin(), v.live.end());
  v.live.erase(std::unique(v.live.begin(), v.live.end()), v.live.end());
  return v;
}

std::optional<std::string> foreign_lock_document(const LockDoc& doc) {
  const Value* locked = doc.raw.get("locked");
  if (locked && std::holds_alternative<bool>(*locked)) return std::nullopt;
  std::string what = "a document without a lock's 'locked' field";
  if (const auto kind = doc.raw.get_string("kind"))
    what = "a document of kind '" + *kind + "' (a read-write lock's?)";
  else if (doc.raw.has("limit") || doc.raw.has("slots"))
    what = "a semaphore's document";
  return "the key " + doc.key + " holds " + what +
         ", not a partition's lock: another kind of document uses this key (nothing was "
         "written to it)";
}

PartitionStatus partition_status(Storage& storage, const PartitionerCollections& collections,
                                 const std::string& group, std::optional<std::int64_t> partitions,
                                 const ServerTime& now) {
  if (group.empty()) throw InvalidArgument("group must be a non-empty string");
  validate_key(group);
  const std::vector<Document> reports = storage.list_status(collections.members, group);
  const std::int64_t earliest = now.earliest_ms();
  if (!partitions) {
    std::optional<std::int64_t> n;
    for (const Document& d : reports) {
      const MemberReport r = MemberReport::from_document(d);
      if (r.kind != kPartitionerKind || !r.running || !r.expire_ms || *r.expire_ms <= earliest)
        continue;
      if (n && *n != r.partitions)
        throw InvalidArgument("the live members of group '" + group +
                              "' disagree on the number of partitions (" + std::to_string(*n) +
                              " and " + std::to_string(r.partitions) + "): pass partitions");
      n = r.partitions;
    }
    if (!n)
      throw InvalidArgument("no live member of group '" + group +
                            "' says how many partitions it has: pass partitions");
    partitions = n;
  }
  validate_group(group, *partitions);
  PartitionStatus st;
  st.group = group;
  st.partitions = *partitions;
  st.server_now_ms = now.now_ms;
  const GroupView view = read_group(reports, group, *partitions, earliest);
  st.conflicts = view.conflicts;
  std::map<std::string, std::size_t> member_index;
  for (const Document& d : reports) {
    PartitionMember m;
    m.report = MemberReport::from_document(d);
    if (m.report.kind != kPartitionerKind) continue;
    m.live = m.report.live_at(earliest, *partitions);
    member_index[m.report.uuid] = st.members.size();
    st.members.push_back(std::move(m));
  }
  const std::vector<int> owner = rendezvous_assign(view.live, *partitions);
  st.settled = true;
  // Every partition's lock document in one read (LockStorage::read_many).
  std::vector<std::string> keys;
  keys.reserve(static_cast<std::size_t>(*partitions));
  for (std::int64_t p = 0; p < *partitions; ++p) keys.push_back(partition_key(group, p));
  const std::vector<std::optional<LockDoc>> docs = storage.read_many(collections.locks, keys);
  if (docs.size() != keys.size())
    throw StorageError("read_many returned " + std::to_string(docs.size()) + " documents for " +
                       std::to_string(keys.size()) + " keys");
  for (std::int64_t p = 0; p < *partitions; ++p) {
    PartitionOwner o;
    o.partition = p;
    o.key = keys[static_cast<std::size_t>(p)];
    const int a = owner[static_cast<std::size_t>(p)];
    if (a >= 0) o.assigned = view.live[static_cast<std::size_t>(a)];
    if (const std::optional<LockDoc>& doc = docs[static_cast<std::size_t>(p)]) {
      if (auto foreign = foreign_lock_document(*doc)) {
        o.conflict = *foreign;
      } else {
        o.token = doc->fence;
        if (doc->held_at(now.now_ms)) {
          o.owner = doc->uuid;
          o.host = doc->host;
          o.pid = doc->pid;
          o.expire_ms = doc->ts_expire->ms;
        }
      }
    }
    if (o.assigned) {
      auto it = member_index.find(*o.assigned);
      if (it != member_index.end()) ++st.members[it->second].assigned;
    }
    if (o.owner) {
      auto it = member_index.find(*o.owner);
      if (it != member_index.end()) ++st.members[it->second].owned;
    }
    if (!o.owner || !o.assigned || *o.owner != *o.assigned) st.settled = false;
    st.owners.push_back(std::move(o));
  }
  return st;
}

}  // namespace mongoelector
