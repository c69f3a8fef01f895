// The workload: what each simulated node does with the real core classes, and what each
// of them BELIEVES at any instant (the probes the checker reads after every step).
//
// Beliefs (a node "believes it holds" when):
//  * elector: leader_fence() (is_leader() and its token, read in one critical section);
//  * keep-alive lease / semaphore lease / read-write lock lease: not lost() and not being
//    closed;
//  * plain Locker / Semaphore / RwLock hold: the actor took it and has not started to release it,
//    the library still has that hold, and its lease end (lease_deadline_mono, the send of
//    the last successful write + ttl) minus the documented margin max(ttl/10,
//    2 x clock uncertainty + 50 ms) has not passed. The uncertainty is the larger of the
//    one when the hold was last written and the current one (a better sample taken later
//    does not shorten what the write risked).
#include <algorithm>

#include "exceptions.h"
#include "lease/lease.h"
#include "locker.h"
#include "partition/partitioner.h"
#include "semaphore/rwlock.h"
#include "semaphore/semaphore.h"
#include "world.h"

namespace sim {

using namespace mongoelector;

namespace {
std::string ms(std::int64_t v) { return std::to_string(v); }

struct Unregister {
  std::function<void()> fn;
  ~Unregister() {
    if (fn) fn();
  }
};

// The belief rule of a plain hold (Locker or Semaphore), see the file comment.
template <class Holder>
bool plain_believes(Holder& holder, bool holding, std::int64_t fence, std::int64_t u,
                    std::int64_t now) {
  if (!holding) return false;
  const auto h = holder.hold();
  if (!h || h->fence != fence) return false;
  const std::int64_t margin =
      renew_margin_ms(holder.ttl_ms(), std::max(u, holder.server_clock().uncertainty_ms()));
  return now < h->lease_start_mono + holder.ttl_ms() - margin;
}

Believer believer(int node, Kind kind, const char* coll, const std::string& key,
                  const std::string& uuid, const std::string& label,
                  std::function<std::optional<BeliefState>()> probe) {
  Believer b;
  b.node = node;
  b.kind = kind;
  b.coll = coll;
  b.key = key;
  b.uuid = uuid;
  b.label = label;
  b.probe = std::move(probe);
  return b;
}
}  // namespace

// A lease's close() waits in real time for a renewal step of it that is running (in a
// storage call) and for its on_lost callback: wait for both on the fake clock first.
void World::wait_quiet(NodeClock& c, const bool& in_callback) {
  for (;;) {
    if (sched_.free_running()) return;
    SimThread* rt = c.renewer_thread();
    const std::optional<std::int64_t> ends = rt ? sched_.call_ends_at(rt) : std::nullopt;
    if (!ends && !in_callback) return;
    c.sleep_until(std::max(sched_.mono() + 1, ends.value_or(0)));
  }
}

// How a lease is acquired (blocking or not), and its on_lost: sometimes slow, on the
// node's timer thread, flagged in `in_callback` while it runs.
KeepAliveOptions World::lease_options(Rng& r, NodeClock& c, int node, const std::string& key,
                                      const std::string& what, bool& in_callback,
                                      const std::string& uuid) {
  const std::int64_t T = p_.ttl;
  KeepAliveOptions ko;
  ko.blocking = r.chance(0.5);
  if (ko.blocking) ko.timeout_s = static_cast<double>(r.range(T / 4, T)) / 1000.0;
  ko.step_s = static_cast<double>(r.range(20, T / 5)) / 1000.0;
  ko.cancel = [this] { return stopping() || sched_.mono() >= p_.P; };
  const std::int64_t slow =
      (p_.p_slow_cb > 0 && r.chance(p_.p_slow_cb)) ? r.range(T / 10, p_.slow_cb_max) : 0;
  bool* flag = &in_callback;
  ko.on_lost = [this, flag, slow, &c, node, key, what, uuid] {
    if (!uuid.empty() && refused(uuid)) {  // its process crashed: a callback never runs
      trace(node, key, what + ": not run (its process crashed)");
      return;
    }
    *flag = true;
    trace(node, key,
          what + " on " + Scheduler::self_label() +
              (slow ? " (slow callback: " + ms(slow) + " ms)" : ""));
    if (slow) c.sleep_ms(slow);
    *flag = false;
  };
  return ko;
}

// ---- electors ---------------------------------------------------------------------------

void World::elector_actor(Node& n, const std::string& key, int idx) {
  Rng r(hash64(p_.seed, static_cast<std::uint64_t>(n.id), 0xE1EC, static_cast<std::uint64_t>(idx)));
  NodeClock& c = *n.clock;
  const std::int64_t T = p_.ttl;
  struct St {
    std::mutex mu;
    Rng rng;
    Elector* e = nullptr;
    std::string uuid;
    bool stop = false;     // restart: the loop stops itself from on_loop
    bool in_loss = false;  // on_leader_loss is running
    explicit St(std::uint64_t s) : rng(s) {}
  };
  auto st = std::make_shared<St>(
      hash64(p_.seed, static_cast<std::uint64_t>(n.id), 0xCB, static_cast<std::uint64_t>(idx)));
  ElectorOptions o;
  o.key = key;
  o.ttl_s = static_cast<double>(T) / 1000.0;
  o.report_status = r.chance(0.7);
  o.delete_on_release = r.chance(0.3);
  if (p_.priorities) {  // every member stands with a priority: published in its report
    const NodeRoles& nr = p_.roles[static_cast<std::size_t>(n.id)];
    o.report_status = true;
    o.priority = nr.priority;
    o.priority_stability_s = static_cast<double>(nr.priority_stability) / 1000.0;
  }
  const std::string label = n.name + ".elector." + key;
  const int node = n.id;
  ElectorCallbacks cb;
  // A crashed process runs no callback (kill -9): the uuid of the loop's process is st->uuid
  // until the next process stands, after the crashed one's threads are gone.
  auto dead = [this, st] {
    std::string u;
    {
      std::lock_guard<std::mutex> g(st->mu);
      u = st->uuid;
    }
    return !u.empty() && refused(u);
  };
  cb.on_leader = [this, dead, node, key, label] {
    if (dead()) {
      trace(node, key, label + ": on_leader not run (its process crashed)");
      return;
    }
    trace(node, key, label + ": on_leader");
  };
  cb.on_leader_loss = [this, st, dead, &c, node, key, label, T] {
    if (dead()) {
      trace(node, key, label + ": on_leader_loss not run (its process crashed)");
      return;
    }
    std::int64_t d = 0;
    {
      std::lock_guard<std::mutex> g(st->mu);
      if (p_.p_slow_cb > 0 && st->rng.chance(p_.p_slow_cb))
        d = st->rng.range(T / 10, p_.slow_cb_max);
      st->in_loss = true;
    }
    trace(node, key,
          label + ": on_leader_loss on " + Scheduler::self_label() +
              (d ? " (slow callback: " + ms(d) + " ms)" : ""));
    if (d) c.sleep_ms(d);
    std::lock_guard<std::mutex> g(st->mu);
    st->in_loss = false;
  };
  // resign(), transfer() and a restart's stop() from the loop's own callback: another
  // thread would wait, in real time, for the loop's poll mutex or thread while the loop
  // waits on the fake clock.
  cb.on_loop = [this, st, node, key, label, T] {
    Elector* e = st->e;
    if (!e || stopping()) return;
    bool stop;
    {
      std::lock_guard<std::mutex> g(st->mu);
      stop = st->stop;
    }
    if (stop) {  // the crashed process's loop ends: every call it sends is refused
      trace(node, key, label + ": stop() (the process crashed: its calls are not sent)");
      e->stop();
      return;
    }
    if (sched_.mono() >= p_.F || !e->is_leader()) return;
    bool resign;
    std::int64_t hold = 0;
    std::string target;
    {
      std::lock_guard<std::mutex> g(st->mu);
      if (!st->rng.chance(p_.p_handover)) return;
      resign = st->rng.chance(0.5);
      hold = st->rng.range(0, T);
      std::vector<std::string> others;
      {
        std::lock_guard<std::mutex> g2(mu_);
        for (const auto& u : elector_uuids_.at(key))
          if (u != st->uuid) others.push_back(u);
      }
      if (others.empty())
        resign = true;
      else
        target = st->rng.pick(others);
    }
    try {
      if (resign) {
        trace(node, key, label + ": resign(hold_off " + ms(hold) + " ms)");
        e->resign(static_cast<double>(hold) / 1000.0);
      } else {
        trace(node, key, label + ": transfer(" + target + ")");
        e->transfer(target);
        trace(node, key, label + ": transfer returned");
      }
    } catch (const std::exception& ex) {
      trace(node, key, label + (resign ? ": resign: " : ": transfer: ") + ex.what());
    }
  };
  for (int gen = 0;; ++gen) {
    const std::string uuid = uuid_for(n.id, key) + (gen ? "-r" + std::to_string(gen) : "");
    const std::string loop_label = label + (gen ? "-r" + std::to_string(gen) : "");
    if (gen) {
      std::lock_guard<std::mutex> g(mu_);
      elector_uuids_[key].push_back(uuid);
    }
    std::shared_ptr<Elector> e;
    while (!e) {
      if (stopping() || (gen == 0 && sched_.mono() >= p_.P)) return;  // a restart completes
      try {
        e = std::make_shared<Elector>(n.storage, o, cb, n.clock,
                                      Identity{uuid, "host-" + n.name, 1000 + n.id});
      } catch (const std::exception& ex) {
        trace(node, key, label + ": constructor: " + ex.what());
        c.sleep_ms(r.range(10, T / 4));
      }
    }
    {
      std::lock_guard<std::mutex> g(st->mu);
      st->e = e.get();
      st->uuid = uuid;
      st->stop = false;
    }
    Elector* ep = e.get();
    const std::uint64_t bid =
        add_believer(believer(node, Kind::Elector, kElectColl, key, uuid, loop_label,
                              [ep]() -> std::optional<BeliefState> {
                                const std::optional<std::int64_t> f = ep->leader_fence();
                                if (!f) return std::nullopt;
                                return BeliefState{*f, -1};
                              }));
    {
      std::lock_guard<std::mutex> g(mu_);
      n.electors.push_back(e);
    }
    sched_.set_spawn_label(node, loop_label);
    e->start();
    sched_.await_registered();
    // A crash (kill -9) and restart of the process, now and then, before the faults end:
    // from the crash no call naming its uuid is sent (no release, no report, no renewal),
    // no callback runs and its belief ends; calls sent before still land. Its hold expires
    // within a ttl (I11). The loop is then stopped (its calls refused), and a new process
    // with a new uuid stands.
    if (p_.p_restart <= 0) return;
    for (;;) {
      c.sleep_ms(r.range(T, 3 * T));
      if (stopping() || sched_.mono() >= p_.F - T) return;  // restarted well before F
      if (r.chance(p_.p_restart)) break;
    }
    ++crashes_;
    kill_process(uuid);
    remove_believer(bid);
    trace(node, key, loop_label + ": the process of " + uuid + " crashed (kill -9)");
    {
      std::lock_guard<std::mutex> g(st->mu);
      st->stop = true;
    }
    // ~Elector joins the loop thread and waits for a deadline task that runs: both in
    // real time, so wait for them on the fake clock first.
    for (;;) {
      bool loss;
      {
        std::lock_guard<std::mutex> g(st->mu);
        loss = st->in_loss;
      }
      if (stopping()) return;  // teardown stops it
      if (!sched_.find(loop_label) && !loss) break;
      c.sleep_ms(5);
    }
    {
      std::lock_guard<std::mutex> g(st->mu);
      st->e = nullptr;
    }
    {
      std::lock_guard<std::mutex> g(mu_);
      n.electors.erase(std::remove(n.electors.begin(), n.electors.end(), e), n.electors.end());
    }
    e.reset();
    trace(node, key, label + ": process restarted");
    c.sleep_ms(r.range(1, T / 2));
  }
}

// ---- plain lockers ----------------------------------------------------------------------

void World::locker_actor(Node& n, int idx) {
  Rng r(hash64(p_.seed, static_cast<std::uint64_t>(n.id), 0x10C, static_cast<std::uint64_t>(idx)));
  // Crashes, from a stream of their own (every schedule).
  Rng fr(
      hash64(p_.seed, static_cast<std::uint64_t>(n.id), 0xFA3F, static_cast<std::uint64_t>(idx)));
  NodeClock& c = *n.clock;
  const std::int64_t T = p_.ttl;
  const int node = n.id;
  const bool extra = idx == kFairLockerIdx;  // Params::fair_locks
  const std::string key = extra ? p_.fair_lock_key : r.pick(p_.lock_keys);
  const std::string label = n.name + ".locker" + std::to_string(idx);
  LockerOptions o;
  o.key = key;
  o.ttl_s = static_cast<double>(T) / 1000.0;
  o.delete_on_release = r.chance(0.2);
  o.ensure_indexes = r.chance(0.5);
  // Deferred tokens: the hold is named by the document's counter until token() is asked.
  o.lazy_token = r.chance(0.3);
  o.fair = extra && p_.roles[static_cast<std::size_t>(node)].fair_lock == NodeRoles::kFairLocker;
  auto cancel = [this] { return stopping() || sched_.mono() >= p_.P; };
  struct {
    bool holding = false, in_token = false;
    // acq: the server's true time when the acquire was sent; done: when it returned.
    std::int64_t fence = 0, u = 0, acq = 0, done = 0;
  } st;
  // The locker's process: its uuid (a new one after each crash), its instance, its belief.
  int gen = 0;
  std::string uuid;
  std::shared_ptr<Locker> lk;
  std::uint64_t bid = 0;
  Unregister unreg{[this, &bid] {
    if (bid) remove_believer(bid);
  }};
  auto believes = [&] { return plain_believes(*lk, st.holding, st.fence, st.u, sched_.mono()); };
  // Stands the locker's process up (false: the actor stopped before it could).
  auto open = [&] {
    uuid = uuid_for(node, "lk" + std::to_string(idx) + (gen ? "-r" + ms(gen) : std::string()));
    if (o.fair && gen) add_fair_locker(uuid);  // the first is registered at spawn
    lk = nullptr;
    while (!lk) {
      if (cancel()) return false;
      try {
        lk = std::make_shared<Locker>(n.storage, o, n.clock,
                                      Identity{uuid, "host-" + n.name, 1000 + node});
      } catch (const std::exception& ex) {
        trace(node, key, label + ": constructor: " + ex.what());
        c.sleep_ms(r.range(10, T / 4));
      }
    }
    bid = add_believer(believer(node, Kind::Lock, kLockColl, key, uuid, label,
                                [&]() -> std::optional<BeliefState> {
                                  if (!believes()) return std::nullopt;
                                  return BeliefState{st.fence, -1, st.in_token};
                                }));
    return true;
  };
  // A kill -9 of the locker's process, holding or waiting (SimThread::crashed: a blocking
  // acquire's cancel crashed it, so it did not leave the fair queue): no call naming its
  // uuid is sent from now on and its belief ends; calls sent before still land. Its lock
  // and its queue entry expire within a ttl (I11), and a new process stands.
  auto crash = [&] {
    ++crashes_;
    kill_process(uuid);
    remove_believer(bid);
    bid = 0;
    trace(node, key,
          label + ": the process of " + uuid + " crashed (kill -9, " +
              (st.holding ? "holding" : "waiting") + "): a new one starts");
    st.holding = false;
    if (SimThread* t = Scheduler::self()) t->crashed = false;
    ++gen;
    return open();
  };
  if (!open()) return;
  auto took = [&](std::int64_t token, const std::string& how) {
    const std::optional<Hold> h = lk->hold();
    st.holding = true;
    st.fence = h ? h->fence : token;
    st.u = lk->server_clock().uncertainty_ms();
    st.acq = h ? server_time_at(h->lease_start_mono) : sched_.wall();
    st.done = sched_.wall();
    trace(node, key,
          label + " " + how + ": token " + ms(token) + ", clock uncertainty " + ms(st.u) + " ms");
    if (token == 0 && r.chance(0.7)) {  // deferred: the user asks for it (two round trips)
      trace(node, key, label + ": token()");
      st.in_token = true;
      std::optional<std::int64_t> t;
      try {
        t = lk->token();
      } catch (...) {
        st.in_token = false;
        throw;
      }
      st.in_token = false;
      trace(node, key, label + ": token() -> " + (t ? ms(*t) : "none (the hold is gone)"));
      if (t)
        st.fence = *t;
      else
        st.holding = false;
    }
  };
  auto window = [&] {
    const std::int64_t w = p_.window_of.at(key);
    trace(node, key, label + ": claim_window(" + ms(w) + " ms)");
    const std::optional<std::int64_t> start = lk->claim_window(static_cast<double>(w) / 1000.0);
    trace(node, key,
          label + ": claim_window -> " + (start ? "won window " + ms(*start) : "not won"));
    if (start) note_window(key, *start, w, uuid, node);
  };
  while (!cancel()) {
    c.sleep_ms(r.range(1, T / 3));
    if (cancel()) break;
    if (st.holding && fr.chance(0.03)) {
      if (!crash()) return;
      continue;
    }
    const double u = r.unit();
    try {
      if (!st.holding) {
        if (u < 0.15) {
          window();
        } else if (u < 0.5) {
          trace(node, key, label + ": acquire(non-blocking)");
          took(lk->acquire(false), "acquired");
        } else if (u < 0.85) {
          const std::int64_t timeout = r.range(T / 4, 2 * T), step = r.range(20, T / 5);
          trace(node, key,
                label + ": acquire(blocking, timeout " + ms(timeout) + ", step " + ms(step) + ")");
          took(lk->acquire(true, static_cast<double>(timeout) / 1000.0,
                           static_cast<double>(step) / 1000.0, false,
                           fr.chance(0.15) ? crash_at(sched_.mono() + fr.range(0, T), cancel)
                                           : std::function<bool()>(cancel)),
               "acquired");
        }
      } else {
        if (u < 0.35) {
          trace(node, key, label + ": touch()");
          const std::optional<std::int64_t> e = lk->touch();
          if (!e) {
            st.holding = false;
            trace(node, key, label + ": touch -> not ours any more");
          } else {
            st.u = std::max(st.u, lk->server_clock().uncertainty_ms());
            trace(node, key, label + ": touch -> ts_expire " + ms(*e));
          }
        } else if (u < 0.6) {
          st.holding = false;  // the user stops using it before the release is sent
          trace(node, key, label + ": release()");
          lk->release();
          trace(node, key, label + ": released");
        } else if (u < 0.8) {
          const std::int64_t m = r.range(0, 2 * T);
          const bool valid = believes();
          st.holding = false;
          if (valid) busy_until(key, min_hold_end_bound(st.done, m));
          const std::uint64_t id = valid ? begin_min_hold(key, uuid, st.acq, m) : 0;
          trace(node, key,
                label + ": release_min_hold(" + ms(m) + " ms), acquired at server time " +
                    ms(st.acq));
          try {
            const std::optional<std::int64_t> until =
                lk->release_min_hold(static_cast<double>(m) / 1000.0);
            trace(node, key,
                  label + ": release_min_hold -> " +
                      (until ? "taken until " + ms(*until) : "released now"));
            if (id) end_min_hold(id, true);
          } catch (...) {
            if (id) end_min_hold(id, false);
            throw;
          }
        } else if (u < 0.9) {
          window();
        }
        // else: keeps the hold without renewing (it lapses at its deadline)
      }
    } catch (const std::exception& ex) {
      trace(node, key, label + ": " + ex.what());
    }
    if (crashed() && !crash()) return;
  }
  if (st.holding) {
    st.holding = false;
    try {
      lk->release();
    } catch (const std::exception& ex) {
      trace(node, key, label + ": final release: " + ex.what());
    }
  }
}

// ---- keep-alive leases (several per node: batched renewals) ---------------------------------

void World::lease_actor(Node& n) {
  Rng r(hash64(p_.seed, static_cast<std::uint64_t>(n.id), 0x1EA5E));
  NodeClock& c = *n.clock;
  const std::int64_t T = p_.ttl;
  const int node = n.id;
  const std::string label = n.name + ".leases";
  struct Slot {
    std::string key, uuid;
    std::shared_ptr<Locker> locker;
    std::unique_ptr<KeepAliveLease> lease;
    bool closing = false;
    bool in_cb = false;
    std::uint64_t bid = 0;
    int gen = 0;
    std::int64_t acq = 0, done = 0;  // server's true time: acquire sent, acquire returned
  };
  std::vector<std::unique_ptr<Slot>> slots;
  std::vector<std::string> keys = p_.lock_keys;
  for (std::size_t i = keys.size(); i > 1; --i) std::swap(keys[i - 1], keys[r.next() % i]);
  const std::size_t nslots =
      static_cast<std::size_t>(r.range(2, static_cast<std::int64_t>(keys.size())));
  for (std::size_t i = 0; i < nslots; ++i) {
    slots.push_back(std::make_unique<Slot>());
    slots.back()->key = keys[i];
  }
  auto cancel = [this] { return stopping() || sched_.mono() >= p_.P; };
  // close() waits in real time for a renewal step of the lease that is running, and for
  // its on_lost: wait for both on the fake clock first.
  auto quiet = [&](Slot& s) { wait_quiet(c, s.in_cb); };
  auto close = [&](Slot& s, bool min_hold) {
    s.closing = true;  // the user stops relying on it before closing
    quiet(s);
    const bool lost = s.lease->lost();
    std::int64_t m = 0;
    std::uint64_t id = 0;  // the minimum hold checked (I5), as for a locker's
    if (min_hold && !lost) {
      m = r.range(1, 2 * T);
      busy_until(s.key, min_hold_end_bound(s.done, m));
      id = begin_min_hold(s.key, s.uuid, s.acq, m);
    }
    trace(node, s.key,
          label + ": close lease " + s.key + " (" + s.uuid + ")" +
              (lost ? " [lost: " + s.lease->lost_reason() + "]" : "") +
              (m ? " with min_hold " + ms(m) + " ms" : ""));
    try {
      s.lease->close(static_cast<double>(m) / 1000.0);
      if (id) end_min_hold(id, true);
    } catch (const std::exception& ex) {
      if (id) end_min_hold(id, false);
      trace(node, s.key, label + ": close: " + ex.what());
    }
    s.lease.reset();
    remove_believer(s.bid);
    s.bid = 0;
    s.closing = false;
    s.locker.reset();
  };
  auto open = [&](Slot& s) {
    ++s.gen;
    s.uuid = uuid_for(node, "ka-" + s.key + "-" + std::to_string(s.gen));
    LockerOptions o;
    o.key = s.key;
    o.ttl_s = static_cast<double>(T) / 1000.0;
    o.ensure_indexes = false;
    o.delete_on_release = r.chance(0.2);
    s.locker = std::make_shared<Locker>(n.storage, o, n.clock,
                                        Identity{s.uuid, "host-" + n.name, 1000 + node});
    Slot* sp = &s;
    KeepAliveOptions ko = lease_options(r, c, node, s.key,
                                        label + ": on_lost of lease " + s.key + " (" + s.uuid + ")",
                                        sp->in_cb, s.uuid);
    trace(node, s.key,
          label + ": lease " + s.key + " (" + s.uuid + ") acquire(" +
              (ko.blocking ? "blocking" : "non-blocking") + ")");
    try {
      s.lease = KeepAliveLease::acquire(s.locker, ko);
    } catch (const std::exception& ex) {
      trace(node, s.key, label + ": lease " + s.key + ": " + ex.what());
      s.locker.reset();
      return;
    }
    const std::optional<Hold> h = s.locker->hold();
    s.acq = h ? server_time_at(h->lease_start_mono) : sched_.wall();
    s.done = sched_.wall();
    trace(node, s.key,
          label + ": lease " + s.key + " (" + s.uuid + ") held, token " + ms(s.lease->fence()) +
              ", renew deadline " + ms(s.lease->renew_deadline_mono()));
    s.bid = add_believer(believer(
        node, Kind::Lease, kLockColl, s.key, s.uuid, label, [sp]() -> std::optional<BeliefState> {
          if (!sp->lease || sp->closing || sp->lease->lost()) return std::nullopt;
          return BeliefState{sp->lease->fence(), sp->lease->renew_deadline_mono()};
        }));
  };
  // Crashes (fair schedules, from a stream of their own): the actor is one process, whose
  // leases share the node's renewer. A kill -9 ends them all: from then on no call naming
  // their uuids is sent (the renewer's batches go without them), their on_lost never runs,
  // their beliefs end; calls sent before still land. Their locks expire within a ttl (I11).
  // The actor goes on as a new process (each slot's next lease has a new uuid). With
  // break_crash the leases live on (proof mode of I11).
  Rng fr(hash64(p_.seed, static_cast<std::uint64_t>(n.id), 0xFA3F));
  struct Dead {
    Slot* slot;  // its in_cb: an on_lost that began before the crash may still run
    std::shared_ptr<Locker> locker;
    std::unique_ptr<KeepAliveLease> lease;
  };
  std::vector<Dead> dead;
  auto crash = [&] {
    ++crashes_;
    trace(node, slots.front()->key,
          label + ": the process crashed (kill -9)" +
              (o_.break_crash ? ": NOT its leases (--break-crash), they live on" : ""));
    for (auto& sp : slots) {
      Slot& s = *sp;
      if (!s.lease) continue;
      ++dead_leases_;
      kill_process(s.uuid);
      trace(node, s.key, label + ": lease " + s.key + " (" + s.uuid + ") dies with the process");
      if (o_.break_crash) continue;
      remove_believer(s.bid);
      s.bid = 0;
      s.closing = false;
      dead.push_back(Dead{&s, std::move(s.locker), std::move(s.lease)});
      s.locker.reset();
      s.lease.reset();
    }
  };
  while (!cancel()) {
    c.sleep_ms(r.range(1, T / 3));
    if (cancel()) break;
    if (p_.fair && sched_.mono() < p_.F && fr.chance(0.03)) {
      crash();
      continue;
    }
    Slot& s = *slots[static_cast<std::size_t>(r.next() % slots.size())];
    try {
      if (!s.lease) {
        open(s);
      } else if (s.lease->lost() || r.chance(0.3)) {
        close(s, r.chance(0.3));
      }
    } catch (const std::exception& ex) {
      trace(node, s.key, label + ": " + ex.what());
    }
  }
  for (auto& s : slots)
    if (s->lease) close(*s, false);
  for (Dead& d : dead) {  // every call refused: nothing reaches the server
    quiet(*d.slot);
    try {
      d.lease->close();
    } catch (const std::exception& ex) {
      trace(node, "", label + ": close of a crashed lease: " + ex.what());
    }
    d.lease.reset();
    d.locker.reset();
  }
}

// ---- slot holds (semaphores, read-write locks) ----------------------------------------------

void World::open_lease(
    ActorLease& ls, Rng& r, Node& n, Kind kind, const char* coll, const std::string& key,
    const std::string& label, const std::string& what,
    const std::function<std::unique_ptr<KeepAliveLease>(KeepAliveOptions)>& acquire) {
  const int node = n.id;
  KeepAliveOptions ko =
      lease_options(r, *n.clock, node, key, label + ": on_lost of " + what + " (" + ls.uuid + ")",
                    ls.in_cb, ls.uuid);
  trace(node, key, label + ": " + what + " (" + ls.uuid + ") acquire");
  try {
    ls.lease = acquire(ko);
  } catch (...) {
    ls.holder.reset();
    throw;
  }
  trace(node, key, label + ": " + what + " held, token " + ms(ls.lease->fence()));
  ActorLease* lp = &ls;
  ls.bid = add_believer(
      believer(node, kind, coll, key, ls.uuid, label, [lp]() -> std::optional<BeliefState> {
        if (!lp->lease || lp->closing || lp->lease->lost()) return std::nullopt;
        return BeliefState{lp->lease->fence(), lp->lease->renew_deadline_mono(), false, lp->write};
      }));
}

void World::close_lease(ActorLease& ls, Node& n, const std::string& key, const std::string& label,
                        const std::string& what) {
  ls.closing = true;
  wait_quiet(*n.clock, ls.in_cb);
  trace(n.id, key,
        label + ": close " + what + " (" + ls.uuid + ")" +
            (ls.lease->lost() ? " [lost: " + ls.lease->lost_reason() + "]" : ""));
  ls.lease->close();
  ls.lease.reset();
  remove_believer(ls.bid);
  ls.bid = 0;
  ls.closing = false;
  ls.holder.reset();
}

void World::crash_lease(ActorLease& ls, Node& n, const std::string& key, const std::string& label) {
  if (!ls.lease) return;
  ++dead_leases_;
  kill_process(ls.uuid);
  trace(n.id, key,
        label + ": its lease (" + ls.uuid + ") dies with the process" +
            (o_.break_crash ? ": NOT (--break-crash), it lives on" : ": its renewals stop"));
  if (o_.break_crash) return;
  remove_believer(ls.bid);
  ls.bid = 0;
  ls.closing = false;
  ls.dead.emplace_back(std::move(ls.holder), std::move(ls.lease));
  ls.holder.reset();
  ls.lease.reset();
}

void World::bury_leases(ActorLease& ls, Node& n, const std::string& key, const std::string& label) {
  for (auto& [holder, lease] : ls.dead) {
    wait_quiet(*n.clock, ls.in_cb);
    try {
      lease->close();  // every call refused: nothing reaches the server
    } catch (const std::exception& ex) {
      trace(n.id, key, label + ": close of a crashed lease: " + ex.what());
    }
    lease.reset();
    holder.reset();
  }
  ls.dead.clear();
}

void World::stop_slot_actor(ActorLease& ls, PlainHold& st, Holdable& plain, Node& n,
                            const std::string& key, const std::string& label,
                            const std::string& what) {
  if (ls.lease) close_lease(ls, n, key, label, what);
  bury_leases(ls, n, key, label);
  if (!st.holding) return;
  st.holding = false;
  try {
    plain.release();
  } catch (const std::exception& ex) {
    trace(n.id, key, label + ": final release: " + ex.what());
  }
}

template <class Holder>
void World::touch_or_release(Holder& holder, PlainHold& st, Rng& r, int node,
                             const std::string& key, const std::string& label, double p_release) {
  if (r.chance(0.5)) {
    trace(node, key, label + ": touch()");
    const std::optional<std::int64_t> e = holder.touch();
    if (!e)
      st.holding = false;
    else
      st.u = std::max(st.u, holder.server_clock().uncertainty_ms());
    trace(node, key, label + ": touch -> " + (e ? ms(*e) : "not ours any more"));
  } else if (p_release >= 1 || r.chance(p_release)) {
    st.holding = false;
    trace(node, key, label + ": release()");
    holder.release();
  }
  // else: keeps the hold without renewing (it lapses at its deadline)
}

// ---- plain slot holds that crash (fair schedules) -------------------------------------------

template <class H>
void World::open_plain(PlainInstance<H>& pi, PlainHold& st, Node& n) {
  if (pi.bid) remove_believer(pi.bid);
  pi.uuid = uuid_for(n.id, pi.gen == 0 ? pi.what : pi.what + "-r" + ms(pi.gen));
  pi.h = pi.make(pi.uuid);
  PlainInstance<H>* pp = &pi;
  PlainHold* sp = &st;
  pi.bid = add_believer(
      believer(n.id, pi.kind, pi.coll, pi.key, pi.uuid, pi.label,
               [this, pp, sp]() -> std::optional<BeliefState> {
                 if (!plain_believes(*pp->h, sp->holding, sp->fence, sp->u, sched_.mono()))
                   return std::nullopt;
                 return BeliefState{sp->fence, -1, false, sp->write};
               }));
}

template <class H>
void World::restart_plain(PlainInstance<H>& pi, PlainHold& st, Node& n) {
  ++crashes_;
  kill_process(pi.uuid);
  trace(n.id, pi.key,
        pi.label + ": the process of " + pi.uuid + " crashed (" +
            (st.holding ? "holding" : "waiting") + "): a new one starts");
  st.holding = false;
  ++pi.gen;
  open_plain(pi, st, n);
  if (SimThread* t = Scheduler::self()) t->crashed = false;
}

std::function<bool()> World::crashing_cancel(Rng& fr, std::int64_t within_ms,
                                             std::function<bool()> cancel) {
  if (!p_.fair || !fr.chance(0.2)) return cancel;
  return crash_at(sched_.mono() + fr.range(0, within_ms), std::move(cancel));
}

std::function<bool()> World::crash_at(std::int64_t at, std::function<bool()> cancel) {
  return [this, at, cancel = std::move(cancel)] {
    if (sched_.mono() < at) return cancel();
    if (SimThread* t = Scheduler::self()) t->crashed = true;
    return true;
  };
}

bool World::crashed() {
  const SimThread* t = Scheduler::self();
  return t && t->crashed;
}

// ---- semaphores -------------------------------------------------------------------------------

void World::semaphore_actor(Node& n) {
  Rng r(hash64(p_.seed, static_cast<std::uint64_t>(n.id), 0x5E3A));
  Rng fr(hash64(p_.seed, static_cast<std::uint64_t>(n.id), 0xFA1F));  // crashes (fair)
  NodeClock& c = *n.clock;
  const std::int64_t T = p_.ttl;
  const int node = n.id;
  const std::string key = "s0";
  const std::string label = n.name + ".semaphore";
  auto cancel = [this] { return stopping() || sched_.mono() >= p_.P; };
  auto options = [&] {
    SemaphoreOptions o;
    o.key = key;
    o.limit = p_.sem_limit;
    o.ttl_s = static_cast<double>(T) / 1000.0;
    o.fair = p_.roles[static_cast<std::size_t>(node)].fair_sem;
    return o;
  };
  // A plain hold.
  PlainHold st;
  PlainInstance<Semaphore> pi{Kind::Sem, kSemColl, key, label, "sem", [&](const std::string& uuid) {
                                return std::make_shared<Semaphore>(
                                    n.storage, options(), n.clock,
                                    Identity{uuid, "host-" + n.name, 1000 + node});
                              }};
  open_plain(pi, st, n);
  Unregister unreg{[this, &pi] { remove_believer(pi.bid); }};
  ActorLease ls;  // a lease hold (its own instance per hold)
  while (!cancel()) {
    c.sleep_ms(r.range(1, T / 3));
    if (cancel()) break;
    if (p_.fair && st.holding && fr.chance(0.04)) {
      crash_lease(ls, n, key, label);
      restart_plain(pi, st, n);
      continue;
    }
    const double u = r.unit();
    try {
      if (u < 0.5) {  // the plain hold
        Semaphore& sem = *pi.h;
        if (!st.holding) {
          const bool blocking = r.chance(p_.fair ? 0.8 : 0.5);
          trace(node, key, label + ": acquire(" + (blocking ? "blocking" : "non-blocking") + ")");
          const std::int64_t f =
              blocking ? sem.acquire(true, static_cast<double>(r.range(T / 4, T)) / 1000.0,
                                     static_cast<double>(r.range(20, T / 5)) / 1000.0,
                                     crashing_cancel(fr, T, cancel))
                       : sem.acquire(false);
          const std::optional<SemaphoreHold> h = sem.hold();
          st.holding = true;
          st.fence = h ? h->fence : f;
          st.u = sem.server_clock().uncertainty_ms();
          trace(node, key, label + ": acquired slot " + ms(h ? h->slot : -1) + ", token " + ms(f));
        } else {
          touch_or_release(sem, st, r, node, key, label, 1.0);
        }
      } else {  // the lease
        if (!ls.lease) {
          ++ls.gen;
          ls.uuid = uuid_for(node, "seml-" + std::to_string(ls.gen));
          auto s = std::make_shared<Semaphore>(n.storage, options(), n.clock,
                                               Identity{ls.uuid, "host-" + n.name, 1000 + node});
          ls.holder = s;
          open_lease(ls, r, n, Kind::SemLease, kSemColl, key, label, "semaphore lease",
                     [&](KeepAliveOptions ko) { return SemaphoreLease::acquire(s, ko); });
        } else if (ls.lease->lost() || r.chance(0.4)) {
          close_lease(ls, n, key, label, "semaphore lease");
        }
      }
    } catch (const std::exception& ex) {
      trace(node, key, label + ": " + ex.what());
    }
    if (crashed()) {
      crash_lease(ls, n, key, label);
      restart_plain(pi, st, n);
    }
  }
  stop_slot_actor(ls, st, *pi.h, n, key, label, "semaphore lease");
}

// ---- read-write locks ---------------------------------------------------------------------------

// Reads and writes of "rw0": a plain hold (either side, blocking or not, touched,
// released or left to lapse) and a keep-alive lease (its own instance per hold). Writer
// preference is drawn per instance: instances with and without it share the key.
void World::rwlock_actor(Node& n) {
  Rng r(hash64(p_.seed, static_cast<std::uint64_t>(n.id), 0x2A1));
  Rng fr(hash64(p_.seed, static_cast<std::uint64_t>(n.id), 0xFA2F));  // crashes (fair)
  NodeClock& c = *n.clock;
  const std::int64_t T = p_.ttl;
  const int node = n.id;
  const std::string key = "rw0";
  const std::string label = n.name + ".rwlock";
  auto cancel = [this] { return stopping() || sched_.mono() >= p_.P; };
  auto make = [&](const std::string& uuid) {
    RwLockOptions o;
    o.key = key;
    o.max_readers = p_.rw_readers;
    o.ttl_s = static_cast<double>(T) / 1000.0;
    o.writer_preference = r.chance(0.7);
    o.fair = p_.roles[static_cast<std::size_t>(node)].fair_rw;
    return std::make_shared<RwLock>(n.storage, o, n.clock,
                                    Identity{uuid, "host-" + n.name, 1000 + node});
  };
  auto side_of = [&] { return r.chance(0.5) ? RwSide::Write : RwSide::Read; };
  // A plain hold.
  PlainHold st;
  PlainInstance<RwLock> pi{Kind::Rw, kRwColl, key, label, "rw", make};
  open_plain(pi, st, n);
  Unregister unreg{[this, &pi] { remove_believer(pi.bid); }};
  ActorLease ls;  // a lease hold (its own instance per hold)
  while (!cancel()) {
    c.sleep_ms(r.range(1, T / 3));
    if (cancel()) break;
    if (p_.fair && st.holding && fr.chance(0.04)) {
      crash_lease(ls, n, key, label);
      restart_plain(pi, st, n);
      continue;
    }
    const double u = r.unit();
    try {
      if (u < 0.55) {  // the plain hold
        RwLock& rw = *pi.h;
        if (!st.holding) {
          const RwSide side = side_of();
          const bool blocking = r.chance(p_.fair ? 0.8 : 0.6);
          trace(node, key,
                label + ": acquire(" + side_name(side) + ", " +
                    (blocking ? "blocking" : "non-blocking") + ")");
          const std::int64_t f =
              blocking ? rw.acquire(side, true, static_cast<double>(r.range(T / 4, T)) / 1000.0,
                                    static_cast<double>(r.range(20, T / 5)) / 1000.0,
                                    crashing_cancel(fr, T, cancel))
                       : rw.acquire(side, false);
          const std::optional<Hold> h = rw.hold();
          st.holding = true;
          st.write = side == RwSide::Write;
          st.fence = h ? h->fence : f;
          st.u = rw.server_clock().uncertainty_ms();
          trace(node, key,
                label + ": acquired " + side_name(side) + " (slot " + ms(h ? h->slot : -1) +
                    "), token " + ms(f));
        } else {
          touch_or_release(rw, st, r, node, key, label, 0.8);
        }
      } else {  // the lease
        if (!ls.lease) {
          ++ls.gen;
          ls.uuid = uuid_for(node, "rwl-" + std::to_string(ls.gen));
          auto h = make(ls.uuid);
          const RwSide side = side_of();
          ls.holder = h;
          ls.write = side == RwSide::Write;
          open_lease(ls, r, n, Kind::RwLease, kRwColl, key, label,
                     std::string("rwlock lease (") + side_name(side) + ")",
                     [&](KeepAliveOptions ko) { return KeepAliveLease::acquire(h, side, ko); });
        } else if (ls.lease->lost() || r.chance(0.4)) {
          close_lease(ls, n, key, label, "rwlock lease");
        }
      }
    } catch (const std::exception& ex) {
      trace(node, key, label + ": " + ex.what());
    }
    if (crashed()) {
      crash_lease(ls, n, key, label);
      restart_plain(pi, st, n);
    }
  }
  stop_slot_actor(ls, st, *pi.h, n, key, label, "rwlock lease");
}

// The prober's turn at "rw0": a write, then a read, each at once.
void World::probe_rwlock(Node& n) {
  RwLockOptions o;
  o.key = "rw0";
  o.max_readers = p_.rw_readers;
  o.ttl_s = static_cast<double>(p_.ttl) / 1000.0;
  RwLock rw(n.storage, o, n.clock, Identity{"probe-rw0", "host-probe", 1});
  for (const RwSide side : {RwSide::Write, RwSide::Read}) {
    try {
      const std::optional<std::int64_t> t = rw.try_acquire(side);
      if (!t) {
        const std::optional<SemaphoreDoc> d = mem_->read_semaphore(kRwColl, "rw0");
        std::string held;
        if (d)
          for (std::size_t i = 0; i < d->slots.size(); ++i)
            if (d->slots[i].held_at(sched_.wall()))
              held += " slot " + ms(static_cast<std::int64_t>(i)) + " " + d->slots[i].uuid +
                      " until " + ms(d->slots[i].ts_expire->ms) + ";";
        violate("I6", "rw0",
                std::string("read-write lock rw0 cannot be taken for ") + side_name(side) + " at " +
                    ms(sched_.mono()) + " although every holder stopped at " + ms(p_.P) +
                    "; held at server time " + ms(sched_.wall()) + ":" + held);
        return;
      }
      trace(n.id, "rw0",
            std::string("probe took rw0 for ") + side_name(side) + " (token " + ms(*t) + ")");
      rw.release();
    } catch (const std::exception& ex) {
      violate("I6", "rw0",
              std::string("probe of read-write lock rw0 failed on a quiet network: ") + ex.what());
      return;
    }
  }
}

// ---- partitioners ----------------------------------------------------------------------------

// A member of group kPartGroup: joins, and now and then (before F - ttl) leaves and joins
// again as a new process (new uuid). Its belief of each partition is owned() (the lease
// not lost, no release under way); with RunOptions::break_partitions, what its callbacks
// told it instead (proof mode). on_revoked is slow now and then before F.
void World::partitioner_actor(Node& n) {
  Rng r(hash64(p_.seed, static_cast<std::uint64_t>(n.id), 0x9A47));
  NodeClock& c = *n.clock;
  const std::int64_t T = p_.ttl;
  const int node = n.id;
  const NodeRoles& nr = p_.roles[static_cast<std::size_t>(n.id)];
  struct St {
    std::mutex mu;
    Rng rng;
    bool in_cb = false;                         // a callback sleeps
    std::map<std::int64_t, std::int64_t> told;  // break_partitions: the callbacks' belief
    explicit St(std::uint64_t s) : rng(s) {}
  };
  for (int gen = 0;; ++gen) {
    auto st = std::make_shared<St>(
        hash64(p_.seed, static_cast<std::uint64_t>(n.id), 0x9A48, static_cast<std::uint64_t>(gen)));
    const std::string sfx = gen ? "-r" + std::to_string(gen) : "";
    const std::string uuid = uuid_for(node, "part") + sfx;
    const std::string label = n.name + ".partitioner" + sfx;
    PartitionerOptions o;
    o.group = kPartGroup;
    o.partitions = p_.part_n;
    o.ttl_s = static_cast<double>(T) / 1000.0;
    o.poll_s = static_cast<double>(nr.part_poll) / 1000.0;
    o.ensure_indexes = r.chance(0.5);
    PartitionerCallbacks cb;
    // A crashed process runs no callback (kill -9).
    cb.on_assigned = [this, st, node, label, uuid](std::int64_t part, std::int64_t token) {
      if (refused(uuid)) {
        trace(node, partition_key(kPartGroup, part),
              label + ": on_assigned(" + ms(part) + ") not run (its process crashed)");
        return;
      }
      trace(node, partition_key(kPartGroup, part),
            label + ": on_assigned(" + ms(part) + ", token " + ms(token) + ") on " +
                Scheduler::self_label());
      std::lock_guard<std::mutex> g(st->mu);
      st->told[part] = token;
    };
    cb.on_revoked = [this, st, &c, node, label, T, uuid](std::int64_t part) {
      if (refused(uuid)) {
        trace(node, partition_key(kPartGroup, part),
              label + ": on_revoked(" + ms(part) + ") not run (its process crashed)");
        return;
      }
      std::int64_t d = 0;
      {
        std::lock_guard<std::mutex> g(st->mu);
        if (p_.p_slow_cb > 0 && sched_.mono() < p_.F && st->rng.chance(p_.p_slow_cb))
          d = st->rng.range(T / 10, p_.slow_cb_max);
        st->in_cb = true;
      }
      trace(node, partition_key(kPartGroup, part),
            label + ": on_revoked(" + ms(part) + ") on " + Scheduler::self_label() +
                (d ? " (slow callback: " + ms(d) + " ms)" : ""));
      if (d) c.sleep_ms(d);
      std::lock_guard<std::mutex> g(st->mu);
      st->in_cb = false;
      st->told.erase(part);
    };
    std::shared_ptr<Partitioner> pp;
    while (!pp) {
      if (stopping() || (gen == 0 && sched_.mono() >= p_.P)) return;
      try {
        auto made = std::make_shared<Partitioner>(n.storage, o, cb, n.clock,
                                                  Identity{uuid, "host-" + n.name, 1000 + node});
        made->check_group();
        pp = made;
      } catch (const std::exception& ex) {
        trace(node, kPartGroup, label + ": join: " + ex.what());
        c.sleep_ms(r.range(10, T / 4));
      }
    }
    std::vector<std::uint64_t> bids;
    Partitioner* raw = pp.get();
    for (std::int64_t part = 0; part < p_.part_n; ++part) {
      const bool told = o_.break_partitions;
      bids.push_back(
          add_believer(believer(node, Kind::Partition, kPartColl, partition_key(kPartGroup, part),
                                uuid, label, [raw, st, part, told]() -> std::optional<BeliefState> {
                                  std::optional<std::int64_t> t;
                                  if (told) {
                                    std::lock_guard<std::mutex> g(st->mu);
                                    auto it = st->told.find(part);
                                    if (it != st->told.end()) t = it->second;
                                  } else {
                                    t = raw->token(part);
                                  }
                                  if (!t) return std::nullopt;
                                  return BeliefState{*t, -1};
                                })));
    }
    {
      std::lock_guard<std::mutex> g(mu_);
      n.partitioners.push_back(pp);
    }
    trace(node, kPartGroup, label + ": joins group " + kPartGroup + " as " + uuid);
    sched_.set_spawn_label(node, label);
    pp->start_loop();
    sched_.await_registered();
    // Crashes (kill -9) and joins again as a new process, now and then, well before F:
    // from the crash no call naming its uuid is sent (no report, no renewal or release of
    // a partition), no callback runs and its beliefs end; calls sent before still land.
    // Its partitions expire within a ttl (I11). Its loop is then stopped (calls refused).
    if (p_.part_restart <= 0) return;
    for (;;) {
      c.sleep_ms(r.range(T, 3 * T));
      if (stopping() || sched_.mono() >= p_.F - T) return;
      if (r.chance(p_.part_restart)) break;
    }
    ++crashes_;
    kill_process(uuid);
    for (const std::uint64_t bid : bids) remove_believer(bid);
    trace(node, kPartGroup, label + ": the process of " + uuid + " crashed (kill -9)");
    pp->request_stop();
    // stop() joins the loop thread in real time: wait for it (and a callback that
    // sleeps) on the fake clock first.
    for (;;) {
      bool cb_running;
      {
        std::lock_guard<std::mutex> g(st->mu);
        cb_running = st->in_cb;
      }
      if (stopping()) return;  // teardown stops it
      if (!sched_.find(label) && !cb_running) break;
      c.sleep_ms(5);
    }
    pp->stop();
    {
      std::lock_guard<std::mutex> g(mu_);
      n.partitioners.erase(std::remove(n.partitioners.begin(), n.partitioners.end(), pp),
                           n.partitioners.end());
    }
    pp.reset();
    trace(node, kPartGroup, label + ": process restarted");
    c.sleep_ms(r.range(1, T / 2));
  }
}

// ---- liveness probe -----------------------------------------------------------------------------

void World::prober(Node& n) {
  NodeClock& c = *n.clock;
  const int node = n.id;
  c.sleep_until(p_.P2);
  // Locks kept taken on purpose (minimum holds) are free only once those end.
  for (;;) {
    if (stopping()) return;
    std::int64_t until = 0;
    {
      std::lock_guard<std::mutex> g(mu_);
      for (const auto& [k, t] : busy_until_) until = std::max(until, t);
    }
    std::int64_t stepped = 0;
    for (const auto& st : p_.steps) stepped += st.second < 0 ? -st.second : st.second;
    if (sched_.wall() >= until + p_.bound + stepped) break;
    c.sleep_ms(50);
  }
  const std::int64_t T = p_.ttl;
  for (const auto& key : p_.lock_keys) {
    LockerOptions o;
    o.key = key;
    o.ttl_s = static_cast<double>(T) / 1000.0;
    o.ensure_indexes = false;
    Locker lk(n.storage, o, n.clock, Identity{"probe-" + key, "host-probe", 1});
    try {
      const std::optional<std::int64_t> t = lk.try_acquire();
      if (!t) {
        const std::optional<LockDoc> d = mem_->read(kLockColl, key);
        violate("I6", key,
                "lock " + key + " cannot be acquired at " + ms(sched_.mono()) +
                    " although every holder stopped at " + ms(p_.P) + " and faults at " + ms(p_.F) +
                    "; the server has " +
                    (d ? "{uuid=" + d->uuid + " locked=" + std::to_string(d->locked) +
                             " fence=" + ms(d->fence) +
                             " ts_expire=" + ms(d->ts_expire ? d->ts_expire->ms : 0) +
                             "} at server time " + ms(sched_.wall())
                       : std::string("no document")));
      } else {
        trace(node, key, "probe acquired " + key + " (token " + ms(*t) + ")");
        lk.release();
      }
    } catch (const std::exception& ex) {
      violate("I6", key,
              "probe of lock " + key + " failed on a quiet network: " + std::string(ex.what()));
    }
  }
  bool sem_used = false;
  for (int i = 0; i < p_.nodes; ++i)
    sem_used = sem_used || p_.roles[static_cast<std::size_t>(i)].semaphore;
  if (sem_used) {
    SemaphoreOptions o;
    o.key = "s0";
    o.limit = p_.sem_limit;
    o.ttl_s = static_cast<double>(T) / 1000.0;
    Semaphore sem(n.storage, o, n.clock, Identity{"probe-s0", "host-probe", 1});
    try {
      const std::optional<std::int64_t> t = sem.try_acquire();
      if (!t) {
        violate("I6", "s0",
                "semaphore s0 has no free slot at " + ms(sched_.mono()) +
                    " although every holder stopped at " + ms(p_.P));
      } else {
        trace(node, "s0", "probe acquired a slot of s0 (token " + ms(*t) + ")");
        sem.release();
      }
    } catch (const std::exception& ex) {
      violate("I6", "s0",
              std::string("probe of semaphore s0 failed on a quiet network: ") + ex.what());
    }
  }
  bool rw_used = false;
  for (int i = 0; i < p_.nodes; ++i)
    rw_used = rw_used || p_.roles[static_cast<std::size_t>(i)].rwlock;
  if (rw_used) probe_rwlock(n);
  probed_ = true;
}

}  // namespace sim
