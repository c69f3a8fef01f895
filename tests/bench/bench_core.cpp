// Benchmark of the core (Locker, Elector, MongoStorage) against the server in
// MONGOELECTOR_TEST_URI: latency and round trips per operation, acquire+release
// throughput, and memory per idle locker. Prints a markdown table; --json FILE also
// writes the numbers for tests/bench/combine.py. Not a test: run tests/bench/run.sh.
//
// Round trips are MongoStorage::round_trips() deltas (libmongoc APM command-started
// events), so they count exactly the commands each operation sends.
#include <mongoc/mongoc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "election/elector.h"
#include "exceptions.h"
#include "locker.h"
#include "storage/mongo_storage.h"

using namespace mongoelector;

namespace {

using SteadyClock = std::chrono::steady_clock;

struct Config {
  std::string uri;
  std::string db;
  int iterations = 2000;
  int warmup = 200;
  int first_use_iterations = 200;  // each one leaves a document behind
  double throughput_s = 2.0;
  int idle_lockers = 1000;
  std::string json_path;
};

// Latency samples (ms) and round trips of one operation.
struct Series {
  Series(std::string i, std::string l) : id(std::move(i)), label(std::move(l)) {}
  std::string id, label;
  std::vector<double> ms;
  std::int64_t round_trips = 0;

  double mean() const {
    double s = 0;
    for (double v : ms) s += v;
    return ms.empty() ? 0 : s / ms.size();
  }
  double pct(double p) const {
    if (ms.empty()) return 0;
    std::vector<double> v = ms;
    std::sort(v.begin(), v.end());
    // Nearest rank.
    std::size_t i = static_cast<std::size_t>(p / 100.0 * v.size() + 0.999999);
    return v[std::min(v.size() - 1, i == 0 ? 0 : i - 1)];
  }
  double rt_per_op() const { return ms.empty() ? 0 : double(round_trips) / ms.size(); }
};

// Times op() and counts the commands it sent through `st`.
template <class F>
void timed(Series& s, const MongoStorage& st, bool record, F&& op) {
  std::int64_t rt0 = st.round_trips();
  auto t0 = SteadyClock::now();
  op();
  auto t1 = SteadyClock::now();
  std::int64_t rt1 = st.round_trips();
  if (!record) return;
  s.ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  s.round_trips += rt1 - rt0;
}

void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("benchmark sanity check failed: " + what);
}

std::shared_ptr<MongoStorage> make_storage(const Config& c) {
  MongoStorageOptions o;
  o.uri = c.uri;
  o.database = c.db;
  return std::make_shared<MongoStorage>(o);
}

LockerOptions locker_opts(const std::string& key, bool delete_on_release = false) {
  LockerOptions o;
  o.key = key;
  o.ttl_s = 600;
  o.delete_on_release = delete_on_release;
  return o;
}

// Runs `body(i, record)` for warm-up then measured iterations.
void loop(const Config& c, int iterations, const std::function<void(int, bool)>& body) {
  for (int i = 0; i < c.warmup; ++i) body(i, false);
  for (int i = 0; i < iterations; ++i) body(c.warmup + i, true);
}

std::vector<Series> bench_locker(const Config& c) {
  auto st = make_storage(c);
  auto other_st = make_storage(c);  // another node: its commands are not ours
  Series acq{"acquire", "acquire, uncontended (lock released before)"};
  Series rel{"release", "release"};
  Series touch{"touch", "renew (touch)"};
  Series locked{"locked", "locked()"};
  Series owned{"owned", "owned()"};
  Series cont_nb{"contended_acquire_nb", "contended acquire, non-blocking (LockExists)"};
  Series cont_try{"contended_try", "contended try_acquire (one attempt, no message)"};
  Series absent{"acquire_absent", "acquire, lock document absent (epoch anchoring)"};
  Series first{"new_locker_acquire", "new locker + first acquire of a new key"};

  Locker a(st, locker_opts("bench-a"));
  a.acquire();  // first use: anchors the epoch, samples the server clock
  a.release();
  std::int64_t last_fence = 0;
  loop(c, c.iterations, [&](int, bool rec) {
    timed(acq, *st, rec, [&] { a.acquire(); });
    check(a.fence() > last_fence, "fencing token increases on every acquire");
    last_fence = a.fence();
    timed(touch, *st, rec, [&] { check(a.touch().has_value(), "touch while holding"); });
    timed(locked, *st, rec, [&] { check(a.locked(), "locked() while held"); });
    timed(owned, *st, rec, [&] { check(a.owned(), "owned() while holding"); });
    timed(rel, *st, rec, [&] { a.release(); });
  });

  Locker holder(other_st, locker_opts("bench-held"));
  holder.acquire();
  Locker b(st, locker_opts("bench-held"));
  loop(c, c.iterations, [&](int, bool rec) {
    bool threw = false;
    timed(cont_nb, *st, rec, [&] {
      try {
        b.acquire(false);
      } catch (const LockExists&) {
        threw = true;
      }
    });
    check(threw, "non-blocking acquire of a held lock raises LockExists");
    timed(cont_try, *st, rec, [&] { check(!b.try_acquire(), "try_acquire of a held lock"); });
  });
  holder.release();

  // delete_on_release removes the document, so every acquire takes the rare path that a
  // first use (or a TTL deletion, or an original node's release) takes.
  Locker d(st, locker_opts("bench-absent", true));
  last_fence = 0;
  loop(c, c.iterations, [&](int, bool rec) {
    timed(absent, *st, rec, [&] { d.acquire(); });
    check(d.fence() > last_fence, "fencing token increases after deletion");
    last_fence = d.fence();
    d.release();
  });

  // As a program that locks a new key would: construct (index check), time check, server
  // check, first claim with epoch anchoring. A fresh storage would add the connection.
  // Own collection: mongo-java-server scans a collection for filters other than a bare
  // _id, so the documents left here would slow every later operation on the others.
  loop(c, c.first_use_iterations, [&](int i, bool rec) {
    timed(first, *st, rec, [&] {
      LockerOptions o = locker_opts("bench-new-" + std::to_string(i));
      o.collection = "bench_new";
      Locker n(st, o);
      n.acquire();
    });
  });
  return {acq, cont_nb, cont_try, touch, rel, locked, owned, absent, first};
}

std::vector<Series> bench_elector(const Config& c) {
  auto st = make_storage(c);
  auto make = [&](const std::string& key, bool status) {
    ElectorOptions o;
    o.key = key;
    o.ttl_s = 60;  // long enough that the renew-deadline guard never skips a renewal
    o.report_status = status;
    return std::make_unique<Elector>(st, o, ElectorCallbacks{});
  };
  Series leader_s{"leader_poll_status", "elector poll as leader, report_status=True"};
  Series leader_n{"leader_poll_nostatus", "elector poll as leader, report_status=False"};
  Series follower_s{"follower_poll_status", "elector poll as follower, report_status=True"};
  Series follower_n{"follower_poll_nostatus", "elector poll as follower, report_status=False"};

  auto lead_s = make("bench-elect-s", true);
  auto lead_n = make("bench-elect-n", false);
  auto fol_s = make("bench-elect-s", true);
  auto fol_n = make("bench-elect-n", false);
  lead_s->poll();
  lead_n->poll();
  check(lead_s->is_leader() && lead_n->is_leader(), "first poll of a free key leads");
  loop(c, c.iterations, [&](int, bool rec) {
    timed(leader_s, *st, rec, [&] { lead_s->poll(); });
    timed(leader_n, *st, rec, [&] { lead_n->poll(); });
    timed(follower_s, *st, rec, [&] { fol_s->poll(); });
    timed(follower_n, *st, rec, [&] { fol_n->poll(); });
    check(lead_s->is_leader() && lead_n->is_leader(), "leaders keep leading");
    check(!fol_s->is_leader() && !fol_n->is_leader() && fol_s->leader_exists(),
          "followers see the leader");
  });
  for (auto* e : {lead_s.get(), lead_n.get(), fol_s.get(), fol_n.get()}) e->stop();
  return {leader_s, leader_n, follower_s, follower_n};
}

struct Throughput {
  std::string id, label;
  double cycles_per_s = 0;
  double rt_per_cycle = 0;
};

// acquire()+release() cycles on distinct keys, `threads` at once for c.throughput_s.
Throughput bench_throughput(const Config& c, int threads, bool shared_storage) {
  std::vector<std::shared_ptr<MongoStorage>> stores;
  std::vector<std::unique_ptr<Locker>> lockers;
  auto shared = make_storage(c);
  for (int t = 0; t < threads; ++t) {
    stores.push_back(shared_storage ? shared : make_storage(c));
    std::string key = "bench-tp-" + std::to_string(threads) + (shared_storage ? "s-" : "-") +
                      std::to_string(t);
    lockers.push_back(std::make_unique<Locker>(stores.back(), locker_opts(key)));
  }
  std::atomic<bool> go{false}, stop{false};
  std::atomic<std::int64_t> cycles{0};
  std::atomic<int> ready{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      Locker& l = *lockers[t];
      for (int i = 0; i < 50; ++i) {  // warm-up: connection, clock sample, epoch
        l.acquire();
        l.release();
      }
      ++ready;
      while (!go) std::this_thread::yield();
      std::int64_t n = 0;
      while (!stop) {
        l.acquire();
        l.release();
        ++n;
      }
      cycles += n;
    });
  }
  while (ready < threads) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::int64_t rt0 = 0;
  for (auto& s : stores) rt0 += shared_storage ? 0 : s->round_trips();
  if (shared_storage) rt0 = shared->round_trips();
  auto t0 = SteadyClock::now();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(c.throughput_s));
  stop = true;
  for (auto& th : pool) th.join();
  double secs = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  std::int64_t rt1 = 0;
  for (auto& s : stores) rt1 += shared_storage ? 0 : s->round_trips();
  if (shared_storage) rt1 = shared->round_trips();
  Throughput r;
  r.id = "cycles_" + std::to_string(threads) + (shared_storage ? "t_shared" : "t");
  r.label = "acquire+release cycles/s, " + std::to_string(threads) +
            (threads == 1 ? " thread" : " threads") +
            (shared_storage ? ", one shared storage" : (threads == 1 ? "" : ", storage each"));
  r.cycles_per_s = cycles / secs;
  r.rt_per_cycle = cycles ? double(rt1 - rt0) / cycles : 0;
  return r;
}

std::int64_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  std::int64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

struct Memory {
  std::string id, label;
  double kib_per_1000 = 0;
  double process_mib = 0;
};

// RSS growth for c.idle_lockers constructed lockers that hold nothing (one storage).
Memory bench_memory(const Config& c) {
  auto st = make_storage(c);
  { Locker warm(st, locker_opts("bench-mem-warm")); }  // connect before the baseline
  std::vector<std::unique_ptr<Locker>> idle;
  idle.reserve(c.idle_lockers);
  std::int64_t before = rss_bytes();
  for (int i = 0; i < c.idle_lockers; ++i)
    idle.push_back(std::make_unique<Locker>(st, locker_opts("bench-mem-" + std::to_string(i))));
  std::int64_t after = rss_bytes();
  Memory m;
  m.id = "rss_per_1000_lockers";
  m.label = "RSS per 1000 idle lockers";
  m.kib_per_1000 = double(after - before) / 1024.0 * 1000.0 / c.idle_lockers;
  m.process_mib = after / 1048576.0;
  return m;
}

void drop_database(const Config& c) {
  mongoc_client_t* client = mongoc_client_new(c.uri.c_str());
  if (!client) return;
  mongoc_database_t* db = mongoc_client_get_database(client, c.db.c_str());
  bson_error_t err;
  if (!mongoc_database_drop(db, &err)) std::fprintf(stderr, "bench_core: drop failed: %s\n", err.message);
  mongoc_database_destroy(db);
  mongoc_client_destroy(client);
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\';
    o += ch;
  }
  return o + "\"";
}

void print_markdown(const std::vector<Series>& ops, const std::vector<Throughput>& tps,
                    const Memory& mem) {
  std::printf("| operation | round trips | p50 ms | p90 ms | p99 ms | mean ms | n |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& s : ops)
    std::printf("| %s | %.2f | %.3f | %.3f | %.3f | %.3f | %zu |\n", s.label.c_str(), s.rt_per_op(),
                s.pct(50), s.pct(90), s.pct(99), s.mean(), s.ms.size());
  std::printf("\n| throughput | cycles/s | round trips/cycle |\n|---|---:|---:|\n");
  for (const auto& t : tps)
    std::printf("| %s | %.0f | %.2f |\n", t.label.c_str(), t.cycles_per_s, t.rt_per_cycle);
  std::printf("\n| memory | KiB | process RSS MiB |\n|---|---:|---:|\n");
  std::printf("| %s | %.0f | %.1f |\n", mem.label.c_str(), mem.kib_per_1000, mem.process_mib);
}

void write_json(const std::string& path, const std::vector<Series>& ops,
                const std::vector<Throughput>& tps, const Memory& mem) {
  std::ostringstream o;
  o << "{\"impl\": \"ours\", \"ops\": [";
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto& s = ops[i];
    o << (i ? ", " : "") << "{\"id\": " << json_str(s.id) << ", \"label\": " << json_str(s.label)
      << ", \"round_trips\": " << s.rt_per_op() << ", \"p50_ms\": " << s.pct(50)
      << ", \"p90_ms\": " << s.pct(90) << ", \"p99_ms\": " << s.pct(99)
      << ", \"mean_ms\": " << s.mean() << ", \"n\": " << s.ms.size() << "}";
  }
  o << "], \"throughput\": [";
  for (std::size_t i = 0; i < tps.size(); ++i)
    o << (i ? ", " : "") << "{\"id\": " << json_str(tps[i].id) << ", \"label\": "
      << json_str(tps[i].label) << ", \"cycles_per_s\": " << tps[i].cycles_per_s
      << ", \"round_trips_per_cycle\": " << tps[i].rt_per_cycle << "}";
  o << "], \"memory\": [{\"id\": " << json_str(mem.id) << ", \"label\": " << json_str(mem.label)
    << ", \"kib\": " << mem.kib_per_1000 << ", \"process_mib\": " << mem.process_mib << "}]}\n";
  std::ofstream f(path);
  f << o.str();
  if (!f) throw std::runtime_error("cannot write " + path);
}

int parse_int(const char* v, const char* name, long min = 1) {
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (!*v || *end || n < min || n > 10000000)
    throw std::invalid_argument(std::string(name) + " must be an integer >= " + std::to_string(min));
  return static_cast<int>(n);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Config c;
    const char* uri = std::getenv("MONGOELECTOR_TEST_URI");
    if (uri) c.uri = uri;
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      auto value = [&]() -> const char* {
        if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
        return argv[++i];
      };
      if (a == "--uri") c.uri = value();
      else if (a == "--iterations") c.iterations = parse_int(value(), "--iterations");
      else if (a == "--warmup") c.warmup = parse_int(value(), "--warmup", 0);
      else if (a == "--json") c.json_path = value();
      else if (a == "--seconds") c.throughput_s = parse_int(value(), "--seconds");
      else if (a == "-h" || a == "--help") {
        std::printf("usage: bench_core [--uri URI] [--iterations N] [--warmup N] [--seconds S] "
                    "[--json FILE]\n(default URI: $MONGOELECTOR_TEST_URI)\n");
        return 0;
      } else {
        throw std::invalid_argument("unknown argument " + a + " (see --help)");
      }
    }
    if (c.uri.empty()) throw std::invalid_argument("no server: set MONGOELECTOR_TEST_URI or pass --uri");
    c.db = "bench_core_" + std::to_string(getpid());
    c.first_use_iterations = std::min(c.iterations, c.first_use_iterations);

    std::fprintf(stderr, "bench_core: %d iterations per operation after %d warm-up, db %s\n",
                 c.iterations, c.warmup, c.db.c_str());
    std::vector<Series> ops = bench_locker(c);
    for (auto& s : bench_elector(c)) ops.push_back(s);
    std::vector<Throughput> tps{bench_throughput(c, 1, false), bench_throughput(c, 4, false),
                                bench_throughput(c, 4, true)};
    Memory mem = bench_memory(c);
    drop_database(c);

    print_markdown(ops, tps, mem);
    if (!c.json_path.empty()) write_json(c.json_path, ops, tps, mem);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_core: error: %s\n", e.what());
    return 1;
  }
}
