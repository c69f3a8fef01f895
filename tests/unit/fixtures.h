// Shared fixture: a FakeClock, an in-memory server whose clock follows the fake wall
// clock plus a settable skew, and helpers to make lockers with fixed identities.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "clock.h"
#include "election/elector.h"
#include "locker.h"
#include "storage/memory_storage.h"

namespace mongoelector::testing {

class CoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock = std::make_shared<FakeClock>();
    storage = std::make_shared<MemoryStorage>();
    // The server's clock runs with the host's, shifted by server_skew_ms.
    storage->set_server_time_source([this] { return clock->wall_ms() + server_skew_ms; });
  }

  std::unique_ptr<Locker> make_locker(const std::string& name, double ttl_s = 10,
                                      const std::string& key = "k") {
    LockerOptions o;
    o.key = key;
    o.ttl_s = ttl_s;
    return std::make_unique<Locker>(storage, o, clock,
                                    Identity{"uuid-" + name, "host-" + name, 100});
  }

  // An elector of `key` (collections as by default) named after `name`: uuid-NAME,
  // host-NAME, pid 7.
  std::unique_ptr<Elector> make_elector(const std::string& name, double ttl_s = 8,
                                        ElectorCallbacks callbacks = {},
                                        const std::string& key = "svc") {
    ElectorOptions o;
    o.key = key;
    o.ttl_s = ttl_s;
    return std::make_unique<Elector>(storage, o, std::move(callbacks), clock,
                                     Identity{"uuid-" + name, "host-" + name, 7});
  }

  std::shared_ptr<FakeClock> clock;
  std::shared_ptr<MemoryStorage> storage;
  std::int64_t server_skew_ms = 0;
};

}  // namespace mongoelector::testing
