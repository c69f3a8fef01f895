// mongoelector_elector_*: a mongoelector::Elector on its own Storage from the client.
#include <memory>

#include "exceptions.h"
#include "handles.h"
#include "json.h"
#include "storage/extended_json.h"
#include "utf8.h"

using mongoelector::capi::checked;
using mongoelector::capi::read_out;
using mongoelector::capi::guard;
using mongoelector::capi::require;

namespace {

std::function<void()> wrap(mongoelector_callback_fn fn, void* user_data) {
  if (fn == nullptr) return {};
  return [fn, user_data] { fn(user_data); };
}

// Reads the fields that exist in the caller's options version (only ever appended).
void to_core(const char* key, const mongoelector_elector_options* o,
             mongoelector::ElectorOptions& opts, mongoelector::ElectorCallbacks& callbacks) {
  opts.key = mongoelector::capi::checked_key(key);
  if (o == nullptr) return;
  mongoelector::capi::check_options_version(o->version, MONGOELECTOR_ELECTOR_OPTIONS_VERSION,
                                            "elector");
  opts.ttl_s = o->ttl_seconds;  // checked by the core, before any I/O
  opts.report_status = o->report_status != 0;
  if (o->app_version != nullptr) {
    std::string v(o->app_version);
    require(mongoelector::is_valid_utf8(v), "app_version is not valid UTF-8");
    opts.app_version = std::move(v);
  }
  opts.allow_unsafe_server = o->allow_unsafe_server != 0;
  callbacks.on_leader = wrap(o->on_leader, o->user_data);
  callbacks.on_leader_loss = wrap(o->on_leader_loss, o->user_data);
  callbacks.on_loop = wrap(o->on_loop, o->user_data);
}


}  // namespace

extern "C" {

MONGOELECTOR_API void mongoelector_elector_options_init(mongoelector_elector_options* options) {
  if (options == nullptr) return;
  // Constants only: nothing here may throw (see mongoelector_locker_options_init).
  using D = mongoelector::ElectorDefaults;
  options->version = MONGOELECTOR_ELECTOR_OPTIONS_VERSION;
  options->ttl_seconds = D::ttl_s;
  options->report_status = D::report_status ? 1 : 0;
  options->app_version = nullptr;
  options->on_leader = nullptr;
  options->on_leader_loss = nullptr;
  options->on_loop = nullptr;
  options->user_data = nullptr;
  options->allow_unsafe_server = D::allow_unsafe_server ? 1 : 0;
}

MONGOELECTOR_API mongoelector_status mongoelector_elector_new(mongoelector_client* client,
                                                              const char* key,
                                                              const mongoelector_elector_options* options,
                                                              mongoelector_elector** out) {
  return guard([&] {
    auto& c = checked(client);
    require(out != nullptr, "out is NULL");
    mongoelector::ElectorOptions opts;
    mongoelector::ElectorCallbacks callbacks;
    to_core(key, options, opts, callbacks);
    auto h = std::make_unique<mongoelector_elector>();
    // Borrows the client's pool (MongoDB) or connection (SQLite).
    h->storage = c.client->open_storage(mongoelector::op_timeout_ms_for_ttl(opts.ttl_s));
    h->elector = std::make_unique<mongoelector::Elector>(h->storage, std::move(opts),
                                                         std::move(callbacks));
    *out = h.release();
  });
}

MONGOELECTOR_API void mongoelector_elector_free(mongoelector_elector* elector) {
  if (elector == nullptr || elector->magic != mongoelector::capi::kElectorMagic) return;
  elector->magic = mongoelector::capi::kFreedMagic;
  try {
    elector->elector->stop();  // releases leadership, fires on_leader_loss if it led
  } catch (...) {
    // Storage errors during the release are logged by the core; freeing goes on.
  }
  try {
    delete elector;
  } catch (...) {
  }
}

MONGOELECTOR_API mongoelector_status mongoelector_elector_start(mongoelector_elector* elector) {
  return guard([&] { checked(elector).elector->start(); });
}

MONGOELECTOR_API mongoelector_status mongoelector_elector_stop(mongoelector_elector* elector) {
  return guard([&] { checked(elector).elector->stop(); });
}

MONGOELECTOR_API mongoelector_status mongoelector_elector_poll(mongoelector_elector* elector) {
  return guard([&] { checked(elector).elector->poll(); });
}

MONGOELECTOR_API mongoelector_status mongoelector_elector_release(mongoelector_elector* elector) {
  return guard([&] { checked(elector).elector->release(); });
}

MONGOELECTOR_API mongoelector_status mongoelector_elector_is_leader(mongoelector_elector* elector,
                                                                    int* out) {
  return read_out(elector, out, [](auto& h) { return h.elector->is_leader() ? 1 : 0; });
}

MONGOELECTOR_API mongoelector_status mongoelector_elector_leader_exists(mongoelector_elector* elector,
                                                                        int* out) {
  return read_out(elector, out, [](auto& h) { return h.elector->leader_exists() ? 1 : 0; });
}

MONGOELECTOR_API mongoelector_status mongoelector_elector_running(mongoelector_elector* elector,
                                                                  int* out) {
  return read_out(elector, out, [](auto& h) { return h.elector->running() ? 1 : 0; });
}

MONGOELECTOR_API mongoelector_status mongoelector_elector_poll_wait(mongoelector_elector* elector,
                                                                    double* out) {
  return read_out(elector, out, [](auto& h) { return h.elector->poll_wait(); });
}

MONGOELECTOR_API mongoelector_status mongoelector_elector_fence(mongoelector_elector* elector,
                                                                int64_t* out) {
  // The locker may still remember a hold after a local step-down: only a current
  // leadership has a token.
  return read_out(elector, out, [](auto& h) -> int64_t {
    return h.elector->is_leader() ? h.elector->locker().fence() : 0;
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_elector_uuid(mongoelector_elector* elector,
                                                              const char** out) {
  return read_out(elector, out,
                  [](auto& h) { return h.elector->locker().identity().uuid.c_str(); });
}

MONGOELECTOR_API mongoelector_status mongoelector_elector_node_status(mongoelector_elector* elector,
                                                                      char** json_out) {
  return guard([&] {
    auto& h = checked(elector);
    require(json_out != nullptr, "json_out is NULL");
    *json_out = mongoelector::capi::json::malloc_copy(
        mongoelector::to_extended_json(h.elector->node_status()));
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_elector_cluster_detail(mongoelector_elector* elector,
                                                                         char** json_out) {
  return guard([&] {
    auto& h = checked(elector);
    require(json_out != nullptr, "json_out is NULL");
    *json_out = mongoelector::capi::json::malloc_copy(
        mongoelector::capi::json::cluster_detail(h.elector->cluster_detail()));
  });
}

}  // extern "C"
