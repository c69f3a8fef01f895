// The SQLite counterpart of the step-down scenario of elector_it.cpp: a SQLite "server"
// cannot be killed or frozen, but another process can take the database's write lock
// and freeze while holding it (SIGSTOP, or a process stuck on a slow disk). Every write
// of the leader then waits its busy timeout and fails: on_leader_loss must fire before
// the lease could expire, as with a frozen MongoDB server.
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>

#include "election/elector.h"
#include "harness.h"
#include "storage/sqlite_storage.h"

using namespace mongoelector;

namespace {

TEST(SqliteElectorIT, LeaderStepsDownBeforeLeaseExpiryWhenTheDatabaseStaysLocked) {
  SKIP_WITHOUT_SERVER();
  if (!it::sqlite_backend())
    GTEST_SKIP() << "SQLite-specific (MONGOELECTOR_TEST_URI=sqlite:///...)";
  const double ttl = 3.0;
  const std::string db = it::unique_db("locked");
  auto store = it::storage(it::test_uri(), db, op_timeout_ms_for_ttl(ttl));
  std::mutex mu;
  std::int64_t loss_at = 0, lease_end_at_loss = 0;
  std::atomic<int> leads{0};
  std::shared_ptr<Elector> e;
  ElectorCallbacks cb;
  cb.on_leader = [&] { ++leads; };
  cb.on_leader_loss = [&] {
    std::lock_guard<std::mutex> g(mu);
    loss_at = it::mono_ms();
    lease_end_at_loss = e->locker().lease_deadline_mono().value_or(0);
  };
  ElectorOptions o;
  o.key = "svc";
  o.ttl_s = ttl;
  e = std::make_shared<Elector>(store, o, cb, system_clock());
  e->start();
  for (int i = 0; i < 100 && !e->is_leader(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(e->is_leader());
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // a few renewals
  {
    std::lock_guard<std::mutex> g(mu);
    ASSERT_EQ(loss_at, 0) << "a healthy leader must keep leading across renewals";
  }
  // Another process takes the write lock and freezes with it.
  const std::string path = SqliteClient::path_from_uri(it::test_uri());
  const std::string file = path.substr(0, path.find_last_of('/') + 1) + db + ".db";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t holder = ::fork();
  if (holder == 0) {
    sqlite3* h = nullptr;
    if (sqlite3_open(file.c_str(), &h) != SQLITE_OK) ::_exit(1);
    sqlite3_busy_timeout(h, 5000);
    if (sqlite3_exec(h, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) ::_exit(2);
    (void)!::write(ready[1], "x", 1);
    ::raise(SIGSTOP);
    ::_exit(0);
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  const std::int64_t cut = it::mono_ms();
  for (int i = 0; i < 100; ++i) {
    {
      std::lock_guard<std::mutex> g(mu);
      if (loss_at) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::int64_t loss, lease_end;
  {
    std::lock_guard<std::mutex> g(mu);
    loss = loss_at;
    lease_end = lease_end_at_loss;
  }
  // Stopped while the database is still locked (bounded), then the holder goes away.
  std::thread stopper([&] { e->stop(); });
  stopper.join();
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  ASSERT_NE(loss, 0) << "on_leader_loss never fired";
  ASSERT_NE(lease_end, 0);
  const std::int64_t margin = lease_end - loss;
  std::printf(
      "database write-locked by a frozen process under the leader: on_leader_loss "
      "%.3f s after the cut, %.3f s BEFORE the lease could expire (ttl %.1f s)\n",
      (loss - cut) / 1000.0, margin / 1000.0, ttl);
  EXPECT_FALSE(e->is_leader());
  EXPECT_GE(margin, 200);
  EXPECT_EQ(leads.load(), 1);
}

}  // namespace
