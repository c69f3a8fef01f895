// mongoelector_locker_*: a mongoelector::Locker on its own Storage from the client.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include "exceptions.h"
#include "handles.h"
#include "json.h"
#include "utf8.h"

using mongoelector::capi::checked;
using mongoelector::capi::guard;
using mongoelector::capi::read_out;
using mongoelector::capi::require;

namespace {

// Reads the fields that exist in the caller's options version (only ever appended).
mongoelector::LockerOptions to_core(const char* key, const mongoelector_locker_options* o) {
  mongoelector::LockerOptions opts;
  opts.key = mongoelector::capi::checked_key(key);
  if (o == nullptr) return opts;
  mongoelector::capi::check_options_version(o->version, MONGOELECTOR_LOCKER_OPTIONS_VERSION,
                                            "locker");
  if (o->collection != nullptr) {
    opts.collection = o->collection;  // the core checks it is a usable name
    require(mongoelector::is_valid_utf8(opts.collection), "collection is not valid UTF-8");
  }
  // ttl and max_offset are checked by the Locker itself, before any I/O.
  opts.ttl_s = o->ttl_seconds;
  opts.timeparanoid = o->timeparanoid != 0;
  opts.maxoffset_s = o->max_offset_seconds;
  opts.delete_on_release = o->delete_on_release != 0;
  opts.allow_unsafe_server = o->allow_unsafe_server != 0;
  return opts;
}

// A 1.1 config (NULL: defaults) as core options.
mongoelector::LockerOptions to_core(const char* key, const mongoelector_locker_config* c) {
  mongoelector_locker_options o;
  mongoelector_locker_options_init(&o);
  if (c != nullptr) {
    mongoelector::capi::check_struct_version(c->version, MONGOELECTOR_LOCKER_CONFIG_VERSION,
                                             "mongoelector_locker_config_init");
    o.collection = c->collection;
    o.ttl_seconds = c->ttl_seconds;
    o.timeparanoid = c->timeparanoid;
    o.max_offset_seconds = c->max_offset_seconds;
    o.delete_on_release = c->delete_on_release;
    o.allow_unsafe_server = c->allow_unsafe_server;
  }
  auto opts = to_core(key, &o);
  if (c != nullptr && c->version >= 2) opts.fair = c->fair != 0;  // version 1: off
  return opts;
}

std::unique_ptr<mongoelector_locker> open_locker(mongoelector_client* client,
                                                 mongoelector::LockerOptions opts,
                                                 std::int64_t op_timeout_ms) {
  auto& c = checked(client);
  auto h = std::make_unique<mongoelector_locker>();
  // Borrows the client's pool (MongoDB) or connection (SQLite).
  h->storage = c.client->open_storage(op_timeout_ms);
  // Validates the collection name and ensures the TTL index (one round trip).
  h->locker = std::make_unique<mongoelector::Locker>(h->storage, std::move(opts));
  return h;
}

char* malloc_string(const std::string& s) { return mongoelector::capi::json::malloc_copy(s); }

// Copies into a fixed buffer, always NUL-terminated, truncated if needed.
template <std::size_t N>
void copy_truncated(char (&dst)[N], const std::string& src) {
  const std::size_t n = std::min(src.size(), N - 1);
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

// *details and *found_out from a lock document (nullopt: not held); see
// mongoelector_locker_current_details.
void fill_details(const std::optional<mongoelector::LockDoc>& doc,
                  mongoelector_lock_details* details, int* found_out) {
  if (!doc) {
    details->uuid = nullptr;
    details->host = nullptr;
    details->pid = details->created_ms = details->expire_ms = details->fence = 0;
    *found_out = 0;
    return;
  }
  std::unique_ptr<char, decltype(&std::free)> uuid(malloc_string(doc->uuid), &std::free);
  std::unique_ptr<char, decltype(&std::free)> host(malloc_string(doc->host), &std::free);
  details->uuid = uuid.release();
  details->host = host.release();
  details->pid = doc->pid;
  details->created_ms = doc->ts_created ? doc->ts_created->ms : 0;
  details->expire_ms = doc->ts_expire ? doc->ts_expire->ms : 0;
  details->fence = doc->fence;
  *found_out = 1;
}

}  // namespace

extern "C" {

MONGOELECTOR_API void mongoelector_locker_options_init(mongoelector_locker_options* options) {
  if (options == nullptr) return;
  // Constants only: nothing here may throw (no guard; building a LockerOptions would
  // allocate std::strings outside one).
  using D = mongoelector::LockerDefaults;
  options->version = MONGOELECTOR_LOCKER_OPTIONS_VERSION;
  options->collection = nullptr;
  options->ttl_seconds = D::ttl_s;
  options->timeparanoid = D::timeparanoid ? 1 : 0;
  options->max_offset_seconds = D::maxoffset_s;
  options->delete_on_release = D::delete_on_release ? 1 : 0;
  options->allow_unsafe_server = D::allow_unsafe_server ? 1 : 0;
}

MONGOELECTOR_API mongoelector_status
mongoelector_locker_new(mongoelector_client* client, const char* key,
                        const mongoelector_locker_options* options, mongoelector_locker** out) {
  return guard([&] {
    checked(client);
    require(out != nullptr, "out is NULL");
    auto opts = to_core(key, options);
    const auto op_ms = mongoelector::op_timeout_ms_for_ttl(opts.ttl_s);
    *out = open_locker(client, std::move(opts), op_ms).release();
  });
}

MONGOELECTOR_API mongoelector_status
mongoelector_locker_config_init(mongoelector_locker_config* config, uint32_t version) {
  return guard([&] {
    require(config != nullptr, "config is NULL");
    mongoelector::capi::check_struct_version(version, MONGOELECTOR_LOCKER_CONFIG_VERSION,
                                             "mongoelector_locker_config_init");
    using D = mongoelector::LockerDefaults;
    // Version 1 fields; a later version sets its appended fields under `if (version >= N)`.
    config->version = version;
    config->collection = nullptr;
    config->ttl_seconds = D::ttl_s;
    config->timeparanoid = D::timeparanoid ? 1 : 0;
    config->max_offset_seconds = D::maxoffset_s;
    config->delete_on_release = D::delete_on_release ? 1 : 0;
    config->allow_unsafe_server = D::allow_unsafe_server ? 1 : 0;
    config->op_timeout_seconds = 0;
    if (version >= 2) config->fair = 0;
  });
}

MONGOELECTOR_API mongoelector_status
mongoelector_locker_new_with(mongoelector_client* client, const char* key,
                             const mongoelector_locker_config* config, mongoelector_locker** out) {
  return guard([&] {
    checked(client);
    require(out != nullptr, "out is NULL");
    auto opts = to_core(key, config);
    const auto op_ms = mongoelector::capi::op_timeout_ms(
        config != nullptr ? config->op_timeout_seconds : 0, opts.ttl_s);
    *out = open_locker(client, std::move(opts), op_ms).release();
  });
}

MONGOELECTOR_API mongoelector_status
mongoelector_acquire_options_init(mongoelector_acquire_options* options, uint32_t version) {
  return guard([&] {
    require(options != nullptr, "options is NULL");
    mongoelector::capi::check_struct_version(version, MONGOELECTOR_ACQUIRE_OPTIONS_VERSION,
                                             "mongoelector_acquire_options_init");
    options->version = version;
    options->blocking = 1;
    options->timeout_seconds = -1;
    options->step_seconds = 0.25;
    options->force = 0;
    options->cancel = nullptr;
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_locker_acquire_with(
    mongoelector_locker* locker, const mongoelector_acquire_options* options, int64_t* fence_out) {
  return guard([&] {
    auto& h = checked(locker);
    const auto args = mongoelector::capi::to_acquire_args(options);
    // No handle mutex: the core Locker is thread-safe, so other calls on this locker
    // answer while the wait goes on.
    const std::int64_t fence = h.locker->acquire(args.blocking, args.timeout_s, args.step_s,
                                                 args.force, mongoelector::capi::cancel_fn(args));
    if (fence_out != nullptr) *fence_out = fence;
  });
}

MONGOELECTOR_API void mongoelector_locker_free(mongoelector_locker* locker) {
  if (locker == nullptr || locker->magic != mongoelector::capi::kLockerMagic) return;
  locker->magic = mongoelector::capi::kFreedMagic;
  try {
    delete locker;
  } catch (...) {
  }
}

MONGOELECTOR_API mongoelector_status mongoelector_locker_acquire(mongoelector_locker* locker,
                                                                 int blocking,
                                                                 double timeout_seconds,
                                                                 double step_seconds, int force,
                                                                 int64_t* fence_out) {
  return guard([&] {
    auto& h = checked(locker);
    require(!std::isnan(timeout_seconds), "timeout_seconds is NaN");
    std::optional<double> timeout;
    // Negative means "none"; +infinity is the same wait.
    if (timeout_seconds >= 0 && std::isfinite(timeout_seconds)) timeout = timeout_seconds;
    if (!blocking) {
      require(timeout_seconds < 0, "blocking=0 takes no timeout: pass a negative timeout_seconds");
    } else {
      mongoelector::capi::require_positive_duration(step_seconds, "step_seconds");
    }
    std::lock_guard<std::mutex> g(h.mu);
    // A cancel that arrived before this call is consumed here, so it is never lost.
    if (blocking && h.cancel_requested.exchange(false)) {
      throw mongoelector::Cancelled("acquire cancelled by mongoelector_locker_cancel()");
    }
    mongoelector::CancelFn cancel;
    if (blocking) cancel = [&h] { return h.cancel_requested.exchange(false); };
    const std::int64_t fence = h.locker->acquire(
        blocking != 0, timeout, blocking ? step_seconds : 0.25, force != 0, cancel);
    if (fence_out != nullptr) *fence_out = fence;
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_locker_cancel(mongoelector_locker* locker) {
  return guard([&] { checked(locker).cancel_requested.store(true); });
}

MONGOELECTOR_API mongoelector_status mongoelector_locker_release(mongoelector_locker* locker,
                                                                 int force) {
  return guard([&] {
    auto& h = checked(locker);
    std::lock_guard<std::mutex> g(h.mu);
    h.locker->release(force != 0);
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_locker_release_min_hold(
    mongoelector_locker* locker, double min_hold_seconds, int64_t* frees_at_ms_out) {
  return guard([&] {
    auto& h = checked(locker);
    std::lock_guard<std::mutex> g(h.mu);
    const auto frees_at = h.locker->release_min_hold(min_hold_seconds);
    if (frees_at_ms_out != nullptr) *frees_at_ms_out = frees_at.value_or(0);
  });
}

MONGOELECTOR_API mongoelector_status
mongoelector_locker_claim_window(mongoelector_locker* locker, double window_seconds,
                                 int* claimed_out, int64_t* window_start_ms_out) {
  return guard([&] {
    auto& h = checked(locker);
    require(claimed_out != nullptr, "claimed_out is NULL");
    const auto start = h.locker->claim_window(window_seconds);
    *claimed_out = start ? 1 : 0;
    if (window_start_ms_out != nullptr) *window_start_ms_out = start.value_or(0);
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_locker_touch(mongoelector_locker* locker,
                                                               int* renewed_out,
                                                               int64_t* expire_ms_out) {
  return guard([&] {
    auto& h = checked(locker);
    require(renewed_out != nullptr, "renewed_out is NULL");
    std::lock_guard<std::mutex> g(h.mu);
    const auto expire = h.locker->touch();
    *renewed_out = expire ? 1 : 0;
    if (expire_ms_out != nullptr) *expire_ms_out = expire.value_or(0);
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_locker_locked(mongoelector_locker* locker,
                                                                int* out) {
  return read_out(locker, out, [](auto& h) {
    std::lock_guard<std::mutex> g(h.mu);
    return h.locker->locked() ? 1 : 0;
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_locker_owned(mongoelector_locker* locker,
                                                               int* out) {
  return read_out(locker, out, [](auto& h) {
    std::lock_guard<std::mutex> g(h.mu);
    return h.locker->owned() ? 1 : 0;
  });
}

// Local reads (fence, uuid) skip the handle mutex so they answer while an acquire blocks.
MONGOELECTOR_API mongoelector_status mongoelector_locker_fence(mongoelector_locker* locker,
                                                               int64_t* out) {
  return read_out(locker, out, [](auto& h) { return h.locker->fence(); });
}

MONGOELECTOR_API mongoelector_status mongoelector_locker_uuid(mongoelector_locker* locker,
                                                              const char** out) {
  return read_out(locker, out, [](auto& h) { return h.locker->identity().uuid.c_str(); });
}

MONGOELECTOR_API mongoelector_status mongoelector_locker_verify_time(mongoelector_locker* locker,
                                                                     double* offset_seconds_out) {
  return guard([&] {
    auto& h = checked(locker);
    std::lock_guard<std::mutex> g(h.mu);
    try {
      const double offset = h.locker->verify_time();
      if (offset_seconds_out != nullptr) *offset_seconds_out = offset;
    } catch (const mongoelector::TimeOffsetError& e) {
      // The offset is written in both cases (see the header).
      if (offset_seconds_out != nullptr) *offset_seconds_out = e.offset_s();
      throw;
    }
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_locker_current(mongoelector_locker* locker,
                                                                 mongoelector_lock_info* out,
                                                                 int* found_out) {
  return guard([&] {
    auto& h = checked(locker);
    require(out != nullptr, "out is NULL");
    require(found_out != nullptr, "found_out is NULL");
    std::optional<mongoelector::LockDoc> doc;
    {
      std::lock_guard<std::mutex> g(h.mu);
      doc = h.locker->current();
    }
    if (!doc) {
      *found_out = 0;
      return;
    }
    mongoelector_lock_info info{};
    copy_truncated(info.uuid, doc->uuid);
    copy_truncated(info.host, doc->host);
    info.pid = doc->pid;
    info.created_ms = doc->ts_created ? doc->ts_created->ms : 0;
    info.expire_ms = doc->ts_expire ? doc->ts_expire->ms : 0;
    info.fence = doc->fence;
    *out = info;
    *found_out = 1;
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_locker_current_details(
    mongoelector_locker* locker, mongoelector_lock_details* details, int* found_out) {
  return guard([&] {
    auto& h = checked(locker);
    require(details != nullptr, "details is NULL");
    require(found_out != nullptr, "found_out is NULL");
    require(details->version >= 1,
            "details->version is not set: set it to MONGOELECTOR_LOCK_DETAILS_VERSION");
    fill_details(h.locker->current(), details, found_out);  // thread-safe; no handle mutex
  });
}

MONGOELECTOR_API mongoelector_status
mongoelector_client_read_lock(mongoelector_client* client, const char* collection, const char* key,
                              mongoelector_lock_details* details, int* found_out) {
  return guard([&] {
    checked(client);
    require(details != nullptr, "details is NULL");
    require(found_out != nullptr, "found_out is NULL");
    require(details->version >= 1,
            "details->version is not set: set it to MONGOELECTOR_LOCK_DETAILS_VERSION");
    mongoelector_locker_options o;
    mongoelector_locker_options_init(&o);
    o.collection = collection;
    auto opts = to_core(key, &o);
    // A locker that never writes: no index (the one write its constructor may send), and
    // current() only reads the document and samples the server's clock.
    opts.ensure_indexes = false;
    const auto op_ms = mongoelector::op_timeout_ms_for_ttl(opts.ttl_s);
    auto h = open_locker(client, std::move(opts), op_ms);
    fill_details(h->locker->current(), details, found_out);
  });
}

MONGOELECTOR_API void mongoelector_lock_details_clear(mongoelector_lock_details* details) {
  if (details == nullptr) return;
  std::free(details->uuid);
  std::free(details->host);
  details->uuid = nullptr;
  details->host = nullptr;
}

}  // extern "C"
