// mongoelector_elector_*: a mongoelector::Elector on its own Storage from the client.
#include <chrono>
#include <memory>
#include <thread>

#include "exceptions.h"
#include "handles.h"
#include "json.h"
#include "storage/extended_json.h"
#include "utf8.h"

using mongoelector::capi::checked;
using mongoelector::capi::guard;
using mongoelector::capi::read_out;
using mongoelector::capi::require;

namespace {

using Shared = mongoelector_elector::Shared;

// The handle whose callback this thread is running, if any (elector_free from inside it).
thread_local const Shared* t_dispatching = nullptr;

std::function<void()> wrap(mongoelector_callback_fn fn, void* user_data,
                           const std::shared_ptr<Shared>& shared) {
  if (fn == nullptr) return {};
  return [fn, user_data, shared] {
    // Counted before the check, so that a free from another callback that cleared the
    // flag can wait for this one (see mongoelector_elector_free).
    shared->callbacks_running++;
    const Shared* outer = t_dispatching;
    struct Restore {
      Shared* shared;
      const Shared* outer;
      ~Restore() {
        t_dispatching = outer;
        shared->callbacks_running--;
      }
    } restore{shared.get(), outer};
    if (!shared->callbacks_enabled.load()) return;  // freed from a callback
    t_dispatching = shared.get();
    fn(user_data);
  };
}

// Counts a call that may run callbacks, so that a deferred free waits for it to return.
struct InFlight {
  std::shared_ptr<Shared> shared;
  explicit InFlight(mongoelector_elector& h) : shared(h.shared) { shared->calls_in_flight++; }
  ~InFlight() { shared->calls_in_flight--; }
};

// Frees from inside one of the handle's own callbacks: the caller's stack still runs the
// elector (its loop, a poll, a timer task), so stop and delete on another thread, after
// the calls that may have run the callback have returned.
void free_later(mongoelector_elector* elector) {
  std::thread([elector] {
    auto shared = elector->shared;
    while (shared->calls_in_flight.load() > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    try {
      elector->elector->stop();  // joins the loop thread, which is not this one
    } catch (...) {
    }
    try {
      delete elector;
    } catch (...) {
    }
  }).detach();
}

// Reads the fields that exist in the caller's options version (only ever appended).
void to_core(const char* key, const mongoelector_elector_options* o,
             mongoelector::ElectorOptions& opts, mongoelector::ElectorCallbacks& callbacks,
             const std::shared_ptr<Shared>& shared) {
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
  callbacks.on_leader = wrap(o->on_leader, o->user_data, shared);
  callbacks.on_leader_loss = wrap(o->on_leader_loss, o->user_data, shared);
  callbacks.on_loop = wrap(o->on_loop, o->user_data, shared);
}

std::unique_ptr<mongoelector_elector> open_elector(mongoelector_client* client,
                                                   mongoelector::ElectorOptions opts,
                                                   mongoelector::ElectorCallbacks callbacks,
                                                   std::shared_ptr<Shared> shared,
                                                   std::int64_t op_timeout_ms) {
  auto& c = checked(client);
  auto h = std::make_unique<mongoelector_elector>();
  h->shared = std::move(shared);
  // Borrows the client's pool (MongoDB) or connection (SQLite).
  h->storage = c.client->open_storage(op_timeout_ms);
  h->elector =
      std::make_unique<mongoelector::Elector>(h->storage, std::move(opts), std::move(callbacks));
  return h;
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

MONGOELECTOR_API mongoelector_status
mongoelector_elector_new(mongoelector_client* client, const char* key,
                         const mongoelector_elector_options* options, mongoelector_elector** out) {
  return guard([&] {
    checked(client);
    require(out != nullptr, "out is NULL");
    mongoelector::ElectorOptions opts;
    mongoelector::ElectorCallbacks callbacks;
    auto shared = std::make_shared<Shared>();
    to_core(key, options, opts, callbacks, shared);
    const auto op_ms = mongoelector::op_timeout_ms_for_ttl(opts.ttl_s);
    *out = open_elector(client, std::move(opts), std::move(callbacks), std::move(shared), op_ms)
               .release();
  });
}

MONGOELECTOR_API mongoelector_status
mongoelector_elector_config_init(mongoelector_elector_config* config, uint32_t version) {
  return guard([&] {
    require(config != nullptr, "config is NULL");
    mongoelector::capi::check_struct_version(version, MONGOELECTOR_ELECTOR_CONFIG_VERSION,
                                             "mongoelector_elector_config_init");
    using D = mongoelector::ElectorDefaults;
    // Version 1 fields; a later version sets its appended fields under `if (version >= N)`.
    config->version = version;
    config->ttl_seconds = D::ttl_s;
    config->report_status = D::report_status ? 1 : 0;
    config->app_version = nullptr;
    config->on_leader = nullptr;
    config->on_leader_loss = nullptr;
    config->on_loop = nullptr;
    config->user_data = nullptr;
    config->delete_on_release = D::delete_on_release ? 1 : 0;
    config->op_timeout_seconds = 0;
    if (version >= 2) config->handover_poll_seconds = -1;  // ttl/4
    if (version >= 3) config->payload_json = nullptr;
    if (version >= 4) {
      config->has_priority = 0;
      config->priority = 0;
      config->priority_stability_seconds = -1;  // one ttl
    }
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_elector_new_with(
    mongoelector_client* client, const char* key, const mongoelector_elector_config* config,
    mongoelector_elector** out) {
  return guard([&] {
    checked(client);
    require(out != nullptr, "out is NULL");
    mongoelector_elector_config defaults;
    if (config == nullptr) {
      mongoelector_elector_config_init(&defaults, MONGOELECTOR_ELECTOR_CONFIG_VERSION);
      config = &defaults;
    }
    mongoelector::capi::check_struct_version(config->version, MONGOELECTOR_ELECTOR_CONFIG_VERSION,
                                             "mongoelector_elector_config_init");
    // The 1.0 fields go through the 1.0 path; the rest are read here.
    mongoelector_elector_options o;
    mongoelector_elector_options_init(&o);
    o.ttl_seconds = config->ttl_seconds;
    o.report_status = config->report_status;
    o.app_version = config->app_version;
    o.on_leader = config->on_leader;
    o.on_leader_loss = config->on_leader_loss;
    o.on_loop = config->on_loop;
    o.user_data = config->user_data;
    mongoelector::ElectorOptions opts;
    mongoelector::ElectorCallbacks callbacks;
    auto shared = std::make_shared<Shared>();
    to_core(key, &o, opts, callbacks, shared);
    opts.delete_on_release = config->delete_on_release != 0;
    // Negative: the core's default (ttl/4); NaN and values above 1e9 are refused there.
    if (config->version >= 2 && !(config->handover_poll_seconds < 0)) {
      opts.handover_poll_s = config->handover_poll_seconds;
    }
    // Validated by the core, before any I/O.
    if (config->version >= 3 && config->payload_json != nullptr)
      opts.payload = std::string(config->payload_json);
    // Validated by the core (NaN, infinite, out of range); -1 is the default.
    if (config->version >= 4 && config->has_priority != 0) {
      opts.priority = config->priority;
      if (config->priority_stability_seconds != -1)
        opts.priority_stability_s = config->priority_stability_seconds;
    }
    const auto op_ms = mongoelector::capi::op_timeout_ms(config->op_timeout_seconds, opts.ttl_s);
    *out = open_elector(client, std::move(opts), std::move(callbacks), std::move(shared), op_ms)
               .release();
  });
}

MONGOELECTOR_API void mongoelector_elector_free(mongoelector_elector* elector) {
  if (elector == nullptr || elector->magic != mongoelector::capi::kElectorMagic) return;
  elector->magic = mongoelector::capi::kFreedMagic;
  if (t_dispatching == elector->shared.get() || elector->elector->on_loop_thread()) {
    auto& shared = *elector->shared;
    shared.callbacks_enabled.store(false);
    // A callback of this elector running on another thread (on_leader_loss on the
    // timer thread while on_loop runs here) may have passed the check: wait until only
    // the calling one is left, so that user_data is unused once this returns.
    const int self = t_dispatching == elector->shared.get() ? 1 : 0;
    while (shared.callbacks_running.load() > self) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    try {
      free_later(elector);
      return;
    } catch (...) {
      // No thread could be started: nothing safe is left to do but leak the elector.
      return;
    }
  }
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
  return guard([&] {
    auto& h = checked(elector);
    InFlight in_flight(h);
    h.elector->stop();
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_elector_poll(mongoelector_elector* elector) {
  return guard([&] {
    auto& h = checked(elector);
    InFlight in_flight(h);
    h.elector->poll();
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_elector_release(mongoelector_elector* elector) {
  return guard([&] {
    auto& h = checked(elector);
    InFlight in_flight(h);
    h.elector->release();
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_elector_resign(mongoelector_elector* elector,
                                                                 double hold_off_seconds) {
  return guard([&] {
    auto& h = checked(elector);
    InFlight in_flight(h);
    // Negative: the default (ttl); NaN is refused by the core.
    std::optional<double> hold_off;
    if (!(hold_off_seconds < 0)) hold_off = hold_off_seconds;
    h.elector->resign(hold_off);
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_elector_transfer(mongoelector_elector* elector,
                                                                   const char* to_uuid) {
  return guard([&] {
    auto& h = checked(elector);
    require(to_uuid != nullptr, "to_uuid must not be NULL");
    InFlight in_flight(h);
    h.elector->transfer(to_uuid);
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_elector_set_payload(mongoelector_elector* elector,
                                                                      const char* json,
                                                                      int* written_out) {
  return guard([&] {
    auto& h = checked(elector);
    InFlight in_flight(h);
    std::optional<std::string> payload;
    if (json != nullptr) payload = std::string(json);
    const bool written = h.elector->set_payload(std::move(payload));
    if (written_out != nullptr) *written_out = written ? 1 : 0;
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_elector_payload(mongoelector_elector* elector,
                                                                  char** json_out) {
  return guard([&] {
    auto& h = checked(elector);
    require(json_out != nullptr, "json_out is NULL");
    const std::optional<std::string> payload = h.elector->payload();
    *json_out = payload ? mongoelector::capi::json::malloc_copy(*payload) : nullptr;
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_elector_is_leader(mongoelector_elector* elector,
                                                                    int* out) {
  return read_out(elector, out, [](auto& h) { return h.elector->is_leader() ? 1 : 0; });
}

MONGOELECTOR_API mongoelector_status
mongoelector_elector_leader_exists(mongoelector_elector* elector, int* out) {
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
  // Only a current leadership has a token (read with it, in one critical section).
  return read_out(elector, out,
                  [](auto& h) -> int64_t { return h.elector->leader_fence().value_or(0); });
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
        mongoelector::to_extended_json(h.elector->node_status(/*may_sample=*/false)));
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_client_cluster_detail(mongoelector_client* client,
                                                                        const char* key,
                                                                        char** json_out) {
  return guard([&] {
    checked(client);
    require(json_out != nullptr, "json_out is NULL");
    mongoelector::ElectorOptions opts;
    opts.key = mongoelector::capi::checked_key(key);
    // An elector that is never started and never writes: no index, no status report;
    // cluster_detail() only reads the reports and the lock, and samples the clock.
    opts.ensure_indexes = false;
    opts.report_status = false;
    const auto op_ms = mongoelector::op_timeout_ms_for_ttl(opts.ttl_s);
    auto h = open_elector(client, std::move(opts), {}, std::make_shared<Shared>(), op_ms);
    *json_out = mongoelector::capi::json::malloc_copy(
        mongoelector::capi::json::cluster_detail(h->elector->cluster_detail()));
  });
}

MONGOELECTOR_API mongoelector_status
mongoelector_elector_cluster_detail(mongoelector_elector* elector, char** json_out) {
  return guard([&] {
    auto& h = checked(elector);
    require(json_out != nullptr, "json_out is NULL");
    *json_out = mongoelector::capi::json::malloc_copy(
        mongoelector::capi::json::cluster_detail(h.elector->cluster_detail()));
  });
}

}  // extern "C"
