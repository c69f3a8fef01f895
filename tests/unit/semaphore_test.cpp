// Semaphore (core/semaphore) on a FakeClock and MemoryStorage: at most `limit` holders,
// expiry on the server's time base (not before, not much after), fencing tokens strictly
// increasing across slots, releases, expiries and deletion, round trips per acquire,
// limit mismatch, fenced late writes, lost replies, unsafe servers, and the keep-alive
// lease of a slot on the shared renewer.
#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "exceptions.h"
#include "fixtures.h"
#include "lease/keepalive.h"
#include "lease/lease.h"
#include "semaphore/semaphore.h"
#include "storage/semaphore_doc.h"

using namespace mongoelector;
using mongoelector::testing::CoreTest;

namespace {

constexpr std::int64_t kEpoch = std::int64_t{1} << 32;
constexpr const char* kColl = "mongosemaphore";

// A storage that says it is not atomic (FerretDB) and forwards everything else.
class NonAtomic final : public Storage {
 public:
  explicit NonAtomic(std::shared_ptr<Storage> s) : s_(std::move(s)) {}
  ServerInfo server_info() override { return ServerInfo{"FerretDB", "1.24.0", false}; }
  std::int64_t call_bound_ms() const override { return s_->call_bound_ms(); }
  std::int64_t server_time_ms() override { return s_->server_time_ms(); }
  void ensure_lock_indexes(const std::string& c) override { s_->ensure_lock_indexes(c); }
  std::optional<LockDoc> claim(const std::string& c, const LockClaim& l, bool f) override {
    return s_->claim(c, l, f);
  }
  std::optional<LockDoc> insert_claim(const std::string& c, const LockClaim& l) override {
    return s_->insert_claim(c, l);
  }
  std::int64_t bump_epoch(const std::string& c, const std::string& k) override {
    return s_->bump_epoch(c, k);
  }
  bool set_fence(const std::string& c, const std::string& k, const std::string& u, std::int64_t o,
                 std::int64_t cr, std::int64_t n) override {
    return s_->set_fence(c, k, u, o, cr, n);
  }
  bool renew(const std::string& c, const std::string& k, const std::string& u, std::int64_t f,
             std::int64_t n, std::int64_t e) override {
    return s_->renew(c, k, u, f, n, e);
  }
  bool release(const std::string& c, const std::string& k, const std::optional<std::string>& u,
               std::int64_t f, std::int64_t n, bool d) override {
    return s_->release(c, k, u, f, n, d);
  }
  std::optional<LockDoc> read(const std::string& c, const std::string& k) override {
    return s_->read(c, k);
  }
  void ensure_status_indexes(const std::string& c, std::int64_t t) override {
    s_->ensure_status_indexes(c, t);
  }
  void put_status(const std::string& c, const Document& d) override { s_->put_status(c, d); }
  std::vector<Document> list_status(const std::string& c, const std::string& k) override {
    return s_->list_status(c, k);
  }
  std::optional<SemaphoreDoc> read_semaphore(const std::string& c, const std::string& k) override {
    return s_->read_semaphore(c, k);
  }
  bool create_semaphore(const std::string& c, const SemaphoreClaim& cl) override {
    return s_->create_semaphore(c, cl);
  }
  bool claim_semaphore(const std::string& c, const SemaphoreClaim& cl) override {
    return s_->claim_semaphore(c, cl);
  }
  bool renew_semaphore(const std::string& c, const std::string& k, std::int64_t sl,
                       const std::string& u, std::int64_t f, std::int64_t n,
                       std::int64_t e) override {
    return s_->renew_semaphore(c, k, sl, u, f, n, e);
  }
  bool release_semaphore(const std::string& c, const std::string& k, std::int64_t sl,
                         const std::string& u, std::int64_t f) override {
    return s_->release_semaphore(c, k, sl, u, f);
  }
  bool set_expiry(const std::string& c, const std::string& k, const std::string& u, std::int64_t f,
                  std::int64_t n, std::int64_t e, std::int64_t created) override {
    return s_->set_expiry(c, k, u, f, n, e, created);
  }
  bool hand_over(const std::string& c, const HandOver& h) override { return s_->hand_over(c, h); }
  bool set_payload(const std::string& c, const PayloadWrite& w) override {
    return s_->set_payload(c, w);
  }

 private:
  std::shared_ptr<Storage> s_;
};

class SemaphoreTest : public CoreTest {
 protected:
  std::shared_ptr<Semaphore> sem(const std::string& name, std::int64_t limit = 3, double ttl_s = 10,
                                 const std::string& key = "pool") {
    SemaphoreOptions o;
    o.key = key;
    o.limit = limit;
    o.ttl_s = ttl_s;
    return std::make_shared<Semaphore>(storage, o, clock,
                                       Identity{"uuid-" + name, "host-" + name, 100});
  }
  std::optional<SemaphoreDoc> doc(const std::string& key = "pool") {
    return storage->read_semaphore(kColl, key);
  }
  // Records the storage operations (as round trips) made while `f` runs.
  std::vector<std::string> ops_during(const std::function<void()>& f) {
    std::vector<std::string> ops;
    std::mutex mu;
    storage->set_fault_hook([&](const std::string& op, bool applied) {
      if (applied) return;
      std::lock_guard<std::mutex> g(mu);
      ops.push_back(op);
    });
    f();
    storage->set_fault_hook({});
    return ops;
  }
  int held_slots(std::int64_t at_ms) {
    auto d = doc();
    if (!d) return 0;
    return static_cast<int>(
        std::count_if(d->slots.begin(), d->slots.end(),
                      [&](const SemaphoreSlot& s) { return s.held_at(at_ms); }));
  }
};

TEST_F(SemaphoreTest, FirstAcquireCreatesTheDocumentWithAFreshEpochToken) {
  auto a = sem("a");
  const std::int64_t token = a->acquire(false);
  EXPECT_EQ(token, 1 * kEpoch) << "epoch 1, counter 0";
  auto d = doc();
  ASSERT_TRUE(d);
  EXPECT_EQ(d->key, "pool");
  EXPECT_EQ(d->limit, 3);
  EXPECT_EQ(d->fence, token);
  ASSERT_EQ(d->slots.size(), 3u);
  EXPECT_EQ(d->slots[0].uuid, "uuid-a");
  EXPECT_EQ(d->slots[0].host, "host-a");
  EXPECT_EQ(d->slots[0].pid, 100);
  EXPECT_EQ(d->slots[0].fence, token);
  EXPECT_EQ(d->slots[0].ts_expire->ms, d->slots[0].ts_created->ms + 10000);
  EXPECT_EQ(d->slots[1].uuid, "");
  EXPECT_FALSE(d->slots[1].held_at(0));
  ASSERT_TRUE(a->hold());
  EXPECT_EQ(a->hold()->slot, 0);
  EXPECT_EQ(a->fence(), token);
}

TEST_F(SemaphoreTest, AtMostLimitHoldersThenLockExistsAndTimeout) {
  auto a = sem("a"), b = sem("b"), c = sem("c"), d = sem("d");
  std::set<std::int64_t> slots;
  for (auto* s : {a.get(), b.get(), c.get()}) {
    s->acquire(false);
    slots.insert(s->hold()->slot);
  }
  EXPECT_EQ(slots, (std::set<std::int64_t>{0, 1, 2}));
  try {
    d->acquire(false);
    FAIL() << "a fourth holder of a limit-3 semaphore";
  } catch (const LockExists& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("pool: all 3 slots held"), std::string::npos) << msg;
    EXPECT_NE(msg.find("host-b pid 100"), std::string::npos) << msg;
  }
  const std::int64_t t0 = clock->mono_ms();
  EXPECT_THROW(d->acquire(true, 1.0, 0.1), AcquireTimeout);
  EXPECT_GE(clock->mono_ms() - t0, 1000);
  EXPECT_FALSE(d->hold());
  EXPECT_EQ(held_slots(clock->wall_ms()), 3);
  // A release frees exactly one slot, which the waiter gets.
  b->release();
  EXPECT_FALSE(b->hold());
  const std::int64_t token = d->acquire(true, 1.0, 0.1);
  EXPECT_GT(token, c->fence());
  EXPECT_EQ(held_slots(clock->wall_ms()), 3);
}

TEST_F(SemaphoreTest, ADeadHoldersSlotFreesAtItsExpiryNotBefore) {
  auto a = sem("a", 1, 10), b = sem("b", 1, 10);
  const std::int64_t start_wall = clock->wall_ms();
  a->acquire(false);  // then a "dies": never renews, never releases
  const std::int64_t expire = doc()->slots[0].ts_expire->ms;
  EXPECT_LE(expire, start_wall + 10000);
  clock->advance(expire - clock->wall_ms() - 1);
  EXPECT_FALSE(b->try_acquire()) << "taken 1 ms before the holder's expiry";
  // From expiry on, at most the claimant's clock uncertainty (drift since its sample) late.
  std::int64_t waited = 0;
  while (!b->try_acquire()) {
    clock->advance(1);
    ASSERT_LT(++waited, 50) << "not free within 50 ms of its expiry";
  }
  EXPECT_GE(clock->wall_ms(), expire);
  EXPECT_GT(b->fence(), a->fence());
  // The dead holder's renewal now finds its slot gone: its hold is dropped.
  EXPECT_FALSE(a->touch());
  EXPECT_FALSE(a->hold());
}

TEST_F(SemaphoreTest, ClaimantsCompareWithTheEarliestServerTime) {
  auto a = sem("a", 1, 10), b = sem("b", 1, 10);
  a->acquire(false);
  const std::int64_t expire = doc()->slots[0].ts_expire->ms;
  // b's only sample had a slow round trip (400 ms, all of it before the server read its
  // clock): b's estimate runs 200 ms AHEAD of the server, uncertain by 200 ms.
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if (op == "server_time_ms" && !applied) clock->advance(400);
  });
  b->server_clock().refresh();
  storage->set_fault_hook({});
  ASSERT_GE(b->server_clock().uncertainty_ms(), 200);
  clock->advance(expire - 100 - clock->wall_ms());
  ASSERT_GT(b->server_clock().estimate()->now_ms, expire) << "a naive claimant would claim";
  EXPECT_FALSE(b->try_acquire()) << "claimed before the server's clock reached the expiry";
  clock->advance(105);
  EXPECT_TRUE(b->try_acquire());
}

TEST_F(SemaphoreTest, TokensStrictlyIncreaseAcrossSlotsReleasesExpiriesAndDeletion) {
  std::vector<std::shared_ptr<Semaphore>> s;
  for (int i = 0; i < 4; ++i) s.push_back(sem("n" + std::to_string(i), 3, 1));
  std::int64_t last = 0;
  int kinds[4] = {0, 0, 0, 0};
  for (int i = 0; i < 120; ++i) {
    auto& who = s[static_cast<std::size_t>(i % 4)];
    const int kind = (i * 7 + i / 3) % 4;
    ++kinds[kind];
    if (who->hold()) who->release();
    if (kind == 1) clock->advance(1100);                      // everything expired
    if (kind == 2) storage->delete_semaphore(kColl, "pool");  // a user deleted it
    if (kind == 3)
      for (auto& o : s)
        if (o != who && o->hold()) o->release();
    const std::int64_t token = who->acquire(true, 5.0, 0.05);
    ASSERT_GT(token, last) << "acquisition " << i << " kind " << kind;
    last = token;
  }
  EXPECT_GT(kinds[2], 0);
  EXPECT_GE(last, 2 * kEpoch) << "deletions moved the counter to new epochs";
}

TEST_F(SemaphoreTest, TheCounterMovesToANewEpochBeforeItWouldReachTheNextOne) {
  auto a = sem("a", 2), b = sem("b", 2);
  a->acquire(false);  // epoch 1
  SemaphoreDoc d = *doc();
  d.fence = kEpoch + 0xFFFFFFFFLL;  // the last token of epoch 1
  storage->put_semaphore(kColl, d);
  const std::int64_t t = b->acquire(false);
  EXPECT_EQ(t, 2 * kEpoch);
  a->release();
  b->release();
  storage->delete_semaphore(kColl, "pool");
  EXPECT_EQ(a->acquire(false), 3 * kEpoch) << "a deleted document restarts above every token";
}

TEST_F(SemaphoreTest, RoundTripsPerAcquire) {
  auto a = sem("a"), b = sem("b");
  a->verify_time();
  b->verify_time();
  // First use of the key: read (absent), bump the epoch, insert.
  auto first = ops_during([&] { a->acquire(false); });
  EXPECT_EQ(first, (std::vector<std::string>{"server_info", "read_semaphore", "bump_epoch",
                                             "create_semaphore"}));
  a->release();
  // Uncontended, with the copy of its own last write: ONE round trip.
  EXPECT_EQ(ops_during([&] { a->acquire(false); }), (std::vector<std::string>{"claim_semaphore"}));
  EXPECT_EQ(ops_during([&] { a->release(); }), (std::vector<std::string>{"release_semaphore"}));
  // A new instance (no copy): read + compare-and-set (plus its one-off server check).
  EXPECT_EQ(ops_during([&] { b->acquire(false); }),
            (std::vector<std::string>{"server_info", "read_semaphore", "claim_semaphore"}));
  // a's copy is now stale (b claimed): one failed compare-and-set, a read, the claim.
  EXPECT_EQ(ops_during([&] { a->acquire(false); }),
            (std::vector<std::string>{"claim_semaphore", "read_semaphore", "claim_semaphore"}));
  EXPECT_EQ(ops_during([&] { a->touch(); }), (std::vector<std::string>{"renew_semaphore"}));
  EXPECT_EQ(ops_during([&] { (void)a->holders(); }), (std::vector<std::string>{"read_semaphore"}));
  // A full semaphore: one read per attempt.
  auto c = sem("c"), d = sem("d");
  c->verify_time();
  d->verify_time();
  c->acquire(false);
  EXPECT_EQ(ops_during([&] { EXPECT_FALSE(d->try_acquire()); }),
            (std::vector<std::string>{"server_info", "read_semaphore"}));
  EXPECT_EQ(ops_during([&] { EXPECT_FALSE(d->try_acquire()); }),
            (std::vector<std::string>{"read_semaphore"}));
}

TEST_F(SemaphoreTest, ALimitOtherThanTheDocumentsIsRefused) {
  auto a = sem("a", 3);
  a->acquire(false);
  auto b = sem("b", 5);
  try {
    b->acquire(false);
    FAIL() << "a limit-5 instance on a limit-3 key";
  } catch (const InvalidArgument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("semaphore 'pool' has limit 3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("asks for 5"), std::string::npos) << msg;
  }
  EXPECT_THROW(b->holders(), InvalidArgument);
  EXPECT_EQ(doc()->limit, 3);
  EXPECT_EQ(held_slots(clock->wall_ms()), 1) << "nothing written";
  EXPECT_FALSE(b->hold());
  // Bad limits at construction.
  EXPECT_THROW(sem("x", 0), InvalidArgument);
  EXPECT_THROW(sem("x", semaphore_doc::kMaxLimit + 1), InvalidArgument);
  // A malformed document is a StorageError, not a silent resize.
  SemaphoreDoc bad = *doc();
  bad.slots.pop_back();
  storage->put_semaphore(kColl, bad);
  EXPECT_THROW(sem("y", 3)->acquire(false), StorageError);
}

TEST_F(SemaphoreTest, OneSlotPerInstance) {
  auto a = sem("a", 3, 10);
  a->acquire(false);
  EXPECT_THROW(a->acquire(false), InvalidArgument);
  EXPECT_EQ(held_slots(clock->wall_ms()), 1);
  // Once its lease is over (on its own clock), the old hold is released (fenced) first.
  const std::int64_t old = a->fence();
  clock->advance(10000);
  const std::int64_t token = a->acquire(false);
  EXPECT_GT(token, old);
  EXPECT_EQ(held_slots(clock->wall_ms()), 1);
}

TEST_F(SemaphoreTest, ALateReleaseCannotFreeANewerHoldOfTheSameOwner) {
  auto a = sem("a", 1, 10), b = sem("b", 1, 10);
  a->acquire(false);
  const std::int64_t first = a->fence();
  storage->stall_next("release_semaphore");
  EXPECT_THROW(a->release(), StorageUnavailable);
  EXPECT_TRUE(a->has_stranded());
  // The next acquire releases the stranded hold (fenced) before claiming again.
  const std::int64_t second = a->acquire(false);
  EXPECT_GT(second, first);
  EXPECT_FALSE(a->has_stranded());
  EXPECT_EQ(storage->land_stalled(), 1);  // the old release lands now: names fence `first`
  auto d = doc();
  EXPECT_EQ(d->slots[0].uuid, "uuid-a");
  EXPECT_EQ(d->slots[0].fence, second);
  EXPECT_TRUE(d->slots[0].held_at(clock->wall_ms()));
  EXPECT_FALSE(b->try_acquire());
}

TEST_F(SemaphoreTest, ALostClaimReplyIsReleasedNotLeftHolding) {
  auto a = sem("a", 1, 10), b = sem("b", 1, 10);
  a->acquire(false);
  a->release();
  storage->set_fault_hook([](const std::string& op, bool applied) {
    if (op == "claim_semaphore" && applied) throw StorageUnavailable("reply lost");
  });
  EXPECT_THROW(a->acquire(false), StorageUnavailable);
  storage->set_fault_hook({});
  EXPECT_FALSE(a->hold());
  EXPECT_FALSE(a->has_stranded()) << "released (fenced) at once";
  EXPECT_TRUE(b->try_acquire()) << "nobody is locked out until the lost claim's expiry";
}

TEST_F(SemaphoreTest, ALateClaimCannotLandOnANewerDocumentVersion) {
  auto a = sem("a", 2, 10), b = sem("b", 2, 10), c = sem("c", 2, 10);
  a->acquire(false);
  a->release();
  storage->stall_next("claim_semaphore");
  EXPECT_THROW(a->acquire(false), StorageUnavailable);  // timed out at the client
  b->acquire(false);
  c->acquire(false);
  EXPECT_EQ(storage->land_stalled(), 1);  // its compare-and-set names an old fence
  auto d = doc();
  for (const auto& s : d->slots) EXPECT_NE(s.uuid, "uuid-a");
  EXPECT_EQ(held_slots(clock->wall_ms()), 2);
}

TEST_F(SemaphoreTest, TouchAndHolders) {
  auto a = sem("a", 2, 10), b = sem("b", 2, 10);
  EXPECT_TRUE(a->holders().empty());
  a->acquire(false);
  b->acquire(false);
  auto h = a->holders();
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].uuid, "uuid-a");
  EXPECT_EQ(h[1].uuid, "uuid-b");
  EXPECT_LT(h[0].fence, h[1].fence);
  clock->advance(8000);
  auto exp = a->touch();
  ASSERT_TRUE(exp);
  EXPECT_GE(*exp, clock->wall_ms() + 9000);
  clock->advance(3000);  // b expired, a renewed
  h = a->holders();
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].uuid, "uuid-a");
  EXPECT_FALSE(b->touch()) << "an expired hold is not renewed";
  EXPECT_FALSE(b->hold());
  a->release();
  EXPECT_FALSE(a->touch());
}

TEST_F(SemaphoreTest, UnsafeServersAreRefusedUnlessOptedIn) {
  auto unsafe = std::make_shared<NonAtomic>(storage);
  SemaphoreOptions o;
  o.key = "pool";
  o.limit = 2;
  Semaphore refused(unsafe, o, clock, Identity{"uuid-r", "h", 1});
  EXPECT_THROW(refused.acquire(false), UnsafeServer);
  EXPECT_FALSE(doc());
  o.allow_unsafe_server = true;
  Semaphore allowed(unsafe, o, clock, Identity{"uuid-s", "h", 1});
  EXPECT_GT(allowed.acquire(false), 0);
}

TEST_F(SemaphoreTest, ManyThreadsNeverExceedTheLimit) {
  // Real threads on one in-memory server (each claim is atomic there, as on MongoDB).
  auto real = system_clock();
  auto mem = std::make_shared<MemoryStorage>();
  std::mutex mu;
  int inside = 0, max_inside = 0, acquisitions = 0;
  std::vector<std::int64_t> tokens;
  std::vector<std::thread> threads;
  for (int i = 0; i < 12; ++i) {
    threads.emplace_back([&, i] {
      SemaphoreOptions o;
      o.key = "pool";
      o.limit = 3;
      o.ttl_s = 30;
      o.timeparanoid = false;
      Semaphore s(mem, o, real, Identity{"t" + std::to_string(i), "h", i});
      for (int n = 0; n < 20; ++n) {
        const std::int64_t t = s.acquire(true, 30.0, 0.001);
        {
          std::lock_guard<std::mutex> g(mu);
          max_inside = std::max(max_inside, ++inside);
          ++acquisitions;
          tokens.push_back(t);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        {
          std::lock_guard<std::mutex> g(mu);
          --inside;
        }
        s.release();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(acquisitions, 240);
  EXPECT_LE(max_inside, 3);
  EXPECT_GE(max_inside, 2) << "the semaphore admitted one holder at a time";
  std::set<std::int64_t> unique(tokens.begin(), tokens.end());
  EXPECT_EQ(unique.size(), tokens.size()) << "a token was handed out twice";
}

// ------------------------------------------------------------ keep-alive lease ----

class SemaphoreLeaseTest : public SemaphoreTest {
 protected:
  void SetUp() override {
    SemaphoreTest::SetUp();
    renewer = std::make_unique<Renewer>(clock, 0);
  }
  void TearDown() override { renewer.reset(); }
  std::unique_ptr<SemaphoreLease> hold(const std::shared_ptr<Semaphore>& s,
                                       std::function<void()> on_lost = {}) {
    KeepAliveOptions o;
    o.blocking = false;
    o.on_lost = std::move(on_lost);
    return SemaphoreLease::acquire(s, o, renewer.get());
  }
  void step(std::int64_t limit = INT64_MAX) {
    auto due = renewer->next_due();
    std::int64_t to = due ? std::min(*due, limit) : limit;
    if (to > clock->mono_ms()) clock->advance(to - clock->mono_ms());
    renewer->run_due();
  }
  std::unique_ptr<Renewer> renewer;
};

TEST_F(SemaphoreLeaseTest, KeepsTheSlotForTenTtlsThenReleasesOnClose) {
  auto a = sem("a", 1, 3), b = sem("b", 1, 3);
  auto lease = hold(a);
  const std::int64_t start = a->hold()->lease_start_mono;
  EXPECT_EQ(*renewer->next_due(), start + 1000);
  while (clock->mono_ms() < start + 30000) {
    step();
    ASSERT_FALSE(lease->lost()) << lease->lost_reason();
    ASSERT_FALSE(b->try_acquire()) << "the kept slot was taken";
  }
  const std::int64_t fence = lease->fence();
  lease->close();
  EXPECT_EQ(renewer->size(), 0u);
  EXPECT_GT(b->acquire(false), fence);
}

TEST_F(SemaphoreLeaseTest, LostAtItsOwnDeadlineBeforeTheSlotCanBeTaken) {
  auto a = sem("a", 1, 3), b = sem("b", 1, 3);
  int lost_calls = 0;
  std::int64_t lost_at = 0;
  auto lease = hold(a, [&] {
    ++lost_calls;
    lost_at = clock->mono_ms();
  });
  const std::int64_t expire_wall = doc()->slots[0].ts_expire->ms;
  const std::int64_t wall_minus_mono = clock->wall_ms() - clock->mono_ms();
  const std::int64_t deadline = lease->renew_deadline_mono();
  EXPECT_LE(deadline + wall_minus_mono, expire_wall - 300) << "a margin of at least ttl/10";
  storage->set_unavailable(true);
  for (int i = 0; i < 2000 && !lease->lost(); ++i) step(clock->mono_ms() + 10);
  ASSERT_TRUE(lease->lost());
  EXPECT_EQ(lost_calls, 1);
  EXPECT_GE(lost_at, deadline);
  EXPECT_LE(lost_at, deadline + 10) << "announced at the deadline (10 ms time steps)";
  EXPECT_FALSE(a->hold());
  storage->set_unavailable(false);
  // The lost hold is released (fenced) by the renewer as soon as the server answers.
  for (int i = 0; i < 20 && a->has_stranded(); ++i) step(clock->mono_ms() + 100);
  EXPECT_FALSE(a->has_stranded());
  EXPECT_TRUE(b->try_acquire());
  lease->close();
  EXPECT_EQ(lost_calls, 1);
}

TEST_F(SemaphoreLeaseTest, ASlotTakenBehindItsBackIsLostAtOnce) {
  auto a = sem("a", 1, 3), b = sem("b", 1, 3);
  auto lease = hold(a);
  // Someone empties the slot (a user's clean-up) and another claims it.
  SemaphoreDoc d = *doc();
  d.slots[0] = semaphore_doc::empty_slot();
  storage->put_semaphore(kColl, d);
  ASSERT_TRUE(b->try_acquire());
  step();
  clock->advance(0);  // the deadline timer runs the loss task
  EXPECT_TRUE(lease->lost());
  EXPECT_NE(lease->lost_reason().find("no longer ours"), std::string::npos) << lease->lost_reason();
  lease->close();
  EXPECT_EQ(doc()->slots[0].uuid, "uuid-b") << "the loser's clean-up left the new holder alone";
}

}  // namespace
