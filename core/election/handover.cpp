// Graceful handover: Elector::resign() and Elector::transfer(), and the follower side
// (peeks, accepting a hand-over). Invariants kept (protocol notes):
//  * Step-down before takeover: the leader ends its term locally (is_leader() false, the
//    deadline timer cancelled) and on_leader_loss RETURNS before the one write that lets
//    anyone else take over (the fenced release of resign(), the hand-over of transfer()).
//  * One leader at a time: the target leads only after a renewal of its own, sent after
//    it read the hand-over, its lease counted from that send (never from the old
//    leader's write).
//  * Tokens increase: the hand-over writes fence + 1 (same epoch); later claims $inc from
//    there. A hold whose counter would leave its epoch is not handed over.
//  * Late operations: the hand-over names the hold (uuid AND fence, unexpired), so a
//    stale transfer() cannot move a newer hold; the old leader's late renewals name its
//    own uuid and no longer match. That is not enough on its own: a hand-over whose
//    outcome is unknown (an error, a timeout) may land after the old leader took the
//    same hold back, which it would then move to the target (two leaders). So the term's
//    hold is stranded IN DOUBT before the release or hand-over is sent (as a failed
//    release leaves it, Hold::release_sent): it is only ever released, fenced, never
//    retaken with that fence; a new term of ours has a new fence, which a late write
//    does not match.
//  * Observers (core/observe) tell a hand-over the target has not taken yet (pending:
//    nobody leads) from one it took (the target leads): the hand-over writes its expiry
//    twice (ts_expire, handover_expire) and the target's first renewal moves ts_expire
//    past it.
#include <algorithm>
#include <cmath>

#include "../exceptions.h"
#include "../metrics.h"
#include "elector.h"

namespace mongoelector {

namespace {
constexpr std::int64_t kEpochUnit = LockDoc::kEpochUnit;  // tokens: epoch << 32 | n
}  // namespace

std::int64_t Elector::handover_poll_ms() const {
  const std::int64_t ttl = locker_->ttl_ms();
  if (!options_.handover_poll_s) return std::max<std::int64_t>(1, ttl / 4);
  if (*options_.handover_poll_s <= 0) return 0;
  return std::max<std::int64_t>(1, std::llround(*options_.handover_poll_s * 1000.0));
}

std::optional<Elector::Event> Elector::accept_handover(std::int64_t now, const LockDoc& doc) {
  if (doc.uuid != locker_->identity().uuid || doc.fence < kEpochUnit) return std::nullopt;
  // The mark must name this very hold: a later claim ($inc of fence) voids it.
  if (!Storage::HandOver::marks(doc)) return std::nullopt;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (accepted_handover_fence_ >= doc.fence) return std::nullopt;  // taken (or refused) once
  }
  if (locker_->hold() || locker_->has_stranded()) return std::nullopt;
  // One renewal of our own, named by uuid and the handed-over fence; the lease counts
  // from its send (`sent` is read before the estimate the write carries).
  const std::int64_t sent = clock_->mono_ms();
  Locker::RenewTicket t = locker_->begin_renew(sent);
  t.fence = doc.fence;
  t.request.fence = doc.fence;
  // Past the hand-over's expiry, even when this node's estimate of the server's clock is
  // behind the old leader's: observers tell a taken hand-over by its moved expiry
  // (HandOver::pending_in). At most that estimate difference longer on the server than
  // this node's own lease end, which only delays the next claimant.
  if (doc.ts_expire) t.request.expire_ms = std::max(t.request.expire_ms, doc.ts_expire->ms + 1);
  bool ok;
  try {
    ok = locker_->storage().renew(locker_->options().collection, options_.key,
                                  locker_->identity().uuid, doc.fence, t.at.now_ms,
                                  t.request.expire_ms);
  } catch (...) {
    metrics::record_renewal(false);
    // Idempotent: the next peek tries the same renewal again.
    locker_->finish_renew(t, false);
    throw;
  }
  metrics::record_renewal(ok);
  {
    std::lock_guard<std::mutex> g(mu_);
    accepted_handover_fence_ = doc.fence;
  }
  if (!locker_->finish_renew(t, ok)) return Event::None;  // expired meanwhile
  const std::optional<Lease> lease = locker_->lease();
  if (!lease) return Event::None;
  {
    // The hand-over cleared the payload: written already when this node has none (no
    // extra write); else the loop writes it (payload_dirty).
    std::lock_guard<std::mutex> g(payload_mu_);
    payload_fence_ = lease->fence;
    payload_written_ = doc.payload == payload_ ? payload_version_ : 0;
  }
  log(LogLevel::Info,
      "took over " + options_.key + " handed over by " +
          doc.raw.get_string("handover_from").value_or("?"),
      log_fields(LogEvent::None, doc.fence));
  return begin_term(now, *lease);
}

std::optional<std::int64_t> Elector::end_term_for_handover(std::int64_t hold_off_until) {
  std::int64_t fence;
  {
    std::lock_guard<std::mutex> g(mu_);
    hold_off_until_mono_ = std::max(hold_off_until_mono_, hold_off_until);
    last_report_mono_ = -1;  // the next poll reports is_leader: false
    auto d = renew_deadline_locked();
    if (!d || clock_->mono_ms() >= *d) return std::nullopt;  // the timer announces it
    leader_ = false;
    leader_exists_ = false;
    cancel_deadline_locked();
    fence = term_fence_;
  }
  cv_.notify_all();
  // Not ours to act on any more; the server copy is released or handed over next, and
  // that write may land late: in doubt from now on (never retaken, see the top).
  locker_->strand(fence, /*in_doubt=*/true);
  return fence;
}

bool Elector::resign(std::optional<double> hold_off_s) {
  const double h = hold_off_s.value_or(options_.ttl_s);
  if (!std::isfinite(h) || h < 0 || h > 1e9)
    throw InvalidArgument("hold_off must be a finite number of seconds in [0, 1e9]");
  const std::int64_t until = clock_->mono_ms() + std::llround(h * 1000.0);
  std::optional<std::int64_t> fence;
  {
    std::lock_guard<std::timed_mutex> g(poll_mu_);
    fence = end_term_for_handover(until);
  }
  if (fence) {
    log(LogLevel::Info,
        "resigned leadership of " + options_.key + " (not standing for " +
            std::to_string(std::llround(h * 1000.0)) + " ms)",
        log_fields(LogEvent::StepDown, *fence));
    fire(Event::LostLeader);  // returns before the release below lets anyone take over
  }
  {
    std::lock_guard<std::timed_mutex> g(poll_mu_);
    try {
      locker_->release(false);  // the stranded hold, fenced
      std::lock_guard<std::mutex> s(mu_);
      leader_exists_ = false;
    } catch (const std::exception& ex) {
      // Kept stranded: the loop releases it (never takes it back during the hold-off).
      log(LogLevel::Warning, "release of " + options_.key + " failed: " + ex.what(),
          log_fields(LogEvent::ReleaseFailed));
    }
  }
  cv_.notify_all();
  return fence.has_value();
}

void Elector::transfer(const std::string& to_uuid) {
  const std::string& me = locker_->identity().uuid;
  if (to_uuid.empty())
    throw InvalidArgument("transfer needs the uuid of the member to hand over to");
  if (to_uuid == me)
    throw InvalidArgument("cannot transfer leadership of " + options_.key + " to this node");
  const std::optional<std::int64_t> current = leader_fence();
  if (!current)
    throw InvalidArgument("not the leader of " + options_.key + ": nothing to transfer");
  if ((*current & (kEpochUnit - 1)) == kEpochUnit - 1)
    throw InvalidArgument("the token counter of this epoch is exhausted: resign() instead");
  // The target must be a member (its status document): its host and pid go into the
  // lock document, so that observers see who leads. Without status reports any uuid is
  // accepted (a uuid nobody runs costs one ttl, as a crash does).
  std::string host;
  std::int64_t pid = 0;
  if (options_.report_status) {
    bool found = false;
    for (const Document& m :
         locker_->storage().list_status(options_.status_collection, options_.key)) {
      if (m.get_string("uuid").value_or(m.get_string("_id").value_or("")) != to_uuid) continue;
      found = true;
      host = m.get_string("host").value_or("");
      pid = m.get_int("pid").value_or(0);
      break;
    }
    if (!found)
      throw InvalidArgument(to_uuid + " is not a member of " + options_.key +
                            " (no status document in " + options_.status_collection + ")");
  }
  std::optional<std::int64_t> fence;
  {
    std::lock_guard<std::timed_mutex> g(poll_mu_);
    fence = end_term_for_handover(0);
    if (!fence)
      throw InvalidArgument("not the leader of " + options_.key + ": nothing to transfer");
    std::lock_guard<std::mutex> s(mu_);
    handing_over_ = true;  // the loop must not take the stranded hold back meanwhile
  }
  struct Done {  // clears handing_over_ on every path
    Elector* e;
    ~Done() {
      {
        std::lock_guard<std::mutex> s(e->mu_);
        e->handing_over_ = false;
      }
      e->cv_.notify_all();
    }
  } done{this};
  log(LogLevel::Info, "handing leadership of " + options_.key + " over to " + to_uuid,
      log_fields(LogEvent::StepDown, *fence));
  fire(Event::LostLeader);  // returns before the hand-over lets the target lead
  bool ok;
  {
    std::lock_guard<std::timed_mutex> g(poll_mu_);
    const ServerTime t = locker_->server_clock().estimate_sampling();
    Storage::HandOver h;
    h.key = options_.key;
    h.from_uuid = me;
    h.from_fence = *fence;
    h.to_uuid = to_uuid;
    h.to_host = host;
    h.to_pid = pid;
    h.to_fence = *fence + 1;
    h.now_ms = t.now_ms;
    h.expire_ms = t.now_ms + locker_->ttl_ms();
    // On an error the hold stays stranded in doubt: the loop releases it (fenced), and
    // the hand-over, should it land later, finds it released or re-claimed (new fence).
    ok = locker_->storage().hand_over(locker_->options().collection, h);
    if (ok) {
      try {
        locker_->release(false);  // our stranded copy: matches nothing now, clears it
      } catch (const std::exception&) {
        // Still stranded: the loop settles it (a fenced release that cannot match).
      }
    }
    std::lock_guard<std::mutex> s(mu_);
    leader_exists_ = ok;
  }
  if (!ok)
    throw InvalidArgument("the lease of " + options_.key +
                          " ended before it could be handed over: nothing was handed over");
  log(LogLevel::Info, "handed leadership of " + options_.key + " over to " + to_uuid,
      log_fields(LogEvent::None, *fence + 1));
}

}  // namespace mongoelector
