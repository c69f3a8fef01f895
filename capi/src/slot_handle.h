// What the handles of the features built on the slot document (core/semaphore/
// slot_holder.h) share in the C API -- mongoelector_semaphore (semaphore.cpp) and
// mongoelector_rwlock (rwlock.cpp) --: a core SlotHolder on its own Storage from the
// client, at most one live keep-alive lease, and the calls that do not depend on the
// claim rule (free, release, touch, fence, the holder records), written here once.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "handles.h"
#include "json.h"
#include "semaphore/slot_holder.h"
#include "utf8.h"

namespace mongoelector::capi {

template <class Core>
struct SlotHandle {
  explicit SlotHandle(std::uint64_t m) : magic(m) {}
  std::uint64_t magic;
  std::shared_ptr<Storage> storage;
  // The core holder is thread-safe (one claim at a time per instance): no handle mutex,
  // so fence/holders answer while an acquire waits.
  std::unique_ptr<Core> core;
  // A live lease keeps this handle's hold alive (one at a time: lease_handle.h).
  std::atomic<bool> has_lease{false};
};

// The options every slot feature's config has (collection, ttl, the clock checks, unsafe
// servers; `latest` and `init_name`: its version check), from `c` (NULL: the defaults).
// Numbers are checked by the core holder, before any I/O.
template <class Options, class Config>
Options slot_options(const char* key, const Config* c, std::uint32_t latest,
                     const char* init_name) {
  Options o;
  o.key = checked_key(key);
  if (c == nullptr) return o;
  check_struct_version(c->version, latest, init_name);
  if (c->collection != nullptr) {
    o.collection = c->collection;
    require(is_valid_utf8(o.collection), "collection is not valid UTF-8");
  }
  o.ttl_s = c->ttl_seconds;
  o.timeparanoid = c->timeparanoid != 0;
  o.maxoffset_s = c->max_offset_seconds;
  o.allow_unsafe_server = c->allow_unsafe_server != 0;
  return o;
}

// *_config_init's common part: the version and those fields' defaults (`D`).
template <class D, class Config>
void init_slot_config(Config* config, std::uint32_t version, std::uint32_t latest,
                      const char* init_name) {
  require(config != nullptr, "config is NULL");
  check_struct_version(version, latest, init_name);
  config->version = version;
  config->collection = nullptr;
  config->ttl_seconds = D::ttl_s;
  config->timeparanoid = D::timeparanoid ? 1 : 0;
  config->max_offset_seconds = D::maxoffset_s;
  config->allow_unsafe_server = D::allow_unsafe_server ? 1 : 0;
  config->op_timeout_seconds = 0;
}

// *_new: a handle whose storage comes from `client` (the config's op_timeout_seconds, 0:
// the ttl's default) and whose core holder is made from `options`.
template <class Handle, class Config, class Options>
void new_slot_handle(mongoelector_client* client, const Config* config, Options options,
                     Handle** out) {
  auto& c = checked(client);
  require(out != nullptr, "out is NULL");
  const double op_s = config != nullptr ? config->op_timeout_seconds : 0;
  auto h = std::make_unique<Handle>();
  h->storage = c.client->open_storage(op_timeout_ms(op_s, options.ttl_s));
  h->core =
      std::make_unique<typename decltype(h->core)::element_type>(h->storage, std::move(options));
  *out = h.release();
}

// *_free: poisons and deletes a live handle of `magic` (NULL and dead handles ignored);
// does NOT release a hold (it ends at its ttl).
template <class Handle>
void free_slot_handle(Handle* h, std::uint64_t magic) noexcept {
  if (h == nullptr || h->magic != magic) return;
  h->magic = kFreedMagic;
  try {
    delete h;
  } catch (...) {
  }
}

// *_touch: renews the holder's hold to now + ttl (SlotHolder::touch).
void touch_slot(SlotHolder& holder, int* renewed_out, int64_t* expire_ms_out);

// The C holder records (mongoelector_semaphore_holder, mongoelector_rwlock_holder: uuid,
// host, pid, fence, created_ms, expire_ms) of `slots`, as a calloc'd array the caller
// frees with free_holder_records; `more(record, i)` fills a record's other fields.
// Empty: NULL.
void fill_holder_strings(char*& uuid, char*& host, const SemaphoreSlot& s);
template <class Record>
void free_holder_records(Record* records, std::size_t count) noexcept {
  if (records == nullptr) return;
  for (std::size_t i = 0; i < count; ++i) {
    std::free(records[i].uuid);
    std::free(records[i].host);
  }
  std::free(records);
}
template <class Record, class More>
Record* holder_records(const std::vector<SemaphoreSlot>& slots, More&& more) {
  if (slots.empty()) return nullptr;
  auto* arr = static_cast<Record*>(std::calloc(slots.size(), sizeof(Record)));
  if (arr == nullptr) throw std::bad_alloc();
  std::size_t filled = 0;
  try {
    for (const SemaphoreSlot& s : slots) {
      Record& out = arr[filled];
      fill_holder_strings(out.uuid, out.host, s);
      out.pid = s.pid;
      out.fence = s.fence;
      out.created_ms = s.ts_created ? s.ts_created->ms : 0;
      out.expire_ms = s.ts_expire ? s.ts_expire->ms : 0;
      more(out, filled);
      ++filled;
    }
  } catch (...) {
    free_holder_records(arr, filled + 1);  // calloc'd: NULLs are safe
    throw;
  }
  return arr;
}

}  // namespace mongoelector::capi
