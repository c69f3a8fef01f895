// The renewer: the threads that keep every keep-alive lease of a process alive.
//
// Threads stay flat as leases grow (protocol notes, "cost per key"): a FIXED pool serves
// every lease of the process (Renewer::system(): kSystemThreads threads, started on first
// use, re-created in a fork()ed child), never a thread per lease. A lease is in the queue
// at most once and runs on one thread at a time; a renewal that hangs in I/O holds one
// worker for at most the storage's call bound, the others keep serving the queue. Loss is
// NOT decided here but read from each lease's deadline and the clock (hold_loss.h), so a
// worker stuck in a call (or a queue behind it) can delay a renewal, never a loss.
//
// Batching: renewals are not sent one by one. When a batchable renewable falls due, the
// worker takes with it every queued renewable of the same storage domain (one client,
// Storage::batch_domain()) whose early-ok time has passed, and sends their renewals by
// kind and collection -- locks in Storage::renew_many, semaphore slots in
// Storage::renew_semaphores -- in calls of at most max_renew_batch() requests (2
// commands per chunk on MongoDB). A renewable renewed early is due again a full interval after THIS
// send, so after one round a client's renewals are aligned: a process holding N keys
// sends about 2 * ceil(N / batch) commands per renew interval instead of N. Each
// renewable keeps its own deadline (measured from the batch's send), and learns its
// own outcome: renew_many reports per request, never from aggregate counts.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../clock.h"
#include "../hold/holdable.h"
#include "../storage/storage.h"

namespace mongoelector {

// Work the renewer runs: one step at a time, on one of its threads.
class Renewable {
 public:
  virtual ~Renewable() = default;
  // One renewal (or clean-up) step. Returns the host mono ms of the next step, or nullopt
  // when there is nothing more to do (the renewable is then dropped from the queue).
  virtual std::optional<std::int64_t> renew_step() = 0;

  // ---- Batching (optional; the defaults never batch) ----
  // Renewables with the same non-null domain may share one batch call.
  virtual const void* batch_domain() const { return nullptr; }
  // Host mono ms from which the step due at `due` may run early to join a batch.
  virtual std::int64_t early_ok(std::int64_t due) const { return due; }
  // What begin_batched() decided.
  struct BatchStart {
    // Set: send this renewal in a batch, then call finish_batched(). The renewable
    // keeps the ticket until then; the renewer only reads it.
    const RenewTicket* ticket = nullptr;
    std::string collection;
    Storage* storage = nullptr;  // may carry the batch
    // Otherwise: the step is over (no request); the next due, as renew_step() returns.
    std::optional<std::int64_t> next;
  };
  // A step that renews through a batch whose send starts at host mono `sent` (read
  // before this call). Anything renew_step() would do without the renewal call it does
  // here (stale clock sample, loss, clean-up) and returns `next` instead of a request.
  virtual BatchStart begin_batched(std::int64_t /*sent*/) {
    return BatchStart{nullptr, {}, nullptr, renew_step()};
  }
  // The batch's outcome for this request: renewed, or the failure of the whole call
  // (error set). Returns the next due, as renew_step() does.
  virtual std::optional<std::int64_t> finish_batched(bool renewed, const char* error) {
    (void)renewed;
    (void)error;
    return std::nullopt;
  }
};

class Renewer {
 public:
  static constexpr int kSystemThreads = 4;

  // threads = 0: no thread; the owner runs due steps with run_due() (fake-clock tests).
  // Threads are started on the first add().
  Renewer(std::shared_ptr<Clock> clock, int threads);
  // Stops and joins the threads. Every renewable should have been removed.
  ~Renewer();
  Renewer(const Renewer&) = delete;
  Renewer& operator=(const Renewer&) = delete;

  // The process-wide renewer on the system clock. Never destroyed.
  static Renewer& system();
  // The renewer of leases on `clock`: the one registered for it (use_for) or the
  // process-wide one.
  static Renewer& for_clock(Clock& clock);
  // A clock whose leases a renewer of its own keeps alive (a ManualClock's, whose
  // thread waits on its time): for_clock(*clock) returns provide() from now on, until
  // stop_using_for(clock), which the clock calls before it goes. provide() may make the
  // renewer on first use. The clock knows nothing of leases: the lease layer keeps this
  // table (dependencies point from features to the clock, never back).
  static void use_for(const Clock* clock, std::function<Renewer&()> provide);
  static void stop_using_for(const Clock* clock);

  // Queues `r` to run at `due_mono_ms`. A renewable is queued at most once.
  void add(std::shared_ptr<Renewable> r, std::int64_t due_mono_ms);
  // Takes `r` out of the queue; if a step of it is running, waits until it has returned.
  // Must not be called from a renewer thread (a renewable's own step).
  void remove(const Renewable* r);
  // Runs, on the calling thread, every step due now (earliest first; a step that asks to
  // run again at or before now runs again). Returns how many steps ran.
  int run_due();
  // Batching on (default) or off: off, every renewal is its own step (the process-wide
  // renewer starts with it off when MONGOELECTOR_BATCH_RENEWALS=0).
  void set_batching(bool on);
  // Batches sent and renewals carried by them (tests, benchmarks).
  std::uint64_t batches_sent() const;
  std::uint64_t batched_renewals() const;
  // Earliest due time in the queue (tests).
  std::optional<std::int64_t> next_due() const;
  std::size_t size() const;  // renewables queued or running
  int threads() const { return threads_; }
  Clock& clock() { return *clock_; }
  const std::shared_ptr<Clock>& clock_ptr() const { return clock_; }

 private:
  using Key = std::pair<std::int64_t, std::uint64_t>;  // (due, seq)
  struct Slot {
    std::shared_ptr<Renewable> r;
    std::optional<Key> queued;  // nullopt while a step runs
    std::int64_t early_ok = 0;  // batching: may run from here on
    const void* domain = nullptr;
    std::uint64_t registered = 0;  // add()'s order: a batch's members run in this order
    bool removed = false;          // remove() was called while a step ran
  };
  // Pops the earliest due step (mu_ held); nullptr if none is due.
  std::shared_ptr<Renewable> pop_due_locked(std::int64_t now);
  void run_step(const std::shared_ptr<Renewable>& r);
  // mu_ held: pops every queued renewable of `domain` whose early-ok time has passed.
  // `out` is then in registration order (never that of addresses: the batches, their
  // requests and the log lines about them repeat from run to run).
  void pop_batch_locked(const void* domain, std::int64_t now,
                        std::vector<std::shared_ptr<Renewable>>& out);
  // mu_ held: takes the earliest due step and, if batchable, its batch. nullopt: none
  // due; else whether it is a batch.
  std::optional<bool> take_due_locked(std::int64_t now,
                                      std::vector<std::shared_ptr<Renewable>>& out);
  void run_taken(std::vector<std::shared_ptr<Renewable>>& taken, bool batched);
  // Runs a batch (one begin, one shared renew_many per chunk, one finish each); requeues each.
  void run_batch(std::vector<std::shared_ptr<Renewable>> batch);
  // Puts `r` back after a step returned `next` (or drops it); mu_ held.
  void requeue_locked(const Renewable* r, const std::optional<std::int64_t>& next);
  void worker();

  std::shared_ptr<Clock> clock_;
  const int threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;       // queue changed / stop
  std::condition_variable done_cv_;  // a step returned
  std::map<Key, const Renewable*> queue_;
  std::unordered_map<const Renewable*, Slot> slots_;
  std::uint64_t seq_ = 0;
  std::uint64_t registrations_ = 0;
  std::uint64_t changes_ = 0;
  bool batching_ = true;
  std::uint64_t batches_ = 0;
  std::uint64_t batched_ = 0;
  bool stop_ = false;
  bool started_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace mongoelector
