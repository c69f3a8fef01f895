// The insert-first claim (Locker::send_claim): a locker that deletes its document on
// release claims next with a plain insert, falling back to the conditional upsert when a
// document is there. The insert can only create a document, so a wrong guess changes
// neither the holder nor the token; these tests pin the calls made, the fallbacks, the
// tokens across them, and an insert that lands late.
#include <string>
#include <vector>

#include "exceptions.h"
#include "fixtures.h"

using namespace mongoelector;
using mongoelector::testing::CoreTest;

namespace {
constexpr std::int64_t kEpochUnit = std::int64_t{1} << 32;
}

class InsertClaimTest : public CoreTest {
 protected:
  void SetUp() override {
    CoreTest::SetUp();
    storage->set_fault_hook([this](const std::string& op, bool applied) {
      if (!applied) ops.push_back(op);
    });
  }
  std::unique_ptr<Locker> make(const std::string& name, bool deleting, bool lazy = false) {
    LockerOptions o;
    o.key = "k";
    o.ttl_s = 10;
    o.delete_on_release = deleting;
    o.lazy_token = lazy;
    o.ensure_indexes = false;
    return std::make_unique<Locker>(storage, o, clock,
                                    Identity{"uuid-" + name, "host-" + name, 100});
  }
  // The storage calls `f` makes (server-time samples left out).
  template <class F>
  std::vector<std::string> calls(F&& f) {
    ops.clear();
    f();
    std::vector<std::string> out;
    for (const std::string& op : ops)
      if (op != "server_time_ms" && op != "server_info") out.push_back(op);
    return out;
  }
  using Ops = std::vector<std::string>;
  std::vector<std::string> ops;
};

TEST_F(InsertClaimTest, ADeletingLockerCyclesWithAnInsertAndADelete) {
  auto a = make("a", /*deleting=*/true, /*lazy=*/true);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(calls([&] { a->acquire(); }), Ops{"insert_claim"}) << "cycle " << i;
    EXPECT_TRUE(a->owned());
    EXPECT_EQ(calls([&] { a->release(); }), Ops{"release"}) << "cycle " << i;
    EXPECT_FALSE(storage->read("mongolocker", "k")) << "deleted on release";
  }
}

TEST_F(InsertClaimTest, ALockerThatKeepsItsDocumentNeverInserts) {
  auto a = make("a", /*deleting=*/false);
  EXPECT_EQ(calls([&] { a->acquire(); }), (Ops{"claim", "bump_epoch", "set_fence"}));
  a->release();
  EXPECT_EQ(calls([&] { a->acquire(); }), Ops{"claim"});
}

TEST_F(InsertClaimTest, AHeldLockFallsBackToTheClaimOnceAndRetriesWithTheClaimOnly) {
  auto holder = make("h", /*deleting=*/false);
  holder->acquire();
  auto a = make("a", /*deleting=*/true);
  // The read that finds it held refuses without the upsert, as the original's insert
  // and read.
  EXPECT_EQ(calls([&] { EXPECT_FALSE(a->try_acquire()); }), (Ops{"insert_claim", "read"}));
  // A document is known to be there: the next attempts send the claim alone.
  EXPECT_EQ(calls([&] { EXPECT_FALSE(a->try_acquire()); }), Ops{"claim"});
  EXPECT_EQ(storage->read("mongolocker", "k")->uuid, "uuid-h") << "the insert changed the holder";
}

TEST_F(InsertClaimTest, ADocumentLeftFreeIsTakenByTheFallbackWithAHigherToken) {
  auto keeper = make("keeper", /*deleting=*/false);
  const std::int64_t first = keeper->acquire();
  keeper->release();  // the document stays, released
  auto a = make("a", /*deleting=*/true);
  std::int64_t second = 0;
  EXPECT_EQ(calls([&] { second = a->acquire(); }), (Ops{"insert_claim", "read", "claim"}));
  EXPECT_GT(second, first);
  a->release();  // deleted now
  std::int64_t third = 0;
  EXPECT_EQ(calls([&] { third = a->acquire(); }), (Ops{"insert_claim", "bump_epoch", "set_fence"}));
  EXPECT_GT(third, second) << "a token after the document was re-created by an insert";
  EXPECT_GE(third, kEpochUnit);
}

TEST_F(InsertClaimTest, AnExpiredDocumentIsTakenOverByTheFallback) {
  auto dead = make("dead", /*deleting=*/true);
  const std::int64_t first = dead->acquire();
  clock->advance(10000 + 10);  // its holder stopped renewing
  auto a = make("a", /*deleting=*/true);
  std::int64_t second = 0;
  EXPECT_EQ(calls([&] { second = a->acquire(); }), (Ops{"insert_claim", "read", "claim"}));
  EXPECT_GT(second, first);
  EXPECT_EQ(storage->read("mongolocker", "k")->uuid, "uuid-a");
}

// A non-blocking attempt refused after the insert names the holder from the read it made.
TEST_F(InsertClaimTest, ARefusalNamesTheHolderFromTheReadItMade) {
  auto holder = make("h", /*deleting=*/true);
  holder->acquire();
  auto a = make("a", /*deleting=*/true);
  std::string message;
  EXPECT_EQ(calls([&] {
              try {
                a->acquire(/*blocking=*/false);
              } catch (const LockExists& e) {
                message = e.what();
              }
            }),
            (Ops{"insert_claim", "read"}));
  EXPECT_NE(message.find("host-h"), std::string::npos) << message;
  // The next refusal reads the holder itself (a claim refused by the upsert).
  EXPECT_EQ(calls([&] { EXPECT_THROW(a->acquire(false), LockExists); }), (Ops{"claim", "read"}));
}

TEST_F(InsertClaimTest, AForcedClaimNeverInserts) {
  auto holder = make("h", /*deleting=*/true);
  holder->acquire();
  auto a = make("a", /*deleting=*/true);
  EXPECT_EQ(calls([&] { a->acquire(true, std::nullopt, 0.25, /*force=*/true); }), Ops{"claim"});
  EXPECT_EQ(storage->read("mongolocker", "k")->uuid, "uuid-a");
}

TEST_F(InsertClaimTest, TheInsertWritesWhatTheUpsertWouldOnAnAbsentDocument) {
  LockClaim c{"k", "uuid-a", "host-a", 100, 1000, 11000};
  c.payload = ClaimPayload{std::string(R"({"endpoint":"a:80"})"), 3};
  ASSERT_TRUE(storage->insert_claim("locks", c));
  ASSERT_TRUE(storage->claim("upserts", c, false));
  const std::optional<LockDoc> inserted = storage->read("locks", "k");
  const std::optional<LockDoc> upserted = storage->read("upserts", "k");
  ASSERT_TRUE(inserted && upserted);
  EXPECT_EQ(inserted->raw, upserted->raw);
  EXPECT_EQ(inserted->fence, 1);
  EXPECT_FALSE(storage->insert_claim("locks", c)) << "a second insert of the key";
  EXPECT_EQ(storage->read("locks", "k")->raw, inserted->raw) << "a refused insert wrote";
}

// The insert times out at the client and lands at the server afterwards, as a late upsert
// would: the document it creates is nobody's hold (the locker gave the claim up and
// found nothing to settle), it keeps the key taken until its expiry, and then the key is
// free again, its next token above every earlier one.
TEST_F(InsertClaimTest, AnInsertLandingAfterItsCallerGaveUpHoldsNobody) {
  auto keeper = make("keeper", /*deleting=*/false);
  const std::int64_t first = keeper->acquire();
  keeper->release(true);                     // force: any holder's, the document stays
  storage->delete_lock("mongolocker", "k");  // as the TTL monitor would
  auto a = make("a", /*deleting=*/true);
  storage->stall_next("insert_claim");
  EXPECT_THROW(a->try_acquire(), StorageUnavailable);
  EXPECT_FALSE(a->hold());
  ASSERT_EQ(storage->land_stalled(), 1);
  EXPECT_EQ(storage->read("mongolocker", "k")->uuid, "uuid-a");  // the late insert landed
  EXPECT_FALSE(a->hold()) << "a late claim made a hold";
  auto b = make("b", /*deleting=*/true);
  EXPECT_FALSE(b->try_acquire()) << "taken while the late insert's lease runs";
  clock->advance(10000 + 10);
  const std::optional<std::int64_t> token = b->try_acquire();
  ASSERT_TRUE(token);
  EXPECT_GT(*token, first);
  EXPECT_FALSE(a->try_acquire());
}
