// One MongoClient shared by many storages (lockers): pools by timeout class, exact
// round trips per storage, parallel calls up to the pool size, a full pool failing
// within the call budget, and storages outliving their client.
#include <gtest/gtest.h>

#include <mongoc/mongoc.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "exceptions.h"
#include "storage/mongo_client.h"
#include "storage_env.h"
#include "tcp_fixtures.h"

namespace mongoelector::storage_test {
namespace {

using Ms = std::chrono::milliseconds;

std::int64_t elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<Ms>(std::chrono::steady_clock::now() - since).count();
}

std::shared_ptr<MongoClient> test_client(const std::string& uri_suffix = "") {
  return MongoClient::open(*test_uri() + uri_suffix, test_database());
}

// The test server behind a FreezableProxy, as a URI with extra options.
struct ProxiedServer {
  ProxiedServer() {
    bson_error_t error;
    mongoc_uri_t* uri = mongoc_uri_new_with_error(test_uri()->c_str(), &error);
    const mongoc_host_list_t* host = uri ? mongoc_uri_get_hosts(uri) : nullptr;
    if (host != nullptr) proxy = std::make_unique<FreezableProxy>(host->host, host->port);
    if (uri != nullptr) mongoc_uri_destroy(uri);
  }
  std::string uri(const std::string& options) const {
    return "mongodb://127.0.0.1:" + std::to_string(proxy->port()) + "/?" + options;
  }
  std::unique_ptr<FreezableProxy> proxy;
};

TEST(SharedClient, StoragesOfOneTimeoutClassShareOnePool) {
  REQUIRE_TEST_SERVER();
  auto client = test_client();
  std::vector<std::unique_ptr<MongoStorage>> stores;
  for (int i = 0; i < 50; ++i) stores.push_back(std::make_unique<MongoStorage>(client, 1500));
  EXPECT_EQ(client->pool_count(), 1u);
  stores.push_back(std::make_unique<MongoStorage>(client, 200));  // a ttl-2 locker
  EXPECT_EQ(client->pool_count(), 2u);
  EXPECT_EQ(client->pool_size(), MongoClient::kDefaultPoolSize);
  EXPECT_EQ(test_client("?maxPoolSize=3")->pool_size(), 3);
  EXPECT_THROW(test_client("?maxPoolSize=0"), InvalidArgument);
}

TEST(SharedClient, RoundTripsAreCountedPerStorageNotPerPool) {
  REQUIRE_TEST_SERVER();
  auto client = test_client();
  MongoStorage a(client, 1500), b(client, 1500);
  const auto a0 = a.round_trips(), b0 = b.round_trips();
  a.read("pool", "k");
  a.read("pool", "k");
  b.read("pool", "k");
  EXPECT_EQ(a.round_trips() - a0, 2);
  EXPECT_EQ(b.round_trips() - b0, 1);

  // Counted on the thread that sends: concurrent storages never see each other's.
  std::vector<std::unique_ptr<MongoStorage>> stores;
  for (int i = 0; i < 4; ++i) stores.push_back(std::make_unique<MongoStorage>(client, 1500));
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int j = 0; j < 10 * (i + 1); ++j) stores[i]->read("pool", "k");
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(stores[i]->round_trips(), 10 * (i + 1)) << i;
}

TEST(SharedClient, StoragesOutliveTheirClient) {
  REQUIRE_TEST_SERVER();
  auto client = test_client();
  auto store = std::make_unique<MongoStorage>(client, 1500);
  std::weak_ptr<MongoClient> weak = client;
  client.reset();                // the C API's client_free before locker_free
  EXPECT_FALSE(weak.expired());  // the storage keeps it
  EXPECT_NO_THROW(store->read("pool", "k"));
  store.reset();
  EXPECT_TRUE(weak.expired());
}

// With every slot taken by calls hanging on a stalled server, the next call gets
// StorageUnavailable within its budget (it waits half a class for a slot), not a hang;
// the hanging calls were all in flight at once (no mutex around one connection).
TEST(SharedClient, FullPoolFailsWithinTheCallBudget) {
  REQUIRE_TEST_SERVER();
  ProxiedServer server;
  ASSERT_TRUE(server.proxy);
  auto client = MongoClient::open(server.uri("maxPoolSize=2"), test_database());
  MongoStorage warm(client, 400), hang1(client, 400), hang2(client, 400), late(client, 400);
  const std::int64_t bound = late.call_bound_ms();
  ASSERT_EQ(bound, 400 / 2 + 3 * 400);
  // Two connections, handshaken, before the stall.
  std::thread t([&] { warm.read("pool", "k"); });
  warm.read("pool", "k");
  t.join();

  server.proxy->set_frozen(true);
  std::atomic<int> started{0};
  std::atomic<std::int64_t> hang_ms[2] = {{0}, {0}};
  auto hang = [&](MongoStorage& s, int i) {
    const auto t0 = std::chrono::steady_clock::now();
    started.fetch_add(1);
    try {
      s.read("pool", "k");
    } catch (const StorageUnavailable&) {
    }
    hang_ms[i] = elapsed_ms(t0);
  };
  std::thread h1(hang, std::ref(hang1), 0), h2(hang, std::ref(hang2), 1);
  while (started.load() < 2) std::this_thread::yield();
  std::this_thread::sleep_for(Ms(50));  // both calls are on the wire now

  const auto t0 = std::chrono::steady_clock::now();
  std::string message;
  try {
    late.read("pool", "k");
  } catch (const StorageUnavailable& e) {
    message = e.what();
  }
  const std::int64_t late_ms = elapsed_ms(t0);
  h1.join();
  h2.join();
  std::cout << "  full pool: the third call failed after " << late_ms << " ms (bound " << bound
            << " ms): " << message << "; the hanging calls took " << hang_ms[0] << " and "
            << hang_ms[1] << " ms" << std::endl;
  EXPECT_NE(message.find("no free connection"), std::string::npos) << message;
  EXPECT_LE(late_ms, bound);
  // Both hanging calls ran at once: each ended by its own socket timeout, not one after
  // the other.
  EXPECT_LE(hang_ms[0], bound);
  EXPECT_LE(hang_ms[1], bound);

  server.proxy->set_frozen(false);
  bool recovered = false;
  for (int i = 0; i < 20 && !recovered; ++i) {
    try {
      late.read("pool", "k");
      recovered = true;
    } catch (const StorageUnavailable&) {
      std::this_thread::sleep_for(Ms(100));
    }
  }
  EXPECT_TRUE(recovered);
}

// Hole 3 of issue #7: every write that decides a hold or a token goes out with
// writeConcern {w: "majority"}, whatever the URI says (seen on the wire).
TEST(WriteConcern, LockAndFenceWritesAskForMajority) {
  REQUIRE_TEST_SERVER();
  ProxiedServer server;
  ASSERT_TRUE(server.proxy);
  auto client = MongoClient::open(server.uri("w=1"), test_database());
  MongoStorage s(client, 1500);
  const auto count = [&](const std::string& needle) {
    const std::string wire = server.proxy->sent();
    std::size_t n = 0;
    for (auto at = wire.find(needle); at != std::string::npos; at = wire.find(needle, at + 1)) ++n;
    return n;
  };
  LockClaim claim{"wc", "u1", "h", 1, 1000, 100000};
  auto doc = s.claim("wclocks", claim, false);
  ASSERT_TRUE(doc.has_value());
  s.bump_epoch("wclocks", "wc");
  s.set_fence("wclocks", "wc", "u1", doc->fence, 1000, std::int64_t{1} << 32);
  s.renew("wclocks", "wc", "u1", std::int64_t{1} << 32, 1000, 200000);
  s.release("wclocks", "wc", std::string("u1"), std::int64_t{1} << 32, 2000, false);
  s.claim("wclocks", LockClaim{"wc", "u2", "h", 1, 3000, 100000}, false);
  s.release("wclocks", "wc", std::string("u2"), 0, 4000, true);  // delete
  // claim x2, bump_epoch, set_fence, renew, release, delete: 7 writes, each with majority.
  EXPECT_EQ(count("majority"), 7u);
  EXPECT_EQ(count("writeConcern"), 7u);
}

}  // namespace
}  // namespace mongoelector::storage_test
