// Processes: signals, starting and stopping CMD (process.h).
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

extern char** environ;

namespace cli {

static const int kHandled[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};
// Signals whose default disposition a child gets back (unless we found them ignored at
// start: a background job's SIGINT stays ignored in its command too).
static const int kResetInChild[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD};
static sigset_t g_reset_in_child;

int setup_signal_fd() {
  sigemptyset(&g_reset_in_child);
  for (int s : kResetInChild) {
    struct sigaction old;
    if (sigaction(s, nullptr, &old) == 0 && old.sa_handler == SIG_IGN && s != SIGPIPE) continue;
    sigaddset(&g_reset_in_child, s);
  }
  signal(SIGPIPE, SIG_IGN);
  sigset_t set;
  sigemptyset(&set);
  for (int s : kHandled) sigaddset(&set, s);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) {
    msg("signalfd: %s", strerror(errno));
    exit(kExitFailure);
  }
  return fd;
}

void read_signals(int sigfd, std::vector<struct signalfd_siginfo>& out) {
  for (;;) {
    struct signalfd_siginfo si;
    ssize_t n = read(sigfd, &si, sizeof si);
    if (n == static_cast<ssize_t>(sizeof si)) {
      out.push_back(si);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return;
  }
}

bool Child::should_forward(const struct signalfd_siginfo& si) const {
  return own_group || si.ssi_code != SI_KERNEL;
}

namespace {
// tcsetpgrp from a process outside the foreground group raises SIGTTOU unless the
// calling thread blocks it.
void give_terminal_to(pid_t pgid) {
  sigset_t ttou, old;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  pthread_sigmask(SIG_BLOCK, &ttou, &old);
  (void)tcsetpgrp(STDIN_FILENO, pgid);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}
}  // namespace

bool Pipe::open() { return pipe2(&r, O_CLOEXEC | O_NONBLOCK) == 0; }

void Pipe::close_both() {
  if (r >= 0) close(r);
  if (w >= 0) close(w);
  r = w = -1;
}

void write_all_nb(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // full pipe: the reader has enough to wake up
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// ------------------------------------------------------------------ children ------

// PATH search done here, before fork: the child only makes async-signal-safe calls.
static std::string find_executable(const std::string& name, int& err) {
  err = ENOENT;
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) {
    if (access(name.c_str(), F_OK) != 0) return "";
    err = access(name.c_str(), X_OK) == 0 ? 0 : EACCES;
    return err == 0 ? name : "";
  }
  const char* path = getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t pos = 0;
  for (;;) {
    size_t colon = dirs.find(':', pos);
    std::string dir =
        dirs.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st;
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      if (access(candidate.c_str(), X_OK) == 0) {
        err = 0;
        return candidate;
      }
      err = EACCES;
    }
    if (colon == std::string::npos) break;
    pos = colon + 1;
  }
  return "";
}

// argv[0] as a path to exec, or "" after printing why it cannot run (exit_code 126/127).
static std::string runnable(const std::vector<std::string>& argv, int& exit_code) {
  int err = 0;
  std::string exe = find_executable(argv.empty() ? "" : argv[0], err);
  if (!exe.empty()) return exe;
  if (err == ENOENT) {
    msg("%s: command not found (not a file, nor in PATH)", argv.empty() ? "" : argv[0].c_str());
    exit_code = kExitNotFound;
  } else {
    msg("cannot run %s: %s", argv[0].c_str(), strerror(err));
    exit_code = kExitNoExec;
  }
  return "";
}

bool check_command(const std::vector<std::string>& argv, int& exit_code) {
  return !runnable(argv, exit_code).empty();
}

pid_t spawn_command(const std::vector<std::string>& argv,
                    const std::vector<std::pair<std::string, std::string>>& env_overrides,
                    int& exit_code, int stdout_fd, bool own_group, bool* took_terminal) {
  if (took_terminal != nullptr) *took_terminal = false;
  const bool take_terminal =
      own_group && isatty(STDIN_FILENO) == 1 && tcgetpgrp(STDIN_FILENO) == getpgrp();
  const std::string exe = runnable(argv, exit_code);
  if (exe.empty()) return -1;
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry = *e;
    bool overridden = false;
    for (const auto& [name, value] : env_overrides)
      if (entry.compare(0, name.size() + 1, name + "=") == 0) overridden = true;
    if (!overridden) env.push_back(entry);
  }
  for (const auto& [name, value] : env_overrides) env.push_back(name + "=" + value);
  std::vector<char*> envp, args;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);

  // exec's errno comes back through a close-on-exec pipe: EOF means exec succeeded.
  int errpipe[2];
  if (pipe2(errpipe, O_CLOEXEC) != 0) {
    msg("pipe: %s", strerror(errno));
    exit_code = kExitFailure;
    return -1;
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    msg("cannot start %s: fork: %s", argv[0].c_str(), strerror(errno));
    close(errpipe[0]);
    close(errpipe[1]);
    exit_code = kExitFailure;
    return -1;
  }
  if (pid == 0) {
    // Child of a multi-threaded process: async-signal-safe calls only, then exec.
    // If this command dies (even with kill -9), the command gets SIGTERM: it must not
    // go on running without the lock or leadership that allowed it to start.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(kExitFailure);
    if (own_group) {
      setpgid(0, 0);
      if (take_terminal) {  // before the mask is cleared: SIGTTOU is ignored meanwhile
        signal(SIGTTOU, SIG_IGN);
        (void)tcsetpgrp(STDIN_FILENO, getpid());
        signal(SIGTTOU, SIG_DFL);
      }
    }
    for (int s = 1; s < NSIG; ++s)
      if (sigismember(&g_reset_in_child, s) == 1) signal(s, SIG_DFL);
    sigset_t empty;
    sigemptyset(&empty);
    sigprocmask(SIG_SETMASK, &empty, nullptr);
    if (stdout_fd >= 0 && dup2(stdout_fd, 1) < 0) {
      int e = errno;
      (void)!write(errpipe[1], &e, sizeof e);
      _exit(kExitFailure);
    }
    execve(exe.c_str(), args.data(), envp.data());
    int e = errno;
    (void)!write(errpipe[1], &e, sizeof e);
    _exit(e == ENOENT ? kExitNotFound : kExitNoExec);
  }
  close(errpipe[1]);
  if (own_group) {
    // Also here, so that no signal we send can precede the child's own setpgid (EACCES
    // once it has exec'd: it did it itself by then).
    (void)setpgid(pid, pid);
    if (take_terminal) {
      give_terminal_to(pid);
      if (took_terminal != nullptr) *took_terminal = true;
    }
  }
  int child_errno = 0;
  ssize_t n;
  do n = read(errpipe[0], &child_errno, sizeof child_errno);
  while (n < 0 && errno == EINTR);
  close(errpipe[0]);
  if (n > 0) {
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (took_terminal != nullptr && *took_terminal) {
      give_terminal_to(getpgrp());
      *took_terminal = false;
    }
    msg("cannot run %s: %s", exe.c_str(), strerror(child_errno));
    exit_code = child_errno == ENOENT ? kExitNotFound : kExitNoExec;
    return -1;
  }
  return pid;
}

int shell_status(int st) {
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return kExitFailure;
}

std::string describe_wait_status(int st) {
  if (WIFEXITED(st)) return "exited with status " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) {
    const char* name = sigabbrev_np(WTERMSIG(st));
    return std::string("killed by SIG") + (name ? name : "?") + " (status " +
           std::to_string(128 + WTERMSIG(st)) + ")";
  }
  return "ended";
}

bool Child::spawn(const std::vector<std::string>& argv,
                  const std::vector<std::pair<std::string, std::string>>& env_overrides,
                  int& exit_code) {
  own_group = true;
  group_signalled = false;
  pid = spawn_command(argv, env_overrides, exit_code, -1, true, &has_terminal);
  pgid = pid;
  return running();
}

void Child::signal(int sig) {
  if (!running()) return;
  // The group may be gone already while its leader is a zombie: then the leader alone.
  if (own_group && kill(-pid, sig) == 0) {
    group_signalled = true;
    return;
  }
  kill(pid, sig);
}

void Child::stop(int sig, double grace) {
  if (!running()) return;
  signal(sig);
  if (kill_at == 0) kill_at = mono_s() + grace;
}

bool Child::reap() {
  if (!running()) return false;
  int st = 0;
  pid_t r;
  do r = waitpid(pid, &st, WNOHANG);
  while (r < 0 && errno == EINTR);
  if (r != pid) return false;
  if (has_terminal) {
    give_terminal_to(getpgrp());
    has_terminal = false;
  }
  wait_status = st;
  pid = -1;
  kill_at = 0;
  if (own_group) drain_group();
  return true;
}

void Child::drain_group() {
  // What CMD left running in its group (a backgrounded worker) would go on without the
  // lock: SIGTERM (unless the group just got a signal from us), SIGKILL after the grace.
  // The group id stays ours while any member lives, so polling it is safe.
  if (pgid <= 0 || kill(-pgid, 0) != 0) return;
  if (!group_signalled) kill(-pgid, SIGTERM);
  const double until = mono_s() + group_grace;
  while (kill(-pgid, 0) == 0 && mono_s() < until) {
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
  if (kill(-pgid, 0) == 0) {
    msg("processes left by the command (group %ld) still running after the grace period: SIGKILL",
        static_cast<long>(pgid));
    kill(-pgid, SIGKILL);
  }
}

int Child::check_kill_deadline() {
  if (!running() || kill_at == 0) return -1;
  double left = kill_at - mono_s();
  if (left <= 0) {
    const long killed = static_cast<long>(pid);
    signal(SIGKILL);  // first: the message cannot delay it
    kill_at = 0;
    msg("command (pid %ld) still running after the grace period: SIGKILL", killed);
    return -1;
  }
  return static_cast<int>(std::ceil(left * 1000));
}

}  // namespace cli
