// Priority leaders (core/election/priority.h) on the testing kit's ManualClock: real
// election loops, fake time. A leader hands over to a live member of strictly higher
// priority once it has been seen for priority_stability, never before, never on a tie,
// never to a member whose loop does not run; a member that flaps restarts the delay; an
// elector without a priority behaves as before.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "election/elector.h"
#include "election/priority.h"
#include "exceptions.h"
#include "storage/memory_storage.h"
#include "testing/manual_clock.h"

using namespace mongoelector;

namespace {

constexpr double kTtl = 8;  // s: leaders renew every 2.67 s, followers peek every 2 s

class PriorityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> n{0};
    clock = std::make_shared<ManualClock>(1700000000000, /*settle_timeout_ms=*/5000);
    client = MemoryClient::open("memory://priority-test-" + std::to_string(n++), clock);
    storage = client->storage();
    storage->set_fault_hook([this](const std::string& op, bool applied) {
      if (!applied) {
        std::lock_guard<std::mutex> g(mu);
        ++calls[op];
      }
    });
  }
  void TearDown() override {
    for (auto& e : electors) e->stop();
  }

  Elector* make(const std::string& name, std::optional<double> priority,
                std::optional<double> stability_s = std::nullopt) {
    ElectorOptions o;
    o.key = "svc";
    o.ttl_s = kTtl;
    o.priority = priority;
    o.priority_stability_s = stability_s;
    ElectorCallbacks cb;
    cb.on_leader = [this, name] {
      std::lock_guard<std::mutex> g(mu);
      led.push_back({name, clock->mono_ms()});
    };
    electors.push_back(
        std::make_unique<Elector>(storage, o, cb, nullptr, Identity{"uuid-" + name, "h", 1}));
    return electors.back().get();
  }
  Elector* leader() {
    Elector* l = nullptr;
    for (auto& e : electors)
      if (e->is_leader()) {
        EXPECT_EQ(l, nullptr) << "two leaders at " << clock->mono_ms();
        l = e.get();
      }
    return l;
  }
  // Advances in steps of `step` ms until `ms` have passed, checking one leader at most.
  void run(std::int64_t ms, std::int64_t step = 250) {
    for (std::int64_t t = 0; t < ms; t += step) {
      ASSERT_TRUE(clock->advance(std::min(step, ms - t)));
      leader();
    }
  }
  std::vector<std::pair<std::string, std::int64_t>> leads() {
    std::lock_guard<std::mutex> g(mu);
    return led;
  }
  int count(const std::string& op) {
    std::lock_guard<std::mutex> g(mu);
    return calls[op];
  }
  // A status document of a member `uuid` as an elector reports it, timestamped `age_ms`
  // before the server's now.
  void put_member(const std::string& uuid, Value priority, bool running, std::int64_t age_ms) {
    Document d;
    d.set("uuid", uuid);
    d.set("key", "svc");
    d.set("ttl", static_cast<std::int64_t>(kTtl));
    d.set("timestamp", DateTime{clock->wall_ms() - age_ms});
    d.set("host", "h");
    d.set("pid", std::int64_t{1});
    d.set("_id", uuid);
    d.set("elector_running", running);
    d.set("priority", std::move(priority));
    storage->put_status("elector.leader_status", d);
  }

  std::shared_ptr<ManualClock> clock;
  std::shared_ptr<MemoryClient> client;
  std::shared_ptr<MemoryStorage> storage;
  std::vector<std::unique_ptr<Elector>> electors;
  std::mutex mu;
  std::vector<std::pair<std::string, std::int64_t>> led;  // (name, mono ms) per on_leader
  std::map<std::string, int> calls;
};

Document member(const std::string& uuid, Value priority, bool running, std::int64_t ts) {
  Document d;
  d.set("uuid", uuid);
  d.set("elector_running", running);
  d.set("timestamp", DateTime{ts});
  d.set("priority", std::move(priority));
  return d;
}

TEST(PriorityCandidateTest, HighestLiveAboveOwnTiesToTheSmallestUuid) {
  const std::int64_t now = 100000;
  std::vector<Document> ms{member("m", std::int64_t{5}, true, now),
                           member("c", 5.0, true, now - 1000),
                           member("z", 9.0, false, now),              // not running
                           member("y", 9.0, true, now - 12001),       // stale
                           member("x", std::string("9"), true, now),  // not a number
                           member("w", std::numeric_limits<double>::quiet_NaN(), true, now),
                           member("self", 99.0, true, now)};
  auto c = pick_priority_candidate(ms, "self", 1, now, 12000);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->uuid, "c");
  EXPECT_EQ(c->priority, 5);
  EXPECT_FALSE(pick_priority_candidate(ms, "self", 5, now, 12000)) << "a tie is never higher";
  Document none;
  none.set("uuid", "n");
  none.set("elector_running", true);
  none.set("timestamp", DateTime{now});
  EXPECT_FALSE(pick_priority_candidate({none}, "self", -1e9, now, 12000))
      << "a member without a priority is never a candidate";
}

// The delay is the LEADER's priority_stability (the member's own matters once it leads).
TEST_F(PriorityTest, HandsOverToAHigherLiveMemberAfterTheDelayNotBefore) {
  Elector* a = make("a", 1, /*stability_s=*/5);
  a->start();
  ASSERT_TRUE(clock->settle());
  ASSERT_TRUE(a->is_leader());
  run(3 * 8000);
  Elector* b = make("b", 5);
  const std::int64_t t0 = clock->mono_ms();
  b->start();
  run(5000 - 250);
  EXPECT_EQ(leader(), a) << "not before the stability delay";
  run(8000 / 3 + 8000 / 4 + 500 + 1500);  // a's poll that sees b, then b's peek (+ jitter)
  ASSERT_EQ(leader(), b);
  const auto l = leads();
  ASSERT_EQ(l.size(), 2u);
  EXPECT_GE(l[1].second - t0, 5000);
  // b stays: a is lower, and nobody hands back.
  run(5 * 8000);
  EXPECT_EQ(leader(), b);
  EXPECT_EQ(leads().size(), 2u);
}

TEST_F(PriorityTest, DefaultDelayIsOneTtl) {
  Elector* a = make("a", 0);
  a->start();
  ASSERT_TRUE(clock->settle());
  Elector* b = make("b", 1);
  const std::int64_t t0 = clock->mono_ms();
  b->start();
  run(8000 - 250);
  EXPECT_EQ(leader(), a);
  run(8000);
  EXPECT_EQ(leader(), b);
  EXPECT_GE(leads().back().second - t0, 8000);
}

TEST_F(PriorityTest, TiesNeverMoveLeadership) {
  Elector* a = make("a", 5, 0);
  a->start();
  ASSERT_TRUE(clock->settle());
  ASSERT_TRUE(a->is_leader());
  make("b", 5, 0)->start();
  make("c", 5, 0)->start();
  run(10 * 8000);
  EXPECT_EQ(leader(), a);
  EXPECT_EQ(leads().size(), 1u);
}

TEST_F(PriorityTest, EqualCandidatesGoToOneAndNeverBounce) {
  Elector* a = make("a", 1, 0);
  a->start();
  ASSERT_TRUE(clock->settle());
  Elector* c = make("c", 7, 0);
  Elector* b = make("b", 7, 0);
  c->start();
  b->start();
  run(10 * 8000);
  EXPECT_EQ(leader(), b) << "the smallest uuid among the highest";
  EXPECT_EQ(leads().size(), 2u) << "one hand-over, no bouncing between b and c";
  (void)c;
}

TEST_F(PriorityTest, AFlappingMemberRestartsTheDelay) {
  Elector* a = make("a", 1, /*stability_s=*/12);
  a->start();
  ASSERT_TRUE(clock->settle());
  Elector* b = make("b", 5);
  b->start();
  run(6000);
  b->stop();  // its last report says it no longer runs
  run(3000);
  EXPECT_EQ(leader(), a);
  const std::int64_t back = clock->mono_ms();
  b->start();
  run(12000 - 250);
  EXPECT_EQ(leader(), a) << "the delay restarted when b came back";
  run(8000 / 3 + 8000 / 4 + 2000);
  EXPECT_EQ(leader(), b);
  EXPECT_GE(leads().back().second - back, 12000);
}

TEST_F(PriorityTest, AMemberThatIsNotLiveIsNeverChosen) {
  Elector* a = make("a", 1, 0);
  a->start();
  ASSERT_TRUE(clock->settle());
  // A member constructed but not started reports nothing; one whose loop does not run,
  // and one whose last report is too old (its process died), are not live.
  make("b", 9, 0);
  for (int i = 0; i < 40; ++i) {
    put_member("uuid-d", std::int64_t{9}, /*running=*/false, 0);
    put_member("uuid-e", std::int64_t{9}, /*running=*/true, 12001 + 500);
    run(1000);
  }
  EXPECT_EQ(leader(), a);
  EXPECT_EQ(leads().size(), 1u);
}

TEST_F(PriorityTest, OffByDefaultChangesNothing) {
  Elector* a = make("a", std::nullopt);
  a->start();
  ASSERT_TRUE(clock->settle());
  Elector* b = make("b", std::nullopt);
  b->start();
  put_member("uuid-z", std::int64_t{9}, true, 0);
  run(4 * 8000);
  EXPECT_EQ(leader(), a) << "a leader without a priority never hands over";
  EXPECT_EQ(count("list_status"), 0) << "no member reads";
  for (const Document& m : storage->list_status("elector.leader_status", "svc"))
    if (m.get_string("uuid") != "uuid-z") {
      EXPECT_FALSE(m.has("priority"));
    }
  EXPECT_EQ(leads().size(), 1u);
}

TEST_F(PriorityTest, BadOptionsNameWhatWasWrong) {
  auto refused = [&](ElectorOptions o, const std::string& what) {
    o.key = "svc";
    try {
      Elector e(storage, o, {});
      ADD_FAILURE() << "accepted: " << what;
    } catch (const InvalidArgument& ex) {
      EXPECT_NE(std::string(ex.what()).find(what), std::string::npos) << ex.what();
    }
  };
  ElectorOptions o;
  o.priority = std::nan("");
  refused(o, "priority must be a finite number");
  o = {};
  o.priority = 1;
  o.priority_stability_s = -1;
  refused(o, "priority_stability must be a finite number of seconds");
  o.priority_stability_s = std::nan("");
  refused(o, "priority_stability must be a finite number of seconds");
  o = {};
  o.priority = 1;
  o.report_status = false;
  refused(o, "priority needs report_status");
}

}  // namespace
