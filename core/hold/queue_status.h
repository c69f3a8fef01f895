// Who waits for a key in its fair queue (fair_queue.h), read for status: once for the
// plain lock (its queue document beside the lock, lock_queue.h), the semaphore and the
// read-write lock (the `queue` array of their slot document). Every binding and the
// `mongoelector status` command show this reading; none parses the queue itself.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../server_clock.h"
#include "../storage/semaphore_storage.h"

namespace mongoelector {

class Storage;

struct QueueStatus {
  std::int64_t server_time_ms = 0;  // the earliest server time it was judged at
  std::vector<QueueEntry> waiting;  // live entries, in ticket (arrival) order
};

// Reads the document of `key` in `collection` (one round trip) that carries a `queue`
// (a semaphore's or a read-write lock's collection, or a lock collection's ".queue"
// collection) and returns its live waiters at `now`'s earliest server time; no
// document: none.
QueueStatus read_queue_status(SemaphoreStorage& storage, const std::string& collection,
                              const std::string& key, const ServerTime& now);

}  // namespace mongoelector
