#include "semaphore.h"

#include <algorithm>
#include <cmath>

#include "../exceptions.h"
#include "../metrics.h"
#include "../storage/semaphore_doc.h"

namespace mongoelector {

namespace {
constexpr std::int64_t kEpochUnit = LockDoc::kEpochUnit;  // tokens: epoch << 32 | n

// The first slot free at server time `now_ms`, or -1.
std::int64_t first_free(const SemaphoreDoc& doc, std::int64_t now_ms) {
  for (std::size_t i = 0; i < doc.slots.size(); ++i)
    if (!doc.slots[i].held_at(now_ms)) return static_cast<std::int64_t>(i);
  return -1;
}

// Checked before the hold state's own checks (ttl, maxoffset, call bound), in this order.
SemaphoreOptions checked(SemaphoreOptions options, const std::shared_ptr<Storage>& storage) {
  require_storage(storage);
  validate_key(options.key);
  validate_collection(options.collection);
  if (options.limit < 1 || options.limit > semaphore_doc::kMaxLimit)
    throw InvalidArgument("semaphore limit must be an integer between 1 and " +
                          std::to_string(semaphore_doc::kMaxLimit));
  return options;
}

// The hold a claim writes, sent at `sent`.
Hold claimed_hold(const SemaphoreClaim& c, std::int64_t sent) {
  Hold h;
  h.fence = c.new_fence;
  h.slot = c.slot;
  h.created_ms = c.now_ms;
  h.expire_ms = c.expire_ms;
  h.lease_start_mono = sent;
  return h;
}
}  // namespace

Semaphore::Semaphore(std::shared_ptr<Storage> storage, SemaphoreOptions options,
                     std::shared_ptr<Clock> clock, Identity identity)
    : options_(checked(std::move(options), storage)),
      state_(std::move(storage),
             HoldSpec::from(options_, "semaphore", "semaphore " + options_.key,
                            "the hold of semaphore " + options_.key),
             std::move(clock), std::move(identity), [this](const Hold& s) {
               release_slot(s);
               return HoldState::Settled{};
             }) {
  // No index to create: documents are found by _id, and a TTL index must never delete a
  // semaphore document (its `fence` is the token counter).
}

void Semaphore::check_server_safety() {
  state_.check_server_safety(options_.allow_unsafe_server,
                             " does not run single-document updates atomically, so more than "
                             "`limit` nodes could hold semaphore " +
                                 options_.key +
                                 " at once; refusing to run. Set allow_unsafe_server to accept "
                                 "that risk (tests, single node).",
                             ": updates are not atomic; the semaphore limit is NOT guaranteed "
                             "under contention and fencing tokens may repeat "
                             "(allow_unsafe_server is set)");
}

std::int64_t Semaphore::acquire(bool blocking, std::optional<double> timeout_s, double step_s,
                                const CancelFn& cancel) {
  const std::unique_ptr<AcquireRun> run = start_acquire(blocking, timeout_s, step_s);
  return state_.acquire(*run, cancel);
}

std::unique_ptr<AcquireRun> Semaphore::start_acquire(bool blocking, std::optional<double> timeout_s,
                                                     double step_s) {
  return std::make_unique<AcquireRun>(
      state_, AcquireOptions{blocking, timeout_s, step_s, options_.timeparanoid},
      [this]() -> std::optional<Claimed> {
        const std::optional<std::int64_t> token = try_acquire();
        if (!token) return std::nullopt;
        return Claimed{*token, *token};
      },
      [this] {
        std::optional<SemaphoreDoc> doc;
        {
          std::lock_guard<std::mutex> g(mu_);
          doc = cache_;  // the read of the attempt that found it full: no extra round trip
        }
        return full_message(doc);
      },
      [this](std::int64_t fence) { return release_if(fence); });
}

bool Semaphore::release_if(std::int64_t fence) {
  return state_.release_if(fence, [this](const Hold& h) { release_slot(h); });
}

std::string Semaphore::full_message(const std::optional<SemaphoreDoc>& doc) {
  std::string msg = options_.key + ": all " + std::to_string(options_.limit) + " slots held";
  if (!doc) return msg;
  const std::int64_t now = server_clock().estimate().value_or(ServerTime{}).earliest_ms();
  std::string who;
  for (const auto& s : doc->slots) {
    if (!s.held_at(now)) continue;
    if (!who.empty()) who += ", ";
    who += s.host + " pid " + std::to_string(s.pid);
  }
  return who.empty() ? msg : msg + " (by " + who + ")";
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
  std::optional<SemaphoreDoc> doc = storage().read_semaphore(options_.collection, options_.key);
  if (doc) check_doc(*doc);
  std::lock_guard<std::mutex> g(mu_);
  cache_ = doc;  // nullopt: unknown, the next attempt reads
  return doc;
}

std::optional<SemaphoreDoc> Semaphore::read() {
  return storage().read_semaphore(options_.collection, options_.key);
}

std::vector<SemaphoreSlot> Semaphore::holders() {
  std::optional<SemaphoreDoc> doc = read_checked();
  std::vector<SemaphoreSlot> out;
  if (!doc) return out;
  // Held as long as a claimant could still consider it held (earliest server time).
  const std::int64_t now = server_clock().estimate_sampling().earliest_ms();
  for (const auto& s : doc->slots)
    if (s.held_at(now)) out.push_back(s);
  return out;
}

std::int64_t Semaphore::next_fence(std::int64_t fence) {
  if (fence >= kEpochUnit && ((fence + 1) & (kEpochUnit - 1)) != 0) return fence + 1;
  // 2^32 claims in this epoch (or a document without a token of ours): the counter moves
  // to a fresh epoch, above every token of every earlier document of this key.
  const std::int64_t epoch = storage().bump_epoch(options_.collection, options_.key);
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
  // A hold whose lease is over is stranded: released (fenced) below, never reused.
  if (const std::optional<Lease> live = state_.strand_if_over(clock().mono_ms()))
    throw InvalidArgument("this Semaphore instance already holds a slot of '" + options_.key +
                          "' (fence " + std::to_string(live->fence) +
                          "): an instance holds at most one slot; release it first, or "
                          "use one instance per slot");
  state_.settle_stranded();  // our own leftover must not take a slot from us
  if (server_clock().stale()) refresh_clock();

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
      const std::int64_t epoch = storage().bump_epoch(options_.collection, options_.key);
      if (epoch <= 0 || epoch >= (std::int64_t{1} << 30))
        throw StorageError("fence epoch out of range: " + std::to_string(epoch));
      const std::int64_t sent = clock().mono_ms();  // before the estimate (see locker.h)
      const ServerTime t = state_.server_time_for_write();
      SemaphoreClaim c{options_.key,
                       options_.limit,
                       0,
                       0,
                       std::max(epoch * kEpochUnit, attempted_fence() + 1),
                       identity().uuid,
                       identity().host,
                       identity().pid,
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
    const std::int64_t slot = first_free(*doc, state_.server_time_for_write().earliest_ms());
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
    const std::int64_t sent = clock().mono_ms();
    const ServerTime t = state_.server_time_for_write();
    SemaphoreClaim c{options_.key,
                     options_.limit,
                     slot,
                     doc->fence,
                     new_fence,
                     identity().uuid,
                     identity().host,
                     identity().pid,
                     t.earliest_ms(),
                     t.earliest_ms() + ttl_ms()};
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
    return create ? storage().create_semaphore(options_.collection, c)
                  : storage().claim_semaphore(options_.collection, c);
  } catch (...) {
    // The write may have been applied (a lost reply): what it wrote is ours. Release it
    // (fenced) now if the server answers, else before the next claim.
    {
      std::lock_guard<std::mutex> g(mu_);
      cache_.reset();
    }
    state_.abandon_claim(claimed_hold(c, sent));
    throw;
  }
}

std::int64_t Semaphore::install(const SemaphoreClaim& c, std::int64_t sent) {
  return state_.install(claimed_hold(c, sent), clock().mono_ms());
}

void Semaphore::release_slot(const Hold& h) {
  storage().release_semaphore(options_.collection, options_.key, h.slot, identity().uuid, h.fence);
  std::lock_guard<std::mutex> g(mu_);
  if (cache_ && h.slot < static_cast<std::int64_t>(cache_->slots.size()) &&
      cache_->slots[static_cast<std::size_t>(h.slot)].fence == h.fence)
    cache_->slots[static_cast<std::size_t>(h.slot)] = semaphore_doc::empty_slot();
}

void Semaphore::release() {
  state_.release([this](const Hold& h) { release_slot(h); });
}

std::optional<std::int64_t> Semaphore::renew() {
  if (!hold()) {  // nothing to renew: no round trip
    metrics::record_renewal(false);
    return std::nullopt;
  }
  return renew_alone();
}

RenewTicket Semaphore::begin_renew(std::int64_t sent) {
  RenewTicket t;
  t.kind = RenewTicket::Kind::Semaphore;
  const HoldState::Snapshot now = state_.snapshot();
  const std::int64_t slot = now.hold ? now.hold->slot : 0;
  t.fence = now.hold ? now.hold->fence : 0;
  t.gen = now.gen;
  t.sent = sent;
  t.at = state_.server_time_for_write(sent);
  t.semaphore =
      SemaphoreRenewRequest{options_.key, slot, identity().uuid, t.fence, t.at.now_ms + ttl_ms()};
  return t;
}

std::optional<std::int64_t> Semaphore::finish_renew(RenewTicket& t, bool ok) {
  return state_.finish_renew(t, ok, t.semaphore.expire_ms);
}

std::optional<std::int64_t> Semaphore::touch() {
  if (server_clock().stale()) refresh_clock();
  if (!renew()) return std::nullopt;
  const std::optional<Hold> h = state_.hold();
  return h ? std::optional<std::int64_t>(h->expire_ms) : std::nullopt;
}

}  // namespace mongoelector
