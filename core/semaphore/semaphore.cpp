#include "semaphore.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "../acquire_metrics.h"
#include "../exceptions.h"
#include "../metrics.h"
#include "semaphore_doc.h"

namespace mongoelector {

namespace {
// Tokens are epoch << 32 | n, as the Locker's.
constexpr std::int64_t kEpochUnit = std::int64_t{1} << 32;
constexpr std::int64_t kTimeCheckCacheMs = 10 * 60 * 1000;  // as the Locker
constexpr std::int64_t kCancelPollMs = 100;
constexpr std::int64_t kClockRefreshMs = 60 * 1000;

std::string format_seconds(double s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

// Server-time samples slower than a quarter of the ttl are refused (see locker.cpp).
std::int64_t half_rtt_cap_ms(double ttl_s) {
  if (!std::isfinite(ttl_s) || ttl_s <= 0 || ttl_s > 1e9) return 0;  // rejected later
  return std::max<std::int64_t>(1, std::llround(ttl_s * 250.0));
}

// The first slot free at server time `now_ms`, or -1.
std::int64_t first_free(const SemaphoreDoc& doc, std::int64_t now_ms) {
  for (std::size_t i = 0; i < doc.slots.size(); ++i)
    if (!doc.slots[i].held_at(now_ms)) return static_cast<std::int64_t>(i);
  return -1;
}
}  // namespace

Semaphore::Semaphore(std::shared_ptr<Storage> storage, SemaphoreOptions options,
                     std::shared_ptr<Clock> clock, Identity identity)
    : storage_(std::move(storage)),
      options_(std::move(options)),
      clock_(clock_or_storage_clock(std::move(clock), storage_)),
      identity_(std::move(identity)),
      server_clock_(clock_, require_storage(storage_), kClockRefreshMs,
                    half_rtt_cap_ms(options_.ttl_s)) {
  validate_key(options_.key);
  validate_collection(options_.collection);
  if (options_.limit < 1 || options_.limit > semaphore_doc::kMaxLimit)
    throw InvalidArgument("semaphore limit must be an integer between 1 and " +
                          std::to_string(semaphore_doc::kMaxLimit));
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
  // No index to create: documents are found by _id, and a TTL index must never delete a
  // semaphore document (its `fence` is the token counter).
}

std::int64_t Semaphore::ttl_ms() const {
  return static_cast<std::int64_t>(std::llround(options_.ttl_s * 1000.0));
}

LogFields Semaphore::log_fields(LogEvent event, std::int64_t fence) const {
  LogFields f;
  f.event = event;
  f.key = options_.key;
  f.fence = fence;
  f.uuid = identity_.uuid;
  f.host = identity_.host;
  return f;
}

void Semaphore::check_server_safety() {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (safety_checked_) return;
  }
  ServerInfo info = storage_->server_info();
  if (!info.atomic_find_and_modify) {
    std::string what = info.name + " " + info.version;
    if (!options_.allow_unsafe_server)
      throw UnsafeServer(what +
                         " does not run single-document updates atomically, so more than "
                         "`limit` nodes could hold semaphore " +
                         options_.key +
                         " at once; refusing to run. Set allow_unsafe_server to accept that "
                         "risk (tests, single node).");
    log(LogLevel::Warning,
        what +
            ": updates are not atomic; the semaphore limit is NOT guaranteed under "
            "contention and fencing tokens may repeat (allow_unsafe_server is set)",
        log_fields(LogEvent::UnsafeServer));
  }
  std::lock_guard<std::mutex> g(mu_);
  safety_checked_ = true;
}

std::int64_t Semaphore::acquire(bool blocking, std::optional<double> timeout_s, double step_s,
                                const CancelFn& cancel) {
  return with_acquire_metrics(*clock_,
                              [&] { return acquire_waiting(blocking, timeout_s, step_s, cancel); });
}

std::int64_t Semaphore::acquire_waiting(bool blocking, std::optional<double> timeout_s,
                                        double step_s, const CancelFn& cancel) {
  ClockCall call(*clock_);  // its pauses wait on the clock
  if (!blocking && timeout_s) throw InvalidArgument("Cannot set timeout if blocking is False");
  if (timeout_s && (!std::isfinite(*timeout_s) || *timeout_s < 0))
    throw InvalidArgument("timeout must be a number >= 0");
  if (!std::isfinite(step_s) || step_s < 0) throw InvalidArgument("step must be a number >= 0");
  if (options_.timeparanoid) verify_time();

  const std::int64_t start = clock_->mono_ms();
  const std::int64_t step_ms =
      std::max<std::int64_t>(1, std::llround(std::min(step_s * 1000.0, 1e15)));
  std::int64_t count = 0;
  // The Locker's retry rule (the contract's _acquireretry).
  while (Locker::acquire_retry(blocking, start, clock_->mono_ms(), timeout_s, count)) {
    ++count;
    if (cancel && cancel())
      throw Cancelled("acquire of semaphore " + options_.key + " was cancelled");
    if (auto token = try_acquire()) return *token;
    if (!blocking) {
      std::optional<SemaphoreDoc> doc;
      {
        std::lock_guard<std::mutex> g(mu_);
        doc = cache_;  // the read of the attempt that found it full: no extra round trip
      }
      throw LockExists(full_message(doc));
    }
    const std::int64_t slept_from = clock_->mono_ms();
    std::int64_t wake = slept_from + step_ms;
    if (timeout_s) {
      const double end = static_cast<double>(start) + *timeout_s * 1000.0;
      if (end < static_cast<double>(wake))
        wake = std::max(slept_from + 1, static_cast<std::int64_t>(std::ceil(end)));
    }
    for (std::int64_t now = clock_->mono_ms(); now < wake; now = clock_->mono_ms()) {
      if (cancel && cancel())
        throw Cancelled("acquire of semaphore " + options_.key + " was cancelled");
      clock_->sleep_ms(std::min(kCancelPollMs, wake - now));
    }
  }
  throw AcquireTimeout("Timeout acquiring semaphore " + options_.key + " after " +
                       format_seconds(timeout_s.value_or(0)) + " seconds");
}

std::string Semaphore::full_message(const std::optional<SemaphoreDoc>& doc) {
  std::string msg = options_.key + ": all " + std::to_string(options_.limit) + " slots held";
  if (!doc) return msg;
  const std::int64_t now = server_clock_.estimate().value_or(ServerTime{}).earliest_ms();
  std::string who;
  for (const auto& s : doc->slots) {
    if (!s.held_at(now)) continue;
    if (!who.empty()) who += ", ";
    who += s.host + " pid " + std::to_string(s.pid);
  }
  return who.empty() ? msg : msg + " (by " + who + ")";
}

ServerTime Semaphore::server_time_for_write(std::optional<std::int64_t> at_mono) {
  if (auto t = server_clock_.estimate(at_mono)) return *t;
  server_clock_.refresh();  // first use only
  return server_clock_.estimate(at_mono).value();
}

void Semaphore::check_doc(const SemaphoreDoc& doc) const {
  if (doc.limit != options_.limit && doc.limit >= 1 && doc.limit <= semaphore_doc::kMaxLimit) {
    throw InvalidArgument(
        "semaphore '" + options_.key + "' has limit " + std::to_string(doc.limit) + " in " +
        options_.collection + ", this instance asks for " + std::to_string(options_.limit) +
        ": a key's limit is fixed when its document is created (use the same limit "
        "everywhere, another key, or delete the document while nobody holds it)");
  }
  const std::string bad = semaphore_doc::malformed(doc);
  if (!bad.empty())
    throw StorageError("the semaphore document of '" + options_.key + "' in " +
                       options_.collection + " is not usable: " + bad);
}

std::optional<SemaphoreDoc> Semaphore::read_checked() {
  std::optional<SemaphoreDoc> doc = storage_->read_semaphore(options_.collection, options_.key);
  if (doc) check_doc(*doc);
  std::lock_guard<std::mutex> g(mu_);
  cache_ = doc;  // nullopt: unknown, the next attempt reads
  return doc;
}

std::optional<SemaphoreDoc> Semaphore::read() {
  return storage_->read_semaphore(options_.collection, options_.key);
}

std::vector<SemaphoreSlot> Semaphore::holders() {
  std::optional<SemaphoreDoc> doc = read_checked();
  std::vector<SemaphoreSlot> out;
  if (!doc) return out;
  // Held as long as a claimant could still consider it held (earliest server time).
  const std::int64_t now = server_clock_.estimate_sampling().earliest_ms();
  for (const auto& s : doc->slots)
    if (s.held_at(now)) out.push_back(s);
  return out;
}

std::int64_t Semaphore::next_fence(std::int64_t fence) {
  if (fence >= kEpochUnit && ((fence + 1) & (kEpochUnit - 1)) != 0) return fence + 1;
  // 2^32 claims in this epoch (or a document without a token of ours): the counter moves
  // to a fresh epoch, above every token of every earlier document of this key.
  const std::int64_t epoch = storage_->bump_epoch(options_.collection, options_.key);
  if (epoch <= 0 || epoch >= (std::int64_t{1} << 30))
    throw StorageError("fence epoch out of range: " + std::to_string(epoch));
  if (epoch * kEpochUnit < fence + 1)
    log(LogLevel::Warning,
        "the fence epoch of semaphore " + options_.key + " in " + options_.collection +
            ".fences is behind its document: tokens keep increasing while the document lives",
        log_fields(LogEvent::None, fence));
  return std::max(fence + 1, epoch * kEpochUnit);
}

std::optional<std::int64_t> Semaphore::try_acquire() {
  std::lock_guard<std::mutex> attempt(attempt_mu_);
  return try_acquire_locked();
}

std::optional<std::int64_t> Semaphore::try_acquire_locked() {
  check_server_safety();
  {
    std::lock_guard<std::mutex> g(mu_);
    if (hold_) {
      if (clock_->mono_ms() < hold_->lease_start_mono + ttl_ms())
        throw InvalidArgument("this Semaphore instance already holds a slot of '" + options_.key +
                              "' (fence " + std::to_string(hold_->fence) +
                              "): an instance holds at most one slot; release it first, or "
                              "use one instance per slot");
      strand_locked();  // its lease is over: released (fenced) below, never reused
    }
  }
  settle_stranded();  // our own leftover must not take a slot from us
  if (server_clock_.stale()) refresh_clock();

  std::optional<SemaphoreDoc> doc;
  bool known, fresh = false;
  {
    std::lock_guard<std::mutex> g(mu_);
    doc = cache_;
    known = cache_.has_value();
  }
  const std::int64_t max_claims = options_.limit + 1;
  for (std::int64_t claims = 0;;) {
    if (!known) {
      doc = read_checked();  // one round trip
      known = fresh = true;
    }
    if (!doc) {
      // First use of the key (or its document was deleted): a fresh epoch, then an
      // insert, which fails with E11000 when someone else created it first.
      if (claims >= max_claims) return std::nullopt;
      ++claims;
      const std::int64_t epoch = storage_->bump_epoch(options_.collection, options_.key);
      if (epoch <= 0 || epoch >= (std::int64_t{1} << 30))
        throw StorageError("fence epoch out of range: " + std::to_string(epoch));
      const std::int64_t sent = clock_->mono_ms();  // before the estimate (see locker.h)
      const ServerTime t = server_time_for_write();
      SemaphoreClaim c{options_.key,
                       options_.limit,
                       0,
                       0,
                       std::max(epoch * kEpochUnit, attempted_fence() + 1),
                       identity_.uuid,
                       identity_.host,
                       identity_.pid,
                       t.earliest_ms(),
                       t.earliest_ms() + ttl_ms()};
      if (write_claim(c, /*create=*/true, sent)) {
        {
          std::lock_guard<std::mutex> g(mu_);
          cache_ = semaphore_doc::created_doc(c);
        }
        return install(c, sent);
      }
      known = fresh = false;  // created by someone else meanwhile: read it
      continue;
    }
    // The slot is chosen on an estimate taken no later than the write's: free then, it
    // is free at the write's time too (the filter checks it again, atomically).
    const std::int64_t slot = first_free(*doc, server_time_for_write().earliest_ms());
    if (slot < 0) {
      if (!fresh) {
        known = false;  // our copy may be old (releases do not change the fence): look
        continue;
      }
      return std::nullopt;  // every slot held
    }
    if (claims >= max_claims) return std::nullopt;  // lost every race: held, this time
    ++claims;
    const std::int64_t new_fence = next_fence(std::max(doc->fence, attempted_fence()));
    const std::int64_t sent = clock_->mono_ms();
    const ServerTime t = server_time_for_write();
    SemaphoreClaim c{
        options_.key,   options_.limit, slot,          doc->fence,      new_fence,
        identity_.uuid, identity_.host, identity_.pid, t.earliest_ms(), t.earliest_ms() + ttl_ms()};
    if (write_claim(c, /*create=*/false, sent)) {
      doc->fence = new_fence;
      doc->slots[static_cast<std::size_t>(slot)] = semaphore_doc::claimed_slot(c);
      {
        std::lock_guard<std::mutex> g(mu_);
        cache_ = doc;
      }
      return install(c, sent);
    }
    // Someone claimed since our copy (the fence moved) or the slot was renewed: read.
    known = fresh = false;
  }
}

std::int64_t Semaphore::attempted_fence() const {
  std::lock_guard<std::mutex> g(mu_);
  return attempted_fence_;
}

bool Semaphore::write_claim(const SemaphoreClaim& c, bool create, std::int64_t sent) {
  {
    std::lock_guard<std::mutex> g(mu_);
    attempted_fence_ = std::max(attempted_fence_, c.new_fence);
  }
  try {
    return create ? storage_->create_semaphore(options_.collection, c)
                  : storage_->claim_semaphore(options_.collection, c);
  } catch (...) {
    // The write may have been applied (a lost reply): what it wrote is ours. Release it
    // (fenced) now if the server answers, else before the next claim.
    {
      std::lock_guard<std::mutex> g(mu_);
      stranded_ = SemaphoreHold{c.new_fence, c.slot, c.now_ms, c.expire_ms, sent};
      cache_.reset();
    }
    settle_stranded_quietly();
    throw;
  }
}

std::int64_t Semaphore::install(const SemaphoreClaim& c, std::int64_t sent) {
  const SemaphoreHold h{c.new_fence, c.slot, c.now_ms, c.expire_ms, sent};
  if (clock_->mono_ms() >= sent + ttl_ms()) {
    // The claim outlasted its own lease: someone may hold that slot now.
    {
      std::lock_guard<std::mutex> g(mu_);
      stranded_ = h;
    }
    settle_stranded_quietly();
    throw StorageUnavailable("acquiring semaphore " + options_.key +
                             " took longer than its lease (ttl " + format_seconds(options_.ttl_s) +
                             " s): not acquired");
  }
  std::lock_guard<std::mutex> g(mu_);
  hold_ = h;
  ++hold_gen_;
  return h.fence;
}

void Semaphore::strand_locked() {
  if (!hold_) return;
  stranded_ = hold_;
  hold_.reset();
  ++hold_gen_;
}

std::int64_t Semaphore::strand(std::int64_t only_fence) {
  std::lock_guard<std::mutex> g(mu_);
  if (!hold_ || (only_fence != 0 && hold_->fence != only_fence)) return 0;
  const std::int64_t fence = hold_->fence;
  strand_locked();
  return fence;
}

void Semaphore::settle_stranded() {
  std::optional<SemaphoreHold> s;
  {
    std::lock_guard<std::mutex> g(mu_);
    s = stranded_;
  }
  if (!s) return;
  storage_->release_semaphore(options_.collection, options_.key, s->slot, identity_.uuid, s->fence);
  std::lock_guard<std::mutex> g(mu_);
  if (stranded_ && stranded_->fence == s->fence) stranded_.reset();
  if (cache_ && s->slot < static_cast<std::int64_t>(cache_->slots.size()) &&
      cache_->slots[static_cast<std::size_t>(s->slot)].fence == s->fence)
    cache_->slots[static_cast<std::size_t>(s->slot)] = semaphore_doc::empty_slot();
}

void Semaphore::settle_stranded_quietly() {
  try {
    settle_stranded();
  } catch (const std::exception& ex) {
    log(LogLevel::Warning,
        "could not release a stranded hold of semaphore " + options_.key +
            " yet (retried before the next claim): " + ex.what(),
        log_fields(LogEvent::ReleaseFailed));
  }
}

void Semaphore::release() {
  std::optional<SemaphoreHold> h;
  {
    std::lock_guard<std::mutex> g(mu_);
    h = hold_;
  }
  if (h) {
    try {
      storage_->release_semaphore(options_.collection, options_.key, h->slot, identity_.uuid,
                                  h->fence);
    } catch (...) {
      // It may still run at the server later: fenced, it cannot hurt a newer hold.
      std::lock_guard<std::mutex> g(mu_);
      if (hold_ && hold_->fence == h->fence) strand_locked();
      throw;
    }
    std::lock_guard<std::mutex> g(mu_);
    if (hold_ && hold_->fence == h->fence) {
      hold_.reset();
      ++hold_gen_;
    }
    if (cache_ && h->slot < static_cast<std::int64_t>(cache_->slots.size()) &&
        cache_->slots[static_cast<std::size_t>(h->slot)].fence == h->fence)
      cache_->slots[static_cast<std::size_t>(h->slot)] = semaphore_doc::empty_slot();
  }
  settle_stranded();
}

std::optional<std::int64_t> Semaphore::renew() {
  try {
    auto lease_end = renew_once();
    metrics::record_renewal(lease_end.has_value());
    return lease_end;
  } catch (...) {
    metrics::record_renewal(false);
    throw;
  }
}

std::optional<std::int64_t> Semaphore::renew_once() {
  if (!hold()) return std::nullopt;
  RenewTicket t = begin_renew(clock_->mono_ms());  // `sent` before the estimate (try_acquire)
  const bool ok = renew_one(*storage_, options_.collection, t);
  return finish_renew(t, ok);
}

RenewTicket Semaphore::begin_renew(std::int64_t sent) {
  RenewTicket t;
  t.kind = RenewTicket::Kind::Semaphore;
  std::int64_t slot = 0;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (hold_) {
      t.fence = hold_->fence;
      slot = hold_->slot;
    }
    t.gen = hold_gen_;
  }
  t.sent = sent;
  t.at = server_time_for_write(sent);
  t.semaphore =
      SemaphoreRenewRequest{options_.key, slot, identity_.uuid, t.fence, t.at.now_ms + ttl_ms()};
  return t;
}

std::optional<std::int64_t> Semaphore::finish_renew(RenewTicket& t, bool ok) {
  std::lock_guard<std::mutex> g(mu_);
  if (t.gen != hold_gen_ || !hold_) return std::nullopt;  // released or replaced meanwhile
  if (!ok) {
    hold_.reset();
    ++hold_gen_;
    return std::nullopt;
  }
  hold_->expire_ms = t.semaphore.expire_ms;
  hold_->lease_start_mono = t.sent;
  return t.sent + ttl_ms();
}

std::optional<std::int64_t> Semaphore::touch() {
  if (server_clock_.stale()) refresh_clock();
  if (!renew()) return std::nullopt;
  std::lock_guard<std::mutex> g(mu_);
  return hold_ ? std::optional<std::int64_t>(hold_->expire_ms) : std::nullopt;
}

bool Semaphore::refresh_clock() {
  if (!server_clock_.refresh()) return false;
  std::lock_guard<std::mutex> g(mu_);
  if (hold_) {
    log(LogLevel::Warning,
        "the server's clock jumped: the hold of semaphore " + options_.key + " is treated as lost",
        log_fields(LogEvent::ClockJump, hold_->fence));
    strand_locked();
  }
  return true;
}

double Semaphore::verify_time() {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (time_verified_mono_ && clock_->mono_ms() - *time_verified_mono_ < kTimeCheckCacheMs)
      return verified_offset_s_;
  }
  refresh_clock();
  const double offset = server_clock_.offset_s();
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

std::optional<SemaphoreHold> Semaphore::hold() const {
  std::lock_guard<std::mutex> g(mu_);
  return hold_;
}

std::int64_t Semaphore::fence() const {
  std::lock_guard<std::mutex> g(mu_);
  return hold_ ? hold_->fence : 0;
}

std::optional<std::int64_t> Semaphore::lease_deadline_mono() const {
  std::lock_guard<std::mutex> g(mu_);
  if (!hold_) return std::nullopt;
  return hold_->lease_start_mono + ttl_ms();
}

std::optional<Lease> Semaphore::lease() const {
  std::lock_guard<std::mutex> g(mu_);
  if (!hold_) return std::nullopt;
  return Lease{hold_->fence, hold_->lease_start_mono + ttl_ms()};
}

bool Semaphore::has_stranded() const {
  std::lock_guard<std::mutex> g(mu_);
  return stranded_.has_value();
}

}  // namespace mongoelector
