// Batched renewal (core/lease/keepalive.h): the leases of one client are renewed together
// in Storage::renew_many, yet each keeps its own outcome and deadline. On a FakeClock
// and MemoryStorage (one renew_many = one round trip there):
//  * a thousand leases cost about one command per renew interval, none lost;
//  * a batch in which some keys were stolen, released, expired or re-fenced renews
//    exactly the others and reports those lost;
//  * a batch that hangs at the server: every lease in it is lost at ITS deadline;
//  * mixed ttls in one client;
//  * the clock sample is shared: one `hello` for many lockers.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fixtures.h"
#include "lease/keepalive.h"
#include "lease/lease.h"
#include "renewer_steps.h"
#include "server_clock.h"

using namespace mongoelector;
using mongoelector::testing::CoreTest;

namespace {

class BatchedRenewalTest : public CoreTest {
 protected:
  void SetUp() override {
    CoreTest::SetUp();
    // As a real client's storages: one board of server-time samples for all lockers.
    storage->set_clock_sample_board(std::make_shared<ClockSampleBoard>());
    renewer = std::make_unique<Renewer>(clock, 0);  // steps run by run_due()
  }
  void TearDown() override {
    leases.clear();
    renewer.reset();
  }

  // Acquires `key` with a lease; `lost` counts its on_lost calls.
  KeepAliveLease& hold(const std::string& key, double ttl_s = 15) {
    auto l = std::shared_ptr<Locker>(make_locker("me-" + key, ttl_s, key));
    KeepAliveOptions o;
    o.blocking = false;
    o.on_lost = [this, key] { lost_keys.push_back(key); };
    leases.push_back(KeepAliveLease::acquire(l, o, renewer.get()));
    return *leases.back();
  }
  void step(std::int64_t limit = INT64_MAX) {
    mongoelector::testing::step_renewer(*clock, *renewer, limit);
  }
  void run_for(std::int64_t ms) { mongoelector::testing::run_renewer_for(*clock, *renewer, ms); }
  std::unique_ptr<Locker> thief(const std::string& key) { return make_locker("thief", 15, key); }

  std::unique_ptr<Renewer> renewer;
  std::vector<std::unique_ptr<KeepAliveLease>> leases;
  std::vector<std::string> lost_keys;
};

TEST_F(BatchedRenewalTest, AThousandLeasesCostAboutOneCommandPerRenewInterval) {
  // Acquired over 4 s (spread across most of the 5 s interval), as a real process would.
  for (int i = 0; i < 1000; ++i) {
    hold("k" + std::to_string(i));
    clock->advance(4);
  }
  run_for(15000);  // the first round aligns them
  const std::int64_t rt = storage->round_trips();
  const std::uint64_t batches = renewer->batches_sent();
  run_for(60000);  // 12 renew intervals of 5 s
  const std::int64_t commands = storage->round_trips() - rt;
  EXPECT_LE(commands, 2 * 12) << "about one batch per interval, not 1000 renewals";
  EXPECT_GE(commands, 11) << "still renewing";
  EXPECT_GE(renewer->batched_renewals(), 12u * 1000u);
  EXPECT_LE(renewer->batches_sent() - batches, 24u);
  EXPECT_TRUE(lost_keys.empty());
  for (auto& l : leases) {
    ASSERT_FALSE(l->lost());
    EXPECT_GT(l->renew_deadline_mono(), clock->mono_ms()) << l->locker()->key();
  }
}

TEST_F(BatchedRenewalTest, APartialBatchRenewsExactlyTheHoldsStillOurs) {
  const std::vector<std::string> keys = {"ok1", "stolen", "released", "expired", "refenced", "ok2"};
  for (const auto& k : keys) hold(k, 6);
  std::map<std::string, KeepAliveLease*> by_key;
  for (auto& l : leases) by_key[l->locker()->key()] = l.get();
  std::map<std::string, std::int64_t> deadline;
  for (auto& [k, l] : by_key) deadline[k] = l->renew_deadline_mono();

  // Behind the leases' backs, between two renewals:
  auto t = thief("stolen");
  ASSERT_TRUE(t->try_acquire(/*force=*/true).has_value());
  const std::int64_t now = storage->server_time_ms();
  ASSERT_TRUE(storage->release("mongolocker", "released", std::string("uuid-me-released"),
                               by_key["released"]->fence(), now, false));
  // ts_expire pushed back to now: expired at the server, still naming our uuid and fence.
  ASSERT_TRUE(storage->set_expiry("mongolocker", "expired", "uuid-me-expired",
                                  by_key["expired"]->fence(), now - 1, now, 0));
  ASSERT_TRUE(storage->set_fence(
      "mongolocker", "refenced", "uuid-me-refenced", by_key["refenced"]->fence(),
      storage->read("mongolocker", "refenced")->ts_created->ms, by_key["refenced"]->fence() + 7));

  const std::int64_t rt = storage->round_trips();
  step();  // one batch carries all six
  EXPECT_EQ(storage->round_trips() - rt, 1) << "one renew_many for six leases";
  clock->advance(0);  // the timer thread announces the losses
  for (const auto& k : {"ok1", "ok2"}) {
    EXPECT_FALSE(by_key[k]->lost()) << k;
    EXPECT_GT(by_key[k]->renew_deadline_mono(), deadline[k]) << k << ": deadline moved";
  }
  for (const auto& k : {"stolen", "released", "expired", "refenced"}) {
    EXPECT_TRUE(by_key[k]->lost()) << k << " must be reported lost, not silently kept";
    EXPECT_EQ(by_key[k]->renew_deadline_mono(), deadline[k]) << k << ": never extended";
  }
  std::sort(lost_keys.begin(), lost_keys.end());
  EXPECT_EQ(lost_keys, (std::vector<std::string>{"expired", "refenced", "released", "stolen"}));
  // The thief's hold is untouched; the survivors are still held by us at the server.
  auto d = storage->read("mongolocker", "stolen");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->uuid, "uuid-thief");
  EXPECT_TRUE(d->held_at(storage->server_time_ms()));
  for (const auto& k : {"ok1", "ok2"}) {
    auto o = storage->read("mongolocker", k);
    ASSERT_TRUE(o.has_value());
    EXPECT_EQ(o->uuid, std::string("uuid-me-") + k);
    EXPECT_EQ(o->ts_expire->ms, storage->server_time_ms() + 6000);
  }
  run_for(30000);  // survivors keep going, the lost stay lost
  EXPECT_FALSE(by_key["ok1"]->lost());
  EXPECT_FALSE(by_key["ok2"]->lost());
  EXPECT_EQ(lost_keys.size(), 4u);
}

TEST_F(BatchedRenewalTest, AHungBatchLosesEachLeaseAtItsOwnDeadline) {
  // Three leases whose deadlines differ: acquired 300 ms apart.
  hold("a", 6);
  clock->advance(300);
  hold("b", 6);
  clock->advance(300);
  hold("c", 6);
  std::vector<std::int64_t> deadlines;
  for (auto& l : leases) deadlines.push_back(l->renew_deadline_mono());
  ASSERT_LT(deadlines[0], deadlines[1]);
  ASSERT_LT(deadlines[1], deadlines[2]);

  std::mutex m;
  std::condition_variable cv;
  bool entered = false, go = false;
  int batched_calls = 0;
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if (op != "renew_many" || applied) return;
    std::unique_lock<std::mutex> lk(m);
    ++batched_calls;
    entered = true;
    cv.notify_all();
    cv.wait(lk, [&] { return go; });
  });
  clock->advance(*renewer->next_due() - clock->mono_ms());  // a's renewal is due: all join
  std::thread renewing([&] { renewer->run_due(); });
  {
    std::unique_lock<std::mutex> lk(m);
    cv.wait(lk, [&] { return entered; });
  }
  // The server is frozen with the batch in flight. Each lease is lost exactly at its own
  // deadline: not before, not later.
  for (std::size_t i = 0; i < 3; ++i) {
    clock->advance(deadlines[i] - 1 - clock->mono_ms());
    for (std::size_t j = i; j < 3; ++j)
      EXPECT_FALSE(leases[j]->lost()) << j << " before its deadline";
    clock->advance(1);
    EXPECT_TRUE(leases[i]->lost()) << i << " at its deadline";
    for (std::size_t j = i + 1; j < 3; ++j) EXPECT_FALSE(leases[j]->lost()) << j;
  }
  {
    std::lock_guard<std::mutex> lk(m);
    go = true;  // the batch lands late...
  }
  cv.notify_all();
  renewing.join();
  storage->set_fault_hook({});
  EXPECT_EQ(batched_calls, 1) << "one batch carried the three";
  run_for(1000);
  // ...and brings none back: the holds are released, fenced.
  for (auto& l : leases) {
    EXPECT_TRUE(l->lost());
    auto d = storage->read("mongolocker", l->locker()->key());
    ASSERT_TRUE(d.has_value());
    EXPECT_FALSE(d->locked) << l->locker()->key();
  }
  EXPECT_EQ(lost_keys.size(), 3u);
}

TEST_F(BatchedRenewalTest, MixedTtlsInOneClient) {
  for (int i = 0; i < 20; ++i) {
    hold("short" + std::to_string(i), 3);
    hold("long" + std::to_string(i), 15);
    clock->advance(37);
  }
  std::map<std::string, std::int64_t> last_deadline;
  const std::int64_t rt = storage->round_trips();
  const std::int64_t end = clock->mono_ms() + 60000;
  while (clock->mono_ms() < end) {
    step(end);
    for (auto& l : leases) {
      ASSERT_FALSE(l->lost()) << l->locker()->key();
      const std::int64_t dl = l->renew_deadline_mono();
      ASSERT_GT(dl, clock->mono_ms()) << l->locker()->key() << " renewed before its deadline";
      auto& last = last_deadline[l->locker()->key()];
      ASSERT_GE(dl, last);
      last = dl;
    }
  }
  // The 3 s leases set the pace (a batch per second); the 15 s ones ride along.
  EXPECT_LE(storage->round_trips() - rt, 2 * 60 + 10);
  EXPECT_TRUE(lost_keys.empty());
  // Each kept its own ttl at the server.
  const std::int64_t now = storage->server_time_ms();
  auto s = storage->read("mongolocker", "short3");
  auto l = storage->read("mongolocker", "long3");
  ASSERT_TRUE(s && l);
  EXPECT_LE(s->ts_expire->ms, now + 3000);
  EXPECT_GT(l->ts_expire->ms, now + 3000);
}

TEST_F(BatchedRenewalTest, ABatchThatFailsAsAWholeExtendsNothing) {
  hold("a", 6);
  hold("b", 6);
  std::vector<std::int64_t> before;
  for (auto& l : leases) before.push_back(l->renew_deadline_mono());
  storage->set_unavailable(true);
  step();
  for (std::size_t i = 0; i < leases.size(); ++i) {
    EXPECT_EQ(leases[i]->renew_deadline_mono(), before[i]);
    EXPECT_FALSE(leases[i]->lost()) << "a failed call is retried until the deadline";
  }
  storage->set_unavailable(false);
  step();
  for (std::size_t i = 0; i < leases.size(); ++i)
    EXPECT_GT(leases[i]->renew_deadline_mono(), before[i]);
}

TEST_F(BatchedRenewalTest, LockersOfOneClientShareOneClockSample) {
  auto board = std::make_shared<ClockSampleBoard>();
  storage->set_clock_sample_board(board);
  std::vector<std::unique_ptr<Locker>> lockers;
  for (int i = 0; i < 50; ++i)
    lockers.push_back(make_locker("s" + std::to_string(i), 15, "s" + std::to_string(i)));
  const std::int64_t rt = storage->round_trips();
  for (auto& l : lockers) l->refresh_clock();
  EXPECT_EQ(storage->round_trips() - rt, 1) << "one hello for fifty lockers";
  clock->advance(31000);  // older than half the refresh period: sampled again, once
  for (auto& l : lockers) l->refresh_clock();
  EXPECT_EQ(storage->round_trips() - rt, 2);
  // The shared sample still detects a jump of the server's clock, for every locker.
  clock->advance(31000);
  server_skew_ms += 60000;
  int jumps = 0;
  for (auto& l : lockers) jumps += l->refresh_clock() ? 1 : 0;
  EXPECT_EQ(jumps, 50);
}

// A batch's members are begun, sent and finished (and so logged) in the order they were
// registered, never in that of their addresses, which changes from run to run: the
// simulation's traces must repeat.
class OrderedRenewable : public Renewable {
 public:
  OrderedRenewable(std::string name, std::string collection, Storage* storage,
                   std::vector<std::string>* begun, std::vector<std::string>* finished)
      : name_(std::move(name)),
        collection_(std::move(collection)),
        storage_(storage),
        begun_(begun),
        finished_(finished) {
    ticket_.request.key = name_;
    ticket_.request.uuid = "uuid-" + name_;
    ticket_.request.expire_ms = 1000;
  }
  std::optional<std::int64_t> renew_step() override { return std::nullopt; }
  const void* batch_domain() const override { return storage_; }
  BatchStart begin_batched(std::int64_t /*sent*/) override {
    begun_->push_back(name_);
    return BatchStart{&ticket_, collection_, storage_, std::nullopt};
  }
  std::optional<std::int64_t> finish_batched(bool /*renewed*/, const char* /*error*/) override {
    finished_->push_back(name_);
    return std::nullopt;
  }

 private:
  std::string name_, collection_;
  Storage* storage_;
  std::vector<std::string>* begun_;
  std::vector<std::string>* finished_;
  RenewTicket ticket_;
};

TEST_F(BatchedRenewalTest, ABatchRunsInRegistrationOrderNotAddressOrder) {
  // Allocated in one order, registered in another (a fixed shuffle).
  constexpr int kN = 24;
  std::vector<std::string> begun, finished;
  std::vector<std::shared_ptr<OrderedRenewable>> all;
  for (int i = 0; i < kN; ++i)
    all.push_back(std::make_shared<OrderedRenewable>("r" + std::to_string(i),
                                                     i % 3 == 0 ? "other" : "mongolocker",
                                                     storage.get(), &begun, &finished));
  std::vector<std::string> registered, sent_locks, sent_other;
  for (int j = 0; j < kN; ++j) {
    const int i = (j * 7 + 5) % kN;  // 7 is prime to 24: a permutation
    renewer->add(all[static_cast<std::size_t>(i)], clock->mono_ms() + 100);
    registered.push_back("r" + std::to_string(i));
    (i % 3 == 0 ? sent_other : sent_locks).push_back(registered.back());
  }
  clock->advance(100);
  ASSERT_EQ(renewer->run_due(), kN);
  EXPECT_EQ(renewer->batches_sent(), 2u) << "one call per collection";
  EXPECT_EQ(begun, registered);
  // Sent (and finished) by collection, each in registration order.
  std::vector<std::string> expected = sent_locks;
  expected.insert(expected.end(), sent_other.begin(), sent_other.end());
  EXPECT_EQ(finished, expected);
}

}  // namespace
