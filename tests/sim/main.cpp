// mongoelector_sim: runs seeded schedules of the whole protocol (world.h) and reports
// every violation of the invariants. See README.md.
//
// Every schedule runs in a process of its own, forked from a "zygote" that is created
// before main() does anything else and never allocates between forks, with address space
// randomisation off (the process re-executes itself once): each schedule then starts from
// the same memory layout, so the library's containers keyed by address (the renewer's
// batch order) iterate the same way, and `--seed N` replays a schedule of a bulk run
// exactly. A schedule that hangs or crashes costs its own process only.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/personality.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "world.h"

namespace {

enum Flags : std::uint32_t {
  kFullTrace = 1,
  kNoShuffle = 2,
  kAllViolations = 4,
  kCalm = 8,
  kHash = 16,             // hash the trace of a schedule that passes too (reruns compare it)
  kBreakPartitions = 32,  // proof mode of I9a (RunOptions::break_partitions)
  kBreakFair = 64,        // proof mode of I10 (RunOptions::break_fair)
  kBreakTurns = 128,      // proof mode of I10b (RunOptions::break_turns)
  kBreakCrash = 256,      // proof mode of I11 (RunOptions::break_crash)
  kBreakRwTurns = 512,    // proof mode of I10b for rw0 (RunOptions::break_rw_turns)
};

struct Cmd {
  std::uint64_t seed;
  std::uint32_t flags;
  std::uint32_t tag;
};

char g_dir[64] = "/tmp/mongoelector-sim-XXXXXX";
int g_sigpipe = -1;

void on_sigchld(int) {
  const int saved = errno;
  const char b = 1;
  if (write(g_sigpipe, &b, 1) < 0) {
  }
  errno = saved;
}

std::string path_for(std::uint32_t tag, const char* ext) {
  return std::string(g_dir) + "/" + std::to_string(tag) + ext;
}

std::string render(const sim::TraceEntry& e) {
  char head[48];
  std::snprintf(head, sizeof head, "t=%7" PRId64 " %-5s ", e.t,
                e.node < 0 ? "srv" : ("n" + std::to_string(e.node)).c_str());
  std::string s = head;
  // Multi-line entries (the schedule's description) keep their own indentation.
  s += e.text;
  return s;
}

// The lines of the trace that concern `key` (and the world's own events), up to the end.
std::vector<std::string> excerpt(const std::vector<sim::TraceEntry>& tr, const std::string& key,
                                 std::size_t max_lines) {
  std::vector<std::string> out;
  for (const auto& e : tr) {
    const bool global = e.node < 0 && e.key.empty() &&
                        (e.text.rfind("server clock", 0) == 0 || e.text.rfind("STALL", 0) == 0);
    if (global || key.empty() || e.key == key || e.text.find(key) != std::string::npos)
      out.push_back(render(e));
  }
  if (out.size() > max_lines)
    out.erase(out.begin(), out.end() - static_cast<std::ptrdiff_t>(max_lines));
  return out;
}

[[noreturn]] void run_child(const Cmd& c, int cpu) {
  signal(SIGCHLD, SIG_DFL);
  // One CPU per schedule: its threads run one at a time, and a handoff on one CPU
  // costs no cross-CPU wakeup.
  if (cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
  }
  alarm(300);  // a schedule that hangs dies; the runner reports it
  sim::Params p = sim::make_params(c.seed, (c.flags & kCalm) != 0);
  sim::RunOptions o;
  o.shuffle = (c.flags & kNoShuffle) == 0;
  o.stop_at_first = (c.flags & kAllViolations) == 0;
  o.break_partitions = (c.flags & kBreakPartitions) != 0;
  o.break_fair = (c.flags & kBreakFair) != 0;
  o.break_turns = (c.flags & kBreakTurns) != 0;
  o.break_crash = (c.flags & kBreakCrash) != 0;
  o.break_rw_turns = (c.flags & kBreakRwTurns) != 0;
  sim::World* w = new sim::World(p, o);  // never destroyed: _exit below
  sim::Result r = w->run();
  if (r.status != "ok" || (c.flags & (kHash | kFullTrace))) r.trace_hash = w->trace_hash();
  {
    std::ofstream f(path_for(c.tag, ".res.tmp"));
    f << "status " << r.status << "\n";
    f << "stats " << r.steps << " " << r.grants << " " << r.calls << " " << r.end_t << " "
      << r.trace_hash << " " << r.queued << " " << r.queue_claims << " " << r.turn_checks << " "
      << r.rw_turn_checks << " " << r.crashes << " " << r.dead_leases << " " << r.dead_checks
      << "\n";
    if (!r.error.empty()) f << "error " << r.error << "\n";
    for (const auto& v : r.violations) {
      std::string what = v.what;
      std::replace(what.begin(), what.end(), '\n', ' ');
      f << "violation " << v.inv << "\t" << v.t << "\t" << v.key << "\t" << what << "\n";
      for (const auto& t : v.tags) f << "tag " << t << "\n";
    }
  }
  const auto& tr = w->trace_entries();
  if (c.flags & kFullTrace) {
    std::ofstream f(path_for(c.tag, ".trace"));
    for (const auto& e : tr) f << render(e) << "\n";
  } else if (r.status != "ok") {
    std::ofstream f(path_for(c.tag, ".excerpt"));
    if (!tr.empty()) f << render(tr.front()) << "\n";  // the schedule
    const std::string key = r.violations.empty() ? std::string() : r.violations.front().key;
    for (const auto& line : excerpt(tr, key, 160)) f << line << "\n";
  }
  rename(path_for(c.tag, ".res.tmp").c_str(), path_for(c.tag, ".res").c_str());
  std::fflush(nullptr);
  _exit(0);
}

// Forks one process per schedule, at most `jobs` at once; never allocates between forks.
[[noreturn]] void zygote(int cmd_fd, int res_fd) {
  int sp[2];
  if (pipe2(sp, O_CLOEXEC | O_NONBLOCK) != 0) _exit(2);
  g_sigpipe = sp[1];
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigchld;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigaction(SIGCHLD, &sa, nullptr);
  struct Running {
    pid_t pid;
    Cmd cmd;
    int slot;
  } running[256];
  bool slot_used[256] = {};
  const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const bool pin = sched_getaffinity(0, sizeof allowed, &allowed) == 0 && ncpu > 0;
  int cpus[256];
  int ncpus = 0;
  for (int i = 0; pin && i < 256 && ncpus < 256; ++i)
    if (CPU_ISSET(i, &allowed)) cpus[ncpus++] = i;
  int n = 0;
  bool eof = false;
  for (;;) {
    for (;;) {
      int st = 0;
      const pid_t pid = waitpid(-1, &st, WNOHANG);
      if (pid <= 0) break;
      for (int i = 0; i < n; ++i) {
        if (running[i].pid != pid) continue;
        char line[96];
        const int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        const int len = std::snprintf(line, sizeof line, "%u %" PRIu64 " %d\n", running[i].cmd.tag,
                                      running[i].cmd.seed, code);
        if (write(res_fd, line, static_cast<std::size_t>(len)) < 0) _exit(2);
        slot_used[running[i].slot] = false;
        running[i] = running[--n];
        break;
      }
    }
    if (eof && n == 0) _exit(0);
    pollfd fds[2] = {{eof ? -1 : cmd_fd, POLLIN, 0}, {sp[0], POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) _exit(2);
    if (fds[1].revents & POLLIN) {
      char buf[64];
      while (read(sp[0], buf, sizeof buf) > 0) {
      }
    }
    if (!eof && (fds[0].revents & (POLLIN | POLLHUP))) {
      Cmd c;
      const ssize_t got = read(cmd_fd, &c, sizeof c);
      if (got == 0) {
        eof = true;
        continue;
      }
      if (got != static_cast<ssize_t>(sizeof c) || n >= 256) _exit(2);
      int slot = 0;
      while (slot_used[slot]) ++slot;
      slot_used[slot] = true;
      const int cpu = ncpus > 0 ? cpus[slot % ncpus] : -1;
      const pid_t pid = fork();
      if (pid == 0) {
        close(cmd_fd);
        close(res_fd);
        close(sp[0]);
        close(sp[1]);
        run_child(c, cpu);
      }
      if (pid < 0) _exit(2);
      running[n++] = Running{pid, c, slot};
    }
  }
}

struct Outcome {
  std::uint64_t seed = 0;
  std::uint32_t tag = 0;
  int code = 0;
  std::string status = "crash";
  std::string error;
  std::uint64_t steps = 0, grants = 0, calls = 0, hash = 0;
  std::uint64_t queued = 0, queue_claims = 0, turn_checks = 0;
  std::uint64_t rw_turn_checks = 0, crashes = 0, dead_leases = 0, dead_checks = 0;
  std::int64_t end_t = 0;
  struct V {
    std::string inv, key, what;
    std::int64_t t = 0;
    std::vector<std::string> tags;
  };
  std::vector<V> violations;
};

Outcome load(std::uint32_t tag, std::uint64_t seed, int code) {
  Outcome o;
  o.seed = seed;
  o.tag = tag;
  o.code = code;
  std::ifstream f(path_for(tag, ".res"));
  if (!f) {
    o.status = code >= 128 ? "crash(signal " + std::to_string(code - 128) + ")"
                           : "crash(exit " + std::to_string(code) + ")";
    return o;
  }
  std::string line;
  while (std::getline(f, line)) {
    const auto sp = line.find(' ');
    const std::string k = line.substr(0, sp),
                      rest = sp == std::string::npos ? "" : line.substr(sp + 1);
    if (k == "status") {
      o.status = rest;
    } else if (k == "stats") {
      std::istringstream in(rest);
      in >> o.steps >> o.grants >> o.calls >> o.end_t >> o.hash >> o.queued >> o.queue_claims >>
          o.turn_checks >> o.rw_turn_checks >> o.crashes >> o.dead_leases >> o.dead_checks;
    } else if (k == "error") {
      o.error = rest;
    } else if (k == "violation") {
      Outcome::V v;
      std::istringstream in(rest);
      std::string t;
      std::getline(in, v.inv, '\t');
      std::getline(in, t, '\t');
      std::getline(in, v.key, '\t');
      std::getline(in, v.what);
      v.t = std::atoll(t.c_str());
      o.violations.push_back(v);
    } else if (k == "tag" && !o.violations.empty()) {
      o.violations.back().tags.push_back(rest);
    }
  }
  return o;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Which known mechanism a violation's diagnosis names ("(hole N)"), or "unclassified".
std::set<std::string> holes_of(const Outcome::V& v) {
  std::set<std::string> h;
  for (const auto& t : v.tags) {
    const auto p = t.rfind("(hole ");
    if (p != std::string::npos) {
      h.insert("hole " + t.substr(p + 6, 1));
      continue;
    }
    // Other mechanisms the diagnosis names: "(name)" at the end of the tag.
    if (!t.empty() && t.back() == ')') {
      const auto o = t.rfind('(');
      const std::string name = t.substr(o + 1, t.size() - o - 2);
      if (name.find(' ') == std::string::npos) h.insert(name);
    }
  }
  if (h.empty()) h.insert("unclassified");
  return h;
}

void usage() {
  std::cout << "usage: mongoelector_sim [--seeds A..B | --seed N] [--jobs J] [--time-limit S]\n"
               "                        [--expect-violations] [--show N] [--check-determinism K]\n"
               "                        [--all-violations] [--no-shuffle] [--calm] [--quiet]\n"
               "                        [--break-partitions] [--break-fair] [--break-turns]\n"
               "                        [--break-rw-turns] [--break-crash]\n"
               "  --seeds A..B            run schedules A to B (default 1..200)\n"
               "  --seed N                replay schedule N and print its full trace\n"
               "  --jobs J                schedules run at once (default: number of CPUs)\n"
               "  --time-limit S          start no schedule after S seconds\n"
               "  --expect-violations     succeed only if some schedule violates an invariant "
               "(proof mode)\n"
               "  --show N                print the trace excerpt of up to N failing schedules "
               "(default 3)\n"
               "  --check-determinism K   run every schedule K times and compare the traces\n"
               "  --all-violations        keep running a schedule after its first violation\n"
               "  --no-shuffle            threads runnable at one instant run in a fixed order\n"
               "  --calm                  the same workloads without faults (checks the checks)\n"
               "  --break-partitions      partitioner members believe their callbacks, not their\n"
               "                          leases (proof mode of I9a, with --expect-violations)\n"
               "  --break-fair            the nodes' reads show no fair queue: every claim's gate\n"
               "                          is open (proof mode of I10, with --expect-violations)\n"
               "  --break-turns           the nodes' reads show every semaphore slot held: a\n"
               "                          head never claims (proof mode of I10b)\n"
               "  --break-rw-turns        the same for the read-write lock rw0: a head writer\n"
               "                          never claims (proof mode of I10b for rw0)\n"
               "  --break-crash           a crash leaves the process's keep-alive leases running\n"
               "                          (proof mode of I11)\n"
               "Exit status: 0 when no schedule violated an invariant, stalled or crashed (with\n"
               "--expect-violations: when at least one violated an invariant), 1 otherwise.\n";
}

}  // namespace

int main(int argc, char** argv) {
  // Same memory layout at every run (see the file comment): re-execute once without
  // address space randomisation.
  if (!std::getenv("MONGOELECTOR_SIM_ASLR")) {
    const int pers = personality(0xffffffff);
    if (pers != -1 && (pers & ADDR_NO_RANDOMIZE) == 0 &&
        personality(pers | ADDR_NO_RANDOMIZE) != -1) {
      execv("/proc/self/exe", argv);
    }
  }
  if (!mkdtemp(g_dir)) {
    std::perror("mkdtemp");
    return 2;
  }
  int cmd[2], res[2];
  if (pipe(cmd) != 0 || pipe(res) != 0) return 2;
  const pid_t zpid = fork();
  if (zpid == 0) {
    close(cmd[1]);
    close(res[0]);
    zygote(cmd[0], res[1]);
  }
  close(cmd[0]);
  close(res[1]);

  std::uint64_t first = 1, last = 200;
  bool single = false, expect = false, quiet = false;
  std::uint32_t flags = 0;
  long jobs = sysconf(_SC_NPROCESSORS_ONLN);
  double time_limit = 0;
  int show = 3, repeat = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        usage();
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--seeds") {
      const std::string v = next();
      const auto dots = v.find("..");
      if (dots == std::string::npos) {
        usage();
        return 2;
      }
      first = std::strtoull(v.substr(0, dots).c_str(), nullptr, 10);
      last = std::strtoull(v.substr(dots + 2).c_str(), nullptr, 10);
    } else if (a == "--seed") {
      first = last = std::strtoull(next().c_str(), nullptr, 10);
      single = true;
    } else if (a == "--jobs") {
      jobs = std::max(1L, std::atol(next().c_str()));
    } else if (a == "--time-limit") {
      time_limit = std::atof(next().c_str());
    } else if (a == "--expect-violations") {
      expect = true;
    } else if (a == "--show") {
      show = std::atoi(next().c_str());
    } else if (a == "--check-determinism") {
      repeat = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--all-violations") {
      flags |= kAllViolations;
    } else if (a == "--calm") {
      flags |= kCalm;
    } else if (a == "--break-partitions") {
      flags |= kBreakPartitions;
    } else if (a == "--break-fair") {
      flags |= kBreakFair;
    } else if (a == "--break-turns") {
      flags |= kBreakTurns;
    } else if (a == "--break-rw-turns") {
      flags |= kBreakRwTurns;
    } else if (a == "--break-crash") {
      flags |= kBreakCrash;
    } else if (a == "--no-shuffle") {
      flags |= kNoShuffle;
    } else if (a == "--quiet") {
      quiet = true;
    } else {
      usage();
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  if (single) flags |= kFullTrace;
  if (repeat > 1 || std::getenv("MONGOELECTOR_SIM_STATS")) flags |= kHash;
  jobs = std::min(jobs, 200L);

  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::uint32_t next_tag = 0;
  std::uint64_t next_seed = first;
  int next_rep = 0;
  long inflight = 0;
  std::map<std::uint32_t, std::uint64_t> seed_of;
  auto dispatch = [&]() -> bool {
    if (next_seed > last) return false;
    if (time_limit > 0 && elapsed() >= time_limit) return false;
    Cmd c{next_seed, flags, ++next_tag};
    seed_of[c.tag] = c.seed;
    if (write(cmd[1], &c, sizeof c) != static_cast<ssize_t>(sizeof c)) return false;
    if (++next_rep >= repeat) {
      next_rep = 0;
      ++next_seed;
    }
    ++inflight;
    return true;
  };
  while (inflight < jobs && dispatch()) {
  }

  std::vector<Outcome> outcomes;
  std::map<std::uint64_t, std::vector<std::size_t>> runs_of_seed;
  std::string buf;
  char chunk[4096];
  std::size_t done = 0;
  double last_report = 0;
  while (inflight > 0) {
    const ssize_t got = read(res[0], chunk, sizeof chunk);
    if (got <= 0) {
      if (got < 0 && errno == EINTR) continue;
      std::cerr << "mongoelector_sim: the zygote died\n";
      return 2;
    }
    buf.append(chunk, static_cast<std::size_t>(got));
    for (std::size_t nl; (nl = buf.find('\n')) != std::string::npos;) {
      std::istringstream in(buf.substr(0, nl));
      buf.erase(0, nl + 1);
      std::uint32_t tag;
      std::uint64_t seed;
      int code;
      in >> tag >> seed >> code;
      --inflight;
      ++done;
      Outcome o = load(tag, seed, code);
      runs_of_seed[seed].push_back(outcomes.size());
      outcomes.push_back(std::move(o));
      const Outcome& oc = outcomes.back();
      if (!single && oc.status != "ok") {
        std::cout << "seed " << oc.seed << ": " << oc.status;
        for (const auto& v : oc.violations) {
          std::cout << " " << v.inv << " at t=" << v.t << " (" << v.key << "): " << v.what;
          for (const auto& h : holes_of(v)) std::cout << " [" << h << "]";
        }
        if (!oc.error.empty()) std::cout << " " << oc.error;
        std::cout << " (trace hash " << std::hex << oc.hash << std::dec << ")\n";
      }
      if (!quiet && !single && elapsed() - last_report > 10) {
        last_report = elapsed();
        std::cerr << "  ... " << done << " schedules, " << static_cast<long>(done / elapsed())
                  << "/s\n";
      }
      while (inflight < jobs && dispatch()) {
      }
    }
  }
  close(cmd[1]);
  int zst = 0;
  waitpid(zpid, &zst, 0);
  const double secs = elapsed();
  // Per-schedule results, for comparing two builds (same outcomes and stats).
  if (const char* path = std::getenv("MONGOELECTOR_SIM_STATS")) {
    std::ofstream f(path);
    for (const auto& o : outcomes)
      f << o.seed << " " << o.status << " " << o.steps << " " << o.grants << " " << o.calls << " "
        << o.end_t << " " << std::hex << o.hash << std::dec << " " << o.violations.size() << "\n";
  }

  if (single) {
    const Outcome& o = outcomes.front();
    std::cout << slurp(path_for(o.tag, ".trace"));
    std::cout << "\nseed " << o.seed << ": " << o.status << " (" << o.steps << " steps, " << o.calls
              << " storage calls, ended at t=" << o.end_t << ", trace hash " << std::hex << o.hash
              << std::dec << ")\n";
    for (const auto& v : o.violations) {
      std::cout << "  " << v.inv << " at t=" << v.t << " (" << v.key << "): " << v.what << "\n";
      for (const auto& t : v.tags) std::cout << "    diagnosis: " << t << "\n";
    }
    if (!o.error.empty()) std::cout << "  " << o.error << "\n";
  }

  // Summary.
  std::map<std::string, long> by_status, by_inv, by_hole;
  std::map<std::string, std::vector<std::uint64_t>> seeds_by_hole;
  std::uint64_t steps = 0, calls = 0, queued = 0, queue_claims = 0, turn_checks = 0;
  std::uint64_t rw_turn_checks = 0, crashes = 0, dead_leases = 0, dead_checks = 0;
  long nondet = 0, with_queues = 0;
  for (const auto& [seed, idx] : runs_of_seed) {
    const Outcome& o = outcomes[idx.front()];
    for (std::size_t k = 1; k < idx.size(); ++k) {
      const Outcome& p = outcomes[idx[k]];
      if (p.hash != o.hash || p.status != o.status) {
        ++nondet;
        std::cout << "seed " << seed << ": NOT deterministic (run 1: " << o.status << " hash "
                  << std::hex << o.hash << ", run " << k + 1 << ": " << p.status << " hash "
                  << p.hash << std::dec << ")\n";
      }
    }
  }
  for (const auto& o : outcomes) {
    ++by_status[o.status.rfind("crash", 0) == 0 ? "crash" : o.status];
    steps += o.steps;
    calls += o.calls;
    queued += o.queued;
    queue_claims += o.queue_claims;
    turn_checks += o.turn_checks;
    rw_turn_checks += o.rw_turn_checks;
    crashes += o.crashes;
    dead_leases += o.dead_leases;
    dead_checks += o.dead_checks;
    with_queues += o.queue_claims > 0 ? 1 : 0;
    std::set<std::string> invs, holes;
    for (const auto& v : o.violations) {
      invs.insert(v.inv);
      for (const auto& h : holes_of(v)) holes.insert(h);
    }
    for (const auto& i : invs) ++by_inv[i];
    for (const auto& h : holes) {
      ++by_hole[h];
      if (seeds_by_hole[h].size() < 8) seeds_by_hole[h].push_back(o.seed);
    }
  }
  std::cout << "\nschedules run: " << outcomes.size();
  for (const auto& [s, n] : by_status) std::cout << ", " << s << " " << n;
  std::cout << "\ntime: " << secs << " s, " << static_cast<double>(outcomes.size()) / secs
            << " schedules/s (" << jobs << " jobs; " << steps << " steps, " << calls
            << " storage calls)\n";
  if (queued > 0)
    std::cout << "fair queues: " << queued << " entries written, " << queue_claims
              << " claims from an entry (" << with_queues << " schedules), " << turn_checks
              << " renewals checked by I10b (" << rw_turn_checks << " of rw0's)\n";
  if (crashes > 0)
    std::cout << "crashes: " << crashes << " processes, " << dead_leases
              << " keep-alive leases killed with them; " << dead_checks
              << " checks of their holds by I11\n";
  std::cout << "violations by invariant (schedules):";
  if (by_inv.empty()) std::cout << " none";
  for (const auto& [i, n] : by_inv) std::cout << " " << i << " " << n << ";";
  std::cout << "\nby diagnosis (schedules):";
  if (by_hole.empty()) std::cout << " none";
  for (const auto& [h, n] : by_hole) {
    std::cout << "\n  " << h << ": " << n << " (seeds";
    for (auto s : seeds_by_hole[h]) std::cout << " " << s;
    std::cout << ")";
  }
  std::cout << "\n";
  if (repeat > 1)
    std::cout << "determinism: " << nondet << " of " << runs_of_seed.size()
              << " seeds differed between runs\n";

  if (!single && show > 0) {
    // One excerpt per diagnosis first, then more.
    std::set<std::string> shown_holes;
    std::set<std::uint32_t> shown;
    for (int pass = 0; pass < 2 && static_cast<int>(shown.size()) < show; ++pass) {
      for (const auto& o : outcomes) {
        if (static_cast<int>(shown.size()) >= show) break;
        if (o.status == "ok" || shown.count(o.tag)) continue;
        std::set<std::string> hs;
        for (const auto& v : o.violations)
          for (const auto& h : holes_of(v)) hs.insert(h);
        bool fresh = hs.empty();
        for (const auto& h : hs) fresh = fresh || !shown_holes.count(h);
        if (pass == 0 && !fresh) continue;
        shown.insert(o.tag);
        shown_holes.insert(hs.begin(), hs.end());
        std::cout << "\n==== seed " << o.seed << " (" << o.status
                  << "; replay: mongoelector_sim --seed " << o.seed << ") ====\n";
        for (const auto& v : o.violations) {
          std::cout << v.inv << " at t=" << v.t << " (" << v.key << "): " << v.what << "\n";
          for (const auto& t : v.tags) std::cout << "  diagnosis: " << t << "\n";
        }
        if (!o.error.empty()) std::cout << o.error << "\n";
        std::cout << "-- trace excerpt (lines about "
                  << (o.violations.empty() ? "everything" : o.violations.front().key) << ") --\n"
                  << slurp(path_for(o.tag, ".excerpt"));
      }
    }
  }
  // Clean up the result files.
  for (std::uint32_t t = 1; t <= next_tag; ++t) {
    for (const char* ext : {".res", ".res.tmp", ".trace", ".excerpt"})
      unlink(path_for(t, ext).c_str());
  }
  rmdir(g_dir);

  const long bad = static_cast<long>(outcomes.size()) - by_status["ok"];
  const long violated = by_status["violation"];
  if (expect) return violated > 0 ? 0 : 1;
  return bad == 0 && nondet == 0 ? 0 : 1;
}
