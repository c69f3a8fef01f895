// Fair (FIFO) queueing: the rules, once, for every fair hold. A key's waiters are served
// in arrival order: each waiter that found the key taken appends ONE entry {uuid, ticket,
// ts_expire} to the key's queue (the document's `queue` array, storage/semaphore_storage.h)
// and keeps it alive; a claim is made only by the head of the LIVE queue.
//
// The invariant this file keeps (Q): a claim never passes a live entry. A claim -- fair or
// not, by a node of this version -- is allowed (gate().open) only when every entry before
// the claimant's own (or, for a claimant without one, every entry) is expired at the
// claimant's EARLIEST server time; its write names those entries (uuid AND ticket, by
// index) and checks them expired again, atomically, then removes them with its own. So:
//  * FIFO: tickets are the document's fence at the enqueue (a compare-and-set), strictly
//    increasing along the array; the head of the live queue is the live entry with the
//    smallest ticket, and it is the only waiter whose claim can match.
//  * A dead waiter costs at most one ttl: its entry is live until ts_expire, at most one
//    ttl after its last renewal; then any claim passes it, and removes it.
//  * A waiter whose entry expired (a pause longer than its renewals' margin) has lost its
//    place: standing() and gate() count an expired entry of its own as none, and it
//    enqueues again at the end.
//  * Late operations: a late renewal of a passed entry finds it gone (the entry's uuid AND
//    ticket are in the renewal's filter; a ticket is never reused); renewals only move an
//    expiry later ($max); an entry is removed by its owner (leave, named by uuid and
//    ticket) or by a claim that passes it expired or owns it.
//  * No polling storm: only the head needs to look every step. A waiter with `ahead` live
//    entries before it waits wait_ms() = step * (ahead + 1) between looks (capped at a
//    third of its ttl so that its renewal, due when less than two thirds of a ttl is left,
//    always comes in time): N waiters make about ln N reads per step, not N.
//
// Mixed fleets: nodes without fair queueing (older versions, the original mongoelector,
// which has no semaphores) ignore the queue; fairness then holds among the nodes that
// honour it, and exclusion (slots, fences) never depends on the queue.
//
// Pure functions of a copy of the queue: no I/O (the SlotHolder does the writes).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../storage/semaphore_storage.h"

namespace mongoelector::fair_queue {

// Where a claimant stands in `queue` at server time `now` (its earliest).
struct Standing {
  std::int64_t own = -1;   // index of its LIVE entry {uuid, ticket}; -1: none (or expired)
  std::int64_t ahead = 0;  // live entries before it (every live entry when it has none)
  bool head() const { return own >= 0 && ahead == 0; }
};
Standing standing(const std::vector<QueueEntry>& queue, const std::string& uuid,
                  std::int64_t ticket, std::int64_t now_ms);

// What invariant Q allows a claimant (its entry {uuid, ticket}; ticket 0: none) at `now`.
struct Gate {
  bool open = false;               // it may claim
  std::vector<QueueEntry> passed;  // the first entries, all expired: removed by its claim
  std::optional<QueueEntry> own;   // its own live entry right after them: removed too
};
Gate gate(const std::vector<QueueEntry>& queue, const std::string& uuid, std::int64_t ticket,
          std::int64_t now_ms);

// The wait before a waiter with `ahead` live entries before it looks again (see above).
std::int64_t wait_ms(std::int64_t ahead, std::int64_t step_ms, std::int64_t ttl_ms);
// A waiter's entry is renewed when less than two thirds of a ttl is left.
bool renew_due(std::int64_t expire_ms, std::int64_t now_ms, std::int64_t ttl_ms);

// Who waits in `queue` at server time `now_ms` (the earliest, as claimants judge it): its
// live entries, in ticket (arrival) order. What every status and holders() shows.
std::vector<QueueEntry> waiting(const std::vector<QueueEntry>& queue, std::int64_t now_ms);

}  // namespace mongoelector::fair_queue
