// The leader observer on fake clocks: it names a leader only while that leader's lease
// can still run (on the observer's own estimate of the server's clock), also while its
// reads fail, and shows a hand-over the target has not taken yet as pending, never as
// the target leading.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "election/elector.h"
#include "exceptions.h"
#include "fixtures.h"
#include "observe/leader_observer.h"
#include "storage/memory_storage.h"
#include "testing/manual_clock.h"

using namespace mongoelector;
using mongoelector::testing::CoreTest;

namespace {

class ObserverTest : public CoreTest {
 protected:
  std::unique_ptr<Elector> make(const std::string& name) { return make_elector(name); }
  // a leads, b follows (a member: a transfer target), the observer reported a.
  struct Led {
    std::unique_ptr<Elector> a, b;
    std::unique_ptr<LeaderObserver> obs;
    LeaderState state;
  };
  Led a_leads_b_follows() {
    Led l{make("a"), make("b"), observer(), {}};
    l.a->poll();
    l.b->poll();
    std::optional<LeaderState> s = l.obs->poll();
    EXPECT_TRUE(s && s->has_leader);
    if (s) l.state = *s;
    return l;
  }
  std::unique_ptr<LeaderObserver> observer() {
    LeaderObserverOptions oo;
    oo.key = "svc";
    return std::make_unique<LeaderObserver>(storage, oo, LeaderObserver::OnChange{}, clock);
  }
  // poll(), with a failed read counted as "nothing reported".
  std::optional<LeaderState> poll_quietly(LeaderObserver& obs) {
    try {
      return obs.poll();
    } catch (const StorageUnavailable&) {
      return std::nullopt;
    }
  }
  std::int64_t lock_expiry() { return storage->read("elector.locks", "svc")->ts_expire->ms; }
  std::int64_t server_now() { return clock->wall_ms() + server_skew_ms; }
};

TEST_F(ObserverTest, ReadsFailingPastTheLeasesEndReportTheLeaderAsUnknown) {
  auto a = make("a");
  a->poll();
  auto obs = observer();
  // The observer's one clock sample had a slow round trip (200 ms: 100 ms each way), so
  // its estimate of the server's clock is uncertain by 100 ms.
  bool slow = true;
  storage->set_fault_hook([&](const std::string& op, bool) {
    if (slow && op == "server_time_ms") clock->advance(100);
  });
  auto led = obs->poll();
  slow = false;
  ASSERT_TRUE(led);
  ASSERT_TRUE(led->has_leader);
  EXPECT_EQ(led->uuid, "uuid-a");
  const std::int64_t expiry = lock_expiry();
  EXPECT_EQ(led->status, LeaderStatus::kLeader);
  EXPECT_EQ(led->expire_ms, expiry) << "the state carries the lease's end";
  // The server stops answering (a partition between the observer and the database, and
  // the leader too): the leader's lease ends unseen.
  storage->set_unavailable(true);
  clock->advance(expiry - 150 - server_now());
  EXPECT_FALSE(poll_quietly(*obs)) << "the lease surely runs 150 ms more: nothing changed";
  // 50 ms before the lease's end on the server's clock, the observer can no longer tell
  // (its estimate may be 100 ms behind): the leader it names may be gone.
  clock->advance(100);
  auto gone = poll_quietly(*obs);
  ASSERT_TRUE(gone) << "the observer still names uuid-a, whose lease may have ended";
  EXPECT_FALSE(gone->has_leader);
  EXPECT_TRUE(gone->uuid.empty());
  EXPECT_EQ(gone->status, LeaderStatus::kUnknown);
  EXPECT_EQ(gone->expire_ms, expiry) << "the lease that ended unseen";
  EXPECT_FALSE(poll_quietly(*obs)) << "reported once";
  EXPECT_THROW(obs->poll(), StorageUnavailable) << "then the read's error again";
  // The server answers again: the lock is expired, nobody leads.
  storage->set_unavailable(false);
  auto none = obs->poll();
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_leader);
  EXPECT_EQ(none->status, LeaderStatus::kNone);
  EXPECT_EQ(none->expire_ms, 0);
}

TEST_F(ObserverTest, ReadsFailingWhileTheLeaseRunsReportNothing) {
  auto a = make("a");
  a->poll();
  auto obs = observer();
  ASSERT_TRUE(obs->poll());
  storage->set_unavailable(true);
  EXPECT_THROW(obs->poll(), StorageUnavailable) << "the leader it names still has its lease";
  storage->set_unavailable(false);
  EXPECT_FALSE(obs->poll());
  // A renewal seen by a read moves the end the observer waits for.
  clock->advance(3000);
  a->poll();
  ASSERT_TRUE(a->is_leader());
  const std::int64_t renewed = lock_expiry();
  EXPECT_FALSE(obs->poll()) << "a renewal is no change";
  storage->set_unavailable(true);
  clock->advance(renewed - 1000 - server_now());  // past the first lease's end
  EXPECT_THROW(obs->poll(), StorageUnavailable) << "the renewed lease still runs";
  EXPECT_THROW(obs->read(), StorageUnavailable) << "read() never judges: the error";
}

TEST_F(ObserverTest, ATransferToADeadTargetIsNeverShownAsTheTargetLeading) {
  auto [a, b, obs, first] = a_leads_b_follows();
  const LeaderState* led = &first;
  b.reset();  // b's process is gone; its status document is still there
  a->transfer("uuid-b");
  auto handed = obs->poll();
  ASSERT_TRUE(handed) << "the hand-over is a change";
  EXPECT_FALSE(handed->has_leader) << "b has not taken the hand-over: it does not lead";
  const std::int64_t expiry = lock_expiry();
  EXPECT_EQ(handed->status, LeaderStatus::kPending);
  EXPECT_TRUE(handed->uuid.empty());
  EXPECT_EQ(handed->handover_uuid, "uuid-b");
  EXPECT_EQ(handed->handover_host, "host-b");
  EXPECT_EQ(handed->handover_pid, 7);
  EXPECT_EQ(handed->handover_fence, led->fence + 1);
  EXPECT_EQ(handed->expire_ms, expiry);
  clock->advance(expiry - 1 - server_now());
  auto still = poll_quietly(*obs);
  EXPECT_FALSE(still && still->has_leader) << "b never leads";
  EXPECT_FALSE(still) << "still pending: no change";
  clock->advance(2);
  auto expired = poll_quietly(*obs);
  EXPECT_FALSE(expired && expired->has_leader);
  ASSERT_TRUE(expired);
  EXPECT_EQ(expired->status, LeaderStatus::kNone);
}

TEST_F(ObserverTest, ATransferShowsTheTargetOnlyOnceItTookOver) {
  auto [a, b, obs, first] = a_leads_b_follows();
  const LeaderState* led = &first;
  clock->advance(500);
  a->transfer("uuid-b");
  auto handed = obs->poll();
  ASSERT_TRUE(handed);
  EXPECT_FALSE(handed->has_leader) << "pending: b has not renewed";
  EXPECT_EQ(handed->status, LeaderStatus::kPending);
  EXPECT_FALSE(b->is_leader());
  clock->advance(b->next_poll_mono() - clock->mono_ms());
  b->poll();
  ASSERT_TRUE(b->is_leader());
  auto took = obs->poll();
  ASSERT_TRUE(took) << "b took over: a change";
  EXPECT_TRUE(took->has_leader);
  EXPECT_EQ(took->uuid, "uuid-b");
  EXPECT_EQ(took->fence, led->fence + 1);
  EXPECT_EQ(took->status, LeaderStatus::kLeader);
  EXPECT_GT(took->expire_ms, handed->expire_ms) << "the target's renewal moved the expiry";
  EXPECT_TRUE(took->handover_uuid.empty());
  EXPECT_FALSE(obs->poll()) << "b's renewals are the same leadership";
}

// The target's estimate of the server's clock may be behind the old leader's: its
// acceptance still moves the expiry past the hand-over's, or observers would show the
// hand-over as pending while the target leads.
TEST_F(ObserverTest, ATargetWhoseClockEstimateIsBehindStillShowsAsLeading) {
  auto a = make("a");
  auto b = make("b");
  a->poll();
  // b's one clock sample: the server answered at the start of a 400 ms round trip, so
  // b's estimate is 200 ms behind.
  bool slow = true;
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if (slow && op == "server_time_ms" && applied) clock->advance(400);
  });
  b->poll();
  slow = false;
  auto obs = observer();
  ASSERT_TRUE(obs->poll());
  a->transfer("uuid-b");
  EXPECT_EQ(obs->poll()->status, LeaderStatus::kPending);
  // b looks at once (well within the 200 ms): its own now + ttl is before the
  // hand-over's expiry.
  clock->advance(10);
  b->poll();  // not due yet: poll() runs anyway
  ASSERT_TRUE(b->is_leader());
  auto took = obs->poll();
  ASSERT_TRUE(took);
  EXPECT_EQ(took->status, LeaderStatus::kLeader);
  EXPECT_EQ(took->uuid, "uuid-b");
}

// A claim between its two writes (its fence not a token yet) does not lead yet: showing
// it would name a leader that is not one, with a fence no resource may trust. An
// original node's document (no fence at all) leads.
TEST_F(ObserverTest, AClaimWithoutItsTokenYetIsNoLeaderButAnOriginalNodeLeads) {
  auto obs = observer();
  const std::int64_t now = server_now();
  Document doc{{"_id", "svc"},
               {"locked", true},
               {"uuid", "uuid-x"},
               {"host", "host-x"},
               {"pid", std::int64_t{3}},
               {"ts_created", DateTime{now}},
               {"ts_expire", DateTime{now + 5000}},
               {"fence", std::int64_t{1}}};
  storage->put_lock("elector.locks", doc);
  auto s = obs->read();
  EXPECT_EQ(s.status, LeaderStatus::kNone);
  EXPECT_FALSE(s.has_leader);
  doc.erase("fence");
  storage->put_lock("elector.locks", doc);
  s = obs->read();
  EXPECT_EQ(s.status, LeaderStatus::kLeader);
  EXPECT_EQ(s.uuid, "uuid-x");
  EXPECT_EQ(s.fence, 0);
  EXPECT_EQ(s.expire_ms, now + 5000);
}

// The observer's own thread on the testing kit's ManualClock, reads every `interval_s`
// (long: reads are rare, and nothing may wait for one), and elector a on the same backend.
class ObserverThreadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> n{0};
    manual = std::make_shared<ManualClock>(1700000000000, /*settle_timeout_ms=*/5000);
    client = MemoryClient::open("memory://observer-thread-test-" + std::to_string(n++), manual);
    mem = client->storage();
    LeaderObserverOptions oo;
    oo.key = "svc";
    oo.interval_s = 60;
    obs = std::make_unique<LeaderObserver>(mem, oo, [this](const LeaderState& s) {
      std::lock_guard<std::mutex> g(mu);
      seen.emplace_back(manual->mono_ms(), s);
    });
    ElectorOptions eo;
    eo.key = "svc";
    eo.ttl_s = 8;
    a = std::make_unique<Elector>(mem, eo, ElectorCallbacks{}, nullptr,
                                  Identity{"uuid-a", "host-a", 7});
  }
  void TearDown() override {
    obs->stop();
    a->stop();
  }
  std::vector<std::pair<std::int64_t, LeaderState>> reports() {
    std::lock_guard<std::mutex> g(mu);
    return seen;
  }

  std::shared_ptr<ManualClock> manual;
  std::shared_ptr<MemoryClient> client;
  std::shared_ptr<MemoryStorage> mem;
  std::unique_ptr<LeaderObserver> obs;
  std::unique_ptr<Elector> a;
  std::mutex mu;
  std::vector<std::pair<std::int64_t, LeaderState>> seen;  // (mono ms, state)
};

// The leader's lease ends while every read fails: "unknown" is reported at that instant.
TEST_F(ObserverThreadTest, ReportsTheEndOfAnUnseenLeaseOnTimeWhileReadsFail) {
  a->poll();  // leads once; its loop does not run
  ASSERT_TRUE(a->is_leader());
  obs->start();
  ASSERT_TRUE(manual->settle());
  ASSERT_EQ(reports().size(), 1u);
  ASSERT_TRUE(reports()[0].second.has_leader);
  const std::int64_t expiry = mem->read("elector.locks", "svc")->ts_expire->ms;
  mem->set_unavailable(true);  // a stops renewing too: its lease ends
  const std::int64_t lease_left = expiry - manual->wall_ms();
  ASSERT_TRUE(manual->advance(lease_left + 1000));
  obs->stop();
  const auto seen_now = reports();
  ASSERT_EQ(seen_now.size(), 2u) << "the leader whose lease ended is still reported";
  EXPECT_FALSE(seen_now[1].second.has_leader);
  EXPECT_EQ(seen_now[1].second.status, LeaderStatus::kUnknown);
  EXPECT_LE(seen_now[1].first, lease_left) << "reported when the lease ended, not at a read";
  EXPECT_GE(seen_now[1].first, lease_left - 10) << "not before the estimate reaches the end";
}

// Reads working, a long interval: a leader that stops renewing (it crashed) is reported
// gone at its lease's end (the observer reads then), not at the next interval, and not as
// "unknown" (the observer can look).
TEST_F(ObserverThreadTest, ALeaderThatStopsRenewingIsGoneAtItsLeasesEndWhateverTheInterval) {
  a->poll();  // leads once and never renews: its loop does not run
  obs->start();
  ASSERT_TRUE(manual->settle());
  const std::int64_t lease_left =
      mem->read("elector.locks", "svc")->ts_expire->ms - manual->wall_ms();
  ASSERT_TRUE(manual->advance(lease_left + 1000));
  const auto seen_now = reports();
  ASSERT_EQ(seen_now.size(), 2u);
  EXPECT_EQ(seen_now[0].second.status, LeaderStatus::kLeader);
  EXPECT_EQ(seen_now[1].second.status, LeaderStatus::kNone);
  EXPECT_LE(seen_now[1].first, lease_left) << "at the lease's end, not 60 s later";
  EXPECT_GE(seen_now[1].first, lease_left - 10);
}

// With reads working, a long interval never turns a renewed lease into "unknown": the
// observer reads once shortly before the lease it knows ends.
TEST_F(ObserverThreadTest, ALongIntervalDoesNotFlapWhileTheLeaderRenews) {
  a->start();
  ASSERT_TRUE(manual->settle());
  ASSERT_TRUE(a->is_leader());
  obs->start();
  ASSERT_TRUE(manual->advance(120000));
  const auto seen_now = reports();
  ASSERT_EQ(seen_now.size(), 1u) << "one leadership, reported once";
  EXPECT_EQ(seen_now[0].second.status, LeaderStatus::kLeader);
}

}  // namespace
