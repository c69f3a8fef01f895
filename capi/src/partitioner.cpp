// mongoelector_partitioner_*: a mongoelector::Partitioner (core/partition/) on its own
// Storage from the client. Its callbacks are wrapped so that a free from inside one of
// them is completed on another thread (the core object cannot be destroyed from its own
// callback), and so that no callback starts after that free.
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <thread>

#include "exceptions.h"
#include "handles.h"
#include "json.h"
#include "mongoelector.h"
#include "partition/members.h"
#include "partition/partitioner.h"
#include "server_clock.h"
#include "storage/extended_json.h"
#include "utf8.h"

using mongoelector::capi::guard;
using mongoelector::capi::read_out;
using mongoelector::capi::require;

namespace mongoelector::capi {
constexpr std::uint64_t kPartitionerMagic = 0x6d65506172746974ULL;  // "mePartit"
}  // namespace mongoelector::capi

struct mongoelector_partitioner {
  std::uint64_t magic = mongoelector::capi::kPartitionerMagic;
  std::shared_ptr<mongoelector::Storage> storage;
  // Cleared by a free: no callback starts after it (shared with the callback wrappers).
  std::shared_ptr<std::atomic<bool>> callbacks_enabled = std::make_shared<std::atomic<bool>>(true);
  std::unique_ptr<mongoelector::Partitioner> core;  // thread-safe: no handle mutex
};

mongoelector_partitioner& mongoelector::capi::checked(mongoelector_partitioner* h) {
  return checked_handle(h, kPartitionerMagic, "partitioner");
}

namespace {

std::string collection_or(const char* given, const char* fallback, const char* field) {
  if (given == nullptr) return fallback;
  std::string c(given);
  if (!mongoelector::is_valid_utf8(c))
    throw mongoelector::InvalidArgument(std::string(field) + " is not valid UTF-8");
  return c;
}

mongoelector::PartitionerCallbacks wrap(const mongoelector_partitioner_config& c,
                                        const std::shared_ptr<std::atomic<bool>>& enabled) {
  mongoelector::PartitionerCallbacks cb;
  if (c.on_assigned != nullptr) {
    cb.on_assigned = [fn = c.on_assigned, ud = c.user_data, enabled](std::int64_t p,
                                                                     std::int64_t token) {
      if (enabled->load()) fn(p, token, ud);
    };
  }
  if (c.on_revoked != nullptr) {
    cb.on_revoked = [fn = c.on_revoked, ud = c.user_data, enabled](std::int64_t p) {
      if (enabled->load()) fn(p, ud);
    };
  }
  return cb;
}

// The status object of the header's comment (plain JSON, instants as integers).
std::string status_json(const mongoelector::PartitionStatus& st) {
  using mongoelector::Document;
  using mongoelector::Null;
  using mongoelector::Value;
  auto opt_int = [](const std::optional<std::int64_t>& v) -> Value {
    return v ? Value(*v) : Value(Null{});
  };
  auto opt_str = [](const std::optional<std::string>& v) -> Value {
    return v ? Value(*v) : Value(Null{});
  };
  std::vector<Document> members, owners, conflicts;
  for (const auto& m : st.members) {
    members.push_back(Document{{"uuid", m.report.uuid},
                               {"host", m.report.host},
                               {"pid", m.report.pid},
                               {"live", m.live},
                               {"running", m.report.running},
                               {"expire_ms", opt_int(m.report.expire_ms)},
                               {"owned", m.owned},
                               {"assigned", m.assigned}});
  }
  for (const auto& o : st.owners) {
    const bool held = o.owner.has_value();
    owners.push_back(
        Document{{"partition", o.partition},
                 {"key", o.key},
                 {"owner", opt_str(o.owner)},
                 {"host", held ? Value(o.host) : Value(Null{})},
                 {"pid", held ? Value(o.pid) : Value(Null{})},
                 {"token", o.token},
                 {"expire_ms", opt_int(o.expire_ms)},
                 {"assigned", opt_str(o.assigned)},
                 {"conflict", o.conflict.empty() ? Value(Null{}) : Value(o.conflict)}});
  }
  for (const auto& c : st.conflicts) conflicts.push_back(Document{{"message", c}});
  mongoelector::ExtendedJsonWriter w;
  w.value("group", st.group);
  w.value("partitions", st.partitions);
  w.value("server_time_ms", st.server_now_ms);
  w.value("settled", st.settled);
  w.document_array("members", members);
  w.document_array("owners", owners);
  w.document_array("conflicts", conflicts);
  return w.json();
}

void stop_and_delete(mongoelector_partitioner* h) noexcept {
  // Destroying the core stops it (joins the loop) and waits for the callback under way.
  mongoelector::capi::stop_and_delete(h, [](mongoelector_partitioner& p) { p.core.reset(); });
}

}  // namespace

extern "C" {

MONGOELECTOR_API mongoelector_status
mongoelector_partitioner_config_init(mongoelector_partitioner_config* config, uint32_t version) {
  return guard([&] {
    require(config != nullptr, "config is NULL");
    mongoelector::capi::check_struct_version(version, MONGOELECTOR_PARTITIONER_CONFIG_VERSION,
                                             "mongoelector_partitioner_config_init");
    config->version = version;
    config->partitions = 0;
    config->ttl_seconds = mongoelector::PartitionerDefaults::ttl_s;
    config->poll_seconds = 0;
    config->locks_collection = nullptr;
    config->members_collection = nullptr;
    config->on_assigned = nullptr;
    config->on_revoked = nullptr;
    config->user_data = nullptr;
    config->op_timeout_seconds = 0;
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_partitioner_new(
    mongoelector_client* client, const char* group, const mongoelector_partitioner_config* config,
    mongoelector_partitioner** out) {
  return guard([&] {
    auto& c = mongoelector::capi::checked(client);
    require(out != nullptr, "out is NULL");
    require(group != nullptr, "group is NULL");
    require(config != nullptr,
            "config is NULL: a partitioner needs at least the number of partitions "
            "(mongoelector_partitioner_config_init, then set partitions)");
    mongoelector::capi::check_struct_version(config->version,
                                             MONGOELECTOR_PARTITIONER_CONFIG_VERSION,
                                             "mongoelector_partitioner_config_init");
    mongoelector::PartitionerOptions o;
    o.group = group;
    require(mongoelector::is_valid_utf8(o.group), "group is not valid UTF-8");
    if (config->partitions < 1 || config->partitions > MONGOELECTOR_PARTITIONS_MAX) {
      throw mongoelector::InvalidArgument("partitions must be a whole number in [1, " +
                                          std::to_string(MONGOELECTOR_PARTITIONS_MAX) + "], got " +
                                          std::to_string(config->partitions) +
                                          " (set config.partitions)");
    }
    o.partitions = config->partitions;
    o.ttl_s = config->ttl_seconds;  // checked by the core, before any I/O
    if (config->poll_seconds != 0) o.poll_s = config->poll_seconds;
    o.collections.locks = collection_or(
        config->locks_collection, mongoelector::PartitionerCollections::kLocks, "locks_collection");
    o.collections.members =
        collection_or(config->members_collection, mongoelector::PartitionerCollections::kMembers,
                      "members_collection");
    const std::int64_t op_ms =
        mongoelector::capi::op_timeout_ms(config->op_timeout_seconds, config->ttl_seconds);
    auto h = std::make_unique<mongoelector_partitioner>();
    auto callbacks = wrap(*config, h->callbacks_enabled);
    h->storage = c.client->open_storage(op_ms);
    h->core =
        std::make_unique<mongoelector::Partitioner>(h->storage, std::move(o), std::move(callbacks));
    *out = h.release();
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_partitioner_start(mongoelector_partitioner* p) {
  return guard([&] { mongoelector::capi::checked(p).core->start(); });
}

MONGOELECTOR_API mongoelector_status mongoelector_partitioner_stop(mongoelector_partitioner* p) {
  return guard([&] { mongoelector::capi::checked(p).core->stop(); });
}

MONGOELECTOR_API void mongoelector_partitioner_free(mongoelector_partitioner* p) {
  if (p == nullptr || p->magic != mongoelector::capi::kPartitionerMagic) return;
  p->magic = mongoelector::capi::kFreedMagic;
  bool in_callback = false;
  try {
    in_callback = p->core->in_callback();
  } catch (...) {
  }
  if (in_callback) {
    // The calling callback still runs on the core object: ask its loop to leave, and
    // destroy it on another thread once this callback has returned.
    p->callbacks_enabled->store(false);
    try {
      p->core->request_stop();
      std::thread([p] { stop_and_delete(p); }).detach();
    } catch (...) {
      // No thread could be started: the partitioner leaks (no callback of it runs).
    }
    return;
  }
  try {
    p->core->stop();  // on_revoked runs for what it holds, as stop() says
  } catch (...) {
  }
  p->callbacks_enabled->store(false);
  stop_and_delete(p);
}

MONGOELECTOR_API mongoelector_status mongoelector_partitioner_owned(
    mongoelector_partitioner* p, mongoelector_partition_token** owned_out, size_t* count_out) {
  return guard([&] {
    auto& h = mongoelector::capi::checked(p);
    require(owned_out != nullptr, "owned_out is NULL");
    require(count_out != nullptr, "count_out is NULL");
    const auto owned = h.core->owned();
    mongoelector_partition_token* arr = nullptr;
    if (!owned.empty()) {
      arr = static_cast<mongoelector_partition_token*>(
          std::calloc(owned.size(), sizeof(mongoelector_partition_token)));
      if (arr == nullptr) throw std::bad_alloc();
      std::size_t i = 0;
      for (const auto& [partition, token] : owned) arr[i++] = {partition, token};
    }
    *owned_out = arr;
    *count_out = owned.size();
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_partitioner_token(mongoelector_partitioner* p,
                                                                    int64_t partition,
                                                                    int64_t* token_out) {
  return read_out(p, token_out, [&](mongoelector_partitioner& h) -> std::int64_t {
    const std::int64_t n = h.core->options().partitions;
    if (partition < 0 || partition >= n) {
      throw mongoelector::InvalidArgument("partition " + std::to_string(partition) +
                                          " is not one of this group's partitions (0.." +
                                          std::to_string(n - 1) + ")");
    }
    return h.core->token(partition).value_or(0);
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_partitioner_uuid(mongoelector_partitioner* p,
                                                                   const char** out) {
  return read_out(p, out,
                  [](mongoelector_partitioner& h) { return h.core->identity().uuid.c_str(); });
}

MONGOELECTOR_API mongoelector_status mongoelector_partitioner_running(mongoelector_partitioner* p,
                                                                      int* out) {
  return read_out(p, out, [](mongoelector_partitioner& h) { return h.core->running() ? 1 : 0; });
}

MONGOELECTOR_API mongoelector_status mongoelector_partitioner_status(mongoelector_partitioner* p,
                                                                     char** json_out) {
  return guard([&] {
    auto& h = mongoelector::capi::checked(p);
    require(json_out != nullptr, "json_out is NULL");
    *json_out = mongoelector::capi::json::malloc_copy(status_json(h.core->status()));
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_client_partition_status(
    mongoelector_client* client, const char* group, int64_t partitions,
    const char* locks_collection, const char* members_collection, char** json_out) {
  return guard([&] {
    auto& c = mongoelector::capi::checked(client);
    require(json_out != nullptr, "json_out is NULL");
    require(group != nullptr, "group is NULL");
    std::string g(group);
    require(mongoelector::is_valid_utf8(g), "group is not valid UTF-8");
    if (partitions < 0) {
      throw mongoelector::InvalidArgument(
          "partitions must be 0 (from the members' reports) or the group's number of "
          "partitions, got " +
          std::to_string(partitions));
    }
    mongoelector::PartitionerCollections cols;
    cols.locks = collection_or(locks_collection, cols.kLocks, "locks_collection");
    cols.members = collection_or(members_collection, cols.kMembers, "members_collection");
    mongoelector::validate_collection(cols.locks);
    mongoelector::validate_collection(cols.members);
    auto storage = c.client->open_storage(
        mongoelector::op_timeout_ms_for_ttl(mongoelector::PartitionerDefaults::ttl_s));
    mongoelector::ServerClock sc(mongoelector::clock_or_storage_clock(nullptr, storage), *storage);
    const auto st = mongoelector::partition_status(
        *storage, cols, g, partitions == 0 ? std::nullopt : std::optional<std::int64_t>(partitions),
        sc.estimate_sampling());
    *json_out = mongoelector::capi::json::malloc_copy(status_json(st));
  });
}

}  // extern "C"
