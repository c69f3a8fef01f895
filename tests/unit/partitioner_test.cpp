// The fenced partitioner (core/partition/) on the testing kit's ManualClock: real member
// loops, real renewers and callback threads, fake time. The hash itself (vectors every
// binding must reproduce, balance, minimal movement); members joining, leaving and cut
// off: never two believing owners of a partition, tokens increasing, on_revoked of the
// old owner returned before on_assigned of the new one on graceful moves, the assignment
// matching rendezvous once membership is stable for one ttl + one poll, renewals of one
// member in one batch; bad input refused with nothing written.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "exceptions.h"
#include "lease/keepalive.h"
#include "partition/members.h"
#include "partition/partitioner.h"
#include "partition/rendezvous.h"
#include "storage/memory_storage.h"
#include "testing/manual_clock.h"

using namespace mongoelector;

namespace {

// A member's own connection: forwards to the shared server, or fails every call (cut).
class Cuttable final : public Storage {
 public:
  explicit Cuttable(std::shared_ptr<Storage> s) : s_(std::move(s)) {}
  std::atomic<bool> down{false};
  std::atomic<int> renew_many_calls{0};
  std::atomic<int> calls{0};  // the reads status makes: read, read_many, list_status

  void check() {
    if (down) throw StorageUnavailable("cut off (test)");
  }
  std::shared_ptr<Clock> clock() override { return s_->clock(); }
  ServerInfo server_info() override { return check(), s_->server_info(); }
  std::int64_t call_bound_ms() const override { return s_->call_bound_ms(); }
  std::int64_t server_time_ms() override { return check(), s_->server_time_ms(); }
  void ensure_lock_indexes(const std::string& c) override { check(), s_->ensure_lock_indexes(c); }
  std::optional<LockDoc> claim(const std::string& c, const LockClaim& l, bool f) override {
    return check(), s_->claim(c, l, f);
  }
  std::optional<LockDoc> insert_claim(const std::string& c, const LockClaim& l) override {
    return check(), s_->insert_claim(c, l);
  }
  std::int64_t bump_epoch(const std::string& c, const std::string& k) override {
    return check(), s_->bump_epoch(c, k);
  }
  bool set_fence(const std::string& c, const std::string& k, const std::string& u, std::int64_t o,
                 std::int64_t cr, std::int64_t n) override {
    return check(), s_->set_fence(c, k, u, o, cr, n);
  }
  bool renew(const std::string& c, const std::string& k, const std::string& u, std::int64_t f,
             std::int64_t n, std::int64_t e) override {
    return check(), s_->renew(c, k, u, f, n, e);
  }
  std::vector<bool> renew_many(const std::string& c, const std::vector<RenewRequest>& r,
                               std::int64_t n) override {
    check();
    ++renew_many_calls;
    return s_->renew_many(c, r, n);
  }
  bool release(const std::string& c, const std::string& k, const std::optional<std::string>& u,
               std::int64_t f, std::int64_t n, bool d) override {
    return check(), s_->release(c, k, u, f, n, d);
  }
  std::optional<LockDoc> read(const std::string& c, const std::string& k) override {
    ++calls;
    return check(), s_->read(c, k);
  }
  std::vector<std::optional<LockDoc>> read_many(const std::string& c,
                                                const std::vector<std::string>& k) override {
    ++calls;
    return check(), s_->read_many(c, k);
  }
  void ensure_status_indexes(const std::string& c, std::int64_t t) override {
    check(), s_->ensure_status_indexes(c, t);
  }
  void put_status(const std::string& c, const Document& d) override {
    check(), s_->put_status(c, d);
  }
  std::vector<Document> list_status(const std::string& c, const std::string& k) override {
    ++calls;
    return check(), s_->list_status(c, k);
  }
  std::optional<SemaphoreDoc> read_semaphore(const std::string& c, const std::string& k) override {
    return check(), s_->read_semaphore(c, k);
  }
  bool create_semaphore(const std::string& c, const SemaphoreClaim& cl) override {
    return check(), s_->create_semaphore(c, cl);
  }
  bool claim_semaphore(const std::string& c, const SemaphoreClaim& cl) override {
    return check(), s_->claim_semaphore(c, cl);
  }
  bool renew_semaphore(const std::string& c, const std::string& k, std::int64_t sl,
                       const std::string& u, std::int64_t f, std::int64_t n,
                       std::int64_t e) override {
    return check(), s_->renew_semaphore(c, k, sl, u, f, n, e);
  }
  bool release_semaphore(const std::string& c, const std::string& k, std::int64_t sl,
                         const std::string& u, std::int64_t f) override {
    return check(), s_->release_semaphore(c, k, sl, u, f);
  }
  bool set_expiry(const std::string& c, const std::string& k, const std::string& u, std::int64_t f,
                  std::int64_t n, std::int64_t e, std::int64_t created) override {
    return check(), s_->set_expiry(c, k, u, f, n, e, created);
  }
  bool hand_over(const std::string& c, const HandOver& h) override {
    return check(), s_->hand_over(c, h);
  }
  bool set_payload(const std::string& c, const PayloadWrite& w) override {
    return check(), s_->set_payload(c, w);
  }

 private:
  std::shared_ptr<Storage> s_;
};

constexpr double kTtl = 6;  // s: polls every 2 s, renewals every 2 s
constexpr std::int64_t kN = 24;

struct Event {
  std::int64_t seq, t;
  std::string member;
  bool assigned;
  std::int64_t partition, token;
};

class PartitionerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> n{0};
    clock = std::make_shared<ManualClock>(1700000000000, /*settle_timeout_ms=*/5000);
    client = MemoryClient::open("memory://partitioner-test-" + std::to_string(n++), clock);
    server = client->storage();
  }
  void TearDown() override {
    for (auto& [name, m] : members) m.p.reset();
  }

  struct Member {
    std::shared_ptr<Cuttable> storage;
    std::unique_ptr<Partitioner> p;
  };

  Partitioner& join(const std::string& name, std::int64_t partitions = kN, bool start = true) {
    Member& m = members[name];
    m.storage = std::make_shared<Cuttable>(server);
    PartitionerOptions o;
    o.group = "jobs";
    o.partitions = partitions;
    o.ttl_s = kTtl;
    PartitionerCallbacks cb;
    cb.on_assigned = [this, name](std::int64_t p, std::int64_t token) {
      record(name, true, p, token);
    };
    cb.on_revoked = [this, name](std::int64_t p) {
      // A little work in the callback: the lease must stay renewed meanwhile.
      record(name, false, p, 0);
    };
    m.p = std::make_unique<Partitioner>(m.storage, o, cb, clock,
                                        Identity{"uuid-" + name, "host-" + name, 1});
    if (start) m.p->start();
    return *m.p;
  }
  void record(const std::string& name, bool assigned, std::int64_t p, std::int64_t token) {
    std::lock_guard<std::mutex> g(mu);
    events.push_back(Event{++seq, clock->mono_ms(), name, assigned, p, token});
  }
  // Every partition believed by one member at most; tokens believed never go down.
  void check_beliefs() {
    std::map<std::int64_t, std::string> owner;
    for (auto& [name, m] : members) {
      if (!m.p) continue;
      for (const auto& [p, token] : m.p->owned()) {
        auto [it, fresh] = owner.emplace(p, name);
        EXPECT_TRUE(fresh) << "partition " << p << " believed by " << it->second << " and " << name
                           << " at " << clock->mono_ms();
        std::int64_t& top = max_token[p];
        EXPECT_GE(token, top) << "partition " << p << " token went down";
        top = std::max(top, token);
      }
    }
  }
  void run(std::int64_t ms, std::int64_t step = 250) {
    for (std::int64_t t = 0; t < ms; t += step) {
      ASSERT_TRUE(clock->advance(std::min(step, ms - t)));
      check_beliefs();
    }
  }
  std::vector<std::string> running_uuids() {
    std::vector<std::string> u;
    for (auto& [name, m] : members)
      if (m.p && m.p->running() && !m.storage->down) u.push_back(m.p->identity().uuid);
    return u;
  }
  // Every partition owned, by the member rendezvous picks among `uuids`.
  void expect_settled(const std::vector<std::string>& uuids) {
    for (std::int64_t p = 0; p < kN; ++p) {
      const std::string want = *rendezvous_owner(uuids, p);
      std::string got;
      for (auto& [name, m] : members)
        if (m.p && m.p->token(p)) got = m.p->identity().uuid;
      EXPECT_EQ(got, want) << "partition " << p;
    }
  }
  std::map<std::string, int> owned_counts() {
    std::map<std::string, int> c;
    for (auto& [name, m] : members)
      if (m.p) c[name] = static_cast<int>(m.p->owned().size());
    return c;
  }

  std::shared_ptr<ManualClock> clock;
  std::shared_ptr<MemoryClient> client;
  std::shared_ptr<MemoryStorage> server;
  std::map<std::string, Member> members;
  std::mutex mu;
  std::vector<Event> events;
  std::int64_t seq = 0;
  std::map<std::int64_t, std::int64_t> max_token;
  const std::int64_t settle_ms = static_cast<std::int64_t>(kTtl * 1000) * 4 / 3 + 500;
};

TEST(Rendezvous, VectorsEveryBindingReproduces) {
  EXPECT_EQ(rendezvous_key(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(rendezvous_key("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(rendezvous_score("a", 0), 0x223510de0dd4615fULL);
  EXPECT_EQ(rendezvous_score("b", 7), 0x9517775f2632c4f3ULL);
  EXPECT_EQ(rendezvous_owner({}, 3), std::nullopt);
  // Order of the members does not matter; ties (duplicates) are harmless.
  const std::vector<std::string> m{"m1", "m2", "m3"}, r{"m3", "m1", "m2", "m1"};
  for (std::int64_t p = 0; p < 100; ++p) EXPECT_EQ(rendezvous_owner(m, p), rendezvous_owner(r, p));
  const std::vector<int> a = rendezvous_assign(m, 100);
  for (std::int64_t p = 0; p < 100; ++p)
    EXPECT_EQ(m[static_cast<std::size_t>(a[static_cast<std::size_t>(p)])], *rendezvous_owner(m, p));
}

TEST(Rendezvous, BalancedAndAJoinMovesOnlyItsShare) {
  constexpr std::int64_t n = 3000;
  std::vector<std::string> m;
  for (int i = 0; i < 5; ++i) m.push_back("member-" + std::to_string(i));
  const std::vector<int> before = rendezvous_assign(m, n);
  std::map<int, int> count;
  for (int o : before) ++count[o];
  for (const auto& [o, c] : count)
    EXPECT_NEAR(c, n / 5, n / 5 / 5) << m[static_cast<std::size_t>(o)];
  m.push_back("member-new");
  const std::vector<int> after = rendezvous_assign(m, n);
  int moved = 0;
  for (std::int64_t p = 0; p < n; ++p) {
    if (after[static_cast<std::size_t>(p)] == before[static_cast<std::size_t>(p)]) continue;
    ++moved;
    EXPECT_EQ(after[static_cast<std::size_t>(p)], 5) << "a partition moved between old members";
  }
  EXPECT_NEAR(moved, n / 6, n / 6 / 5);
}

TEST_F(PartitionerTest, BadInputIsRefusedBeforeAnyWrite) {
  PartitionerOptions o;
  o.group = "jobs";
  o.ttl_s = kTtl;
  for (std::int64_t bad : {std::int64_t{0}, std::int64_t{-1}, kMaxPartitions + 1}) {
    o.partitions = bad;
    try {
      Partitioner p(server, o, {}, clock);
      FAIL() << bad << " partitions accepted";
    } catch (const InvalidArgument& ex) {
      EXPECT_NE(std::string(ex.what()).find("partitions must be"), std::string::npos) << ex.what();
    }
  }
  o.partitions = 4;
  o.poll_s = kTtl;  // above ttl/2
  EXPECT_THROW(Partitioner(server, o, {}, clock), InvalidArgument);
  o.poll_s.reset();
  o.collections.members = o.collections.locks;
  EXPECT_THROW(Partitioner(server, o, {}, clock), InvalidArgument);
  o.collections = PartitionerCollections{};
  o.group = "";
  EXPECT_THROW(Partitioner(server, o, {}, clock), InvalidArgument);
  EXPECT_EQ(server->read(PartitionerCollections::kLocks, "jobs/0"), std::nullopt);
}

TEST_F(PartitionerTest, AnotherKindOfDocumentIsRefusedAndKept) {
  // The group's key already names an elector's status report in the members' collection.
  Document alien{
      {"_id", std::string("someone")}, {"key", std::string("jobs")}, {"is_leader", true}};
  server->put_status(PartitionerCollections::kMembers, alien);
  Partitioner& a = join("a", kN, /*start=*/false);
  try {
    a.start();
    FAIL() << "started over another kind of document";
  } catch (const InvalidArgument& ex) {
    EXPECT_NE(std::string(ex.what()).find("another kind of document"), std::string::npos)
        << ex.what();
  }
  EXPECT_FALSE(a.running());
  const auto docs = server->list_status(PartitionerCollections::kMembers, "jobs");
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0], alien);  // nothing lost, nothing written
  EXPECT_EQ(server->read(PartitionerCollections::kLocks, "jobs/0"), std::nullopt);
}

TEST_F(PartitionerTest, AMemberOfAnotherPartitionCountIsRefused) {
  join("a", kN);
  run(1000);
  Partitioner& b = join("b", kN + 1, /*start=*/false);
  try {
    b.start();
    FAIL() << "joined with another number of partitions";
  } catch (const InvalidArgument& ex) {
    EXPECT_NE(std::string(ex.what()).find("runs with 24 partitions, not 25"), std::string::npos)
        << ex.what();
  }
  run(2000);
  EXPECT_EQ(members["a"].p->owned().size(), static_cast<std::size_t>(kN));
}

TEST_F(PartitionerTest, APartitionKeyHoldingAnotherKindIsNeverClaimed) {
  // "jobs/5" holds a semaphore-like document in the locks' collection.
  Document alien{{"_id", std::string("jobs/5")}, {"limit", std::int64_t{3}}};
  server->put_lock(PartitionerCollections::kLocks, alien);  // a document without `locked`
  join("a");
  run(settle_ms);
  const auto owned = members["a"].p->owned();
  EXPECT_EQ(owned.size(), static_cast<std::size_t>(kN - 1));
  EXPECT_EQ(owned.count(5), 0u);
  const auto doc = server->read(PartitionerCollections::kLocks, "jobs/5");
  ASSERT_TRUE(doc);
  EXPECT_FALSE(doc->raw.has("locked"));  // untouched
  const PartitionStatus st = members["a"].p->status();
  EXPECT_NE(st.owners[5].conflict.find("another kind of document"), std::string::npos);
  EXPECT_FALSE(st.settled);
}

TEST_F(PartitionerTest, JoinsAndLeavesMoveOnlyTheirShareAndHandOverInOrder) {
  join("a");
  run(settle_ms);
  expect_settled(running_uuids());
  EXPECT_EQ(members["a"].p->owned().size(), static_cast<std::size_t>(kN));
  join("b");
  join("c");
  run(settle_ms);
  expect_settled(running_uuids());
  std::set<std::int64_t> before;
  for (const auto& [p, t] : members["a"].p->owned()) before.insert(p);
  // A fourth member takes about N/4 partitions, each from its previous owner.
  const std::size_t events_before = events.size();
  join("d");
  run(settle_ms);
  expect_settled(running_uuids());
  const std::size_t d_owns = members["d"].p->owned().size();
  EXPECT_GE(d_owns, 2u);
  EXPECT_LE(d_owns, static_cast<std::size_t>(kN / 2));
  int moved = 0;
  {
    std::lock_guard<std::mutex> g(mu);
    for (std::size_t i = events_before; i < events.size(); ++i)
      if (events[i].assigned) ++moved;
  }
  EXPECT_EQ(static_cast<std::size_t>(moved), d_owns) << "only d's share moved";
  // A graceful leave: b's partitions go to the others.
  members["b"].p->stop();
  run(settle_ms);
  expect_settled(running_uuids());
  // Order: for each partition, callbacks alternate assigned/revoked per owner, and a
  // new owner's on_assigned comes after the previous owner's on_revoked returned.
  std::lock_guard<std::mutex> g(mu);
  std::map<std::int64_t, std::vector<Event>> by_p;
  for (const Event& e : events) by_p[e.partition].push_back(e);
  for (const auto& [p, es] : by_p) {
    std::string holder;
    std::int64_t last_token = 0;
    for (const Event& e : es) {
      if (e.assigned) {
        EXPECT_EQ(holder, "") << "partition " << p << ": " << e.member << " assigned before "
                              << holder << "'s on_revoked (seq " << e.seq << ")";
        EXPECT_GT(e.token, last_token) << "partition " << p;
        last_token = e.token;
        holder = e.member;
      } else {
        EXPECT_EQ(holder, e.member) << "partition " << p << ": revoked by a non-owner";
        holder.clear();
      }
    }
  }
}

TEST_F(PartitionerTest, ACutOffMemberStepsDownAndOthersTakeOverAfterExpiry) {
  join("a");
  join("b");
  join("c");
  run(settle_ms);
  expect_settled(running_uuids());
  const auto c_had = members["c"].p->owned();
  ASSERT_FALSE(c_had.empty());
  members["c"].storage->down = true;  // as a crash, seen from the others
  const std::int64_t cut = clock->mono_ms();
  run(static_cast<std::int64_t>(kTtl * 1000) / 2);
  // Before its lease can expire, c has stopped believing (its renew deadline passed)...
  run(static_cast<std::int64_t>(kTtl * 1000) / 2);
  EXPECT_TRUE(members["c"].p->owned().empty()) << "c still believes at " << clock->mono_ms();
  // ...and heard of it: on_revoked for each (the loss path).
  {
    std::lock_guard<std::mutex> g(mu);
    std::set<std::int64_t> revoked;
    for (const Event& e : events)
      if (e.member == "c" && !e.assigned && e.t >= cut) revoked.insert(e.partition);
    EXPECT_EQ(revoked.size(), c_had.size());
  }
  run(settle_ms);
  expect_settled(running_uuids());
  for (const auto& [p, token] : c_had) {
    std::optional<std::int64_t> t;
    for (const char* n : {"a", "b"})
      if (auto x = members[n].p->token(p)) t = x;
    ASSERT_TRUE(t) << "partition " << p;
    EXPECT_GT(*t, token) << "partition " << p << " taken over with a lower token";
  }
  // c comes back: it rejoins and takes its share again.
  members["c"].storage->down = false;
  run(2 * settle_ms);
  expect_settled(running_uuids());
  EXPECT_EQ(members["c"].p->owned().size(), c_had.size());
}

TEST_F(PartitionerTest, OneMembersRenewalsRideOneBatch) {
  Partitioner& a = join("a");
  run(settle_ms);
  ASSERT_EQ(a.owned().size(), static_cast<std::size_t>(kN));
  const int before = members["a"].storage->renew_many_calls.load();
  run(static_cast<std::int64_t>(kTtl * 1000));  // three renewal rounds
  const int batches = members["a"].storage->renew_many_calls.load() - before;
  EXPECT_GE(batches, 2);
  EXPECT_LE(batches, 4) << "renewals of one member's " << kN << " partitions are not batched";
}

TEST_F(PartitionerTest, StatusShowsTheAssignmentFromTheDocuments) {
  join("a");
  join("b");
  run(settle_ms);
  const PartitionStatus st = partition_status(*server, PartitionerCollections{}, "jobs",
                                              std::nullopt, ServerTime{clock->wall_ms(), 0});
  EXPECT_EQ(st.partitions, kN);
  EXPECT_TRUE(st.settled);
  ASSERT_EQ(st.members.size(), 2u);
  std::int64_t owned = 0;
  for (const auto& m : st.members) {
    EXPECT_TRUE(m.live);
    EXPECT_EQ(m.owned, m.assigned);
    owned += m.owned;
  }
  EXPECT_EQ(owned, kN);
  for (const auto& o : st.owners) {
    ASSERT_TRUE(o.owner);
    EXPECT_EQ(*o.owner, *o.assigned);
    EXPECT_GE(o.token, LockDoc::kEpochUnit);
    EXPECT_EQ(o.key, "jobs/" + std::to_string(o.partition));
  }
  members["a"].p->stop();
  members["b"].p->stop();
  EXPECT_THROW(partition_status(*server, PartitionerCollections{}, "jobs", std::nullopt,
                                ServerTime{clock->wall_ms(), 0}),
               InvalidArgument);  // no live member says how many partitions there are
  const PartitionStatus after = partition_status(*server, PartitionerCollections{}, "jobs", kN,
                                                 ServerTime{clock->wall_ms(), 0});
  for (const auto& o : after.owners) EXPECT_FALSE(o.owner) << o.key;
}

TEST_F(PartitionerTest, StatusReadsEveryPartitionInOneQuery) {
  constexpr std::int64_t kMany = 64;
  join("a", kMany);
  run(settle_ms);
  Cuttable counting(server);
  const PartitionStatus st = partition_status(counting, PartitionerCollections{}, "jobs",
                                              std::nullopt, ServerTime{clock->wall_ms(), 0});
  // The members' reports, then all 64 partitions' documents at once (one read each made
  // it 1 + 64 = 65).
  EXPECT_EQ(counting.calls.load(), 2);
  ASSERT_EQ(st.owners.size(), static_cast<std::size_t>(kMany));
  EXPECT_TRUE(st.settled);
  for (const auto& o : st.owners) {  // what one read per key finds
    const std::optional<LockDoc> doc = server->read(PartitionerCollections{}.locks, o.key);
    ASSERT_TRUE(doc && o.owner) << o.key;
    EXPECT_EQ(*o.owner, doc->uuid);
    EXPECT_EQ(o.token, doc->fence);
  }
}

TEST_F(PartitionerTest, StopFromACallbackDoesNotWaitForItself) {
  std::atomic<bool> asked{false};
  PartitionerOptions o;
  o.group = "jobs";
  o.partitions = 4;
  o.ttl_s = kTtl;
  PartitionerCallbacks cb;
  Partitioner* self = nullptr;
  std::atomic<int> assigned{0};
  cb.on_assigned = [&](std::int64_t, std::int64_t) {
    ++assigned;
    if (!asked.exchange(true)) self->stop();
  };
  std::atomic<int> revoked{0};
  cb.on_revoked = [&](std::int64_t) { ++revoked; };
  auto p = std::make_unique<Partitioner>(server, o, cb, clock, Identity{"uuid-s", "h", 1});
  self = p.get();
  p->start();
  run(settle_ms);
  EXPECT_TRUE(asked);
  EXPECT_FALSE(p->running());
  EXPECT_TRUE(p->owned().empty());
  p.reset();
  EXPECT_GE(assigned.load(), 1);
  EXPECT_EQ(revoked.load(), assigned.load()) << "each assigned partition revoked once";
}

}  // namespace
