// The `mongoelector` command: a consumer of the public C API (mongoelector.h) only.
// Shared pieces of the subcommands (main.cpp, util.cpp, run.cpp, elect.cpp, status.cpp,
// demo.cpp).
#pragma once

#include <mongoelector.h>

#include <signal.h>
#include <sys/signalfd.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cli {

// Exit codes (sysexits.h where one fits); documented in `mongoelector --help` and README.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,       // anything not listed below (demo: no failover seen)
  kExitUsage = 64,        // EX_USAGE: bad command line
  kExitUnavailable = 69,  // EX_UNAVAILABLE: storage unreachable or failing
  kExitLost = 70,         // EX_SOFTWARE: the lease was lost while CMD ran (run)
  kExitHeld = 75,         // EX_TEMPFAIL: held by another (no --wait, or --timeout expired)
  kExitConfig = 78,       // EX_CONFIG: the URI or its storage cannot be used
  kExitNoExec = 126,      // CMD found but not executable
  kExitNotFound = 127,    // CMD not found
};

extern const char* g_prog;  // "mongoelector"

// ---- messages -----------------------------------------------------------------------
// "mongoelector: <text>" on stderr (one write, so lines of concurrent processes and of
// the library's threads do not interleave).
void msg(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Prints "mongoelector <sub>: <text>\nTry 'mongoelector <sub> --help'." and returns 64.
int usage_error(const std::string& sub, const std::string& text);

// ---- command line -------------------------------------------------------------------
struct Args {
  std::vector<std::string> positional;              // before `--` (KEY, ...)
  std::map<std::string, std::string> values;        // --name VALUE / --name=VALUE
  std::map<std::string, bool> flags;                // --name
  std::vector<std::string> command;                 // after `--` (or the first extra word)
  bool help = false;
};
// Parses argv[first..]. `with_value` and `flag_names` list the accepted options (without
// the leading "--"). `max_positional`: words beyond it start the command (run/elect).
// Returns false (message printed) on an unknown option or a missing value.
bool parse_args(const std::string& sub, int argc, char** argv, int first,
                const std::vector<std::string>& with_value,
                const std::vector<std::string>& flag_names, std::size_t max_positional,
                bool takes_command, Args& out, int& exit_code);
// A positive finite number of seconds (or >= 0 with allow_zero). Prints the error.
bool parse_seconds(const std::string& sub, const std::string& name, const std::string& text,
                   bool allow_zero, double& out);

// ---- URI ----------------------------------------------------------------------------
// --uri, else $MONGOELECTOR_URI, else sqlite:/// + default_state_path() (its directory
// created). Prints the error and returns false when the default path cannot be made.
bool resolve_uri(const Args& args, std::string& uri, int& exit_code);
// $XDG_STATE_HOME/mongoelector/locks.db or ~/.local/state/mongoelector/locks.db.
std::string default_state_path();
// The database for mongodb:// URIs: the URI's path ("mongodb://h/app" -> "app"), else
// "mongoelector". "" for sqlite: (ignored there).
std::string database_of(const std::string& uri);
// The URI with any password replaced by "***" (for messages).
std::string redact_uri(const std::string& uri);
bool is_sqlite_uri(const std::string& uri);

// ---- library ------------------------------------------------------------------------
// Exit code for a failed library call.
int exit_code_for(mongoelector_status st);
// Sends the library's warnings and errors to stderr as "mongoelector[pid]: warning: ...".
void install_log_callback();
// Opens the client; on failure prints what was wrong and what to do.
struct ClientDeleter {
  void operator()(mongoelector_client* c) const { mongoelector_client_free(c); }
};
struct LockerDeleter {
  void operator()(mongoelector_locker* l) const { mongoelector_locker_free(l); }
};
using ClientPtr = std::unique_ptr<mongoelector_client, ClientDeleter>;
using LockerPtr = std::unique_ptr<mongoelector_locker, LockerDeleter>;
ClientPtr open_client(const std::string& uri, int& exit_code);
// The collection `run` locks in (the C API's default) and the elector's.
constexpr const char* kRunCollection = "mongolocker";
constexpr const char* kElectCollection = "elector.locks";
LockerPtr open_locker(mongoelector_client* client, const std::string& key,
                      const char* collection, double ttl, int& exit_code);
// "held by HOST pid PID (fence F, expires in X s)" or "" if free / unreadable.
std::string describe_holder(mongoelector_locker* locker);

// ---- time ---------------------------------------------------------------------------
double mono_s();        // CLOCK_MONOTONIC, seconds
int64_t wall_ms();      // CLOCK_REALTIME, ms since the epoch
std::string iso_ms(int64_t ms);  // "2024-05-01 12:00:03.123 UTC"

// ---- signals and children -----------------------------------------------------------
// Blocks SIGINT, SIGTERM, SIGHUP and SIGCHLD in this thread (call first, before any
// thread exists, so every thread inherits the mask) and returns a signalfd for them.
// SIGPIPE is ignored (a closed stdout does not kill the command).
int setup_signal_fd();
// Reads every pending signal of the signalfd into `out` (non-blocking).
void read_signals(int sigfd, std::vector<struct signalfd_siginfo>& out);

// A pipe with both ends close-on-exec and non-blocking (for callbacks -> main loop).
struct Pipe {
  int r = -1, w = -1;
  bool open();
  void close_both();
};
void write_all_nb(int fd, const void* data, size_t n);  // async-signal-safe, retries EINTR

// Starts `argv` (PATH searched) with the signal mask cleared, default dispositions and
// `env_overrides` set in its environment (removing other values of those names). Our own
// descriptors are close-on-exec; inherited ones pass through. The child gets SIGTERM if
// this process dies (PR_SET_PDEATHSIG). On failure prints why and sets exit_code
// (126/127). own_group: the child leads a process group of its own (signals then reach
// everything CMD starts), and takes the terminal's foreground when we had it (so an
// interactive CMD can read it); *took_terminal says whether it did.
pid_t spawn_command(const std::vector<std::string>& argv,
                    const std::vector<std::pair<std::string, std::string>>& env_overrides,
                    int& exit_code, int stdout_fd = -1, bool own_group = false,
                    bool* took_terminal = nullptr);
// Whether argv[0] can be run (found in PATH, executable); prints why not (126/127).
bool check_command(const std::vector<std::string>& argv, int& exit_code);
// Exit status of a waited-for child as a shell reports it (128+N for signal N).
int shell_status(int wait_status);
std::string describe_wait_status(int wait_status);

// ---- child supervision shared by run and elect ------------------------------------------
// The result of draining the signalfd: whether our child was reaped, and signals to act on.
struct Child {
  pid_t pid = -1;
  bool running() const { return pid > 0; }
  int wait_status = 0;
  // Stop in progress: SIGKILL at this monotonic time (0: none).
  double kill_at = 0;
  // CMD runs as the leader of its own process group (spawn(): run and elect): every
  // signal goes to the whole group, so CMD's own children (a shell's pipeline, workers)
  // are stopped with it, not left running without the lock.
  bool own_group = false;
  bool has_terminal = false;  // it was given the terminal's foreground; reap() takes it back
  pid_t pgid = -1;               // CMD's group (kept after the reap)
  bool group_signalled = false;  // we signalled the group since CMD started
  double group_grace = 5;        // drain_group(): SIGTERM to SIGKILL
  // After CMD exited: stops what it left in its group (reap() calls it).
  void drain_group();
  // spawn_command(own_group) into this Child; false (exit_code set) if it did not start.
  bool spawn(const std::vector<std::string>& argv,
             const std::vector<std::pair<std::string, std::string>>& env_overrides, int& exit_code);
  // Sends `sig` to CMD (its whole group).
  void signal(int sig);
  // Sends `sig` now, and SIGKILL after `grace` seconds if it is still running.
  void stop(int sig, double grace);
  // Reaps the child if it exited; true when it did (wait_status set, pid = -1).
  bool reap();
  // SIGKILL if its grace period is over. Returns the poll timeout (ms) until then, -1.
  int check_kill_deadline();
  // Whether a signal we received should be passed on. CMD in its own group: always (the
  // terminal signals our group or, when CMD has the terminal, CMD's group only, never
  // both). Otherwise signals the kernel sent to the whole foreground group (Ctrl-C,
  // hangup) already reached CMD and are not sent twice.
  bool should_forward(const struct signalfd_siginfo& si) const;
};

// ---- subcommands --------------------------------------------------------------------
// sigfd: from setup_signal_fd(), called by main() before anything else.
int cmd_run(int argc, char** argv, int sigfd);
int cmd_elect(int argc, char** argv, int sigfd);
int cmd_status(int argc, char** argv);
int cmd_demo(int argc, char** argv, int sigfd);
int cmd_demo_node(int argc, char** argv, int sigfd);  // hidden: one elector process of `demo`
void print_run_help();
void print_elect_help();
void print_status_help();
void print_demo_help();

// The status of KEY: printed as a table (indent before each line) or as JSON.
int print_status(mongoelector_client* client, const std::string& uri, const std::string& key,
                 bool json, const std::string& indent);

// ---- minimal JSON reader (for mongoelector_elector_cluster_detail) --------------------
struct Json {
  enum Type { Null, Bool, Number, String, Array, Object } type = Null;
  bool b = false;
  double num = 0;
  int64_t i = 0;  // exact value when the number is an integer
  std::string str;
  std::vector<Json> arr;
  std::vector<std::pair<std::string, Json>> obj;
  const Json* get(const std::string& name) const;
  // {"$date": "ISO-8601"}, {"$date": {"$numberLong": "ms"}}, {"$date": ms} or a number
  // -> ms; nullopt otherwise.
  std::optional<int64_t> as_date_ms() const;
};
bool parse_json(const std::string& text, Json& out, std::string& error);
std::string json_quote(const std::string& s);

}  // namespace cli
