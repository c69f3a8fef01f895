// The network model: what happens to one storage call of one node (World::draw_fate), and
// the Storage wrapper that makes every operation cross it (NodeStorage).
//
// A call sent at fake time t is, by its fate (drawn from the seed, the node and the node's
// call number): applied at the server at t+dq and answered at t+dq+dr; failed before
// applying (the caller sees StorageUnavailable after a while); applied with its reply
// lost (the caller times out at the call bound); HELD and applied later than the
// caller's timeout, after calls the node sent since; slow; lopsided (a clock sample
// whose server reading is off by up to half its round trip). Partitions make a node's
// calls fail, vanish, or wait for the partition to end; a frozen server applies what
// arrived in order when it resumes. No caller waits longer than the call bound. The
// server applies calls on the driver thread at their instant, in (time, arrival, node,
// call number) order.
#include <algorithm>
#include <limits>
#include <sstream>
#include <utility>

#include "exceptions.h"
#include "world.h"

namespace sim {

using namespace mongoelector;

namespace {

std::string fmt_doc(const std::optional<LockDoc>& d) {
  if (!d) return "none";
  Str o;
  o << "{uuid=" << d->uuid << " locked=" << d->locked << " fence=" << d->fence
    << " exp=" << (d->ts_expire ? d->ts_expire->ms : 0) << "}";
  return o.str();
}

}  // namespace

std::string fmt_queue(const std::vector<QueueEntry>& q) {
  Str o;
  o << "[";
  for (const QueueEntry& e : q)
    o << (&e == &q.front() ? "" : " ") << e.uuid << "/" << e.ticket << " exp=" << e.expire_ms;
  o << "]";
  return o.str();
}

namespace {

std::string describe(bool v) { return v ? "true" : "false"; }
std::string describe(std::int64_t v) { return std::to_string(v); }
std::string describe(const std::optional<LockDoc>& d) { return fmt_doc(d); }
std::string describe(const std::vector<bool>& v) {
  std::string s = "[";
  for (bool b : v) s += b ? '1' : '0';
  return s + "]";
}
std::string describe(const std::optional<SemaphoreDoc>& d) {
  if (!d) return "none";
  Str o;
  o << "{fence=" << d->fence << " slots=";
  for (const auto& s : d->slots)
    o << "[" << (s.uuid.empty() ? "-" : s.uuid) << " f=" << s.fence
      << " exp=" << (s.ts_expire ? s.ts_expire->ms : 0) << "]";
  if (!d->queue.empty()) o << " queue=" << fmt_queue(d->queue);
  o << "}";
  return o.str();
}
std::string describe(const ServerInfo& i) { return i.name; }
std::string describe(const std::vector<Document>& v) { return std::to_string(v.size()) + " docs"; }

template <class R>
struct Box {
  std::optional<R> value;
  std::exception_ptr err;
  bool done = false;
};

struct InCall {
  SimThread* t;
  explicit InCall(SimThread* th) : t(th) {
    if (t) t->in_call = true;
  }
  ~InCall() {
    if (t) t->in_call = false;
  }
};

}  // namespace

// ---- fates ----------------------------------------------------------------------------

Fate World::draw_fate(int node, std::uint64_t seq, const char* op, std::int64_t t) {
  Rng r(hash64(p_.seed, static_cast<std::uint64_t>(node), seq, 0xFA7E));
  const std::int64_t B = p_.bound;
  Fate f;
  auto small = [&] { return r.range(1, 4) + (r.chance(0.1) ? r.range(0, 15) : 0); };
  std::int64_t dq = small(), dr = small();
  const bool faulty = t < p_.F && node < p_.nodes;
  if (!faulty) {
    f.kind = "ok";
    f.arrival = f.apply_at = t + dq;
    f.return_at = t + dq + dr;
    f.success = true;
    return f;
  }
  const char* shape = nullptr;
  const bool sample = std::string(op) == "server_time_ms";
  if (sample && p_.roles[static_cast<std::size_t>(node)].bad_sampler && r.chance(p_.p_asym)) {
    // A slow sample that still fits the bound: its reading is off by up to rtt/2.
    const std::int64_t rtt =
        r.range(std::max<std::int64_t>(4, B / 3), std::max<std::int64_t>(4, B - 2));
    const std::int64_t q =
        r.chance(0.5) ? r.range(1, rtt / 10 + 1) : rtt - r.range(1, rtt / 10 + 1);
    dq = q;
    dr = rtt - q;
    shape = "lopsided";
  } else if (r.chance(p_.p_slow)) {
    dq += r.range(0, B * 2 / 3);
    dr += r.range(0, B * 2 / 3);
    shape = "slow";
  }
  const double u = r.unit();
  if (u < p_.p_fail) {
    f.kind = "fail";
    f.apply_at = -1;
    f.return_at = t + r.range(1, B);
    f.success = false;
  } else if (u < p_.p_fail + p_.p_lost) {
    f.kind = "lost-reply";
    f.apply_at = t + std::min(dq, B - 1);
    f.return_at = t + B;
    f.success = false;
  } else if (u < p_.p_fail + p_.p_lost + p_.p_held) {
    f.kind = "held";
    f.apply_at = t + B + r.range(1, p_.hold_max);
    f.return_at = t + B;
    f.success = false;
  } else {
    f.kind = shape ? shape : "ok";
    f.apply_at = t + dq;
    f.return_at = t + dq + dr;
    f.success = true;
  }
  f.arrival = f.apply_at >= 0 ? f.apply_at : t + dq;
  for (const Window& w : p_.partitions) {
    if (w.node != node) continue;
    if (t >= w.a && t < w.b) {  // sent while cut off
      const auto k = r.range(0, 2);
      if (k == 0) {
        f.kind = "partition-refused";
        f.apply_at = -1;
        f.return_at = t + r.range(1, std::min<std::int64_t>(B, 30));
        f.success = false;
      } else if (k == 1) {
        f.kind = "partition-lost";
        f.apply_at = -1;
        f.return_at = t + B;
        f.success = false;
      } else {
        f.kind = "partition-buffered";
        f.apply_at = std::max(f.apply_at, w.b + dq);
        f.arrival = f.apply_at;
        f.return_at = f.apply_at + dr;
        f.success = true;
      }
    } else if (f.success && f.return_at >= w.a && f.return_at < w.b) {
      f.kind = "partition-reply-lost";
      f.return_at = t + B;
      f.success = false;
    }
  }
  for (const Window& w : p_.freezes) {
    if (f.apply_at >= w.a && f.apply_at < w.b) {
      f.apply_at = w.b;  // applied when the server resumes, in arrival order
      if (f.success) f.return_at = w.b + dr;
      if (std::string(f.kind) == "ok") f.kind = "frozen";
    }
  }
  if (f.return_at > t + B) {  // the call bound: the caller gives up
    f.return_at = t + B;
    f.success = false;
  }
  if (f.apply_at >= p_.F) f.apply_at = p_.F;  // late calls all land before the quiet phase
  if (f.success && f.apply_at >= f.return_at) f.success = false;
  if (f.apply_at >= 0 && f.apply_at <= t) f.apply_at = t + 1;
  return f;
}

void World::enqueue(std::int64_t at, std::int64_t arrival, int node, std::uint64_t seq,
                    std::function<void()> fn) {
  std::lock_guard<std::mutex> g(mu_);
  events_.emplace(EventKey{at, arrival, node, seq}, std::move(fn));
}

// ---- crashed processes ------------------------------------------------------------------

namespace {
// A call that names a crashed process (World::kill_process) is never sent: a kill -9
// stops every thread of the process, its renewer's too. No call number is drawn.
void refuse(World& w, const char* op, const std::string& uuid) {
  if (w.refused(uuid)) throw StorageUnavailable(std::string("sim: crashed (") + op + ")");
}

// A batch of renewals from the node's renewer carries the requests of every live process
// of the node; those of a crashed process are never sent (they report not renewed: the
// dead lease's end is invisible). Empty when none is refused; throws when all are.
template <class Req, class F>
std::optional<std::vector<bool>> without_dead(World& w, const char* op,
                                              const std::vector<Req>& requests, F&& send) {
  std::vector<Req> live;
  std::vector<std::size_t> at;
  for (std::size_t i = 0; i < requests.size(); ++i)
    if (!w.refused(requests[i].uuid)) {
      live.push_back(requests[i]);
      at.push_back(i);
    }
  if (live.size() == requests.size()) return std::nullopt;
  if (live.empty()) throw StorageUnavailable(std::string("sim: crashed (") + op + ")");
  const std::vector<bool> r = send(live);
  std::vector<bool> out(requests.size(), false);
  for (std::size_t j = 0; j < at.size() && j < r.size(); ++j) out[at[j]] = r[j];
  return out;
}
}  // namespace

// ---- the wrapper ----------------------------------------------------------------------

NodeStorage::NodeStorage(World& w, int node, std::shared_ptr<NodeClock> clock)
    : w_(w), node_(node), clock_(std::move(clock)), board_(std::make_shared<ClockSampleBoard>()) {}

std::int64_t NodeStorage::call_bound_ms() const { return w_.params().bound; }

template <class R>
R NodeStorage::rpc(const char* op, const std::string& key, const std::string& what,
                   std::function<R(const CallCtx&)> apply) {
  if (w_.stopping()) throw StorageUnavailable(std::string("sim: stopping (") + op + ")");
  if (const SimThread* t = Scheduler::self(); t && t->crashed)  // never sent: no call number
    throw StorageUnavailable(std::string("sim: crashed (") + op + ")");
  CallCtx c;
  c.node = node_;
  {
    std::lock_guard<std::mutex> g(mu_);
    c.seq = ++seq_;
  }
  c.send = clock_->mono_ms();
  c.fate = w_.draw_fate(node_, c.seq, op, c.send);
  c.who = Scheduler::self_label();
  {
    std::lock_guard<std::mutex> g(mu_);
    c.prev_seq = std::exchange(last_seq_[c.who], c.seq);
  }
  ++w_.calls;
  const Fate& f = c.fate;
  auto box = std::make_shared<Box<R>>();
  {
    Str o;
    o << c.who << " -> " << op << "(" << what << ") #" << c.seq << " [" << f.kind;
    if (f.apply_at >= 0) o << ", apply@" << f.apply_at;
    o << (f.success ? ", reply@" : ", error@") << f.return_at << "]";
    w_.trace(node_, key, std::move(o.s));
  }
  if (f.apply_at >= 0) {
    w_.enqueue(f.apply_at, f.arrival, node_, c.seq, [this, box, apply, c, op, key] {
      try {
        box->value = apply(c);
      } catch (...) {
        box->err = std::current_exception();
      }
      box->done = true;
      Str o;
      o << "server applies n" << node_ << "#" << c.seq << " " << op << " (sent@" << c.send << " by "
        << c.who << ") -> ";
      if (box->err) {
        try {
          std::rethrow_exception(box->err);
        } catch (const std::exception& ex) {
          o << "error: " << ex.what();
        }
      } else {
        o << describe(*box->value);
      }
      if (!c.fate.success)
        o << (w_.sched().mono() >= c.fate.return_at ? "  (LATE: caller gave up)"
                                                    : "  (reply will be lost)");
      w_.trace(-1, key, std::move(o.s));
    });
  }
  {
    InCall mark(Scheduler::self());
    clock_->sleep_until(f.return_at);
  }
  if (w_.stopping() && (!f.success || !box->done))
    throw StorageUnavailable(std::string("sim: stopping (") + op + ")");
  if (!f.success) {
    w_.trace(node_, key,
             c.who + " <- #" + std::to_string(c.seq) + " " + op + ": StorageUnavailable (" +
                 f.kind + ")");
    throw StorageUnavailable(std::string("sim: ") + op + " " + f.kind);
  }
  if (!box->done) throw std::logic_error("sim: reply before the request was applied");
  w_.trace(node_, key, c.who + " <- #" + std::to_string(c.seq) + " " + op + " ok");
  if (box->err) std::rethrow_exception(box->err);
  return std::move(*box->value);
}

ServerInfo NodeStorage::server_info() {
  auto mem = w_.mem();
  return rpc<ServerInfo>("server_info", "", "",
                         [mem](const CallCtx&) { return mem->server_info(); });
}

std::int64_t NodeStorage::server_time_ms() {
  auto mem = w_.mem();
  return rpc<std::int64_t>("server_time_ms", "", "",
                           [mem](const CallCtx&) { return mem->server_time_ms(); });
}

void NodeStorage::ensure_lock_indexes(const std::string& collection) {
  auto mem = w_.mem();
  rpc<bool>("ensure_lock_indexes", "", collection, [mem, collection](const CallCtx&) {
    mem->ensure_lock_indexes(collection);
    return true;
  });
}

std::optional<LockDoc> NodeStorage::claim(const std::string& collection, const LockClaim& cl,
                                          bool force) {
  refuse(w_, "claim", cl.uuid);
  World* w = &w_;
  Str what;
  what << cl.key << " uuid=" << cl.uuid << " now=" << cl.now_ms << " exp=" << cl.expire_ms
       << (force ? " force" : "");
  return rpc<std::optional<LockDoc>>("claim", cl.key, what.str(),
                                     [w, collection, cl, force](const CallCtx& c) {
                                       const LockSnap before = w->snap_lock(collection, cl.key);
                                       auto r = w->mem()->claim(collection, cl, force);
                                       w->note_lock_write(c, "claim", collection, cl.key, before,
                                                          w->snap_lock(collection, cl.key));
                                       return r;
                                     });
}

std::optional<LockDoc> NodeStorage::insert_claim(const std::string& collection,
                                                 const LockClaim& cl) {
  refuse(w_, "insert_claim", cl.uuid);
  World* w = &w_;
  Str what;
  what << cl.key << " uuid=" << cl.uuid << " now=" << cl.now_ms << " exp=" << cl.expire_ms;
  // Checked as a claim: it creates a held document, as the upsert would.
  return rpc<std::optional<LockDoc>>("insert_claim", cl.key, what.str(),
                                     [w, collection, cl](const CallCtx& c) {
                                       const LockSnap before = w->snap_lock(collection, cl.key);
                                       auto r = w->mem()->insert_claim(collection, cl);
                                       w->note_lock_write(c, "claim", collection, cl.key, before,
                                                          w->snap_lock(collection, cl.key));
                                       return r;
                                     });
}

std::int64_t NodeStorage::bump_epoch(const std::string& collection, const std::string& key) {
  auto mem = w_.mem();
  return rpc<std::int64_t>("bump_epoch", key, key, [mem, collection, key](const CallCtx&) {
    return mem->bump_epoch(collection, key);
  });
}

bool NodeStorage::set_fence(const std::string& collection, const std::string& key,
                            const std::string& uuid, std::int64_t old_fence,
                            std::int64_t created_ms, std::int64_t new_fence) {
  refuse(w_, "set_fence", uuid);
  World* w = &w_;
  Str what;
  what << key << " uuid=" << uuid << " " << old_fence << "->" << new_fence;
  return rpc<bool>("set_fence", key, what.str(), [=](const CallCtx& c) {
    const LockSnap before = w->snap_lock(collection, key);
    bool r = w->mem()->set_fence(collection, key, uuid, old_fence, created_ms, new_fence);
    w->note_lock_write(c, "set_fence", collection, key, before, w->snap_lock(collection, key));
    return r;
  });
}

bool NodeStorage::renew(const std::string& collection, const std::string& key,
                        const std::string& uuid, std::int64_t fence, std::int64_t now_ms,
                        std::int64_t expire_ms) {
  refuse(w_, "renew", uuid);
  World* w = &w_;
  Str what;
  what << key << " uuid=" << uuid << " fence=" << fence << " now=" << now_ms
       << " exp=" << expire_ms;
  return rpc<bool>("renew", key, what.str(), [=](const CallCtx& c) {
    const LockSnap before = w->snap_lock(collection, key);
    bool r = w->mem()->renew(collection, key, uuid, fence, now_ms, expire_ms);
    w->note_lock_write(c, "renew", collection, key, before, w->snap_lock(collection, key));
    return r;
  });
}

// release_min_hold's write: crosses the network like every other write (delayed, lost,
// held past the caller's timeout, applied without a reply).
bool NodeStorage::set_expiry(const std::string& collection, const std::string& key,
                             const std::string& uuid, std::int64_t fence, std::int64_t now_ms,
                             std::int64_t expire_ms, std::int64_t created_ms) {
  refuse(w_, "set_expiry", uuid);
  World* w = &w_;
  Str what;
  what << key << " uuid=" << uuid << " fence=" << fence << " now=" << now_ms
       << " exp=" << expire_ms;
  if (created_ms != 0) what << " created=" << created_ms;
  return rpc<bool>("set_expiry", key, what.str(), [=](const CallCtx& c) {
    const LockSnap before = w->snap_lock(collection, key);
    bool r = w->mem()->set_expiry(collection, key, uuid, fence, now_ms, expire_ms, created_ms);
    w->note_lock_write(c, "set_expiry", collection, key, before, w->snap_lock(collection, key));
    return r;
  });
}

// A leader's payload update: crosses the network like every other write. (The payload
// changes no hold; the simulation's workloads set none today.)
bool NodeStorage::set_payload(const std::string& collection, const PayloadWrite& pw) {
  refuse(w_, "set_payload", pw.uuid);
  World* w = &w_;
  Str what;
  what << pw.key << " uuid=" << pw.uuid << " fence=" << pw.fence << " version=" << pw.version;
  return rpc<bool>("set_payload", pw.key, what.str(),
                   [=](const CallCtx&) { return w->mem()->set_payload(collection, pw); });
}

std::vector<bool> NodeStorage::renew_many(const std::string& collection,
                                          const std::vector<RenewRequest>& requests,
                                          std::int64_t now_ms) {
  if (auto r = without_dead(w_, "renew_many", requests, [&](const std::vector<RenewRequest>& l) {
        return renew_many(collection, l, now_ms);
      }))
    return *r;
  World* w = &w_;
  // Listed by key: the renewer's batch order follows addresses, not the schedule.
  std::vector<std::string> parts;
  for (const auto& r : requests)
    parts.push_back(r.key + " fence=" + std::to_string(r.fence) +
                    " exp=" + std::to_string(r.expire_ms));
  std::sort(parts.begin(), parts.end());
  std::string what;
  for (const auto& s : parts) what += (what.empty() ? "" : "; ") + s;
  what += " now=" + std::to_string(now_ms);
  return rpc<std::vector<bool>>("renew_many", "", what, [=](const CallCtx& c) {
    std::vector<LockSnap> before;
    for (const auto& r : requests) before.push_back(w->snap_lock(collection, r.key));
    auto out = w->mem()->renew_many(collection, requests, now_ms);
    std::vector<std::size_t> by_key(requests.size());  // traced by key, as `what`
    for (std::size_t i = 0; i < by_key.size(); ++i) by_key[i] = i;
    std::stable_sort(by_key.begin(), by_key.end(), [&](std::size_t a, std::size_t b) {
      return requests[a].key < requests[b].key;
    });
    for (const std::size_t i : by_key)
      w->note_lock_write(c, "renew_many", collection, requests[i].key, before[i],
                         w->snap_lock(collection, requests[i].key));
    return out;
  });
}

bool NodeStorage::release(const std::string& collection, const std::string& key,
                          const std::optional<std::string>& uuid, std::int64_t fence,
                          std::int64_t now_ms, bool delete_document) {
  if (uuid) refuse(w_, "release", *uuid);
  World* w = &w_;
  Str what;
  what << key << " uuid=" << uuid.value_or("*") << " fence=" << fence << " now=" << now_ms
       << (delete_document ? " delete" : "");
  return rpc<bool>("release", key, what.str(), [=](const CallCtx& c) {
    const LockSnap before = w->snap_lock(collection, key);
    bool r = w->mem()->release(collection, key, uuid, fence, now_ms, delete_document);
    w->note_lock_write(c, "release", collection, key, before, w->snap_lock(collection, key));
    return r;
  });
}

std::optional<LockDoc> NodeStorage::read(const std::string& collection, const std::string& key) {
  auto mem = w_.mem();
  return rpc<std::optional<LockDoc>>("read", key, key, [mem, collection, key](const CallCtx&) {
    return mem->read(collection, key);
  });
}

std::optional<SemaphoreDoc> NodeStorage::read_semaphore(const std::string& collection,
                                                        const std::string& key) {
  World* w = &w_;
  // Proof modes: of I10 (RunOptions::break_fair), the node sees no queue, so its gate is
  // always open and its claims name no entry; of I10b (break_turns, break_rw_turns), it
  // sees every slot of s0 (of rw0) held, so a head never takes its turn.
  const bool hide_queue = w_.options().break_fair;
  const bool hide_slots =  // not the prober's: I6 stays quiet
      ((w_.options().break_turns && collection == kSemColl) ||
       (w_.options().break_rw_turns && collection == kRwColl)) &&
      node_ < w_.params().nodes;
  return rpc<std::optional<SemaphoreDoc>>("read_semaphore", key, key, [=](const CallCtx& c) {
    std::optional<SemaphoreDoc> d = w->mem()->read_semaphore(collection, key);
    w->note_sem_read(c, collection, key, d);
    if (d && hide_queue) d->queue.clear();
    if (d && hide_slots)
      for (SemaphoreSlot& s : d->slots)
        s.ts_expire = DateTime{std::numeric_limits<std::int64_t>::max() / 2};
    return d;
  });
}

namespace {
std::string sem_what(const SemaphoreClaim& c) {
  Str o;
  o << c.key << " slot=" << c.slot << " uuid=" << c.uuid << " fence " << c.old_fence << "->"
    << c.new_fence << " now=" << c.now_ms << " exp=" << c.expire_ms;
  for (const me::SlotClear& x : c.clear_slots)  // emptied in the same write
    o << " clear=" << x.slot << (x.own_fence ? "/own " + std::to_string(x.own_fence) : "");
  if (c.enqueue) o << " enqueue";
  for (const me::QueueEntry& e : c.queue_passed) o << " pass=" << e.uuid << "/" << e.ticket;
  if (c.queue_own) o << " own=" << c.queue_own->uuid << "/" << c.queue_own->ticket;
  return o.str();
}

// One write of a slot document at the server, recorded with the document before and after.
bool sem_write(World* w, const CallCtx& c, const char* op, const std::string& collection,
               const std::string& key, const std::function<bool()>& apply) {
  auto before = w->mem()->read_semaphore(collection, key);
  const bool r = apply();
  w->note_sem_write(c, op, collection, key, before, w->mem()->read_semaphore(collection, key));
  return r;
}
}  // namespace

bool NodeStorage::create_semaphore(const std::string& collection, const SemaphoreClaim& cl) {
  refuse(w_, "create_semaphore", cl.uuid);
  World* w = &w_;
  return rpc<bool>("create_semaphore", cl.key, sem_what(cl), [=](const CallCtx& c) {
    return sem_write(w, c, "create_semaphore", collection, cl.key,
                     [&] { return w->mem()->create_semaphore(collection, cl); });
  });
}

bool NodeStorage::claim_semaphore(const std::string& collection, const SemaphoreClaim& cl) {
  refuse(w_, "claim_semaphore", cl.uuid);
  World* w = &w_;
  return rpc<bool>("claim_semaphore", cl.key, sem_what(cl), [=](const CallCtx& c) {
    return sem_write(w, c, "claim_semaphore", collection, cl.key,
                     [&] { return w->mem()->claim_semaphore(collection, cl); });
  });
}

// The batch of semaphore slots as one call, as a backend that implements it in one round
// trip: it lands (or runs late) as a whole.
std::vector<bool> NodeStorage::renew_semaphores(
    const std::string& collection, const std::vector<me::SemaphoreRenewRequest>& requests,
    std::int64_t now_ms) {
  if (auto r = without_dead(w_, "renew_semaphores", requests,
                            [&](const std::vector<me::SemaphoreRenewRequest>& l) {
                              return renew_semaphores(collection, l, now_ms);
                            }))
    return *r;
  World* w = &w_;
  std::vector<std::string> parts;  // by key, as renew_many's
  for (const auto& r : requests)
    parts.push_back(r.key + " slot=" + std::to_string(r.slot) +
                    " fence=" + std::to_string(r.fence) + " exp=" + std::to_string(r.expire_ms));
  std::sort(parts.begin(), parts.end());
  std::string what;
  for (const auto& s : parts) what += (what.empty() ? "" : "; ") + s;
  what += " now=" + std::to_string(now_ms);
  return rpc<std::vector<bool>>("renew_semaphores", "", what, [=](const CallCtx& c) {
    std::map<std::string, std::optional<me::SemaphoreDoc>> before;
    for (const auto& r : requests)
      before.emplace(r.key, w->mem()->read_semaphore(collection, r.key));
    auto out = w->mem()->renew_semaphores(collection, requests, now_ms);
    for (const auto& [key, doc] : before)
      w->note_sem_write(c, "renew_semaphores", collection, key, doc,
                        w->mem()->read_semaphore(collection, key));
    return out;
  });
}

bool NodeStorage::renew_semaphore(const std::string& collection, const std::string& key,
                                  std::int64_t slot, const std::string& uuid, std::int64_t fence,
                                  std::int64_t now_ms, std::int64_t expire_ms) {
  refuse(w_, "renew_semaphore", uuid);
  World* w = &w_;
  Str what;
  what << key << " slot=" << slot << " uuid=" << uuid << " fence=" << fence << " now=" << now_ms
       << " exp=" << expire_ms;
  return rpc<bool>("renew_semaphore", key, what.str(), [=](const CallCtx& c) {
    return sem_write(w, c, "renew_semaphore", collection, key, [&] {
      return w->mem()->renew_semaphore(collection, key, slot, uuid, fence, now_ms, expire_ms);
    });
  });
}

bool NodeStorage::release_semaphore(const std::string& collection, const std::string& key,
                                    std::int64_t slot, const std::string& uuid,
                                    std::int64_t fence) {
  refuse(w_, "release_semaphore", uuid);
  World* w = &w_;
  Str what;
  what << key << " slot=" << slot << " uuid=" << uuid << " fence=" << fence;
  return rpc<bool>("release_semaphore", key, what.str(), [=](const CallCtx& c) {
    return sem_write(w, c, "release_semaphore", collection, key, [&] {
      return w->mem()->release_semaphore(collection, key, slot, uuid, fence);
    });
  });
}

// A fair waiter's renewal of its queue entry: crosses the network like every other write
// (a late one must find a passed entry gone, and only ever move an expiry later).
bool NodeStorage::renew_queue_entry(const std::string& collection, const std::string& key,
                                    std::int64_t index, const std::string& uuid,
                                    std::int64_t ticket, std::int64_t now_ms,
                                    std::int64_t expire_ms) {
  refuse(w_, "renew_queue_entry", uuid);
  World* w = &w_;
  Str what;
  what << key << " entry=" << index << " uuid=" << uuid << " ticket=" << ticket << " now=" << now_ms
       << " exp=" << expire_ms;
  return rpc<bool>("renew_queue_entry", key, what.str(), [=](const CallCtx& c) {
    w->turn_check(c, collection, key, uuid, ticket);
    return sem_write(w, c, "renew_queue_entry", collection, key, [&] {
      return w->mem()->renew_queue_entry(collection, key, index, uuid, ticket, now_ms, expire_ms);
    });
  });
}

bool NodeStorage::leave_queue(const std::string& collection, const std::string& key,
                              const std::string& uuid, std::int64_t ticket) {
  refuse(w_, "leave_queue", uuid);
  World* w = &w_;
  Str what;
  what << key << " uuid=" << uuid << " ticket=" << ticket;
  return rpc<bool>("leave_queue", key, what.str(), [=](const CallCtx& c) {
    return sem_write(w, c, "leave_queue", collection, key,
                     [&] { return w->mem()->leave_queue(collection, key, uuid, ticket); });
  });
}

void NodeStorage::ensure_status_indexes(const std::string& collection, std::int64_t ttl_s) {
  auto mem = w_.mem();
  rpc<bool>("ensure_status_indexes", "", collection, [mem, collection, ttl_s](const CallCtx&) {
    mem->ensure_status_indexes(collection, ttl_s);
    return true;
  });
}

void NodeStorage::put_status(const std::string& collection, const Document& doc) {
  // A member's report names its process (uuid, or _id): a crashed one reports no more.
  refuse(w_, "put_status", doc.get_string("uuid").value_or(doc.get_string("_id").value_or("")));
  auto mem = w_.mem();
  rpc<bool>("put_status", doc.get_string("key").value_or(""), doc.get_string("_id").value_or(""),
            [mem, collection, doc](const CallCtx&) {
              mem->put_status(collection, doc);
              return true;
            });
}

std::vector<Document> NodeStorage::list_status(const std::string& collection,
                                               const std::string& key) {
  auto mem = w_.mem();
  return rpc<std::vector<Document>>(
      "list_status", key, key,
      [mem, collection, key](const CallCtx&) { return mem->list_status(collection, key); });
}

bool NodeStorage::hand_over(const std::string& collection, const HandOver& h) {
  refuse(w_, "hand_over", h.from_uuid);
  World* w = &w_;
  Str what;
  what << h.key << " from=" << h.from_uuid << "/" << h.from_fence << " to=" << h.to_uuid << "/"
       << h.to_fence << " now=" << h.now_ms << " exp=" << h.expire_ms;
  return rpc<bool>("hand_over", h.key, what.str(), [=](const CallCtx& c) {
    const LockSnap before = w->snap_lock(collection, h.key);
    bool r = w->mem()->hand_over(collection, h);
    w->note_lock_write(c, "hand_over", collection, h.key, before, w->snap_lock(collection, h.key),
                       h.from_uuid);
    return r;
  });
}

}  // namespace sim
