// mongoelector_semaphore_*: a mongoelector::Semaphore on its own Storage from the client
// (declarations: pending_semaphore.h, to move into the public header).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <vector>

#include "exceptions.h"
#include "handles.h"
#include "json.h"
#include "lease/lease.h"
#include "mongoelector.h"
#include "semaphore/semaphore.h"
#include "utf8.h"

using mongoelector::capi::checked;
using mongoelector::capi::guard;
using mongoelector::capi::require;

namespace mongoelector::capi {
constexpr std::uint64_t kSemaphoreMagic = 0x6d6553656d617068ULL;       // "meSemaph"
constexpr std::uint64_t kSemaphoreLeaseMagic = 0x6d65536d4c656173ULL;  // "meSmLeas"
}  // namespace mongoelector::capi

struct mongoelector_semaphore {
  std::uint64_t magic = mongoelector::capi::kSemaphoreMagic;
  std::shared_ptr<mongoelector::Storage> storage;
  // The core Semaphore is thread-safe (one claim at a time per instance): no handle mutex,
  // so fence/holders answer while an acquire waits.
  std::unique_ptr<mongoelector::Semaphore> semaphore;
  // A live mongoelector_semaphore_lease keeps this handle's slot alive (one at a time).
  std::atomic<bool> has_lease{false};
};

struct mongoelector_semaphore_lease {
  std::uint64_t magic = mongoelector::capi::kSemaphoreLeaseMagic;
  mongoelector_semaphore* semaphore = nullptr;  // outlives the lease (caller's contract)
  std::unique_ptr<mongoelector::SemaphoreLease> lease;
};

namespace {

mongoelector_semaphore& checked_semaphore(mongoelector_semaphore* h) {
  require(h != nullptr, "semaphore is NULL");
  require(h->magic == mongoelector::capi::kSemaphoreMagic,
          "semaphore is not a live mongoelector_semaphore (freed?)");
  return *h;
}

mongoelector::SemaphoreOptions to_core(const char* key, const mongoelector_semaphore_config* c) {
  mongoelector::SemaphoreOptions o;
  o.key = mongoelector::capi::checked_key(key);
  if (c == nullptr) return o;
  mongoelector::capi::check_struct_version(c->version, MONGOELECTOR_SEMAPHORE_CONFIG_VERSION,
                                           "mongoelector_semaphore_config_init");
  if (c->collection != nullptr) {
    o.collection = c->collection;
    require(mongoelector::is_valid_utf8(o.collection), "collection is not valid UTF-8");
  }
  // limit, ttl and max_offset are checked by the Semaphore itself, before any I/O.
  o.limit = c->limit;
  o.ttl_s = c->ttl_seconds;
  o.timeparanoid = c->timeparanoid != 0;
  o.maxoffset_s = c->max_offset_seconds;
  o.allow_unsafe_server = c->allow_unsafe_server != 0;
  return o;
}

char* malloc_string(const std::string& s) { return mongoelector::capi::json::malloc_copy(s); }

mongoelector_semaphore_lease& checked_lease(mongoelector_semaphore_lease* h) {
  require(h != nullptr, "semaphore lease is NULL");
  require(h->magic == mongoelector::capi::kSemaphoreLeaseMagic,
          "semaphore lease is not a live mongoelector_semaphore_lease (freed?)");
  return *h;
}

}  // namespace

extern "C" {

MONGOELECTOR_API mongoelector_status
mongoelector_semaphore_config_init(mongoelector_semaphore_config* config, uint32_t version) {
  return guard([&] {
    require(config != nullptr, "config is NULL");
    mongoelector::capi::check_struct_version(version, MONGOELECTOR_SEMAPHORE_CONFIG_VERSION,
                                             "mongoelector_semaphore_config_init");
    using D = mongoelector::SemaphoreDefaults;
    config->version = version;
    config->collection = nullptr;
    config->limit = 1;
    config->ttl_seconds = D::ttl_s;
    config->timeparanoid = D::timeparanoid ? 1 : 0;
    config->max_offset_seconds = D::maxoffset_s;
    config->allow_unsafe_server = D::allow_unsafe_server ? 1 : 0;
    config->op_timeout_seconds = 0;
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_semaphore_new(
    mongoelector_client* client, const char* key, const mongoelector_semaphore_config* config,
    mongoelector_semaphore** out) {
  return guard([&] {
    auto& c = checked(client);
    require(out != nullptr, "out is NULL");
    auto opts = to_core(key, config);
    const auto op_ms = mongoelector::capi::op_timeout_ms(
        config != nullptr ? config->op_timeout_seconds : 0, opts.ttl_s);
    auto h = std::make_unique<mongoelector_semaphore>();
    h->storage = c.client->open_storage(op_ms);
    h->semaphore = std::make_unique<mongoelector::Semaphore>(h->storage, std::move(opts));
    *out = h.release();
  });
}

MONGOELECTOR_API void mongoelector_semaphore_free(mongoelector_semaphore* semaphore) {
  if (semaphore == nullptr || semaphore->magic != mongoelector::capi::kSemaphoreMagic) return;
  semaphore->magic = mongoelector::capi::kFreedMagic;
  try {
    delete semaphore;
  } catch (...) {
  }
}

MONGOELECTOR_API mongoelector_status
mongoelector_semaphore_acquire(mongoelector_semaphore* semaphore,
                               const mongoelector_acquire_options* options, int64_t* fence_out) {
  return guard([&] {
    auto& h = checked_semaphore(semaphore);
    const auto args = mongoelector::capi::to_acquire_args(options);
    require(!args.force, "a semaphore slot cannot be forced (force must be 0)");
    const std::int64_t fence = h.semaphore->acquire(args.blocking, args.timeout_s, args.step_s,
                                                    mongoelector::capi::cancel_fn(args));
    if (fence_out != nullptr) *fence_out = fence;
  });
}

MONGOELECTOR_API mongoelector_status
mongoelector_semaphore_release(mongoelector_semaphore* semaphore) {
  return guard([&] { checked_semaphore(semaphore).semaphore->release(); });
}

MONGOELECTOR_API mongoelector_status mongoelector_semaphore_touch(mongoelector_semaphore* semaphore,
                                                                  int* renewed_out,
                                                                  int64_t* expire_ms_out) {
  return guard([&] {
    auto& h = checked_semaphore(semaphore);
    require(renewed_out != nullptr, "renewed_out is NULL");
    const auto expire = h.semaphore->touch();
    *renewed_out = expire ? 1 : 0;
    if (expire_ms_out != nullptr) *expire_ms_out = expire.value_or(0);
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_semaphore_fence(mongoelector_semaphore* semaphore,
                                                                  int64_t* out) {
  return guard([&] {
    auto& h = checked_semaphore(semaphore);
    require(out != nullptr, "out is NULL");
    *out = h.semaphore->fence();
  });
}

MONGOELECTOR_API mongoelector_status
mongoelector_semaphore_holders(mongoelector_semaphore* semaphore,
                               mongoelector_semaphore_holder** holders_out, size_t* count_out) {
  return guard([&] {
    auto& h = checked_semaphore(semaphore);
    require(holders_out != nullptr, "holders_out is NULL");
    require(count_out != nullptr, "count_out is NULL");
    const std::vector<mongoelector::SemaphoreSlot> slots = h.semaphore->holders();
    *holders_out = nullptr;
    *count_out = 0;
    if (slots.empty()) return;
    auto* arr = static_cast<mongoelector_semaphore_holder*>(
        std::calloc(slots.size(), sizeof(mongoelector_semaphore_holder)));
    if (arr == nullptr) throw std::bad_alloc();
    std::size_t filled = 0;
    try {
      for (const auto& s : slots) {
        mongoelector_semaphore_holder& out = arr[filled];
        out.uuid = malloc_string(s.uuid);
        out.host = malloc_string(s.host);
        out.pid = s.pid;
        out.fence = s.fence;
        out.created_ms = s.ts_created ? s.ts_created->ms : 0;
        out.expire_ms = s.ts_expire ? s.ts_expire->ms : 0;
        ++filled;
      }
    } catch (...) {
      mongoelector_semaphore_holders_free(arr, filled + 1);  // calloc'd: NULLs are safe
      throw;
    }
    *holders_out = arr;
    *count_out = filled;
  });
}

MONGOELECTOR_API void mongoelector_semaphore_holders_free(mongoelector_semaphore_holder* holders,
                                                          size_t count) {
  if (holders == nullptr) return;
  for (size_t i = 0; i < count; ++i) {
    std::free(holders[i].uuid);
    std::free(holders[i].host);
  }
  std::free(holders);
}

MONGOELECTOR_API mongoelector_status mongoelector_semaphore_lease_acquire(
    mongoelector_semaphore* semaphore, const mongoelector_acquire_options* acquire,
    mongoelector_lease_lost_fn on_lost, void* user_data, mongoelector_semaphore_lease** out) {
  return guard([&] {
    auto& h = checked_semaphore(semaphore);
    require(out != nullptr, "out is NULL");
    const auto args = mongoelector::capi::to_acquire_args(acquire);
    require(!args.force, "a semaphore slot cannot be forced (force must be 0)");
    mongoelector::KeepAliveOptions ko;
    ko.blocking = args.blocking;
    ko.timeout_s = args.timeout_s;
    ko.step_s = args.step_s;
    ko.cancel = mongoelector::capi::cancel_fn(args);
    if (on_lost != nullptr) ko.on_lost = [on_lost, user_data] { on_lost(user_data); };
    bool expected = false;
    if (!h.has_lease.compare_exchange_strong(expected, true))
      throw mongoelector::InvalidArgument(
          "this semaphore already has a live lease (free it first: one lease per handle)");
    try {
      auto handle = std::make_unique<mongoelector_semaphore_lease>();
      handle->semaphore = semaphore;
      // The handle owns the Semaphore; the lease borrows it (the handle outlives the lease).
      std::shared_ptr<mongoelector::Semaphore> borrowed(h.semaphore.get(),
                                                        [](mongoelector::Semaphore*) {});
      handle->lease = mongoelector::SemaphoreLease::acquire(std::move(borrowed), std::move(ko));
      *out = handle.release();
    } catch (...) {
      h.has_lease.store(false);
      throw;
    }
  });
}

MONGOELECTOR_API mongoelector_status
mongoelector_semaphore_lease_fence(mongoelector_semaphore_lease* lease, int64_t* out) {
  return guard([&] {
    auto& h = checked_lease(lease);
    require(out != nullptr, "out is NULL");
    *out = h.lease->fence();
  });
}

MONGOELECTOR_API mongoelector_status
mongoelector_semaphore_lease_lost(mongoelector_semaphore_lease* lease, int* out) {
  return guard([&] {
    auto& h = checked_lease(lease);
    require(out != nullptr, "out is NULL");
    *out = h.lease->lost() ? 1 : 0;
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_semaphore_lease_wait_lost(
    mongoelector_semaphore_lease* lease, double timeout_seconds, int* lost_out) {
  return guard([&] {
    auto& h = checked_lease(lease);
    require(lost_out != nullptr, "lost_out is NULL");
    require(!std::isnan(timeout_seconds), "timeout_seconds is NaN");
    std::optional<std::int64_t> timeout_ms;
    if (timeout_seconds >= 0 && std::isfinite(timeout_seconds))
      timeout_ms = static_cast<std::int64_t>(std::ceil(std::min(timeout_seconds, 1e12) * 1000.0));
    *lost_out = h.lease->wait_lost(timeout_ms) ? 1 : 0;
  });
}

MONGOELECTOR_API void mongoelector_semaphore_lease_free(mongoelector_semaphore_lease* lease) {
  if (lease == nullptr || lease->magic != mongoelector::capi::kSemaphoreLeaseMagic) return;
  lease->magic = mongoelector::capi::kFreedMagic;
  try {
    lease->lease->close();  // stops renewing; releases the slot (fenced) unless lost
  } catch (...) {
  }
  try {
    lease->lease.reset();
  } catch (...) {
  }
  if (lease->semaphore != nullptr && lease->semaphore->magic == mongoelector::capi::kSemaphoreMagic)
    lease->semaphore->has_lease.store(false);
  delete lease;
}

}  // extern "C"
