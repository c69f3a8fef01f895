// `mongoelector demo`: three elector processes (this program re-executed as hidden
// `__demo-node` nodes) elect a leader, the leader is killed with SIGKILL, another takes
// over; prints the events as they happen, the measured failover and a short timeline.
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace cli {

namespace {

const char* kDemoHelp =
    "Usage: mongoelector demo [--uri URI] [--ttl S]\n"
    "\n"
    "Starts three elector processes on one key, shows which one leads, kills the leader with\n"
    "SIGKILL, and shows another process taking over, with the failover time measured from\n"
    "the kill to the new leader's first moment of leadership; then stops the others and\n"
    "prints a short timeline.\n"
    "\n"
    "  --uri URI   run it against this storage (e.g. mongodb://127.0.0.1:27017/test; key\n"
    "              \"mongoelector-demo-<pid>\"). Without it: the embedded SQLite backend in a\n"
    "              new temporary directory, removed afterwards (no server, no network).\n"
    "              MONGOELECTOR_URI is NOT used: the demo never touches your locks.\n"
    "  --ttl S     the leadership lease (default 2): failover takes about S seconds\n"
    "\n"
    "Exit status: 0 when a failover was seen; 1 if not (the events say what happened);\n"
    "64 bad command line; 69/78 storage unreachable/unusable; 130 interrupted.\n";

struct Node {
  std::string name;
  pid_t pid = -1;
  int out = -1;  // read end of its stdout
  std::string buffer;
  bool killed = false, exited = false;
};

struct Event {
  double t;  // CLOCK_MONOTONIC of the node (same clock in every process of this host)
  std::string node, what, arg;
};

class Demo {
 public:
  Demo(int sigfd, double t0) : sigfd_(sigfd), t0_(t0) {}
  std::vector<Node> nodes;
  std::vector<Event> events;
  bool interrupted = false;

  void print(double t, const std::string& who, const std::string& text) {
    printf("  %7.3f s  %-7s %s\n", t - t0_, who.c_str(), text.c_str());
    fflush(stdout);
  }
  // Reads node output until `until` (monotonic) or until `done` says so.
  template <class Pred>
  bool pump(double until, Pred done) {
    for (;;) {
      if (done()) return true;
      double left = until - mono_s();
      if (left <= 0) return false;
      bool any_open = false;
      for (auto& n : nodes) any_open = any_open || n.out >= 0;
      if (!any_open) return false;  // every node has exited
      std::vector<struct pollfd> fds;
      fds.push_back({sigfd_, POLLIN, 0});
      for (auto& n : nodes)
        if (n.out >= 0) fds.push_back({n.out, POLLIN, 0});
      if (poll(fds.data(), fds.size(), static_cast<int>(left * 1000) + 1) < 0 && errno != EINTR)
        return false;
      std::vector<struct signalfd_siginfo> sigs;
      read_signals(sigfd_, sigs);
      for (const auto& si : sigs) {
        if (si.ssi_signo != SIGCHLD) {
          interrupted = true;
          return false;
        }
      }
      for (auto& n : nodes) read_node(n);
      reap();
    }
  }
  void reap() {
    for (auto& n : nodes) {
      if (n.pid <= 0 || n.exited) continue;
      int st;
      if (waitpid(n.pid, &st, WNOHANG) == n.pid) n.exited = true;
    }
  }
  const Event* find(const std::string& what, double after, const std::string& except = "") const {
    for (const auto& e : events)
      if (e.what == what && e.t >= after && e.node != except) return &e;
    return nullptr;
  }

 private:
  void read_node(Node& n) {
    if (n.out < 0) return;
    char buf[1024];
    for (;;) {
      ssize_t r = read(n.out, buf, sizeof buf);
      if (r > 0) {
        n.buffer.append(buf, static_cast<size_t>(r));
        continue;
      }
      if (r == 0) {
        close(n.out);
        n.out = -1;
      }
      break;
    }
    size_t nl;
    while ((nl = n.buffer.find('\n')) != std::string::npos) {
      std::string line = n.buffer.substr(0, nl);
      n.buffer.erase(0, nl + 1);
      std::istringstream in(line);
      Event e;
      e.node = n.name;
      in >> e.t >> e.what;
      std::getline(in, e.arg);
      if (!e.arg.empty() && e.arg[0] == ' ') e.arg.erase(0, 1);
      events.push_back(e);
      if (e.what == "started")
        print(e.t, n.name, "started (pid " + e.arg + "), following");
      else if (e.what == "leader")
        print(e.t, n.name, "LEADER (fence " + e.arg + ")");
      else if (e.what == "lost")
        print(e.t, n.name, "lost leadership");
      else if (e.what == "released")
        print(e.t, n.name, "released leadership");
      else if (e.what == "stopped")
        print(e.t, n.name, "stopped");
      else
        print(e.t, n.name, e.what + " " + e.arg);
    }
  }
  int sigfd_;
  double t0_;
};

void remove_tree(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    while (struct dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") unlink((dir + "/" + name).c_str());
    }
    closedir(d);
  }
  rmdir(dir.c_str());
}

std::string self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  buf[n] = '\0';
  return buf;
}

}  // namespace

void print_demo_help() { fputs(kDemoHelp, stdout); }

int cmd_demo(int argc, char** argv, int sigfd) {
  Args a;
  int ec = 0;
  if (!parse_args("demo", argc, argv, 2, {"uri", "ttl"}, {}, 0, false, a, ec)) return ec;
  if (a.help) {
    print_demo_help();
    return kExitOk;
  }
  double ttl = 2;
  if (a.values.count("ttl") && !parse_seconds("demo", "ttl", a.values["ttl"], false, ttl))
    return kExitUsage;
  std::string uri, tmpdir, key = "demo-service", where;
  if (a.values.count("uri")) {
    uri = a.values["uri"];
    key = "mongoelector-demo-" + std::to_string(getpid());
    where = redact_uri(uri);
  } else {
    const char* t = getenv("TMPDIR");
    std::string templ =
        std::string(t != nullptr && t[0] == '/' ? t : "/tmp") + "/mongoelector-demo-XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) {
      msg("cannot create a temporary directory %s: %s; set TMPDIR to a writable directory",
          templ.c_str(), strerror(errno));
      return kExitConfig;
    }
    tmpdir = buf.data();
    uri = "sqlite://" + tmpdir + "/locks.db";
    where = uri + " (embedded SQLite in a temporary directory: no server)";
  }
  std::string exe = self_exe();
  if (exe.empty()) {
    msg("cannot find this program's path (/proc/self/exe)");
    return kExitFailure;
  }
  // The client first: a bad URI fails here, before any node starts.
  ClientPtr client = open_client(uri, ec);
  if (!client) {
    if (!tmpdir.empty()) remove_tree(tmpdir);
    return ec;
  }
  {  // One round trip now: an unreachable server fails here, not after 20 s of nodes waiting.
    LockerPtr probe = open_locker(client.get(), key, kElectCollection, ttl, ec);
    if (!probe) {
      client.reset();
      if (!tmpdir.empty()) remove_tree(tmpdir);
      return ec;
    }
  }
  char ttl_text[32];
  snprintf(ttl_text, sizeof ttl_text, "%g", ttl);

  const double t0 = mono_s();
  printf("mongoelector demo: three elector processes on key \"%s\", ttl %s s\n", key.c_str(),
         ttl_text);
  printf("storage: %s\n\n", where.c_str());
  printf("  %9s  %-7s %s\n", "time", "process", "event");
  fflush(stdout);
  Demo demo(sigfd, t0);
  int result = kExitOk;
  auto finish = [&](int code) {
    for (auto& n : demo.nodes)
      if (n.pid > 0 && !n.exited) kill(n.pid, SIGKILL);
    for (auto& n : demo.nodes)
      if (n.pid > 0 && !n.exited) waitpid(n.pid, nullptr, 0);
    client.reset();
    if (!tmpdir.empty()) remove_tree(tmpdir);
    return code;
  };

  for (int i = 1; i <= 3; ++i) {
    Node n;
    n.name = "node-" + std::to_string(i);
    Pipe p;
    if (!p.open()) return finish(kExitFailure);
    n.pid = spawn_command({exe, "__demo-node", uri, n.name, ttl_text, key}, {}, ec, p.w);
    close(p.w);
    n.out = p.r;
    if (n.pid < 0) {
      close(p.r);
      return finish(ec);
    }
    demo.nodes.push_back(n);
  }

  // 1. Election.
  const Event* first = nullptr;
  demo.pump(mono_s() + 15 + 3 * ttl, [&] { return (first = demo.find("leader", 0)) != nullptr; });
  if (demo.interrupted) return finish(130);
  if (first == nullptr) {
    printf("\nno leader was elected within %g s: see the messages above\n", 15 + 3 * ttl);
    return finish(kExitFailure);
  }
  Event elected = *first;
  Node* leader = nullptr;
  for (auto& n : demo.nodes)
    if (n.name == elected.node) leader = &n;

  // 2. The leader keeps its leadership through several renewals.
  double hold_until = mono_s() + ttl;
  demo.pump(hold_until,
            [&] { return demo.find("lost", 0) || demo.find("leader", 0, elected.node); });
  if (demo.interrupted) return finish(130);
  if (demo.find("lost", 0) || demo.find("leader", 0, elected.node)) {
    printf("\nleadership moved while the leader was healthy: see the events above\n");
    return finish(kExitFailure);
  }
  char text[256];
  snprintf(text, sizeof text, "%s still leads after %g s (it renews every %.2f s)",
           elected.node.c_str(), ttl, ttl / 3);
  demo.print(mono_s(), "demo", text);
  printf("\n  $ mongoelector status %s\n", key.c_str());
  fflush(stdout);
  int st = print_status(client.get(), uri, key, false, "    ");
  if (st != kExitOk) return finish(st);
  printf("\n");

  // 3. kill -9 the leader; 4. a follower takes over.
  const double killed_at = mono_s();
  snprintf(text, sizeof text, "kill -9 %s (pid %ld)", leader->name.c_str(),
           static_cast<long>(leader->pid));
  demo.print(killed_at, "demo", text);
  kill(leader->pid, SIGKILL);
  leader->killed = true;
  const Event* second = nullptr;
  demo.pump(killed_at + 3 * ttl + 10,
            [&] { return (second = demo.find("leader", killed_at, elected.node)) != nullptr; });
  if (demo.interrupted) return finish(130);
  if (second == nullptr) {
    printf("\nno failover within %g s of the kill: see the messages above\n", 3 * ttl + 10);
    return finish(kExitFailure);
  }
  Event took_over = *second;
  const double failover = took_over.t - killed_at;

  // 5. Stop the others (SIGTERM: they release leadership and exit).
  demo.print(mono_s(), "demo", "stop the other nodes (SIGTERM)");
  for (auto& n : demo.nodes)
    if (!n.killed && !n.exited) kill(n.pid, SIGTERM);
  demo.pump(mono_s() + 10, [&] {
    for (auto& n : demo.nodes)
      if (!n.exited || n.out >= 0) return false;
    return true;
  });
  if (demo.interrupted) return finish(130);

  printf(
      "\nfailover: %.2f s from SIGKILL to the new leader (ttl %s s: the killed leader's lease\n"
      "ran out, then a follower took over%s)\n\n",
      failover, ttl_text, tmpdir.empty() ? "" : "; no server, no network, no Java");
  printf("timeline:\n");
  printf("  %7.3f s  three elector processes started\n", 0.0);
  printf("  %7.3f s  %s elected (fence %s)\n", elected.t - t0, elected.node.c_str(),
         elected.arg.c_str());
  printf("  %7.3f s  %s killed with SIGKILL\n", killed_at - t0, elected.node.c_str());
  printf("  %7.3f s  %s elected (fence %s), %.2f s after the kill\n", took_over.t - t0,
         took_over.node.c_str(), took_over.arg.c_str(), failover);
  fflush(stdout);
  return finish(result);
}

// ------------------------------------------------------------------ node ----------

namespace {
struct NodeContext {
  mongoelector_elector* elector = nullptr;
};
void node_on_leader(void* user_data) {
  auto* ctx = static_cast<NodeContext*>(user_data);
  int64_t fence = 0;
  mongoelector_elector_fence(ctx->elector, &fence);
  printf("%.6f leader %" PRId64 "\n", mono_s(), fence);
  fflush(stdout);
}
std::atomic<bool> g_node_stopping{false};
void node_on_loss(void*) {
  printf("%.6f %s\n", mono_s(), g_node_stopping ? "released" : "lost");
  fflush(stdout);
}
}  // namespace

int cmd_demo_node(int argc, char** argv, int sigfd) {
  if (argc != 6) {
    msg("__demo-node is internal to `mongoelector demo`");
    return kExitUsage;
  }
  const std::string uri = argv[2], name = argv[3], key = argv[5];
  const double ttl = atof(argv[4]);
  int ec = 0;
  ClientPtr client = open_client(uri, ec);
  if (!client) {
    printf("%.6f error cannot open the storage\n", mono_s());
    return ec;
  }
  NodeContext ctx;
  mongoelector_elector_options eo;
  mongoelector_elector_options_init(&eo);
  eo.ttl_seconds = ttl;
  eo.app_version = "mongoelector demo";
  eo.on_leader = node_on_leader;
  eo.on_leader_loss = node_on_loss;
  eo.user_data = &ctx;
  if (mongoelector_elector_new(client.get(), key.c_str(), &eo, &ctx.elector) != MONGOELECTOR_OK ||
      mongoelector_elector_start(ctx.elector) != MONGOELECTOR_OK) {
    printf("%.6f error %s\n", mono_s(), mongoelector_last_error());
    fflush(stdout);
    mongoelector_elector_free(ctx.elector);
    return kExitUnavailable;
  }
  printf("%.6f started %ld\n", mono_s(), static_cast<long>(getpid()));
  fflush(stdout);
  for (;;) {
    struct pollfd fd = {sigfd, POLLIN, 0};
    poll(&fd, 1, -1);
    std::vector<struct signalfd_siginfo> sigs;
    read_signals(sigfd, sigs);
    bool stop = false;
    for (const auto& si : sigs)
      if (si.ssi_signo != SIGCHLD) stop = true;
    if (stop) break;
  }
  g_node_stopping = true;
  mongoelector_elector_free(ctx.elector);  // stops, releases leadership (on_leader_loss)
  printf("%.6f stopped\n", mono_s());
  fflush(stdout);
  return kExitOk;
}

}  // namespace cli
