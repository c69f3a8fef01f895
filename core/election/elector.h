// MongoLeaderElector: leader election on top of a Locker ("elector.locks"), with node
// status in "elector.leader_status". The election loop is Elector::run_loop().
//
// Timing (T = ttl):
//  * Leader renews every T/3 (one round trip); after a failed renewal it retries every
//    min(T/20, 250 ms) until the RENEW DEADLINE itself (a call may still be running
//    then: the deadline timer announces the loss on time regardless, and a renewal that
//    lands late only extends a hold that is still this node's), so a server pause
//    shorter than about T - (T/3 + margin) never costs leadership. The renew deadline is
//    lease_start + T - margin, margin = max(T/10, 2*clock uncertainty + 50 ms), on the
//    host's monotonic clock, where lease_start is when the last successful write was
//    SENT. Claimants compare with the earliest the server's clock can read, so the margin
//    covers this node's estimate error and the claimant's is covered on its side.
//  * At the deadline the term ends: is_leader() turns false at once (it is computed from
//    the locker's hold and the clock under one lock), a deadline timer (Clock::timer(),
//    one process-wide thread that no I/O and no user code can delay) ends the term, and
//    on_leader_loss fires exactly once per term on the clock's callback dispatcher
//    (callback_dispatcher.h), never on the timer's thread. The hold is kept as stranded: once the server answers, the
//    node takes it back with one renewal (a new term: on_leader fires) or releases it,
//    fenced, so failover never waits for the stale lease to expire.
//  * The renewal path never samples the server's clock inside its budget: a stale sample
//    is refreshed first, as its own call, only when both calls fit before the deadline.
//    A jump of the server's clock ends the term (the lease was written on the old base).
//    The loop waits for application threads (poll_mu_) only until the deadline.
//  * Follower reads the lock (one round trip) and sleeps until the leader's lease can
//    expire, plus jitter, at most T; then (timeparanoid: after the cached time check)
//    tries one conditional acquire. Failover after a leader crash is about T.
//  * A term begins only if its lease still has room before the deadline after the claim
//    (a slow epoch path may eat it): otherwise the hold is released, not announced.
//  * While a leader exists, a follower also peeks at the lock document every
//    handover_poll_s (default T/4; one read, no status write: reports keep their T/2
//    cadence), so that a resign() or transfer() is noticed in about T/4 instead of T.
//    Cost: about 4 reads per follower per ttl instead of about 1 (writes unchanged).
//  * Priority leaders (opt-in, ElectorOptions::priority): see priority.h. A leader with a
//    priority reads the members once per poll (when it fits before the deadline) and
//    transfer()s to a live member of strictly higher priority seen for priority_stability.
//  * resign() / transfer(): see handover.cpp. Both end the term locally (is_leader
//    false, on_leader_loss returns) BEFORE the write that lets anyone else take over.
//  * Callbacks never run while an internal mutex is held, so they may call stop() or
//    release(). on_leader_loss at a missed deadline runs on a callback-dispatcher thread
//    (shared by the process): keep it short.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "../locker.h"
#include "../log.h"

namespace mongoelector {

struct ElectorDefaults {
  static constexpr double ttl_s = 15;
  static constexpr bool report_status = true;
  static constexpr bool allow_unsafe_server = false;
  // The default of every binding's elector (C API 1.1 config, Go, Rust, Python): see
  // ElectorOptions::delete_on_release. The C++ member below keeps the 1.0 value, which
  // the C API's 1.0 options struct still gives.
  static constexpr bool delete_on_release = true;
};

struct ElectorOptions {
  std::string key;
  double ttl_s = ElectorDefaults::ttl_s;
  bool report_status = ElectorDefaults::report_status;
  std::optional<std::string> app_version;
  std::string lock_collection = "elector.locks";
  std::string status_collection = "elector.leader_status";
  // Refused (InvalidArgument): on servers whose findAndModify is not atomic two nodes may
  // both lead and fencing tokens may repeat. Kept so that bindings can pass it through.
  bool allow_unsafe_server = false;
  bool ensure_indexes = true;
  // As LockerOptions::delete_on_release: lets original electors take over at once after
  // this node releases (rolling upgrades); costs the next leader two round trips.
  bool delete_on_release = false;
  // Accept a storage whose calls have no known time bound (Storage::call_bound_ms() == 0).
  bool allow_unbounded_calls = false;
  // Follower peek interval while a leader exists (seconds): how fast a resign() or
  // transfer() elsewhere is noticed. nullopt: ttl/4; 0: off (followers wake only when
  // the leader's lease can expire, as before).
  std::optional<double> handover_poll_s;
  // The leader's payload (core/storage/payload_storage.h): a JSON object (text, at most
  // kMaxPayloadBytes) that this node publishes with each term it leads, written by the
  // claim that starts the term. nullopt: none (the claim clears the previous leader's).
  std::optional<std::string> payload;
  // Priority leaders (priority.h), off while nullopt: this node then publishes no priority
  // and never hands over by priority (no extra reads). Set (any finite number): published
  // in this node's status document, and while leading this node hands over to the live
  // member of highest priority strictly above it once that member has been seen live at
  // every poll for priority_stability_s. Members without a priority are never candidates.
  // Needs report_status (InvalidArgument otherwise).
  std::optional<double> priority;
  // Seconds, used while THIS node leads (give every member the same); nullopt: one ttl. A
  // finite number in [0, 1e9] (InvalidArgument otherwise).
  std::optional<double> priority_stability_s;
};

struct ElectorCallbacks {
  std::function<void()> on_leader;
  std::function<void()> on_leader_loss;
  std::function<void()> on_loop;
};

class Elector {
 public:
  Elector(std::shared_ptr<Storage> storage, ElectorOptions options, ElectorCallbacks callbacks,
          std::shared_ptr<Clock> clock = nullptr, Identity identity = Identity::generate());
  // Stops the loop and joins its thread. Must not run on the loop thread (from one of
  // its own callbacks), nor inside its own on_leader_loss: the loop or the announcement
  // still uses the object after the callback returns.
  // Bindings whose last reference may drop inside a callback hand the destruction to
  // another thread (the Python module does).
  ~Elector();

  Elector(const Elector&) = delete;
  Elector& operator=(const Elector&) = delete;

  // Starts the loop on a new native thread. No-op if running.
  void start();
  // Runs the loop on the calling thread until stop() (start(blocking=True)).
  void run_loop();
  // Ends the loop, waits for the thread unless called from it, releases leadership.
  void stop();
  // One cycle (see class comment). Storage errors are logged, not thrown.
  void poll();
  // Gives up leadership now; fires on_leader_loss if it was leader.
  void release();
  // Gives up leadership now and keeps the loop running, but does not stand for election
  // (nor accept a hand-over) for hold_off_s seconds (nullopt: ttl), so another member
  // takes over. The term ends locally and on_leader_loss returns BEFORE the fenced
  // release is sent. Returns whether this node was leader. Any thread, this elector's
  // callbacks included (they run without internal locks).
  // InvalidArgument for a hold-off that is not a finite number in [0, 1e9].
  bool resign(std::optional<double> hold_off_s = std::nullopt);
  // The leader hands leadership to member `to_uuid`, which takes over at its next peek
  // (handover_poll_s) with one renewal of its own, instead of after a ttl. The term ends
  // locally and on_leader_loss returns BEFORE the one fenced write that names the target
  // (Storage::hand_over: uuid = target, fence = this term's + 1). A dead target costs
  // what a crash does: the lock expires one ttl after the hand-over.
  // InvalidArgument: not leader (also when the lease ended before the write), target
  // empty or this node, or (with report_status) not a member in the status collection.
  // Storage errors propagate; leadership is gone anyway. The hand-over may then still
  // land at the server: the loop releases the hold (fenced) and never takes it back with
  // its fence, so a late hand-over moves either this term or nothing, never a later one.
  void transfer(const std::string& to_uuid);

  // Replaces this node's payload (nullopt: none). Validated first (InvalidArgument: not a
  // JSON object, above kMaxPayloadBytes, not UTF-8). While leading, one write filtered on
  // this term's uuid AND fence, with a version above every earlier one of this node
  // (Storage::set_payload): true when it was applied. Not leading: kept for the next
  // claim, false. Storage errors propagate; the loop writes it at its next poll of the
  // term (a write that lands late changes this term's payload only, never to an older
  // one, never a later term's). Any thread, callbacks included.
  bool set_payload(std::optional<std::string> json);
  std::optional<std::string> payload() const;

  bool running() const;
  // True on the thread running run_loop(). Callbacks may also run on a callback
  // dispatcher's thread (on_leader_loss at a missed deadline, or the thread destroying
  // the elector if none had begun it) or on an application thread (release(), stop()).
  bool on_loop_thread() const;
  // Leader, the locker still holds the term's lease, and the renew deadline has not
  // passed (local clock: true even while a renewal call hangs, false the moment the
  // deadline passes or the lease is released through locker()).
  bool is_leader();
  // The fencing token of the current term, read with is_leader() in one critical
  // section: nullopt when not leader (bindings must not combine the two reads).
  std::optional<std::int64_t> leader_fence();
  bool leader_exists() const;
  // Longest wait between polls as in the original: T/2 as leader, T as follower. The
  // loop wakes earlier (a leader renews every T/3; lease expiry, retries).
  double poll_wait() const;
  // Host mono ms of the next scheduled poll (tests), and of the renew deadline.
  std::int64_t next_poll_mono() const;
  std::optional<std::int64_t> renew_deadline_mono() const;

  // Locker status plus _id, is_leader, elector_running, last_poll, app_version.
  // may_sample=false: never a round trip (the timestamp is the current server-time
  // estimate, or the host's clock before the first sample).
  Document node_status(bool may_sample = true);
  // {member_detail: [...], leader: {host, process_id, uuid} | None, timestamp} is
  // structured by the bindings from these parts.
  struct ClusterDetail {
    std::vector<Document> member_detail;  // newest first, without _id
    std::optional<LockDoc> leader;
    DateTime timestamp;
  };
  ClusterDetail cluster_detail();

  Locker& locker() { return *locker_; }
  std::shared_ptr<Locker> locker_ptr() { return locker_; }
  const ElectorOptions& options() const { return options_; }
  std::optional<DateTime> last_poll() const;

  // The locker's status fields as in MongoLocker.status (uuid, key, ttl, timestamp,
  // host, pid, lock_owned, lock_created, lock_expires); one round trip.
  static Document locker_status(Locker& locker);

 private:
  enum class Event { None, BecameLeader, LostLeader };
  Event poll_locked();
  Event poll_leader(std::int64_t now);
  Event poll_follower(std::int64_t now);
  // handover.cpp: the follower side of resign()/transfer().
  std::int64_t handover_poll_ms() const;
  // A hand-over to this node in `doc`: take it with one renewal (the term's lease counts
  // from that renewal's send). nullopt when `doc` is not one.
  std::optional<Event> accept_handover(std::int64_t now, const LockDoc& doc);
  // Ends the current term locally for resign()/transfer() (poll_mu_ held by the caller)
  // and strands its hold: the term's fence, nullopt if not leader.
  std::optional<std::int64_t> end_term_for_handover(std::int64_t hold_off_until);
  // Starts a term on a lease that ends at `lease.end_mono`, unless too little is left.
  Event begin_term(std::int64_t now, const Lease& lease);
  // Ends the current term from the loop (false if the timer or release() already did);
  // poll() strands the locker's hold after announcing the loss.
  bool end_term();
  void on_deadline(std::uint64_t term);  // deadline timer task
  void announce_deadline(std::uint64_t term);
  void schedule_deadline_locked(std::int64_t deadline);
  void cancel_deadline_locked();
  std::optional<std::int64_t> renew_deadline_locked() const;           // mu_ held
  LogFields log_fields(LogEvent event, std::int64_t fence = 0) const;  // key, uuid, host
  bool fits_before_deadline(std::int64_t now, int calls) const;
  bool lock_for_poll(std::unique_lock<std::timed_mutex>& lk);
  void retry_soon();
  void fire(Event e);
  void call(const std::function<void()>& fn, const char* name);
  std::int64_t jitter_ms();
  void report_status();
  Document build_status(bool may_sample);
  Document report_document();  // build_status plus this process's metrics (stat_*)
  // The payload write of the current term if the server may not have the latest version
  // yet: false when not leader, nothing to write or not matched. Storage errors propagate.
  bool sync_payload();
  bool payload_dirty() const;
  // priority.cpp. While leading with a priority: one read of the members (if it fits before
  // the deadline); the member to transfer() to once it has been seen long enough.
  std::optional<std::string> priority_poll();
  void transfer_to_priority(const std::string& to_uuid);  // no poll_mu_ held; logs failures
  std::int64_t priority_stability_ms() const;
  std::int64_t priority_live_window_ms() const;
  void validate_priority_options() const;

  ElectorOptions options_;
  ElectorCallbacks callbacks_;
  std::shared_ptr<Clock> clock_;
  std::shared_ptr<Locker> locker_;
  std::int64_t call_bound_ms_ = 0;  // 0: unknown (allow_unbounded_calls)

  // Serialises poll() and release() (storage calls). Timed: the loop waits for an
  // application thread only until its renew deadline.
  std::timed_mutex poll_mu_;
  mutable std::mutex mu_;  // guards the state below; never held across I/O or callbacks
  std::condition_variable cv_;
  // The current term: live while leader_; its lease is the locker's hold with
  // term_fence_, and its renew deadline is that hold's lease end minus margin_ms_.
  bool leader_ = false;
  std::uint64_t term_ = 0;
  std::int64_t term_fence_ = 0;
  std::int64_t term_margin_ms_ = 0;
  DeadlineTimer::Id deadline_task_ = 0;
  bool loss_in_progress_ = false;  // a missed deadline's loss is being announced: no new term yet
  std::shared_ptr<CallbackJob> loss_job_;  // that announcement (~Elector finishes it)
  int deadline_tasks_running_ = 0;         // on_deadline calls under way (~Elector waits)
  bool leader_exists_ = false;
  bool stop_requested_ = false;
  bool running_ = false;
  std::int64_t next_poll_mono_ = 0;
  std::int64_t hold_off_until_mono_ = 0;      // resign(): no claim, no hand-over before
  bool handing_over_ = false;                 // transfer() is between its two halves
  std::int64_t accepted_handover_fence_ = 0;  // each hand-over is taken at most once
  std::int64_t last_report_mono_ = -1;        // the last status report (peeks skip reports)
  // Priority leaders: the candidate seen live and higher at every poll of this term since
  // priority_since_ (host mono ms); empty: none.
  std::string priority_candidate_;
  std::int64_t priority_since_ = 0;
  std::optional<DateTime> last_poll_;
  // The payload (set_payload), under its own leaf mutex: the claim reads it from inside
  // the locker (Locker::set_claim_payload), where mu_ must not be taken.
  mutable std::mutex payload_mu_;
  std::optional<std::string> payload_;
  std::int64_t payload_version_ = 1;  // of payload_; every set_payload adds one
  std::int64_t claim_version_ = 0;    // the version the last claim carried
  // The version the server surely has for the hold with payload_fence_ (0: none known).
  std::int64_t payload_fence_ = 0;
  std::int64_t payload_written_ = 0;
  std::thread thread_;
  std::thread::id loop_thread_id_;
  std::mt19937_64 rng_;
};

}  // namespace mongoelector
