// Loss derived from the deadline: a keep-alive lease or a semaphore lease is lost once its
// holder's monotonic clock passes the renew deadline, whatever the library's threads are
// doing: another lease's on_lost that blocks, or a fork()ed child that has none of them.
// User callbacks run where a slow one delays nobody else's loss (callback_dispatcher.h).
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "lease/lease.h"
#include "semaphore/semaphore.h"
#include "storage/memory_storage.h"
#include "testing/manual_clock.h"

using namespace mongoelector;
using namespace std::chrono_literals;

namespace {

std::string fresh_uri() {
  static std::atomic<int> n{0};
  return "memory://loss-test-" + std::to_string(n++);
}

// Waits, in real time, until `done` holds (a callback on another thread).
template <class F>
bool eventually(F&& done, std::chrono::milliseconds within = 5s) {
  const auto until = std::chrono::steady_clock::now() + within;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// An on_lost that blocks until the test lets it go: the "slow user callback".
struct Blocker {
  std::promise<void> entered;
  std::promise<void> go;
  std::shared_future<void> gone = go.get_future().share();
  std::atomic<int> calls{0};
  std::function<void()> callback() {
    return [this] {
      if (calls++ == 0) entered.set_value();
      gone.wait();
    };
  }
};

class LossTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A thread blocked in a callback cannot settle: advance() gives up on it after this.
    clock = std::make_shared<ManualClock>(1700000000000, /*settle_timeout_ms=*/300);
    client = MemoryClient::open(fresh_uri(), clock);
    storage = client->storage();
  }
  std::shared_ptr<Locker> locker(const std::string& key, double ttl_s) {
    LockerOptions o;
    o.key = key;
    o.ttl_s = ttl_s;
    return std::make_shared<Locker>(storage, o);
  }
  std::shared_ptr<Semaphore> semaphore(const std::string& key, double ttl_s) {
    SemaphoreOptions o;
    o.key = key;
    o.limit = 1;
    o.ttl_s = ttl_s;
    return std::make_shared<Semaphore>(storage, o);
  }
  static KeepAliveOptions options(std::function<void()> on_lost) {
    KeepAliveOptions o;
    o.blocking = false;
    o.on_lost = std::move(on_lost);
    return o;
  }

  std::shared_ptr<ManualClock> clock;
  std::shared_ptr<MemoryClient> client;
  std::shared_ptr<MemoryStorage> storage;
};

// The leases A and B reach their renew deadline at the same instant; A's on_lost blocks.
// B must read lost at that instant, and B's own on_lost must not wait for A's.
template <class Lease>
void lost_at_its_deadline_while_another_callback_blocks(ManualClock& clock, MemoryStorage& storage,
                                                        Lease& a, Lease& b, Blocker& blocker,
                                                        std::atomic<int>& b_calls) {
  ASSERT_EQ(a.renew_deadline_mono(), b.renew_deadline_mono()) << "one instant for both";
  const std::int64_t deadline = b.renew_deadline_mono();
  storage.set_unavailable(true);  // no renewal succeeds: both reach their deadline
  std::thread mover([&] { clock.advance(deadline - clock.mono_ms()); });
  const bool entered = blocker.entered.get_future().wait_for(10s) == std::future_status::ready;
  EXPECT_TRUE(entered) << "A's on_lost never ran";
  EXPECT_GE(clock.mono_ms(), deadline);
  EXPECT_TRUE(b.lost())
      << "B still reads held after its renew deadline, because A's on_lost blocks";
  EXPECT_TRUE(b.wait_lost(0));
  EXPECT_TRUE(eventually([&] { return b_calls.load() == 1; })) << "B's on_lost waits behind A's";
  blocker.go.set_value();
  mover.join();
  storage.set_unavailable(false);
  EXPECT_TRUE(a.lost());
  EXPECT_EQ(blocker.calls.load(), 1);
  EXPECT_EQ(b_calls.load(), 1) << "on_lost runs once";
}

TEST_F(LossTest, KeepAliveLeaseIsLostAtItsDeadlineWhileAnotherLeasesOnLostBlocks) {
  Blocker blocker;
  std::atomic<int> b_calls{0};
  auto a = KeepAliveLease::acquire(locker("a", 10), options(blocker.callback()));
  auto b = KeepAliveLease::acquire(locker("b", 10), options([&] { ++b_calls; }));
  lost_at_its_deadline_while_another_callback_blocks(*clock, *storage, *a, *b, blocker, b_calls);
  a->close();
  b->close();
}

TEST_F(LossTest, SemaphoreLeaseIsLostAtItsDeadlineWhileAnotherLeasesOnLostBlocks) {
  Blocker blocker;
  std::atomic<int> b_calls{0};
  auto a = SemaphoreLease::acquire(semaphore("a", 10), options(blocker.callback()));
  auto b = SemaphoreLease::acquire(semaphore("b", 10), options([&] { ++b_calls; }));
  lost_at_its_deadline_while_another_callback_blocks(*clock, *storage, *a, *b, blocker, b_calls);
  a->close();
  b->close();
}

TEST_F(LossTest, LostReadsTheClockNotTheTimer) {
  // wait_lost on another thread wakes at the deadline by itself, and lost() turns true at
  // that instant for every reader (the announcement follows).
  auto lease = KeepAliveLease::acquire(locker("a", 10), options({}));
  const std::int64_t deadline = lease->renew_deadline_mono();
  storage->set_unavailable(true);
  const std::size_t waiting = clock->waiters();
  std::atomic<std::int64_t> woke_at{-1};
  std::thread waiter([&] {
    if (lease->wait_lost(std::nullopt)) woke_at = clock->mono_ms();
  });
  ASSERT_TRUE(clock->block_until_waiters(waiting + 1, 5000));
  EXPECT_TRUE(clock->advance(deadline - 1 - clock->mono_ms()));
  EXPECT_FALSE(lease->lost());
  EXPECT_EQ(woke_at.load(), -1);
  EXPECT_TRUE(clock->advance(1));
  EXPECT_TRUE(lease->lost());
  waiter.join();
  EXPECT_EQ(woke_at.load(), deadline);
  storage->set_unavailable(false);
  lease->close();
  EXPECT_TRUE(lease->lost()) << "loss is final";
}

// Real time: the system clock, the process-wide renewer, timer and dispatcher.
std::shared_ptr<MemoryStorage> real_time_storage() {
  auto storage = std::make_shared<MemoryStorage>();
  storage->set_server_time_source([] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  });
  return storage;
}

// A fork()ed child has none of the parent's threads: no renewal, no timer task. The
// lease it inherited must still read lost once its renew deadline passes, and wait_lost
// must wake there by itself. The child's verdict comes back as its exit status.
template <class Lease>
void child_sees_the_inherited_lease_lost(Lease& lease) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int code = 0;
    if (lease.lost())
      code = 2;  // lost at once: not a test of the deadline
    else if (!lease.wait_lost(5000))
      code = 3;  // never lost: the timer's flag is gone
    else if (!lease.lost())
      code = 4;
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "2: lost at once, 3: the child never saw its inherited lease lost, 4: lost went back";
  EXPECT_FALSE(lease.lost()) << "the parent keeps renewing";
}

TEST(LossFork, ChildSeesAnInheritedKeepAliveLeaseLostAfterItsDeadline) {
  auto storage = real_time_storage();
  LockerOptions o;
  o.key = "fork";
  o.ttl_s = 0.5;
  auto lease = KeepAliveLease::acquire(std::make_shared<Locker>(storage, o), KeepAliveOptions{});
  child_sees_the_inherited_lease_lost(*lease);
  lease->close();
}

TEST(LossFork, ChildSeesAnInheritedSemaphoreLeaseLostAfterItsDeadline) {
  auto storage = real_time_storage();
  SemaphoreOptions o;
  o.key = "fork";
  o.limit = 2;
  o.ttl_s = 0.5;
  auto lease = SemaphoreLease::acquire(std::make_shared<Semaphore>(storage, o), KeepAliveOptions{});
  child_sees_the_inherited_lease_lost(*lease);
  lease->close();
}

}  // namespace

// CPython ends a thread that waits for the GIL at interpreter exit with pthread_exit: an
// on_lost written in Python can be cancelled that way. The cancellation must unwind
// through the library (a catch that swallows it makes glibc abort the process), and the
// lease must still close.
TEST_F(LossTest, AnOnLostEndedByThreadCancellationUnwindsAndTheLeaseCloses) {
#if defined(__SANITIZE_ADDRESS__)
  // Under AddressSanitizer the forked child exits 1 without a report once pthread_exit
  // unwinds the callback thread; not understood yet, so the plain build checks it.
  GTEST_SKIP() << "thread cancellation under AddressSanitizer: checked by the plain build";
#endif
  EXPECT_EXIT(
      {
        std::atomic<bool> entered{false};
        auto lease = KeepAliveLease::acquire(locker("cancelled", 10), options([&] {
                                               entered = true;
                                               pthread_exit(nullptr);
                                             }));
        storage->set_unavailable(true);
        clock->advance(lease->renew_deadline_mono() - clock->mono_ms());
        if (!eventually([&] { return entered.load(); })) std::_Exit(2);
        if (!lease->lost()) std::_Exit(3);
        lease->close();
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}
