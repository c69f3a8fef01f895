// Processes: our signals (a signalfd), starting CMD, stopping it and its group.
#pragma once

#include <signal.h>
#include <sys/signalfd.h>
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace cli {

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
  bool has_terminal = false;     // it was given the terminal's foreground; reap() takes it back
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

}  // namespace cli
