#include "locker.h"

#include "metrics.h"

#include <cmath>

#include "exceptions.h"
#include "log.h"
#include "storage/commands.h"

namespace mongoelector {

namespace {
constexpr std::int64_t kEpochUnit = LockDoc::kEpochUnit;  // tokens: epoch << 32 | n
}  // namespace

Locker::Locker(std::shared_ptr<Storage> storage, LockerOptions options,
               std::shared_ptr<Clock> clock, Identity identity)
    : options_(std::move(options)),
      state_(std::move(storage),
             HoldSpec::from(options_, "lock", options_.key, "the lease of " + options_.key),
             std::move(clock), std::move(identity),
             [this](const Hold& s) { return settle_write(s); }) {
  // A lock deleted on release is absent whenever it is free: start with the insert.
  absent_likely_ = options_.delete_on_release;
  if (options_.fair) {
    validate_collection(LockQueue::collection_for(options_.collection));
    queue_ = std::make_unique<LockQueue>(
        state_.storage(), options_.collection, options_.key, state_.identity().uuid,
        state_.ttl_ms(), [this] { return state_.server_time_for_write().earliest_ms(); });
  }
  if (options_.ensure_indexes) state_.storage().ensure_lock_indexes(options_.collection);
}

void Locker::check_server_safety() {
  state_.check_server_safety(options_.allow_unsafe_server,
                             " does not run findAndModify atomically, so two nodes could both "
                             "take over one expired lock; refusing to run. Set "
                             "allow_unsafe_server to accept that risk (tests, single node).",
                             ": findAndModify is not atomic; mutual exclusion is NOT "
                             "guaranteed under contention and fencing tokens may repeat "
                             "(allow_unsafe_server is set)");
}

std::int64_t Locker::acquire(bool blocking, std::optional<double> timeout_s, double step_s,
                             bool force, const CancelFn& cancel) {
  const std::unique_ptr<AcquireRun> run = start_acquire(blocking, timeout_s, step_s, force);
  return state_.acquire(*run, cancel);
}

std::unique_ptr<AcquireRun> Locker::start_acquire(bool blocking, std::optional<double> timeout_s,
                                                  double step_s, bool force) {
  auto run = std::make_unique<AcquireRun>(
      state_, AcquireOptions{blocking, timeout_s, step_s, options_.timeparanoid},
      [this, force, wait = blocking && queue_ != nullptr] { return claim_once(force, wait); },
      [this] { return refusal_message(); },
      [this](std::int64_t fence) { return release_if(fence); });
  if (queue_) {
    run->set_pace([this](std::int64_t step_ms) { return queue_->pace_ms(step_ms); });
    run->set_undo_wait([this] { leave_queue(); });
  }
  return run;
}

void Locker::leave_queue() {
  if (queue_) queue_->leave(options_.key, log_fields(LogEvent::None));
}

QueueEntry Locker::queue_entry() const { return queue_ ? queue_->entry() : QueueEntry{}; }

std::string Locker::refusal_message() {
  std::optional<std::int64_t> waiting;
  {
    std::lock_guard<std::mutex> g(mu_);
    waiting = queue_refused_;
  }
  if (!waiting) return held_message(refusing_holder());
  return options_.key + " has " + std::to_string(*waiting) +
         " waiter(s) before this one in its fair queue";
}

std::optional<std::int64_t> Locker::try_acquire(bool force) {
  const std::optional<Claimed> c = claim_once(force);
  if (!c) return std::nullopt;
  return c->token;
}

std::optional<Claimed> Locker::claim_once(bool force, bool wait) {
  check_server_safety();
  state_.settle_stranded();  // our own leftover must not stand in our way
  if (server_clock().stale()) refresh_clock();
  // Fair: the claim is sent only past the queue's gate (a forced claim ignores it).
  std::optional<LockQueue::Look> look;
  if (queue_) {
    std::lock_guard<std::mutex> g(mu_);
    queue_refused_.reset();
  }
  if (queue_ && !force) {
    look = queue_->look();  // one round trip
    if (!look->gate.open) {
      {
        std::lock_guard<std::mutex> g(mu_);
        queue_refused_ = look->waiting;
      }
      if (wait) queue_wait(*look);
      return std::nullopt;
    }
  }
  const PendingClaim p = prepare_claim(force, /*round_trips=*/true);
  std::optional<LockDoc> doc;
  try {
    doc = send_claim(p);
  } catch (...) {
    drop_claim(p);
    throw;
  }
  std::optional<Claimed> claimed = land_claim(p, doc);
  if (look && claimed) {
    try {
      queue_->won(*look);
    } catch (const StorageFailure& ex) {
      // The hold is won; the entry is a place in line: it expires within its ttl, and
      // release() tries to remove it again.
      log(LogLevel::Warning,
          "could not remove the queue entry of " + options_.key + " after acquiring: " + ex.what(),
          log_fields(LogEvent::None));
    }
  } else if (look && wait) {
    queue_wait(*look);
  }
  return claimed;
}

void Locker::queue_wait(const LockQueue::Look& look) {
  try {
    queue_->wait(look);
  } catch (const StorageFailure& ex) {
    // The entry is a place in line, not the hold: this attempt is refused as it would be
    // without it; the next one looks again.
    log(LogLevel::Warning, "could not write the queue entry of " + options_.key + ": " + ex.what(),
        log_fields(LogEvent::None));
  }
}

std::optional<Locker::PendingClaim> Locker::begin_claim(bool force) {
  if (queue_ || !state_.server_safety_known() || state_.has_stranded() || server_clock().stale())
    return std::nullopt;  // round trips first: claim_once
  return prepare_claim(force, /*round_trips=*/false);
}

Locker::PendingClaim Locker::prepare_claim(bool force, bool round_trips) {
  PendingClaim p;
  p.force = force;
  p.round_trips = round_trips;
  // The lease counts from the moment the write is sent (protocol-notes: "where the
  // lease starts"), read BEFORE the estimate the write carries: the local lease then
  // never ends after the server's.
  p.sent = clock().mono_ms();
  p.t = state_.server_time_for_write();
  std::int64_t created;
  {
    std::lock_guard<std::mutex> g(mu_);
    created = claim_stamp(p.t.earliest_ms(), known_created_ms_);
    p.insert = !force && absent_likely_;
    refused_by_.reset();
  }
  // Compared with the EARLIEST the server's clock may read: a slow sample makes us late,
  // never early (protocol notes, "both clocks count"). The document keeps the original's
  // shape, ts_expire = ts_created + ttl: its expiry is then at most 2u earlier in true
  // server time than this node's lease end (send + ttl), which the renew deadline's
  // margin (>= 2u + 50 ms) covers.
  const Identity& me = identity();
  p.claim =
      LockClaim{options_.key, me.uuid, me.host, me.pid, created, p.t.earliest_ms() + ttl_ms()};
  if (claim_payload_) p.claim.payload = claim_payload_();
  return p;
}

commands::Command Locker::claim_command(const PendingClaim& p) const {
  return p.insert ? commands::insert_claim(options_.collection, p.claim)
                  : commands::claim(options_.collection, p.claim, p.force);
}

std::optional<LockDoc> Locker::send_claim(const PendingClaim& p) {
  if (p.insert) {
    // Where the document is most likely gone, a plain insert is the cheaper claim. It
    // takes the key only where no document exists, which the upsert would take too, and
    // writes what the upsert would; where one exists it writes nothing.
    if (std::optional<LockDoc> doc = storage().insert_claim(options_.collection, p.claim))
      return doc;
    return claim_after_insert_refused(p);
  }
  return storage().claim(options_.collection, p.claim, p.force);
}

std::optional<LockDoc> Locker::claim_after_insert_refused(const PendingClaim& p) {
  // A document deleted on release is there mostly while held: read it, as the original
  // does to name the holder. Held (compared as the upsert's filter would): refused, and
  // the read names the holder. Otherwise the upsert decides as always.
  std::optional<LockDoc> there = storage().read(options_.collection, options_.key);
  {
    std::lock_guard<std::mutex> g(mu_);
    absent_likely_ = false;
    if (there && there->held_at(p.claim.now_ms)) {
      refused_by_ = std::move(there);
      return std::nullopt;
    }
  }
  return storage().claim(options_.collection, p.claim, p.force);
}

std::optional<Claimed> Locker::land_claim(const PendingClaim& p,
                                          const std::optional<LockDoc>& doc) {
  std::optional<std::int64_t> token;  // a token unless deferred
  try {
    token = claimed_token(p, doc);
  } catch (...) {
    drop_claim(p);
    throw;
  }
  if (!token) return std::nullopt;
  const std::int64_t replied = clock().mono_ms();
  Hold h;
  h.fence = *token;
  h.created_ms = p.claim.now_ms;
  h.expire_ms = p.claim.expire_ms;
  h.lease_start_mono = p.sent;
  // The server applied the claim before its reply arrived: no later than the latest its
  // clock could read then.
  h.acquired_latest_ms = state_.server_time_for_write(replied).latest_ms();
  state_.install(h, replied, p.round_trips);  // or given up: the claim outlasted its lease
  // 0: deferred (lazy_token), see token()
  return Claimed{*token >= kEpochUnit ? *token : 0, *token};
}

bool Locker::anchors(const std::optional<LockDoc>& doc) const {
  if (!doc || doc->uuid != identity().uuid || doc->fence >= kEpochUnit) return false;
  std::lock_guard<std::mutex> g(mu_);
  return !(options_.lazy_token && !eager_token_);
}

std::optional<std::int64_t> Locker::claimed_token(const PendingClaim& p,
                                                  const std::optional<LockDoc>& doc) {
  if (!doc) return std::nullopt;
  if (doc->uuid != identity().uuid)
    throw StorageError("the server returned a lock document of another holder after a claim");
  {
    std::lock_guard<std::mutex> g(mu_);
    known_created_ms_ = p.claim.now_ms;  // the document now carries this claim's stamp
  }
  if (doc->fence >= kEpochUnit) return doc->fence;
  // Deferred: the fence, unique to this hold while the document lives, names it in
  // renewals and releases; token() turns it into a token.
  if (!anchors(doc)) return doc->fence > 0 ? std::optional<std::int64_t>(doc->fence) : std::nullopt;
  return anchor_epoch(doc->fence, p.claim.now_ms);
}

void Locker::drop_claim(const PendingClaim& p) {
  // The claim may have been applied (lost reply, a failure in the epoch path): what it
  // wrote is ours. Released now if the server answers (else before the next claim), or
  // by the caller of the parts soon after. Its name is unknown (fence 0): settling finds
  // it by what it wrote.
  Hold h;
  h.created_ms = p.claim.now_ms;
  h.expire_ms = p.claim.expire_ms;
  h.lease_start_mono = p.sent;
  if (p.round_trips)
    state_.abandon_claim(h);
  else
    state_.strand_claim(h);
}

std::optional<LockDoc> Locker::refusing_holder() {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (refused_by_) {
      std::optional<LockDoc> doc = std::move(refused_by_);
      refused_by_.reset();
      return doc;
    }
  }
  return storage().read(options_.collection, options_.key);
}

// The rare path: the document was created by this claim, or carried no token of ours
// (original node, deleted by the TTL monitor). Its counter restarted, so move it to a
// fresh epoch from "<coll>.fences", which outlives the lock document.
std::optional<std::int64_t> Locker::anchor_epoch(std::int64_t fence, std::int64_t created) {
  if (fence >= kEpochUnit) return fence;
  std::int64_t epoch = storage().bump_epoch(options_.collection, options_.key);
  if (epoch <= 0 || epoch >= (std::int64_t{1} << 30))
    throw StorageError("fence epoch out of range: " + std::to_string(epoch));
  std::int64_t token = epoch * kEpochUnit;
  // Named by its claim's ts_created too: {uuid, fence} of a restarted counter does not
  // tell a document from its earlier incarnation (deleted since), where a late fence
  // change of an older hold would otherwise land and hand out an old, lower token.
  if (!storage().set_fence(options_.collection, options_.key, identity().uuid, fence, created,
                           token)) {
    // Someone took the lock between our claim and now: our lease must have expired.
    log(LogLevel::Warning, "lock " + options_.key + " was taken over while its fence was set",
        log_fields(LogEvent::None, fence));
    return std::nullopt;
  }
  return token;
}

std::optional<std::int64_t> Locker::token() {
  {
    // Already a token (the common case): a local read, never queued behind a renewal
    // that holds hold_io_mu_ for its round trip.
    const std::optional<Hold> h = state_.hold();
    if (!h) return std::nullopt;
    if (h->fence >= kEpochUnit) return h->fence;
  }
  const std::unique_lock<std::mutex> io = lock_hold_io();
  const HoldState::Snapshot now = state_.snapshot();
  if (!now.hold) return std::nullopt;
  if (now.hold->fence >= kEpochUnit) return now.hold->fence;
  // The epoch is bumped while the hold is ours (the fence change below proves it), so
  // this token is above every earlier hold's and below every later one's.
  std::optional<std::int64_t> token;
  try {
    token = anchor_epoch(now.hold->fence, now.hold->created_ms);
  } catch (...) {
    // The fence change may still land: the hold's name (its fence) is unknown from now
    // on, so no write may name it by its counter. In doubt: given up locally, settled by
    // what its claim wrote (locker.h, "holds in doubt").
    state_.strand_nameless(now.gen);
    throw;
  }
  // Gone (taken over, released or deleted): dropped.
  return state_.rename(now.gen, token);
}

std::unique_lock<std::mutex> Locker::lock_hold_io() {
  // Only a deferred token changes a hold's fence while it is held.
  if (!options_.lazy_token) return {};
  return std::unique_lock<std::mutex>(hold_io_mu_);
}

std::int64_t Locker::claim_stamp(std::int64_t earliest, std::int64_t avoid) {
  // One millisecond earlier still compares conservatively (a claim takes what expired
  // by then) and tells this claim from the earlier one stamped in the same millisecond.
  return earliest == avoid ? earliest - 1 : earliest;
}

bool Locker::wrote(const LockDoc& doc, std::int64_t created_ms) const {
  return doc.locked && doc.uuid == identity().uuid && doc.ts_created &&
         doc.ts_created->ms == created_ms && doc.fence != 0;
}

HoldState::Settled Locker::settle_write(const Hold& s) {
  const ServerTime t = server_clock().estimate_sampling();
  // A minimum hold that has not surely passed (the server's earliest possible now is
  // before it): the lock stays taken until then, its expiry set exactly, shorter or
  // longer. The hold was given up locally before this write (release_min_hold).
  const bool keep = s.keep_until_ms > t.earliest_ms();
  bool matched = false;
  std::int64_t tried = 0;
  for (;;) {
    std::int64_t fence = s.fence;
    if (fence == 0) {
      // Name unknown (a lost claim reply, a token() in doubt): the hold is the document
      // its claim wrote -- our uuid AND that claim's ts_created -- under whatever fence it
      // carries now; never an earlier hold of ours (a minimum hold) that is still there.
      const std::optional<LockDoc> doc = storage().read(options_.collection, options_.key);
      if (!doc || !wrote(*doc, s.created_ms) || doc->fence == tried) break;
      fence = doc->fence;
    }
    try {
      // A counter fence (no token yet) restarts when the document is re-created, where a
      // later hold of ours may carry it again: the write names this claim's incarnation.
      const std::int64_t created = fence < kEpochUnit ? s.created_ms : 0;
      matched = keep ? storage().set_expiry(options_.collection, options_.key, identity().uuid,
                                            fence, t.now_ms, s.keep_until_ms, created)
                     : storage().release(options_.collection, options_.key, identity().uuid, fence,
                                         t.now_ms, options_.delete_on_release);
    } catch (...) {
      note_release_in_doubt();  // a late write of it must not meet a new hold's fence
      throw;
    }
    // A known name is the hold's only one. An unknown one may have changed since the
    // read (a late fence change: once at most, counter -> token): look again.
    if (matched || s.fence != 0) break;
    tried = fence;
  }
  if (!keep) return {};
  // Not matched: the hold had ended at the server before the write landed (expired, or
  // taken), so nothing keeps the lock taken until its minimum hold.
  if (!matched) return {std::nullopt, /*missed_keep=*/true};
  return {s.keep_until_ms, false};
}

void Locker::note_release_in_doubt() {
  std::lock_guard<std::mutex> g(mu_);
  eager_token_ = true;
}

void Locker::release(bool force) {
  leave_queue();  // no round trip unless this instance is queued
  const std::unique_lock<std::mutex> io = lock_hold_io();
  if (force) {
    storage().release(options_.collection, options_.key, std::nullopt, 0, server_now_ms(),
                      options_.delete_on_release);
    state_.forget();
    return;
  }
  state_.release([this](const Hold& h) { release_write(h); });
}

bool Locker::release_if(std::int64_t fence) {
  const std::unique_lock<std::mutex> io = lock_hold_io();
  return state_.release_if(fence, [this](const Hold& h) { release_write(h); });
}

void Locker::release_write(const Hold& h) {
  bool matched = false;
  try {
    matched = storage().release(options_.collection, options_.key, identity().uuid, h.fence,
                                server_now_ms(), options_.delete_on_release);
  } catch (...) {
    // It may still run at the server later (see HoldState::release).
    note_release_in_doubt();
    throw;
  }
  release_written(matched);
}

void Locker::release_written(bool matched) {
  if (matched && options_.delete_on_release) {
    std::lock_guard<std::mutex> g(mu_);
    absent_likely_ = true;  // deleted: the next claim most likely finds no document
  }
}

Locker::PendingRelease Locker::begin_release() {
  PendingRelease r;
  // A stranded hold is settled by release() (round trips); a deferred token's fence may
  // be changing (hold_io_mu_); a stale clock sample is refreshed first; a fair locker
  // may have a queue entry to leave.
  if (queue_ || options_.lazy_token || state_.has_stranded() || server_clock().stale()) return r;
  r.on_thread = false;
  r.hold = state_.hold();
  if (r.hold) r.now_ms = server_clock().estimate().value().now_ms;
  return r;
}

commands::Command Locker::release_command(const PendingRelease& r) const {
  return commands::release(options_.collection, options_.key, identity().uuid, r.hold.value().fence,
                           r.now_ms, options_.delete_on_release);
}

void Locker::release_landed(const PendingRelease& r, bool matched) {
  release_written(matched);
  state_.release_done(r.hold.value());
}

void Locker::release_failed(const PendingRelease& r) {
  note_release_in_doubt();
  state_.release_failed(r.hold.value());
}

std::optional<std::int64_t> Locker::release_min_hold(double min_hold_s) {
  if (!std::isfinite(min_hold_s) || min_hold_s < 0 || min_hold_s > 1e9)
    throw InvalidArgument("min_hold must be a finite number of seconds >= 0");
  const std::int64_t min_hold = std::llround(min_hold_s * 1000.0);
  std::int64_t fence = 0;
  {
    const std::unique_lock<std::mutex> io = lock_hold_io();
    fence = state_.strand_keeping(min_hold);
  }
  // Sends the write (or, once the bound has surely passed, a fenced release); a failed
  // earlier call's stranded hold goes the same way.
  const HoldState::Settled settled = state_.settle_stranded();
  if (settled.missed_keep)
    throw LockLost("the lock " + options_.key +
                   " had already expired or been taken at the server when its minimum hold "
                   "was written: it is not kept taken until then");
  const std::optional<std::int64_t> until = settled.taken_until;
  if (until) {
    log(LogLevel::Info,
        "released " + options_.key + " keeping it taken until its minimum hold ends (" +
            std::to_string(*until - server_now_ms()) + " ms from now)",
        log_fields(LogEvent::None, fence));
  }
  return until;
}

std::optional<std::int64_t> Locker::claim_window(double window_s) {
  if (!std::isfinite(window_s) || window_s < 0.001 || window_s > 1e9)
    throw InvalidArgument("the window must be a finite number of seconds in [0.001, 1e9]");
  const std::int64_t window = std::llround(window_s * 1000.0);
  check_server_safety();
  const ServerTime t = server_clock().estimate_sampling();
  const std::int64_t start = t.now_ms - (((t.now_ms % window) + window) % window);
  const std::int64_t end = start + window;
  const std::string marker = options_.key + "@window:" + std::to_string(start);
  validate_key(marker);
  // The server's clock may already be past the window's end: no claim. Every claim of a
  // window is then made while the server's clock is surely inside it, so its marker is
  // never born expired, and a marker that expired and was removed (the TTL monitor) can
  // never be claimed again by a node whose estimate lags.
  if (t.latest_ms() >= end) return std::nullopt;
  // Expires exactly at the window's end: an absolute date, never earliest + (end - now),
  // which would end the window this sample's uncertainty early and let a node with a
  // better sample claim it again. Claims compare with the claimant's earliest, which is
  // below the window's end whenever its estimate falls in the window.
  std::int64_t created;
  {
    std::lock_guard<std::mutex> g(mu_);
    created = claim_stamp(t.earliest_ms(), won_marker_ == marker ? won_created_ms_ : 0);
  }
  const Identity& me = identity();
  const LockClaim claim{marker, me.uuid, me.host, me.pid, created, end};
  try {
    if (!storage().claim(options_.collection, claim, /*force=*/false)) return std::nullopt;
    std::lock_guard<std::mutex> g(mu_);
    won_marker_ = marker;
    won_created_ms_ = created;
  } catch (...) {
    // The claim may have been applied (a lost reply): free the marker if THIS claim wrote
    // it, so that the window is not lost to everyone -- never a marker this locker won
    // before (a claim of a won window is refused; only its reply was lost). Fenced: a
    // newer claim is never touched.
    try {
      const std::optional<LockDoc> doc = storage().read(options_.collection, marker);
      if (doc && wrote(*doc, created))
        storage().release(options_.collection, marker, me.uuid, doc->fence, server_now_ms(),
                          options_.delete_on_release);
    } catch (const std::exception& ex) {
      log(LogLevel::Warning,
          "could not release the window marker " + marker + " after a failed claim: " + ex.what(),
          log_fields(LogEvent::ReleaseFailed));
    }
    throw;
  }
  log(LogLevel::Info,
      "claimed the window of " + options_.key + " starting at " + std::to_string(start) +
          " ms (server time) for " + std::to_string(window) + " ms",
      log_fields(LogEvent::None));
  return start;
}

Locker::RenewTicket Locker::begin_renew(std::int64_t sent) {
  RenewTicket t;
  t.kind = RenewTicket::Kind::Lock;
  t.io = lock_hold_io();
  const HoldState::Snapshot now = state_.snapshot();
  t.fence = now.hold ? now.hold->fence : 0;
  t.gen = now.gen;
  t.sent = sent;
  t.at = state_.server_time_for_write(sent);
  t.request = RenewRequest{options_.key, identity().uuid, t.fence, t.at.now_ms + ttl_ms()};
  return t;
}

std::optional<std::int64_t> Locker::finish_renew(RenewTicket& t, bool ok) {
  std::unique_lock<std::mutex> io = std::move(t.io);  // released on return
  return state_.finish_renew(t, ok, t.request.expire_ms, [&] {
    // An elector taking a handed-over hold (no hold of ours before).
    Hold h;
    h.fence = t.fence;
    h.created_ms = t.at.now_ms;
    h.expire_ms = t.request.expire_ms;
    h.lease_start_mono = t.sent;
    // Taken at some unknown earlier time: the latest server time now bounds it (no I/O
    // here: the write's estimate carried forward).
    const std::optional<ServerTime> now = server_clock().estimate();
    h.acquired_latest_ms = now ? now->latest_ms() : t.at.latest_ms();
    return h;
  });
}

std::int64_t Locker::strand(std::int64_t only_fence, bool in_doubt) {
  const std::int64_t fence = state_.strand(only_fence, in_doubt);
  // As a release in doubt (release()): a late write of it must not meet a new hold's fence.
  if (fence != 0 && in_doubt) note_release_in_doubt();
  return fence;
}

std::optional<std::int64_t> Locker::retake() {
  const std::optional<Hold> s = state_.stranded();
  if (!s) return std::nullopt;
  // Unknown or never anchored: nothing worth keeping. A release of it may still land:
  // taking it back with the same fence would let that release free the new term.
  if (s->fence < kEpochUnit || s->release_sent) {
    state_.settle_stranded();
    return std::nullopt;
  }
  const std::int64_t sent = clock().mono_ms();
  const ServerTime t = state_.server_time_for_write();
  const std::int64_t expire = t.now_ms + ttl_ms();
  const bool ok = storage().renew(options_.collection, options_.key, identity().uuid, s->fence,
                                  t.now_ms, expire);
  if (!ok) {
    // Taken over, released, or expired: a fenced release clears an expired leftover (an
    // original node would otherwise wait for the TTL monitor) and touches nothing else.
    state_.settle_stranded();
    return std::nullopt;
  }
  return state_.take_back(*s, sent, expire);
}

std::optional<std::int64_t> Locker::touch() {
  if (server_clock().stale()) refresh_clock();
  if (state_.only_stranded() ? !retake() : !renew()) return std::nullopt;
  return held_expiry();
}

std::optional<Locker::RenewTicket> Locker::begin_touch() {
  if (server_clock().stale() || state_.only_stranded()) return std::nullopt;  // touch()
  return begin_renew(clock().mono_ms());  // `sent` before the estimate
}

std::optional<std::int64_t> Locker::finish_touch(RenewTicket& ticket, bool renewed) {
  const std::optional<std::int64_t> lease_end = finish_renew(ticket, renewed);
  metrics::record_renewal(lease_end.has_value());
  if (!lease_end) return std::nullopt;
  return held_expiry();
}

void Locker::fail_touch(RenewTicket& ticket) {
  // The hold stays as it was (renew_alone on a failed call).
  std::unique_lock<std::mutex> io = std::move(ticket.io);
  metrics::record_renewal(false);
}

commands::Command Locker::renew_command(const RenewTicket& t) const {
  const RenewRequest& r = t.request;
  return commands::renew(options_.collection, r.key, r.uuid, r.fence, t.at.now_ms, r.expire_ms);
}

std::optional<std::int64_t> Locker::held_expiry() const {
  const std::optional<Hold> h = state_.hold();
  return h ? std::optional<std::int64_t>(h->expire_ms) : std::nullopt;
}

bool Locker::locked() { return current().has_value(); }

bool Locker::owned() { return owned_by(storage().read(options_.collection, options_.key)); }

std::optional<LockDoc> Locker::current() {
  return current_of(storage().read(options_.collection, options_.key));
}

bool Locker::owned_by(const std::optional<LockDoc>& doc) {
  if (!doc || doc->uuid != identity().uuid) return false;
  const ServerTime t = server_clock().estimate_sampling();
  return doc->held_at(t.now_ms + t.uncertainty_ms);  // surely not expired yet
}

std::optional<LockDoc> Locker::current_of(std::optional<LockDoc> doc) {
  // Held as long as a claimant could still consider it held (earliest server time).
  if (!doc || !doc->held_at(server_clock().estimate_sampling().earliest_ms())) return std::nullopt;
  return doc;
}

std::string Locker::held_message(const std::optional<LockDoc>& holder) const {
  if (!holder) return options_.key + " owned by unknown pid 0";
  return options_.key + " owned by " + holder->host + " pid " + std::to_string(holder->pid);
}

}  // namespace mongoelector
