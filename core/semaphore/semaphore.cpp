#include "semaphore.h"

#include "../exceptions.h"
#include "../storage/semaphore_doc.h"

namespace mongoelector {

namespace {
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

SlotDocSpec doc_spec(const SemaphoreOptions& o) {
  SlotDocSpec d;
  d.kind = "";
  d.limit = o.limit;
  d.limit_name = "limit";
  d.timeparanoid = o.timeparanoid;
  d.allow_unsafe_server = o.allow_unsafe_server;
  return d;
}

// The counting rule: the first slot free at the claimant's earliest time, relying on
// no other slot.
class CountingRule final : public SlotRule {
 public:
  explicit CountingRule(QueueMode mode) : mode_(mode) {}
  QueueMode queue_mode() const override { return mode_; }
  std::int64_t first_slot() const override { return 0; }
  SlotChoice choose(const SemaphoreDoc& doc, std::int64_t now_ms) const override {
    SlotChoice c;
    for (std::size_t i = 0; i < doc.slots.size() && c.slot < 0; ++i)
      if (!doc.slots[i].held_at(now_ms)) c.slot = static_cast<std::int64_t>(i);
    return c;
  }

 private:
  const QueueMode mode_;
};
}  // namespace

Semaphore::Semaphore(std::shared_ptr<Storage> storage, SemaphoreOptions options,
                     std::shared_ptr<Clock> clock, Identity identity)
    : SlotHolder(storage,
                 HoldSpec::from(checked(options, storage), "semaphore", "semaphore " + options.key,
                                "the hold of semaphore " + options.key),
                 doc_spec(options), std::move(clock), std::move(identity)),
      options_(std::move(options)) {}

void Semaphore::check_server_safety() {
  state().check_server_safety(options_.allow_unsafe_server,
                              " does not run single-document updates atomically, so more than "
                              "`limit` nodes could hold semaphore " +
                                  options_.key +
                                  " at once; refusing to run. Set allow_unsafe_server to accept "
                                  "that risk (tests, single node).",
                              ": updates are not atomic; the semaphore limit is NOT guaranteed "
                              "under contention and fencing tokens may repeat "
                              "(allow_unsafe_server is set)");
}

std::string Semaphore::already_holding(const Lease& live) const {
  return "this Semaphore instance already holds a slot of '" + options_.key + "' (fence " +
         std::to_string(live.fence) +
         "): an instance holds at most one slot; release it first, or use one instance per slot";
}

std::int64_t Semaphore::acquire(bool blocking, std::optional<double> timeout_s, double step_s,
                                const CancelFn& cancel) {
  const std::unique_ptr<AcquireRun> run = start_acquire(blocking, timeout_s, step_s);
  return run_blocking(*run, cancel);
}

std::unique_ptr<AcquireRun> Semaphore::start_acquire(bool blocking, std::optional<double> timeout_s,
                                                     double step_s) {
  return make_run(
      blocking, timeout_s, step_s,
      [this, queue = blocking && options_.fair] { return attempt(queue); },
      [this](const std::optional<SemaphoreDoc>& doc) { return full_message(doc); });
}

std::optional<std::int64_t> Semaphore::try_acquire() { return attempt(false); }

std::optional<std::int64_t> Semaphore::attempt(bool queue) {
  CountingRule rule(queue ? QueueMode::Wait : QueueMode::Respect);
  return try_claim(rule);
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

std::vector<SemaphoreSlot> Semaphore::holders() {
  std::optional<SemaphoreDoc> doc = read_checked();
  std::vector<SemaphoreSlot> out;
  if (!doc) return out;
  // Held as long as a claimant could still consider it held (earliest server time).
  const std::int64_t now = earliest_now();
  for (const auto& s : doc->slots)
    if (s.held_at(now)) out.push_back(s);
  return out;
}

}  // namespace mongoelector
