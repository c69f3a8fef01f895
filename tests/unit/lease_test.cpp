// Keep-alive leases (core/lease) on a FakeClock and MemoryStorage: renewal schedule,
// loss at the renew deadline (storage down, renewal hung), loss when the lock is taken,
// no resurrection after loss, release on close, and flat threads with many leases.
#include <dirent.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "exceptions.h"
#include "fixtures.h"
#include "lease/keepalive.h"
#include "lease/lease.h"

using namespace mongoelector;
using mongoelector::testing::CoreTest;

namespace {

int count_threads() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') ++n;
    }
    closedir(d);
  }
  return n;
}

}  // namespace

class LeaseTest : public CoreTest {
 protected:
  void SetUp() override {
    CoreTest::SetUp();
    renewer = std::make_unique<Renewer>(clock, 0);  // steps run by run_due()
  }
  void TearDown() override { renewer.reset(); }

  std::shared_ptr<Locker> locker(const std::string& name, double ttl_s = 6) {
    return std::shared_ptr<Locker>(make_locker(name, ttl_s));
  }
  std::unique_ptr<KeepAliveLease> hold(const std::shared_ptr<Locker>& l,
                                       std::function<void()> on_lost = {}) {
    KeepAliveOptions o;
    o.blocking = false;
    o.on_lost = std::move(on_lost);
    return KeepAliveLease::acquire(l, o, renewer.get());
  }
  // Moves the fake time to the next renewal (not past `limit`) and runs what is due.
  void step(std::int64_t limit = INT64_MAX) {
    auto due = renewer->next_due();
    std::int64_t to = due ? std::min(*due, limit) : limit;
    if (to > clock->mono_ms()) clock->advance(to - clock->mono_ms());
    renewer->run_due();
  }
  std::optional<LockDoc> doc() { return storage->read("mongolocker", "k"); }

  std::unique_ptr<Renewer> renewer;
};

TEST_F(LeaseTest, RenewsEveryThirdOfTheTtlAndMovesItsDeadline) {
  auto a = locker("a", 6);
  auto lease = hold(a);
  const std::int64_t start = a->hold()->lease_start_mono;
  EXPECT_EQ(*renewer->next_due(), start + 2000);
  const std::int64_t d1 = lease->renew_deadline_mono();
  EXPECT_LE(d1, start + 6000 - 600) << "margin of at least ttl/10";
  step();
  EXPECT_EQ(lease->renew_deadline_mono(), d1 + 2000);
  EXPECT_EQ(*renewer->next_due(), start + 4000);
}

TEST_F(LeaseTest, SurvivesTenTtlWithTheHolderIdle) {
  auto a = locker("a", 3);
  auto b = locker("b", 3);
  int lost_calls = 0;
  auto lease = hold(a, [&] { ++lost_calls; });
  const std::int64_t fence = lease->fence();
  const std::int64_t end = clock->mono_ms() + 10 * 3000;
  while (clock->mono_ms() < end) step(end);
  EXPECT_FALSE(lease->lost());
  EXPECT_EQ(lost_calls, 0);
  EXPECT_EQ(lease->fence(), fence);
  EXPECT_EQ(a->fence(), fence);
  EXPECT_TRUE(a->owned());
  EXPECT_FALSE(b->try_acquire().has_value()) << "nobody else may take a kept-alive lock";
}

TEST_F(LeaseTest, LossAtTheDeadlineWhenTheStorageIsDown) {
  auto a = locker("a", 6);
  auto b = locker("b", 6);
  std::vector<std::int64_t> lost_at;
  auto lease = hold(a, [&] { lost_at.push_back(clock->mono_ms()); });
  const std::int64_t lease_start = a->hold()->lease_start_mono;
  const std::int64_t deadline = lease->renew_deadline_mono();

  storage->set_unavailable(true);
  std::int64_t last_try = 0;
  while (clock->mono_ms() < deadline - 1) {
    const std::int64_t rt = storage->round_trips();
    step(deadline - 1);
    if (storage->round_trips() > rt) last_try = clock->mono_ms();
    ASSERT_FALSE(lease->lost()) << "lost before its deadline";
  }
  EXPECT_GE(last_try + 300, deadline) << "retries every min(ttl/20, 250 ms) up to the deadline";
  clock->advance(deadline - clock->mono_ms());
  EXPECT_TRUE(lease->lost()) << "lost at the deadline, whatever the renewer does";
  ASSERT_EQ(lost_at.size(), 1u);
  EXPECT_EQ(lost_at[0], deadline);
  EXPECT_LT(lost_at[0], lease_start + 6000) << "before anyone can take the lock";
  EXPECT_TRUE(lease->wait_lost(std::nullopt));
  EXPECT_FALSE(lease->lost_reason().empty());

  // The server answers again: the lost hold is released (fenced), not taken back, and
  // not before its lease end (the holder's own step-down may still be under way).
  storage->set_unavailable(false);
  const std::int64_t lease_end = lease_start + 6000;
  while (renewer->next_due() && clock->mono_ms() < lease_end) {
    step();
    ASSERT_TRUE(a->has_stranded() || clock->mono_ms() >= lease_end)
        << "released before the lease end";
  }
  EXPECT_EQ(clock->mono_ms(), lease_end);
  EXPECT_TRUE(lease->lost()) << "loss is final";
  EXPECT_FALSE(a->has_stranded());
  EXPECT_FALSE(renewer->next_due().has_value()) << "nothing left to renew";
  auto tb = b->try_acquire();
  ASSERT_TRUE(tb.has_value());
  EXPECT_GT(*tb, lease->fence());
  EXPECT_EQ(lost_at.size(), 1u) << "on_lost runs once";
}

TEST_F(LeaseTest, LossAtTheDeadlineWhileARenewalHangs) {
  auto a = locker("a", 6);
  std::atomic<int> lost_calls{0};
  auto lease = hold(a, [&] { ++lost_calls; });
  const std::int64_t deadline = lease->renew_deadline_mono();
  const std::int64_t fence = lease->fence();

  std::mutex m;
  std::condition_variable cv;
  bool entered = false, go = false;
  storage->set_fault_hook([&](const std::string& op, bool applied) {
    if (op != "renew" || applied) return;
    std::unique_lock<std::mutex> lk(m);
    entered = true;
    cv.notify_all();
    cv.wait(lk, [&] { return go; });
  });
  clock->advance(*renewer->next_due() - clock->mono_ms());
  std::thread renewing([&] { renewer->run_due(); });
  {
    std::unique_lock<std::mutex> lk(m);
    cv.wait(lk, [&] { return entered; });
  }
  EXPECT_FALSE(lease->lost());
  clock->advance(deadline - clock->mono_ms());  // the renewal is still hanging
  EXPECT_TRUE(lease->lost());
  EXPECT_EQ(lost_calls.load(), 1);
  {
    std::lock_guard<std::mutex> lk(m);
    go = true;  // the late renewal lands at the server now...
  }
  cv.notify_all();
  renewing.join();
  storage->set_fault_hook({});
  renewer->run_due();
  // ...and does not bring the lease back: its hold is released, fenced, from the lease
  // end on.
  EXPECT_TRUE(lease->lost());
  EXPECT_TRUE(doc()->locked) << "released before the lease end";
  step();
  auto d = doc();
  ASSERT_TRUE(d.has_value());
  EXPECT_FALSE(d->locked);
  EXPECT_EQ(d->fence, fence);
  EXPECT_EQ(a->fence(), 0);
  EXPECT_EQ(lost_calls.load(), 1);
}

TEST_F(LeaseTest, LossWhenTheLockIsTaken) {
  auto a = locker("a", 6);
  auto b = locker("b", 6);
  std::vector<std::thread::id> lost_on;
  auto lease = hold(a, [&] { lost_on.push_back(std::this_thread::get_id()); });
  auto tb = b->try_acquire(/*force=*/true);
  ASSERT_TRUE(tb.has_value());
  step();  // the renewal finds the lock taken...
  EXPECT_TRUE(lost_on.empty()) << "announced on the timer's thread, not the renewer's";
  clock->advance(0);  // ...and the timer announces it at once
  EXPECT_TRUE(lease->lost());
  ASSERT_EQ(lost_on.size(), 1u);
  step();
  lease->close();
  auto d = doc();
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->locked) << "b's hold is untouched";
  EXPECT_EQ(d->uuid, "uuid-b");
  EXPECT_EQ(d->fence, *tb);
}

TEST_F(LeaseTest, CloseReleasesAndStopsRenewing) {
  auto a = locker("a", 6);
  auto b = locker("b", 6);
  auto lease = hold(a);
  step();
  lease->close();
  lease->close();  // idempotent
  EXPECT_FALSE(lease->lost());
  EXPECT_FALSE(renewer->next_due().has_value());
  auto d = doc();
  ASSERT_TRUE(d.has_value());
  EXPECT_FALSE(d->locked);
  EXPECT_TRUE(b->try_acquire().has_value());
  // Past the old deadline nothing fires.
  clock->advance(10000);
  EXPECT_FALSE(lease->lost());
}

TEST_F(LeaseTest, NonBlockingAcquireOfAHeldLockFails) {
  auto a = locker("a", 6);
  auto b = locker("b", 6);
  auto la = hold(a);
  EXPECT_THROW(hold(b), LockExists);
  KeepAliveOptions o;
  o.timeout_s = 1.0;
  EXPECT_THROW(KeepAliveLease::acquire(b, o, renewer.get()), AcquireTimeout);
  EXPECT_EQ(renewer->size(), 1u);
}

TEST_F(LeaseTest, KeepingAliveNeedsAHold) {
  auto a = locker("a", 6);
  EXPECT_THROW(KeepAliveLease(a, {}, renewer.get()), InvalidArgument);
  Renewer other(std::make_shared<FakeClock>(), 0);
  a->try_acquire();
  EXPECT_THROW(KeepAliveLease(a, {}, &other), InvalidArgument) << "clocks must match";
}

TEST_F(LeaseTest, WaitLostTimesOut) {
  auto a = locker("a", 6);
  auto lease = hold(a);
  EXPECT_FALSE(lease->wait_lost(0));
  EXPECT_FALSE(lease->wait_lost(100));
  EXPECT_FALSE(lease->lost());
}

// Real threads and time: 200 leases on the process-wide renewer add no thread.
TEST(LeaseThreads, ThreadsStayFlatWith200Leases) {
  auto storage = std::make_shared<MemoryStorage>();
  storage->set_server_time_source([] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  });
  std::vector<std::shared_ptr<Locker>> lockers;
  std::vector<std::unique_ptr<KeepAliveLease>> leases;
  auto add = [&](int i) {
    LockerOptions o;
    o.key = "k" + std::to_string(i);
    o.ttl_s = 0.6;
    lockers.push_back(std::make_shared<Locker>(storage, o));
    KeepAliveOptions ko;
    ko.blocking = false;
    leases.push_back(KeepAliveLease::acquire(lockers.back(), ko));
  };
  add(0);  // starts the renewer and timer threads
  const int before = count_threads();
  for (int i = 1; i < 200; ++i) add(i);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // ~2.5 ttl of renewals
  const int after = count_threads();
  EXPECT_EQ(after, before) << "threads grew with leases";
  EXPECT_LE(before, 1 + Renewer::kSystemThreads + 1 + 2) << "main + renewers + timer (+ gtest)";
  int lost = 0;
  for (auto& l : leases) lost += l->lost() ? 1 : 0;
  EXPECT_EQ(lost, 0);
  for (auto& l : leases) l->close();
  for (int i = 0; i < 200; ++i) {
    auto d = storage->read("mongolocker", "k" + std::to_string(i));
    ASSERT_TRUE(d.has_value());
    EXPECT_FALSE(d->locked);
  }
}
