// One simulated schedule: nodes running the real core classes on a deterministic fake
// clock (sched.h), a network model between each node and ONE in-memory server, a seeded
// workload, and the invariant checks run after every step. See README.md.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "election/elector.h"
#include "exceptions.h"
#include "lease/lease.h"
#include "partition/partitioner.h"
#include "sched.h"
#include "server_clock.h"
#include "storage/memory_storage.h"
#include "storage/storage.h"

namespace sim {

// A string builder for the trace, cheaper than std::ostringstream (no locale).
struct Str {
  std::string s;
  Str& operator<<(const std::string& v) {
    s += v;
    return *this;
  }
  Str& operator<<(const char* v) {
    s += v;
    return *this;
  }
  Str& operator<<(char v) {
    s += v;
    return *this;
  }
  Str& operator<<(bool v) {
    s += v ? '1' : '0';
    return *this;
  }
  Str& operator<<(int v) {
    s += std::to_string(v);
    return *this;
  }
  Str& operator<<(unsigned v) {
    s += std::to_string(v);
    return *this;
  }
  Str& operator<<(long v) {
    s += std::to_string(v);
    return *this;
  }
  Str& operator<<(unsigned long v) {
    s += std::to_string(v);
    return *this;
  }
  Str& operator<<(long long v) {
    s += std::to_string(v);
    return *this;
  }
  Str& operator<<(unsigned long long v) {
    s += std::to_string(v);
    return *this;
  }
  const std::string& str() const { return s; }
};

inline const char* const kLockColl = "mongolocker";
inline const char* const kElectColl = "elector.locks";
inline const char* const kSemColl = "mongosemaphore";
inline const char* const kRwColl = "mongorwlock";
// The queue documents of fair plain locks of kLockColl (core/lock_queue.h).
inline const char* const kLockQueueColl = "mongolocker.queue";
inline const char* const kPartColl = "partitioner.locks";
inline const char* const kPartGroup = "g0";
inline constexpr std::int64_t kEpochUnit = std::int64_t{1} << 32;  // tokens: epoch << 32 | n

struct Window {
  int node = -1;              // -1: the server
  std::int64_t a = 0, b = 0;  // [a, b) in fake mono ms
};

struct NodeRoles {
  std::vector<std::string> electors;  // election keys this node stands for
  int lockers = 0;                    // plain locker actors
  bool leases = false;                // one actor holding several keep-alive leases
  bool semaphore = false;             // one semaphore actor (plain holds and leases)
  bool rwlock = false;                // one read-write lock actor (plain holds and leases)
  bool bad_sampler = false;           // its clock samples may come from slow, lopsided round trips
  std::int64_t wall_offset = 0;       // host wall clock minus the server's
  // Priority leaders (Params::priorities): this node's electors' priority and stability delay.
  double priority = 0;
  std::int64_t priority_stability = 0;  // ms
  // Partitioners (Params::partitioners): a member of group kPartGroup, and its poll (ms).
  bool partitioner = false;
  std::int64_t part_poll = 0;
  // Fair holds (Params::fair): this node's semaphore / read-write lock instances are fair
  // (a node without is a non-fair node of the same key: a mixed fleet).
  bool fair_sem = false;
  bool fair_rw = false;
  // Fair plain locks (Params::fair_locks): one more locker on Params::fair_lock_key,
  // fair (kFairLocker) or not (kUnfairLocker: the mixed fleet), or none.
  enum FairLockRole { kNoFairLockRole = 0, kFairLocker, kUnfairLocker };
  FairLockRole fair_lock = kNoFairLockRole;
};

// The index (locker_actor) of the extra locker of Params::fair_locks: its uuid and its
// random stream are its own.
inline constexpr int kFairLockerIdx = 100;

// Everything a schedule does, drawn from its seed (make_params).
struct Params {
  std::uint64_t seed = 0;
  int nodes = 0;           // workload nodes 0..nodes-1; node `nodes` is the liveness prober
  std::int64_t ttl = 0;    // ms, every key
  std::int64_t bound = 0;  // call bound (ms) of every node's storage
  // Phases (fake mono ms): faults until F; actors stop at P; the prober tries every key
  // at P2 (or later, after the last minimum hold); electors must have a leader from L;
  // the schedule ends at E.
  std::int64_t F = 0, P = 0, P2 = 0, L = 0, E = 0;
  double harsh = 0;
  // Per call, before F: fail before applying, apply and lose the reply, hold and apply
  // after the caller's timeout (reordered with its later calls), slow both ways.
  double p_fail = 0, p_lost = 0, p_held = 0, p_slow = 0;
  double p_asym = 0;  // a bad sampler's server_time_ms: slow and lopsided
  std::int64_t hold_max = 0;
  std::vector<Window> freezes;     // the server queues requests, applies them at b
  std::vector<Window> partitions;  // a node's calls fail, vanish or wait for b
  std::vector<Window> pauses;      // a node's threads do not run
  std::vector<std::pair<std::int64_t, std::int64_t>> steps;  // (when, delta): server clock
  std::vector<std::int64_t> ttl_sweeps;  // MongoDB's TTL monitor deletes expired lock documents
  std::int64_t step_ok_ms = 20;          // |step| up to this is inside the timing assumption
  std::int64_t beyond_at = -1;  // first larger step: I1, I2, I4, I5, I7 excused from then on
  double p_slow_cb = 0;         // a loss callback sleeps (on the thread that runs it)
  std::int64_t slow_cb_max = 0;
  double p_handover = 0;  // per election loop as leader: resign() or transfer()
  double p_restart = 0;   // an elector's process restarts (new uuid), checked every 1-3 ttl
  // Priority leaders: every elector stands with a priority (0..2: ties are common) and a
  // stability delay (0..ttl); the leader must hand over to the highest live one (I8).
  // Drawn from a stream of its own, so that the other draws of a seed are unchanged.
  bool priorities = false;
  // Partitioners: members of one group of part_n partitions on some nodes, leaving and
  // joining (new uuid) now and then before F - ttl with part_restart per check; I9a, I9b.
  // Drawn from a stream of its own, so that the other draws of a seed are unchanged.
  bool partitioners = false;
  std::int64_t part_n = 0;
  double part_restart = 0;
  // Fair (FIFO) holds: the semaphore and the read-write lock's writers of most of their
  // nodes wait in the key's queue (fair=true), with more contenders than slots; I10.
  // Drawn from a stream of its own, so that the other draws of a seed are unchanged.
  bool fair = false;
  // Fair plain locks (half of the fair schedules, from a stream of their own): 3-5 nodes
  // run one more locker on fair_lock_key (the first lock key, where the other lockers
  // contend too), fair on most of them; I10 for the claims of the fair ones.
  bool fair_locks = false;
  std::string fair_lock_key;
  int sem_limit = 2;
  int rw_readers = 2;  // max_readers of the read-write lock "rw0"
  std::vector<std::string> lock_keys;
  std::map<std::string, std::int64_t> window_of;  // claim_window length (ms) of each lock key
  std::vector<NodeRoles> roles;
  std::int64_t wall0 = 0;
  std::string describe() const;
};
// calm: the same workload on a network without faults (a check of the checks).
Params make_params(std::uint64_t seed, bool calm = false);

struct Violation {
  std::string inv;  // I1 .. I9b
  std::int64_t t = 0;
  std::string key;
  std::string what;
  std::vector<std::string> tags;  // which known mechanism the trace shows (if any)
};

struct TraceEntry {
  std::int64_t t = 0;
  int node = -1;    // -1: server / world
  std::string key;  // "" when not about one key
  std::string text;
};

struct Result {
  std::uint64_t seed = 0;
  std::string status = "ok";  // ok | violation | stall | error
  std::vector<Violation> violations;
  std::string error;
  std::uint64_t steps = 0, grants = 0, calls = 0;
  std::uint64_t queued = 0, queue_claims = 0;  // fair queues: entries written, claims from one
  std::uint64_t turn_checks = 0;               // renewals after a read, checked by I10b
  std::uint64_t rw_turn_checks = 0;            // of them, of the read-write lock's queue
  std::uint64_t crashes = 0, dead_leases = 0;  // processes crashed, leases killed with them
  std::uint64_t dead_checks = 0;               // checks of a crashed process's holds (I11)
  std::uint64_t trace_hash = 0;                // 0 when not asked for (see World::trace_hash)
  std::int64_t end_t = 0;
};

struct RunOptions {
  bool stop_at_first = true;  // end the schedule at the first violating step
  bool shuffle = true;        // seeded order of threads runnable at one instant
  std::int64_t stall_ms = 5000;
  // Proof mode of I9a: a partitioner member believes what its callbacks told it (from
  // on_assigned until its on_revoked returns) instead of owned(): such a belief outlives
  // a lease lost while its on_revoked waits (a slow callback, a paused node).
  bool break_partitions = false;
  // Proof mode of I10: the nodes' reads of a semaphore or read-write lock document show
  // no queue, so that every claim's gate (fair_queue::gate) is open and passes live
  // entries (the core's write names only the entries its gate saw).
  bool break_fair = false;
  // Proof mode of I10b: the nodes' reads of the semaphore s0 show every slot held, so
  // that a head never sees its turn (it renews its entry instead of claiming).
  bool break_turns = false;
  // The same for the read-write lock rw0 (its reads show every slot held): a head writer
  // never claims.
  bool break_rw_turns = false;
  // Proof mode of I11: a crash kills the actor's plain instance only, as before: its
  // keep-alive leases live on (the node's renewer keeps renewing them, their callbacks run,
  // their holders still believe), so that the crashed process's slot or lock outlives its
  // ttl. An elector or partitioner that crashes is still stopped, its calls sent (it
  // releases).
  bool break_crash = false;
};

struct Fate {
  const char* kind = "ok";
  std::int64_t apply_at = -1;  // -1: never applied
  std::int64_t arrival = 0;    // server arrival order among calls applied together
  std::int64_t return_at = 0;
  bool success = false;  // the caller gets the result (else StorageUnavailable)
};

struct CallCtx {
  int node = 0;
  std::uint64_t seq = 0;
  std::int64_t send = 0;
  Fate fate;
  std::string who;
  std::uint64_t prev_seq = 0;  // the calling thread's call before this one (0: none)
};

class World;

// A node's client: every Storage operation crosses the network model.
class NodeStorage final : public me::Storage {
 public:
  NodeStorage(World& w, int node, std::shared_ptr<NodeClock> clock);

  me::ServerInfo server_info() override;
  std::shared_ptr<me::Clock> clock() override { return clock_; }
  std::int64_t call_bound_ms() const override;
  std::int64_t server_time_ms() override;
  void ensure_lock_indexes(const std::string& collection) override;
  std::optional<me::LockDoc> claim(const std::string& collection, const me::LockClaim& claim,
                                   bool force) override;
  std::optional<me::LockDoc> insert_claim(const std::string& collection,
                                          const me::LockClaim& claim) override;
  std::int64_t bump_epoch(const std::string& collection, const std::string& key) override;
  bool set_fence(const std::string& collection, const std::string& key, const std::string& uuid,
                 std::int64_t old_fence, std::int64_t created_ms, std::int64_t new_fence) override;
  bool renew(const std::string& collection, const std::string& key, const std::string& uuid,
             std::int64_t fence, std::int64_t now_ms, std::int64_t expire_ms) override;
  std::vector<bool> renew_many(const std::string& collection,
                               const std::vector<me::RenewRequest>& requests,
                               std::int64_t now_ms) override;
  std::shared_ptr<me::ClockSampleBoard> clock_sample_board() override { return board_; }
  bool release(const std::string& collection, const std::string& key,
               const std::optional<std::string>& uuid, std::int64_t fence, std::int64_t now_ms,
               bool delete_document) override;
  std::optional<me::LockDoc> read(const std::string& collection, const std::string& key) override;
  std::optional<me::SemaphoreDoc> read_semaphore(const std::string& collection,
                                                 const std::string& key) override;
  bool create_semaphore(const std::string& collection, const me::SemaphoreClaim& claim) override;
  bool claim_semaphore(const std::string& collection, const me::SemaphoreClaim& claim) override;
  bool renew_semaphore(const std::string& collection, const std::string& key, std::int64_t slot,
                       const std::string& uuid, std::int64_t fence, std::int64_t now_ms,
                       std::int64_t expire_ms) override;
  bool release_semaphore(const std::string& collection, const std::string& key, std::int64_t slot,
                         const std::string& uuid, std::int64_t fence) override;
  bool renew_queue_entry(const std::string& collection, const std::string& key, std::int64_t index,
                         const std::string& uuid, std::int64_t ticket, std::int64_t now_ms,
                         std::int64_t expire_ms) override;
  bool leave_queue(const std::string& collection, const std::string& key, const std::string& uuid,
                   std::int64_t ticket) override;
  std::vector<bool> renew_semaphores(const std::string& collection,
                                     const std::vector<me::SemaphoreRenewRequest>& requests,
                                     std::int64_t now_ms) override;
  void ensure_status_indexes(const std::string& collection, std::int64_t ttl_s) override;
  void put_status(const std::string& collection, const me::Document& doc) override;
  std::vector<me::Document> list_status(const std::string& collection,
                                        const std::string& key) override;
  bool hand_over(const std::string& collection, const HandOver& h) override;
  bool set_expiry(const std::string& collection, const std::string& key, const std::string& uuid,
                  std::int64_t fence, std::int64_t now_ms, std::int64_t expire_ms,
                  std::int64_t created_ms) override;
  bool set_payload(const std::string& collection, const me::PayloadWrite& w) override;

 private:
  template <class R>
  R rpc(const char* op, const std::string& key, const std::string& what,
        std::function<R(const CallCtx&)> apply);
  World& w_;
  int node_;
  std::shared_ptr<NodeClock> clock_;
  std::shared_ptr<me::ClockSampleBoard> board_;
  std::mutex mu_;
  std::uint64_t seq_ = 0;
  std::map<std::string, std::uint64_t> last_seq_;  // each thread's last call
};

// A keep-alive lease a workload actor holds on an instance of its own (a semaphore's
// slot, a read-write lock's read or write hold): opened, believed, closed.
struct ActorLease {
  std::shared_ptr<me::Holdable> holder;
  std::unique_ptr<me::KeepAliveLease> lease;
  // Leases of crashed processes (World::crash_lease): never used again, their calls never
  // sent, their callbacks not run; closed (invisibly: refused) when the actor stops.
  std::vector<std::pair<std::shared_ptr<me::Holdable>, std::unique_ptr<me::KeepAliveLease>>> dead;
  std::string uuid;
  bool write = false;  // a read-write lock's write hold
  bool closing = false, in_cb = false;
  std::uint64_t bid = 0;
  int gen = 0;
};

// A plain hold a workload actor took (see actors.cpp: the belief of a plain hold).
struct PlainHold {
  bool holding = false;
  bool write = false;  // a read-write lock's write hold
  std::int64_t fence = 0, u = 0;
};

struct Node {
  int id = 0;
  std::string name;
  bool prober = false;
  std::shared_ptr<NodeClock> clock;
  std::shared_ptr<NodeStorage> storage;
  std::vector<std::shared_ptr<me::Elector>> electors;
  std::vector<std::shared_ptr<me::Partitioner>> partitioners;
};

enum class Kind { Lock, Elector, Lease, Sem, SemLease, Rw, RwLease, Partition };
const char* kind_name(Kind k);
// A fair queue for the trace: [uuid/ticket exp=ts_expire ...].
std::string fmt_queue(const std::vector<me::QueueEntry>& q);

struct BeliefState {
  std::int64_t fence = 0;
  std::int64_t renew_deadline = -1;  // leases: the library's own renew deadline (mono)
  bool refencing = false;            // a deferred token is being assigned (token() in flight)
  bool write = false;                // a read-write lock's write hold (else a read)
};

// Something that may believe it holds a key; probed by the driver after every step.
struct Believer {
  std::uint64_t id = 0;
  int node = 0;
  Kind kind = Kind::Lock;
  std::string coll, key, uuid, label;
  std::string gk;  // coll + "/" + key
  std::function<std::optional<BeliefState>()> probe;
  // The fence believed at the last step (checked only by the driver, while every sim
  // thread waits).
  std::optional<std::int64_t> believed;
};

// What the server did to a lock document or semaphore slot (for the trace's diagnosis).
struct WriteRec {
  std::int64_t t = 0;
  int node = 0;
  std::uint64_t seq = 0;
  std::string op;
  std::int64_t send = 0;
  std::string who;  // the calling thread
  std::string uuid_before, uuid_after;
  std::int64_t fence_before = 0, fence_after = 0;
  std::int64_t expire_before = 0, expire_after = 0;
  std::string from_uuid;  // hand_over
  bool late = false;      // applied after its caller had given up (error returned)
  bool unacked = false;   // applied, but the caller got an error
};

struct LockSnap {
  bool exists = false, locked = false;
  std::string uuid;
  std::int64_t fence = 0, expire = 0;
  bool operator==(const LockSnap& o) const {
    return exists == o.exists && locked == o.locked && uuid == o.uuid && fence == o.fence &&
           expire == o.expire;
  }
};

class World {
 public:
  World(const Params& p, const RunOptions& o);
  ~World();
  Result run();
  const std::vector<TraceEntry>& trace_entries() const;
  // A hash of the whole trace (replays and reruns compare it). Not part of run(): a
  // schedule that passes needs it only when its runs are compared.
  std::uint64_t trace_hash();

  // ---- used by NodeStorage and actors ----
  const Params& params() const { return p_; }
  const RunOptions& options() const { return o_; }
  Scheduler& sched() { return sched_; }
  bool stopping() const { return stopping_.load(); }
  Fate draw_fate(int node, std::uint64_t seq, const char* op, std::int64_t t);
  void enqueue(std::int64_t at, std::int64_t arrival, int node, std::uint64_t seq,
               std::function<void()> fn);
  void trace(int node, const std::string& key, std::string text);
  const std::shared_ptr<me::MemoryStorage>& mem() { return mem_; }
  LockSnap snap_lock(const std::string& coll, const std::string& key);
  WriteRec write_rec(const CallCtx& c, const char* op, const std::string& uuid_before,
                     const std::string& uuid_after, std::int64_t fence_before,
                     std::int64_t fence_after, std::int64_t expire_before,
                     std::int64_t expire_after);
  void note_lock_write(const CallCtx& c, const char* op, const std::string& coll,
                       const std::string& key, const LockSnap& before, const LockSnap& after,
                       const std::string& from_uuid = "");
  void note_sem_write(const CallCtx& c, const char* op, const std::string& coll,
                      const std::string& key, const std::optional<me::SemaphoreDoc>& before,
                      const std::optional<me::SemaphoreDoc>& after);
  std::int64_t server_time_at(std::int64_t mono) const;
  // Fair queues: a change of a document's queue (traced, enqueues counted) and I10 for the
  // write that granted `uuid` a slot (see world.cpp).
  void note_queue_write(const CallCtx& c, const std::string& key, const std::string& gk,
                        const std::vector<me::QueueEntry>& before,
                        const std::vector<me::QueueEntry>& after);
  // I10 for a fair locker's claim of a plain lock (the queue is beside the lock).
  void lock_fifo_check(const std::string& key, const std::string& uuid, const WriteRec& w);
  void fifo_check(const std::string& key, const std::string& gk, const std::string& uuid,
                  const std::vector<me::QueueEntry>& before,
                  const std::vector<me::QueueEntry>& after, const WriteRec& w);
  // I10b: a read of the semaphore document as the server answered it (kept per thread),
  // and the check of a queue entry's renewal against the same thread's read before it.
  void note_sem_read(const CallCtx& c, const std::string& coll, const std::string& key,
                     const std::optional<me::SemaphoreDoc>& d);
  void turn_check(const CallCtx& c, const std::string& coll, const std::string& key,
                  const std::string& uuid, std::int64_t ticket);
  // Crashes: the uuids of the processes that crashed, with the server's
  // true time of the crash. From then on a call that names such a uuid is never sent
  // (refused(): its renewals through the node's renewer included), its callbacks do not
  // run; calls sent before still land (I11 bounds what they may do).
  void kill_process(const std::string& uuid);
  // A fair locker's uuid, whose claims of a plain lock I10 checks (one per process).
  void add_fair_locker(const std::string& uuid);
  bool refused(const std::string& uuid);
  bool is_fair_locker(const std::string& uuid);
  std::atomic<std::uint64_t> calls{0};

 private:
  friend class Actors;
  using EventKey = std::tuple<std::int64_t, std::int64_t, int, std::uint64_t>;

  void setup();
  void teardown();
  void spawn(Node& n, const std::string& label, std::function<void()> body);
  std::uint64_t add_believer(Believer b);
  void remove_believer(std::uint64_t id);
  void violate(const std::string& inv, const std::string& key, const std::string& what,
               std::vector<std::string> tags = {});
  bool paused(int node, std::int64_t t) const;
  bool excused() const;
  std::int64_t step_slack()
      const;  // sum of the server clock's steps so far (inside the assumption)
  void check();
  void check_priorities(std::int64_t now);  // I8, at the end of a schedule with priorities
  void check_partitions(std::int64_t now);  // I9b, at the end of a schedule with partitioners
  bool step();
  std::exception_ptr step_error_;  // of a step run by a sim thread
  void ttl_sweep();
  std::vector<std::string> diagnose(const Believer& b, const BeliefState& s);
  void token_check(const Believer& b, const BeliefState& s);
  // Tokens of an exclusive hold (a lock, a leader, a read-write lock's writer) believed
  // in the order their holds began at the server; `tokens_key` names the sequence.
  void exclusive_token_check(const Believer& b, const BeliefState& s,
                             const std::string& tokens_key);
  void on_claim_applied(const std::string& coll, const std::string& key, const std::string& uuid,
                        std::int64_t t);
  // Workload.
  void elector_actor(Node& n, const std::string& key, int idx);
  void locker_actor(Node& n, int idx);
  void lease_actor(Node& n);
  void semaphore_actor(Node& n);
  void rwlock_actor(Node& n);
  void partitioner_actor(Node& n);
  void probe_rwlock(Node& n);
  void prober(Node& n);
  void wait_quiet(NodeClock& c, const bool& in_callback);
  me::KeepAliveOptions lease_options(Rng& r, NodeClock& c, int node, const std::string& key,
                                     const std::string& what, bool& in_callback,
                                     const std::string& uuid = "");
  // An actor's lease (`what`: "semaphore lease", "rwlock lease"): `acquire` takes it on
  // ls.holder (set by the caller, named ls.uuid) with the drawn options; its belief is of
  // `kind`. Errors propagate (ls.holder reset).
  void open_lease(
      ActorLease& ls, Rng& r, Node& n, Kind kind, const char* coll, const std::string& key,
      const std::string& label, const std::string& what,
      const std::function<std::unique_ptr<me::KeepAliveLease>(me::KeepAliveOptions)>& acquire);
  void close_lease(ActorLease& ls, Node& n, const std::string& key, const std::string& label,
                   const std::string& what);
  // The end of a slot actor: its lease closed, its plain hold (of `plain`) released.
  void stop_slot_actor(ActorLease& ls, PlainHold& st, me::Holdable& plain, Node& n,
                       const std::string& key, const std::string& label, const std::string& what);
  // A plain hold's instance (a Semaphore or an RwLock) and its belief, registered under
  // its uuid. After a crash (fair schedules) the actor goes on as a new process: a new
  // instance with a new uuid (gen).
  template <class H>
  struct PlainInstance {
    using Make = std::function<std::shared_ptr<H>(const std::string& uuid)>;
    PlainInstance(Kind k, const char* c, std::string key_, std::string label_, std::string what_,
                  Make make_)
        : kind(k),
          coll(c),
          key(std::move(key_)),
          label(std::move(label_)),
          what(std::move(what_)),
          make(std::move(make_)) {}
    Kind kind;
    const char* coll;
    std::string key, label, what;  // what: the uuid's stem
    Make make;
    std::shared_ptr<H> h;
    std::string uuid;
    std::uint64_t bid = 0;
    int gen = 0;
  };
  template <class H>
  void open_plain(PlainInstance<H>& pi, PlainHold& st, Node& n);
  // Fair schedules: the instance's process crashed, holding or waiting in the queue
  // (SimThread::crashed: its calls were never sent, so it neither released nor left the
  // queue; its slot and its entry expire within a ttl). The actor goes on as a new one.
  template <class H>
  void restart_plain(PlainInstance<H>& pi, PlainHold& st, Node& n);
  // Fair schedules, now and then (from `fr`): the cancel of a blocking acquire that, at
  // an instant within `within_ms`, crashes the calling thread's process instead (a waiter
  // that dies in the queue; if the acquire ended first, nothing happens).
  std::function<bool()> crashing_cancel(Rng& fr, std::int64_t within_ms,
                                        std::function<bool()> cancel);
  // The cancel of a blocking acquire that crashes the calling thread's process at `at`.
  std::function<bool()> crash_at(std::int64_t at, std::function<bool()> cancel);
  static bool crashed();  // the calling thread's process crashed
  // The crash of the actor's process kills its keep-alive lease too (a kill -9 stops the
  // renewer's thread with the rest): its uuid is refused from now on, its belief ends, and
  // the lease is set aside (ls.dead) so that the actor can go on as a new process. With
  // break_crash, nothing (the lease survives the crash: proof mode of I11).
  void crash_lease(ActorLease& ls, Node& n, const std::string& key, const std::string& label);
  void bury_leases(ActorLease& ls, Node& n, const std::string& key, const std::string& label);
  // A plain hold's touch, release, or (now and then) neither: it lapses at its deadline.
  template <class Holder>
  void touch_or_release(Holder& holder, PlainHold& st, Rng& r, int node, const std::string& key,
                        const std::string& label, double p_release);
  void note_window(const std::string& key, std::int64_t start, std::int64_t window,
                   const std::string& uuid, int node);
  struct MinHold {
    std::string key, uuid;
    std::int64_t acq = 0, min_hold = 0, registered = 0, registered_mono = 0;
    bool confirmed = false;
    std::uint64_t id = 0;
  };
  // Why a minimum hold ended before acquire + min_hold (history of the lock document).
  std::vector<std::string> min_hold_tags(const MinHold& m, std::int64_t claim_server_t);
  void min_hold_violated(const MinHold& m, const std::string& claimant,
                         std::int64_t claim_server_t);
  // The latest a minimum hold of `m` ms may keep its lock taken, for the prober (I6): the
  // library counts it from the latest the server's clock could read when the acquire
  // completed (its last reply, before `done`, the server's true time when the acquire
  // returned), which is at most `done` + twice the estimate's uncertainty (at most half a
  // round trip each): done + m + 2 * bound. Counting from the acquire's send instead
  // misses the acquire's round trips (claim, epoch, fence: several on a new document).
  std::int64_t min_hold_end_bound(std::int64_t done, std::int64_t m) const {
    return done + m + 2 * p_.bound;
  }
  std::uint64_t begin_min_hold(const std::string& key, const std::string& uuid, std::int64_t acq,
                               std::int64_t m);
  void end_min_hold(std::uint64_t id, bool kept);
  void busy_until(const std::string& key, std::int64_t server_t);
  std::string uuid_for(int node, const std::string& what);

  Params p_;
  RunOptions o_;
  Scheduler sched_;
  std::shared_ptr<me::MemoryStorage> mem_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::atomic<bool> stopping_{false};
  std::map<EventKey, std::function<void()>> events_;
  std::mutex mu_;  // believers, trace, records (sim threads run one at a time; the
                   // library's log sink may still be called from a teardown thread)
  std::vector<TraceEntry> trace_;
  std::map<std::uint64_t, Believer> believers_;
  std::uint64_t next_believer_ = 1;
  // The server's documents as check() last read them, by "coll/key": read again only
  // after the server applied something (server_gen_ moved).
  struct DocCache {
    std::uint64_t gen = 0;
    std::optional<me::LockDoc> lock;
    std::optional<me::SemaphoreDoc> sem;
  };
  std::map<std::string, DocCache> doc_cache_;
  std::uint64_t server_gen_ = 1;  // moves whenever the server may have changed a document
  // check()'s buffers, kept from step to step.
  struct CheckItem {
    const Believer* b;
    BeliefState s;
  };
  std::vector<std::pair<const std::string*, std::vector<CheckItem>>> groups_;
  std::vector<std::pair<const Believer*, BeliefState>> started_;
  struct TokenState {
    std::int64_t max = 0;
    std::string owner;
  };
  std::map<std::string, TokenState> tokens_;  // exclusive keys
  // When each (uuid, token) of a key was granted at the server (order of the writes that
  // gave a document that uuid and token): the order in which holds began.
  std::map<std::string, std::map<std::pair<std::string, std::int64_t>, std::uint64_t>> grants_;
  std::uint64_t grant_seq_ = 0;
  std::map<std::string, std::map<std::int64_t, std::string>> sem_tokens_;
  // The highest token a slot document of a read-write lock has granted (any slot).
  std::map<std::string, std::int64_t> rw_granted_;
  std::map<std::string, std::deque<WriteRec>> history_;  // "coll/key"
  std::map<std::pair<std::string, std::int64_t>, std::vector<std::string>> windows_won_;
  std::vector<MinHold> min_holds_;
  std::uint64_t next_min_hold_ = 1;
  struct Claim {
    std::int64_t t = 0, mono = 0;  // server time, fake mono time
    std::string uuid;
  };
  std::map<std::string, std::vector<Claim>> claims_;  // successful claims of lock keys
  std::map<std::string, std::int64_t> busy_until_;    // server time a key stays taken (min holds)
  std::vector<Violation> violations_;
  std::map<std::string, std::int64_t> last_leader_seen_;
  std::vector<std::thread> actor_threads_;
  std::map<std::string, std::vector<std::string>> elector_uuids_;  // key -> uuids
  std::vector<std::shared_ptr<void>> keep_;                        // objects kept until teardown
  std::uint64_t steps_ = 0;
  std::uint64_t queued_ = 0;        // queue entries written (enqueues that landed)
  std::uint64_t queue_claims_ = 0;  // claims by a waiter from its own queue entry
  struct SemRead {
    std::uint64_t seq = 0;
    std::int64_t send = 0, t = 0;  // fake mono send time, server time of the read
    std::string coll;              // the semaphore's or the read-write lock's
    me::SemaphoreDoc doc;
  };
  std::map<std::string, SemRead> sem_reads_;  // each thread's last read of s0 or rw0
  // Fair plain locks: the uuids of the fair lockers (configuration, set before the actors
  // start), each thread's reads of lock queue documents,
  // and the entries a late renewal revived (queue gk -> {uuid, ticket} -> server time).
  std::set<std::string> fair_lockers_;
  struct QueueRead {
    std::string key;
    std::int64_t t = 0;                 // server time
    std::vector<me::QueueEntry> queue;  // as the server answered (none: no document)
  };
  std::map<std::string, std::map<std::uint64_t, QueueRead>> queue_reads_;  // thread -> seq
  std::map<std::string, std::map<std::pair<std::string, std::int64_t>, std::int64_t>> revived_;
  std::uint64_t turn_checks_ = 0, rw_turn_checks_ = 0;
  std::map<std::string, std::int64_t> dead_;  // crashed process uuid -> server time of the crash
  std::uint64_t dead_checks_ = 0;             // writes of a crashed process's slot, by I11
  std::uint64_t crashes_ = 0, dead_leases_ = 0;
  // I11: a slot or queue entry of a crashed process never lasts past its crash + ttl.
  void dead_check(const CallCtx& c, const std::string& key, const std::string& gk,
                  const std::string& uuid, std::int64_t expire, const std::string& where);
  std::atomic<bool> probed_{false};
};

// The library's log sink for the world running in this process.
void install_log_sink(World* w);

}  // namespace sim
