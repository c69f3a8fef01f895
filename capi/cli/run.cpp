// `mongoelector run` (a command under a keep-alive lease) and `mongoelector elect` (a
// command while this node leads).
#include "cli.h"
#include "serve.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace cli {

namespace {

const char* kRunHelp =
    "Usage: mongoelector run KEY [--uri URI] [--ttl S] [--wait] [--timeout S] [--grace S]\n"
    "                        [--fair] [--min-hold S] [--once-per S] [--verbose]\n"
    "                        [--http ADDR] [--notify] -- CMD [ARGS...]\n"
    "       mongoelector run (--shared | --exclusive [--fair]) KEY [--max-readers N]\n"
    "                        [--uri URI] [--ttl S] [--wait] [--timeout S] [--grace S]\n"
    "                        [--verbose] [--http ADDR] [--notify] -- CMD [ARGS...]\n"
    "\n"
    "Runs CMD only while holding the lock KEY, keeps the lock's lease alive while CMD runs\n"
    "(renewed about every ttl/3 by the library), and releases it when CMD exits.\n"
    "With --shared or --exclusive, holds a side of the read-write lock KEY instead: many\n"
    "--shared runs of KEY at once, or one --exclusive run and no --shared one.\n"
    "\n"
    "  --uri URI      where the locks live: mongodb://host:port/database or\n"
    "                 sqlite:///absolute/path.db (default: $MONGOELECTOR_URI, else\n"
    "                 sqlite://%s)\n"
    "  --ttl S        lease length in seconds (default 30): if this process dies, the lock\n"
    "                 is free again at most S seconds later\n"
    "  --wait         wait for the lock while another process holds it (default: exit 75\n"
    "                 at once)\n"
    "  --timeout S    with --wait, give up after S seconds (exit 75); implies --wait\n"
    "  --fair         first come, first served: with --wait, runs waiting for KEY take\n"
    "                 it in the order they started waiting (a waiter that dies holds the\n"
    "                 line up for at most --ttl). Give every run of KEY --fair: while\n"
    "                 --fair runs wait, another --fair run without --wait exits 75, but a\n"
    "                 run without --fair does not queue and may pass them. With\n"
    "                 --exclusive: the writers of KEY, in order; not with --shared\n"
    "  --grace S      when the lease is lost, seconds between SIGTERM and SIGKILL to CMD\n"
    "                 (default and maximum: ttl/20, 1.5 s at the default ttl; a longer\n"
    "                 grace is refused, see below)\n"
    "  --min-hold S   keep the lock taken until S seconds after it was acquired (server\n"
    "                 clock), even if CMD ends sooner: nodes whose clocks or schedules\n"
    "                 differ a little then cannot run the same job twice (ShedLock's\n"
    "                 lockAtLeastFor). Applies however CMD ends; not after a lost lease.\n"
    "                 The lock KEY only (not with --shared or --exclusive)\n"
    "  --once-per S   run CMD at most once per window of S (e.g. 1h): windows are aligned\n"
    "                 on the server's clock (an hour window starts on the hour, UTC); the\n"
    "                 first node to take the lock in a window runs CMD, every later try in\n"
    "                 that window exits 75 without running it. The lock KEY only\n"
    "  --shared       hold the READ side of the read-write lock KEY: any number of\n"
    "                 `run --shared KEY` (up to --max-readers) run at once, never while a\n"
    "                 `run --exclusive KEY` runs\n"
    "  --exclusive    hold the WRITE side of the read-write lock KEY: CMD runs alone, once\n"
    "                 the --shared runs have ended. While it waits (--wait), NEW --shared\n"
    "                 runs wait for it too (without --wait they exit 75), so that readers\n"
    "                 coming and going cannot keep it waiting forever.\n"
    "                 The read-write lock KEY is not the lock KEY: a plain `run KEY` does\n"
    "                 not wait for `run --shared KEY`; give the writer --exclusive\n"
    "  --max-readers N  with --shared or --exclusive: how many --shared holders KEY admits\n"
    "                 at once (default 64). Fixed when KEY is first used: a run asking\n"
    "                 for another number is refused (exit 64)\n"
    "  --verbose      say on stderr when it waits, acquires and releases the lock\n"
    "  --http ADDR    serve /leader (the lock's holder; with --shared or --exclusive the\n"
    "                 readers, the writer and a waiting writer), /healthz and /readyz (200\n"
    "                 while this process holds the lock) over HTTP on ADDR: 127.0.0.1:PORT,\n"
    "                 :PORT (every interface) or [::1]:PORT; port 0 picks a free port,\n"
    "                 printed on stderr. /healthz is 200 while waiting for the lock and,\n"
    "                 once held, while the last successful renewal is at most ttl/2 old\n"
    "  --notify       systemd (Type=notify): READY=1 once running, STATUS= lines,\n"
    "                 WATCHDOG=1 every WatchdogSec/2 while /healthz would say 200,\n"
    "                 STOPPING=1 on the way out\n"
    "\n"
    "Durations: seconds (1.5), or with a unit: 90s, 15m, 1h, 1d.\n"
    "\n"
    "CMD gets MONGOELECTOR_KEY (the key) and MONGOELECTOR_FENCE (the fencing token: strictly\n"
    "greater than every token handed out before for KEY; pass it to the resource you\n"
    "write and have it refuse tokens lower than the highest it has seen); with --shared or\n"
    "--exclusive also MONGOELECTOR_SIDE (read or write). A writer's token is greater than\n"
    "every token granted before it, readers' included.\n"
    "CMD runs in a process group of its own (with the terminal, if this process had it):\n"
    "SIGINT, SIGTERM and SIGHUP sent to this process are forwarded to that whole group, so\n"
    "whatever CMD started stops with it; when CMD exits, anything it left running in its\n"
    "group is killed (it would run on without the lock). While this process still waits\n"
    "for the lock, those signals end the wait (exit 128+N, CMD not run). If this process\n"
    "is killed, CMD gets SIGTERM.\n"
    "\n"
    "If the lease is LOST while CMD runs (the storage did not answer before the lease's\n"
    "renew deadline, which comes before the lease can expire, or another process forced\n"
    "the lock away), CMD gets SIGTERM at once, SIGKILL after --grace, and the exit status\n"
    "is 70. SIGTERM comes at the lease's renew deadline, ttl/10 before another process may\n"
    "take the lock; half of that margin is kept for the error between this host's clock\n"
    "and the server's, so --grace may be at most ttl/20: then even a CMD that ignores\n"
    "SIGTERM is dead before the next holder can start. For a longer grace, raise --ttl\n"
    "(--grace 5 needs --ttl 100).\n"
    "\n"
    "Exit status:\n"
    "  CMD's own status, or 128+N if CMD was killed by signal N\n"
    "  64   bad command line         69   storage unreachable or failing\n"
    "  70   lease lost while CMD ran  75   lock held by another (no --wait, or --timeout),\n"
    "                                      or --once-per: this window already had its run;\n"
    "                                      --shared: a writer holds KEY or waits for it;\n"
    "                                      --exclusive: anyone holds KEY\n"
    "  78   URI or storage unusable   126  CMD not executable   127  CMD not found\n"
    "  128+N  interrupted by signal N while waiting for the lock\n"
    "\n"
    "Examples:\n"
    "  mongoelector run nightly-report -- ./report.sh --since yesterday\n"
    "  mongoelector run --wait --timeout 60 db-migration -- alembic upgrade head\n"
    "  mongoelector run --wait --fair deploy -- ./deploy.sh   # deploys in the order queued\n"
    "  mongoelector run --once-per 1h --min-hold 5m hourly-sync -- ./sync.sh   # from every\n"
    "                                                    # node's crontab: runs once an hour\n"
    "  mongoelector run --shared --wait catalog -- ./export.sh      # many exports at once,\n"
    "  mongoelector run --exclusive --wait catalog -- ./reindex.sh  # the reindex alone\n";

const char* kElectHelp =
    "Usage: mongoelector elect KEY [--uri URI] [--ttl S] [--grace S] [--http ADDR]\n"
    "                          [--payload JSON] [--priority N [--priority-stability S]]\n"
    "                          [--notify] -- CMD [ARGS...]\n"
    "\n"
    "Joins the election for KEY and runs CMD while this process leads. When leadership is\n"
    "lost (the renew deadline passed without a renewal: this happens before any other node\n"
    "can take over), CMD gets SIGTERM, then SIGKILL after --grace, and this process waits\n"
    "to lead again, then starts CMD anew. If CMD exits by itself while leading, leadership\n"
    "is released and this process exits with CMD's status (let your supervisor restart it).\n"
    "\n"
    "  --uri URI      mongodb://host:port/database or sqlite:///absolute/path.db (default:\n"
    "                 $MONGOELECTOR_URI, else sqlite://%s)\n"
    "  --ttl S        leadership lease in seconds (default 15): failover after a crash\n"
    "                 takes about S seconds\n"
    "  --grace S      seconds between SIGTERM and SIGKILL when CMD must stop (default and\n"
    "                 maximum: ttl/20, 0.75 s at the default ttl). Leadership is lost at\n"
    "                 its renew deadline, ttl/10 before another node may lead; half of that\n"
    "                 is kept for clock error, so within ttl/20 even a CMD that ignores\n"
    "                 SIGTERM is dead before the next leader starts. For a longer grace,\n"
    "                 raise --ttl (--grace 5 needs --ttl 100)\n"
    "  --http ADDR    serve over HTTP on ADDR (127.0.0.1:PORT, :PORT for every interface,\n"
    "                 [::1]:PORT; port 0 picks a free port, printed on stderr):\n"
    "                   /leader   JSON: who leads (uuid, host, pid), fence, expire_ms and\n"
    "                             expires_in_s on the storage's clock, read every\n"
    "                             min(1 s, ttl/4); and this node (uuid, fence, its\n"
    "                             lease's end lease_expire_ms, ready, healthy); payload:\n"
    "                             the leader's --payload (null when none)\n"
    "                   /healthz  200 while this node's election loop works: its last\n"
    "                             successful round trip is at most ttl/2 old if it led\n"
    "                             then (a leader renews every ttl/3), 1.5 ttl otherwise;\n"
    "                             503 when the loop is stuck or the storage does not\n"
    "                             answer, or when CMD still runs past the renew deadline\n"
    "                   /readyz   200 only while this node leads (a Service that routes to\n"
    "                             the leader), else 503\n"
    "  --payload JSON a JSON object (at most 16384 bytes) published with each term this\n"
    "                 node leads, e.g. '{\"endpoint\": \"10.0.0.5:8080\"}': shown by /leader,\n"
    "                 `mongoelector status` and every observer of KEY; a new leader's term\n"
    "                 never shows the previous leader's payload\n"
    "  --priority N   prefer the processes of higher priority as leader (a number; off by\n"
    "                 default): a leader with a priority hands leadership over to the\n"
    "                 running member of KEY of highest priority strictly above its own,\n"
    "                 once that member has been seen live at every poll for\n"
    "                 --priority-stability. Equal priorities never move leadership;\n"
    "                 members without a priority are never chosen. Shown by\n"
    "                 `mongoelector status`\n"
    "  --priority-stability S\n"
    "                 that delay in seconds (default: the ttl), counted by the leader:\n"
    "                 give every member the same. Needs --priority\n"
    "  --notify       systemd (Type=notify): READY=1 once the election loop runs, STATUS=\n"
    "                 lines (leader or follower), WATCHDOG=1 every WatchdogSec/2 while\n"
    "                 /healthz would say 200, STOPPING=1 on the way out\n"
    "\n"
    "CMD gets MONGOELECTOR_KEY and MONGOELECTOR_FENCE (the leadership's fencing token).\n"
    "SIGINT or SIGTERM (Ctrl-C) stops CMD (the signal is passed on; SIGKILL after --grace;\n"
    "a second one kills at once), releases leadership and exits 0. SIGHUP is forwarded to\n"
    "CMD. If this process is killed, CMD gets SIGTERM.\n"
    "\n"
    "Exit status:\n"
    "  0    stopped by SIGINT/SIGTERM     CMD's status if CMD exited by itself while leading\n"
    "  64   bad command line              69   storage unreachable or failing\n"
    "  78   URI or storage unusable       126/127  CMD not executable / not found\n"
    "\n"
    "Example:\n"
    "  mongoelector elect --ttl 10 scheduler -- ./scheduler --serve\n";

}  // namespace

void print_run_help() { printf(kRunHelp, default_state_path().c_str()); }
void print_elect_help() { printf(kElectHelp, default_state_path().c_str()); }

// ------------------------------------------------------------------ run -----------

namespace {

// The grace between SIGTERM and SIGKILL. SIGTERM comes at the renew deadline, when the
// library declares the lease (or leadership) lost: ttl/10 before another process may
// take over (the library's margin is max(ttl/10, 2 x clock uncertainty + 50 ms)). With
// the grace inside ttl/20, CMD is dead with at least ttl/20 + 25 ms to spare whatever
// the clock uncertainty u (the margin left is max(ttl/10 - u, u + 50 ms) >= ttl/20 +
// 25 ms): a CMD that ignores SIGTERM cannot overlap the next holder. A longer --grace is
// refused rather than silently shortened: the user learns which ttl it needs.
bool parse_grace(const std::string& sub, Args& a, double ttl, double& grace, int& exit_code) {
  const double max_grace = ttl / 20;
  grace = max_grace;
  if (!a.values.count("grace")) return true;
  if (!parse_seconds(sub, "grace", a.values["grace"], true, grace)) {
    exit_code = kExitUsage;
    return false;
  }
  if (grace <= max_grace * (1 + 1e-9)) return true;
  char text[768];
  snprintf(text, sizeof text,
           "--grace %g s is longer than ttl/20 = %g s (--ttl %g s). CMD gets SIGTERM at the "
           "renew deadline, ttl/10 before another %s, and SIGKILL --grace later; half of "
           "that margin is kept for clock error, so with --grace %g a CMD that ignores "
           "SIGTERM could still run when the next %s starts. Use --grace %g or less, or "
           "--ttl %g or more.",
           grace, max_grace, ttl, sub == "elect" ? "node may lead" : "process may take the lock",
           grace, sub == "elect" ? "leader" : "holder", max_grace, grace * 20);
  exit_code = usage_error(sub, text);
  return false;
}

// How often the main loop reads the lease's (or leadership's) state itself, besides the
// callback's wake-up: the library decides loss from the clock, so a callback that comes
// late (its thread busy writing a log line to a stuck stderr) cannot delay SIGTERM by
// more than this. ttl/40 (10..250 ms) is half of what the grace rule leaves when the
// clock uncertainty is small (ttl/10 - u - ttl/20); in the worst case the rule leaves
// only 25 ms, so this bound is a fallback, not part of the guarantee: that needs the
// callback's prompt wake-up.
int state_check_ms(double ttl) {
  const double ms = ttl * 1000 / 40;
  return static_cast<int>(std::max(10.0, std::min(250.0, ms)));
}

// poll()'s timeout: the earlier of the kill deadline and the next state check.
int loop_timeout_ms(int kill_ms, int check_ms) {
  return kill_ms < 0 ? check_ms : std::min(kill_ms, check_ms);
}

// The end of this node's lease (server time, ms) after its last successful renewal, as
// "null" when it does not lead: local state (node status), no round trip.
std::string own_lease_end(mongoelector_elector* elector) {
  char* text = nullptr;
  std::string out = "null";
  if (mongoelector_elector_node_status(elector, &text) == MONGOELECTOR_OK && text != nullptr) {
    Json j;
    std::string error;
    if (parse_json(text, j, error))
      if (const Json* e = j.get("lock_expires"))
        if (auto ms = e->as_date_ms()) out = std::to_string(*ms);
  }
  mongoelector_free(text);
  return out;
}

// /leader of `elect`: one read of the observer (on the service's leader thread).
std::string observed_leader(mongoelector_observer* observer, const std::string& key) {
  if (observer == nullptr)
    return leader_fields(key, "unknown", false, "", "", 0, 0, 0, 0, "no observer");
  mongoelector_leader_state s{};
  s.version = MONGOELECTOR_LEADER_STATE_VERSION;
  if (mongoelector_observer_read(observer, &s) != MONGOELECTOR_OK)
    return leader_fields(key, "unknown", false, "", "", 0, 0, 0, 0, mongoelector_last_error());
  static const char* const kStatus[] = {"none", "leads", "pending", "unknown"};
  const char* status = s.status >= 0 && s.status <= 3 ? kStatus[s.status] : "unknown";
  return leader_fields(key, status, s.has_leader != 0, s.uuid, s.host, s.pid, s.fence, s.expire_ms,
                       s.server_time_ms, "", s.payload_json != nullptr ? s.payload_json : "");
}

// Renewals that succeeded in this process (mongoelector_stats_get).
uint64_t successful_renewals() {
  mongoelector_stats st{};
  st.version = MONGOELECTOR_STATS_VERSION;
  if (mongoelector_stats_get(&st) != MONGOELECTOR_OK) return 0;
  return st.renewals - st.renewal_failures;
}

void on_lease_lost(void* user_data) {
  // A library callback thread: one byte into the main loop's pipe (a hint; the loop also
  // reads the lease's state itself, see state_check_ms).
  char c = 'L';
  write_all_nb(*static_cast<int*>(user_data), &c, 1);
}

// Takes `hold` on the calling thread while another thread watches the signals:
// SIGINT/SIGTERM/SIGHUP cancel the wait (the acquire's cancel token).
mongoelector_status acquire_interruptibly(RunHold& hold, mongoelector_acquire_options how,
                                          int* lost_fd, int sigfd, int& interrupted_by) {
  mongoelector_cancel_token* token = nullptr;
  Pipe stop;
  if (mongoelector_cancel_token_new(&token) != MONGOELECTOR_OK || !stop.open()) {
    mongoelector_cancel_token_free(token);
    return hold.take(how, on_lease_lost, lost_fd);
  }
  how.cancel = token;
  std::atomic<int> sig{0};
  std::thread watcher([&] {
    for (;;) {
      struct pollfd fds[2] = {{sigfd, POLLIN, 0}, {stop.r, POLLIN, 0}};
      if (poll(fds, 2, -1) < 0 && errno != EINTR) return;
      if (fds[1].revents != 0) return;
      std::vector<struct signalfd_siginfo> sigs;
      read_signals(sigfd, sigs);
      for (const auto& si : sigs) {
        if (si.ssi_signo == SIGCHLD) continue;
        sig = static_cast<int>(si.ssi_signo);
        mongoelector_cancel_token_cancel(token);
        return;
      }
    }
  });
  mongoelector_status st = hold.take(how, on_lease_lost, lost_fd);
  char c = 'x';
  write_all_nb(stop.w, &c, 1);
  watcher.join();
  stop.close_both();
  mongoelector_cancel_token_free(token);
  interrupted_by = sig;
  return st;
}

// --max-readers N: a whole number (its range is the library's to check, by name).
bool parse_max_readers(const std::string& text, int64_t& out) {
  char* end = nullptr;
  errno = 0;
  const long long v = strtoll(text.c_str(), &end, 10);
  if (text.empty() || end == nullptr || *end != '\0' || errno != 0) {
    usage_error("run",
                "--max-readers must be a whole number: how many --shared holders KEY "
                "admits at once (got '" +
                    text + "')");
    return false;
  }
  out = v;
  return true;
}

}  // namespace

int cmd_run(int argc, char** argv, int sigfd) {
  Args a;
  int ec = 0;
  if (!parse_args("run", argc, argv, 2,
                  {"uri", "ttl", "timeout", "grace", "min-hold", "once-per", "http", "max-readers"},
                  {"wait", "verbose", "notify", "shared", "exclusive", "fair"}, 1, true, a, ec))
    return ec;
  if (a.help) {
    print_run_help();
    return kExitOk;
  }
  if (a.positional.empty()) return usage_error("run", "missing KEY (the name of the lock)");
  if (a.command.empty())
    return usage_error(
        "run", "missing the command to run: mongoelector run KEY [options] -- CMD [ARGS...]");
  const std::string key = a.positional[0];
  // --shared / --exclusive: a side of the read-write lock KEY instead of the lock KEY.
  const bool shared = a.flags.count("shared") != 0, exclusive = a.flags.count("exclusive") != 0;
  const bool rw = shared || exclusive;
  if (shared && exclusive)
    return usage_error("run",
                       "--shared and --exclusive exclude each other: --shared takes the read side "
                       "of the read-write lock KEY, --exclusive its write side");
  for (const char* lock_only : {"min-hold", "once-per"})
    if (rw && a.values.count(lock_only))
      return usage_error("run", std::string("--") + lock_only +
                                    " applies to the lock KEY only, not to --shared or "
                                    "--exclusive (the read-write lock KEY)");
  const bool fair = a.flags.count("fair") != 0;
  if (fair && shared)
    return usage_error("run",
                       "--fair does not go with --shared: readers share KEY and do not queue; "
                       "--fair applies to the lock KEY and to --exclusive (its writers)");
  if (!rw && a.values.count("max-readers"))
    return usage_error("run",
                       "--max-readers goes with --shared or --exclusive (the read-write lock KEY)");
  int64_t max_readers = 0;
  if (a.values.count("max-readers") && !parse_max_readers(a.values["max-readers"], max_readers))
    return kExitUsage;
  double ttl = 30, grace = 0, timeout = -1;
  if (a.values.count("ttl") && !parse_seconds("run", "ttl", a.values["ttl"], false, ttl))
    return kExitUsage;
  if (!parse_grace("run", a, ttl, grace, ec)) return ec;
  if (a.values.count("timeout") &&
      !parse_seconds("run", "timeout", a.values["timeout"], true, timeout))
    return kExitUsage;
  double min_hold = 0, once_per = 0;
  if (a.values.count("min-hold") &&
      !parse_seconds("run", "min-hold", a.values["min-hold"], true, min_hold))
    return kExitUsage;
  if (a.values.count("once-per") &&
      !parse_seconds("run", "once-per", a.values["once-per"], false, once_per))
    return kExitUsage;
  if (a.values.count("once-per") && once_per < 0.001)
    return usage_error("run", "--once-per must be at least 0.001 s");
  const bool wait = a.flags.count("wait") || a.values.count("timeout");
  const bool verbose = a.flags.count("verbose") != 0;
  if (!check_command(a.command, ec)) return ec;  // before taking the lock for nothing

  std::string uri;
  if (!resolve_uri(a, uri, ec, /*say_host_only=*/true)) return ec;
  ClientPtr client = open_client(uri, ec);
  if (!client) return ec;
  std::unique_ptr<RunHold> hold;
  RunLock* lock = nullptr;  // the lock KEY's, for --min-hold and --once-per
  if (rw) {
    hold = RunRwLock::open(client.get(), key,
                           shared ? MONGOELECTOR_RWLOCK_READ : MONGOELECTOR_RWLOCK_WRITE,
                           a.values.count("max-readers") ? &max_readers : nullptr, ttl, fair, ec);
  } else {
    std::unique_ptr<RunLock> l = RunLock::open(client.get(), key, kRunCollection, ttl, fair, ec);
    lock = l.get();
    hold = std::move(l);
  }
  if (!hold) return ec;
  const std::string name = hold->name();
  // Whether the lease holds, as the main loop last read it (the service's threads never
  // touch the lease, which is let go on several paths). Declared before the service, whose
  // destructor stops the threads that read them.
  std::atomic<bool> holds{false};
  std::atomic<int64_t> held_fence{0};
  Health health(ttl);
  Service service;
  if (!service.setup("run", a.values.count("http") ? a.values["http"] : "",
                     a.flags.count("notify") != 0, ec))
    return ec;
  if (service.active()) {
    health.set_role(Health::Role::kWaiting);
    health.leads_now = [&holds] { return holds.load(); };
    // READY first: the service thread sends the watchdog pings.
    service.notify("READY=1");
    service.status("waiting for " + name);
    RunHold* h = hold.get();
    service.start(
        &health, [h] { return h->leader_fields(); },
        [&held_fence, uuid = hold->uuid()] {
          const int64_t f = held_fence.load();
          return "\"uuid\": " + json_quote(uuid) +
                 ", \"fence\": " + (f != 0 ? std::to_string(f) : std::string("null"));
        },
        std::min(1.0, ttl / 4));
  }

  Pipe lost_pipe;
  if (!lost_pipe.open()) {
    msg("pipe: %s", strerror(errno));
    return kExitFailure;
  }
  mongoelector_acquire_options how;
  mongoelector_acquire_options_init(&how, MONGOELECTOR_ACQUIRE_OPTIONS_VERSION);
  how.blocking = wait ? 1 : 0;
  how.timeout_seconds = wait ? timeout : -1;
  how.step_seconds = is_sqlite_uri(uri) ? 0.05 : 0.25;
  if (wait && verbose) {
    std::string holder = hold->holder();
    if (!holder.empty()) msg("waiting for %s, %s", name.c_str(), holder.c_str());
  }
  int interrupted_by = 0;
  mongoelector_status st = acquire_interruptibly(*hold, how, &lost_pipe.w, sigfd, interrupted_by);
  if (st != MONGOELECTOR_OK) {
    std::string error = mongoelector_last_error();
    if (st == MONGOELECTOR_ERR_CANCELLED ||
        (interrupted_by != 0 && st != MONGOELECTOR_ERR_LOCK_EXISTS &&
         st != MONGOELECTOR_ERR_TIMEOUT)) {
      msg("interrupted by SIG%s while waiting for %s; the command was not run",
          sigabbrev_np(interrupted_by) ? sigabbrev_np(interrupted_by) : "?", name.c_str());
      return 128 + interrupted_by;
    }
    if (st == MONGOELECTOR_ERR_LOCK_EXISTS || st == MONGOELECTOR_ERR_TIMEOUT) {
      std::string holder = hold->holder();
      if (holder.empty()) holder = "held by another process";
      if (st == MONGOELECTOR_ERR_LOCK_EXISTS && error.find("fair queue") != std::string::npos)
        msg("%s; the command was not run (add --wait to queue for it)", error.c_str());
      else if (st == MONGOELECTOR_ERR_LOCK_EXISTS)
        msg("%s is %s; the command was not run (add --wait to wait for it, --timeout S to "
            "bound the wait)",
            key.c_str(), holder.c_str());
      else
        msg("gave up waiting for %s after %g s: %s; the command was not run", name.c_str(), timeout,
            holder.c_str());
      return kExitHeld;
    }
    msg("cannot acquire %s: %s", name.c_str(), storage_error(st).c_str());
    return exit_code_for(st);
  }
  const int64_t fence = hold->fence();
  if (interrupted_by != 0) {  // the signal came just as the lock was won
    hold->let_go();
    msg("interrupted by SIG%s while acquiring %s; released it, the command was not run",
        sigabbrev_np(interrupted_by), name.c_str());
    return 128 + interrupted_by;
  }
  if (once_per > 0) {
    // The lock first, then the window: a run still going from the last window keeps this
    // one waiting or skipped without using up the new window.
    int claimed = 0;
    int64_t window_start = 0;
    if (mongoelector_locker_claim_window(lock->locker(), once_per, &claimed, &window_start) !=
        MONGOELECTOR_OK) {
      std::string error = mongoelector_last_error();
      hold->let_go();
      msg("cannot claim this window of %s: %s; the command was not run", key.c_str(),
          error.c_str());
      return kExitUnavailable;
    }
    if (!claimed) {
      hold->let_go();
      msg("%s already ran in this %g s window (windows follow the server's clock); the "
          "command was not run",
          key.c_str(), once_per);
      return kExitHeld;
    }
    if (verbose)
      msg("claimed the window of %s starting at %" PRId64 " ms (server time)", key.c_str(),
          window_start);
  }
  if (verbose)
    msg("acquired %s (fence %" PRId64 ", ttl %g s); running %s", name.c_str(), fence, ttl,
        a.command[0].c_str());
  if (hold->lost()) {
    hold->let_go();
    msg("lease on %s was lost before the command could start; the command was not run",
        name.c_str());
    return kExitLost;
  }

  Child child;
  child.group_grace = grace;
  std::vector<std::pair<std::string, std::string>> env = {
      {"MONGOELECTOR_KEY", key}, {"MONGOELECTOR_FENCE", std::to_string(fence)}};
  for (auto& kv : hold->env()) env.push_back(std::move(kv));
  if (!child.spawn(a.command, env, ec)) {
    hold->let_go();
    return ec;
  }
  bool lost = false;
  const int check_ms = state_check_ms(ttl);
  // Health: the lease's renewals succeed (the library counts them, process-wide: this
  // process renews only this lease); seen at the loop's state checks, at most check_ms late.
  uint64_t renewed = successful_renewals();
  health.ok(true);
  held_fence = fence;
  holds = true;
  health.set_role(Health::Role::kHolder);
  service.status("holding " + name + " (fence " + std::to_string(fence) + "): running " +
                 a.command[0]);
  while (child.running()) {
    int timeout_ms = loop_timeout_ms(child.check_kill_deadline(), check_ms);
    struct pollfd fds[2] = {{sigfd, POLLIN, 0}, {lost_pipe.r, POLLIN, 0}};
    int n = poll(fds, 2, timeout_ms);
    if (n < 0 && errno != EINTR) {
      msg("poll: %s", strerror(errno));
      break;
    }
    const bool lost_now = !lost && hold->lost();
    if (const uint64_t r = successful_renewals(); r != renewed && !lost && !lost_now) {
      renewed = r;
      health.ok(true);
    }
    if (lost || lost_now) {
      holds = false;
      health.set_role(Health::Role::kLost);
    }
    if (fds[1].revents != 0 || lost_now) {
      char buf[64];
      while (read(lost_pipe.r, buf, sizeof buf) > 0) {
      }
      if (!lost) {
        lost = true;
        child.stop(SIGTERM, grace);  // first: the message cannot delay it
        msg("lease on %s LOST (fence %" PRId64
            "): it could not be renewed in time or was taken by another; stopping the command "
            "(SIGTERM now, SIGKILL after %g s)",
            name.c_str(), fence, grace);
      }
    }
    std::vector<struct signalfd_siginfo> sigs;
    read_signals(sigfd, sigs);
    for (const auto& si : sigs) {
      if (si.ssi_signo == SIGCHLD) continue;
      if (child.should_forward(si)) child.signal(static_cast<int>(si.ssi_signo));
    }
    child.reap();
  }
  if (hold->lost()) lost = true;
  if (!lost && min_hold > 0) {
    const mongoelector_status released = mongoelector_lease_release(lock->lease(), min_hold);
    if (released == MONGOELECTOR_OK && verbose)
      msg("%s stays taken until %g s after it was acquired (--min-hold)", key.c_str(), min_hold);
    else if (released != MONGOELECTOR_OK)
      // The command ran; only the promise about the next run is broken: say so, keep its status.
      msg("warning: %s may be taken again before --min-hold %g s ends: %s", key.c_str(), min_hold,
          mongoelector_last_error());
  }
  holds = false;
  service.stop();
  hold->let_go();  // releases (fenced) unless the lease was lost
  if (lost) {
    msg("lease on %s was lost while the command ran; command %s; exiting 70", name.c_str(),
        describe_wait_status(child.wait_status).c_str());
    return kExitLost;
  }
  if (verbose)
    msg("command %s; released %s", describe_wait_status(child.wait_status).c_str(), name.c_str());
  return shell_status(child.wait_status);
}

// ------------------------------------------------------------------ elect ---------

namespace {

struct ElectEvent {
  char type;  // 'L' became leader, 'l' lost leadership
  char pad[7];
  int64_t fence;
};
static_assert(sizeof(ElectEvent) == 16, "one atomic pipe write");

struct ElectContext {
  int fd = -1;
  mongoelector_elector* elector = nullptr;
  Health* health = nullptr;
};

// After each poll cycle, on the elector's thread: a cycle that logged no warning or
// error on that thread made its round trips (Health's "last successful round trip").
void elect_on_loop(void* user_data) {
  auto* ctx = static_cast<ElectContext*>(user_data);
  const bool trouble = take_logged_trouble();
  int leader = 0;
  if (!trouble && mongoelector_elector_is_leader(ctx->elector, &leader) == MONGOELECTOR_OK)
    ctx->health->ok(leader != 0);
}

void elect_on_leader(void* user_data) {
  auto* ctx = static_cast<ElectContext*>(user_data);
  ElectEvent ev{};
  ev.type = 'L';
  mongoelector_elector_fence(ctx->elector, &ev.fence);
  write_all_nb(ctx->fd, &ev, sizeof ev);
}

void elect_on_loss(void* user_data) {
  auto* ctx = static_cast<ElectContext*>(user_data);
  ElectEvent ev{};
  ev.type = 'l';
  write_all_nb(ctx->fd, &ev, sizeof ev);
}

}  // namespace

int cmd_elect(int argc, char** argv, int sigfd) {
  Args a;
  int ec = 0;
  if (!parse_args("elect", argc, argv, 2,
                  {"uri", "ttl", "grace", "http", "payload", "priority", "priority-stability"},
                  {"notify"}, 1, true, a, ec))
    return ec;
  if (a.help) {
    print_elect_help();
    return kExitOk;
  }
  if (a.positional.empty()) return usage_error("elect", "missing KEY (the name of the election)");
  if (a.command.empty())
    return usage_error(
        "elect", "missing the command to run: mongoelector elect KEY [options] -- CMD [ARGS...]");
  const std::string key = a.positional[0];
  double ttl = 15, grace = 0;
  if (a.values.count("ttl") && !parse_seconds("elect", "ttl", a.values["ttl"], false, ttl))
    return kExitUsage;
  if (!parse_grace("elect", a, ttl, grace, ec)) return ec;
  // Priority leaders: a finite number; the delay needs it (-1: the default, one ttl).
  bool has_priority = a.values.count("priority") != 0;
  double priority = 0, priority_stability = -1;
  if (has_priority) {
    const std::string& text = a.values["priority"];
    char* end = nullptr;
    errno = 0;
    priority = strtod(text.c_str(), &end);
    if (text.empty() || end == nullptr || *end != '\0' || errno != 0 || !std::isfinite(priority))
      return usage_error("elect", "--priority must be a finite number (got '" + text + "')");
  }
  if (a.values.count("priority-stability")) {
    if (!has_priority) return usage_error("elect", "--priority-stability needs --priority");
    if (!parse_seconds("elect", "priority-stability", a.values["priority-stability"], true,
                       priority_stability))
      return kExitUsage;
  }
  if (!check_command(a.command, ec)) return ec;  // before joining the election

  std::string uri;
  if (!resolve_uri(a, uri, ec, /*say_host_only=*/true)) return ec;
  ClientPtr client = open_client(uri, ec);
  if (!client) return ec;
  Health health(ttl);
  Service service;
  if (!service.setup("elect", a.values.count("http") ? a.values["http"] : "",
                     a.flags.count("notify") != 0, ec))
    return ec;
  Pipe events;
  if (!events.open()) {
    msg("pipe: %s", strerror(errno));
    return kExitFailure;
  }
  ElectContext ctx;
  ctx.fd = events.w;
  ctx.health = &health;
  std::string app_version = std::string("mongoelector elect ") + mongoelector_version();
  mongoelector_elector_config eo;
  mongoelector_elector_config_init(&eo, MONGOELECTOR_ELECTOR_CONFIG_VERSION);
  eo.ttl_seconds = ttl;
  eo.app_version = app_version.c_str();
  eo.on_leader = elect_on_leader;
  eo.on_leader_loss = elect_on_loss;
  eo.on_loop = elect_on_loop;
  eo.user_data = &ctx;
  eo.delete_on_release = 0;  // as before the config struct (the core's own default)
  eo.has_priority = has_priority ? 1 : 0;
  eo.priority = priority;
  eo.priority_stability_seconds = priority_stability;
  mongoelector_status st =
      mongoelector_elector_new_with(client.get(), key.c_str(), &eo, &ctx.elector);
  if (st != MONGOELECTOR_OK) {
    msg("cannot join the election for %s: %s\n  %s", key.c_str(), storage_error(st).c_str(),
        st == MONGOELECTOR_ERR_INVALID_ARGUMENT
            ? "a key is 1 to 1024 bytes of UTF-8"
            : "check the URI (--uri or MONGOELECTOR_URI) and the server");
    return exit_code_for(st);
  }
  if (a.values.count("payload")) {
    // Not leading yet: kept for the first claim, which writes it with the term.
    if (mongoelector_elector_set_payload(ctx.elector, a.values["payload"].c_str(), nullptr) !=
        MONGOELECTOR_OK) {
      const std::string error = mongoelector_last_error();
      mongoelector_elector_free(ctx.elector);
      return usage_error("elect", "--payload: " + error);
    }
  }
  if (mongoelector_elector_start(ctx.elector) != MONGOELECTOR_OK) {
    msg("cannot start the election loop: %s", mongoelector_last_error());
    mongoelector_elector_free(ctx.elector);
    return kExitFailure;
  }
  const char* uuid = "";
  mongoelector_elector_uuid(ctx.elector, &uuid);
  msg("elect %s: joined as %s (pid %ld, ttl %g s); waiting to lead", key.c_str(), uuid,
      static_cast<long>(getpid()), ttl);
  // /leader: the observer's view of the election (one read per interval, never a write).
  mongoelector_observer* observer = nullptr;
  if (service.active() && mongoelector_observer_new(client.get(), key.c_str(), nullptr, nullptr,
                                                    nullptr, &observer) != MONGOELECTOR_OK)
    msg("elect %s: /leader unavailable: %s", key.c_str(), mongoelector_last_error());
  if (service.active()) {
    health.leads_now = [&ctx] {
      int leader = 0;
      return mongoelector_elector_is_leader(ctx.elector, &leader) == MONGOELECTOR_OK && leader;
    };
    // READY first: the service thread sends the watchdog pings.
    service.notify("READY=1");
    service.status("follower of " + key + ": waiting to lead");
    const std::string self_uuid = uuid;
    service.start(
        &health, [observer, key] { return observed_leader(observer, key); },
        [&ctx, self_uuid] {
          int64_t f = 0;
          mongoelector_elector_fence(ctx.elector, &f);
          return "\"uuid\": " + json_quote(self_uuid) +
                 ", \"fence\": " + (f != 0 ? std::to_string(f) : std::string("null")) +
                 ", \"lease_expire_ms\": " + own_lease_end(ctx.elector);
        },
        std::min(1.0, ttl / 4));
  }

  Child child;
  child.group_grace = grace;
  bool leading = false, stopping = false, start_pending = false, stopping_child = false;
  int64_t fence = 0;
  int exit_status = kExitOk;
  auto start_child = [&]() {
    start_pending = false;
    stopping_child = false;
    if (!child.spawn(a.command,
                     {{"MONGOELECTOR_KEY", key}, {"MONGOELECTOR_FENCE", std::to_string(fence)}},
                     ec)) {
      exit_status = ec;
      stopping = true;
      return;
    }
    msg("elect %s: leading (fence %" PRId64 "); started %s (pid %ld)", key.c_str(), fence,
        a.command[0].c_str(), static_cast<long>(child.pid));
    service.status("leader of " + key + " (fence " + std::to_string(fence) + "): running " +
                   a.command[0]);
  };
  auto stop_child_on_loss = [&]() {
    stopping_child = true;
    child.stop(SIGTERM, grace);  // first: the message cannot delay it
    service.status("follower of " + key + ": leadership lost, waiting to lead again");
    msg("elect %s: leadership LOST (fence %" PRId64
        "); stopping %s (SIGTERM now, SIGKILL "
        "after %g s)",
        key.c_str(), fence, a.command[0].c_str(), grace);
  };
  const int check_ms = state_check_ms(ttl);
  for (;;) {
    // The role /healthz checks against the library's deadline: CMD runs as leader.
    health.set_role(leading && child.running() && !stopping_child ? Health::Role::kLeader
                                                                  : Health::Role::kFollower);
    if (stopping && !child.running()) break;
    int timeout_ms = loop_timeout_ms(child.check_kill_deadline(), check_ms);
    struct pollfd fds[2] = {{sigfd, POLLIN, 0}, {events.r, POLLIN, 0}};
    if (poll(fds, 2, timeout_ms) < 0 && errno != EINTR) {
      msg("poll: %s", strerror(errno));
      break;
    }
    // The term CMD runs for is over (read from the library's clock-derived state), even
    // if on_leader_loss has not come through yet: stop CMD now.
    if (child.running() && leading && !stopping_child && !stopping) {
      int64_t fence_now = 0;
      if (mongoelector_elector_fence(ctx.elector, &fence_now) == MONGOELECTOR_OK &&
          fence_now != fence) {
        leading = false;
        start_pending = false;
        stop_child_on_loss();
      }
    }
    if (fds[1].revents != 0) {
      ElectEvent evs[32];
      ssize_t n;
      while ((n = read(events.r, evs, sizeof evs)) > 0) {
        for (ssize_t i = 0; i < n / static_cast<ssize_t>(sizeof(ElectEvent)); ++i) {
          if (evs[i].type == 'L') {
            leading = true;
            fence = evs[i].fence;
            if (stopping) continue;
            if (child.running())
              start_pending = true;  // the previous one is still stopping
            else
              start_child();
          } else {
            leading = false;
            start_pending = false;
            if (child.running() && !stopping_child) {
              stop_child_on_loss();
            } else if (!child.running()) {
              msg("elect %s: leadership lost (fence %" PRId64 "); waiting to lead again",
                  key.c_str(), fence);
            }
          }
        }
      }
    }
    std::vector<struct signalfd_siginfo> sigs;
    read_signals(sigfd, sigs);
    for (const auto& si : sigs) {
      int sig = static_cast<int>(si.ssi_signo);
      if (sig == SIGCHLD) continue;
      if (sig == SIGHUP) {
        if (child.should_forward(si)) child.signal(SIGHUP);
        continue;
      }
      if (stopping) {  // a second Ctrl-C: do not wait any longer
        child.signal(SIGKILL);
        continue;
      }
      stopping = true;
      service.notify_stopping();
      if (child.running()) {
        msg("elect %s: SIG%s: stopping %s, then giving up leadership", key.c_str(),
            sigabbrev_np(sig), a.command[0].c_str());
        stopping_child = true;
        if (child.should_forward(si))
          child.stop(sig, grace);
        else
          child.kill_at = mono_s() + grace;  // the terminal sent it to CMD already
      }
    }
    if (child.reap()) {
      if (stopping) {
        // exit_status stays 0: stopped on request
      } else if (stopping_child) {
        msg("elect %s: %s %s; waiting to lead again", key.c_str(), a.command[0].c_str(),
            describe_wait_status(child.wait_status).c_str());
        if (start_pending && leading) start_child();
      } else {
        msg("elect %s: %s %s while leading; giving up leadership and exiting", key.c_str(),
            a.command[0].c_str(), describe_wait_status(child.wait_status).c_str());
        exit_status = shell_status(child.wait_status);
        stopping = true;
      }
    }
  }
  service.stop();  // its threads read the elector and the observer
  mongoelector_observer_free(observer);
  mongoelector_elector_free(ctx.elector);  // stops the loop, releases leadership
  msg("elect %s: left the election", key.c_str());
  return exit_status;
}

}  // namespace cli
