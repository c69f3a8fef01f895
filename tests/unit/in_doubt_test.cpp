// Writes whose outcome is unknown at the caller (a lost reply, a call that timed out and
// runs at the server later): the hold they concern is "in doubt", and whatever cleans it
// up must act on THAT hold only -- never on an earlier hold of the same owner (a minimum
// hold, a window already won), never on a later incarnation of the document, and never
// by a name the hold may no longer carry. MemoryStorage's levers stand in for the network:
// a fault hook that throws after the call was applied (a lost reply), stall_next() /
// land_stalled() (a call applied late, with the values it was sent with).
#include <memory>
#include <string>

#include "exceptions.h"
#include "fixtures.h"
#include "semaphore/semaphore.h"

using namespace mongoelector;
using mongoelector::testing::CoreTest;

namespace {

constexpr std::int64_t kEpochUnit = std::int64_t{1} << 32;

class InDoubtTest : public CoreTest {
 protected:
  // The next call of `op` is applied at the server but its reply is lost.
  void lose_next_reply(const std::string& op) {
    auto armed = std::make_shared<bool>(true);
    storage->set_fault_hook([op, armed](const std::string& o, bool applied) {
      if (o == op && applied && *armed) {
        *armed = false;
        throw StorageUnavailable("test: the reply of " + o + " was lost");
      }
    });
  }
  std::unique_ptr<Locker> make(const std::string& name, bool lazy, double ttl_s = 10) {
    LockerOptions o;
    o.key = "k";
    o.ttl_s = ttl_s;
    o.lazy_token = lazy;
    return std::make_unique<Locker>(storage, o, clock,
                                    Identity{"uuid-" + name, "host-" + name, 100});
  }
  std::int64_t expiry() { return storage->read("mongolocker", "k")->ts_expire->ms; }
  // Acquires with `l` (lazy_token), then its token()'s fence change times out at the
  // caller and is kept back (land_stalled()). The latest server time of the acquire.
  std::int64_t token_in_doubt(Locker& l) {
    EXPECT_TRUE(l.try_acquire().has_value());
    const std::int64_t acquired = l.hold()->acquired_latest_ms;
    storage->stall_next("set_fence");
    EXPECT_THROW(l.token(), StorageUnavailable);
    EXPECT_FALSE(l.hold().has_value()) << "a hold in doubt is given up locally";
    return acquired;
  }
};

// A claim of the lock by the owner of a minimum hold fails at the network: the stranded
// claim is settled by releasing only what THAT claim wrote, never the minimum hold (the
// document still carries the owner's uuid).
TEST_F(InDoubtTest, AFailedClaimOfTheOwnerDoesNotEndItsMinimumHold) {
  auto a = make_locker("a", 10);
  auto b = make_locker("b", 10);
  ASSERT_TRUE(a->try_acquire().has_value());
  const std::int64_t bound = a->hold()->acquired_latest_ms + 30000;
  clock->advance(1000);
  ASSERT_EQ(a->release_min_hold(30), std::optional<std::int64_t>(bound));
  clock->advance(1000);
  lose_next_reply("claim");  // refused (held), but the owner cannot tell
  EXPECT_THROW(a->try_acquire(), StorageUnavailable);
  storage->set_fault_hook({});
  EXPECT_TRUE(storage->read("mongolocker", "k")->locked) << "the minimum hold was released";
  EXPECT_EQ(expiry(), bound);
  clock->advance(1000);
  EXPECT_FALSE(b->try_acquire().has_value()) << "claimed within the minimum hold";
  clock->advance(bound - storage->server_time_ms() + 5);  // + b's sample's uncertainty
  EXPECT_TRUE(b->try_acquire().has_value()) << "free after the bound";
}

// The same within one millisecond of the acquire (a fast LAN): the failed claim must not
// be mistaken for the minimum hold's claim.
TEST_F(InDoubtTest, AFailedClaimInTheSameMillisecondDoesNotEndTheMinimumHold) {
  auto a = make_locker("a", 10);
  auto b = make_locker("b", 10);
  ASSERT_TRUE(a->try_acquire().has_value());
  ASSERT_TRUE(a->release_min_hold(30).has_value());
  lose_next_reply("claim");
  EXPECT_THROW(a->try_acquire(), StorageUnavailable);
  storage->set_fault_hook({});
  EXPECT_TRUE(storage->read("mongolocker", "k")->locked) << "the minimum hold was released";
  clock->advance(1000);
  EXPECT_FALSE(b->try_acquire().has_value()) << "claimed within the minimum hold";
}

// The winner of a window claims it again and loses the reply: the marker it won stays.
TEST_F(InDoubtTest, AFailedReclaimOfAWonWindowKeepsTheWindow) {
  auto a = make_locker("a", 10, "report");
  auto b = make_locker("b", 10, "report");
  const auto won = a->claim_window(60);
  ASSERT_TRUE(won.has_value());
  for (std::int64_t later : {0, 1000}) {
    clock->advance(later);
    lose_next_reply("claim");
    EXPECT_THROW(a->claim_window(60), StorageUnavailable);
    storage->set_fault_hook({});
    EXPECT_FALSE(b->claim_window(60).has_value()) << "window won twice (after " << later << " ms)";
  }
}

// A failed claim whose reply was lost really is released (the owner is not locked out).
TEST_F(InDoubtTest, AClaimWithALostReplyIsStillReleased) {
  auto a = make_locker("a", 10);
  auto b = make_locker("b", 10);
  lose_next_reply("claim");
  EXPECT_THROW(a->try_acquire(), StorageUnavailable);
  storage->set_fault_hook({});
  EXPECT_FALSE(a->has_stranded());
  EXPECT_TRUE(b->try_acquire().has_value());
}

// A set_fence of an earlier claim runs late, after the document was deleted (TTL monitor,
// delete_on_release) and re-created by the same locker, whose counter restarted at the
// same fence: it must not give the new incarnation the old, lower token.
TEST_F(InDoubtTest, ALateSetFenceDoesNotMatchANewIncarnationOfTheDocument) {
  auto a = make_locker("a", 10);
  auto b = make_locker("b", 10);
  storage->stall_next("set_fence");  // a's first anchoring (token of epoch 1) times out
  EXPECT_THROW(a->try_acquire(), StorageUnavailable);
  EXPECT_FALSE(a->has_stranded()) << "released, fenced";
  clock->advance(1000);
  const auto tb = b->try_acquire();  // epoch 2
  ASSERT_TRUE(tb.has_value());
  b->release();
  storage->delete_lock("mongolocker", "k");  // the TTL monitor
  clock->advance(1000);
  // a re-creates the document (fence 1 again); the old set_fence lands before a's own.
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if (op == "bump_epoch" && !applied) storage->land_stalled();
  });
  std::optional<std::int64_t> ta;
  for (int i = 0; i < 3 && !ta; ++i) {  // retried past the lease of whatever was left
    ta = a->try_acquire();
    storage->set_fault_hook({});
    if (!ta) clock->advance(10001);
  }
  ASSERT_TRUE(ta.has_value());
  EXPECT_GT(*ta, *tb) << "the token went down";
}

// token() (lazy_token) times out while its set_fence lands later: the hold is in doubt,
// and its minimum hold must still be kept, whatever name the document carries.
TEST_F(InDoubtTest, AMinimumHoldIsKeptWhenTheTokensFenceChangeLandsLate) {
  auto a = make("a", true);
  auto b = make("b", false);
  const std::int64_t bound = token_in_doubt(*a) + 30000;
  ASSERT_EQ(storage->land_stalled(), 1);  // the document now carries the token
  ASSERT_GE(storage->read("mongolocker", "k")->fence, kEpochUnit);
  clock->advance(1000);
  EXPECT_EQ(a->release_min_hold(30), std::optional<std::int64_t>(bound))
      << "reported released, or cut short";
  EXPECT_EQ(expiry(), bound);
  clock->advance(15000);  // past the ttl, within the minimum hold
  EXPECT_FALSE(b->try_acquire().has_value()) << "claimed within the minimum hold";
}

// The same when the late fence change lands between the read that names the hold and
// the write: the write is sent again under the name the document carries now.
TEST_F(InDoubtTest, AMinimumHoldIsKeptWhenTheFenceChangesUnderTheWrite) {
  auto a = make("a", true);
  auto b = make("b", false);
  const std::int64_t bound = token_in_doubt(*a) + 30000;
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if (op == "set_expiry" && !applied) storage->land_stalled();
  });
  clock->advance(1000);
  EXPECT_EQ(a->release_min_hold(30), std::optional<std::int64_t>(bound));
  storage->set_fault_hook({});
  EXPECT_EQ(expiry(), bound);
  clock->advance(15000);
  EXPECT_FALSE(b->try_acquire().has_value()) << "claimed within the minimum hold";
}

// A token() in doubt and then a plain release: the hold is released whatever its name.
TEST_F(InDoubtTest, AReleaseAfterATokenInDoubtFreesTheLock) {
  auto a = make("a", true);
  auto b = make("b", false);
  token_in_doubt(*a);
  ASSERT_EQ(storage->land_stalled(), 1);
  a->release();
  EXPECT_FALSE(a->has_stranded());
  EXPECT_TRUE(b->try_acquire().has_value()) << "the lock stayed taken after its release";
}

// Semaphore: a claim that never landed, whose stranded release is still in flight, must
// not share its fence with the next claim of the same slot: the late release would free
// the new hold.
TEST_F(InDoubtTest, ALateReleaseOfAFailedSlotClaimDoesNotFreeANewerHold) {
  SemaphoreOptions so;
  so.key = "pool";
  so.limit = 1;
  so.ttl_s = 10;
  so.timeparanoid = false;
  auto sem = [&](const std::string& name) {
    return std::make_unique<Semaphore>(storage, so, clock,
                                       Identity{"uuid-" + name, "host-" + name, 1});
  };
  auto a = sem("a");
  auto b = sem("b");
  ASSERT_TRUE(a->try_acquire().has_value());  // creates the document
  a->release();
  clock->advance(1000);
  auto armed = std::make_shared<bool>(true);
  storage->set_fault_hook([armed](const std::string& op, bool applied) {
    if (op == "claim_semaphore" && !applied && *armed) {
      *armed = false;
      throw StorageUnavailable("test: the claim was lost on the way");
    }
  });
  storage->stall_next("release_semaphore");  // the stranded release times out
  EXPECT_THROW(a->try_acquire(), StorageUnavailable);
  storage->set_fault_hook({});
  clock->advance(1000);
  const auto t = a->try_acquire();  // settles the leftover (nothing to free), then claims
  ASSERT_TRUE(t.has_value());
  ASSERT_EQ(storage->land_stalled(), 1);  // the first release lands now
  EXPECT_EQ(a->holders().size(), 1u) << "a late release freed the newer hold";
  EXPECT_FALSE(b->try_acquire().has_value()) << "two holders of a semaphore of 1";
}

}  // namespace

// A minimum-hold write of a hold named by its counter fence (no token yet) times out and
// lands late, after the owner released the lock (deleted) and claimed it again: the new
// document restarted its counter at the same fence. The late write must not cut the new
// hold's expiry short: it names the incarnation it was meant for (ts_created).
// (Simulation seed 8468.)
TEST_F(InDoubtTest, ALateMinimumHoldWriteDoesNotShortenANewIncarnation) {
  LockerOptions o;
  o.key = "k";
  o.ttl_s = 10;
  o.lazy_token = true;
  o.delete_on_release = true;
  auto a = std::make_unique<Locker>(storage, o, clock, Identity{"uuid-a", "host-a", 100});
  ASSERT_TRUE(a->try_acquire().has_value());
  ASSERT_LT(a->fence(), kEpochUnit);  // a counter fence: the document's first
  storage->stall_next("set_expiry");
  EXPECT_THROW(a->release_min_hold(2), StorageUnavailable);  // the bound: ~2 s from the claim
  clock->advance(3000);  // the bound has passed: the next acquire releases (deletes) first
  // The late write lands between the new claim and its fence change.
  storage->set_fault_hook([this](const std::string& op, bool applied) {
    if (op == "bump_epoch" && !applied) storage->land_stalled();
  });
  const std::int64_t token = a->acquire();
  storage->set_fault_hook({});
  ASSERT_GE(token, kEpochUnit);  // anchored at acquire (a write of an earlier hold in doubt)
  const Hold h = *a->hold();
  const LockDoc doc = *storage->read("mongolocker", "k");
  EXPECT_EQ(doc.fence, token);
  EXPECT_GE(doc.ts_expire->ms, h.expire_ms) << "the late write shortened the new hold";
  auto b = make("b", false);
  EXPECT_FALSE(b->try_acquire().has_value()) << "taken while its holder believes it holds";
}
