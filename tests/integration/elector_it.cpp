// Elector against a real server: failover between processes after kill -9, step-down
// before lease expiry when the server dies or hangs, round trips per poll.
#include <atomic>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <thread>

#include "election/elector.h"
#include "exceptions.h"
#include "harness.h"

using namespace mongoelector;

namespace {

ElectorOptions eopts(const std::string& key, double ttl, bool report = true) {
  ElectorOptions o;
  o.key = key;
  o.ttl_s = ttl;
  o.report_status = report;
  return o;
}

// Electors refuse allow_unsafe_server (issue #14.7): on a server whose findAndModify is
// not atomic (FerretDB) two nodes could both lead and tokens could repeat.
#define SKIP_ON_UNSAFE_SERVER()                                              \
  do {                                                                       \
    if (it::unsafe_server())                                                 \
      GTEST_SKIP() << it::test_server_kind()                                 \
                   << " is not atomic: electors refuse allow_unsafe_server"; \
  } while (0)

TEST(ElectorIT, FailoverToAnotherProcessAfterKill9) {
  SKIP_WITHOUT_SERVER();
  SKIP_ON_UNSAFE_SERVER();
  const std::string uri = it::test_uri(), db = it::unique_db("failover");
  const double ttl = 2.0;
  it::Child a("elector", {uri, db, "svc", "2"});
  ASSERT_EQ(a.read_line(20000), "STARTED");
  std::string first = a.read_line(10000);
  ASSERT_EQ(first.rfind("LEADER ", 0), 0u) << "first elector should lead: " << first;
  it::Child b("elector", {uri, db, "svc", "2"});
  ASSERT_EQ(b.read_line(20000), "STARTED");
  EXPECT_EQ(b.read_line(1500), "") << "no second leader while the first is alive";
  a.kill9();
  std::int64_t killed = it::mono_ms();
  a.wait();
  std::string line = b.read_line(static_cast<std::int64_t>((ttl + 3) * 1000));
  ASSERT_EQ(line.rfind("LEADER ", 0), 0u) << line;
  double failover = (std::stoll(line.substr(7)) - killed) / 1000.0;
  std::printf("leader killed with SIGKILL: follower process took over after %.3f s (ttl %.1f s)\n",
              failover, ttl);
  EXPECT_LE(failover, ttl + 1.0);
}

// The leader's server goes away (killed, or frozen so that calls hang): on_leader_loss
// must fire before the lease could be taken by anyone else.
void step_down_scenario(bool freeze) {
  SKIP_WITHOUT_SERVER();
  SKIP_ON_UNSAFE_SERVER();
  SKIP_ON_SQLITE("a private MongoDB-protocol server that is killed or frozen");
  std::string kind = it::test_server_kind().empty() ? "java" : it::test_server_kind();
  it::PrivateServer server(kind);
  if (!server.ok()) GTEST_SKIP() << "cannot start a private " << kind << " server";
  const double ttl = 3.0;
  // The same per-call bound the C API and Python derive from the ttl.
  auto store = it::storage(server.uri(), "stepdown", op_timeout_ms_for_ttl(ttl));
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
  e = std::make_shared<Elector>(store, eopts("svc", ttl), cb, system_clock());
  e->start();
  for (int i = 0; i < 100 && !e->is_leader(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(e->is_leader());
  std::this_thread::sleep_for(std::chrono::milliseconds(4000));  // several renewals
  {
    std::lock_guard<std::mutex> g(mu);
    ASSERT_EQ(loss_at, 0) << "a healthy leader must keep leading across renewals";
  }
  std::int64_t cut = it::mono_ms();
  if (freeze)
    server.freeze();
  else
    server.kill();
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
  ASSERT_NE(loss, 0) << "on_leader_loss never fired";
  ASSERT_NE(lease_end, 0);
  std::int64_t margin = lease_end - loss;
  std::printf(
      "server %s under the leader: on_leader_loss %.3f s after the cut, %.3f s BEFORE "
      "the lease could expire (ttl %.1f s)\n",
      freeze ? "frozen (SIGSTOP)" : "killed", (loss - cut) / 1000.0, margin / 1000.0, ttl);
  EXPECT_FALSE(e->is_leader());
  EXPECT_GE(margin, 200) << "step-down must come at least ttl/10 - scheduling slack early";
  std::thread stopper([&] { e->stop(); });  // bounded even though the server is gone
  stopper.join();
  EXPECT_EQ(leads.load(), 1);
}

TEST(ElectorIT, LeaderStepsDownBeforeLeaseExpiryWhenServerIsKilled) { step_down_scenario(false); }
TEST(ElectorIT, LeaderStepsDownBeforeLeaseExpiryWhenServerHangs) { step_down_scenario(true); }

TEST(ElectorIT, RoundTripsPerPoll) {
  SKIP_WITHOUT_SERVER();
  SKIP_ON_UNSAFE_SERVER();
  const std::string uri = it::test_uri(), db = it::unique_db("rtpoll");
  auto sa = it::storage(uri, db), sb = it::storage(uri, db), sc = it::storage(uri, db);
  Elector leader(sa, eopts("svc", 30, true), {}, system_clock());
  Elector follower(sb, eopts("svc", 30, true), {}, system_clock());
  Elector quiet(sc, eopts("svc", 30, false), {}, system_clock());
  leader.poll();
  follower.poll();
  quiet.poll();
  ASSERT_TRUE(leader.is_leader());
  auto count = [](Storage& s, Elector& e) {
    std::int64_t before = it::round_trips(s);
    e.poll();
    return it::round_trips(s) - before;
  };
  std::int64_t lp = count(*sa, leader), fp = count(*sb, follower), qp = count(*sc, quiet);
  std::printf(
      "round trips per poll: leader %lld (renew + status), follower %lld (read; its "
      "status is written at most every ttl/2), follower without status %lld\n",
      static_cast<long long>(lp), static_cast<long long>(fp), static_cast<long long>(qp));
  EXPECT_EQ(lp, 2);
  EXPECT_EQ(fp, 1) << "the follower's status was written by its first poll, < ttl/2 ago";
  EXPECT_EQ(qp, 1);
  leader.release();
}

}  // namespace
