// mongoelector_rwlock_*: a mongoelector::RwLock on its own Storage from the client. What
// it shares with the semaphore's handle (free, release, touch, fence, holder records):
// slot_handle.h; with every lease handle: lease_handle.h.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "exceptions.h"
#include "handles.h"
#include "lease_handle.h"
#include "mongoelector.h"
#include "semaphore/rwlock.h"
#include "slot_handle.h"

using mongoelector::capi::guard;
using mongoelector::capi::require;

namespace mongoelector::capi {
constexpr std::uint64_t kRwLockMagic = 0x6d6552774c6f636bULL;       // "meRwLock"
constexpr std::uint64_t kRwLockLeaseMagic = 0x6d6552774c656173ULL;  // "meRwLeas"
}  // namespace mongoelector::capi

struct mongoelector_rwlock : mongoelector::capi::SlotHandle<mongoelector::RwLock> {
  mongoelector_rwlock() : SlotHandle(mongoelector::capi::kRwLockMagic) {}
};

struct mongoelector_rwlock_lease : mongoelector::capi::LeaseHandle {
  mongoelector_rwlock_lease() : LeaseHandle(mongoelector::capi::kRwLockLeaseMagic) {}
};

namespace {

mongoelector_rwlock& checked_rwlock(mongoelector_rwlock* h) {
  return mongoelector::capi::checked_handle(h, mongoelector::capi::kRwLockMagic, "read-write lock");
}

mongoelector::RwLockOptions to_core(const char* key, const mongoelector_rwlock_config* c) {
  auto o = mongoelector::capi::slot_options<mongoelector::RwLockOptions>(
      key, c, MONGOELECTOR_RWLOCK_CONFIG_VERSION, "mongoelector_rwlock_config_init");
  if (c == nullptr) return o;
  o.max_readers = c->max_readers;  // checked by the RwLock, before any I/O
  o.writer_preference = c->writer_preference != 0;
  if (c->version >= 2) o.fair = c->fair != 0;  // version 1: off
  return o;
}

// A side as the int C passed: any value may arrive, and in C++ loading an enum outside
// its values is undefined behaviour, so `side` is taken by reference and copied as bytes.
int side_value(const mongoelector_rwlock_side& side) {
  int raw = 0;
  static_assert(sizeof raw == sizeof side, "a C enum is passed as an int");
  std::memcpy(&raw, &side, sizeof raw);
  return raw;
}

// The side a caller asked for: READ or WRITE, anything else refused by name.
mongoelector::RwSide to_side(const mongoelector_rwlock_side& side) {
  const int raw = side_value(side);
  if (raw == MONGOELECTOR_RWLOCK_READ) return mongoelector::RwSide::Read;
  if (raw == MONGOELECTOR_RWLOCK_WRITE) return mongoelector::RwSide::Write;
  throw mongoelector::InvalidArgument(
      "side " + std::to_string(raw) +
      " is not a side to acquire: pass MONGOELECTOR_RWLOCK_READ (1) or MONGOELECTOR_RWLOCK_WRITE "
      "(2)");
}

constexpr const char* kNoForce =
    "a read-write lock's hold cannot be forced (force must be 0): a writer waits for the "
    "readers, or for their ttl";

}  // namespace

extern "C" {

MONGOELECTOR_API mongoelector_status
mongoelector_rwlock_config_init(mongoelector_rwlock_config* config, uint32_t version) {
  return guard([&] {
    using D = mongoelector::RwLockDefaults;
    mongoelector::capi::init_slot_config<D>(config, version, MONGOELECTOR_RWLOCK_CONFIG_VERSION,
                                            "mongoelector_rwlock_config_init");
    config->max_readers = D::max_readers;
    config->writer_preference = D::writer_preference ? 1 : 0;
    if (version >= 2) config->fair = 0;
  });
}

MONGOELECTOR_API mongoelector_status
mongoelector_rwlock_new(mongoelector_client* client, const char* key,
                        const mongoelector_rwlock_config* config, mongoelector_rwlock** out) {
  return guard(
      [&] { mongoelector::capi::new_slot_handle(client, config, to_core(key, config), out); });
}

MONGOELECTOR_API void mongoelector_rwlock_free(mongoelector_rwlock* rwlock) {
  mongoelector::capi::free_slot_handle(rwlock, mongoelector::capi::kRwLockMagic);
}

MONGOELECTOR_API mongoelector_status
mongoelector_rwlock_acquire(mongoelector_rwlock* rwlock, mongoelector_rwlock_side side,
                            const mongoelector_acquire_options* options, int64_t* fence_out) {
  return guard([&] {
    auto& h = checked_rwlock(rwlock);
    const mongoelector::RwSide s = to_side(side);
    const auto args = mongoelector::capi::to_acquire_args(options);
    require(!args.force, kNoForce);
    const std::int64_t fence = h.core->acquire(s, args.blocking, args.timeout_s, args.step_s,
                                               mongoelector::capi::cancel_fn(args));
    if (fence_out != nullptr) *fence_out = fence;
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_rwlock_release(mongoelector_rwlock* rwlock) {
  return guard([&] { checked_rwlock(rwlock).core->release(); });
}

MONGOELECTOR_API mongoelector_status mongoelector_rwlock_touch(mongoelector_rwlock* rwlock,
                                                               int* renewed_out,
                                                               int64_t* expire_ms_out) {
  return guard([&] {
    mongoelector::capi::touch_slot(*checked_rwlock(rwlock).core, renewed_out, expire_ms_out);
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_rwlock_fence(mongoelector_rwlock* rwlock,
                                                               int64_t* out) {
  return guard([&] {
    auto& h = checked_rwlock(rwlock);
    require(out != nullptr, "out is NULL");
    *out = h.core->fence();
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_rwlock_held_side(mongoelector_rwlock* rwlock,
                                                                   mongoelector_rwlock_side* out) {
  return guard([&] {
    auto& h = checked_rwlock(rwlock);
    require(out != nullptr, "out is NULL");
    const std::optional<mongoelector::RwSide> side = h.core->side();
    *out = !side                                 ? MONGOELECTOR_RWLOCK_NONE
           : *side == mongoelector::RwSide::Read ? MONGOELECTOR_RWLOCK_READ
                                                 : MONGOELECTOR_RWLOCK_WRITE;
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_rwlock_uuid(mongoelector_rwlock* rwlock,
                                                              const char** out) {
  return guard([&] {
    auto& h = checked_rwlock(rwlock);
    require(out != nullptr, "out is NULL");
    *out = h.core->identity().uuid.c_str();
  });
}

MONGOELECTOR_API const char* mongoelector_rwlock_side_name(mongoelector_rwlock_side side) {
  switch (side_value(side)) {
    case MONGOELECTOR_RWLOCK_NONE:
      return "none";
    case MONGOELECTOR_RWLOCK_READ:
      return "read";
    case MONGOELECTOR_RWLOCK_WRITE:
      return "write";
    case MONGOELECTOR_RWLOCK_WAITING_WRITER:
      return "waiting_writer";
  }
  return "unknown";
}

MONGOELECTOR_API mongoelector_status mongoelector_rwlock_holders(
    mongoelector_rwlock* rwlock, mongoelector_rwlock_holder** holders_out, size_t* count_out) {
  return guard([&] {
    auto& h = checked_rwlock(rwlock);
    require(holders_out != nullptr, "holders_out is NULL");
    require(count_out != nullptr, "count_out is NULL");
    const mongoelector::RwLockHolders held = h.core->holders();
    // The readers, the writer, the waiting writer: one array, each entry with its side.
    std::vector<mongoelector::SemaphoreSlot> slots = held.readers;
    if (held.writer) slots.push_back(*held.writer);
    if (held.waiting_writer) slots.push_back(*held.waiting_writer);
    const std::size_t readers = held.readers.size();
    const bool writer = held.writer.has_value();
    *holders_out = mongoelector::capi::holder_records<mongoelector_rwlock_holder>(
        slots, [readers, writer](mongoelector_rwlock_holder& r, std::size_t i) {
          r.side = i < readers              ? MONGOELECTOR_RWLOCK_READ
                   : i == readers && writer ? MONGOELECTOR_RWLOCK_WRITE
                                            : MONGOELECTOR_RWLOCK_WAITING_WRITER;
        });
    *count_out = slots.size();
  });
}

MONGOELECTOR_API void mongoelector_rwlock_holders_free(mongoelector_rwlock_holder* holders,
                                                       size_t count) {
  mongoelector::capi::free_holder_records(holders, count);
}

MONGOELECTOR_API mongoelector_status mongoelector_rwlock_lease_acquire(
    mongoelector_rwlock* rwlock, mongoelector_rwlock_side side,
    const mongoelector_acquire_options* acquire, mongoelector_lease_lost_fn on_lost,
    void* user_data, mongoelector_rwlock_lease** out) {
  return guard([&] {
    auto& h = checked_rwlock(rwlock);
    require(out != nullptr, "out is NULL");
    const mongoelector::RwSide s = to_side(side);
    const auto args = mongoelector::capi::to_acquire_args(acquire);
    require(!args.force, kNoForce);
    *out = mongoelector::capi::start_lease<mongoelector_rwlock_lease>(h, "read-write lock", [&] {
      // The handle owns the RwLock; the lease borrows it (the handle outlives the lease).
      std::shared_ptr<mongoelector::RwLock> borrowed(h.core.get(), [](mongoelector::RwLock*) {});
      return mongoelector::KeepAliveLease::acquire(
          std::move(borrowed), s, mongoelector::capi::keepalive_options(args, on_lost, user_data));
    });
  });
}

MONGOELECTOR_API mongoelector_status
mongoelector_rwlock_lease_fence(mongoelector_rwlock_lease* lease, int64_t* out) {
  return mongoelector::capi::lease_fence(lease, mongoelector::capi::kRwLockLeaseMagic,
                                         "read-write lock lease", out);
}

MONGOELECTOR_API mongoelector_status
mongoelector_rwlock_lease_lost(mongoelector_rwlock_lease* lease, int* out) {
  return mongoelector::capi::lease_lost(lease, mongoelector::capi::kRwLockLeaseMagic,
                                        "read-write lock lease", out);
}

MONGOELECTOR_API mongoelector_status mongoelector_rwlock_lease_wait_lost(
    mongoelector_rwlock_lease* lease, double timeout_seconds, int* lost_out) {
  return mongoelector::capi::lease_wait_lost(lease, mongoelector::capi::kRwLockLeaseMagic,
                                             "read-write lock lease", timeout_seconds, lost_out);
}

MONGOELECTOR_API void mongoelector_rwlock_lease_free(mongoelector_rwlock_lease* lease) {
  mongoelector::capi::free_lease(lease, mongoelector::capi::kRwLockLeaseMagic);
}

}  // extern "C"
