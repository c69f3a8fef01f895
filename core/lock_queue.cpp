#include "lock_queue.h"

#include <algorithm>
#include <utility>

#include "exceptions.h"
#include "storage/semaphore_doc.h"
#include "storage/storage.h"

namespace mongoelector {

LockQueue::LockQueue(Storage& storage, const std::string& lock_collection, std::string key,
                     std::string uuid, std::int64_t ttl_ms, std::function<std::int64_t()> earliest)
    : storage_(storage),
      collection_(collection_for(lock_collection)),
      key_(std::move(key)),
      uuid_(std::move(uuid)),
      ttl_ms_(ttl_ms),
      earliest_(std::move(earliest)),
      place_(storage, collection_, key_, uuid_) {}

std::optional<SemaphoreDoc> LockQueue::read() {
  std::optional<SemaphoreDoc> doc = storage_.read_semaphore(collection_, key_);
  if (!doc) return doc;
  std::string bad = semaphore_doc::malformed(*doc);
  if (bad.empty() && (!doc->kind.empty() || doc->limit != 1)) bad = "it is not a queue document";
  if (!bad.empty())
    throw StorageError("the queue document of lock '" + key_ + "' in " + collection_ +
                       " is not usable: " + bad + " (" + collection_ +
                       " holds only the fair queues of the locks of its collection)");
  return doc;
}

SemaphoreClaim LockQueue::claim_on(std::int64_t fence, std::int64_t now_ms) const {
  SemaphoreClaim c;
  c.key = key_;
  c.limit = 1;
  c.slot = 0;
  c.old_fence = fence;
  c.new_fence = std::max(fence, place_.last_ticket()) + 1;
  c.uuid = uuid_;
  c.now_ms = now_ms;
  c.expire_ms = 0;  // the slot is never held: free at any time
  return c;
}

LockQueue::Look LockQueue::look() {
  Look l;
  // The gate is judged at the earliest the server's clock can read BEFORE the read: an
  // entry expired then was expired in the copy read, and stays so unless a renewal sent
  // before its expiry lands late (lock_queue.h).
  l.now_ms = earliest_();
  l.doc = read();  // one round trip
  if (!l.doc) {
    l.gate.open = true;  // no queue at all
    return l;
  }
  l.gate = fair_queue::gate(l.doc->queue, uuid_, place_.entry().ticket, l.now_ms);
  l.waiting = place_.look(l.doc->queue, l.now_ms).ahead;
  return l;
}

void LockQueue::won(const Look& l) {
  if (l.doc && !l.gate.passed.empty()) {
    // The expired entries passed, and our own right after them, in one compare-and-set
    // that checks them expired again (an entry revived since is left alone).
    SemaphoreClaim c = claim_on(l.doc->fence, l.now_ms);
    c.queue_passed = l.gate.passed;
    c.queue_own = l.gate.own;
    if (storage_.claim_semaphore(collection_, c)) {
      for (const QueueEntry& e : c.queue_passed)
        if (e.uuid == uuid_) place_.gone(e.ticket);
      if (c.queue_own) place_.gone(c.queue_own->ticket);
    }
  }
  const QueueEntry mine = place_.entry();
  if (mine.ticket == 0) return;
  storage_.leave_queue(collection_, key_, mine.uuid, mine.ticket);
  place_.gone(mine.ticket);
}

void LockQueue::wait(const Look& l) {
  std::optional<SemaphoreDoc> doc = l.doc;
  std::int64_t now = l.now_ms;
  bool known = true;  // `doc` is current (read, or just created)
  for (int writes = 0; writes < 3; ++writes) {
    if (!known) {
      doc = read();
      now = earliest_();
    }
    known = false;
    if (!doc) {
      // First use of the key's queue: its document, then the enqueue.
      const SemaphoreClaim c = claim_on(0, now);
      if (storage_.create_semaphore(collection_, c)) {
        doc = semaphore_doc::created_doc(c);
        known = true;
      }
      continue;  // created (the enqueue follows), or someone else did: read it
    }
    if (place_.drop_strays(doc->queue, now)) continue;  // its own strays: look again
    const fair_queue::Standing st = place_.look(doc->queue, now);
    if (st.own >= 0) {
      if (!place_.keep(doc->queue, st, now, ttl_ms_, earliest_)) return;
      continue;  // moved or expired meanwhile: look again
    }
    // No live entry of ours (never queued, or its place was lost): ONE enqueue, after
    // every ticket so far.
    SemaphoreClaim c = claim_on(doc->fence, earliest_());
    c.enqueue = true;
    c.expire_ms = c.now_ms + ttl_ms_;
    place_.sending(semaphore_doc::queued_entry(c));
    if (storage_.claim_semaphore(collection_, c)) return;
    place_.gone(c.new_fence);  // the document moved: look again
  }
}

}  // namespace mongoelector
