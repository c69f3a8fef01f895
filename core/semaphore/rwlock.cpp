#include "rwlock.h"

#include "../exceptions.h"
#include "../storage/semaphore_doc.h"

namespace mongoelector {

const char* side_name(RwSide side) { return side == RwSide::Read ? "read" : "write"; }

namespace {
// Checked before the hold state's own checks (ttl, maxoffset, call bound), in this order.
const RwLockOptions& checked(const RwLockOptions& options,
                             const std::shared_ptr<Storage>& storage) {
  require_storage(storage);
  validate_key(options.key);
  validate_collection(options.collection);
  if (options.max_readers < 1 || options.max_readers > semaphore_doc::kMaxLimit)
    throw InvalidArgument("read-write lock max_readers must be an integer between 1 and " +
                          std::to_string(semaphore_doc::kMaxLimit));
  return options;
}

SlotDocSpec doc_spec(const RwLockOptions& o) {
  SlotDocSpec d;
  d.kind = semaphore_doc::kRwLockKind;
  d.limit = o.max_readers;
  d.limit_name = "max_readers";
  d.timeparanoid = o.timeparanoid;
  d.allow_unsafe_server = o.allow_unsafe_server;
  return d;
}

std::string who(const SemaphoreSlot& s) { return s.host + " pid " + std::to_string(s.pid); }
}  // namespace

// The reader and writer claim rules (rwlock.h).
class RwLock::Rule final : public SlotRule {
 public:
  Rule(RwLock& lock, RwSide side, bool mark, bool queue)
      : lock_(lock), side_(side), mark_(mark), queue_(queue) {}

  // Writers never pass a live waiter; readers neither while writers are preferred (the
  // queue holds writers only); a fair blocking writer waits in it.
  QueueMode queue_mode() const override {
    if (side_ == RwSide::Read)
      return lock_.options_.writer_preference ? QueueMode::Respect : QueueMode::Ignore;
    return queue_ ? QueueMode::Wait : QueueMode::Respect;
  }

  std::int64_t first_slot() const override {
    return side_ == RwSide::Read ? 0 : lock_.writer_slot();
  }

  SlotChoice choose(const SemaphoreDoc& doc, std::int64_t now) const override {
    const std::int64_t r = lock_.max_readers();
    const std::string& me = lock_.identity().uuid;
    const SemaphoreSlot& writer = at(doc, r);
    const SemaphoreSlot& mark = at(doc, r + 1);
    SlotChoice c;
    if (writer.held_at(now)) return c;
    // The claimant's own mark goes with its claim, whatever its state (named by fence).
    const bool own_mark = !semaphore_doc::is_empty(mark) && mark.uuid == me;
    if (own_mark) c.clear.push_back(SlotClear{r + 1, mark.fence});
    if (side_ == RwSide::Read) {
      if (lock_.options_.writer_preference && !own_mark) {
        if (mark.held_at(now)) return SlotChoice{};  // a writer waits: no new readers
        if (!semaphore_doc::is_empty(mark)) c.clear.push_back(SlotClear{r + 1, 0});
      }
      if (!semaphore_doc::is_empty(writer)) c.clear.push_back(SlotClear{r, 0});
      for (std::int64_t i = 0; i < r && c.slot < 0; ++i)
        if (!at(doc, i).held_at(now)) c.slot = i;
      if (c.slot < 0) return SlotChoice{};  // every reader slot held
      return c;
    }
    for (std::int64_t i = 0; i < r; ++i) {
      const SemaphoreSlot& s = at(doc, i);
      if (s.held_at(now)) return SlotChoice{};
      if (!semaphore_doc::is_empty(s)) c.clear.push_back(SlotClear{i, 0});
    }
    c.slot = r;
    return c;
  }

  bool on_refused(const SemaphoreDoc& doc, std::int64_t now) override {
    if (side_ != RwSide::Write || !mark_) return false;
    return lock_.wait_with_mark(doc, now);
  }

  static const SemaphoreSlot& at(const SemaphoreDoc& doc, std::int64_t i) {
    return doc.slots[static_cast<std::size_t>(i)];  // the document is checked: R + 2 slots
  }

 private:
  RwLock& lock_;
  const RwSide side_;
  const bool mark_;
  const bool queue_;
};

RwLock::RwLock(std::shared_ptr<Storage> storage, RwLockOptions options,
               std::shared_ptr<Clock> clock, Identity identity)
    : SlotHolder(storage,
                 HoldSpec::from(checked(options, storage), "read-write lock",
                                "read-write lock " + options.key,
                                "the hold of read-write lock " + options.key),
                 doc_spec(options), std::move(clock), std::move(identity)),
      options_(std::move(options)) {}

void RwLock::check_server_safety() {
  state().check_server_safety(options_.allow_unsafe_server,
                              " does not run single-document updates atomically, so a writer "
                              "and other holders could hold read-write lock " +
                                  options_.key +
                                  " at once; refusing to run. Set allow_unsafe_server to accept "
                                  "that risk (tests, single node).",
                              ": updates are not atomic; a read-write lock's exclusion is NOT "
                              "guaranteed under contention and fencing tokens may repeat "
                              "(allow_unsafe_server is set)");
}

std::string RwLock::already_holding(const Lease& live) const {
  return "this RwLock instance already holds a hold of '" + options_.key + "' (fence " +
         std::to_string(live.fence) +
         "): an instance holds at most one (a read or the write); release it first, or use "
         "one instance per hold";
}

std::int64_t RwLock::acquire(RwSide side, bool blocking, std::optional<double> timeout_s,
                             double step_s, const CancelFn& cancel) {
  const std::unique_ptr<AcquireRun> run = start_acquire(side, blocking, timeout_s, step_s);
  return run_blocking(*run, cancel);
}

std::unique_ptr<AcquireRun> RwLock::start_acquire(RwSide side, bool blocking,
                                                  std::optional<double> timeout_s, double step_s) {
  const bool queue = blocking && side == RwSide::Write && options_.fair;
  const bool mark = blocking && side == RwSide::Write && options_.writer_preference && !queue;
  return make_run(
      blocking, timeout_s, step_s, [this, side, mark, queue] { return attempt(side, mark, queue); },
      [this, side](const std::optional<SemaphoreDoc>& doc) { return held_message(side, doc); });
}

std::optional<std::int64_t> RwLock::try_acquire(RwSide side) { return attempt(side, false, false); }

std::optional<std::int64_t> RwLock::attempt(RwSide side, bool mark, bool queue) {
  Rule rule(*this, side, mark, queue);
  const std::optional<std::int64_t> token = try_claim(rule);
  if (token) {
    // The claim emptied any mark of ours its copy showed, and the compare-and-set means
    // the server had no other: nothing of ours is left to release.
    std::lock_guard<std::mutex> g(mark_mu_);
    mark_fence_ = 0;
  }
  return token;
}

bool RwLock::wait_with_mark(const SemaphoreDoc& doc, std::int64_t now) {
  const SemaphoreSlot& m = Rule::at(doc, mark_slot());
  const bool mine = !semaphore_doc::is_empty(m) && m.uuid == identity().uuid;
  try {
    if (m.held_at(now)) {
      if (!mine) return false;  // another writer waits already: so does this one
      {
        std::lock_guard<std::mutex> g(mark_mu_);
        mark_fence_ = m.fence;  // ours, as the server has it
      }
      // Renewed only when less than half its ttl is left (fenced, monotonic).
      if (m.ts_expire->ms - now >= ttl_ms() / 2) return false;
      if (renew_unheld(mark_slot(), m.fence)) return false;
      std::lock_guard<std::mutex> g(mark_mu_);
      mark_fence_ = 0;
      return true;  // gone meanwhile: read again
    }
    std::int64_t sent = 0;
    bool written = false;
    try {
      written = claim_unheld(doc, mark_slot(), sent);
    } catch (...) {
      std::lock_guard<std::mutex> g(mark_mu_);
      mark_fence_ = sent;  // it may have landed: released (fenced) when this writer gives up
      throw;
    }
    std::lock_guard<std::mutex> g(mark_mu_);
    mark_fence_ = written ? sent : 0;
    return !written;  // the document moved: read again
  } catch (const StorageFailure& ex) {
    // The mark is a preference, not the hold: this attempt is refused as it would be
    // without it; the next one tries again.
    log(LogLevel::Warning,
        "could not write the writer-waiting mark of " + describe() + ": " + ex.what(),
        log_fields(LogEvent::None));
    return false;
  }
}

void RwLock::drop_mark() {
  std::int64_t fence;
  {
    std::lock_guard<std::mutex> g(mark_mu_);
    fence = mark_fence_;
    mark_fence_ = 0;
  }
  if (fence == 0) return;
  try {
    release_unheld(mark_slot(), fence);
  } catch (const std::exception& ex) {
    log(LogLevel::Warning,
        "could not release the writer-waiting mark of " + describe() +
            " (it expires within its ttl): " + ex.what(),
        log_fields(LogEvent::None, fence));
  }
}

void RwLock::release() {
  drop_mark();
  SlotHolder::release();
}

std::int64_t RwLock::waiting_mark() const {
  std::lock_guard<std::mutex> g(mark_mu_);
  return mark_fence_;
}

std::optional<RwSide> RwLock::side() const {
  const std::optional<Hold> h = hold();
  if (!h) return std::nullopt;
  return h->slot == writer_slot() ? RwSide::Write : RwSide::Read;
}

RwLockHolders RwLock::holders() {
  RwLockHolders out;
  const std::optional<SemaphoreDoc> doc = read_checked();
  if (!doc) return out;
  // Held as long as a claimant could still consider it held (earliest server time).
  const std::int64_t now = earliest_now();
  for (std::int64_t i = 0; i < max_readers(); ++i)
    if (Rule::at(*doc, i).held_at(now)) out.readers.push_back(Rule::at(*doc, i));
  if (Rule::at(*doc, writer_slot()).held_at(now)) out.writer = Rule::at(*doc, writer_slot());
  if (Rule::at(*doc, mark_slot()).held_at(now)) out.waiting_writer = Rule::at(*doc, mark_slot());
  out.waiting = fair_queue::waiting(doc->queue, now);
  return out;
}

std::string RwLock::held_message(RwSide side, const std::optional<SemaphoreDoc>& doc) {
  const std::string& key = options_.key;
  if (!doc || static_cast<std::int64_t>(doc->slots.size()) != max_readers() + 2)
    return key + ": held";
  const std::int64_t now = server_clock().estimate().value_or(ServerTime{}).earliest_ms();
  const SemaphoreSlot& w = Rule::at(*doc, writer_slot());
  if (w.held_at(now)) return key + ": held for writing by " + who(w);
  const SemaphoreSlot& m = Rule::at(*doc, mark_slot());
  if (side == RwSide::Read && options_.writer_preference && m.held_at(now) &&
      m.uuid != identity().uuid)
    return key + ": a writer is waiting (" + who(m) + "), new readers wait for it";
  std::string readers;
  for (std::int64_t i = 0; i < max_readers(); ++i) {
    const SemaphoreSlot& s = Rule::at(*doc, i);
    if (s.held_at(now)) readers += (readers.empty() ? "" : ", ") + who(s);
  }
  if (side == RwSide::Read)
    return key + ": all " + std::to_string(max_readers()) + " read slots held" +
           (readers.empty() ? "" : " (by " + readers + ")");
  return key + ": held for reading" + (readers.empty() ? "" : " by " + readers);
}

}  // namespace mongoelector
