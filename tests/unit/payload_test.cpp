// The leader's payload on the fake clock (core/storage/payload_storage.h): a term starts
// with its leader's payload, written by the claim itself, never with the previous
// leader's; set_payload names the term (uuid AND fence), so a late one from a deposed
// leader never lands on the next term; and it is versioned, so a late one of the same
// term never brings back an older payload.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "election/elector.h"
#include "exceptions.h"
#include "fixtures.h"
#include "observe/leader_observer.h"

using namespace mongoelector;
using mongoelector::testing::CoreTest;

namespace {

class PayloadTest : public CoreTest {
 protected:
  std::unique_ptr<Elector> make(const std::string& name, std::optional<std::string> payload,
                                double ttl_s = 8) {
    ElectorOptions o;
    o.key = "svc";
    o.ttl_s = ttl_s;
    o.payload = std::move(payload);
    return std::make_unique<Elector>(storage, o, ElectorCallbacks{}, clock,
                                     Identity{"uuid-" + name, "host-" + name, 7});
  }
  std::optional<LockDoc> doc() { return storage->read("elector.locks", "svc"); }
  // Polls `e` until it leads or `limit_ms` passes, advancing the clock to its next poll.
  void poll_until_leader(Elector& e, std::int64_t limit_ms = 60000) {
    const std::int64_t until = clock->mono_ms() + limit_ms;
    while (!e.is_leader() && clock->mono_ms() < until) {
      if (e.next_poll_mono() > clock->mono_ms())
        clock->advance(e.next_poll_mono() - clock->mono_ms());
      e.poll();
    }
    ASSERT_TRUE(e.is_leader());
  }
};

TEST_F(PayloadTest, TheClaimThatStartsATermCarriesTheNewLeadersPayload) {
  auto a = make("a", R"({"endpoint":"10.0.0.1:8080"})");
  a->poll();
  ASSERT_TRUE(a->is_leader());
  ASSERT_TRUE(doc()->payload);
  EXPECT_EQ(*doc()->payload, R"({"endpoint":"10.0.0.1:8080"})");
  auto b = make("b", R"({"endpoint":"10.0.0.2:8080"})");
  b->poll();
  EXPECT_FALSE(b->is_leader());
  // The document as the claim that starts b's term leaves it, before anything else runs.
  std::vector<std::optional<std::string>> after_claim;
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if (op == "claim" && applied) after_claim.push_back(doc()->payload);
  });
  a->stop();  // crash-free hand back: a releases (delete_on_release off: document kept)
  poll_until_leader(*b);
  storage->set_fault_hook({});
  ASSERT_EQ(after_claim.size(), 1u);
  ASSERT_TRUE(after_claim[0]) << "the new term showed no payload after its claim";
  EXPECT_EQ(*after_claim[0], R"({"endpoint":"10.0.0.2:8080"})")
      << "the new term showed the old leader's payload after its claim";
  // A leader without a payload clears the previous one in its claim.
  b->stop();
  auto c = make("c", std::nullopt);
  poll_until_leader(*c);
  EXPECT_FALSE(doc()->payload);
}

TEST_F(PayloadTest, ALateSetPayloadOfADeposedLeaderNeverLandsOnTheNextTerm) {
  auto a = make("a", R"({"v":"a1"})");
  auto b = make("b", R"({"v":"b1"})");
  a->poll();
  ASSERT_TRUE(a->is_leader());
  b->poll();
  // a's payload update times out at the client and is applied by the server later.
  storage->stall_next("set_payload");
  EXPECT_THROW(a->set_payload(R"({"v":"a2"})"), StorageUnavailable);
  // a is cut off (paused: it polls no more) and b takes over once a's lease has expired.
  poll_until_leader(*b);
  ASSERT_TRUE(b->is_leader());
  EXPECT_FALSE(a->is_leader());
  ASSERT_TRUE(doc()->payload);
  EXPECT_EQ(*doc()->payload, R"({"v":"b1"})");
  // The deposed leader's write lands now, after b's claim.
  EXPECT_GE(storage->land_stalled(), 1);
  ASSERT_TRUE(doc()->payload);
  EXPECT_EQ(*doc()->payload, R"({"v":"b1"})") << "a late write of the old leader replaced "
                                                 "the new leader's payload";
  EXPECT_EQ(doc()->uuid, "uuid-b");
}

TEST_F(PayloadTest, ALateSetPayloadOfTheSameTermNeverBringsBackAnOlderPayload) {
  auto a = make("a", R"({"v":1})");
  a->poll();
  ASSERT_TRUE(a->is_leader());
  storage->stall_next("set_payload");
  EXPECT_THROW(a->set_payload(R"({"v":2})"), StorageUnavailable);
  EXPECT_TRUE(a->set_payload(R"({"v":3})"));
  EXPECT_EQ(*doc()->payload, R"({"v":3})");
  storage->land_stalled();
  EXPECT_EQ(*doc()->payload, R"({"v":3})") << "a late write brought back an older payload";
  EXPECT_TRUE(a->is_leader());
}

TEST_F(PayloadTest, SetPayloadWhileFollowingIsKeptForTheNextClaim) {
  auto a = make("a", std::nullopt);
  auto b = make("b", std::nullopt);
  a->poll();
  b->poll();
  EXPECT_FALSE(b->set_payload(R"({"role":"next"})")) << "not leading: nothing written";
  EXPECT_FALSE(doc()->payload);
  a->stop();
  poll_until_leader(*b);
  EXPECT_EQ(*doc()->payload, R"({"role":"next"})");
  EXPECT_EQ(*b->payload(), R"({"role":"next"})");
  EXPECT_TRUE(b->set_payload(std::nullopt));
  EXPECT_FALSE(doc()->payload);
}

TEST_F(PayloadTest, AFailedWriteIsRepeatedByTheLoopWithinTheTerm) {
  auto a = make("a", std::nullopt);
  a->poll();
  storage->set_unavailable(true);
  EXPECT_THROW(a->set_payload(R"({"x":1})"), StorageUnavailable);
  storage->set_unavailable(false);
  clock->advance(a->next_poll_mono() - clock->mono_ms());
  a->poll();
  ASSERT_TRUE(a->is_leader());
  EXPECT_EQ(*doc()->payload, R"({"x":1})");
}

TEST_F(PayloadTest, AHandOverClearsThePayloadAndTheTargetWritesItsOwn) {
  auto a = make("a", R"({"who":"a"})");
  auto b = make("b", R"({"who":"b"})");
  a->poll();
  b->poll();
  std::vector<std::optional<std::string>> seen;
  a->transfer("uuid-b");
  seen.push_back(doc()->payload);
  poll_until_leader(*b);
  seen.push_back(doc()->payload);
  EXPECT_FALSE(seen[0]) << "the hand-over kept the old leader's payload";
  ASSERT_TRUE(seen[1]);
  EXPECT_EQ(*seen[1], R"({"who":"b"})");
}

TEST_F(PayloadTest, ObserversAndClusterDetailSeeThePayloadAndItsChanges) {
  auto a = make("a", R"({"endpoint":"x"})");
  a->poll();
  LeaderObserverOptions oo;
  oo.key = "svc";
  LeaderObserver obs(storage, oo, {}, clock);
  auto first = obs.poll();
  ASSERT_TRUE(first && first->payload);
  EXPECT_EQ(*first->payload, R"({"endpoint":"x"})");
  EXPECT_FALSE(obs.poll()) << "no change";
  a->set_payload(R"({"endpoint":"y"})");
  auto changed = obs.poll();
  ASSERT_TRUE(changed && changed->payload) << "a payload change is a change";
  EXPECT_EQ(*changed->payload, R"({"endpoint":"y"})");
  auto cd = a->cluster_detail();
  ASSERT_TRUE(cd.leader && cd.leader->payload);
  EXPECT_EQ(*cd.leader->payload, R"({"endpoint":"y"})");
}

TEST_F(PayloadTest, PayloadsAreValidatedAndBounded) {
  for (const char* bad : {"", "[1,2]", "42", "\"s\"", "{", "{\"a\":}", "{} x", "null"}) {
    try {
      make("x", std::string(bad));
      ADD_FAILURE() << "accepted " << bad;
    } catch (const InvalidArgument& ex) {
      EXPECT_NE(std::string(ex.what()).find("payload"), std::string::npos) << ex.what();
    }
  }
  std::string big = "{\"a\":\"" + std::string(kMaxPayloadBytes, 'x') + "\"}";
  try {
    make("x", big);
    ADD_FAILURE() << "accepted a payload above the bound";
  } catch (const InvalidArgument& ex) {
    EXPECT_NE(std::string(ex.what()).find("16384"), std::string::npos) << ex.what();
  }
  std::string fits = "{\"a\":\"" + std::string(kMaxPayloadBytes - 8, 'x') + "\"}";
  EXPECT_EQ(fits.size(), kMaxPayloadBytes);
  auto a = make("a", fits);
  EXPECT_THROW(a->set_payload(std::string("{\"a\":\"\xff\"}")), InvalidArgument);
  EXPECT_NO_THROW(a->set_payload(R"({"nested":{"list":[1,2.5,"x",null,true]}})"));
}

}  // namespace
