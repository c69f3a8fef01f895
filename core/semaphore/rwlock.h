// RwLock: a read-write lock -- many readers OR one writer on one key -- each hold with a
// lease (ttl) and a fencing token, on the semaphore's document and machinery
// (slot_holder.h). It differs from a Semaphore only in its claim rules:
//
//  * The document (storage/semaphore_storage.h): {_id: key, kind: "rwlock", limit: R,
//    fence, slots: [R + 2]}: slots 0..R-1 the readers, slot R the writer, slot R+1 the
//    writer-waiting MARK. R = max_readers, fixed when the document is created (another
//    value, or a semaphore's document under the key, is refused with InvalidArgument,
//    nothing written).
//  * Reader claim: from a copy of the document at the claimant's EARLIEST server time,
//    the writer slot free, the mark free (with writer preference; a mark of this
//    instance's own does not stop it), and a free reader slot i: claim slot i
//    (compare-and-set on the document's fence: any claim or mark since the copy moves the
//    fence, so the copy's judgement holds at the write).
//  * Writer claim: every reader slot and the writer slot free then: claim slot R.
//  * A claim EMPTIES, in the same atomic write, every non-empty slot its rule relies on
//    being free (SemaphoreClaim::clear_slots: the expired reader slots for a writer, an
//    expired writer slot and mark for a reader), and the claimant's own mark; the write's
//    filter checks each of them free at its time. Renewals compare a slot's expiry with
//    the RENEWER's now and do not move the fence: without the emptying, a reader's late
//    renewal (sent before its deadline, landing after its slot expired and after a writer
//    took the lock) would match its old {uuid, fence} and revive it next to the writer
//    (and a writer's next to a reader); emptied, it matches nothing, and its holder hears
//    "not ours". A renewal landing between a claimant's read and its write makes the
//    filter fail instead (the slot is held again): the claimant reads and is refused.
//  * Writer preference (default on): a BLOCKING writer attempt refused by live holders
//    writes the mark -- a compare-and-set claim of slot R+1 that is NOT its hold (expiry
//    earliest + ttl; it moves the fence, so readers that read before it fail their write
//    and read again). Readers with preference refuse a live mark of another. The mark is
//    renewed only when less than half its ttl is left (not a write per step), emptied by
//    the writer's own claim, released (fenced) when its acquire() gives up (timeout,
//    cancel, error) and otherwise left to expire: a dead waiting writer stops new readers
//    for at most one ttl. Readers already in keep renewing. With preference off no
//    instance writes or heeds marks. One attempt on its own (try_acquire) writes none.
//  * Tokens: every claim moves the document's fence F -> F+1 (the semaphore's epochs):
//    a writer's token is above every token granted before it, readers' and writers'.
//
// One hold per instance (a read or the write): acquiring while its lease runs is
// InvalidArgument. Round trips: as the Semaphore's (one write with a current copy, read +
// write without; a refused attempt one read, plus a mark write now and then).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "slot_holder.h"

namespace mongoelector {

enum class RwSide { Read, Write };
const char* side_name(RwSide side);  // "read" / "write"

struct RwLockDefaults {
  static constexpr const char* collection = "mongorwlock";
  static constexpr double ttl_s = 600;
  static constexpr std::int64_t max_readers = 64;
  static constexpr bool writer_preference = true;
  static constexpr bool timeparanoid = true;
  static constexpr double maxoffset_s = 0.5;
  static constexpr bool allow_unsafe_server = false;
};

struct RwLockOptions {
  std::string key;
  std::int64_t max_readers = RwLockDefaults::max_readers;  // 1..1000 (semaphore_doc::kMaxLimit)
  // A waiting writer stops NEW readers from entering (writers do not starve).
  bool writer_preference = RwLockDefaults::writer_preference;
  std::string collection = RwLockDefaults::collection;
  double ttl_s = RwLockDefaults::ttl_s;
  bool timeparanoid = RwLockDefaults::timeparanoid;
  double maxoffset_s = RwLockDefaults::maxoffset_s;
  bool allow_unsafe_server = RwLockDefaults::allow_unsafe_server;
  // Accept a storage whose calls have no known time bound (see LockerOptions).
  bool allow_unbounded_calls = false;
  // Fair (FIFO) writers (hold/fair_queue.h): a blocking writer that finds the lock taken
  // waits in the key's queue instead of writing the waiting mark, and writers are served
  // in arrival order. With writer preference, a live queue stops new readers as the mark
  // does.
  bool fair = false;
};

// The unexpired holders of a read-write lock's key (at the earliest server time).
struct RwLockHolders {
  std::vector<SemaphoreSlot> readers;  // in slot order
  std::optional<SemaphoreSlot> writer;
  std::optional<SemaphoreSlot> waiting_writer;  // the live mark
  std::vector<QueueEntry> waiting;              // fair queue: fair_queue::waiting
};

class RwLock : public SlotHolder {
 public:
  RwLock(std::shared_ptr<Storage> storage, RwLockOptions options,
         std::shared_ptr<Clock> clock = nullptr, Identity identity = Identity::generate());

  // Takes a read or the write hold: its fencing token. Same rules as
  // Semaphore::acquire (non-blocking and held -> LockExists("<key>: held for writing by
  // ..."); blocking: retries every `step_s` until `timeout_s` -> AcquireTimeout; `cancel`
  // -> Cancelled; timeparanoid -> verify_time() first). A blocking writer waits with its
  // mark (writer preference), released when it gives up.
  std::int64_t acquire(RwSide side, bool blocking = true,
                       std::optional<double> timeout_s = std::nullopt, double step_s = 0.25,
                       const CancelFn& cancel = {});
  // The same acquire as a state machine its caller drives (see Locker::start_acquire).
  // A blocking writer's mark and queue entry go with the run's give_up() (or release()).
  std::unique_ptr<AcquireRun> start_acquire(RwSide side, bool blocking = true,
                                            std::optional<double> timeout_s = std::nullopt,
                                            double step_s = 0.25);
  // One attempt, no time check, no waiting, no mark: the token, or nullopt when held.
  std::optional<std::int64_t> try_acquire(RwSide side);

  // Releases this instance's hold (fenced) and its waiting mark, if any.
  void release() override;
  // Releases (fenced) only this instance's waiting mark, if any. Failures are logged.
  void drop_mark();

  // The side of the current hold (nullopt: none).
  std::optional<RwSide> side() const;
  // The unexpired holders (one round trip). Checks the document.
  RwLockHolders holders();
  // The fence of this instance's waiting mark as last written (0: none).
  std::int64_t waiting_mark() const;

  const char* unit() const override { return "read or write hold"; }
  const RwLockOptions& options() const { return options_; }
  std::int64_t max_readers() const { return options_.max_readers; }
  std::int64_t writer_slot() const { return options_.max_readers; }
  std::int64_t mark_slot() const { return options_.max_readers + 1; }

 private:
  class Rule;
  void check_server_safety() override;
  std::string already_holding(const Lease& live) const override;
  // A writer that gives up: its mark (readers may enter again) and its queue entry.
  void undo_wait() override {
    drop_mark();
    leave_queue();
  }
  std::optional<std::int64_t> attempt(RwSide side, bool mark, bool queue);
  // The writer's side write when refused (writer preference): see the file comment.
  bool wait_with_mark(const SemaphoreDoc& doc, std::int64_t now_ms);
  std::string held_message(RwSide side, const std::optional<SemaphoreDoc>& doc);

  RwLockOptions options_;
  mutable std::mutex mark_mu_;
  std::int64_t mark_fence_ = 0;  // this instance's mark as last sent (0: none)
};

}  // namespace mongoelector
