// mongoelector_observer_*: a mongoelector::LeaderObserver on its own Storage from the
// client, its thread started by the core (LeaderObserver::start), its callback wrapped so
// that a free from inside it is completed on another thread.
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "election/elector.h"
#include "exceptions.h"
#include "handles.h"
#include "mongoelector.h"
#include "observe/leader_observer.h"

using mongoelector::capi::guard;
using mongoelector::capi::require;

namespace mongoelector::capi {
constexpr std::uint64_t kObserverMagic = 0x6d654f6273727672ULL;  // "meObsrvr"
}  // namespace mongoelector::capi

struct mongoelector_observer {
  std::uint64_t magic = mongoelector::capi::kObserverMagic;
  std::shared_ptr<mongoelector::Storage> storage;
  // Cleared by a free from inside on_change: no callback starts after it. (A free from
  // another thread joins the observer's thread instead.)
  std::atomic<bool> callbacks_enabled{true};
  std::unique_ptr<mongoelector::LeaderObserver> observer;
};

namespace {

// The observer whose on_change this thread is running, if any (observer_free from it).
thread_local const mongoelector_observer* t_dispatching = nullptr;

// The state of the last mongoelector_observer_read on this thread: its strings are what
// the caller's struct points to (see the header).
thread_local mongoelector::LeaderState t_read;

mongoelector_observer& checked_observer(mongoelector_observer* h) {
  return mongoelector::capi::checked_handle(h, mongoelector::capi::kObserverMagic, "observer");
}

// The fields of out->version (set by the caller, or the library's in a callback); the
// strings point into `s`, which must outlive them.
void fill(const mongoelector::LeaderState& s, mongoelector_leader_state* out) {
  out->has_leader = s.has_leader ? 1 : 0;
  out->uuid = s.uuid.c_str();
  out->host = s.host.c_str();
  out->pid = s.pid;
  out->fence = s.fence;
  out->server_time_ms = s.server_time_ms;
  if (out->version < 2) return;
  static_assert(
      static_cast<int>(mongoelector::LeaderStatus::kNone) == MONGOELECTOR_LEADER_NONE &&
          static_cast<int>(mongoelector::LeaderStatus::kLeader) == MONGOELECTOR_LEADER_LEADS &&
          static_cast<int>(mongoelector::LeaderStatus::kPending) == MONGOELECTOR_LEADER_PENDING &&
          static_cast<int>(mongoelector::LeaderStatus::kUnknown) == MONGOELECTOR_LEADER_UNKNOWN,
      "the C status numbers are the core's");
  out->status = static_cast<int>(s.status);
  out->expire_ms = s.expire_ms;
  out->handover_uuid = s.handover_uuid.c_str();
  out->handover_host = s.handover_host.c_str();
  out->handover_pid = s.handover_pid;
  out->handover_fence = s.handover_fence;
  if (out->version < 3) return;
  out->payload_json = s.payload ? s.payload->c_str() : "";
}

mongoelector::LeaderObserver::OnChange wrap(mongoelector_leader_change_fn fn, void* user_data,
                                            mongoelector_observer* h) {
  if (fn == nullptr) return {};
  return [fn, user_data, h](const mongoelector::LeaderState& s) {
    if (!h->callbacks_enabled.load()) return;  // freed from a previous callback
    mongoelector_leader_state state{};
    state.version = MONGOELECTOR_LEADER_STATE_VERSION;
    fill(s, &state);
    struct Restore {
      const mongoelector_observer* outer = t_dispatching;
      ~Restore() { t_dispatching = outer; }
    } restore;
    t_dispatching = h;
    fn(&state, user_data);
  };
}

mongoelector::LeaderObserverOptions to_core(const char* key, const mongoelector_observer_config* c,
                                            std::int64_t& op_timeout_ms) {
  mongoelector::LeaderObserverOptions o;
  o.key = mongoelector::capi::checked_key(key);
  double op_timeout_s = 0;
  if (c != nullptr) {
    mongoelector::capi::check_struct_version(c->version, MONGOELECTOR_OBSERVER_CONFIG_VERSION,
                                             "mongoelector_observer_config_init");
    o.interval_s = c->interval_seconds;  // checked by the core, before any I/O
    op_timeout_s = c->op_timeout_seconds;
  }
  // 0: the bound an elector of the default ttl gives its calls (1.5 s). Otherwise no ttl
  // caps it (ttl 0 skips that check).
  op_timeout_ms = op_timeout_s == 0
                      ? mongoelector::op_timeout_ms_for_ttl(mongoelector::ElectorDefaults::ttl_s)
                      : mongoelector::capi::op_timeout_ms(op_timeout_s, /*ttl_s=*/0);
  return o;
}

void stop_and_delete(mongoelector_observer* h) noexcept {
  // Joins the observer's thread, which is not the caller's.
  mongoelector::capi::stop_and_delete(h, [](mongoelector_observer& o) { o.observer->stop(); });
}

}  // namespace

extern "C" {

MONGOELECTOR_API mongoelector_status
mongoelector_observer_config_init(mongoelector_observer_config* config, uint32_t version) {
  return guard([&] {
    require(config != nullptr, "config is NULL");
    mongoelector::capi::check_struct_version(version, MONGOELECTOR_OBSERVER_CONFIG_VERSION,
                                             "mongoelector_observer_config_init");
    const mongoelector::LeaderObserverOptions defaults;
    config->version = version;
    config->interval_seconds = defaults.interval_s;
    config->op_timeout_seconds = 0;
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_observer_new(
    mongoelector_client* client, const char* key, const mongoelector_observer_config* config,
    mongoelector_leader_change_fn on_change, void* user_data, mongoelector_observer** out) {
  return guard([&] {
    auto& c = mongoelector::capi::checked(client);
    require(out != nullptr, "out is NULL");
    std::int64_t op_ms = 0;
    auto opts = to_core(key, config, op_ms);
    auto h = std::make_unique<mongoelector_observer>();
    // Borrows the client's pool (MongoDB), connection (SQLite) or world (memory://).
    h->storage = c.client->open_storage(op_ms);
    h->observer = std::make_unique<mongoelector::LeaderObserver>(
        h->storage, std::move(opts), wrap(on_change, user_data, h.get()));
    if (on_change != nullptr) h->observer->start();
    *out = h.release();
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_observer_read(mongoelector_observer* observer,
                                                                mongoelector_leader_state* out) {
  return guard([&] {
    auto& h = checked_observer(observer);
    require(out != nullptr, "out is NULL");
    if (out->version == 0 || out->version > MONGOELECTOR_LEADER_STATE_VERSION) {
      throw mongoelector::InvalidArgument(
          "mongoelector_leader_state version " + std::to_string(out->version) +
          " is not supported (this library knows 1.." +
          std::to_string(MONGOELECTOR_LEADER_STATE_VERSION) +
          "): set out->version = MONGOELECTOR_LEADER_STATE_VERSION");
    }
    t_read = h.observer->read();
    fill(t_read, out);
  });
}

MONGOELECTOR_API void mongoelector_observer_free(mongoelector_observer* observer) {
  if (observer == nullptr || observer->magic != mongoelector::capi::kObserverMagic) return;
  observer->magic = mongoelector::capi::kFreedMagic;
  if (t_dispatching == observer) {
    // Inside this observer's on_change: its thread must return from the callback before
    // it can be joined, and the core object lives until then.
    observer->callbacks_enabled.store(false);
    try {
      std::thread([observer] { stop_and_delete(observer); }).detach();
    } catch (...) {
      // No thread could be started: the loop idles (no callback runs) and leaks.
    }
    return;
  }
  stop_and_delete(observer);
}

}  // extern "C"
