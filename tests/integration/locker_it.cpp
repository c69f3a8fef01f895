// Locker against a real server: separate processes, kill -9, fencing across every kind
// of hand-over, the original's schema, round trips, and servers that are down.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "exceptions.h"
#include "harness.h"
#include "locker.h"
#include "storage/mongo_client.h"

using namespace mongoelector;

namespace {

LockerOptions opts(const std::string& key, double ttl) {
  LockerOptions o;
  o.key = key;
  o.ttl_s = ttl;
  o.allow_unsafe_server = it::unsafe_server();
  return o;
}

class LockerIT : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_SERVER();
    uri = it::test_uri();
    db = it::unique_db("locker");
    store = it::storage(uri, db);
  }
  std::string uri, db;
  std::shared_ptr<Storage> store;
};

TEST_F(LockerIT, ServerIdentity) {
  ServerInfo info = store->server_info();
  std::cout << "integration suite talking to " << info.name << " " << info.version << " at " << uri
            << " (atomic findAndModify: " << (info.atomic_find_and_modify ? "yes" : "no") << ")"
            << std::endl;
  EXPECT_FALSE(info.name.empty());
  EXPECT_FALSE(info.version.empty());
  if (it::test_server_kind() == "ferretdb") {
    EXPECT_FALSE(info.atomic_find_and_modify);
  }
  if (it::test_server_kind() == "java") {
    EXPECT_TRUE(info.atomic_find_and_modify);
  }
}

TEST_F(LockerIT, NonAtomicServerIsRefusedUnlessOptedIn) {
  if (store->server_info().atomic_find_and_modify) GTEST_SKIP() << "server is atomic";
  LockerOptions o = opts("k", 5);
  o.allow_unsafe_server = false;
  Locker refused(store, o, system_clock());
  EXPECT_THROW(refused.try_acquire(), UnsafeServer);
  o.allow_unsafe_server = true;
  Locker allowed(store, o, system_clock());
  EXPECT_TRUE(allowed.try_acquire());
}

TEST_F(LockerIT, TwoProcessesNeverBothHold) {
  if (!store->server_info().atomic_find_and_modify)
    GTEST_SKIP() << "findAndModify is not atomic on this server: mutual exclusion is not "
                    "guaranteed, which is why such servers are refused by default";
  std::string log = "/tmp/me_it_holds_" + std::to_string(getpid()) + ".log";
  std::remove(log.c_str());
  const int n = 25;
  {
    it::Child a("hold_loop", {uri, db, "shared", std::to_string(n), log});
    it::Child b("hold_loop", {uri, db, "shared", std::to_string(n), log});
    EXPECT_EQ(a.wait(), 0);
    EXPECT_EQ(b.wait(), 0);
  }
  struct Hold {
    long pid;
    std::int64_t t0, t1, token;
  };
  std::vector<Hold> holds;
  std::ifstream in(log);
  Hold h{};
  while (in >> h.pid >> h.t0 >> h.t1 >> h.token) holds.push_back(h);
  std::remove(log.c_str());
  ASSERT_EQ(holds.size(), static_cast<std::size_t>(2 * n));
  std::sort(holds.begin(), holds.end(), [](const Hold& x, const Hold& y) { return x.t0 < y.t0; });
  int switches = 0;
  for (std::size_t i = 1; i < holds.size(); ++i) {
    EXPECT_GE(holds[i].t0, holds[i - 1].t1) << "two holders at once";
    EXPECT_GT(holds[i].token, holds[i - 1].token) << "tokens must follow the hold order";
    switches += holds[i].pid != holds[i - 1].pid;
  }
  std::cout << "2 processes x " << n << " holds, " << switches << " hand-overs, no overlap"
            << std::endl;
}

TEST_F(LockerIT, KilledHolderIsTakenOverWithinTtlPlusOneSecond) {
  const double ttl = 2.0;
  it::Child holder("hold_forever", {uri, db, "crash", "2"});
  std::string line = holder.read_line(20000);
  ASSERT_EQ(line.rfind("HELD ", 0), 0u) << line;
  std::int64_t holder_token = std::stoll(line.substr(5));
  holder.kill9();
  std::int64_t killed = it::mono_ms();
  holder.wait();
  Locker taker(store, opts("crash", ttl), system_clock());
  std::int64_t token = taker.acquire(true, 10.0, 0.02);
  double took = (it::mono_ms() - killed) / 1000.0;
  std::printf("holder killed with SIGKILL: taken over after %.3f s (ttl %.1f s)\n", took, ttl);
  EXPECT_LE(took, ttl + 1.0);
  EXPECT_GT(token, holder_token);
}

TEST_F(LockerIT, HundredMixedAcquisitionsGiveStrictlyIncreasingTokens) {
  // A quarter of the acquisitions wait for an expiry; a first acquire of a new document
  // must also finish its fence's round trips within the ttl, which 0.3 s missed on a
  // loaded machine.
  const double ttl = 1.0;
  Locker a(store, opts("fence", ttl), system_clock());
  Locker b(store, opts("fence", ttl), system_clock());
  std::int64_t last = 0;
  int kinds[4] = {0, 0, 0, 0};
  for (int i = 0; i < 100; ++i) {
    Locker& who = (i % 2) ? a : b;
    Locker& other = (i % 2) ? b : a;
    int kind = (i * 7 + i / 3) % 4;
    ++kinds[kind];
    std::int64_t token = 0;
    if (kind == 0) {  // after a release
      other.release(true);
      token = who.acquire(false);
    } else if (kind == 1) {  // after expiry
      token = who.acquire(true, 5.0, 0.02);
    } else if (kind == 2) {  // forced takeover
      token = who.acquire(false, std::nullopt, 0.25, true);
    } else {  // deleted by someone else (TTL monitor, an original node's release)
      store->release("mongolocker", "fence", std::nullopt, 0, 0, /*delete_document=*/true);
      token = who.acquire(false);
    }
    ASSERT_GT(token, last) << "acquisition " << i << " kind " << kind;
    last = token;
  }
  std::printf(
      "100 acquisitions (%d after release, %d after expiry, %d forced, %d after deletion): "
      "tokens strictly increasing, last %lld\n",
      kinds[0], kinds[1], kinds[2], kinds[3], static_cast<long long>(last));
}

TEST_F(LockerIT, OriginalSchemaDocumentIsHonouredAndTakenOverAtExpiry) {
  Locker probe(store, opts("legacy", 5), system_clock());
  std::int64_t now = probe.server_now_ms();
  it::insert_original_lock(uri, db, "mongolocker", "legacy", "original-uuid", now, now + 1500);
  try {
    probe.acquire(false);
    FAIL() << "an original node's lock must be honoured";
  } catch (const LockExists& e) {
    EXPECT_STREQ(e.what(), "legacy owned by original-host pid 4242");
  }
  EXPECT_TRUE(probe.locked());
  EXPECT_FALSE(probe.owned());
  std::int64_t start = it::mono_ms();
  std::int64_t token = probe.acquire(true, 5.0, 0.02);
  std::int64_t waited = it::mono_ms() - start;
  EXPECT_GE(waited, 1000);
  EXPECT_LE(waited, 2500);
  EXPECT_GE(token, std::int64_t{1} << 32);
  auto doc = probe.current();
  ASSERT_TRUE(doc);
  EXPECT_EQ(doc->uuid, probe.identity().uuid);
  EXPECT_EQ(doc->fence, token);
}

TEST_F(LockerIT, RoundTripsPerOperation) {
  LockerOptions o = opts("rt", 30);
  o.timeparanoid = false;
  Locker a(store, o, system_clock());
  Locker b(store, o, system_clock());
  // Warm-up: document and epoch exist, both clocks sampled, both safety checks done
  // (buildInfo + hello, once per locker).
  a.acquire(false);
  EXPECT_FALSE(b.try_acquire());
  a.release();
  auto count = [&](auto&& op) {
    std::int64_t before = it::round_trips(*store);
    op();
    return it::round_trips(*store) - before;
  };
  std::int64_t acquire = count([&] { a.acquire(false); });
  std::int64_t contended = count([&] { EXPECT_FALSE(b.try_acquire()); });
  std::int64_t renew = count([&] { EXPECT_TRUE(a.touch()); });
  std::int64_t release = count([&] { a.release(); });
  std::int64_t read = count([&] { a.locked(); });
  std::printf(
      "round trips: acquire %lld, contended attempt %lld, renew %lld, release %lld, "
      "locked() %lld\n",
      static_cast<long long>(acquire), static_cast<long long>(contended),
      static_cast<long long>(renew), static_cast<long long>(release), static_cast<long long>(read));
  EXPECT_EQ(acquire, 1);
  EXPECT_EQ(contended, 1);
  EXPECT_EQ(renew, 1);
  EXPECT_EQ(release, 1);
  EXPECT_EQ(read, 1);
}

// createIndexes once per client and collection: a second locker of a collection on the
// same client (a locker per claim) costs no round trip when it is made.
TEST_F(LockerIT, IndexesAreEnsuredOncePerClientAndCollection) {
  SKIP_ON_SQLITE("no indexes to create");
  auto client = MongoClient::open(uri, db);
  auto made = [&](const std::string& key, const std::string& collection) {
    auto s = client->open_storage(3000);
    LockerOptions o = opts(key, 30);
    o.collection = collection;
    const std::int64_t before = it::round_trips(*s);
    Locker l(s, o, system_clock());
    return it::round_trips(*s) - before;
  };
  EXPECT_EQ(made("a", "mongolocker"), 1) << "the first locker of a collection: createIndexes";
  EXPECT_EQ(made("a", "mongolocker"), 0) << "the same collection again: nothing";
  EXPECT_EQ(made("b", "mongolocker"), 0) << "another key of that collection: nothing";
  EXPECT_EQ(made("a", "other.locks"), 1) << "another collection: its own indexes";
  auto other = MongoClient::open(uri, db);
  auto s = other->open_storage(3000);
  Locker l(s, opts("a", 30), system_clock());
  EXPECT_EQ(it::round_trips(*s), 1) << "another client does not know";
}

TEST(LockerDown, ServerDownIsABoundedError) {
  SKIP_ON_SQLITE("a MongoDB server that does not answer");
  // Nothing listens on this port: connection refused, retried until selection times out.
  auto store = it::storage("mongodb://127.0.0.1:9/", "x", 500);
  std::int64_t start = it::mono_ms();
  EXPECT_THROW(
      {
        LockerOptions o = opts("k", 5);
        Locker l(store, o, system_clock());
        l.acquire(false);
      },
      StorageUnavailable);
  EXPECT_LT(it::mono_ms() - start, 5000);
}

}  // namespace
