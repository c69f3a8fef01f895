#include "world.h"

#include <algorithm>
#include <cinttypes>
#include <limits>
#include <sstream>

#include "exceptions.h"
#include "lease/lease.h"
#include "locker.h"
#include "log.h"
#include "partition/rendezvous.h"
#include "semaphore/semaphore.h"

namespace sim {

using namespace mongoelector;

namespace {
World* g_world = nullptr;
std::mutex g_world_mu;

std::string ms(std::int64_t v) { return std::to_string(v); }
}  // namespace

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Lock:
      return "lock";
    case Kind::Elector:
      return "leader";
    case Kind::Lease:
      return "lease";
    case Kind::Sem:
      return "slot";
    case Kind::SemLease:
      return "slot-lease";
    case Kind::Rw:
      return "rw-hold";
    case Kind::RwLease:
      return "rw-lease";
    case Kind::Partition:
      return "partition";
  }
  return "?";
}

// ---- schedule parameters ---------------------------------------------------------------

Params make_params(std::uint64_t seed, bool calm) {
  Rng r(hash64(seed, 0x5EED));
  Params p;
  p.seed = seed;
  p.nodes = static_cast<int>(r.range(3, 7));
  p.ttl = r.pick(std::vector<std::int64_t>{1000, 1500, 2000, 3000});
  p.bound = std::max<std::int64_t>(20, r.range(p.ttl / 20, p.ttl * 3 / 10));
  const std::int64_t T = p.ttl;
  p.harsh = r.unit();
  const double h = p.harsh;
  p.p_fail = h * 0.06 * r.unit();
  p.p_lost = h * 0.06 * r.unit();
  p.p_held = h * 0.12 * r.unit();
  p.p_slow = h * 0.15 * r.unit();
  p.p_asym = 0.8;
  p.hold_max = r.range(T / 4, 2 * T);
  p.F = r.range(3 * T, 5 * T);
  const auto window_in = [&](std::int64_t min_len, std::int64_t max_len, int node) {
    Window w;
    w.node = node;
    w.a = r.range(T / 4, p.F - T / 2);
    w.b = std::min(w.a + r.range(min_len, max_len), p.F - 1);
    return w;
  };
  for (auto n = r.range(0, h > 0.5 ? 2 : 1); n > 0; --n)
    p.freezes.push_back(window_in(T / 20, T * 6 / 5, -1));
  for (auto n = r.range(0, h > 0.3 ? 3 : 1); n > 0; --n)
    p.partitions.push_back(window_in(T / 20, T * 3 / 2, static_cast<int>(r.range(0, p.nodes - 1))));
  for (auto n = r.range(0, 2); n > 0; --n)
    p.pauses.push_back(window_in(T / 50, T, static_cast<int>(r.range(0, p.nodes - 1))));
  if (r.chance(0.3)) {
    const std::int64_t d = r.range(1, p.step_ok_ms) * (r.chance(0.5) ? 1 : -1);
    p.steps.emplace_back(r.range(T / 4, p.F - 1), d);
  }
  if (r.chance(0.03)) {  // outside the timing assumption: only fencing is checked after it
    const std::int64_t d = r.range(T / 5, 2 * T) * (r.chance(0.5) ? 1 : -1);
    const std::int64_t at = r.range(T / 4, p.F - 1);
    p.steps.emplace_back(at, d);
    p.beyond_at = at;
  }
  std::sort(p.steps.begin(), p.steps.end());
  if (r.chance(0.5)) {
    const std::int64_t every = r.range(T / 2, 3 * T);
    for (std::int64_t t = r.range(1, every); t < p.F + 6 * T; t += every) p.ttl_sweeps.push_back(t);
  }
  p.p_slow_cb = r.chance(0.6) ? 0.1 + 0.6 * r.unit() : 0;
  p.slow_cb_max = T;
  p.p_handover = r.chance(0.7) ? 0.05 + 0.3 * r.unit() : 0;
  p.p_restart = r.chance(0.3) ? 0.3 : 0;
  p.sem_limit = static_cast<int>(r.range(1, 3));
  p.lock_keys = r.chance(0.5) ? std::vector<std::string>{"k0", "k1"}
                              : std::vector<std::string>{"k0", "k1", "k2"};
  // One window length per key, as a user's schedule has (markers are named by the start only).
  for (const auto& k : p.lock_keys)
    p.window_of[k] = r.pick(std::vector<std::int64_t>{1500, 2000, 3000, 5000});
  p.roles.resize(static_cast<std::size_t>(p.nodes) + 1);
  int e0 = 0;
  for (int i = 0; i < p.nodes; ++i) {
    NodeRoles& nr = p.roles[static_cast<std::size_t>(i)];
    if (r.chance(0.6)) {
      nr.electors.push_back("e0");
      ++e0;
    }
    if (r.chance(0.25)) nr.electors.push_back("e1");
    nr.lockers = r.chance(0.6) ? static_cast<int>(r.range(1, 2)) : 0;
    nr.leases = r.chance(0.5);
    nr.semaphore = r.chance(0.4);
    nr.bad_sampler = r.chance(0.2 + 0.5 * h);
    nr.wall_offset = r.range(-100, 100);
  }
  for (int i = 0; e0 < 2 && i < p.nodes; ++i) {
    auto& el = p.roles[static_cast<std::size_t>(i)].electors;
    if (std::find(el.begin(), el.end(), "e0") == el.end()) {
      el.insert(el.begin(), "e0");
      ++e0;
    }
  }
  // A step of the server's clock delays expiries by up to its size for the nodes whose
  // clock sample predates it: the liveness bounds grow by as much.
  std::int64_t stepped = 0;
  for (const auto& st : p.steps) stepped += st.second < 0 ? -st.second : st.second;
  // Priority leaders: a hand-over by priority may follow the faults by a few ttl (a stale
  // member report ages out in 1.5 ttl, a hand-over to a dead member expires in one, then
  // the stability delay, at most one ttl): the leader is required later, and I8 checks at
  // the end that the highest priority leads.
  Rng pr(hash64(seed, 0x5EED, 0x9210));
  p.priorities = pr.chance(0.3);
  for (int i = 0; i < p.nodes; ++i) {
    p.roles[static_cast<std::size_t>(i)].priority = static_cast<double>(pr.range(0, 2));
    p.roles[static_cast<std::size_t>(i)].priority_stability = pr.range(0, T);
  }
  const std::int64_t priority_settle = p.priorities ? 5 * T : 0;
  p.P = p.F + T;
  p.L = p.F + 2 * T + p.slow_cb_max + 4 * p.bound + 500 + stepped + priority_settle;
  p.P2 = p.P + T + 2 * p.bound + 300 + stepped;
  p.E = std::max(p.P2 + 3 * p.bound + 200, p.L + T / 2);
  // Partitioners, from a stream of their own. After the faults the group settles within
  // a few polls (<= ttl/2 each): a member cut off reports again, the others revoke what
  // is now its own (one on_revoked that began before F may still sleep, up to a ttl),
  // it claims; a report written late (a held call) has expired one ttl after its send.
  // I9b is checked at the end, which comes later for these schedules.
  Rng pt(hash64(seed, 0x5EED, 0x9A47));
  p.partitioners = pt.chance(0.3);
  p.part_n = pt.range(2, 12);
  p.part_restart = pt.chance(0.6) ? 0.3 : 0;
  int part_members = 0;
  for (int i = 0; i < p.nodes; ++i) {
    NodeRoles& nr = p.roles[static_cast<std::size_t>(i)];
    nr.partitioner = p.partitioners && pt.chance(0.6);
    nr.part_poll = pt.range(std::max<std::int64_t>(T / 8, 50), T / 2);
    part_members += nr.partitioner ? 1 : 0;
  }
  for (int i = 0; p.partitioners && part_members < 2 && i < p.nodes; ++i) {
    NodeRoles& nr = p.roles[static_cast<std::size_t>(i)];
    if (!nr.partitioner) {
      nr.partitioner = true;
      ++part_members;
    }
  }
  if (p.partitioners)
    p.E = std::max(p.E, p.F + 3 * T + p.slow_cb_max + 6 * p.bound + 1000 + stepped + T / 2);
  if (calm) {
    p.p_fail = p.p_lost = p.p_held = p.p_slow = 0;
    p.freezes.clear();
    p.partitions.clear();
    p.pauses.clear();
    p.steps.clear();
    p.beyond_at = -1;
    p.ttl_sweeps.clear();
    p.p_slow_cb = 0;
    for (auto& nr : p.roles) nr.bad_sampler = false;
  }
  p.wall0 = 1700000000000 + r.range(0, 1000000000);
  // The read-write lock's workload, from a stream of its own: the draws above (and so
  // every schedule without a read-write lock actor) are the same as before it existed.
  Rng rw(hash64(seed, 0x5EED, 0x2A1));
  p.rw_readers = static_cast<int>(rw.range(1, 3));
  for (int i = 0; i < p.nodes; ++i) p.roles[static_cast<std::size_t>(i)].rwlock = rw.chance(0.4);
  // Fair holds, from a stream of their own. Queues form only with more contenders than
  // slots: at least three semaphore nodes (each holds up to two slots, a plain hold and a
  // lease) on a limit of at most 2, and at least three read-write lock nodes (one writer
  // at a time). A fifth of those nodes stay non-fair: a mixed fleet on the same key.
  Rng fq(hash64(seed, 0x5EED, 0xFA1F));
  p.fair = fq.chance(0.3);
  if (p.fair) {
    p.sem_limit = std::min(p.sem_limit, 2);
    const auto at_least = [&](bool NodeRoles::*role, int want) {
      int have = 0;
      for (int i = 0; i < p.nodes; ++i) have += p.roles[static_cast<std::size_t>(i)].*role ? 1 : 0;
      for (int i = static_cast<int>(fq.range(0, p.nodes - 1)), k = 0; have < want && k < p.nodes;
           ++k, i = (i + 1) % p.nodes) {
        bool& on = p.roles[static_cast<std::size_t>(i)].*role;
        if (!on) {
          on = true;
          ++have;
        }
      }
    };
    at_least(&NodeRoles::semaphore, 3);
    at_least(&NodeRoles::rwlock, 3);
    for (int i = 0; i < p.nodes; ++i) {
      NodeRoles& nr = p.roles[static_cast<std::size_t>(i)];
      nr.fair_sem = nr.semaphore && fq.chance(0.8);
      nr.fair_rw = nr.rwlock && fq.chance(0.8);
    }
  }
  // Fair plain locks, from a stream of their own (every draw above is unchanged): in half
  // of the fair schedules, 3 to 5 nodes run one more locker on the first lock key, fair
  // on most of them (the others, and that key's other lockers, are the mixed fleet).
  Rng fl(hash64(seed, 0x5EED, 0xFA3F));
  p.fair_locks = p.fair && fl.chance(0.5);
  if (p.fair_locks) {
    p.fair_lock_key = p.lock_keys[0];
    const int want = std::min(p.nodes, static_cast<int>(fl.range(3, 5)));
    for (int i = static_cast<int>(fl.range(0, p.nodes - 1)), k = 0; k < want;
         ++k, i = (i + 1) % p.nodes)
      p.roles[static_cast<std::size_t>(i)].fair_lock =
          fl.chance(0.8) ? NodeRoles::kFairLocker : NodeRoles::kUnfairLocker;
  }
  return p;
}

std::string Params::describe() const {
  std::ostringstream o;
  o << "seed " << seed << ": " << nodes << " nodes, ttl " << ttl << " ms, call bound " << bound
    << " ms, faults until " << F << ", actors stop at " << P << ", probe at " << P2
    << ", leader required from " << L << ", end " << E << "\n";
  o << "  per call before " << F << ": fail " << p_fail << ", lost reply " << p_lost << ", held "
    << p_held << " (up to " << hold_max << " ms past the bound), slow " << p_slow << "\n";
  for (const auto& w : freezes) o << "  server frozen [" << w.a << ", " << w.b << ")\n";
  for (const auto& w : partitions)
    o << "  n" << w.node << " partitioned [" << w.a << ", " << w.b << ")\n";
  for (const auto& w : pauses) o << "  n" << w.node << " paused [" << w.a << ", " << w.b << ")\n";
  for (const auto& s : steps)
    o << "  server clock steps by " << s.second << " ms at " << s.first << "\n";
  if (!ttl_sweeps.empty())
    o << "  TTL monitor deletes expired lock documents every "
      << (ttl_sweeps.size() > 1 ? ttl_sweeps[1] - ttl_sweeps[0] : 0) << " ms from " << ttl_sweeps[0]
      << "\n";
  o << "  slow loss callbacks " << p_slow_cb << " (up to " << slow_cb_max
    << " ms), resign/transfer " << p_handover << " per leader loop, elector restarts " << p_restart
    << ", semaphore limit " << sem_limit << ", read-write lock max_readers " << rw_readers << "\n";
  if (partitioners)
    o << "  partitioned group " << kPartGroup << ": " << part_n << " partitions, restarts "
      << part_restart << "\n";
  for (int i = 0; i < nodes; ++i) {
    const auto& nr = roles[static_cast<std::size_t>(i)];
    o << "  n" << i << ":";
    for (const auto& e : nr.electors) o << " elector(" << e << ")";
    if (nr.lockers) o << " lockers(" << nr.lockers << ")";
    if (nr.leases) o << " leases";
    if (nr.semaphore) o << " semaphore" << (nr.fair_sem ? "(fair)" : "");
    if (nr.rwlock) o << " rwlock" << (nr.fair_rw ? "(fair)" : "");
    if (nr.fair_lock)
      o << " locker" << kFairLockerIdx << "(" << fair_lock_key
        << (nr.fair_lock == NodeRoles::kFairLocker ? ", fair)" : ")");
    if (nr.bad_sampler) o << " [lopsided clock samples]";
    if (priorities)
      o << " priority " << nr.priority << " (stability " << nr.priority_stability << " ms)";
    if (nr.partitioner) o << " partitioner(" << kPartGroup << ", poll " << nr.part_poll << " ms)";
    o << " wall" << (nr.wall_offset >= 0 ? "+" : "") << nr.wall_offset << "\n";
  }
  return o.str();
}

// ---- world --------------------------------------------------------------------------------

World::World(const Params& p, const RunOptions& o)
    : p_(p), o_(o), sched_(p.seed, p.wall0, o.shuffle, o.stall_ms) {
  trace_.reserve(1 << 14);
  mem_ = std::make_shared<MemoryStorage>();
  mem_->set_server_time_source([this] { return sched_.wall(); });
  mem_->set_call_bound_ms(p.bound);
  sched_.paused = [this](int node) { return paused(node, sched_.mono()); };
}

World::~World() {
  std::lock_guard<std::mutex> g(g_world_mu);
  if (g_world == this) g_world = nullptr;
}

void install_log_sink(World* w) {
  {
    std::lock_guard<std::mutex> g(g_world_mu);
    g_world = w;
  }
  set_log_sink(
      [](const LogRecord& rec) {
        std::lock_guard<std::mutex> g(g_world_mu);
        if (!g_world) return;
        SimThread* t = Scheduler::self();
        g_world->trace(t ? t->node : -1, rec.fields.key,
                       "[" + Scheduler::self_label() + " log] " + rec.message);
      },
      LogLevel::Info);
}

void World::trace(int node, const std::string& key, std::string text) {
  if (stopping_.load()) return;  // teardown: errors of the stopping network are noise
  std::lock_guard<std::mutex> g(mu_);
  trace_.push_back(TraceEntry{sched_.mono(), node, key, std::move(text)});
}

bool World::paused(int node, std::int64_t t) const {
  for (const auto& w : p_.pauses)
    if (w.node == node && t >= w.a && t < w.b) return true;
  return false;
}

bool World::excused() const { return p_.beyond_at >= 0 && sched_.mono() >= p_.beyond_at; }

std::int64_t World::server_time_at(std::int64_t mono) const {
  std::int64_t t = p_.wall0 + mono;
  for (const auto& s : p_.steps)
    if (s.first <= mono) t += s.second;
  return t;
}

std::int64_t World::step_slack() const {
  std::int64_t slack = 0;
  for (const auto& st : p_.steps)
    if (st.first <= sched_.mono()) slack += st.second < 0 ? -st.second : st.second;
  return slack;
}

std::string World::uuid_for(int node, const std::string& what) {
  return "n" + std::to_string(node) + "-" + what;
}

std::uint64_t World::add_believer(Believer b) {
  std::lock_guard<std::mutex> g(mu_);
  b.id = next_believer_++;
  b.gk = b.coll + "/" + b.key;
  const std::uint64_t id = b.id;
  believers_.emplace(id, std::move(b));
  return id;
}

void World::remove_believer(std::uint64_t id) {
  std::lock_guard<std::mutex> g(mu_);
  believers_.erase(id);
}

void World::violate(const std::string& inv, const std::string& key, const std::string& what,
                    std::vector<std::string> tags) {
  if (inv != "I3" && inv != "I6" && excused()) {
    trace(-1, key,
          "(not a violation: the server's clock stepped outside the timing assumption) " + inv +
              ": " + what);
    return;
  }
  {
    // With --all-violations a broken state shows at every step: report each invariant
    // once per key.
    std::lock_guard<std::mutex> g(mu_);
    for (const Violation& v : violations_)
      if (v.inv == inv && v.key == key) return;
  }
  Violation v{inv, sched_.mono(), key, what, std::move(tags)};
  std::string line = "VIOLATION " + inv + ": " + what;
  for (const auto& t : v.tags) line += "\n    diagnosis: " + t;
  trace(-1, key, line);
  std::lock_guard<std::mutex> g(mu_);
  violations_.push_back(std::move(v));
}

void World::spawn(Node& n, const std::string& label, std::function<void()> body) {
  sched_.set_spawn_label(n.id, label);
  std::thread t = start_clock_thread(*n.clock, [this, label, body = std::move(body), node = n.id] {
    try {
      body();
    } catch (const std::exception& ex) {
      trace(node, "", label + " died: " + ex.what());
    }
  });
  sched_.await_registered();
  std::lock_guard<std::mutex> g(mu_);
  actor_threads_.push_back(std::move(t));
}

// ---- server-side records ---------------------------------------------------------------

LockSnap World::snap_lock(const std::string& coll, const std::string& key) {
  LockSnap s;
  const std::optional<LockDoc> d = mem_->read(coll, key);
  if (!d) return s;
  s.exists = true;
  s.locked = d->locked;
  s.uuid = d->uuid;
  s.fence = d->fence;
  s.expire = d->ts_expire ? d->ts_expire->ms : 0;
  return s;
}

WriteRec World::write_rec(const CallCtx& c, const char* op, const std::string& uuid_before,
                          const std::string& uuid_after, std::int64_t fence_before,
                          std::int64_t fence_after, std::int64_t expire_before,
                          std::int64_t expire_after) {
  WriteRec w;
  w.t = sched_.mono();
  w.node = c.node;
  w.seq = c.seq;
  w.op = op;
  w.send = c.send;
  w.who = c.who;
  w.uuid_before = uuid_before;
  w.uuid_after = uuid_after;
  w.fence_before = fence_before;
  w.fence_after = fence_after;
  w.expire_before = expire_before;
  w.expire_after = expire_after;
  w.late = !c.fate.success && w.t >= c.fate.return_at;  // its caller had already given up
  w.unacked = !c.fate.success && w.t < c.fate.return_at;
  return w;
}

void World::note_lock_write(const CallCtx& c, const char* op, const std::string& coll,
                            const std::string& key, const LockSnap& before, const LockSnap& after,
                            const std::string& from_uuid) {
  if (before == after) return;
  WriteRec w = write_rec(c, op, before.uuid, after.uuid, before.fence, after.fence, before.expire,
                         after.expire);
  w.from_uuid = from_uuid;
  {
    Str o;
    o << "doc " << coll << "/" << key << ": uuid " << (before.uuid.empty() ? "-" : before.uuid)
      << "->" << (after.uuid.empty() ? "-" : after.uuid) << " fence " << before.fence << "->"
      << after.fence << " locked " << before.locked << "->" << after.locked << " ts_expire "
      << before.expire << "->" << after.expire << " (server now " << sched_.wall() << ")";
    if (after.expire < before.expire && after.locked && before.locked &&
        after.uuid == before.uuid && std::string(op).rfind("renew", 0) == 0)
      o << "  EXPIRY MOVED EARLIER";
    trace(-1, key, std::move(o.s));
  }
  const bool claimed = std::string(op) == "claim" && after.exists &&
                       (after.uuid != before.uuid || after.fence != before.fence);
  {
    std::lock_guard<std::mutex> g(mu_);
    auto& h = history_[coll + "/" + key];
    h.push_back(w);
    if (h.size() > 48) h.pop_front();
    if (after.exists && after.fence >= kEpochUnit &&
        (after.uuid != before.uuid || after.fence != before.fence))
      grants_[coll + "/" + key].emplace(std::make_pair(after.uuid, after.fence), ++grant_seq_);
  }
  if (claimed) on_claim_applied(coll, key, after.uuid, sched_.wall());
  if (claimed && coll == kLockColl && is_fair_locker(after.uuid))
    lock_fifo_check(key, after.uuid, w);
  // I11 for a lock (a plain locker's, an elector's, a partition's, a keep-alive lease's): a write by a crashed
  // process's own call (a claim, a renewal, a fence) that sets its hold's expiry. Not a
  // minimum hold's set_expiry (that bound is the minimum hold's, I5), nor a hand-over to it
  // (sent by the live leader: a hand-over to a dead member expires in a ttl of its send).
  // Nor a window marker (Locker::claim_window): it records that the window was won, is
  // never released, and expires at the window's end by design, crash or not.
  const std::string o(op);
  if (!dead_.empty() && after.exists && after.locked && !after.uuid.empty() &&
      key.find("@window:") == std::string::npos &&
      (after.expire != before.expire || after.uuid != before.uuid) && o != "set_expiry" &&
      o != "hand_over" && o != "ttl-delete" && o != "release")
    dead_check(c, key, coll + "/" + key, after.uuid, after.expire, "lock");
}

void World::note_sem_write(const CallCtx& c, const char* op, const std::string& coll,
                           const std::string& key, const std::optional<SemaphoreDoc>& before,
                           const std::optional<SemaphoreDoc>& after) {
  if (!after) return;
  const std::string gk = coll + "/" + key;
  const bool rw = coll == kRwColl;
  const std::vector<QueueEntry> no_queue;
  const std::vector<QueueEntry>& qb = before ? before->queue : no_queue;
  note_queue_write(c, key, gk, qb, after->queue);
  for (std::size_t i = 0; i < after->slots.size(); ++i) {
    SemaphoreSlot b;
    if (before && i < before->slots.size()) b = before->slots[i];
    const SemaphoreSlot& a = after->slots[i];
    const std::int64_t be = b.ts_expire ? b.ts_expire->ms : 0,
                       ae = a.ts_expire ? a.ts_expire->ms : 0;
    if (b.uuid == a.uuid && b.fence == a.fence && be == ae) continue;
    const WriteRec w = write_rec(c, op, b.uuid, a.uuid, b.fence, a.fence, be, ae);
    Str o;
    o << "doc " << gk << " slot " << i << ": uuid " << (b.uuid.empty() ? "-" : b.uuid) << "->"
      << (a.uuid.empty() ? "-" : a.uuid) << " fence " << b.fence << "->" << a.fence << " ts_expire "
      << be << "->" << ae << " (server now " << sched_.wall() << ")";
    if (ae < be && a.uuid == b.uuid && std::string(op).rfind("renew_semaphore", 0) == 0)
      o << "  EXPIRY MOVED EARLIER";
    if (a.uuid == b.uuid && a.fence == b.fence && be <= sched_.wall() && ae > sched_.wall())
      o << "  REVIVED AN EXPIRED SLOT";
    const bool granted = !a.uuid.empty() && (a.uuid != b.uuid || a.fence != b.fence);
    if (granted) o << "  (grant)";
    trace(-1, key, std::move(o.s));
    std::int64_t below = 0;  // a grant at or below an earlier token of the document
    {
      std::lock_guard<std::mutex> g(mu_);
      auto& h = history_[gk];
      h.push_back(w);
      if (h.size() > 48) h.pop_front();
      if (granted && rw) {
        grants_[gk].emplace(std::make_pair(a.uuid, a.fence), ++grant_seq_);
        std::int64_t& top = rw_granted_[gk];
        if (a.fence <= top) below = top;
        top = std::max(top, a.fence);
      }
    }
    // Invariant 2 at the server: every claim of a read-write lock's document (a reader's,
    // the writer's, a mark) takes a token above every token granted before it.
    if (below)
      violate("I3", key,
              "slot " + ms(static_cast<std::int64_t>(i)) + " of " + gk + " granted to " + a.uuid +
                  " with token " + ms(a.fence) + ", not above token " + ms(below) +
                  " granted before it");
    // I10 for every claim of a semaphore slot and of a read-write lock's writer slot
    // (readers without writer preference do not wait for queued writers, by design).
    if (granted && coll != kLockQueueColl && (!rw || static_cast<std::int64_t>(i) == after->limit))
      fifo_check(key, gk, a.uuid, qb, after->queue, w);
  }
  // I11: every slot and entry of a crashed process the document shows after the write
  // (those the write set, and those set before the crash, which it must bound as well).
  if (!dead_.empty()) {
    for (std::size_t i = 0; i < after->slots.size(); ++i) {
      const SemaphoreSlot& a = after->slots[i];
      if (!a.uuid.empty() && a.ts_expire)
        dead_check(c, key, gk, a.uuid, a.ts_expire->ms, "slot " + ms(static_cast<std::int64_t>(i)));
    }
    for (const QueueEntry& e : after->queue)
      dead_check(c, key, gk, e.uuid, e.expire_ms, "queue entry " + ms(e.ticket));
  }
}

void World::kill_process(const std::string& uuid) {
  std::lock_guard<std::mutex> g(mu_);
  dead_.emplace(uuid, sched_.wall());
}

void World::add_fair_locker(const std::string& uuid) {
  std::lock_guard<std::mutex> g(mu_);
  fair_lockers_.insert(uuid);
}

bool World::is_fair_locker(const std::string& uuid) {
  std::lock_guard<std::mutex> g(mu_);
  return fair_lockers_.count(uuid) > 0;
}

bool World::refused(const std::string& uuid) {
  if (o_.break_crash) return false;
  std::lock_guard<std::mutex> g(mu_);
  return dead_.count(uuid) > 0;
}

// I11 (a crash ends every hold of the process within a ttl): the expiry of a slot, a
// queue entry or a lock of a process that crashed at server time c (a kill -9: its threads, its
// renewer's included, send nothing more) was set by a call sent before the crash, which
// computed it from its estimate of the server's time then: at most c + ttl, plus M = the
// call bound and the clock's steps so far (the estimate's error), wherever the call
// landed. Checked after every write of the document; a later expiry means the process
// was still renewing.
void World::dead_check(const CallCtx& c, const std::string& key, const std::string& gk,
                       const std::string& uuid, std::int64_t expire, const std::string& where) {
  std::int64_t crash = 0;
  {
    std::lock_guard<std::mutex> g(mu_);
    const auto it = dead_.find(uuid);
    if (it == dead_.end()) return;
    crash = it->second;
    ++dead_checks_;
  }
  const std::int64_t bound = crash + p_.ttl + p_.bound + step_slack();
  if (expire <= bound) return;
  violate("I11", key,
          "the " + where + " of " + gk + " held by " + uuid + ", whose process crashed at server " +
              "time " + ms(crash) + ", has ts_expire " + ms(expire) + " after the write n" +
              ms(c.node) + "#" + std::to_string(c.seq) + " (sent at " + ms(c.send) + " by " +
              c.who + ") at server time " + ms(sched_.wall()) + ": past crash + ttl + " +
              ms(p_.bound + step_slack()) + " ms = " + ms(bound),
          {"the crashed process still renewed (dead-renewed)"});
}

namespace {
bool same_entry(const QueueEntry& a, const QueueEntry& b) {
  return a.is(b.uuid, b.ticket) && a.expire_ms == b.expire_ms;
}
bool has_entry(const std::vector<QueueEntry>& q, const QueueEntry& e) {
  return std::any_of(q.begin(), q.end(),
                     [&](const QueueEntry& x) { return x.is(e.uuid, e.ticket); });
}
}  // namespace

void World::note_queue_write(const CallCtx& c, const std::string& key, const std::string& gk,
                             const std::vector<QueueEntry>& before,
                             const std::vector<QueueEntry>& after) {
  if (std::equal(before.begin(), before.end(), after.begin(), after.end(), same_entry)) return;
  for (const QueueEntry& e : after)
    if (!has_entry(before, e)) ++queued_;
  // A late renewal that revived an entry expired at the server (core/lock_queue.h, "Late
  // operations"): remembered for I10 of fair locks.
  const std::int64_t now = sched_.wall();
  for (const QueueEntry& b : before)
    for (const QueueEntry& a : after)
      if (a.is(b.uuid, b.ticket) && !b.live_at(now) && a.live_at(now))
        revived_[gk][{a.uuid, a.ticket}] = now;
  trace(-1, key,
        "doc " + gk + " queue: " + fmt_queue(before) + " -> " + fmt_queue(after) + " (server now " +
            ms(sched_.wall()) + ", n" + ms(c.node) + "#" + std::to_string(c.seq) + ")");
}

void World::note_sem_read(const CallCtx& c, const std::string& coll, const std::string& key,
                          const std::optional<SemaphoreDoc>& d) {
  if (coll == kLockQueueColl)
    queue_reads_[c.who][c.seq] = {key, sched_.wall(), d ? d->queue : std::vector<QueueEntry>{}};
  if ((coll != kSemColl && coll != kRwColl) || !d) return;
  sem_reads_[c.who] = SemRead{c.seq, c.send, sched_.wall(), coll, *d};
}

// I10b (the head's turn is never lost), for s0 and rw0, once the faults are over: a
// fair waiter renews its entry only after a fresh read refused it (SlotHolder: read,
// choose, gate, then wait_in_queue). So a renewal whose thread's call just before it
// was a read that showed, at the server's time t of the read, its entry with every entry
// before it expired and a slot free -- both by more than M = the call bound plus the
// clock's steps so far, which covers the claimant's estimate error (its earliest server
// time is at most a round trip's uncertainty behind, a round trip being at most a bound)
// -- is a head that saw its turn and did not claim. A waiter that keeps its entry alive
// renews it at least every ttl/3: with a slot free whenever it looks as the head, it is
// then granted at that look. Derived from the documents the server answered and the
// order of the thread's calls, not from what the waiter believes. For rw0 the turn is the
// fair writer's rule (RwLock's Rule::choose): the writer slot and every reader slot free.
void World::turn_check(const CallCtx& c, const std::string& coll, const std::string& key,
                       const std::string& uuid, std::int64_t ticket) {
  if ((coll != kSemColl && coll != kRwColl) || c.send < p_.F) return;
  const auto it = sem_reads_.find(c.who);
  if (it == sem_reads_.end() || it->second.seq != c.prev_seq || it->second.send < p_.F ||
      it->second.coll != coll)
    return;
  ++turn_checks_;
  if (coll == kRwColl) ++rw_turn_checks_;
  const SemRead& rd = it->second;
  const std::int64_t by = rd.t - p_.bound - step_slack();
  const auto own = std::find_if(rd.doc.queue.begin(), rd.doc.queue.end(),
                                [&](const QueueEntry& e) { return e.is(uuid, ticket); });
  if (own == rd.doc.queue.end()) return;
  if (std::any_of(rd.doc.queue.begin(), own, [&](const QueueEntry& e) { return e.live_at(by); }))
    return;
  std::string turn;
  if (coll == kSemColl) {
    const auto free = std::find_if(rd.doc.slots.begin(), rd.doc.slots.end(),
                                   [&](const SemaphoreSlot& s) { return !s.held_at(by); });
    if (free == rd.doc.slots.end()) return;
    turn = "slot " + ms(static_cast<std::int64_t>(free - rd.doc.slots.begin())) + " free";
  } else {
    // The read-write lock's queue holds fair blocking writers only (readers never enqueue),
    // and a writer's rule grants when neither the writer slot nor any reader slot is held
    // (the waiting mark does not stop a writer; a fair writer writes none).
    const std::size_t writer = static_cast<std::size_t>(rd.doc.limit);
    if (writer >= rd.doc.slots.size()) return;
    for (std::size_t i = 0; i <= writer; ++i)
      if (rd.doc.slots[i].held_at(by)) return;
    turn = "the writer slot and every reader slot free";
  }
  violate("I10b", key,
          uuid + " (" + c.who + ") renewed its queue entry " + ms(ticket) + " (n" + ms(c.node) +
              "#" + std::to_string(c.seq) + ") instead of claiming: its read #" +
              std::to_string(rd.seq) + " at server time " + ms(rd.t) +
              " showed it at the head of the live queue " + fmt_queue(rd.doc.queue) + " and " +
              turn + " (by " + ms(p_.bound + step_slack()) + " ms)",
          {"the head saw its turn and waited (turn-lost)"});
}

// I10 for the claim of a plain lock by a fair locker (uuid known at its creation). The
// queue is beside the lock (core/lock_queue.h) and the claim may land long after its
// look: the entries ahead of the claimant are those ahead of its place in the queue
// document as its look read it (the thread's last read of it before the claim was
// sent; the place is its last entry there -- its current one -- and without one, it
// stands behind every entry). Entries appended later stand behind it, and one that left
// or was removed since is passed by nobody. When the claim lands, every entry ahead
// still in the queue document must be expired at the server's true time (less the
// clock's steps): entries are only appended and an entry's expiry only moves later, so
// one expired at the look is still expired -- except one that a late renewal revived
// (lock_queue.h, "Late operations"): it does not count when the revival came after the
// look (that claim looked while the entry was expired).
void World::lock_fifo_check(const std::string& key, const std::string& uuid, const WriteRec& w) {
  const auto& reads = queue_reads_[w.who];
  const QueueRead* rd = nullptr;
  for (auto it = reads.lower_bound(w.seq); it != reads.begin() && !rd;)
    if ((--it)->second.key == key) rd = &it->second;
  if (!rd) return;  // not a fair claim of this key (none looked)
  const std::optional<SemaphoreDoc> d = mem_->read_semaphore(kLockQueueColl, key);
  if (!d) return;
  const std::vector<QueueEntry>& ahead = rd->queue;
  std::size_t place = ahead.size();
  for (std::size_t i = 0; i < ahead.size(); ++i)
    if (ahead[i].uuid == uuid) place = i;
  if (place < ahead.size()) ++queue_claims_;
  const auto& revived = revived_[std::string(kLockQueueColl) + "/" + key];
  const std::int64_t now = sched_.wall() + step_slack();
  for (std::size_t i = 0; i < place; ++i) {
    if (ahead[i].uuid == uuid) continue;
    const auto e = std::find_if(d->queue.begin(), d->queue.end(), [&](const QueueEntry& x) {
      return x.is(ahead[i].uuid, ahead[i].ticket);
    });
    if (e == d->queue.end() || !e->live_at(now)) continue;
    const auto rv = revived.find({e->uuid, e->ticket});
    if (rv != revived.end() && rv->second > rd->t) continue;
    std::vector<std::string> tags{"the claimant's gate did not see it (claim-ignored-queue)"};
    if (w.late) tags.push_back("the claim landed after its caller gave up (late-claim)");
    violate("I10", key,
            "a fair claim of " + std::string(kLockColl) + "/" + key + " by " + uuid + " (n" +
                ms(w.node) + "#" + std::to_string(w.seq) + ", sent at " + ms(w.send) +
                ") at server time " + ms(sched_.wall()) + " passed the live queue entry " +
                e->uuid + "/" + ms(e->ticket) + " (ts_expire " + ms(e->expire_ms) +
                "), ahead of it in its look at server time " + ms(rd->t) + ": " + fmt_queue(ahead) +
                "; queue now " + fmt_queue(d->queue),
            std::move(tags));
    return;
  }
}

// I10 (FIFO): the write that just gave `uuid` a slot passed no live queue entry. Its
// place is the last entry of its own that the write removed (a claim removes the expired
// entries before its own, and its own); without one, it stands behind every entry. At
// the server's true time of the write (less the steps of its clock so far, which move
// every estimate by as much), every entry of another waiter before that place must be
// expired. Derived from the document before and after the write, not from the claim's
// request.
void World::fifo_check(const std::string& key, const std::string& gk, const std::string& uuid,
                       const std::vector<QueueEntry>& before, const std::vector<QueueEntry>& after,
                       const WriteRec& w) {
  std::size_t place = before.size();
  for (std::size_t i = 0; i < before.size(); ++i)
    if (before[i].uuid == uuid && !has_entry(after, before[i])) place = i;
  if (place < before.size()) ++queue_claims_;
  const std::int64_t now = sched_.wall() + step_slack();
  for (std::size_t i = 0; i < place; ++i) {
    const QueueEntry& e = before[i];
    if (e.uuid == uuid || !e.live_at(now)) continue;
    std::vector<std::string> tags;
    tags.push_back(has_entry(after, e)
                       ? "the write left that entry in the queue: the claimant's gate did not "
                         "see it (claim-ignored-queue)"
                       : "the write removed that entry as expired: the claimant's time was ahead "
                         "of the server's (passed-as-expired)");
    if (w.late) tags.push_back("the claim landed after its caller gave up (late-claim)");
    violate("I10", key,
            "a claim of " + gk + " by " + uuid + " (n" + ms(w.node) + "#" + std::to_string(w.seq) +
                ", sent at " + ms(w.send) + ") at server time " + ms(sched_.wall()) +
                " passed the live queue entry " + e.uuid + "/" + ms(e.ticket) + " (ts_expire " +
                ms(e.expire_ms) + "), " +
                (place < before.size()
                     ? "ahead of its own entry at " + ms(static_cast<std::int64_t>(place))
                     : std::string("the claimant having no entry")) +
                "; queue before " + fmt_queue(before),
            std::move(tags));
    return;
  }
}

void World::on_claim_applied(const std::string& coll, const std::string& key,
                             const std::string& uuid, std::int64_t t) {
  if (coll != kLockColl) return;
  std::vector<MinHold> hit;
  {
    std::lock_guard<std::mutex> g(mu_);
    claims_[key].push_back(Claim{t, sched_.mono(), uuid});
    // A step of the server's clock (inside the assumption) moves every estimate by as much.
    for (const MinHold& m : min_holds_)
      if (m.key == key && m.confirmed && t < m.acq + m.min_hold - step_slack()) hit.push_back(m);
  }
  for (const MinHold& m : hit) min_hold_violated(m, uuid, t);
}

std::uint64_t World::begin_min_hold(const std::string& key, const std::string& uuid,
                                    std::int64_t acq, std::int64_t m) {
  std::lock_guard<std::mutex> g(mu_);
  MinHold mh;
  mh.key = key;
  mh.uuid = uuid;
  mh.acq = acq;
  mh.min_hold = m;
  mh.registered = sched_.wall();
  mh.registered_mono = sched_.mono();
  mh.id = next_min_hold_++;
  min_holds_.push_back(mh);
  auto& b = busy_until_[key];
  b = std::max(b, acq + m);
  return mh.id;
}

void World::end_min_hold(std::uint64_t id, bool kept) {
  MinHold m;
  std::vector<std::pair<std::int64_t, std::string>> early;
  {
    std::lock_guard<std::mutex> g(mu_);
    auto it = std::find_if(min_holds_.begin(), min_holds_.end(),
                           [&](const MinHold& x) { return x.id == id; });
    if (it == min_holds_.end()) return;
    if (!kept) {
      min_holds_.erase(it);
      return;
    }
    it->confirmed = true;
    m = *it;
    for (const auto& c : claims_[m.key])
      if (c.mono >= m.registered_mono && c.t < m.acq + m.min_hold - step_slack())
        early.emplace_back(c.t, c.uuid);
  }
  for (const auto& c : early) min_hold_violated(m, c.second, c.first);
}

void World::min_hold_violated(const MinHold& m, const std::string& claimant, std::int64_t t) {
  violate("I5", m.key,
          "lock " + m.key + " released by " + m.uuid + " with min_hold " + ms(m.min_hold) +
              " ms (acquired at server time " + ms(m.acq) + ") was claimed by " + claimant +
              " at server time " + ms(t) + ", " + ms(m.acq + m.min_hold - t) +
              " ms before the minimum hold ended",
          min_hold_tags(m, t));
}

std::vector<std::string> World::min_hold_tags(const MinHold& m, std::int64_t claim_t) {
  std::vector<std::string> tags;
  std::deque<WriteRec> h;
  {
    std::lock_guard<std::mutex> g(mu_);
    h = history_[std::string(kLockColl) + "/" + m.key];
  }
  // The write that kept it taken: the holder's fenced set_expiry to acquire + min_hold.
  std::int64_t until = -1;
  bool first = true;
  for (const WriteRec& r : h) {
    if (r.t < m.registered_mono) continue;
    if (first && r.uuid_before == m.uuid) {
      first = false;
      if (r.op == "set_expiry") {
        until = r.expire_after;
        continue;
      }
      if (r.op == "claim" && r.uuid_after != m.uuid) {
        tags.push_back("the lock was claimed by " + r.uuid_after + " (n" + std::to_string(r.node) +
                       "#" + std::to_string(r.seq) + " applied at " + ms(r.t) +
                       ") before the holder's minimum-hold write landed, which then matched "
                       "nothing; yet the holder was told the lock was released "
                       "(min-hold/write-after-expiry)");
        break;
      }
      if (r.op == "release") {
        tags.push_back(
            "release_min_hold judged the minimum hold over and released at once (ts_created + "
            "min_hold <= its estimate of now at server time " +
            ms(claim_t) + "), " + "although acquire + min_hold is " + ms(m.acq + m.min_hold) +
            ": ts_created is the earliest estimate of the server's clock (hole 3)");
        break;
      }
    }
    if (until >= 0 && r.op.rfind("renew", 0) == 0 && r.uuid_after == m.uuid &&
        r.expire_after < r.expire_before && (r.late || r.unacked))
      tags.push_back("late renewal: n" + std::to_string(r.node) + "#" + std::to_string(r.seq) +
                     " " + r.op + " by " + r.who + " sent at " + ms(r.send) + ", applied at " +
                     ms(r.t) +
                     " after the minimum hold was "
                     "written, moved ts_expire EARLIER " +
                     ms(r.expire_before) + " -> " + ms(r.expire_after) + " (hole 1)");
    if (until >= 0 && r.op == "release" && r.uuid_before == m.uuid)
      tags.push_back(
          "the minimum hold was cut short by a release of its own owner " + m.uuid + " (n" +
          std::to_string(r.node) + "#" + std::to_string(r.seq) + " by " + r.who + " sent at " +
          ms(r.send) + ", applied at " + ms(r.t) +
          "): a later claim of that locker failed, and clearing the hold it stranded released "
          "the document that still carries its uuid (min-hold/stranded-claim)");
  }
  if (tags.empty() && until < 0 && !h.empty() && h.back().op == "claim" &&
      h.back().uuid_before == m.uuid)
    until =
        h.back().expire_before;  // its write changed nothing (ts_created + min_hold == ts_expire)
  if (tags.empty() && until >= 0 && claim_t + step_slack() >= until)
    tags.push_back(
        "the lock was written to stay taken until " + ms(until) + " (ts_created + min_hold), " +
        ms(m.acq + m.min_hold - until) +
        " ms before acquire + min_hold: ts_created is the earliest estimate of the server's clock "
        "(hole 3)");
  if (tags.empty() && until < 0) {
    for (const WriteRec& r : h)
      if (r.op == "set_fence" && r.uuid_after == m.uuid && r.fence_before < kEpochUnit &&
          (r.late || r.unacked)) {
        tags.push_back("release_min_hold's fenced write named the hold by its counter " +
                       ms(r.fence_before) +
                       ", but a token() whose set_fence had failed at the caller (n" +
                       std::to_string(r.node) + "#" + std::to_string(r.seq) + ", applied at " +
                       ms(r.t) + ") had moved it to " + ms(r.fence_after) +
                       ": nothing matched, the lock kept its old ts_expire and freed before "
                       "acquire + min_hold "
                       "(lazy-token-in-doubt)");
        break;
      }
  }
  if (tags.empty()) {
    // --all-violations: the hold may already have been lost to an earlier violation.
    std::lock_guard<std::mutex> g(mu_);
    for (const Violation& v : violations_)
      if (v.key == m.key && (v.inv == "I1" || v.inv == "I2")) {
        tags.push_back("the lock had already been lost (" + v.inv + " at " + ms(v.t) +
                       ") when release_min_hold was called (consequence)");
        break;
      }
  }
  if (tags.empty()) tags.push_back("min hold ended early (no known mechanism in the history)");
  return tags;
}

void World::busy_until(const std::string& key, std::int64_t server_t) {
  std::lock_guard<std::mutex> g(mu_);
  auto& b = busy_until_[key];
  b = std::max(b, server_t);
}

void World::note_window(const std::string& key, std::int64_t start, std::int64_t window,
                        const std::string& uuid, int node) {
  std::vector<std::string> winners;
  std::vector<std::string> tags;
  const std::string marker = key + "@window:" + std::to_string(start);
  {
    std::lock_guard<std::mutex> g(mu_);
    auto& w = windows_won_[{key, start}];
    // A step of the server's clock (inside the assumption) moves every estimate by as much:
    // a win that close to the window's end is not a second win of the same window.
    if (!w.empty() && sched_.wall() >= start + window - step_slack()) return;
    w.push_back(uuid + " (n" + std::to_string(node) + " at server time " + ms(sched_.wall()) + ")");
    winners = w;
    if (winners.size() > 1) {
      std::vector<std::string> early;
      for (const WriteRec& r : history_[std::string(kLockColl) + "/" + marker]) {
        if (r.op == "release")
          tags.push_back(
              "the window marker " + marker + " was released by " + r.uuid_before + " (n" +
              std::to_string(r.node) + "#" + std::to_string(r.seq) + " by " + r.who + " sent at " +
              ms(r.send) + ", applied at " + ms(r.t) +
              "): a failed claim of the marker stranded a hold that, cleared, released the marker "
              "its owner had already won (window/stranded-claim)");
        if (r.op != "claim") continue;
        if (r.expire_after < start + window)
          early.push_back("window marker of " + r.uuid_after + " was written to expire at " +
                          ms(r.expire_after) + ", " + ms(start + window - r.expire_after) +
                          " ms before its window ends at " + ms(start + window) + " (hole 3)");
      }
      // Released: that is what reopened the window, whatever its expiry said.
      if (tags.empty() && !early.empty()) tags.push_back(early.front());
    }
  }
  if (winners.size() > 1) {
    std::string who;
    for (const auto& s : winners) who += (who.empty() ? "" : ", ") + s;
    violate("I5", key,
            "window [" + ms(start) + ", " + ms(start + window) + ") of " + key + " won " +
                std::to_string(winners.size()) + " times: " + who,
            tags);
  }
}

// ---- invariants -------------------------------------------------------------------------

void World::token_check(const Believer& b, const BeliefState& s) {
  if (s.fence < kEpochUnit) return;  // a deferred token's counter (lazy_token): not a token yet
  const std::string gk = b.coll + "/" + b.key;
  const bool rw = b.kind == Kind::Rw || b.kind == Kind::RwLease;
  if (b.kind == Kind::Sem || b.kind == Kind::SemLease || rw) {
    std::string other;
    {
      std::lock_guard<std::mutex> g(mu_);
      auto& m = sem_tokens_[gk];
      auto it = m.find(s.fence);
      if (it == m.end())
        m.emplace(s.fence, b.uuid);
      else if (it->second != b.uuid)
        other = it->second;
    }
    if (!other.empty())
      violate("I3", b.key,
              "token " + ms(s.fence) + " of " + (rw ? "read-write lock " : "semaphore ") + b.key +
                  " believed by " + b.uuid + " was already believed by " + other);
    // A read-write lock's writes: in the order their holds began, as a lock's.
    if (rw && s.write && other.empty()) exclusive_token_check(b, s, gk + "#write");
    return;
  }
  exclusive_token_check(b, s, gk);
}

void World::exclusive_token_check(const Believer& b, const BeliefState& s,
                                  const std::string& tokens_key) {
  const std::string gk = b.coll + "/" + b.key;
  TokenState prev;
  {
    std::lock_guard<std::mutex> g(mu_);
    TokenState& ts = tokens_[tokens_key];
    if (s.fence > ts.max || (s.fence == ts.max && b.uuid == ts.owner)) {
      ts.max = s.fence;
      ts.owner = b.uuid;
      return;
    }
    // Invariant 2 orders tokens by when their holds BEGAN at the server, not by when a
    // belief started: a claim whose reply came late (past a clock step) may be believed
    // after a newer hold's token; a fenced resource refuses it, so it is no violation.
    const auto& granted = grants_[gk];
    const auto mine = granted.find({b.uuid, s.fence});
    const auto newest = granted.find({ts.owner, ts.max});
    if (s.fence < ts.max && mine != granted.end() && newest != granted.end() &&
        mine->second < newest->second)
      return;
    prev = ts;
  }
  std::vector<std::string> tags;
  {
    std::lock_guard<std::mutex> g(mu_);
    for (const WriteRec& r : history_[gk]) {
      if (r.op == "set_fence" && (r.late || r.unacked) && r.fence_after < prev.max)
        tags.push_back("late set_fence: n" + std::to_string(r.node) + "#" + std::to_string(r.seq) +
                       " by " + r.who + " sent at " + ms(r.send) + ", applied at " + ms(r.t) +
                       (r.late ? " after its caller gave up" : " with its reply lost") +
                       ", moved the fence of a "
                       "re-created document " +
                       ms(r.fence_before) + " -> " + ms(r.fence_after) + ", below token " +
                       ms(prev.max) +
                       " handed out before: {uuid, fence} of a document's own "
                       "counter does not name one incarnation of the document (late-set-fence)");
      if (r.op == "ttl-delete" ||
          (r.op == "release" && !r.uuid_after.empty() && r.fence_after == 0))
        tags.push_back("the document was deleted at " + ms(r.t) + " by " +
                       (r.op == "ttl-delete" ? "the TTL monitor" : "a release"));
    }
  }
  violate("I3", b.key,
          std::string(kind_name(b.kind)) + " " + b.key + " believed by " + b.uuid + " with token " +
              ms(s.fence) + " after token " + ms(prev.max) + " of " + prev.owner,
          tags);
}

std::vector<std::string> World::diagnose(const Believer& b, const BeliefState& s) {
  std::vector<std::string> tags;
  const std::int64_t now = sched_.mono();
  if ((b.kind == Kind::Lease || b.kind == Kind::SemLease || b.kind == Kind::RwLease) &&
      s.renew_deadline >= 0 && now >= s.renew_deadline)
    tags.push_back(
        std::string(kind_name(b.kind)) + " of " + b.uuid + " still not lost " +
        ms(now - s.renew_deadline) +
        " ms after its own renew deadline: the loss waits for the node's timer thread (hole 4)");
  std::deque<WriteRec> h;
  {
    std::lock_guard<std::mutex> g(mu_);
    h = history_[b.coll + "/" + b.key];
  }
  for (const WriteRec& r : h) {
    const bool renewal = r.op.rfind("renew", 0) == 0;
    if (renewal && r.uuid_after == b.uuid && r.uuid_before == b.uuid &&
        r.expire_after < r.expire_before && (r.late || r.unacked))
      tags.push_back("late renewal: n" + std::to_string(r.node) + "#" + std::to_string(r.seq) +
                     " " + r.op + " by " + r.who + " sent at " + ms(r.send) + ", applied at " +
                     ms(r.t) + (r.late ? " after its caller gave up" : " with its reply lost") +
                     ", moved ts_expire EARLIER " + ms(r.expire_before) + " -> " +
                     ms(r.expire_after) + " (hole 1)");
    if (renewal && r.uuid_after == b.uuid && r.uuid_before == b.uuid && r.fence_after == s.fence &&
        r.expire_before <= server_time_at(r.t) && r.expire_after > server_time_at(r.t) &&
        (b.kind == Kind::Rw || b.kind == Kind::RwLease))
      tags.push_back("late renewal: n" + std::to_string(r.node) + "#" + std::to_string(r.seq) +
                     " " + r.op + " by " + r.who + " sent at " + ms(r.send) + ", applied at " +
                     ms(r.t) + " revived the slot of " + b.uuid + " (fence " + ms(s.fence) +
                     "), expired at " + ms(r.expire_before) +
                     ": a claim of the other side left it as it was (rw-late-renewal)");
    if ((r.op == "release" || r.op == "release_semaphore") && r.uuid_before == b.uuid &&
        r.fence_before == s.fence && (r.late || r.unacked))
      tags.push_back(
          "late release: n" + std::to_string(r.node) + "#" + std::to_string(r.seq) + " " + r.op +
          " by " + r.who + " sent at " + ms(r.send) + ", applied at " + ms(r.t) +
          (r.late ? " after its caller gave up" : " with its reply lost") +
          ", freed a hold with the same uuid and fence " + ms(s.fence) +
          " that began after it was sent: a failed claim's name was used again (late-release)");
    if (r.op == "set_fence" && r.uuid_after == b.uuid && r.fence_before == s.fence &&
        s.fence < kEpochUnit && (r.late || r.unacked))
      tags.push_back("a token() whose set_fence failed at the caller (n" + std::to_string(r.node) +
                     "#" + std::to_string(r.seq) + " sent at " + ms(r.send) + ", applied at " +
                     ms(r.t) + ") moved the document to token " + ms(r.fence_after) +
                     " while the hold is still named by "
                     "its counter " +
                     ms(s.fence) +
                     ": its fenced writes (touch, release, release_min_hold) "
                     "no longer match (lazy-token-in-doubt)");
    if (r.op == "set_expiry" && r.uuid_before == b.uuid && r.fence_before == s.fence &&
        r.expire_after < r.expire_before && (r.late || r.unacked))
      tags.push_back(
          "late minimum-hold write: n" + std::to_string(r.node) + "#" + std::to_string(r.seq) +
          " set_expiry by " + r.who + " sent at " + ms(r.send) + ", applied at " + ms(r.t) +
          (r.late ? " after its caller gave up" : " with its reply lost") +
          ", moved ts_expire EARLIER " + ms(r.expire_before) + " -> " + ms(r.expire_after) +
          " on a hold with the same uuid and fence " + ms(s.fence) + " (late-set-expiry)");
    if (r.op == "hand_over" && r.from_uuid == b.uuid && (r.late || r.unacked))
      tags.push_back("late hand-over: n" + std::to_string(r.node) + "#" + std::to_string(r.seq) +
                     " by " + r.who + " sent at " + ms(r.send) + ", applied at " + ms(r.t) +
                     (r.late ? " after its caller gave up" : " with its reply lost") + ", moved " +
                     b.key + " from " + b.uuid + " (fence " + ms(r.fence_before) + ") to " +
                     r.uuid_after + " (fence " + ms(r.fence_after) + ") (hole 2)");
  }
  return tags;
}

void World::check() {
  const std::int64_t now = sched_.mono();
  const std::int64_t T = sched_.wall();
  const bool exc = excused();
  using Item = CheckItem;
  // Few keys: a vector searched linearly beats a map built at every step. Its buffers
  // are kept from step to step (no allocation per step).
  std::size_t ngroups = 0;
  auto group_of = [&](const std::string& gk) -> std::vector<Item>& {
    for (std::size_t i = 0; i < ngroups; ++i)
      if (*groups_[i].first == gk) return groups_[i].second;
    if (ngroups == groups_.size()) groups_.emplace_back();
    auto& g = groups_[ngroups++];
    g.first = &gk;
    g.second.clear();
    return g.second;
  };
  auto& started = started_;
  started.clear();
  {
    // Every sim thread waits now: nobody changes believers_ while they are probed (no lock
    // held across a probe: the library may log, and the log sink traces).
    for (auto& entry : believers_) {
      Believer& b = entry.second;
      if (paused(b.node, now)) continue;  // a paused process believes nothing new
      const std::optional<BeliefState> s = b.probe();
      const std::optional<std::int64_t> before = b.believed;
      if (!s)
        b.believed.reset();
      else
        b.believed = s->fence;
      if (!s) {
        if (before)
          trace(b.node, b.key, "belief ends: " + b.label + " " + kind_name(b.kind) + " " + b.key);
        continue;
      }
      if (!before || *before != s->fence) {
        trace(b.node, b.key,
              "belief begins: " + b.label + " " + kind_name(b.kind) + " " + b.key + " fence " +
                  ms(s->fence));
        started.emplace_back(&b, *s);
      }
      group_of(b.gk).push_back({&b, *s});
    }
    for (auto& [b, s] : started) token_check(*b, s);
    for (std::size_t gi = 0; gi < ngroups; ++gi) {
      const std::string* gk = groups_[gi].first;
      const std::vector<Item>& items = groups_[gi].second;
      const Believer& b0 = *items[0].b;
      const bool rw = b0.kind == Kind::Rw || b0.kind == Kind::RwLease;
      // A slot document (semaphore or read-write lock): I2 reads slots.
      const bool sem = b0.kind == Kind::Sem || b0.kind == Kind::SemLease || rw;
      if (exc) continue;
      std::size_t writers = 0;
      for (const auto& it : items) writers += it.s.write ? 1 : 0;
      // I7: a writer that believes it holds is the key's only believer; readers never
      // more than max_readers.
      const bool rw_broken = rw && ((writers > 0 && items.size() > 1) ||
                                    items.size() > static_cast<std::size_t>(p_.rw_readers));
      if ((!sem && items.size() > 1) || rw_broken ||
          (sem && !rw && items.size() > static_cast<std::size_t>(p_.sem_limit))) {
        std::string who;
        std::vector<std::string> tags;
        for (const auto& it : items) {
          who += (who.empty() ? "" : ", ") + it.b->label + " (" + kind_name(it.b->kind) +
                 (rw ? (it.s.write ? " write" : " read") : "") + " " + it.b->uuid + ", fence " +
                 ms(it.s.fence) + ")";
          for (auto& t : diagnose(*it.b, it.s)) tags.push_back(t);
        }
        if (rw) {  // both sides live in the document at once: a claim over a live slot
          const std::optional<SemaphoreDoc> d = mem_->read_semaphore(b0.coll, b0.key);
          const std::int64_t r = d ? d->limit : 0;
          bool reader = false;
          for (std::int64_t i = 0; d && i < r && i < static_cast<std::int64_t>(d->slots.size());
               ++i)
            reader = reader || d->slots[static_cast<std::size_t>(i)].held_at(T);
          if (reader && static_cast<std::int64_t>(d->slots.size()) > r &&
              d->slots[static_cast<std::size_t>(r)].held_at(T))
            tags.push_back(
                "the document holds a live writer slot and a live reader slot at server time " +
                ms(T) +
                ": a claim relied on a slot of the other side that was renewed (or revived) "
                "without moving the fence after the claimant's copy (rw-claim-over-live-slot)");
        }
        violate(rw                           ? "I7"
                : sem                        ? "I4"
                : b0.kind == Kind::Partition ? "I9a"
                                             : "I1",
                b0.key,
                std::to_string(items.size()) + " believe they hold " + b0.key +
                    (rw ? " (" + std::to_string(writers) + " writing, max_readers " +
                              std::to_string(p_.rw_readers) + ")"
                     : sem ? " (limit " + std::to_string(p_.sem_limit) + ")"
                           : "") +
                    ": " + who,
                tags);
      }
      DocCache& cached = doc_cache_[*gk];
      if (cached.gen != server_gen_) {
        cached.gen = server_gen_;
        if (!sem)
          cached.lock = mem_->read(b0.coll, b0.key);
        else
          cached.sem = mem_->read_semaphore(b0.coll, b0.key);
      }
      const std::optional<LockDoc>& lock_doc = cached.lock;
      const std::optional<SemaphoreDoc>& sem_doc = cached.sem;
      for (const auto& it : items) {
        const Believer& b = *it.b;
        bool ok = false;
        std::string state;
        if (!sem) {
          const std::optional<LockDoc>& d = lock_doc;
          ok = d && d->locked && d->uuid == b.uuid && d->fence == it.s.fence && d->ts_expire &&
               d->ts_expire->ms > T;
          // A deferred token being assigned (lazy_token: token() in flight): its set_fence
          // may have landed before the holder heard of it.
          if (!ok && it.s.refencing && d && d->locked && d->uuid == b.uuid &&
              it.s.fence < kEpochUnit && d->ts_expire && d->ts_expire->ms > T) {
            std::lock_guard<std::mutex> g(mu_);
            for (const WriteRec& r : history_[b.gk])
              if (r.op == "set_fence" && r.uuid_after == b.uuid && r.fence_before == it.s.fence &&
                  r.fence_after == d->fence)
                ok = true;
          }
          if (!ok) {
            Str o;
            if (d)
              o << "{uuid=" << d->uuid << " locked=" << d->locked << " fence=" << d->fence
                << " ts_expire=" << (d->ts_expire ? d->ts_expire->ms : 0) << "}";
            else
              o << "no document";
            state = o.str();
          }
        } else {
          const std::optional<SemaphoreDoc>& d = sem_doc;
          state = "no slot of it";
          if (d) {  // every slot of ours: found means checked
            for (std::size_t i = 0; i < d->slots.size(); ++i) {
              const SemaphoreSlot& sl = d->slots[i];
              if (sl.uuid != b.uuid || sl.fence != it.s.fence) continue;
              // A read-write lock's side: its writer's slot is `limit`, a reader's below.
              const bool side_ok = !rw || it.s.write == (static_cast<std::int64_t>(i) == d->limit);
              ok = sl.held_at(T) && side_ok;
              if (!ok)
                state = "slot " + ms(static_cast<std::int64_t>(i)) + " {uuid=" + sl.uuid +
                        " fence=" + ms(sl.fence) +
                        " ts_expire=" + ms(sl.ts_expire ? sl.ts_expire->ms : 0) + "}";
            }
          }
        }
        if (!ok)
          violate("I2", b.key,
                  b.label + " believes it holds " + b.key + " as " + kind_name(b.kind) + " (uuid " +
                      b.uuid + ", fence " + ms(it.s.fence) + ") but at server time " + ms(T) +
                      " the server has " + state,
                  diagnose(b, it.s));
      }
    }
  }
  if (now >= p_.L) {
    for (const auto& [key, uuids] : elector_uuids_) {
      if (uuids.empty()) continue;
      const std::string gk = std::string(kElectColl) + "/" + key;
      bool led = false;
      for (std::size_t gi = 0; gi < ngroups; ++gi) led = led || *groups_[gi].first == gk;
      if (led) continue;
      if (exc) continue;
      violate("I6", key,
              "no leader of " + key + " at " + ms(now) + " although faults stopped at " + ms(p_.F) +
                  " (required from " + ms(p_.L) + ")");
    }
  }
  if (p_.priorities && now >= p_.E && !exc) check_priorities(now);
  if (p_.partitioners && now >= p_.E && !exc) check_partitions(now);
}

// I9b: with membership stable since F - ttl and faults over since F, every partition is
// owned, by exactly one running member: the one rendezvous picks among the running ones.
void World::check_partitions(std::int64_t now) {
  std::vector<std::string> running;
  std::map<std::int64_t, std::vector<std::string>> owners;
  for (const auto& n : nodes_) {
    std::vector<std::shared_ptr<me::Partitioner>> ps;
    {
      std::lock_guard<std::mutex> g(mu_);
      ps = n->partitioners;
    }
    for (const auto& pp : ps) {
      if (!pp->running()) continue;
      running.push_back(pp->identity().uuid);
      for (const auto& [part, token] : pp->owned()) owners[part].push_back(pp->identity().uuid);
    }
  }
  if (running.empty()) return;
  for (std::int64_t part = 0; part < p_.part_n; ++part) {
    const std::string want = *rendezvous_owner(running, part);
    const std::vector<std::string>& got = owners[part];
    if (got.size() == 1 && got[0] == want) continue;
    std::string who;
    for (const auto& u : got) who += (who.empty() ? "" : ", ") + u;
    violate("I9b", partition_key(kPartGroup, part),
            "at " + ms(now) + " partition " + partition_key(kPartGroup, part) + " is owned by [" +
                who + "], rendezvous over the " + std::to_string(running.size()) +
                " running members gives " + want);
  }
}

// I8: with membership stable since before the faults ended, the leader of each election
// is, at the end, a running member of the highest priority among the running members.
void World::check_priorities(std::int64_t now) {
  std::map<std::string, double> top;
  std::map<std::string, std::pair<std::string, double>> leader;  // key -> (uuid, priority)
  for (const auto& n : nodes_) {
    std::vector<std::shared_ptr<me::Elector>> es;
    {
      std::lock_guard<std::mutex> g(mu_);
      es = n->electors;
    }
    for (const auto& e : es) {
      if (!e->running() || !e->options().priority) continue;
      const std::string& key = e->options().key;
      const double p = *e->options().priority;
      auto [it, fresh] = top.emplace(key, p);
      if (!fresh) it->second = std::max(it->second, p);
      if (e->leader_fence()) leader[key] = {e->locker().identity().uuid, p};
    }
  }
  for (const auto& [key, p] : top) {
    auto l = leader.find(key);
    if (l == leader.end() || l->second.second >= p) continue;  // no leader: I6's business
    violate("I8", key,
            "at " + ms(now) + " " + l->second.first + " (priority " +
                std::to_string(l->second.second) + ") leads " + key +
                " although a running member has priority " + std::to_string(p));
  }
}

// ---- the driver -----------------------------------------------------------------------------

void World::setup() {
  for (int i = 0; i <= p_.nodes; ++i) {
    auto n = std::make_unique<Node>();
    n->id = i;
    n->prober = i == p_.nodes;
    n->name = n->prober ? "probe" : "n" + std::to_string(i);
    const std::int64_t off = n->prober ? 0 : p_.roles[static_cast<std::size_t>(i)].wall_offset;
    n->clock = std::make_shared<NodeClock>(sched_, i, off, p_.seed);
    n->storage = std::make_shared<NodeStorage>(*this, i, n->clock);
    n->clock->start(n->name);
    nodes_.push_back(std::move(n));
  }
  for (int i = 0; i < p_.nodes; ++i)
    for (const auto& key : p_.roles[static_cast<std::size_t>(i)].electors)
      elector_uuids_[key].push_back(uuid_for(i, key));
  for (int i = 0; i < p_.nodes; ++i) {
    Node& n = *nodes_[static_cast<std::size_t>(i)];
    const NodeRoles& nr = p_.roles[static_cast<std::size_t>(i)];
    int k = 0;
    for (const auto& key : nr.electors) {
      const int idx = k++;
      spawn(n, n.name + ".start." + key, [this, &n, key, idx] { elector_actor(n, key, idx); });
    }
    for (int j = 0; j < nr.lockers; ++j)
      spawn(n, n.name + ".locker" + std::to_string(j), [this, &n, j] { locker_actor(n, j); });
    if (nr.fair_lock) {
      if (nr.fair_lock == NodeRoles::kFairLocker)
        add_fair_locker(uuid_for(i, "lk" + std::to_string(kFairLockerIdx)));
      spawn(n, n.name + ".locker" + std::to_string(kFairLockerIdx),
            [this, &n] { locker_actor(n, kFairLockerIdx); });
    }
    if (nr.leases) spawn(n, n.name + ".leases", [this, &n] { lease_actor(n); });
    if (nr.semaphore) spawn(n, n.name + ".semaphore", [this, &n] { semaphore_actor(n); });
    if (nr.rwlock) spawn(n, n.name + ".rwlock", [this, &n] { rwlock_actor(n); });
    if (p_.partitioners && nr.partitioner)
      spawn(n, n.name + ".start.partitioner", [this, &n] { partitioner_actor(n); });
  }
  Node& probe = *nodes_.back();
  spawn(probe, "probe", [this, &probe] { prober(probe); });
}

// The driver's work between two instants: checks, then time moves to the next instant
// something is due and the server applies what arrives then. False: the schedule is over.
// Runs on the driver or on the sim thread that found nothing runnable (Scheduler::idle_step).
bool World::step() {
  ++steps_;
  check();
  bool stop;
  {
    std::lock_guard<std::mutex> g(mu_);
    stop = !violations_.empty() && o_.stop_at_first;
  }
  if (stop) return false;
  const std::int64_t now = sched_.mono();
  if (now >= p_.E && probed_) return false;
  if (now >= p_.E + 20 * p_.ttl) {
    violate("I6", "", "the liveness probe did not finish by " + ms(now));
    return false;
  }
  std::int64_t next = std::numeric_limits<std::int64_t>::max();
  if (auto d = sched_.next_deadline()) next = *d;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!events_.empty()) next = std::min(next, std::get<0>(events_.begin()->first));
  }
  for (const auto& w : p_.pauses)
    if (w.b > now) next = std::min(next, w.b);
  for (const auto& s : p_.steps)
    if (s.first > now) next = std::min(next, s.first);
  for (const auto t : p_.ttl_sweeps)
    if (t > now) next = std::min(next, t);
  if (now < p_.E) next = std::min(next, p_.E);
  if (next == std::numeric_limits<std::int64_t>::max()) return false;
  sched_.set_now(next);
  for (const auto& s : p_.steps) {
    if (s.first != next) continue;
    sched_.jump_wall(s.second);
    trace(-1, "",
          "server clock steps by " + ms(s.second) + " ms" +
              (s.first == p_.beyond_at
                   ? " (outside the timing assumption: I1, I2, I4, I5, I7 no longer checked)"
                   : ""));
  }
  if (std::find(p_.ttl_sweeps.begin(), p_.ttl_sweeps.end(), next) != p_.ttl_sweeps.end())
    ttl_sweep();
  for (;;) {
    std::function<void()> fn;
    {
      std::lock_guard<std::mutex> g(mu_);
      if (events_.empty() || std::get<0>(events_.begin()->first) > next) break;
      fn = std::move(events_.begin()->second);
      events_.erase(events_.begin());
    }
    ++server_gen_;
    fn();
  }
  return true;
}

Result World::run() {
  install_log_sink(this);
  Result res;
  res.seed = p_.seed;
  trace(-1, "", p_.describe());
  try {
    setup();
    // An exception of a step run by a sim thread ends the schedule and is thrown here.
    sched_.idle_step = [this] {
      try {
        return step();
      } catch (...) {
        step_error_ = std::current_exception();
        return false;
      }
    };
    for (;;) {
      sched_.run_instant();
      if (sched_.halted()) break;
      if (!step()) break;
    }
    if (step_error_) std::rethrow_exception(step_error_);
  } catch (const Stall& s) {
    res.status = "stall";
    res.error = s.what();
    trace(-1, "", std::string("STALL: ") + s.what());
    res.end_t = sched_.mono();
    return res;  // threads are stuck: the caller exits without tearing down
  }
  res.end_t = sched_.mono();
  {
    std::string g = "grants by role:";
    for (const auto& [role, n] : sched_.grants_by_role()) g += " " + role + "=" + std::to_string(n);
    trace(-1, "",
          g + " (steps " + std::to_string(steps_) + ", contended wake checks " +
              std::to_string(sched_.contended()) + ", foreign threads " +
              std::to_string(sched_.foreign_threads()) + ")");
  }
  res.steps = steps_;
  res.grants = sched_.grants();
  res.queued = queued_;
  res.queue_claims = queue_claims_;
  res.turn_checks = turn_checks_;
  res.rw_turn_checks = rw_turn_checks_;
  res.crashes = crashes_;
  res.dead_leases = dead_leases_;
  res.dead_checks = dead_checks_;
  res.calls = calls.load();
  teardown();
  {
    std::lock_guard<std::mutex> g(mu_);
    res.violations = violations_;
  }
  if (!res.violations.empty()) res.status = "violation";
  return res;
}

// MongoDB's TTL monitor: deletes every lock document whose ts_expire has passed (never a
// semaphore's or a read-write lock's: their TTL index must not exist).
void World::ttl_sweep() {
  std::vector<std::string> gks;
  {
    std::lock_guard<std::mutex> g(mu_);
    for (const auto& [gk, h] : history_)
      if (gk.rfind(kSemColl, 0) != 0 && gk.rfind(kRwColl, 0) != 0) gks.push_back(gk);
  }
  const std::int64_t now = sched_.wall();
  for (const std::string& gk : gks) {
    const auto slash = gk.find('/');
    const std::string coll = gk.substr(0, slash), key = gk.substr(slash + 1);
    const LockSnap s = snap_lock(coll, key);
    if (!s.exists || s.expire > now) continue;
    ++server_gen_;
    mem_->delete_lock(coll, key);
    trace(-1, key,
          "TTL monitor deletes " + gk + " (ts_expire " + ms(s.expire) + " <= server now " +
              ms(now) + ")");
    CallCtx c;
    c.node = -1;
    c.who = "ttl-monitor";
    c.fate.success = true;
    note_lock_write(c, "ttl-delete", coll, key, s, LockSnap{});
  }
}

void World::teardown() {
  stopping_.store(true);
  sched_.free_run();
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> g(mu_);
    threads.swap(actor_threads_);
  }
  for (auto& t : threads)
    if (t.joinable()) t.join();
  for (auto& n : nodes_) {
    for (auto& e : n->electors) e->stop();
    n->electors.clear();
    for (auto& pp : n->partitioners) pp->stop();
    n->partitioners.clear();
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    believers_.clear();
  }
  keep_.clear();
  for (auto& n : nodes_) n->clock->stop();
}

const std::vector<TraceEntry>& World::trace_entries() const { return trace_; }

std::uint64_t World::trace_hash() {
  std::lock_guard<std::mutex> g(mu_);
  std::uint64_t h = 0;
  for (const auto& e : trace_) {
    std::uint64_t x =
        hash64(static_cast<std::uint64_t>(e.t), static_cast<std::uint64_t>(e.node + 7));
    for (char ch : e.text) x = mix64(x ^ static_cast<unsigned char>(ch));
    h = mix64(h ^ x);
  }
  return h;
}

}  // namespace sim
