// LockQueue: fair (FIFO) queueing for plain locks (LockerOptions::fair), with the rules of
// hold/fair_queue.h and the place of hold/queue_place.h. The queue lives BESIDE the lock:
// in a queue document of the same key in "<lock collection>.queue", shaped as a
// semaphore document of limit 1 (storage/semaphore_storage.h) whose one slot is never
// held (its expiry is the epoch) and whose `queue` array holds the waiters:
//   {_id: key, limit: 1, fence, slots: [{... ts_expire: epoch}], queue: [{uuid, ticket,
//    ts_expire}, ...]}
// so the queue's writes are the semaphore storage's (enqueue by compare-and-set on
// `fence`, renew_queue_entry, leave_queue, a claim_semaphore that removes the entries it
// passed), on every backend, with no new storage operation.
//
// Exclusion and fencing stay entirely in the lock document: a fair claim is the plain
// claim (Storage::claim), made only when the queue's gate is open. The queue only decides
// WHEN a fair node sends it:
//  * The gate (invariant Q among fair nodes): a fair claim is sent only when every entry
//    before the claimant's own (every entry, for a claimant without one) is expired at its
//    EARLIEST server time, as read in the queue document just before the claim. Sound
//    without atomicity across the two documents: entries are only ever appended at the
//    END (an enqueue is a compare-and-set whose new fence is the ticket), so the entries
//    before the claimant at its claim are a subset of those it read; they were expired.
//  * The head looks every step; the others wait by their place (fair_queue::wait_ms).
//  * After winning the lock the claimant removes its own entry and, in the same write
//    when it passed expired ones, those (a compare-and-set naming each by uuid and
//    ticket and checking it expired again); else leave_queue of its own entry.
//  * A blocking waiter refused (gate closed, or the lock held) enqueues ONCE, then renews
//    its entry when due (by index, uuid AND ticket; monotonic). On timeout, cancel, error
//    or release it leaves (leave_queue, by uuid and ticket). A dead waiter's entry stops
//    counting one ttl after its last renewal.
//  * Tickets: above the document's fence and above every ticket this waiter sent, so a
//    late leave or renewal of an old entry of ours never meets a newer one (not even
//    after the queue document was deleted and re-created).
//  * Late operations: a late enqueue lands only on the fence it read (else nothing), at
//    the end; the place is recorded before it is sent, so a leave names it. A late leave
//    or renewal names {uuid, ticket} and finds nothing once the entry is gone. A late
//    renewal (sent while the entry was live, landing after it expired) revives it: that
//    waiter may then be passed by one claim that looked in between, and keeps its place
//    for the rest; exclusion is unaffected. A waiter paused past its entry's expiry has
//    lost its place: an expired entry of its own counts as none, and it enqueues again at
//    the end. A live entry of its own that is not its current one (such a revived entry,
//    or one whose leave failed) is removed at its next refused look
//    (QueuePlace::drop_strays), so it never holds the queue back for a ttl.
//
// Fairness holds among fair nodes of this version. Other nodes (unfair lockers, electors,
// the original mongoelector) never read the queue and may take a free lock ahead of the
// head; they never break exclusion, which the lock document alone decides.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "hold/fair_queue.h"
#include "hold/queue_place.h"
#include "storage/semaphore_storage.h"

namespace mongoelector {

class Storage;

class LockQueue {
 public:
  // The queue of lock `key` of `lock_collection`, for the waiter `uuid` whose entries
  // live `ttl_ms`; `earliest` is the earliest server time now (what writes carry).
  LockQueue(Storage& storage, const std::string& lock_collection, std::string key, std::string uuid,
            std::int64_t ttl_ms, std::function<std::int64_t()> earliest);

  static std::string collection_for(const std::string& lock_collection) {
    return lock_collection + ".queue";
  }
  const std::string& collection() const { return collection_; }

  // What a look at the queue found: whether a claim may be sent now (the gate).
  struct Look {
    std::optional<SemaphoreDoc> doc;  // nullopt: no queue document (an empty queue)
    std::int64_t now_ms = 0;          // the earliest server time it was judged at
    fair_queue::Gate gate;
    std::int64_t waiting = 0;  // live entries before the claimant (all, without one)
  };
  // Reads the queue document (one round trip) and applies the gate at the claimant's
  // earliest server time. StorageError for a document that is not a queue's.
  Look look();
  // The lock was won after `look`: removes this waiter's entry and, when it passed
  // expired ones, those in the same compare-and-set (else leave_queue). One write, none
  // without an entry to remove. Storage errors propagate (the entry expires in a ttl;
  // leave() tries again).
  void won(const Look& look);
  // A blocking waiter refused after `look`: enqueues once (creating the queue document
  // on first use), or renews its live entry when due. At most three writes; storage
  // errors propagate.
  void wait(const Look& look);
  // Leaves the queue (see QueuePlace::leave).
  void leave(const std::string& what, const LogFields& fields) { place_.leave(what, fields); }
  std::int64_t pace_ms(std::int64_t step_ms) const { return place_.pace_ms(step_ms, ttl_ms_); }
  QueueEntry entry() const { return place_.entry(); }

 private:
  std::optional<SemaphoreDoc> read();  // checked
  // A claim on the queue document whose fence is `fence`: slot 0, never held (expiry
  // at the epoch), the next fence after `fence` and this waiter's tickets.
  SemaphoreClaim claim_on(std::int64_t fence, std::int64_t now_ms) const;

  Storage& storage_;
  const std::string collection_;
  const std::string key_;
  const std::string uuid_;
  const std::int64_t ttl_ms_;
  const std::function<std::int64_t()> earliest_;
  QueuePlace place_;
};

}  // namespace mongoelector
