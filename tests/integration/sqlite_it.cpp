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
#include "exceptions.h"
#include "harness.h"
#include "locker.h"
#include "storage/client.h"
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

// The file of a test "database" (harness.h: dir/<db>.db).
std::string file_of(const std::string& db) {
  const std::string path = SqliteClient::path_from_uri(it::test_uri());
  return path.substr(0, path.find_last_of('/') + 1) + db + ".db";
}

// A process that takes the database's write lock, holds it for hold_ms, then commits and
// exits. Returns its pid once it holds the lock.
pid_t hold_write_lock(const std::string& file, int hold_ms) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    sqlite3* h = nullptr;
    if (sqlite3_open(file.c_str(), &h) != SQLITE_OK) ::_exit(1);
    sqlite3_busy_timeout(h, 5000);
    if (sqlite3_exec(h, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) ::_exit(2);
    (void)!::write(ready[1], "x", 1);
    ::usleep(static_cast<useconds_t>(hold_ms) * 1000);
    sqlite3_exec(h, "COMMIT", nullptr, nullptr, nullptr);
    ::_exit(0);
  }
  ::close(ready[1]);
  char c = 0;
  const bool ok = ::read(ready[0], &c, 1) == 1;
  ::close(ready[0]);
  return ok ? pid : -1;
}

// Another process writing for longer than a call's busy timeout is contention, not a
// failure: a blocking acquire keeps trying until its own timeout, and a non-blocking one
// reports "not acquired" (the lock could not be taken now), as when it is held.
TEST(SqliteLockerIT, AWriteLockHeldPastTheBusyTimeoutIsNotAcquiredNotAnError) {
  SKIP_WITHOUT_SERVER();
  if (!it::sqlite_backend())
    GTEST_SKIP() << "SQLite-specific (MONGOELECTOR_TEST_URI=sqlite:///...)";
  const std::string db = it::unique_db("busy");
  auto store = it::storage(it::test_uri(), db, 200);  // busy timeout 100 ms
  LockerOptions o;
  o.key = "k";
  o.ttl_s = 5;
  Locker lk(store, o, system_clock());
  const pid_t holder = hold_write_lock(file_of(db), 1500);
  ASSERT_GT(holder, 0);
  const std::int64_t start = it::mono_ms();
  EXPECT_THROW(lk.acquire(/*blocking=*/false), LockExists);
  std::int64_t token = 0;
  EXPECT_NO_THROW(token = lk.acquire(/*blocking=*/true, 10.0, 0.05));
  const std::int64_t took = it::mono_ms() - start;
  ::waitpid(holder, nullptr, 0);
  EXPECT_GT(token, 0);
  EXPECT_GE(took, 1000) << "acquired while the other process still held the write lock?";
  EXPECT_TRUE(lk.hold().has_value());
  lk.release();
}

// Processes that open one NEW database file at the same moment all open it: the first
// one's journal-mode switch and schema must not fail the others ("database is locked").
TEST(SqliteLockerIT, ProcessesCreatingOneNewFileTogetherAllOpenIt) {
  SKIP_WITHOUT_SERVER();
  if (!it::sqlite_backend())
    GTEST_SKIP() << "SQLite-specific (MONGOELECTOR_TEST_URI=sqlite:///...)";
  constexpr int kRounds = 10, kProcs = 12;
  int failed = 0;
  std::string first_error;
  for (int round = 0; round < kRounds; ++round) {
    const std::string file = file_of(it::unique_db("create" + std::to_string(round)));
    int go[2], errs[2];
    ASSERT_EQ(::pipe(go), 0);
    ASSERT_EQ(::pipe(errs), 0);
    std::vector<pid_t> pids;
    for (int i = 0; i < kProcs; ++i) {
      const pid_t pid = ::fork();
      if (pid == 0) {
        ::close(go[1]);
        char c;
        (void)!::read(go[0], &c, 1);  // everyone starts when the parent closes the pipe
        try {
          auto store = open_client("sqlite://" + file, "")->open_storage(1000);
          ::_exit(store->read("mongolocker", "k") ? 4 : 0);
        } catch (const std::exception& ex) {
          const std::string m = std::string(ex.what()) + "\n";
          (void)!::write(errs[1], m.data(), m.size());
          ::_exit(3);
        }
      }
      pids.push_back(pid);
    }
    ::close(go[0]);
    ::close(errs[1]);
    ::close(go[1]);
    for (pid_t pid : pids) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
    }
    char buf[4096];
    const ssize_t n = ::read(errs[0], buf, sizeof buf - 1);
    if (n > 0 && first_error.empty()) first_error.assign(buf, static_cast<std::size_t>(n));
    ::close(errs[0]);
    for (const char* suffix : {"", "-wal", "-shm"}) ::unlink((file + suffix).c_str());
  }
  EXPECT_EQ(failed, 0) << "of " << kRounds * kProcs << " processes; first error: " << first_error;
}

}  // namespace
