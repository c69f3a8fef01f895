// HoldState: the state of a holder's hold and the rules about it, once, for every kind
// of hold (Locker: one lock; Semaphore: one slot of N). A feature owns one HoldState
// (composition) and keeps only its own writes: how a claim, a renewal and a release of
// its documents look. The rules below exist here only:
//
//  * One hold at a time and its GENERATION, which changes whenever the hold is installed,
//    replaced or dropped: a write that began under one generation (a renewal, a deferred
//    token) applies its outcome only if the hold is still that one.
//  * The LEASE counts from the moment the successful write was SENT, on the host's
//    monotonic clock (lease(), lease_deadline_mono()); its renew deadline is that lease
//    end minus Holdable::renew_margin_ms().
//  * A claim that completed only after its own lease had ended is never reported: the
//    hold is released, fenced (install()). A claim whose outcome is unknown (an error
//    after it may have been applied) is ABANDONED: remembered as stranded and released
//    at once if the server answers, else before the next claim (abandon_claim()).
//  * A hold given up locally while it may still be ours on the server (a failed release,
//    a jump of the server's clock, a lost keep-alive lease, a hand-over being sent) is
//    STRANDED; settling it (settle_stranded()) sends the feature's fenced release before
//    this holder's next claim, so an owner is never locked out of its own hold. A hold
//    whose giving-away write was sent is IN DOUBT (Hold::release_sent): only ever
//    released, never taken back with its fence.
//  * The server-safety check, the cached time check and the server-time sample that
//    strands the hold on a jump of the server's clock; the one acquire loop (retry
//    rule, step, timeout, cancel, metrics: AcquireRun, acquire_run.h), which the
//    blocking acquire drives here and an event loop drives step by step.
//
// Thread safety: every method may be called from any thread. The state's mutex is never
// held across I/O or user code; the settle write and an acquire attempt run without it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "../clock.h"
#include "../identity.h"
#include "../log.h"
#include "../server_clock.h"
#include "../storage/storage.h"
#include "acquire_run.h"
#include "holdable.h"

namespace mongoelector {

// Returns true to abandon a blocking wait (Ctrl-C, cancelled context). Called between
// attempts, from the waiting thread, at least every 100 ms.
using CancelFn = std::function<bool()>;

// A holder's view of one of its holds (a lock, or a semaphore slot).
struct Hold {
  std::int64_t fence = 0;
  std::int64_t slot = 0;              // a semaphore slot's index in its document (locks: 0)
  std::int64_t created_ms = 0;        // server time (ts_created: the earliest at the send)
  std::int64_t expire_ms = 0;         // server time
  std::int64_t lease_start_mono = 0;  // host mono when the successful write was sent
  // A write that gives this hold away was sent (a release, a minimum-hold write, or an
  // elector's hand-over) and may still land at the server (it failed, timed out, or its
  // outcome is not known yet): the hold is "in doubt", never taken back with its fence
  // (that write would then act on the new term), only released, fenced.
  bool release_sent = false;
  // The latest the server's clock could read when the claim's reply arrived: the server
  // took the hold no later than this (a lock's minimum hold counts from here).
  std::int64_t acquired_latest_ms = 0;
  // A lock's minimum hold (Locker::release_min_hold): it must stay taken until this
  // server time, so the stranded hold is settled by setting its expiry to it, not by a
  // release (0: none).
  std::int64_t keep_until_ms = 0;
};

// What a feature tells its HoldState about itself.
struct HoldSpec {
  const char* kind = "lock";  // "lock" / "semaphore": "Timeout acquiring lock KEY"
  std::string describe;       // "KEY" / "semaphore KEY", for messages
  std::string lost_what;      // "the lease of KEY": "... is treated as lost"
  std::string key;
  std::string collection;
  double ttl_s = 0;
  double maxoffset_s = 0;
  bool allow_unbounded_calls = false;

  // From a feature's options, which carry these fields alike.
  template <class Options>
  static HoldSpec from(const Options& o, const char* kind, std::string describe,
                       std::string lost_what) {
    HoldSpec s;
    s.kind = kind;
    s.describe = std::move(describe);
    s.lost_what = std::move(lost_what);
    s.key = o.key;
    s.collection = o.collection;
    s.ttl_s = o.ttl_s;
    s.maxoffset_s = o.maxoffset_s;
    s.allow_unbounded_calls = o.allow_unbounded_calls;
    return s;
  }
};

class HoldState {
 public:
  // What settling a stranded hold did. taken_until: the server time until which the lock
  // stays taken (a minimum hold kept), nullopt when released or gone. missed_keep: a
  // minimum hold was due but the document no longer carried the hold (it had expired or
  // been taken before the write landed), so the lock is NOT kept taken until then.
  struct Settled {
    std::optional<std::int64_t> taken_until;
    bool missed_keep = false;
  };
  // The feature's fenced write that settles a stranded hold (release it, or for a lock's
  // minimum hold set its expiry). Throws on failure (the hold stays stranded).
  using SettleFn = std::function<Settled(const Hold&)>;

  // Validates the spec (key, collection, ttl, maxoffset, the storage's call bound:
  // InvalidArgument). A null storage is InvalidArgument too.
  HoldState(std::shared_ptr<Storage> storage, HoldSpec spec, std::shared_ptr<Clock> clock,
            Identity identity, SettleFn settle);
  HoldState(const HoldState&) = delete;
  HoldState& operator=(const HoldState&) = delete;

  Storage& storage() { return *storage_; }
  Clock& clock() { return *clock_; }
  ServerClock& server_clock() { return server_clock_; }
  const Identity& identity() const { return identity_; }
  const std::string& describe() const { return spec_.describe; }
  const HoldSpec& spec() const { return spec_; }
  std::int64_t ttl_ms() const { return ttl_ms_; }
  // Structured fields of a log record about this hold (key, uuid, host).
  LogFields log_fields(LogEvent event, std::int64_t fence = 0) const;

  // --- Before a claim ---
  // Refuses (UnsafeServer: what + refusal) a server whose single-document writes are not
  // atomic, or logs what + warning when allowed. Once per holder.
  void check_server_safety(bool allow_unsafe_server, const std::string& refusal,
                           const std::string& warning);
  // Raises TimeOffsetError when |server - host| > maxoffset; a good result is cached for
  // 10 minutes. Returns the measured (or cached) offset in seconds.
  double verify_time();
  // verify_time() would answer from its cache (no round trip).
  bool time_check_cached() const;
  // check_server_safety() has passed (it makes no round trip any more).
  bool server_safety_known() const;
  // Takes a new server-time sample (one round trip). On a jump of the server's clock the
  // hold is stranded (treated as lost) and true is returned.
  bool refresh_clock();
  // The estimate a write carries, at host mono `at_mono` (default: now). Samples only
  // when there is no sample yet (a holder always has one).
  ServerTime server_time_for_write(std::optional<std::int64_t> at_mono = std::nullopt);
  // The contract's retry rule (see _acquireretry): may a blocking/non-blocking loop try
  // attempt number `count` at mono time `now_ms` having started at `start_ms`?
  static bool acquire_retry(bool blocking, std::int64_t start_ms, std::int64_t now_ms,
                            std::optional<double> timeout_s, std::int64_t count);
  // The blocking acquire: drives `run` (the one acquire loop, acquire_run.h), sleeping
  // on this state's clock in slices of at most 100 ms between attempts; `cancel` is
  // asked before each attempt and each slice (true -> run.cancel()). The token, or what
  // run.result() throws (LockExists, AcquireTimeout, Cancelled, a claim's error).
  std::int64_t acquire(AcquireRun& run, const CancelFn& cancel);

  // --- The hold (local reads, no round trip) ---
  std::optional<Hold> hold() const;
  std::int64_t fence() const;                               // of the current hold, 0 when none
  std::optional<std::int64_t> lease_deadline_mono() const;  // send + ttl
  std::optional<Lease> lease() const;                       // fence and lease end, one read
  bool has_stranded() const;
  std::optional<Hold> stranded() const;
  bool only_stranded() const;  // no hold, a stranded one
  struct Snapshot {
    std::optional<Hold> hold;
    std::uint64_t gen = 0;
  };
  Snapshot snapshot() const;

  // --- Claims ---
  // A claim won: installs `h` (its lease from h.lease_start_mono) and returns its fence,
  // unless the claim's reply came (at host mono `replied`) after its lease had ended:
  // then the hold is abandoned and StorageUnavailable thrown.
  // round_trips false: such a hold is only stranded (abandon_claim's first half).
  std::int64_t install(const Hold& h, std::int64_t replied, bool round_trips = true);
  // A claim whose outcome is unknown, or that must not be kept: `h` (fence 0 when its
  // name is unknown) becomes the stranded hold, released now if the server answers.
  void abandon_claim(const Hold& h);
  // abandon_claim() without the release: for a caller that must not make round trips
  // here (an event loop); it settles the stranded hold soon after, on a thread.
  void strand_claim(const Hold& h);
  // If the current hold's lease has not ended at host mono `now`, its lease; otherwise
  // the hold (if any) is stranded and nullopt returned.
  std::optional<Lease> strand_if_over(std::int64_t now);

  // --- Giving a hold up ---
  // Gives the current hold up locally, remembering it as stranded. Only a hold with
  // `fence` when it is not 0. `in_doubt`: a write giving it away is about to be sent.
  // Returns the fence stranded, 0 if none.
  std::int64_t strand(std::int64_t only_fence, bool in_doubt);
  // A lock's minimum hold: gives the current hold up (in doubt) keeping the lock taken
  // until `min_hold` ms after acquired_latest_ms; without one, a stranded hold nothing
  // released yet keeps that bound too. The fence concerned (0: none, or unknown).
  std::int64_t strand_keeping(std::int64_t min_hold);
  // Releases the current hold with `write` (fenced); on failure it is stranded in doubt
  // and the error raised. Then settles any stranded hold.
  void release(const std::function<void(const Hold&)>& write);
  // release(write) if the current hold is the one of `fence` (a claim whose acquire was
  // cancelled after it was sent: released by its own token, never a newer hold). False
  // (no write) when the hold is another or none.
  bool release_if(std::int64_t fence, const std::function<void(const Hold&)>& write);
  // release()'s two outcomes of the write of hold `h`, for a caller that sends it itself:
  // done (the hold is dropped, if still current), or failed (it may still land: the hold
  // is stranded in doubt). Neither settles a stranded hold.
  void release_done(const Hold& h);
  void release_failed(const Hold& h);
  // Drops the current and the stranded hold without a write (a forced release was sent).
  void forget();
  // Settles the stranded hold with the feature's SettleFn (in doubt from now on); see
  // Settled (nothing to settle: taken_until nullopt). Throws on failure (it stays
  // stranded).
  Settled settle_stranded();
  // settle_stranded(), a failure logged (retried before the next claim).
  void settle_stranded_quietly();

  // --- Writes that began under a generation ---
  // A renewal sent at ticket.sent with `expire_ms`: the new lease end (host mono), or
  // nullopt when the hold changed meanwhile or (renewed false) is no longer ours, which
  // drops it. With no hold and the same generation, a successful renewal installs the
  // hold `adopt` makes (an elector taking a handed-over hold), if given.
  std::optional<std::int64_t> finish_renew(const RenewTicket& ticket, bool renewed,
                                           std::int64_t expire_ms,
                                           const std::function<Hold()>& adopt = {});
  // The current hold, if still of generation `gen`, is given up with its name unknown
  // (fence 0): a write that may rename it may still land.
  void strand_nameless(std::uint64_t gen);
  // The current hold of generation `gen` is now called `fence`; nullopt (fence) when it
  // turned out to be gone (dropped) or changed meanwhile.
  std::optional<std::int64_t> rename(std::uint64_t gen, std::optional<std::int64_t> fence);
  // Takes the stranded hold `s` back after a successful renewal sent at `sent` with
  // `expire_ms`: the new lease end, nullopt when it changed meanwhile.
  std::optional<std::int64_t> take_back(const Hold& s, std::int64_t sent, std::int64_t expire_ms);

 private:
  void strand_locked();  // mu_ held: hold_ -> stranded_
  // release() of the current hold, only if its fence is `only_fence` when given.
  bool release_matching(std::optional<std::int64_t> only_fence,
                        const std::function<void(const Hold&)>& write);

  const std::shared_ptr<Storage> storage_;
  const HoldSpec spec_;
  const std::shared_ptr<Clock> clock_;
  const Identity identity_;
  std::int64_t ttl_ms_ = 0;  // set once the spec is validated
  ServerClock server_clock_;
  const SettleFn settle_;

  mutable std::mutex mu_;  // never held across I/O
  std::optional<Hold> hold_;
  std::uint64_t hold_gen_ = 0;  // changes whenever hold_ is replaced or dropped
  // A hold of ours that may still be on the server; fence 0 when unknown (the reply of
  // the claim was lost).
  std::optional<Hold> stranded_;
  std::optional<std::int64_t> time_verified_mono_;
  double verified_offset_s_ = 0;  // what the cached check measured
  bool safety_checked_ = false;
};

}  // namespace mongoelector
