#include "locker.h"

#include "metrics.h"

#include <cmath>
#include <cstdio>

#include "acquire_metrics.h"
#include "exceptions.h"
#include "log.h"

namespace mongoelector {

namespace {
// Tokens are epoch << 32 | n. A fence below this was not anchored to an epoch.
constexpr std::int64_t kEpochUnit = std::int64_t{1} << 32;
// A good time check is trusted this long (as in the original).
constexpr std::int64_t kTimeCheckCacheMs = 10 * 60 * 1000;
// Blocking waits check their cancel function at least this often.
constexpr std::int64_t kCancelPollMs = 100;
// Server-time samples are re-taken this often.
constexpr std::int64_t kClockRefreshMs = 60 * 1000;

std::string format_seconds(double s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

// Server-time samples slower than this (half round trip) are refused: a quarter of the
// ttl. Beyond it a leader's margin (2 x uncertainty + 50 ms) would eat more than half
// the lease, and renewals every ttl/3 would no longer fit before the renew deadline.
std::int64_t half_rtt_cap_ms(double ttl_s) {
  if (!std::isfinite(ttl_s) || ttl_s <= 0 || ttl_s > 1e9) return 0;  // rejected later
  return std::max<std::int64_t>(1, std::llround(ttl_s * 250.0));
}

}  // namespace

Locker::Locker(std::shared_ptr<Storage> storage, LockerOptions options,
               std::shared_ptr<Clock> clock, Identity identity)
    : storage_(std::move(storage)),
      options_(std::move(options)),
      clock_(clock_or_storage_clock(std::move(clock), storage_)),
      identity_(std::move(identity)),
      server_clock_(clock_, require_storage(storage_), kClockRefreshMs,
                    half_rtt_cap_ms(options_.ttl_s)) {
  validate_key(options_.key);
  validate_collection(options_.collection);
  if (!std::isfinite(options_.ttl_s) || options_.ttl_s <= 0)
    throw InvalidArgument("ttl must be a number > 0");
  if (options_.ttl_s > 1e9) throw InvalidArgument("ttl is too large");
  if (!std::isfinite(options_.maxoffset_s) || options_.maxoffset_s < 0)
    throw InvalidArgument("maxoffset must be a number >= 0");
  if (storage_->call_bound_ms() <= 0 && !options_.allow_unbounded_calls)
    throw InvalidArgument(
        "the storage cannot bound the time of one call (a driver timeout set to 0?), so a "
        "hung call could outlive a lease; set finite timeouts, or allow_unbounded_calls to "
        "accept the risk");
  if (options_.ensure_indexes) storage_->ensure_lock_indexes(options_.collection);
}

std::int64_t Locker::ttl_ms() const {
  return static_cast<std::int64_t>(std::llround(options_.ttl_s * 1000.0));
}

void Locker::check_server_safety() {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (safety_checked_) return;
  }
  ServerInfo info = storage_->server_info();
  if (!info.atomic_find_and_modify) {
    std::string what = info.name + " " + info.version;
    if (!options_.allow_unsafe_server)
      throw UnsafeServer(what +
                         " does not run findAndModify atomically, so two nodes could both "
                         "take over one expired lock; refusing to run. Set "
                         "allow_unsafe_server to accept that risk (tests, single node).");
    log(LogLevel::Warning,
        what +
            ": findAndModify is not atomic; mutual exclusion is NOT "
            "guaranteed under contention and fencing tokens may repeat "
            "(allow_unsafe_server is set)",
        log_fields(LogEvent::UnsafeServer));
  }
  std::lock_guard<std::mutex> g(mu_);
  safety_checked_ = true;
}

bool Locker::acquire_retry(bool blocking, std::int64_t start_ms, std::int64_t now_ms,
                           std::optional<double> timeout_s, std::int64_t count) {
  if (!blocking && timeout_s) throw InvalidArgument("Cannot set timeout if blocking is False");
  if (!blocking) return count == 0;
  if (!timeout_s) return true;
  return static_cast<double>(now_ms - start_ms) < *timeout_s * 1000.0;
}

std::int64_t Locker::acquire(bool blocking, std::optional<double> timeout_s, double step_s,
                             bool force, const CancelFn& cancel) {
  return with_acquire_metrics(
      *clock_, [&] { return acquire_waiting(blocking, timeout_s, step_s, force, cancel); });
}

std::int64_t Locker::acquire_waiting(bool blocking, std::optional<double> timeout_s, double step_s,
                                     bool force, const CancelFn& cancel) {
  ClockCall call(*clock_);  // its pauses wait on the clock
  if (!blocking && timeout_s) throw InvalidArgument("Cannot set timeout if blocking is False");
  if (timeout_s && (!std::isfinite(*timeout_s) || *timeout_s < 0))
    throw InvalidArgument("timeout must be a number >= 0");
  if (!std::isfinite(step_s) || step_s < 0) throw InvalidArgument("step must be a number >= 0");
  if (options_.timeparanoid) verify_time();

  const std::int64_t start = clock_->mono_ms();
  // Clamped before the conversion: llround of a step beyond int64 ms is unspecified
  // (it came out as 1 ms, a busy retry loop against the server).
  const std::int64_t step_ms =
      std::max<std::int64_t>(1, std::llround(std::min(step_s * 1000.0, 1e15)));
  std::int64_t count = 0;
  while (acquire_retry(blocking, start, clock_->mono_ms(), timeout_s, count)) {
    ++count;
    if (cancel && cancel()) throw Cancelled("acquire of " + options_.key + " was cancelled");
    if (auto token = try_acquire(force)) return *token;
    if (!blocking)
      throw LockExists(held_message(storage_->read(options_.collection, options_.key)));
    // Sleep one step in short slices so that cancellation is prompt.
    const std::int64_t slept_from = clock_->mono_ms();
    std::int64_t wake = slept_from + step_ms;
    if (timeout_s) {  // a step longer than what is left of the timeout ends with it
      const double end = static_cast<double>(start) + *timeout_s * 1000.0;
      if (end < static_cast<double>(wake))
        wake = std::max(slept_from + 1, static_cast<std::int64_t>(std::ceil(end)));
    }
    for (std::int64_t now = clock_->mono_ms(); now < wake; now = clock_->mono_ms()) {
      if (cancel && cancel()) throw Cancelled("acquire of " + options_.key + " was cancelled");
      clock_->sleep_ms(std::min(kCancelPollMs, wake - now));
    }
  }
  throw AcquireTimeout("Timeout acquiring lock " + options_.key + " after " +
                       format_seconds(timeout_s.value_or(0)) + " seconds");
}

ServerTime Locker::server_time_for_write(std::optional<std::int64_t> at_mono) {
  if (auto t = server_clock_.estimate(at_mono)) return *t;
  server_clock_.refresh();  // first use only: a holder always has a sample
  return server_clock_.estimate(at_mono).value();
}

std::optional<std::int64_t> Locker::try_acquire(bool force) {
  check_server_safety();
  settle_stranded();  // our own leftover must not stand in our way
  if (server_clock_.stale()) refresh_clock();
  // The lease counts from the moment the write is sent (protocol-notes: "where the
  // lease starts"), read BEFORE the estimate the write carries: the local lease then
  // never ends after the server's.
  const std::int64_t sent = clock_->mono_ms();
  const ServerTime t = server_time_for_write();
  std::int64_t created;
  {
    std::lock_guard<std::mutex> g(mu_);
    created = claim_stamp(t.earliest_ms(), known_created_ms_);
  }
  auto token = claim_and_anchor(force, sent, t, created);  // a token unless deferred
  if (!token) return std::nullopt;
  const std::int64_t replied = clock_->mono_ms();
  Hold h{*token, created, t.earliest_ms() + ttl_ms(), sent};
  // The server applied the claim before its reply arrived: no later than the latest its
  // clock could read then.
  h.acquired_latest_ms = server_time_for_write(replied).latest_ms();
  if (replied >= sent + ttl_ms()) {
    // The claim and its epoch round trips outlasted the lease: someone may hold it now.
    {
      std::lock_guard<std::mutex> g(mu_);
      stranded_ = h;
    }
    settle_stranded_quietly();
    throw StorageUnavailable("acquiring " + options_.key + " took longer than its lease (ttl " +
                             format_seconds(options_.ttl_s) + " s): not acquired");
  }
  std::lock_guard<std::mutex> g(mu_);
  hold_ = h;
  ++hold_gen_;
  return *token >= kEpochUnit ? *token : 0;  // 0: deferred (lazy_token), see token()
}

std::optional<std::int64_t> Locker::claim_and_anchor(bool force, std::int64_t sent,
                                                     const ServerTime& t, std::int64_t created) {
  // Compared with the EARLIEST the server's clock may read: a slow sample makes us late,
  // never early (protocol notes, "both clocks count"). The document keeps the original's
  // shape, ts_expire = ts_created + ttl: its expiry is then at most 2u earlier in true
  // server time than this node's lease end (send + ttl), which the renew deadline's
  // margin (>= 2u + 50 ms) covers.
  LockClaim claim{options_.key,  identity_.uuid, identity_.host,
                  identity_.pid, created,        t.earliest_ms() + ttl_ms()};
  try {
    std::optional<LockDoc> doc = storage_->claim(options_.collection, claim, force);
    if (!doc) return std::nullopt;
    if (doc->uuid != identity_.uuid)
      throw StorageError("the server returned a lock document of another holder after a claim");
    {
      std::lock_guard<std::mutex> g(mu_);
      known_created_ms_ = created;  // the document now carries this claim's stamp
    }
    if (doc->fence >= kEpochUnit) return doc->fence;
    bool defer;
    {
      std::lock_guard<std::mutex> g(mu_);
      defer = options_.lazy_token && !eager_token_;
    }
    // Deferred: the fence, unique to this hold while the document lives, names it in
    // renewals and releases; token() turns it into a token.
    if (defer) return doc->fence > 0 ? std::optional<std::int64_t>(doc->fence) : std::nullopt;
    return anchor_epoch(doc->fence, created);
  } catch (...) {
    // The claim may have been applied (lost reply, a failure in the epoch path): what it
    // wrote is ours. Release it now if the server answers, else before the next claim.
    // Its name is unknown (fence 0): settling finds it by what it wrote.
    {
      std::lock_guard<std::mutex> g(mu_);
      stranded_ = Hold{0, created, t.earliest_ms() + ttl_ms(), sent};
    }
    settle_stranded_quietly();
    throw;
  }
}

// The rare path: the document was created by this claim, or carried no token of ours
// (original node, deleted by the TTL monitor). Its counter restarted, so move it to a
// fresh epoch from "<coll>.fences", which outlives the lock document.
std::optional<std::int64_t> Locker::anchor_epoch(std::int64_t fence, std::int64_t created) {
  if (fence >= kEpochUnit) return fence;
  std::int64_t epoch = storage_->bump_epoch(options_.collection, options_.key);
  if (epoch <= 0 || epoch >= (std::int64_t{1} << 30))
    throw StorageError("fence epoch out of range: " + std::to_string(epoch));
  std::int64_t token = epoch * kEpochUnit;
  // Named by its claim's ts_created too: {uuid, fence} of a restarted counter does not
  // tell a document from its earlier incarnation (deleted since), where a late fence
  // change of an older hold would otherwise land and hand out an old, lower token.
  if (!storage_->set_fence(options_.collection, options_.key, identity_.uuid, fence, created,
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
    std::lock_guard<std::mutex> g(mu_);
    if (!hold_) return std::nullopt;
    if (hold_->fence >= kEpochUnit) return hold_->fence;
  }
  const std::unique_lock<std::mutex> io = lock_hold_io();
  std::int64_t fence, created;
  std::uint64_t gen;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!hold_) return std::nullopt;
    if (hold_->fence >= kEpochUnit) return hold_->fence;
    fence = hold_->fence;
    created = hold_->created_ms;
    gen = hold_gen_;
  }
  // The epoch is bumped while the hold is ours (the fence change below proves it), so
  // this token is above every earlier hold's and below every later one's.
  std::optional<std::int64_t> token;
  try {
    token = anchor_epoch(fence, created);
  } catch (...) {
    // The fence change may still land: the hold's name (its fence) is unknown from now
    // on, so no write may name it by its counter. In doubt: given up locally, settled by
    // what its claim wrote (locker.h, "holds in doubt").
    std::lock_guard<std::mutex> g(mu_);
    if (gen == hold_gen_ && hold_) {
      strand_locked();
      stranded_->fence = 0;
    }
    throw;
  }
  std::lock_guard<std::mutex> g(mu_);
  if (gen != hold_gen_ || !hold_) return std::nullopt;  // replaced meanwhile
  if (!token) {  // taken over, released or deleted: the hold is gone
    hold_.reset();
    ++hold_gen_;
    return std::nullopt;
  }
  hold_->fence = *token;
  return token;
}

std::unique_lock<std::mutex> Locker::lock_hold_io() {
  // Only a deferred token changes a hold's fence while it is held.
  if (!options_.lazy_token) return {};
  return std::unique_lock<std::mutex>(hold_io_mu_);
}

void Locker::strand_locked() {
  if (!hold_) return;
  stranded_ = hold_;
  hold_.reset();
  ++hold_gen_;
}

void Locker::clear_stranded(std::int64_t fence) {
  std::lock_guard<std::mutex> g(mu_);
  if (stranded_ && stranded_->fence == fence) stranded_.reset();
}

std::int64_t Locker::claim_stamp(std::int64_t earliest, std::int64_t avoid) {
  // One millisecond earlier still compares conservatively (a claim takes what expired
  // by then) and tells this claim from the earlier one stamped in the same millisecond.
  return earliest == avoid ? earliest - 1 : earliest;
}

bool Locker::wrote(const LockDoc& doc, std::int64_t created_ms) const {
  return doc.locked && doc.uuid == identity_.uuid && doc.ts_created &&
         doc.ts_created->ms == created_ms && doc.fence != 0;
}

std::optional<std::int64_t> Locker::settle_stranded() {
  std::optional<Hold> s;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (stranded_) stranded_->release_sent = true;
    s = stranded_;
  }
  if (!s) return std::nullopt;
  const ServerTime t = server_clock_.estimate_sampling();
  // A minimum hold that has not surely passed (the server's earliest possible now is
  // before it): the lock stays taken until then, its expiry set exactly, shorter or
  // longer. The hold was given up locally before this write (release_min_hold).
  const bool keep = s->keep_until_ms > t.earliest_ms();
  bool matched = false;
  std::int64_t tried = 0;
  for (;;) {
    std::int64_t fence = s->fence;
    if (fence == 0) {
      // Name unknown (a lost claim reply, a token() in doubt): the hold is the document
      // its claim wrote -- our uuid AND that claim's ts_created -- under whatever fence it
      // carries now; never an earlier hold of ours (a minimum hold) that is still there.
      const std::optional<LockDoc> doc = storage_->read(options_.collection, options_.key);
      if (!doc || !wrote(*doc, s->created_ms) || doc->fence == tried) break;
      fence = doc->fence;
    }
    try {
      matched = keep ? storage_->set_expiry(options_.collection, options_.key, identity_.uuid,
                                            fence, t.now_ms, s->keep_until_ms)
                     : storage_->release(options_.collection, options_.key, identity_.uuid, fence,
                                         t.now_ms, options_.delete_on_release);
    } catch (...) {
      note_release_in_doubt();  // a late write of it must not meet a new hold's fence
      throw;
    }
    // A known name is the hold's only one. An unknown one may have changed since the
    // read (a late fence change: once at most, counter -> token): look again.
    if (matched || s->fence != 0) break;
    tried = fence;
  }
  clear_stranded(s->fence);
  if (!(keep && matched)) return std::nullopt;
  return s->keep_until_ms;
}

void Locker::note_release_in_doubt() {
  std::lock_guard<std::mutex> g(mu_);
  eager_token_ = true;
}

LogFields Locker::log_fields(LogEvent event, std::int64_t fence) const {
  LogFields f;
  f.event = event;
  f.key = options_.key;
  f.fence = fence;
  f.uuid = identity_.uuid;
  f.host = identity_.host;
  return f;
}

void Locker::settle_stranded_quietly() {
  try {
    settle_stranded();
  } catch (const std::exception& ex) {
    log(LogLevel::Warning,
        "could not release a stranded hold of " + options_.key +
            " yet (retried before the next claim): " + ex.what(),
        log_fields(LogEvent::ReleaseFailed));
  }
}

void Locker::release(bool force) {
  const std::unique_lock<std::mutex> io = lock_hold_io();
  std::optional<std::int64_t> fence;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (hold_) fence = hold_->fence;
  }
  if (force) {
    storage_->release(options_.collection, options_.key, std::nullopt, 0, server_clock_.now_ms(),
                      options_.delete_on_release);
    std::lock_guard<std::mutex> g(mu_);
    hold_.reset();
    stranded_.reset();
    ++hold_gen_;
    return;
  }
  if (fence) {
    try {
      storage_->release(options_.collection, options_.key, identity_.uuid, *fence,
                        server_clock_.now_ms(), options_.delete_on_release);
    } catch (...) {
      // It may still run at the server later: fenced, it cannot hurt a newer hold, and
      // the hold it names is never taken back (retake) with the same fence.
      note_release_in_doubt();
      std::lock_guard<std::mutex> g(mu_);
      if (hold_ && hold_->fence == *fence) {
        strand_locked();
        stranded_->release_sent = true;
      }
      throw;
    }
    std::lock_guard<std::mutex> g(mu_);
    if (hold_ && hold_->fence == *fence) {
      hold_.reset();
      ++hold_gen_;
    }
  }
  settle_stranded();
}

std::optional<std::int64_t> Locker::release_min_hold(double min_hold_s) {
  if (!std::isfinite(min_hold_s) || min_hold_s < 0 || min_hold_s > 1e9)
    throw InvalidArgument("min_hold must be a finite number of seconds >= 0");
  const std::int64_t min_hold = std::llround(min_hold_s * 1000.0);
  std::int64_t fence = 0;
  {
    const std::unique_lock<std::mutex> io = lock_hold_io();
    std::lock_guard<std::mutex> g(mu_);
    if (hold_) {
      fence = hold_->fence;
      // Counted from the latest the server's clock could read when the claim's reply
      // arrived, not from ts_created (the earliest at the send): the server took the lock
      // between the two, so counting from ts_created could end the hold up to a round
      // trip plus twice the sample's uncertainty early.
      if (min_hold > 0) hold_->keep_until_ms = hold_->acquired_latest_ms + min_hold;
      // Let go locally BEFORE the write that may shorten the hold: a renewal in flight
      // then finds the hold changed and is not counted on, and the hold is never taken
      // back with this fence (the write may land late, after a newer renewal).
      strand_locked();
      stranded_->release_sent = true;
    } else if (stranded_ && !stranded_->release_sent && stranded_->acquired_latest_ms > 0) {
      // A hold given up in doubt (a token() whose fence change may land, a clock jump)
      // that nothing released yet: still the caller's, so its minimum hold counts too.
      fence = stranded_->fence;
      if (min_hold > 0) stranded_->keep_until_ms = stranded_->acquired_latest_ms + min_hold;
    }
  }
  // Sends the write (or, once the bound has surely passed, a fenced release); a failed
  // earlier call's stranded hold goes the same way.
  const std::optional<std::int64_t> until = settle_stranded();
  if (until) {
    log(LogLevel::Info,
        "released " + options_.key + " keeping it taken until its minimum hold ends (" +
            std::to_string(*until - server_clock_.now_ms()) + " ms from now)",
        log_fields(LogEvent::None, fence));
  }
  return until;
}

std::optional<std::int64_t> Locker::claim_window(double window_s) {
  if (!std::isfinite(window_s) || window_s < 0.001 || window_s > 1e9)
    throw InvalidArgument("the window must be a finite number of seconds in [0.001, 1e9]");
  const std::int64_t window = std::llround(window_s * 1000.0);
  check_server_safety();
  const ServerTime t = server_clock_.estimate_sampling();
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
  const LockClaim claim{marker, identity_.uuid, identity_.host, identity_.pid, created, end};
  try {
    if (!storage_->claim(options_.collection, claim, /*force=*/false)) return std::nullopt;
    std::lock_guard<std::mutex> g(mu_);
    won_marker_ = marker;
    won_created_ms_ = created;
  } catch (...) {
    // The claim may have been applied (a lost reply): free the marker if THIS claim wrote
    // it, so that the window is not lost to everyone -- never a marker this locker won
    // before (a claim of a won window is refused; only its reply was lost). Fenced: a
    // newer claim is never touched.
    try {
      const std::optional<LockDoc> doc = storage_->read(options_.collection, marker);
      if (doc && wrote(*doc, created))
        storage_->release(options_.collection, marker, identity_.uuid, doc->fence,
                          server_clock_.now_ms(), options_.delete_on_release);
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

std::optional<std::int64_t> Locker::renew() {
  try {
    auto lease_end = renew_once();
    metrics::record_renewal(lease_end.has_value());
    return lease_end;
  } catch (...) {
    metrics::record_renewal(false);
    throw;
  }
}

std::optional<std::int64_t> Locker::renew_once() {
  RenewTicket t = begin_renew(clock_->mono_ms());  // `sent` before the estimate (try_acquire)
  const bool ok = renew_one(*storage_, options_.collection, t);
  return finish_renew(t, ok);
}

Locker::RenewTicket Locker::begin_renew(std::int64_t sent) {
  RenewTicket t;
  t.kind = RenewTicket::Kind::Lock;
  t.io = lock_hold_io();
  {
    std::lock_guard<std::mutex> g(mu_);
    t.fence = hold_ ? hold_->fence : 0;
    t.gen = hold_gen_;
  }
  t.sent = sent;
  t.at = server_time_for_write(sent);
  t.request = RenewRequest{options_.key, identity_.uuid, t.fence, t.at.now_ms + ttl_ms()};
  return t;
}

std::optional<std::int64_t> Locker::finish_renew(RenewTicket& t, bool ok) {
  std::unique_lock<std::mutex> io = std::move(t.io);  // released on return
  std::lock_guard<std::mutex> g(mu_);
  if (t.gen != hold_gen_) return std::nullopt;  // released or replaced while the call ran
  if (!ok) {
    if (hold_) {
      hold_.reset();
      ++hold_gen_;
    }
    return std::nullopt;
  }
  if (hold_) {
    hold_->expire_ms = t.request.expire_ms;
    hold_->lease_start_mono = t.sent;
  } else {
    hold_ = Hold{t.fence, t.at.now_ms, t.request.expire_ms, t.sent};
    // Taken at some unknown earlier time: the latest server time now bounds it (no I/O
    // here: the write's estimate carried forward).
    const std::optional<ServerTime> now = server_clock_.estimate();
    hold_->acquired_latest_ms = now ? now->latest_ms() : t.at.latest_ms();
    ++hold_gen_;
  }
  return t.sent + ttl_ms();
}

std::int64_t Locker::strand(std::int64_t only_fence, bool in_doubt) {
  std::lock_guard<std::mutex> g(mu_);
  if (!hold_ || (only_fence != 0 && hold_->fence != only_fence)) return 0;
  std::int64_t fence = hold_->fence;
  strand_locked();
  if (in_doubt) {  // as a release in doubt (release())
    stranded_->release_sent = true;
    eager_token_ = true;
  }
  return fence;
}

std::optional<std::int64_t> Locker::retake() {
  std::optional<Hold> s;
  {
    std::lock_guard<std::mutex> g(mu_);
    s = stranded_;
  }
  if (!s) return std::nullopt;
  // Unknown or never anchored: nothing worth keeping. A release of it may still land:
  // taking it back with the same fence would let that release free the new term.
  if (s->fence < kEpochUnit || s->release_sent) {
    settle_stranded();
    return std::nullopt;
  }
  const std::int64_t sent = clock_->mono_ms();
  const ServerTime t = server_time_for_write();
  const std::int64_t expire = t.now_ms + ttl_ms();
  const bool ok = storage_->renew(options_.collection, options_.key, identity_.uuid, s->fence,
                                  t.now_ms, expire);
  if (!ok) {
    // Taken over, released, or expired: a fenced release clears an expired leftover (an
    // original node would otherwise wait for the TTL monitor) and touches nothing else.
    settle_stranded();
    return std::nullopt;
  }
  std::lock_guard<std::mutex> g(mu_);
  if (!stranded_ || stranded_->fence != s->fence || hold_) return std::nullopt;
  hold_ = Hold{s->fence, s->created_ms, expire, sent};
  hold_->acquired_latest_ms = s->acquired_latest_ms;
  stranded_.reset();
  ++hold_gen_;
  return sent + ttl_ms();
}

bool Locker::refresh_clock() {
  if (!server_clock_.refresh()) return false;
  std::lock_guard<std::mutex> g(mu_);
  if (hold_) {
    log(LogLevel::Warning,
        "the server's clock jumped: the lease of " + options_.key + " is treated as lost",
        log_fields(LogEvent::ClockJump, hold_->fence));
    strand_locked();
  }
  return true;
}

std::optional<std::int64_t> Locker::touch() {
  if (server_clock_.stale()) refresh_clock();
  bool stranded_only;
  {
    std::lock_guard<std::mutex> g(mu_);
    stranded_only = !hold_ && stranded_;
  }
  if (stranded_only ? !retake() : !renew()) return std::nullopt;
  std::lock_guard<std::mutex> g(mu_);
  return hold_ ? std::optional<std::int64_t>(hold_->expire_ms) : std::nullopt;
}

bool Locker::locked() { return current().has_value(); }

bool Locker::owned() {
  std::optional<LockDoc> doc = storage_->read(options_.collection, options_.key);
  if (!doc || doc->uuid != identity_.uuid) return false;
  const ServerTime t = server_clock_.estimate_sampling();
  return doc->held_at(t.now_ms + t.uncertainty_ms);  // surely not expired yet
}

std::optional<LockDoc> Locker::current() {
  std::optional<LockDoc> doc = storage_->read(options_.collection, options_.key);
  // Held as long as a claimant could still consider it held (earliest server time).
  if (!doc || !doc->held_at(server_clock_.estimate_sampling().earliest_ms())) return std::nullopt;
  return doc;
}

double Locker::verify_time() {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (time_verified_mono_ && clock_->mono_ms() - *time_verified_mono_ < kTimeCheckCacheMs)
      return verified_offset_s_;
  }
  refresh_clock();
  double offset = server_clock_.offset_s();
  // Only an offset that is certain counts: a slow sample cannot tell (its uncertainty
  // is already covered by the claims' conservative comparison).
  const double uncertainty_s = static_cast<double>(server_clock_.uncertainty_ms()) / 1000.0;
  if (std::fabs(offset) - uncertainty_s > options_.maxoffset_s)
    throw TimeOffsetError("Host clock is " + format_seconds(offset) +
                              " seconds off the MongoDB server's clock (maxoffset " +
                              format_seconds(options_.maxoffset_s) + ")",
                          offset);
  std::lock_guard<std::mutex> g(mu_);
  time_verified_mono_ = clock_->mono_ms();
  verified_offset_s_ = offset;
  return offset;
}

std::string Locker::held_message(const std::optional<LockDoc>& holder) const {
  if (!holder) return options_.key + " owned by unknown pid 0";
  return options_.key + " owned by " + holder->host + " pid " + std::to_string(holder->pid);
}

std::optional<Hold> Locker::hold() const {
  std::lock_guard<std::mutex> g(mu_);
  return hold_;
}

std::int64_t Locker::fence() const {
  std::lock_guard<std::mutex> g(mu_);
  return hold_ ? hold_->fence : 0;
}

std::optional<std::int64_t> Locker::lease_deadline_mono() const {
  std::lock_guard<std::mutex> g(mu_);
  if (!hold_) return std::nullopt;
  return hold_->lease_start_mono + ttl_ms();
}

std::optional<Lease> Locker::lease() const {
  std::lock_guard<std::mutex> g(mu_);
  if (!hold_) return std::nullopt;
  return Lease{hold_->fence, hold_->lease_start_mono + ttl_ms()};
}

bool Locker::has_stranded() const {
  std::lock_guard<std::mutex> g(mu_);
  return stranded_.has_value();
}

}  // namespace mongoelector
