// The storage seam: only the semantic operations the protocol needs, as small interfaces
// by topic, composed here into the one Storage a backend implements:
//   lock_storage.h       lock documents and fencing epochs (Locker, Elector)
//   semaphore_storage.h  semaphore documents (Semaphore)
//   status_storage.h     the elector's member reports
//   handover_storage.h   the elector's hand-over
//   payload_storage.h    the leader's payload
// plus what every backend says of itself (server, clock, call bound, batching). One
// implementation per backend in core/storage/ (memory, SQLite, MongoDB via libmongoc)
// and, from the Python package, one that calls a pymongo Database.
//
// Document schema: shared with the original pure-Python mongoelector so that old and new
// nodes can run on the same collections during a rolling upgrade (each interface's
// header shows its documents).
//
// Every time passed in or out is a server-time instant (ms since the Unix epoch on the
// SERVER's clock, see server_clock.h), never the host's wall clock.
//
// Errors: backends throw StorageUnavailable when the server cannot be reached or a call
// times out, StorageError for any other failure (exceptions.h). Bindings may throw their own
// exception types (Python re-raises pymongo's exceptions unchanged); core/ lets
// exceptions it does not know propagate.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "../clock.h"
#include "handover_storage.h"
#include "lock_storage.h"
#include "payload_storage.h"
#include "semaphore_storage.h"
#include "status_storage.h"

namespace mongoelector {

class ClockSampleBoard;  // server_clock.h

// What the server says it is.
struct ServerInfo {
  std::string name;     // "MongoDB", "FerretDB", "mongo-java-server", ...
  std::string version;  // as reported
  // True only for MongoDB proper, whose findAndModify is atomic. Servers that emulate
  // the protocol may read-then-write (FerretDB does): see Locker's safety check.
  bool atomic_find_and_modify = false;
};

class Storage;
// `*storage`, or InvalidArgument for a null one (before anything binds a reference to it).
Storage& require_storage(const std::shared_ptr<Storage>& storage);
// `given`, or else the storage's clock (Storage::clock()); nullptr for a null storage.
std::shared_ptr<Clock> clock_or_storage_clock(std::shared_ptr<Clock> given,
                                              const std::shared_ptr<Storage>& storage);

class Storage : public LockStorage,
                public SemaphoreStorage,
                public StatusStorage,
                public HandOverStorage,
                public PayloadStorage {
 public:
  ~Storage() override = default;

  virtual ServerInfo server_info() = 0;

  // The clock that lockers, electors and leases on this storage run on when none is
  // given: the system clock, or a memory:// backend's ManualClock (testing kit).
  virtual std::shared_ptr<Clock> clock() { return system_clock(); }

  // The longest one call can take before it fails (connection, selection and socket
  // timeouts together), or 0 when unknown. The elector never starts a renewal that
  // could still be running at its renew deadline; lockers and electors refuse a storage
  // with an unknown bound unless allow_unbounded_calls is set.
  virtual std::int64_t call_bound_ms() const { return 0; }

  // The server's clock: `localTime` from hello/serverStatus, in ms. One round trip.
  virtual std::int64_t server_time_ms() = 0;

  // Storages with the same domain reach the same database through the same client, so
  // one renew_many on any of them may carry the renewals of all (default: this object).
  virtual const void* batch_domain() const { return this; }
  // The server-time samples shared by every storage of this client (server_clock.h), or
  // null (each locker samples on its own).
  virtual std::shared_ptr<ClockSampleBoard> clock_sample_board() { return nullptr; }
  // Largest batch renew_many takes in one go (callers split larger ones).
  virtual std::size_t max_renew_batch() const { return 1000; }
  // The batch size for a server: FerretDB evaluates large filters slowly, document by
  // document (1000 keys took 10-14 s here), so its batches stay small.
  static std::size_t renew_batch_for(const std::optional<ServerInfo>& info) {
    return info && info->name == "FerretDB" ? 50 : 1000;
  }
};

}  // namespace mongoelector
