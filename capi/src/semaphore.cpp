// mongoelector_semaphore_*: a mongoelector::Semaphore on its own Storage from the client.
// What it shares with the read-write lock's handle (free, release, touch, fence, holder
// records): slot_handle.h; with every lease handle: lease_handle.h.
#include <cstdint>
#include <memory>
#include <vector>

#include "exceptions.h"
#include "handles.h"
#include "lease_handle.h"
#include "mongoelector.h"
#include "semaphore/semaphore.h"
#include "slot_handle.h"

using mongoelector::capi::guard;
using mongoelector::capi::require;

namespace mongoelector::capi {
constexpr std::uint64_t kSemaphoreMagic = 0x6d6553656d617068ULL;       // "meSemaph"
constexpr std::uint64_t kSemaphoreLeaseMagic = 0x6d65536d4c656173ULL;  // "meSmLeas"
}  // namespace mongoelector::capi

struct mongoelector_semaphore : mongoelector::capi::SlotHandle<mongoelector::Semaphore> {
  mongoelector_semaphore() : SlotHandle(mongoelector::capi::kSemaphoreMagic) {}
};

struct mongoelector_semaphore_lease : mongoelector::capi::LeaseHandle {
  mongoelector_semaphore_lease() : LeaseHandle(mongoelector::capi::kSemaphoreLeaseMagic) {}
};

namespace {

mongoelector_semaphore& checked_semaphore(mongoelector_semaphore* h) {
  return mongoelector::capi::checked_handle(h, mongoelector::capi::kSemaphoreMagic, "semaphore");
}

mongoelector::SemaphoreOptions to_core(const char* key, const mongoelector_semaphore_config* c) {
  auto o = mongoelector::capi::slot_options<mongoelector::SemaphoreOptions>(
      key, c, MONGOELECTOR_SEMAPHORE_CONFIG_VERSION, "mongoelector_semaphore_config_init");
  if (c == nullptr) return o;
  o.limit = c->limit;
  if (c->version >= 2) o.fair = c->fair != 0;  // version 1: off
  return o;
}

constexpr const char* kNoForce = "a semaphore slot cannot be forced (force must be 0)";

}  // namespace

extern "C" {

MONGOELECTOR_API mongoelector_status
mongoelector_semaphore_config_init(mongoelector_semaphore_config* config, uint32_t version) {
  return guard([&] {
    mongoelector::capi::init_slot_config<mongoelector::SemaphoreDefaults>(
        config, version, MONGOELECTOR_SEMAPHORE_CONFIG_VERSION,
        "mongoelector_semaphore_config_init");
    config->limit = 1;
    if (version >= 2) config->fair = 0;
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_semaphore_new(
    mongoelector_client* client, const char* key, const mongoelector_semaphore_config* config,
    mongoelector_semaphore** out) {
  return guard(
      [&] { mongoelector::capi::new_slot_handle(client, config, to_core(key, config), out); });
}

MONGOELECTOR_API void mongoelector_semaphore_free(mongoelector_semaphore* semaphore) {
  mongoelector::capi::free_slot_handle(semaphore, mongoelector::capi::kSemaphoreMagic);
}

MONGOELECTOR_API mongoelector_status
mongoelector_semaphore_acquire(mongoelector_semaphore* semaphore,
                               const mongoelector_acquire_options* options, int64_t* fence_out) {
  return guard([&] {
    auto& h = checked_semaphore(semaphore);
    const auto args = mongoelector::capi::to_acquire_args(options);
    require(!args.force, kNoForce);
    const std::int64_t fence = h.core->acquire(args.blocking, args.timeout_s, args.step_s,
                                               mongoelector::capi::cancel_fn(args));
    if (fence_out != nullptr) *fence_out = fence;
  });
}

MONGOELECTOR_API mongoelector_status
mongoelector_semaphore_release(mongoelector_semaphore* semaphore) {
  return guard([&] { checked_semaphore(semaphore).core->release(); });
}

MONGOELECTOR_API mongoelector_status mongoelector_semaphore_touch(mongoelector_semaphore* semaphore,
                                                                  int* renewed_out,
                                                                  int64_t* expire_ms_out) {
  return guard([&] {
    mongoelector::capi::touch_slot(*checked_semaphore(semaphore).core, renewed_out, expire_ms_out);
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_semaphore_fence(mongoelector_semaphore* semaphore,
                                                                  int64_t* out) {
  return guard([&] {
    auto& h = checked_semaphore(semaphore);
    require(out != nullptr, "out is NULL");
    *out = h.core->fence();
  });
}

MONGOELECTOR_API mongoelector_status
mongoelector_semaphore_holders(mongoelector_semaphore* semaphore,
                               mongoelector_semaphore_holder** holders_out, size_t* count_out) {
  return guard([&] {
    auto& h = checked_semaphore(semaphore);
    require(holders_out != nullptr, "holders_out is NULL");
    require(count_out != nullptr, "count_out is NULL");
    const std::vector<mongoelector::SemaphoreSlot> slots = h.core->holders();
    *holders_out = mongoelector::capi::holder_records<mongoelector_semaphore_holder>(
        slots, [](mongoelector_semaphore_holder&, std::size_t) {});
    *count_out = slots.size();
  });
}

MONGOELECTOR_API void mongoelector_semaphore_holders_free(mongoelector_semaphore_holder* holders,
                                                          size_t count) {
  mongoelector::capi::free_holder_records(holders, count);
}

MONGOELECTOR_API mongoelector_status mongoelector_semaphore_lease_acquire(
    mongoelector_semaphore* semaphore, const mongoelector_acquire_options* acquire,
    mongoelector_lease_lost_fn on_lost, void* user_data, mongoelector_semaphore_lease** out) {
  return guard([&] {
    auto& h = checked_semaphore(semaphore);
    require(out != nullptr, "out is NULL");
    const auto args = mongoelector::capi::to_acquire_args(acquire);
    require(!args.force, kNoForce);
    *out = mongoelector::capi::start_lease<mongoelector_semaphore_lease>(h, "semaphore", [&] {
      // The handle owns the Semaphore; the lease borrows it (the handle outlives the lease).
      std::shared_ptr<mongoelector::Semaphore> borrowed(h.core.get(),
                                                        [](mongoelector::Semaphore*) {});
      return mongoelector::SemaphoreLease::acquire(
          std::move(borrowed), mongoelector::capi::keepalive_options(args, on_lost, user_data));
    });
  });
}

MONGOELECTOR_API mongoelector_status
mongoelector_semaphore_lease_fence(mongoelector_semaphore_lease* lease, int64_t* out) {
  return mongoelector::capi::lease_fence(lease, mongoelector::capi::kSemaphoreLeaseMagic,
                                         "semaphore lease", out);
}

MONGOELECTOR_API mongoelector_status
mongoelector_semaphore_lease_lost(mongoelector_semaphore_lease* lease, int* out) {
  return mongoelector::capi::lease_lost(lease, mongoelector::capi::kSemaphoreLeaseMagic,
                                        "semaphore lease", out);
}

MONGOELECTOR_API mongoelector_status mongoelector_semaphore_lease_wait_lost(
    mongoelector_semaphore_lease* lease, double timeout_seconds, int* lost_out) {
  return mongoelector::capi::lease_wait_lost(lease, mongoelector::capi::kSemaphoreLeaseMagic,
                                             "semaphore lease", timeout_seconds, lost_out);
}

MONGOELECTOR_API void mongoelector_semaphore_lease_free(mongoelector_semaphore_lease* lease) {
  mongoelector::capi::free_lease(lease, mongoelector::capi::kSemaphoreLeaseMagic);
}

}  // extern "C"
