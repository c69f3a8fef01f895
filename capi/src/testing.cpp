// The testing kit: mongoelector_fake_clock_* (a core ManualClock, core/testing) and the
// levers on memory:// backends (mongoelector_memory_*). The clock handle keeps the
// backends attached to it alive; everything made on them runs on its time.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "exceptions.h"
#include "handles.h"
#include "identity.h"
#include "log.h"
#include "mongoelector/testing.h"
#include "storage/memory_storage.h"
#include "testing/manual_clock.h"
#include "utf8.h"

using mongoelector::capi::guard;
using mongoelector::capi::require;

namespace mongoelector::capi {
constexpr std::uint64_t kFakeClockMagic = 0x6d6546616b65436cULL;  // "meFakeCl"
}  // namespace mongoelector::capi

struct mongoelector_fake_clock {
  std::uint64_t magic = mongoelector::capi::kFakeClockMagic;
  std::shared_ptr<mongoelector::ManualClock> clock;
  std::int64_t settle_timeout_ms = 0;
  // One thread advances or settles at a time (the ManualClock is not made for two).
  std::mutex drive_mu;
  std::mutex attach_mu;
  // The backends attached, by URI: kept alive (with their locks) while the clock lives.
  std::map<std::string, std::shared_ptr<mongoelector::MemoryClient>> attached;
};

namespace {

using mongoelector::InvalidArgument;

constexpr std::int64_t kDefaultSettleTimeoutMs = 10000;
constexpr std::int64_t kMaxSettleTimeoutMs = 3600 * 1000;
// The wall clock stays within 1970-01-01 .. 9999-12-31T23:59:59.999Z (the range of the
// dates the library writes); the monotonic clock within 2^62 ms.
constexpr std::int64_t kMaxWallMs = 253402300799999LL;
constexpr std::int64_t kMaxMonoMs = std::int64_t{1} << 62;

mongoelector_fake_clock& checked_clock(mongoelector_fake_clock* h) {
  return mongoelector::capi::checked_handle(h, mongoelector::capi::kFakeClockMagic, "fake clock");
}

// The clocks whose advance/settle runs on this thread right now (innermost first): a
// callback that such a call runs here (a lease's on_lost: the clock's timer tasks run on
// the advancing thread) must not drive or free that clock.
struct Driving {
  const mongoelector_fake_clock* clock;
  const Driving* outer;
};
thread_local const Driving* t_driving = nullptr;

bool driven_here(const mongoelector_fake_clock* h) {
  for (const Driving* d = t_driving; d != nullptr; d = d->outer)
    if (d->clock == h) return true;
  return false;
}

// Runs step() (ManualClock::advance or settle: false when the threads did not settle)
// as the one thread driving `h`.
template <class Step>
void drive(mongoelector_fake_clock& h, const char* what, Step&& step) {
  if (driven_here(&h)) {
    throw InvalidArgument(std::string(what) +
                          " called from a callback that this clock's own advance/settle is "
                          "running (it would wait for itself)");
  }
  std::unique_lock<std::mutex> lk(h.drive_mu, std::try_to_lock);
  if (!lk.owns_lock()) {
    throw InvalidArgument(std::string(what) +
                          ": another thread is advancing or settling this clock (one thread "
                          "drives a clock at a time)");
  }
  const Driving me{&h, t_driving};
  t_driving = &me;
  struct Restore {
    const Driving* outer;
    ~Restore() { t_driving = outer; }
  } restore{me.outer};
  if (!step()) {
    throw mongoelector::AcquireTimeout(
        std::string(what) + ": the library's threads on this clock did not become idle within " +
        std::to_string(h.settle_timeout_ms) +
        " ms of real time (a callback blocked on the thread that advances, or a library thread "
        "calling advance/settle itself?); the clock moved on regardless");
  }
}

std::string checked_memory_uri(const char* uri) {
  require(uri != nullptr, "memory_uri is NULL");
  require(mongoelector::is_valid_utf8(uri), "memory_uri is not valid UTF-8");
  std::string u(uri);
  if (!mongoelector::is_memory_uri(u))
    throw InvalidArgument("not a memory:// URI: " + u +
                          " (the testing kit acts on memory://NAME only)");
  return u;
}

}  // namespace

extern "C" {

MONGOELECTOR_API mongoelector_status mongoelector_fake_clock_new(int64_t wall_start_ms,
                                                                 int64_t settle_timeout_ms,
                                                                 mongoelector_fake_clock** out) {
  return guard([&] {
    require(out != nullptr, "out is NULL");
    require(wall_start_ms >= 0 && wall_start_ms <= kMaxWallMs,
            "wall_start_ms must be within 0 .. 253402300799999 (1970 .. year 9999)");
    if (settle_timeout_ms <= 0) settle_timeout_ms = kDefaultSettleTimeoutMs;
    require(settle_timeout_ms <= kMaxSettleTimeoutMs,
            "settle_timeout_ms must be at most 3600000 (one hour)");
    auto h = std::make_unique<mongoelector_fake_clock>();
    h->clock = std::make_shared<mongoelector::ManualClock>(wall_start_ms, settle_timeout_ms);
    h->settle_timeout_ms = settle_timeout_ms;
    *out = h.release();
  });
}

MONGOELECTOR_API void mongoelector_fake_clock_free(mongoelector_fake_clock* clock) {
  if (clock == nullptr || clock->magic != mongoelector::capi::kFakeClockMagic) return;
  if (driven_here(clock)) {
    // Its advance/settle is further up this very stack: freeing it would pull the clock
    // from under that call. Refused, loudly (there is no status to return).
    mongoelector::log(mongoelector::LogLevel::Error,
                      "mongoelector_fake_clock_free called from a callback that the clock's own "
                      "advance/settle is running: refused, the clock is not freed");
    return;
  }
  clock->magic = mongoelector::capi::kFreedMagic;
  try {
    delete clock;  // lets go of the attached backends; ~ManualClock joins its renewer
  } catch (...) {
  }
}

MONGOELECTOR_API mongoelector_status mongoelector_fake_clock_attach(mongoelector_fake_clock* clock,
                                                                    const char* memory_uri) {
  return guard([&] {
    auto& h = checked_clock(clock);
    const std::string uri = checked_memory_uri(memory_uri);
    std::lock_guard<std::mutex> g(h.attach_mu);
    // InvalidArgument when the name already runs on another clock.
    auto client = mongoelector::MemoryClient::open(uri, h.clock);
    h.attached.emplace(uri, std::move(client));
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_fake_clock_advance(mongoelector_fake_clock* clock,
                                                                     int64_t ms) {
  return guard([&] {
    auto& h = checked_clock(clock);
    if (ms < 0)
      throw InvalidArgument("a clock cannot go back (advance by " + std::to_string(ms) + " ms)");
    require(ms <= kMaxMonoMs - h.clock->mono_ms(), "advance: the monotonic clock would overflow");
    require(ms <= kMaxWallMs - h.clock->wall_ms(),
            "advance: the wall clock would pass the end of year 9999");
    drive(h, "mongoelector_fake_clock_advance", [&] { return h.clock->advance(ms); });
  });
}

MONGOELECTOR_API mongoelector_status
mongoelector_fake_clock_settle(mongoelector_fake_clock* clock) {
  return guard([&] {
    auto& h = checked_clock(clock);
    drive(h, "mongoelector_fake_clock_settle", [&] { return h.clock->settle(); });
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_fake_clock_now(mongoelector_fake_clock* clock,
                                                                 int64_t* wall_ms_out,
                                                                 int64_t* mono_ms_out) {
  return guard([&] {
    auto& h = checked_clock(clock);
    require(wall_ms_out != nullptr || mono_ms_out != nullptr,
            "wall_ms_out and mono_ms_out are both NULL");
    const std::int64_t wall = h.clock->wall_ms();
    const std::int64_t mono = h.clock->mono_ms();
    if (wall_ms_out != nullptr) *wall_ms_out = wall;
    if (mono_ms_out != nullptr) *mono_ms_out = mono;
  });
}

MONGOELECTOR_API mongoelector_status
mongoelector_fake_clock_jump_wall(mongoelector_fake_clock* clock, int64_t ms) {
  return guard([&] {
    auto& h = checked_clock(clock);
    const std::int64_t wall = h.clock->wall_ms();
    require(ms >= -wall && ms <= kMaxWallMs - wall,
            "jump_wall: the wall clock would leave 1970 .. year 9999");
    h.clock->jump_wall(ms);
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_fake_clock_wait_for_waiters(
    mongoelector_fake_clock* clock, size_t n, int64_t real_timeout_ms, size_t* waiting_out) {
  return guard([&] {
    auto& h = checked_clock(clock);
    const std::int64_t bound = real_timeout_ms < 0 ? 10000 : real_timeout_ms;
    if (!h.clock->block_until_waiters(n, bound)) {
      throw mongoelector::AcquireTimeout("fewer than " + std::to_string(n) +
                                         " threads wait on the clock after " +
                                         std::to_string(bound) + " ms of real time");
    }
    if (waiting_out != nullptr) *waiting_out = h.clock->waiters();
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_memory_force_expire(const char* memory_uri,
                                                                      const char* collection,
                                                                      const char* key,
                                                                      int* was_held_out) {
  return guard([&] {
    const std::string uri = checked_memory_uri(memory_uri);
    std::string coll = "mongolocker";
    if (collection != nullptr) {
      coll = collection;
      require(mongoelector::is_valid_utf8(coll), "collection is not valid UTF-8");
      mongoelector::validate_collection(coll);
    }
    const std::string k = mongoelector::capi::checked_key(key);
    // A name nothing uses opens empty (and is gone again): nothing was held.
    const bool held = mongoelector::MemoryClient::open(uri)->storage()->expire_lock(coll, k);
    if (was_held_out != nullptr) *was_held_out = held ? 1 : 0;
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_memory_set_unavailable(const char* memory_uri,
                                                                         int unavailable) {
  return guard([&] {
    const std::string uri = checked_memory_uri(memory_uri);
    auto client = mongoelector::MemoryClient::open(uri);
    const auto& storage = client->storage();
    // Only this client holds the storage: nothing uses the name, and the setting would
    // vanish with it when the client goes.
    if (unavailable != 0 && storage.use_count() == 1) {
      throw InvalidArgument(
          uri +
          " is not in use in this process: open a client on it (or attach it to a fake "
          "clock) first, the setting would be lost with the unused backend");
    }
    storage->set_unavailable(unavailable != 0);
  });
}

}  // extern "C"
