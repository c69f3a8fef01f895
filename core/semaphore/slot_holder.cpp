#include "slot_holder.h"

#include <algorithm>
#include <utility>

#include "../exceptions.h"
#include "../metrics.h"
#include "../storage/semaphore_doc.h"

namespace mongoelector {

namespace {
constexpr std::int64_t kEpochUnit = LockDoc::kEpochUnit;  // tokens: epoch << 32 | n

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

// What a document of `kind` is, for messages.
std::string kind_words(const std::string& kind) {
  if (kind.empty()) return "a semaphore";
  if (kind == semaphore_doc::kRwLockKind) return "a read-write lock";
  return "a document of kind '" + kind + "'";
}
}  // namespace

SlotHolder::SlotHolder(std::shared_ptr<Storage> storage, HoldSpec hold, SlotDocSpec doc,
                       std::shared_ptr<Clock> clock, Identity identity)
    : doc_(std::move(doc)),
      slots_(semaphore_doc::slot_count(doc_.kind, doc_.limit)),
      state_(std::move(storage), std::move(hold), std::move(clock), std::move(identity),
             [this](const Hold& s) {
               release_slot(s);
               return HoldState::Settled{};
             }),
      place_(state_.storage(), state_.spec().collection, state_.spec().key,
             state_.identity().uuid) {
  // No index to create: documents are found by _id, and a TTL index must never delete a
  // slot document (its `fence` is the token counter).
}

std::unique_ptr<AcquireRun> SlotHolder::make_run(
    bool blocking, std::optional<double> timeout_s, double step_s,
    std::function<std::optional<std::int64_t>()> attempt,
    std::function<std::string(const std::optional<SemaphoreDoc>&)> held) {
  auto run = std::make_unique<AcquireRun>(
      state_, AcquireOptions{blocking, timeout_s, step_s, doc_.timeparanoid},
      [attempt = std::move(attempt)]() -> std::optional<Claimed> {
        const std::optional<std::int64_t> token = attempt();
        if (!token) return std::nullopt;
        return Claimed{*token, *token};
      },
      // The read of the attempt that found the key held: no extra round trip.
      [this, held = std::move(held)] { return held(cached()); },
      [this](std::int64_t fence) { return release_if(fence); });
  run->set_pace([this](std::int64_t step_ms) { return pace_ms(step_ms); });
  run->set_undo_wait([this] { undo_wait(); });
  return run;
}

std::int64_t SlotHolder::pace_ms(std::int64_t step_ms) const {
  return place_.pace_ms(step_ms, state_.ttl_ms());
}

QueueEntry SlotHolder::queue_entry() const { return place_.entry(); }

bool SlotHolder::release_if(std::int64_t fence) {
  return state_.release_if(fence, [this](const Hold& h) { release_slot(h); });
}

void SlotHolder::check_doc(const SemaphoreDoc& doc) const {
  const std::string what = state_.spec().kind;
  const std::string& key = state_.spec().key;
  const std::string& coll = state_.spec().collection;
  // No kind, no limit, no slots: no slot document at all (a lock's, written by a locker
  // given this collection, or another program's).
  const bool slotless = doc.kind.empty() && doc.limit == 0 && doc.slots.empty();
  if (slotless || (doc.kind != doc_.kind && semaphore_doc::slot_count(doc.kind, 1) > 0)) {
    const std::string holds = slotless ? "a document without slots (a lock's, or another "
                                         "program's)"
                                       : kind_words(doc.kind) + "'s document";
    throw InvalidArgument(what + " '" + key + "' in " + coll + ": the key holds " + holds +
                          ", not " + kind_words(doc_.kind) +
                          "'s: a key serves one kind of hold (use another key, or another "
                          "collection)");
  }
  if (doc.kind == doc_.kind && doc.limit != doc_.limit && doc.limit >= 1 &&
      doc.limit <= semaphore_doc::kMaxLimit) {
    throw InvalidArgument(
        what + " '" + key + "' has " + doc_.limit_name + " " + std::to_string(doc.limit) + " in " +
        coll + ", this instance asks for " + std::to_string(doc_.limit) + ": a key's " +
        doc_.limit_name + " is fixed when its document is created (use the same " +
        doc_.limit_name +
        " everywhere, another key, or delete the document while nobody holds it)");
  }
  const std::string bad = semaphore_doc::malformed(doc);
  if (!bad.empty())
    throw StorageError("the " + what + " document of '" + key + "' in " + coll +
                       " is not usable: " + bad);
}

std::optional<SemaphoreDoc> SlotHolder::read_checked() {
  std::optional<SemaphoreDoc> doc = storage().read_semaphore(collection(), key());
  if (doc) check_doc(*doc);
  std::lock_guard<std::mutex> g(mu_);
  cache_ = doc;  // nullopt: unknown, the next attempt reads
  return doc;
}

std::optional<SemaphoreDoc> SlotHolder::cached() const {
  std::lock_guard<std::mutex> g(mu_);
  return cache_;
}

std::optional<SemaphoreDoc> SlotHolder::read() {
  return storage().read_semaphore(collection(), key());
}

std::int64_t SlotHolder::fresh_epoch() {
  const std::int64_t epoch = storage().bump_epoch(collection(), key());
  if (epoch <= 0 || epoch >= (std::int64_t{1} << 30))
    throw StorageError("fence epoch out of range: " + std::to_string(epoch));
  return epoch;
}

std::int64_t SlotHolder::next_fence(std::int64_t fence) {
  if (fence >= kEpochUnit && ((fence + 1) & (kEpochUnit - 1)) != 0) return fence + 1;
  // 2^32 claims in this epoch (or a document without a token of ours): the counter moves
  // to a fresh epoch, above every token of every earlier document of this key.
  const std::int64_t epoch = fresh_epoch();
  if (epoch * kEpochUnit < fence + 1)
    log(LogLevel::Warning,
        "the fence epoch of " + describe() + " in " + collection() +
            ".fences is behind its document: tokens keep increasing while the document lives",
        log_fields(LogEvent::None, fence));
  return std::max(fence + 1, epoch * kEpochUnit);
}

SemaphoreClaim SlotHolder::claim_of(std::int64_t slot, std::int64_t old_fence,
                                    std::int64_t new_fence, const ServerTime& t,
                                    std::vector<SlotClear> clear) const {
  SemaphoreClaim c;
  c.key = key();
  c.kind = doc_.kind;
  c.limit = doc_.limit;
  c.slot = slot;
  c.old_fence = old_fence;
  c.new_fence = new_fence;
  c.uuid = identity().uuid;
  c.host = identity().host;
  c.pid = identity().pid;
  c.now_ms = t.earliest_ms();
  c.expire_ms = t.earliest_ms() + ttl_ms();
  c.clear_slots = std::move(clear);
  return c;
}

std::optional<std::int64_t> SlotHolder::try_claim(SlotRule& rule) {
  std::lock_guard<std::mutex> attempt(attempt_mu_);
  return try_claim_locked(rule);
}

std::optional<std::int64_t> SlotHolder::try_claim_locked(SlotRule& rule) {
  check_server_safety();
  // A hold whose lease is over is stranded: released (fenced) below, never reused.
  if (const std::optional<Lease> live = state_.strand_if_over(clock().mono_ms()))
    throw InvalidArgument(already_holding(*live));
  state_.settle_stranded();  // our own leftover must not take a slot from us
  if (server_clock().stale()) refresh_clock();

  std::optional<SemaphoreDoc> doc;
  bool known, fresh = false;
  {
    std::lock_guard<std::mutex> g(mu_);
    doc = cache_;
    known = cache_.has_value();
  }
  const std::int64_t max_writes = slots_ + 1;
  for (std::int64_t writes = 0;;) {
    if (!known) {
      doc = read_checked();  // one round trip
      known = fresh = true;
    }
    if (!doc) {
      // First use of the key (or its document was deleted): a fresh epoch, then an
      // insert, which fails with E11000 when someone else created it first.
      if (writes >= max_writes) return std::nullopt;
      ++writes;
      const std::int64_t epoch = fresh_epoch();
      const std::int64_t sent = clock().mono_ms();  // before the estimate (see locker.h)
      const SemaphoreClaim c =
          claim_of(rule.first_slot(), 0, std::max(epoch * kEpochUnit, attempted_fence() + 1),
                   state_.server_time_for_write(), {});
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
    const std::int64_t now = state_.server_time_for_write().earliest_ms();
    SlotChoice choice = rule.choose(*doc, now);
    fair_queue::Gate gate;
    if (rule.queue_mode() != QueueMode::Ignore) {
      gate = fair_queue::gate(doc->queue, identity().uuid, queue_entry().ticket, now);
      if (!gate.open) choice = SlotChoice{};  // a live waiter comes first (invariant Q)
    }
    if (choice.slot < 0) {
      if (!fresh) {
        known = false;  // our copy may be old (releases do not change the fence): look
        continue;
      }
      if (writes < max_writes && rule.on_refused(*doc, now)) {
        ++writes;
        known = fresh = false;
        continue;
      }
      if (rule.queue_mode() == QueueMode::Wait && writes < max_writes && wait_in_queue(*doc, now)) {
        ++writes;
        known = fresh = false;
        continue;
      }
      return std::nullopt;  // held
    }
    if (writes >= max_writes) return std::nullopt;  // lost every race: held, this time
    ++writes;
    const std::int64_t new_fence = next_fence(std::max(doc->fence, attempted_fence()));
    const std::int64_t sent = clock().mono_ms();
    SemaphoreClaim c = claim_of(choice.slot, doc->fence, new_fence, state_.server_time_for_write(),
                                std::move(choice.clear));
    c.queue_passed = std::move(gate.passed);
    c.queue_own = gate.own;
    if (write_claim(c, /*create=*/false, sent)) {
      semaphore_doc::put_claim(*doc, c);
      {
        std::lock_guard<std::mutex> g(mu_);
        cache_ = doc;
      }
      if (c.queue_own) place_.gone(c.queue_own->ticket);  // removed by the claim
      return install(c, sent);
    }
    // Someone claimed since our copy (the fence moved) or a slot was renewed: read.
    known = fresh = false;
  }
}

std::int64_t SlotHolder::attempted_fence() const {
  std::lock_guard<std::mutex> g(mu_);
  return attempted_fence_;
}

bool SlotHolder::write_claim(const SemaphoreClaim& c, bool create, std::int64_t sent) {
  {
    std::lock_guard<std::mutex> g(mu_);
    attempted_fence_ = std::max(attempted_fence_, c.new_fence);
  }
  try {
    return create ? storage().create_semaphore(collection(), c)
                  : storage().claim_semaphore(collection(), c);
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

bool SlotHolder::claim_unheld(const SemaphoreDoc& doc, std::int64_t slot,
                              std::int64_t& sent_fence) {
  const std::int64_t new_fence = next_fence(std::max(doc.fence, attempted_fence()));
  const SemaphoreClaim c = claim_of(slot, doc.fence, new_fence, state_.server_time_for_write(), {});
  {
    std::lock_guard<std::mutex> g(mu_);
    attempted_fence_ = std::max(attempted_fence_, c.new_fence);
    cache_.reset();  // until the outcome is known
  }
  sent_fence = c.new_fence;
  if (!storage().claim_semaphore(collection(), c)) return false;
  SemaphoreDoc copy = doc;
  semaphore_doc::put_claim(copy, c);
  std::lock_guard<std::mutex> g(mu_);
  cache_ = std::move(copy);
  return true;
}

bool SlotHolder::wait_in_queue(const SemaphoreDoc& doc, std::int64_t now) {
  const fair_queue::Standing st = place_.look(doc.queue, now);
  try {
    if (place_.drop_strays(doc.queue, now)) return true;  // its own strays: read again
    if (st.own >= 0)
      return place_.keep(doc.queue, st, now, ttl_ms(),
                         [this] { return state_.server_time_for_write().earliest_ms(); });
    // No live entry of ours (never queued, or its place was lost): ONE enqueue, a
    // compare-and-set whose new fence is the ticket (after every ticket so far).
    const std::int64_t new_fence = next_fence(std::max(doc.fence, attempted_fence()));
    SemaphoreClaim c = claim_of(0, doc.fence, new_fence, state_.server_time_for_write(), {});
    c.enqueue = true;
    {
      std::lock_guard<std::mutex> g(mu_);
      attempted_fence_ = std::max(attempted_fence_, c.new_fence);
      cache_.reset();  // until the outcome is known
    }
    place_.sending(semaphore_doc::queued_entry(c));
    if (!storage().claim_semaphore(collection(), c)) {
      place_.gone(c.new_fence);
      return true;  // the document moved: read again
    }
    SemaphoreDoc copy = doc;
    semaphore_doc::put_claim(copy, c);
    std::lock_guard<std::mutex> g(mu_);
    cache_ = std::move(copy);
    return false;
  } catch (const StorageFailure& ex) {
    // The entry is a place in line, not the hold: this attempt is refused as it would be
    // without it; the next one looks again.
    log(LogLevel::Warning, "could not write the queue entry of " + describe() + ": " + ex.what(),
        log_fields(LogEvent::None));
    return false;
  }
}

void SlotHolder::leave_queue() {
  const std::optional<QueueEntry> left = place_.leave(describe(), log_fields(LogEvent::None));
  if (!left) return;
  std::lock_guard<std::mutex> g(mu_);
  if (cache_) semaphore_doc::leave_queue(*cache_, left->uuid, left->ticket);
}

bool SlotHolder::release_unheld(std::int64_t slot, std::int64_t fence) {
  const bool released =
      storage().release_semaphore(collection(), key(), slot, identity().uuid, fence);
  forget_in_cache(slot, fence);
  return released;
}

std::optional<std::int64_t> SlotHolder::renew_unheld(std::int64_t slot, std::int64_t fence) {
  const std::int64_t now = state_.server_time_for_write().earliest_ms();
  const std::int64_t expire = now + ttl_ms();
  if (!storage().renew_semaphore(collection(), key(), slot, identity().uuid, fence, now, expire)) {
    forget_in_cache(slot, fence);
    return std::nullopt;
  }
  return expire;
}

std::int64_t SlotHolder::install(const SemaphoreClaim& c, std::int64_t sent) {
  return state_.install(claimed_hold(c, sent), clock().mono_ms());
}

void SlotHolder::forget_in_cache(std::int64_t slot, std::int64_t fence) {
  std::lock_guard<std::mutex> g(mu_);
  if (cache_ && slot >= 0 && slot < static_cast<std::int64_t>(cache_->slots.size()) &&
      cache_->slots[static_cast<std::size_t>(slot)].fence == fence)
    cache_->slots[static_cast<std::size_t>(slot)] = semaphore_doc::empty_slot();
}

void SlotHolder::release_slot(const Hold& h) {
  storage().release_semaphore(collection(), key(), h.slot, identity().uuid, h.fence);
  forget_in_cache(h.slot, h.fence);
}

void SlotHolder::release() {
  leave_queue();
  state_.release([this](const Hold& h) { release_slot(h); });
}

std::optional<std::int64_t> SlotHolder::renew() {
  if (!hold()) {  // nothing to renew: no round trip
    metrics::record_renewal(false);
    return std::nullopt;
  }
  return renew_alone();
}

RenewTicket SlotHolder::begin_renew(std::int64_t sent) {
  RenewTicket t;
  t.kind = RenewTicket::Kind::Semaphore;
  const HoldState::Snapshot now = state_.snapshot();
  const std::int64_t slot = now.hold ? now.hold->slot : 0;
  t.fence = now.hold ? now.hold->fence : 0;
  t.gen = now.gen;
  t.sent = sent;
  t.at = state_.server_time_for_write(sent);
  t.semaphore =
      SemaphoreRenewRequest{key(), slot, identity().uuid, t.fence, t.at.now_ms + ttl_ms()};
  return t;
}

std::optional<std::int64_t> SlotHolder::finish_renew(RenewTicket& t, bool ok) {
  return state_.finish_renew(t, ok, t.semaphore.expire_ms);
}

std::optional<std::int64_t> SlotHolder::touch() {
  if (server_clock().stale()) refresh_clock();
  if (!renew()) return std::nullopt;
  const std::optional<Hold> h = state_.hold();
  return h ? std::optional<std::int64_t>(h->expire_ms) : std::nullopt;
}

}  // namespace mongoelector
