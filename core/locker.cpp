#include "locker.h"

#include <cmath>
#include <cstdio>

#include "errors.h"
#include "log.h"

namespace mongoelector {

namespace {
// Tokens are epoch << 32 | n. A fence below this was not anchored to an epoch.
constexpr std::int64_t kEpochUnit = std::int64_t{1} << 32;
// A good time check is trusted this long (as in the original).
constexpr std::int64_t kTimeCheckCacheMs = 10 * 60 * 1000;
// Blocking waits check their cancel function at least this often.
constexpr std::int64_t kCancelPollMs = 100;

std::string format_seconds(double s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}
}  // namespace

Locker::Locker(std::shared_ptr<Storage> storage, LockerOptions options,
               std::shared_ptr<Clock> clock, Identity identity)
    : storage_(std::move(storage)),
      options_(std::move(options)),
      clock_(std::move(clock)),
      identity_(std::move(identity)),
      server_clock_(clock_, *storage_) {
  if (!storage_) throw InvalidArgument("storage must not be null");
  validate_key(options_.key);
  validate_collection(options_.collection);
  if (!std::isfinite(options_.ttl_s) || options_.ttl_s <= 0)
    throw InvalidArgument("ttl must be a number > 0");
  if (options_.ttl_s > 1e9) throw InvalidArgument("ttl is too large");
  if (!std::isfinite(options_.maxoffset_s) || options_.maxoffset_s < 0)
    throw InvalidArgument("maxoffset must be a number >= 0");
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
    log(LogLevel::Warning, what + ": findAndModify is not atomic; mutual exclusion is NOT "
                                  "guaranteed under contention (allow_unsafe_server is set)");
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
  if (!blocking && timeout_s) throw InvalidArgument("Cannot set timeout if blocking is False");
  if (timeout_s && (!std::isfinite(*timeout_s) || *timeout_s < 0))
    throw InvalidArgument("timeout must be a number >= 0");
  if (!std::isfinite(step_s) || step_s < 0) throw InvalidArgument("step must be a number >= 0");
  if (options_.timeparanoid) verify_time();

  const std::int64_t start = clock_->mono_ms();
  const std::int64_t step_ms = std::max<std::int64_t>(1, std::llround(step_s * 1000.0));
  std::int64_t count = 0;
  while (acquire_retry(blocking, start, clock_->mono_ms(), timeout_s, count)) {
    ++count;
    if (cancel && cancel()) throw Cancelled("acquire of " + options_.key + " was cancelled");
    if (auto token = try_acquire(force)) return *token;
    if (!blocking) throw LockExists(held_message(storage_->read(options_.collection, options_.key)));
    // Sleep one step in short slices so that cancellation is prompt.
    std::int64_t wake = clock_->mono_ms() + step_ms;
    for (std::int64_t now = clock_->mono_ms(); now < wake; now = clock_->mono_ms()) {
      if (cancel && cancel()) throw Cancelled("acquire of " + options_.key + " was cancelled");
      clock_->sleep_ms(std::min(kCancelPollMs, wake - now));
    }
  }
  throw AcquireTimeout("Timeout acquiring lock " + options_.key + " after " +
                       format_seconds(timeout_s.value_or(0)) + " seconds");
}

std::optional<std::int64_t> Locker::try_acquire(bool force) {
  check_server_safety();
  const std::int64_t now = server_clock_.now_ms();
  LockClaim claim{options_.key, identity_.uuid, identity_.host, identity_.pid, now, now + ttl_ms()};
  // The lease counts from the moment the write is sent (protocol-notes: "where the
  // lease starts"), never from the reply.
  const std::int64_t sent = clock_->mono_ms();
  std::optional<LockDoc> doc = storage_->claim(options_.collection, claim, force);
  if (!doc) return std::nullopt;
  if (doc->uuid != identity_.uuid)
    throw StorageError("the server returned a lock document of another holder after a claim");
  auto token = anchor_epoch(*doc);
  if (!token) return std::nullopt;
  std::lock_guard<std::mutex> g(mu_);
  hold_ = Hold{*token, now, now + ttl_ms(), sent};
  return token;
}

// The rare path: the document was created by this claim, or carried no token of ours
// (original node, deleted by the TTL monitor). Its counter restarted, so move it to a
// fresh epoch from "<coll>.fences", which outlives the lock document.
std::optional<std::int64_t> Locker::anchor_epoch(const LockDoc& doc) {
  if (doc.fence >= kEpochUnit) return doc.fence;
  std::int64_t epoch = storage_->bump_epoch(options_.collection, options_.key);
  if (epoch <= 0 || epoch >= (std::int64_t{1} << 30))
    throw StorageError("fence epoch out of range: " + std::to_string(epoch));
  std::int64_t token = epoch * kEpochUnit;
  if (!storage_->set_fence(options_.collection, options_.key, identity_.uuid, doc.fence, token)) {
    // Someone took the lock between our claim and now: our lease must have expired.
    log(LogLevel::Warning, "lock " + options_.key + " was taken over while its fence was set");
    return std::nullopt;
  }
  return token;
}

void Locker::release(bool force) {
  const std::int64_t now = server_clock_.now_ms();
  std::optional<std::string> owner;
  if (!force) owner = identity_.uuid;
  storage_->release(options_.collection, options_.key, owner, now, options_.delete_on_release);
  std::lock_guard<std::mutex> g(mu_);
  hold_.reset();
}

bool Locker::renew() {
  std::int64_t fence;
  {
    std::lock_guard<std::mutex> g(mu_);
    fence = hold_ ? hold_->fence : 0;
  }
  const std::int64_t now = server_clock_.now_ms();
  const std::int64_t expire = now + ttl_ms();
  const std::int64_t sent = clock_->mono_ms();
  bool ok = storage_->renew(options_.collection, options_.key, identity_.uuid, fence, now, expire);
  std::lock_guard<std::mutex> g(mu_);
  if (ok) {
    if (hold_) {
      hold_->expire_ms = expire;
      hold_->lease_start_mono = sent;
    } else {
      hold_ = Hold{fence, now, expire, sent};
    }
  } else {
    hold_.reset();
  }
  return ok;
}

std::optional<std::int64_t> Locker::touch() {
  if (!renew()) return std::nullopt;
  std::lock_guard<std::mutex> g(mu_);
  return hold_ ? std::optional<std::int64_t>(hold_->expire_ms) : std::nullopt;
}

bool Locker::locked() { return current().has_value(); }

bool Locker::owned() {
  auto doc = current();
  return doc && doc->uuid == identity_.uuid;
}

std::optional<LockDoc> Locker::current() {
  std::optional<LockDoc> doc = storage_->read(options_.collection, options_.key);
  if (!doc || !doc->held_at(server_clock_.now_ms())) return std::nullopt;
  return doc;
}

double Locker::verify_time() {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (time_verified_mono_ && clock_->mono_ms() - *time_verified_mono_ < kTimeCheckCacheMs)
      return verified_offset_s_;
  }
  server_clock_.refresh();
  double offset = server_clock_.offset_s();
  if (std::fabs(offset) > options_.maxoffset_s)
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
  return hold_->lease_start_mono + static_cast<std::int64_t>(std::llround(options_.ttl_s * 1000.0));
}

}  // namespace mongoelector
