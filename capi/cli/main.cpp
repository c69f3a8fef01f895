// mongoelector: distributed locks and leader election from the shell.
//
// A consumer of the public C API only (mongoelector.h, libmongoelector): run a command
// under a keep-alive lease (run), while leading (elect), show a key's holder (status),
// and a self-contained failover demo (demo).
#include "cli.h"

#include <cstdio>
#include <cstring>
#include <string>

namespace {

const char* kHelp =
    "Usage: mongoelector SUBCOMMAND [OPTIONS] ...\n"
    "\n"
    "Distributed locks and leader election on MongoDB or an embedded SQLite file.\n"
    "\n"
    "Subcommands:\n"
    "  run KEY [--uri URI] [--ttl S] [--wait] [--timeout S] [--grace S] -- CMD [ARGS...]\n"
    "        run CMD while holding the lock KEY (kept alive while CMD runs)\n"
    "  run (--shared | --exclusive) KEY [--max-readers N] [...] -- CMD [ARGS...]\n"
    "        the same with the read side (many at once) or the write side (alone) of\n"
    "        the read-write lock KEY\n"
    "  elect KEY [--uri URI] [--ttl S] [--grace S] [--http ADDR] [--notify]\n"
    "        -- CMD [ARGS...]\n"
    "        run CMD while this process leads the election KEY; wait to lead again on loss\n"
    "  status KEY [--uri URI] [--json]\n"
    "        holder, fencing token, expiry and elector members of KEY; its read-write\n"
    "        lock's holders, and each partition's owner when KEY is a partition group\n"
    "  demo [--uri URI] [--ttl S]\n"
    "        three elector processes, kill -9 the leader, watch the failover\n"
    "  SUBCOMMAND --help    details of one subcommand\n"
    "\n"
    "Options:\n"
    "  --help, -h       this text\n"
    "  --version        the version of this command and of libmongoelector\n"
    "\n"
    "Storage (--uri URI): mongodb://host:port/database (MongoDB; database default\n"
    "\"mongoelector\") or sqlite:///absolute/path.db (one host, no server). Without --uri:\n"
    "$MONGOELECTOR_URI, else the per-user default\n"
    "  sqlite://%s\n"
    "($XDG_STATE_HOME/mongoelector/locks.db, else ~/.local/state/mongoelector/locks.db;\n"
    "the directory is created).\n"
    "\n"
    "Exit status:\n"
    "  0    success                         1    other failure (demo: no failover seen)\n"
    "  64   bad command line                69   storage unreachable or failing\n"
    "  70   run: lease lost while CMD ran   75   run: lock held by another (no --wait,\n"
    "                                            or --timeout expired); CMD not run\n"
    "  78   URI or storage unusable         126  CMD not executable    127  CMD not found\n"
    "  run passes CMD's status through (128+N if CMD died of signal N).\n";

void print_help(FILE* to) { fprintf(to, kHelp, cli::default_state_path().c_str()); }

}  // namespace

int main(int argc, char** argv) {
  using namespace cli;
  if (argc < 2) {
    print_help(stderr);
    return kExitUsage;
  }
  const std::string sub = argv[1];
  if (sub == "--help" || sub == "-h" || sub == "help") {
    std::string topic = argc > 2 ? argv[2] : "";
    if (topic == "run")
      print_run_help();
    else if (topic == "elect")
      print_elect_help();
    else if (topic == "status")
      print_status_help();
    else if (topic == "demo")
      print_demo_help();
    else
      print_help(stdout);
    return kExitOk;
  }
  if (sub == "--version" || sub == "-V" || sub == "version") {
    printf("mongoelector %s (libmongoelector %s, C API header %s)\n", mongoelector_version(),
           mongoelector_version(), MONGOELECTOR_VERSION_STRING);
    return kExitOk;
  }
  // Before any library call: every thread the library starts inherits the blocked mask,
  // so signals reach only this thread's signalfd.
  int sigfd = setup_signal_fd();
  install_log_callback();
  if (sub == "run") return cmd_run(argc, argv, sigfd);
  if (sub == "elect") return cmd_elect(argc, argv, sigfd);
  if (sub == "status") return cmd_status(argc, argv);
  if (sub == "demo") return cmd_demo(argc, argv, sigfd);
  if (sub == "__demo-node") return cmd_demo_node(argc, argv, sigfd);
  if (!sub.empty() && sub[0] == '-') return usage_error("", "unknown option '" + sub + "'");
  return usage_error("", "unknown subcommand '" + sub + "' (run, elect, status or demo)");
}
