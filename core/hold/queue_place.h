// QueuePlace: a fair waiter's place in a key's queue (fair_queue.h), once for every fair
// hold -- the slot holders (the queue in the slot document, semaphore/slot_holder.h) and
// the fair Locker (a queue document beside the lock, lock_queue.h). It keeps the entry as
// last sent and the live entries before it at the last look (the pace of the looks), and
// makes the writes that name the entry: its renewal when due (renew_queue_entry, by uuid
// AND ticket, monotonic) and its leaving (leave_queue, by uuid AND ticket). The enqueue
// is a compare-and-set of the document the queue is in, the owner's; it tells the place
// before sending (sending: the write may land even when the call fails, and a leave then
// names it) and after (refused, removed).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "../log.h"
#include "../storage/semaphore_storage.h"
#include "fair_queue.h"

namespace mongoelector {

class Storage;

class QueuePlace {
 public:
  // The queue of `key` in `collection` (the document read_semaphore returns).
  QueuePlace(Storage& storage, std::string collection, std::string key, std::string uuid);

  // The entry as last sent (ticket 0: none).
  QueueEntry entry() const;
  // The highest ticket this place ever sent (0: none): a new ticket is above it, so a
  // late write naming an old entry never meets a new one.
  std::int64_t last_ticket() const;
  // Where it stands in `queue` at server time `now_ms` (the waiter's earliest); the
  // live entries before it set the pace of its looks.
  fair_queue::Standing look(const std::vector<QueueEntry>& queue, std::int64_t now_ms);
  // Its live entry `st.own` of `queue` (st from look()), renewed when due
  // (fair_queue::renew_due) to at() + ttl, `at` giving the earliest server time the
  // write carries. False: it waits its turn (renewed, or not due); true: the entry
  // moved or expired meanwhile (read again). Storage errors propagate.
  bool keep(const std::vector<QueueEntry>& queue, const fair_queue::Standing& st,
            std::int64_t now_ms, std::int64_t ttl_ms, const std::function<std::int64_t()>& at);
  // Removes the live entries of `queue` at `now_ms` that carry this waiter's uuid but
  // not its current ticket: strays of its own (a leave that failed, a renewal that
  // landed after its entry expired and it queued again), which would hold it and every
  // waiter behind them back for up to a ttl. One leave_queue each (by uuid AND ticket);
  // true when it removed any (read again). Storage errors propagate.
  bool drop_strays(const std::vector<QueueEntry>& queue, std::int64_t now_ms);
  // An enqueue of `e` is about to be sent.
  void sending(const QueueEntry& e);
  // The enqueue of `ticket` did not match (nothing written), or a claim removed the
  // entry of `ticket`: no entry any more (unless a newer one was sent since).
  void gone(std::int64_t ticket);
  // Removes the entry, if any (one round trip; none without one): the entry removed,
  // nullopt when there was none to remove or the write failed (logged with `what`: the
  // entry then expires within its ttl).
  std::optional<QueueEntry> leave(const std::string& what, const LogFields& fields);
  // The wait before the next look after a refused attempt (AcquireRun::set_pace): the
  // step when not queued, else fair_queue::wait_ms.
  std::int64_t pace_ms(std::int64_t step_ms, std::int64_t ttl_ms) const;

 private:
  Storage& storage_;
  const std::string collection_;
  const std::string key_;
  const std::string uuid_;
  mutable std::mutex mu_;  // never held across I/O
  QueueEntry entry_;
  std::int64_t ahead_ = 0;
  std::int64_t last_ticket_ = 0;
};

}  // namespace mongoelector
