#include "queue_status.h"

#include "fair_queue.h"

namespace mongoelector {

QueueStatus read_queue_status(SemaphoreStorage& storage, const std::string& collection,
                              const std::string& key, const ServerTime& now) {
  QueueStatus out;
  out.server_time_ms = now.earliest_ms();
  const std::optional<SemaphoreDoc> doc = storage.read_semaphore(collection, key);
  if (doc) out.waiting = fair_queue::waiting(doc->queue, out.server_time_ms);
  return out;
}

}  // namespace mongoelector
