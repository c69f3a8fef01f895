// MongoLocker: a distributed lock with a lease (ttl) and a fencing token.
//
// The Locker keeps its own writes (claim, epochs, renew, release, minimum hold, window
// markers); the hold they act on -- its generation, stranded and in-doubt holds and how
// they are settled, the lease, the time and safety checks, the acquire loop -- is one
// HoldState (hold/hold_state.h), the Semaphore's too.
//
// Guarantees (see README, "Protocol"):
//  * Acquire is one atomic round trip in the common case (Storage::claim): a conditional
//    upsert that takes an absent, released or expired lock. Takeover happens at expiry
//    on the server's time base, never waiting for MongoDB's TTL monitor.
//  * Fencing: every successful acquisition gets a token strictly greater than every
//    token handed out before for that key, including after release, expiry, forced
//    takeover and deletion of the document by someone else. Token = epoch << 32 | n:
//    n counts acquisitions inside the document; the epoch lives in "<coll>.fences" and
//    is bumped (two extra round trips) only when the lock document had to be created or
//    carried no token of ours (first use, TTL deletion, an original node's document).
//    With lazy_token those two round trips move from acquire to the hold's first
//    token(), and are skipped by holds that never ask for their token.
//  * The lease is counted from the moment the successful write was SENT, on the host's
//    monotonic clock (lease_deadline_mono()); `sent` is read before the server-time
//    estimate that the write carries, so the local lease never outlasts the server's.
//  * A claim compares with the EARLIEST the server's clock can read (estimate minus its
//    uncertainty), so a node whose sample had a slow round trip claims late, never early.
//  * Every write that assumes a hold names it by uuid AND fence (renew, release), so a
//    request that runs late at the server cannot touch a newer hold. Renewals are also
//    MONOTONIC (Storage::renew: the expiry only moves later), so a late renewal of the
//    same hold cannot shorten the lease a newer one granted; the only write that lowers
//    an expiry (release_min_hold's Storage::set_expiry) is sent after the hold was given
//    up locally.
//  * A hold whose state on the server is unknown (an error after the claim was applied,
//    a failed release, a step-down on a missed deadline, a clock jump) is kept as
//    STRANDED: the next acquire releases it (fenced) first, so the owner is never locked
//    out of its own lock; an elector may re-take it instead (retake()).
//  * Holds in doubt, by name. A hold is what its claim wrote: our uuid and the claim's
//    ts_created (its `now`, which only a claim or a hand-over rewrites), under a fence
//    that changes at most once (counter -> token, set_fence). Its NAME is {uuid, fence};
//    the fence change itself also names ts_created, so a late one cannot land on a later
//    incarnation of the document (deleted and re-created: the counter restarts) and hand
//    out an old, lower token. When the name is unknown -- the claim's reply was lost, or
//    a token()'s fence change may still land -- the hold is stranded with fence 0 and
//    settling reads the document first: it acts only on the document THIS claim wrote
//    (uuid AND ts_created; a Locker never stamps two claims of one document alike,
//    claim_stamp), never on an earlier hold of ours that is still there (a minimum hold,
//    a window already won). A write that then matches nothing looks again, since a late
//    fence change may have renamed the hold meanwhile; only when the document no longer
//    carries the hold is it reported gone. So release_min_hold never reports "released
//    now" for a hold that may still be ours under another name: a hold in doubt keeps
//    its minimum hold like a held one. Renewals and releases name {uuid, fence} only: a
//    late one of a counter fence (lazy_token) could meet a later incarnation of the
//    document at the same counter; a renewal then only lengthens a hold of ours (never
//    early), and a release or minimum-hold write in doubt makes this locker assign its
//    tokens at acquire from then on (eager_token_), so no new hold of ours carries that
//    counter as its fence.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "clock.h"
#include "hold/hold_state.h"
#include "hold/holdable.h"
#include "identity.h"
#include "lock_queue.h"
#include "log.h"
#include "server_clock.h"
#include "storage/commands.h"
#include "storage/storage.h"

namespace mongoelector {

// Defaults as plain constants, so the C API can fill its option structs without building
// C++ objects outside its exception guard.
struct LockerDefaults {
  static constexpr const char* collection = "mongolocker";
  static constexpr double ttl_s = 600;
  static constexpr bool timeparanoid = true;
  static constexpr double maxoffset_s = 0.5;
  static constexpr bool delete_on_release = false;
  static constexpr bool allow_unsafe_server = false;
};

struct LockerOptions {
  std::string key;
  std::string collection = LockerDefaults::collection;
  double ttl_s = LockerDefaults::ttl_s;
  bool timeparanoid = LockerDefaults::timeparanoid;
  double maxoffset_s = LockerDefaults::maxoffset_s;
  // Release deletes the document (as the original does) instead of marking it released.
  // Costs the next acquirer the epoch round trips; use it while original nodes still
  // run, so they can acquire without waiting for the TTL monitor.
  bool delete_on_release = LockerDefaults::delete_on_release;
  // Run on servers whose findAndModify is not atomic (FerretDB): mutual exclusion is
  // then NOT guaranteed under contention, and fencing tokens may REPEAT (two nodes taking
  // over one expired document both read fence F and both get F+1). Off by default: such
  // servers are refused. Electors refuse the option.
  bool allow_unsafe_server = LockerDefaults::allow_unsafe_server;
  // Skip the index creation at construction (tests, read-only users).
  bool ensure_indexes = true;
  // Accept a storage whose calls have no known time bound (Storage::call_bound_ms() == 0,
  // e.g. a URI with a timeout set to 0).
  bool allow_unbounded_calls = false;
  // Hand out the fencing token on first request (token()) rather than at acquire. A
  // claim that had to create the lock document (first use, delete_on_release, the TTL
  // monitor) then costs one round trip instead of three: its epoch round trips are paid
  // by the first token() of that hold, if any. For callers whose acquire does not return
  // the token (Python's drop-in acquire() returns True).
  bool lazy_token = false;
  // Fair (FIFO) queueing (lock_queue.h): a blocking acquire that finds the lock taken
  // waits in the key's queue ("<collection>.queue") and is served in arrival order among
  // fair lockers; every claim of a fair locker, blocking or not, waits for the live
  // waiters before it. Exclusion and fencing never depend on the queue. Off: no command
  // more than without it.
  bool fair = false;
};

class Locker : public Holdable {
 public:
  Locker(std::shared_ptr<Storage> storage, LockerOptions options,
         std::shared_ptr<Clock> clock = nullptr, Identity identity = Identity::generate());

  // Full acquire as in the contract. Fair: a timeout, a cancel or an error leaves the
  // queue. blocking=false with a timeout -> InvalidArgument.
  // Non-blocking and held -> LockExists("<key> owned by <host> pid <pid>"). Blocking:
  // retries every `step_s` until `timeout_s` (none: forever) -> AcquireTimeout.
  // With timeparanoid, first verify_time(). Returns the fencing token (0 with lazy_token
  // when it is not assigned yet: see token()).
  std::int64_t acquire(bool blocking = true, std::optional<double> timeout_s = std::nullopt,
                       double step_s = 0.25, bool force = false, const CancelFn& cancel = {});
  // The same acquire as a state machine its caller drives (an event loop: it sleeps on
  // the loop and runs each attempt as one call); acquire() drives one on this thread.
  // Same options and outcomes (AcquireRun::result()). The run refers to this Locker,
  // which must outlive it.
  std::unique_ptr<AcquireRun> start_acquire(bool blocking = true,
                                            std::optional<double> timeout_s = std::nullopt,
                                            double step_s = 0.25, bool force = false);
  // Releases this instance's hold only if it is the hold of `fence` (fenced, as
  // release()): for a claim that landed after its acquire was given up. True when
  // released; false (no write) when this instance holds another hold or none.
  bool release_if(std::int64_t fence);

  // One attempt, no time check, no waiting: the token (0: deferred, lazy_token), or
  // nullopt when held by another.
  // Releases a stranded hold of this instance first. Throws StorageUnavailable when the
  // claim completed only after its lease had ended (the hold is released, not reported).
  std::optional<std::int64_t> try_acquire(bool force = false);

  // Fair queueing: removes this instance's queue entry, if any (fenced: uuid and ticket;
  // no round trip without one). Failures are logged (the entry expires within its ttl).
  // A run of start_acquire does it when its caller gives up (AcquireRun::give_up()).
  void leave_queue();
  // This instance's queue entry as last written (ticket 0: none, or not fair).
  QueueEntry queue_entry() const;

  // Releases this instance's hold, fenced (any holder's with force), and leaves the
  // queue. Not holding is not an error (no round trip then). On failure the hold is
  // kept as stranded.
  void release(bool force);
  void release() override { release(false); }
  // Scheduler semantics (ShedLock's lockAtLeastFor): lets go of this instance's hold but
  // keeps the lock taken until at least `min_hold_s` after the server took it, so that a
  // node whose schedule or clock differs cannot run the same job again within that time.
  // The bound is conservative, never early: counted from the latest the server's clock
  // could read when the claim's reply arrived (acquired_latest_ms), so it may end up to
  // one round trip plus twice the clock sample's uncertainty late. Once it has surely
  // passed (before the server's earliest possible now): a plain release(). Otherwise the
  // hold is dropped locally FIRST, then one fenced write (Storage::set_expiry) sets
  // ts_expire to that bound (shortening or extending the lease); the lock then frees
  // itself at that instant. Returns the server time (ms) at which the lock frees, or
  // nullopt when it was released now (or was not held). Failures throw; the hold stays
  // given up (the write may still land) and is kept as stranded with its bound: the next
  // release_min_hold, release or acquire sends the write again, never a release before
  // the bound. LockLost when the write landed after the hold had ended at the server (it
  // had expired, or another holder had taken the lock): the minimum hold could not be
  // kept, and nothing is left to retry.
  std::optional<std::int64_t> release_min_hold(double min_hold_s);
  // "At most once per window" (scheduler semantics): claims the current window of
  // `window_s` seconds for this key, windows being aligned on the server's clock
  // (start = floor(server now / window) * window, in ms since the epoch, from this
  // node's estimate). The claim is a marker lock "<key>@window:<start>" in the same
  // collection, held by this identity and never released, whose ts_expire is the
  // window's end exactly (start + window, an absolute date), so whichever node claims
  // first in a window wins it and every other claim of that window is refused: a
  // claimant compares with the earliest its clock estimate allows, which is before the
  // window's end whenever its estimate falls in the window. No claim is made once the
  // server's clock may have passed the window's end (the latest it can read, estimate
  // plus uncertainty, is not before it): every claim of a window happens while the
  // window is surely on, so an expired marker removed by the TTL monitor is never claimed
  // again by a lagging node. One round trip (plus a clock sample when stale). Returns the
  // window's start when this call claimed it, nullopt when the window was already claimed
  // (by anyone, this node included) or may be over (within this node's clock uncertainty
  // of its end: a few ms on a LAN). If the claim
  // fails with an error it may still have been applied: the marker is released (fenced)
  // if it is ours, so the window is not lost to everyone. InvalidArgument unless
  // 0.001 <= window_s <= 1e9.
  std::optional<std::int64_t> claim_window(double window_s);

  // Pushes ts_expire to now+ttl if this instance holds an unexpired lock: the new expiry
  // (server time, ms), else nullopt (and the local hold is dropped).
  std::optional<std::int64_t> touch();

  bool locked();                     // anyone holds an unexpired lock (one round trip)
  bool owned();                      // this instance does (one round trip)
  std::optional<LockDoc> current();  // the unexpired lock document, or nullopt

  // Raises TimeOffsetError when |server - host| > maxoffset; a good result is cached
  // for 10 minutes. Returns the measured (or cached) offset in seconds.
  double verify_time() { return state_.verify_time(); }
  // Takes a new server-time sample (one round trip). On a jump of the server's clock the
  // hold is treated as lost (stranded) and true is returned.
  bool refresh_clock() override { return state_.refresh_clock(); }

  // Local state (no round trip).
  std::optional<Hold> hold() const { return state_.hold(); }
  // The current hold's fence as known locally, 0 when none. Below 2^32 it is not a token
  // yet (a lazy_token hold whose token was never asked for).
  std::int64_t fence() const { return state_.fence(); }
  // The fencing token of the current hold, assigning it first if it was deferred
  // (lazy_token: two round trips, once per hold). nullopt without a hold, or when the
  // hold turned out to be lost (it is then dropped).
  std::optional<std::int64_t> token();
  // Host mono ms at which this instance's lease may end at the earliest (send + ttl).
  std::optional<std::int64_t> lease_deadline_mono() const { return state_.lease_deadline_mono(); }
  // fence and lease end of the current hold, in one read.
  std::optional<Lease> lease() const override { return state_.lease(); }
  bool has_stranded() const { return state_.has_stranded(); }

  // Structured fields of a log record about this lock (key, uuid, host).
  LogFields log_fields(LogEvent event, std::int64_t fence = 0) const override {
    return state_.log_fields(event, fence);
  }
  std::string describe() const override { return options_.key; }
  const char* unit() const override { return "lock"; }
  const std::string& collection() const override { return options_.collection; }

  const LockerOptions& options() const { return options_; }
  const Identity& identity() const { return state_.identity(); }
  const std::string& key() const { return options_.key; }
  double ttl_s() const { return options_.ttl_s; }
  std::int64_t ttl_ms() const override { return state_.ttl_ms(); }
  ServerClock& server_clock() override { return state_.server_clock(); }
  Storage& storage() override { return state_.storage(); }
  Clock& clock() override { return state_.clock(); }

  // Server time now (estimate): for status timestamps.
  std::int64_t server_now_ms() { return server_clock().now_ms(); }

  // Renewal used by the elector: one round trip, no clock sample. The new lease end (host
  // mono) on success; nullopt when the lock is no longer ours (the hold is dropped) or
  // the hold changed while the call ran (released through another path). Storage errors
  // propagate and leave the hold as it was.
  std::optional<std::int64_t> renew() { return renew_alone(); }

  // renew() in two halves, so that one Storage::renew_many can carry the renewals of many
  // lockers (the batched renewer, core/lease/keepalive.h). begin_renew() takes the hold's
  // io lock (lazy_token) and computes the write at host mono `sent` (read by the caller
  // BEFORE anything is sent; the estimate is the server time at `sent`, so lockers
  // sharing a clock sample and a ttl get the same expiry); finish_renew() applies the
  // outcome exactly as renew() does and releases the io lock. Between them the caller
  // sends request() (or the same write some other way). No metrics are recorded.
  // (Holdable; the ticket's kind is Lock, its io the hold's io lock.)
  using RenewTicket = mongoelector::RenewTicket;
  RenewTicket begin_renew(std::int64_t sent) override;
  std::optional<std::int64_t> finish_renew(RenewTicket& ticket, bool renewed) override;

  // For the elector: gives up the hold locally but remembers it as stranded (it may still
  // be ours on the server). Only a hold with `fence` when it is not 0. With `in_doubt`
  // the caller is about to send a write that gives the hold away (a hand-over): the
  // stranded hold is then only ever released, never retaken (Hold::release_sent).
  // Returns the fence stranded, 0 if none.
  std::int64_t strand(std::int64_t fence, bool in_doubt);
  std::int64_t strand(std::int64_t fence = 0) override { return strand(fence, false); }
  // For the elector: if a stranded hold is still ours on the server, takes it back with
  // one renewal (same fence; the lease never left this owner) and returns the new lease
  // end; otherwise releases what is left of it (fenced) and returns nullopt.
  std::optional<std::int64_t> retake();

  // ---- The same operations in parts, for a caller that sends the writes itself -------
  // (an event loop awaiting its driver: Python's asyncio with a pymongo AsyncDatabase).
  // Each begin_* does what its operation does before its one write, when nothing before
  // it needs a round trip (the server's safety known, no stranded hold to settle, a
  // fresh clock sample), and says which command to send (commands.h, the one every
  // transport sends); otherwise it says "on a thread" and the caller runs the whole
  // operation there. The parts make no round trip unless said so. The operations above
  // are these parts with the write sent through the storage, so each rule has one place.

  // A claim about to be sent: what claim_once prepared before its write.
  struct PendingClaim {
    LockClaim claim;
    bool force = false;
    bool insert = false;      // the write is insert_claim (else the conditional upsert)
    std::int64_t sent = 0;    // host mono, read before the estimate `t`
    ServerTime t;             // the estimate the claim carries
    bool round_trips = true;  // false (begin_claim): what it strands is settled by the caller
  };
  // nullopt: run attempts with claim_once (try_acquire, AcquireRun::attempt) instead.
  std::optional<PendingClaim> begin_claim(bool force);
  commands::Command claim_command(const PendingClaim& p) const;
  // The insert met a document (E11000): what the claim does next (a read, then maybe the
  // upsert: round trips). The document written, nullopt when held by another.
  std::optional<LockDoc> claim_after_insert_refused(const PendingClaim& p);
  // Whether land_claim(p, doc) makes round trips (the fence moves to a new epoch).
  bool anchors(const std::optional<LockDoc>& doc) const;
  // The claim's write returned `doc`, the document written (nullopt: held by another):
  // claim_once's outcome, the hold installed. Errors strand what the claim wrote.
  std::optional<Claimed> land_claim(const PendingClaim& p, const std::optional<LockDoc>& doc);
  // The write failed or its outcome will never be known (cancelled): what it may have
  // written is stranded (by its stamp, its fence unknown), and released now when
  // p.round_trips; else the caller settles it (settle_stranded) on a thread soon after.
  void drop_claim(const PendingClaim& p);

  // release(false) in parts. on_thread: release() must run instead. No hold: nothing to
  // send (release() would send nothing either).
  struct PendingRelease {
    bool on_thread = true;
    std::optional<Hold> hold;
    std::int64_t now_ms = 0;  // server time the write carries
  };
  PendingRelease begin_release();
  commands::Command release_command(const PendingRelease& r) const;  // r.hold set
  void release_landed(const PendingRelease& r, bool matched);
  void release_failed(const PendingRelease& r);  // it may still land: stranded in doubt

  // touch() in parts: nullopt -> touch() on a thread; else send renew_command, then
  // finish_touch (touch()'s result) or fail_touch.
  std::optional<RenewTicket> begin_touch();
  std::optional<std::int64_t> finish_touch(RenewTicket& ticket, bool renewed);
  void fail_touch(RenewTicket& ticket);
  commands::Command renew_command(const RenewTicket& ticket) const;

  // owned() and current() of the document a read of the key returned (commands::read):
  // no round trip unless the clock sample is stale (server_clock().stale()).
  bool owned_by(const std::optional<LockDoc>& doc);
  std::optional<LockDoc> current_of(std::optional<LockDoc> doc);
  // The message of a refused non-blocking acquire ("KEY owned by HOST pid PID"): from
  // what the last claim read, or one read.
  std::string refusal_message();
  // Settles a stranded hold now (round trips; a failure is logged, and the hold is
  // settled before the next claim).
  void settle_stranded() { state_.settle_stranded_quietly(); }

  // For the elector: every claim of this locker carries the payload `source` returns
  // (LockClaim::payload: set in the claim's own atomic write). Set before the first
  // claim; `source` runs on the claiming thread, under no lock of this locker.
  void set_claim_payload(std::function<ClaimPayload()> source) {
    claim_payload_ = std::move(source);
  }

 private:
  void check_server_safety();
  // try_acquire with the fence of the hold installed (a deferred token's raw fence):
  // the parts above, the write sent through the storage.
  // Fair: the claim is sent only when the queue's gate is open, and a refused `wait`
  // (a fair blocking acquire) enqueues or keeps its entry (lock_queue.h).
  std::optional<Claimed> claim_once(bool force, bool wait = false);
  void queue_wait(const LockQueue::Look& look);  // LockQueue::wait, failures logged
  PendingClaim prepare_claim(bool force, bool round_trips);
  // The claim's write: an insert where the document is most likely gone (p.insert);
  // when one is there, claim_after_insert_refused. Else Storage::claim. The document
  // written, nullopt when held by another.
  std::optional<LockDoc> send_claim(const PendingClaim& p);
  // The token (or deferred fence) of the claim that wrote `doc`, moving its fence to a
  // new epoch when it has to (anchor_epoch); nullopt when held or gone.
  std::optional<std::int64_t> claimed_token(const PendingClaim& p,
                                            const std::optional<LockDoc>& doc);
  // The document that refused the last claim: what send_claim read, else one read.
  std::optional<LockDoc> refusing_holder();
  // The fenced release write of hold `h` (release, release_if), and what its outcome
  // tells about the document (release_write and release_landed).
  void release_write(const Hold& h);
  void release_written(bool matched);
  std::optional<std::int64_t> held_expiry() const;  // the current hold's, server time
  std::string held_message(const std::optional<LockDoc>& holder) const;
  // Moves a fence counted inside a fresh document to a new epoch: the token, or nullopt
  // when the hold {uuid, fence} is gone.
  std::optional<std::int64_t> anchor_epoch(std::int64_t fence, std::int64_t created);
  // The ts_created of a claim sent when the server's clock reads at least `earliest`:
  // never `avoid`, the stamp of the earlier claim of ours the document may still carry.
  static std::int64_t claim_stamp(std::int64_t earliest, std::int64_t avoid);
  // `doc` is what our claim stamped `created_ms` wrote (locked, our uuid, its ts_created).
  bool wrote(const LockDoc& doc, std::int64_t created_ms) const;
  // The settling write of a stranded hold (HoldState::SettleFn): releases it (reading
  // its fence first if unknown), or, for a hold given up with a minimum hold that has
  // not surely passed, sets its expiry to that bound (missed_keep when the document no
  // longer carries the hold). Throws on failure.
  HoldState::Settled settle_write(const Hold& s);
  void note_release_in_doubt();                 // a release failed: see eager_token_
  std::unique_lock<std::mutex> lock_hold_io();  // hold_io_mu_ (lazy_token only)

  LockerOptions options_;
  HoldState state_;  // the hold, stranded holds, the clocks and the storage

  mutable std::mutex mu_;  // guards the lock's own state below; never held across I/O
  // With lazy_token, held across the writes that name the current hold (renew, release,
  // the deferred token's fence change), so a renewal never names a fence that is being
  // replaced. Taken before mu_, never inside it.
  std::mutex hold_io_mu_;
  // A release of a hold without a token was sent and not confirmed: it may land later,
  // on a new hold of ours whose document restarted at the same fence. From then on
  // tokens are assigned at acquire (the fence change refuses such a collision).
  bool eager_token_ = false;
  // The ts_created of our latest claim of the key known to be applied, and of the window
  // marker we last won: a new claim is stamped differently (claim_stamp).
  std::int64_t known_created_ms_ = 0;
  // A guess, never a belief: the lock's document is most likely absent (it is deleted
  // on release, and this locker has not met one since its own deleting release), so the
  // next claim is sent as an insert (send_claim). A wrong guess costs one round trip
  // and changes nothing at the server.
  bool absent_likely_ = false;
  // What send_claim read when it refused a held lock: names the holder in LockExists
  // without another read. Reset by every claim.
  std::optional<LockDoc> refused_by_;
  std::function<ClaimPayload()> claim_payload_;  // set_claim_payload
  // Fair queueing (LockerOptions::fair; null otherwise), and why the last claim was not
  // sent: the live waiters before this instance (names them in LockExists).
  std::unique_ptr<LockQueue> queue_;
  std::optional<std::int64_t> queue_refused_;
  std::string won_marker_;
  std::int64_t won_created_ms_ = 0;
};

}  // namespace mongoelector
