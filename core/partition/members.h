// A partitioned group's documents and how they are read: the members' reports, the
// partitions' locks, and the assignment they show (partition_status). One place for
// what a report says and when a member counts as live, used by the member loop
// (partitioner.cpp) and by status readers (bindings, the command).
//
// Documents (collections: PartitionerCollections, by default "partitioner.members" and
// "partitioner.locks"):
//   report:    {_id: member uuid, key: group, kind: "partitioner", uuid, host, pid,
//               partitions: N, ttl, running: bool, timestamp: date, ts_expire: date}
//              written (put_status, replaces) by the member at every poll, with
//              ts_expire = its server-time estimate + ttl; at a graceful leave once more
//              with running false and ts_expire = now.
//   partition: a lock document (lock_storage.h) of key partition_key(group, p) =
//              "<group>/<p>" (p in decimal, 0 <= p < N), held by the member's uuid, its
//              fence the partition's fencing token; fences in "<locks>.fences".
//
// LIVE: a report of the group, of kind "partitioner", with the same N, running, whose
// ts_expire is after the reader's EARLIEST possible server time (estimate minus its
// uncertainty), the side claims compare with: a member counts as live until its report
// has surely expired. Liveness only shapes the assignment; who holds a partition is
// decided by its lock alone (two members that disagree on the live set both try to
// claim, and one claim wins).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../server_clock.h"
#include "../storage/storage.h"
#include "../value.h"

namespace mongoelector {

struct PartitionerCollections {
  static constexpr const char* kLocks = "partitioner.locks";
  static constexpr const char* kMembers = "partitioner.members";
  std::string locks = kLocks;
  std::string members = kMembers;
};

inline constexpr const char* kPartitionerKind = "partitioner";
// Partition counts accepted: 1 .. kMaxPartitions.
inline constexpr std::int64_t kMaxPartitions = 100000;

// "<group>/<partition>": the key of a partition's lock.
std::string partition_key(const std::string& group, std::int64_t partition);
// InvalidArgument unless the group is a valid key whose partition keys are too, and
// 1 <= partitions <= kMaxPartitions ("partitions must be ...", naming the value).
void validate_group(const std::string& group, std::int64_t partitions);

// A member's report as read (fields missing or odd-typed take their defaults).
struct MemberReport {
  std::string uuid;
  std::string host;
  std::int64_t pid = 0;
  std::string kind;  // "partitioner" for ours
  std::int64_t partitions = 0;
  bool running = false;
  std::optional<std::int64_t> expire_ms;  // ts_expire, server time
  std::optional<std::int64_t> timestamp_ms;
  static MemberReport from_document(const Document& d);
  // A report of ours whose member counts at server time `earliest_ms` (see LIVE).
  bool live_at(std::int64_t earliest_ms, std::int64_t partitions) const;
};

struct MemberReportFields {
  std::string group, uuid, host;
  std::int64_t pid = 0;
  std::int64_t partitions = 0;
  double ttl_s = 0;
  bool running = true;
  std::int64_t now_ms = 0;     // timestamp
  std::int64_t expire_ms = 0;  // ts_expire
};
Document member_report(const MemberReportFields& f);

// What the reports of a group say, for a member of `partitions` partitions: the live
// members' uuids (sorted, distinct) and, for each report that cannot be one of the
// group's (another kind of document under the group's key, a member of another partition
// count), a sentence saying so.
struct GroupView {
  std::vector<std::string> live;
  std::vector<std::string> conflicts;
};
GroupView read_group(const std::vector<Document>& reports, const std::string& group,
                     std::int64_t partitions, std::int64_t earliest_ms);

// nullopt for a lock document (ours or an original node's: it has `locked`); otherwise
// a sentence naming what the document at that key is instead (a semaphore's, a
// read-write lock's, a document without `locked`).
std::optional<std::string> foreign_lock_document(const LockDoc& doc);

// The assignment as the documents show it (one read of the reports, one read per
// partition): for `mongoelector status` and the bindings' status().
struct PartitionOwner {
  std::int64_t partition = 0;
  std::string key;
  std::optional<std::string> owner;  // the holder's uuid while held at server now
  std::string host;
  std::int64_t pid = 0;
  std::int64_t token = 0;                 // the lock's fence (0: never held)
  std::optional<std::int64_t> expire_ms;  // ts_expire of the lock while held
  std::optional<std::string> assigned;    // rendezvous over the live members
  std::string conflict;                   // another kind of document at the key ("" if not)
};
struct PartitionMember {
  MemberReport report;
  bool live = false;
  std::int64_t owned = 0;     // partitions it holds now
  std::int64_t assigned = 0;  // partitions rendezvous gives it
};
struct PartitionStatus {
  std::string group;
  std::int64_t partitions = 0;
  std::int64_t server_now_ms = 0;
  std::vector<PartitionMember> members;  // every report of the group (live or not)
  std::vector<PartitionOwner> owners;    // one per partition, in order
  std::vector<std::string> conflicts;    // reports that cannot be the group's
  bool settled = false;                  // every partition held, by the member rendezvous gives it
};
// `partitions`: nullopt to take it from the live members' reports (InvalidArgument when
// none is live, or they disagree). `now`: the reader's server-time estimate (held =
// ts_expire after now; live = as above, from now.earliest_ms()).
PartitionStatus partition_status(Storage& storage, const PartitionerCollections& collections,
                                 const std::string& group, std::optional<std::int64_t> partitions,
                                 const ServerTime& now);

}  // namespace mongoelector
