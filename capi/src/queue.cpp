// mongoelector_client_read_queue: who waits in a key's fair queue (core
// hold/queue_status.h), as JSON for tools that only read.
#include <string>

#include "exceptions.h"
#include "handles.h"
#include "hold/queue_status.h"
#include "identity.h"
#include "json.h"
#include "lock_queue.h"
#include "locker.h"
#include "mongoelector.h"
#include "semaphore/rwlock.h"
#include "semaphore/semaphore.h"
#include "server_clock.h"
#include "storage/extended_json.h"
#include "utf8.h"

using mongoelector::capi::checked;
using mongoelector::capi::guard;
using mongoelector::capi::require;

namespace {

// The collection the queue of `of` lives in: `given` or the kind's default; a plain
// lock's queue is beside its lock (LockQueue::collection_for).
std::string queue_collection(mongoelector_queue_of of, const char* given) {
  std::string c;
  switch (of) {
    case MONGOELECTOR_QUEUE_LOCK:
      c = given != nullptr ? given : mongoelector::LockerDefaults::collection;
      break;
    case MONGOELECTOR_QUEUE_SEMAPHORE:
      c = given != nullptr ? given : mongoelector::SemaphoreDefaults::collection;
      break;
    case MONGOELECTOR_QUEUE_RWLOCK:
      c = given != nullptr ? given : mongoelector::RwLockDefaults::collection;
      break;
    default:
      throw mongoelector::InvalidArgument(
          "of must be MONGOELECTOR_QUEUE_LOCK, "
          "MONGOELECTOR_QUEUE_SEMAPHORE or "
          "MONGOELECTOR_QUEUE_RWLOCK, got " +
          std::to_string(static_cast<int>(of)));
  }
  require(mongoelector::is_valid_utf8(c), "collection is not valid UTF-8");
  mongoelector::validate_collection(c);
  return of == MONGOELECTOR_QUEUE_LOCK ? mongoelector::LockQueue::collection_for(c) : c;
}

}  // namespace

extern "C" {

MONGOELECTOR_API mongoelector_status mongoelector_client_read_queue(mongoelector_client* client,
                                                                    mongoelector_queue_of of,
                                                                    const char* collection,
                                                                    const char* key,
                                                                    char** json_out) {
  return guard([&] {
    auto& c = checked(client);
    require(json_out != nullptr, "json_out is NULL");
    require(key != nullptr, "key is NULL");
    const std::string k(key);
    require(mongoelector::is_valid_utf8(k), "key is not valid UTF-8");
    mongoelector::validate_key(k);
    const std::string coll = queue_collection(of, collection);
    auto storage = c.client->open_storage(
        mongoelector::op_timeout_ms_for_ttl(mongoelector::LockerDefaults::ttl_s));
    mongoelector::ServerClock sc(mongoelector::clock_or_storage_clock(nullptr, storage), *storage);
    const auto st = mongoelector::read_queue_status(*storage, coll, k, sc.estimate_sampling());
    std::vector<mongoelector::Document> waiting;
    for (const auto& e : st.waiting)
      waiting.push_back(mongoelector::Document{
          {"uuid", e.uuid}, {"ticket", e.ticket}, {"expire_ms", e.expire_ms}});
    mongoelector::ExtendedJsonWriter w;
    w.value("server_time_ms", st.server_time_ms);
    w.document_array("waiting", waiting);
    *json_out = mongoelector::capi::json::malloc_copy(w.json());
  });
}

}  // extern "C"
