// Holdable: what keeps a hold alive needs of it -- the seam between the features that
// claim holds (Locker: one lock; Semaphore: one slot of N) and the ONE keep-alive lease
// and renewer that serve them all (core/lease/lease.h, keepalive.h), as etcd's Mutex and
// Election both build on one Session.
//
// A feature keeps its own writes (claim, renew, release of its documents); the lease
// keeps the rules that do not depend on them, once: the renew interval, margin and
// retry budget, loss read from the clock (hold_loss.h), loss final, on_lost once.
//
// Renewal in two halves, so that the renewer can carry many holds' renewals in one
// storage call: begin_renew(sent) computes the write at host mono `sent` (read by the
// caller BEFORE anything is sent, and before the server-time estimate the write carries,
// so the local lease never outlasts the server's) as a RenewTicket of one kind; the
// caller sends it -- alone (renew_one) or batched with tickets of the same kind and
// collection (Storage::renew_many / renew_semaphores) -- and hands the outcome to
// finish_renew(). A failed call is finished by dropping the ticket: the hold stays as it
// was.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "../clock.h"
#include "../log.h"
#include "../server_clock.h"
#include "../storage/storage.h"

namespace mongoelector {

// A hold as the lease and the elector see it, read in one critical section.
struct Lease {
  std::int64_t fence = 0;
  std::int64_t end_mono = 0;  // lease_start_mono + ttl
};

// One renewal between Holdable::begin_renew and finish_renew.
struct RenewTicket {
  enum class Kind { Lock, Semaphore };  // which batch call carries it
  Kind kind = Kind::Lock;
  std::unique_lock<std::mutex> io;  // the holder's lock on the hold's name, if any
  std::int64_t fence = 0;
  std::uint64_t gen = 0;            // the holder's hold generation at begin
  std::int64_t sent = 0;            // host mono
  ServerTime at;                    // server time estimate at `sent`
  RenewRequest request;             // Kind::Lock
  SemaphoreRenewRequest semaphore;  // Kind::Semaphore
  std::int64_t expire_ms() const {
    return kind == Kind::Lock ? request.expire_ms : semaphore.expire_ms;
  }
  // Batching may only move the expiry later (the server then keeps the hold at least
  // as long as its holder counts on it).
  void raise_expire(std::int64_t at_least_ms);
};

// The renew deadline's margin, for every hold and the elector's term:
// max(ttl/10, 2 * clock uncertainty + 50 ms). It covers this node's estimate error and a
// scheduling hiccup; a claimant's error is covered on its side (it compares with the
// earliest server time).
std::int64_t renew_margin_ms(std::int64_t ttl_ms, std::int64_t uncertainty_ms);

// Sends one ticket on its own (one round trip): whether the hold is renewed.
bool renew_one(Storage& storage, const std::string& collection, const RenewTicket& ticket);

class Holdable {
 public:
  virtual ~Holdable() = default;

  // For messages: "KEY" / "semaphore KEY", and what is held: "lock" / "slot".
  virtual std::string describe() const = 0;
  virtual const char* unit() const = 0;
  virtual LogFields log_fields(LogEvent event, std::int64_t fence = 0) const = 0;

  // The lease's timing inputs.
  virtual std::int64_t ttl_ms() const = 0;
  virtual ServerClock& server_clock() = 0;
  virtual Storage& storage() = 0;
  virtual Clock& clock() = 0;
  virtual const std::string& collection() const = 0;
  // Takes a new server-time sample; on a jump of the server's clock the hold is
  // stranded (treated as lost) and true is returned.
  virtual bool refresh_clock() = 0;
  // The margin of this hold's renew deadline now (lease end - margin).
  std::int64_t renew_margin_ms() {
    return mongoelector::renew_margin_ms(ttl_ms(), server_clock().uncertainty_ms());
  }

  // The current hold (fence and lease end), nullopt when none.
  virtual std::optional<Lease> lease() const = 0;
  virtual RenewTicket begin_renew(std::int64_t sent) = 0;
  // The outcome of the ticket's write: the new lease end (host mono), nullopt when the
  // hold is no longer ours (dropped) or changed while the call ran.
  virtual std::optional<std::int64_t> finish_renew(RenewTicket& ticket, bool renewed) = 0;
  // One renewal on its own (one round trip: begin_renew, renew_one, finish_renew),
  // counted in the metrics: the new lease end, nullopt when the hold is no longer ours.
  // Storage errors propagate and leave the hold as it was.
  std::optional<std::int64_t> renew_alone();
  // Gives the hold up locally, remembering it as stranded (released, fenced, later).
  // Only a hold with `fence` when it is not 0. Returns the fence stranded, 0 if none.
  virtual std::int64_t strand(std::int64_t fence = 0) = 0;
  // Releases this instance's hold and any stranded one, fenced. Throws on failure (the
  // hold is then kept as stranded).
  virtual void release() = 0;
};

}  // namespace mongoelector
