// Semaphore against a real server (and the SQLite backend): 12 processes contending for
// limit 3 never exceed 3 holders, tokens follow the order of holds, a holder killed with
// SIGKILL frees its slot at its expiry (not before, not much after), round trips, limit
// mismatch, and the refusal of non-atomic servers.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "exceptions.h"
#include "harness.h"
#include "semaphore/semaphore.h"

using namespace mongoelector;

namespace it {

namespace {
SemaphoreOptions sem_options(const std::string& key, std::int64_t limit, double ttl) {
  SemaphoreOptions o;
  o.key = key;
  o.limit = limit;
  o.ttl_s = ttl;
  o.allow_unsafe_server = unsafe_server();
  return o;
}
}  // namespace

// Child roles (main.cpp dispatches "sem_*" here). argv: --child role uri db key ...
int run_semaphore_role(const std::string& role, char** argv) {
  const std::string uri = argv[3], db = argv[4], key = argv[5];
  if (role == "sem_hold_loop") {
    // argv[6] rounds, argv[7] log: each hold as "pid t_req t0 t1 token" on the shared mono
    // clock: t_req before acquire() was called, t0 after it returned (the claim, which
    // assigned the token, lies between), t1 before release() was called.
    const int n = std::stoi(argv[6]);
    std::ofstream out(argv[7], std::ios::app);
    Semaphore sem(storage(uri, db), sem_options(key, 3, 5), system_clock());
    for (int i = 0; i < n; ++i) {
      const std::int64_t t_req = mono_ms();
      const std::int64_t token = sem.acquire(true, 60.0, 0.005);
      const std::int64_t t0 = mono_ms();
      std::this_thread::sleep_for(std::chrono::milliseconds(4));
      const std::int64_t t1 = mono_ms();
      sem.release();
      out << getpid() << ' ' << t_req << ' ' << t0 << ' ' << t1 << ' ' << token << '\n';
      out.flush();
    }
    return 0;
  }
  if (role == "sem_hold_forever") {
    // argv[6] ttl, argv[7] limit.
    Semaphore sem(storage(uri, db), sem_options(key, std::stoll(argv[7]), std::stod(argv[6])),
                  system_clock());
    const std::int64_t token = sem.acquire(true, 10.0, 0.05);
    std::cout << "HELD " << token << ' ' << mono_ms() << std::endl;
    pause();
    return 0;
  }
  std::cerr << "unknown role " << role << "\n";
  return 2;
}

}  // namespace it

namespace {

SemaphoreOptions sem_options_for_test(const std::string& key, std::int64_t limit, double ttl) {
  SemaphoreOptions o;
  o.key = key;
  o.limit = limit;
  o.ttl_s = ttl;
  o.allow_unsafe_server = it::unsafe_server();
  return o;
}

class SemaphoreIT : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_SERVER();
    uri = it::test_uri();
    db = it::unique_db("sem");
    store = it::storage(uri, db);
  }
  bool atomic() { return store->server_info().atomic_find_and_modify; }
  std::string uri, db;
  std::shared_ptr<Storage> store;
};

TEST_F(SemaphoreIT, TwelveProcessesNeverExceedTheLimitAndTokensFollowTheHolds) {
  if (!atomic()) GTEST_SKIP() << "updates are not atomic on this server (refused by default)";
  const std::string log = "/tmp/me_it_sem_" + std::to_string(getpid()) + ".log";
  std::remove(log.c_str());
  const int procs = 12, rounds = 15;
  const std::int64_t start = it::mono_ms();
  {
    std::vector<std::unique_ptr<it::Child>> children;
    for (int i = 0; i < procs; ++i)
      children.push_back(std::make_unique<it::Child>(
          "sem_hold_loop", std::vector<std::string>{uri, db, "pool", std::to_string(rounds), log}));
    for (auto& c : children) EXPECT_EQ(c->wait(), 0);
  }
  const double wall_s = (it::mono_ms() - start) / 1000.0;
  struct Hold {
    long pid;
    std::int64_t t_req, t0, t1, token;
  };
  std::vector<Hold> holds;
  {
    std::ifstream in(log);
    Hold h{};
    while (in >> h.pid >> h.t_req >> h.t0 >> h.t1 >> h.token) holds.push_back(h);
  }
  std::remove(log.c_str());
  ASSERT_EQ(holds.size(), static_cast<std::size_t>(procs * rounds));
  // Concurrency: a sweep over enter/exit instants (an exit at the same ms comes first:
  // the logged interval is inside the hold, which the next holder's claim follows).
  std::vector<std::pair<std::int64_t, int>> events;
  for (const auto& h : holds) {
    events.emplace_back(h.t0, +1);
    events.emplace_back(h.t1, -1);
  }
  std::sort(events.begin(), events.end());
  int inside = 0, max_inside = 0;
  for (const auto& e : events) max_inside = std::max(max_inside, inside += e.second);
  EXPECT_LE(max_inside, 3) << "more than `limit` holders at once";
  // Tokens: unique, and a claim made after another claim had completed has a larger
  // token. X's claim was sent after X.t_req; Y's had completed by Y.t0. (Comparing with
  // Y.t1 or X.t0 instead would blame the token order for a process descheduled between
  // its claim and its log line.)
  std::set<std::int64_t> unique;
  for (const auto& h : holds) unique.insert(h.token);
  EXPECT_EQ(unique.size(), holds.size()) << "a token was handed out twice";
  std::sort(holds.begin(), holds.end(),
            [](const Hold& a, const Hold& b) { return a.t_req < b.t_req; });
  std::vector<Hold> by_claim = holds;
  std::sort(by_claim.begin(), by_claim.end(),
            [](const Hold& a, const Hold& b) { return a.t0 < b.t0; });
  std::size_t claimed = 0;
  std::int64_t max_claimed_token = 0;
  for (const auto& h : holds) {
    while (claimed < by_claim.size() && by_claim[claimed].t0 < h.t_req)
      max_claimed_token = std::max(max_claimed_token, by_claim[claimed++].token);
    EXPECT_GT(h.token, max_claimed_token) << "a later claim got a smaller token";
  }
  std::printf(
      "semaphore limit 3: %d processes x %d holds = %zu acquisitions in %.2f s, "
      "max %d holders at once, tokens unique and ordered\n",
      procs, rounds, holds.size(), wall_s, max_inside);
}

TEST_F(SemaphoreIT, AKilledHoldersSlotFreesAtItsExpiryNotBeforeNotMuchAfter) {
  const double ttl = 2.0;
  // One slot held by a live holder (a longer ttl: the ttl is per holder, the limit per key).
  Semaphore other(store, sem_options_for_test("crash", 2, 30), system_clock());
  other.acquire(true, 10.0, 0.05);
  it::Child holder("sem_hold_forever", {uri, db, "crash", "2", "2"});
  const std::string line = holder.read_line(20000);
  ASSERT_EQ(line.rfind("HELD ", 0), 0u) << line;
  std::int64_t token = 0, held_at = 0;
  std::sscanf(line.c_str(), "HELD %lld %lld", reinterpret_cast<long long*>(&token),
              reinterpret_cast<long long*>(&held_at));
  holder.kill9();
  holder.wait();
  Semaphore taker(store, sem_options_for_test("crash", 2, ttl), system_clock());
  EXPECT_FALSE(taker.try_acquire()) << "the dead holder's slot was free at once";
  const std::int64_t t = taker.acquire(true, 10.0, 0.02);
  const double after_hold = (it::mono_ms() - held_at) / 1000.0;
  std::printf(
      "holder killed with SIGKILL: its slot taken %.3f s after its acquire returned "
      "(ttl %.1f s)\n",
      after_hold, ttl);
  EXPECT_GE(after_hold, ttl - 0.25) << "taken before the dead holder's expiry";
  EXPECT_LE(after_hold, ttl + 1.0);
  EXPECT_GT(t, token);
  EXPECT_GT(t, other.fence());
}

TEST_F(SemaphoreIT, RoundTripsOfAnUncontendedAcquire) {
  Semaphore a(store, sem_options_for_test("rt", 3, 10), system_clock());
  a.acquire(false);  // first use: read + epoch + insert (and the one-off checks)
  a.release();
  std::int64_t before = it::round_trips(*store);
  a.acquire(false);
  const std::int64_t warm = it::round_trips(*store) - before;
  a.release();
  Semaphore b(store, sem_options_for_test("rt", 3, 10), system_clock());
  b.verify_time();
  before = it::round_trips(*store);
  b.acquire(false);
  const std::int64_t cold = it::round_trips(*store) - before;
  std::printf(
      "uncontended acquire: %lld round trip(s) with a current copy, %lld for a new "
      "instance\n",
      static_cast<long long>(warm), static_cast<long long>(cold));
  EXPECT_EQ(warm, 1);
  EXPECT_LE(cold, 2 + 1);  // read + claim (+ the server check, cached per client on MongoDB)
}

TEST_F(SemaphoreIT, ALimitMismatchIsRefused) {
  Semaphore a(store, sem_options_for_test("lim", 3, 10), system_clock());
  a.acquire(false);
  Semaphore b(store, sem_options_for_test("lim", 4, 10), system_clock());
  EXPECT_THROW(b.acquire(false), InvalidArgument);
  EXPECT_THROW(b.holders(), InvalidArgument);
  EXPECT_EQ(a.holders().size(), 1u);
}

TEST_F(SemaphoreIT, NonAtomicServersAreRefusedUnlessOptedIn) {
  if (atomic()) GTEST_SKIP() << "server is atomic";
  SemaphoreOptions o = sem_options_for_test("unsafe", 2, 5);
  o.allow_unsafe_server = false;
  Semaphore refused(store, o, system_clock());
  EXPECT_THROW(refused.acquire(false), UnsafeServer);
  o.allow_unsafe_server = true;
  Semaphore allowed(store, o, system_clock());
  EXPECT_GT(allowed.acquire(false), 0);
}

}  // namespace
