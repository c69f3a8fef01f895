// Shared pieces of the `mongoelector` command: messages, options, URI, library errors,
// signals, starting and stopping children, a small JSON reader.
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern char** environ;

namespace cli {

const char* g_prog = "mongoelector";

// ------------------------------------------------------------------ messages ------

void msg(const char* fmt, ...) {
  char body[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(body, sizeof body, fmt, ap);
  va_end(ap);
  std::string line = std::string(g_prog) + ": " + body + "\n";
  ssize_t off = 0, n = static_cast<ssize_t>(line.size());
  while (off < n) {
    ssize_t w = write(2, line.data() + off, static_cast<size_t>(n - off));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    off += w;
  }
}

int usage_error(const std::string& sub, const std::string& text) {
  std::string who = sub.empty() ? std::string(g_prog) : std::string(g_prog) + " " + sub;
  fprintf(stderr, "%s: %s\nTry '%s --help'.\n", who.c_str(), text.c_str(), who.c_str());
  return kExitUsage;
}

// ------------------------------------------------------------------ options -------

static bool contains(const std::vector<std::string>& v, const std::string& s) {
  for (const auto& x : v)
    if (x == s) return true;
  return false;
}

bool parse_args(const std::string& sub, int argc, char** argv, int first,
                const std::vector<std::string>& with_value,
                const std::vector<std::string>& flag_names, std::size_t max_positional,
                bool takes_command, Args& out, int& exit_code) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      if (!takes_command) {
        exit_code = usage_error(sub, "unexpected '--': this subcommand runs no command");
        return false;
      }
      for (int j = i + 1; j < argc; ++j) out.command.emplace_back(argv[j]);
      return true;
    }
    if (a == "-h" || a == "--help") {
      out.help = true;
      continue;
    }
    if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      std::string name = a.substr(2), value;
      bool has_value = false;
      auto eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
      if (contains(with_value, name)) {
        if (!has_value) {
          if (i + 1 >= argc) {
            exit_code = usage_error(sub, "option --" + name + " needs a value");
            return false;
          }
          value = argv[++i];
        }
        out.values[name] = value;
      } else if (contains(flag_names, name)) {
        if (has_value) {
          exit_code = usage_error(sub, "option --" + name + " takes no value");
          return false;
        }
        out.flags[name] = true;
      } else {
        exit_code = usage_error(sub, "unknown option '" + a + "'");
        return false;
      }
      continue;
    }
    if (a.size() > 1 && a[0] == '-') {
      exit_code = usage_error(sub, "unknown option '" + a + "'");
      return false;
    }
    if (out.positional.size() < max_positional) {
      out.positional.push_back(a);
    } else if (takes_command) {
      for (int j = i; j < argc; ++j) out.command.emplace_back(argv[j]);
      return true;
    } else {
      exit_code = usage_error(sub, "unexpected argument '" + a + "'");
      return false;
    }
  }
  return true;
}

bool parse_seconds(const std::string& sub, const std::string& name, const std::string& text,
                   bool allow_zero, double& out) {
  char* end = nullptr;
  errno = 0;
  double v = strtod(text.c_str(), &end);
  // An optional unit: 90, 90s, 15m, 1h, 1d.
  double unit = 1;
  if (end != nullptr && *end != '\0' && end[1] == '\0' && end != text.c_str()) {
    switch (*end) {
      case 's': unit = 1; ++end; break;
      case 'm': unit = 60; ++end; break;
      case 'h': unit = 3600; ++end; break;
      case 'd': unit = 86400; ++end; break;
      default: break;
    }
  }
  v *= unit;
  if (text.empty() || end == nullptr || *end != '\0' || errno != 0 || !std::isfinite(v) ||
      v < 0 || v > 1e9 || (!allow_zero && v == 0)) {
    usage_error(sub, "--" + name + " must be a duration " + (allow_zero ? ">= 0" : "> 0") +
                         ": seconds, or a number with s, m, h or d (got '" + text + "')");
    return false;
  }
  out = v;
  return true;
}

// ------------------------------------------------------------------ URI -----------

std::string default_state_path() {
  const char* xdg = getenv("XDG_STATE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/mongoelector/locks.db";
  const char* home = getenv("HOME");
  std::string h = home != nullptr && home[0] == '/' ? home : "";
  if (h.empty()) {
    struct passwd* pw = getpwuid(getuid());
    if (pw != nullptr && pw->pw_dir != nullptr && pw->pw_dir[0] == '/') h = pw->pw_dir;
  }
  if (h.empty()) return "/tmp/mongoelector-" + std::to_string(getuid()) + "/locks.db";
  return h + "/.local/state/mongoelector/locks.db";
}

static bool mkdir_p(const std::string& dir, std::string& error) {
  std::string path;
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    path = dir.substr(0, pos);
    if (path.empty()) continue;
    if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
      error = "cannot create " + path + ": " + strerror(errno);
      return false;
    }
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    error = dir + " is not a directory";
    return false;
  }
  return true;
}

static std::string sqlite_uri_for(const std::string& path) {
  std::string out = "sqlite://";
  for (char c : path) {
    if (c == '%' || c == ' ' || c == '?' || c == '#') {
      char buf[4];
      snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

bool resolve_uri(const Args& args, std::string& uri, int& exit_code) {
  auto it = args.values.find("uri");
  if (it != args.values.end()) {
    if (it->second.empty()) {
      exit_code = usage_error("", "--uri is empty");
      return false;
    }
    uri = it->second;
    return true;
  }
  const char* env = getenv("MONGOELECTOR_URI");
  if (env != nullptr && env[0] != '\0') {
    uri = env;
    return true;
  }
  std::string path = default_state_path();
  std::string error;
  if (!mkdir_p(path.substr(0, path.rfind('/')), error)) {
    msg("%s (the default state directory); set --uri or MONGOELECTOR_URI to a "
        "sqlite:///absolute/path.db or mongodb:// URI instead", error.c_str());
    exit_code = kExitConfig;
    return false;
  }
  uri = sqlite_uri_for(path);
  return true;
}

bool is_sqlite_uri(const std::string& uri) { return uri.rfind("sqlite:", 0) == 0; }

std::string database_of(const std::string& uri) {
  std::size_t start;
  if (uri.rfind("mongodb://", 0) == 0) start = 10;
  else if (uri.rfind("mongodb+srv://", 0) == 0) start = 14;
  else return "";
  auto slash = uri.find('/', start);
  if (slash == std::string::npos) return "mongoelector";
  auto q = uri.find('?', slash);
  std::string db = uri.substr(slash + 1, q == std::string::npos ? std::string::npos : q - slash - 1);
  return db.empty() ? "mongoelector" : db;
}

std::string redact_uri(const std::string& uri) {
  auto scheme = uri.find("://");
  if (scheme == std::string::npos) return uri;
  auto host_start = scheme + 3;
  auto end = uri.find('/', host_start);
  auto at = uri.rfind('@', end == std::string::npos ? std::string::npos : end);
  if (at == std::string::npos || at < host_start) return uri;
  auto colon = uri.find(':', host_start);
  if (colon == std::string::npos || colon > at) return uri;
  return uri.substr(0, colon + 1) + "***" + uri.substr(at);
}

// ------------------------------------------------------------------ library -------

int exit_code_for(mongoelector_status st) {
  switch (st) {
    case MONGOELECTOR_OK: return kExitOk;
    case MONGOELECTOR_ERR_INVALID_ARGUMENT: return kExitUsage;
    case MONGOELECTOR_ERR_LOCK_EXISTS:
    case MONGOELECTOR_ERR_TIMEOUT: return kExitHeld;
    case MONGOELECTOR_ERR_UNSAFE_SERVER: return kExitConfig;
    case MONGOELECTOR_ERR_TIME_OFFSET:
    case MONGOELECTOR_ERR_UNAVAILABLE:
    case MONGOELECTOR_ERR_SERVER: return kExitUnavailable;
    default: return kExitFailure;
  }
}

static void log_to_stderr(mongoelector_log_level level, const char* message, void*) {
  if (level < MONGOELECTOR_LOG_WARNING) return;
  msg("[pid %ld] %s: %s", static_cast<long>(getpid()),
      level >= MONGOELECTOR_LOG_ERROR ? "error" : "warning", message);
}

void install_log_callback() { mongoelector_set_log_callback(log_to_stderr, nullptr); }

static std::string storage_hint(const std::string& uri) {
  if (is_sqlite_uri(uri))
    return "check the file's directory exists and is writable, or choose another file with "
           "--uri sqlite:///absolute/path.db (or MONGOELECTOR_URI)";
  return "check the URI (mongodb://host:port/database) and that the server is running and "
         "reachable; set it with --uri or MONGOELECTOR_URI";
}

ClientPtr open_client(const std::string& uri, int& exit_code) {
  if (uri.rfind("memory:", 0) == 0) {  // one process's memory: no lock between processes
    msg("%s lives in this process only, so it cannot lock anything between processes; use "
        "sqlite:///absolute/path.db (one host) or mongodb://host:port/database", uri.c_str());
    exit_code = kExitConfig;
    return nullptr;
  }
  mongoelector_client* client = nullptr;
  mongoelector_status st = mongoelector_client_new(uri.c_str(), database_of(uri).c_str(), &client);
  if (st != MONGOELECTOR_OK) {
    msg("cannot open %s: %s\n  %s", redact_uri(uri).c_str(), mongoelector_last_error(),
        storage_hint(uri).c_str());
    exit_code = st == MONGOELECTOR_ERR_INVALID_ARGUMENT ? kExitConfig : exit_code_for(st);
    return nullptr;
  }
  return ClientPtr(client);
}

LockerPtr open_locker(mongoelector_client* client, const std::string& key, const char* collection,
                      double ttl, int& exit_code) {
  mongoelector_locker_options o;
  mongoelector_locker_options_init(&o);
  o.collection = collection;
  o.ttl_seconds = ttl;
  mongoelector_locker* locker = nullptr;
  mongoelector_status st = mongoelector_locker_new(client, key.c_str(), &o, &locker);
  if (st != MONGOELECTOR_OK) {
    if (st == MONGOELECTOR_ERR_INVALID_ARGUMENT) {
      msg("invalid key or option: %s\n  a key is 1 to 1024 bytes of UTF-8", mongoelector_last_error());
      exit_code = kExitUsage;
    } else if (st == MONGOELECTOR_ERR_UNSAFE_SERVER) {
      msg("%s\n  this server cannot run the lock protocol safely; use MongoDB, or SQLite on "
          "one host (sqlite:///path.db)", mongoelector_last_error());
      exit_code = kExitConfig;
    } else {
      msg("cannot use the lock storage: %s\n  the server may be down or unreachable: check "
          "the URI (--uri or MONGOELECTOR_URI)", mongoelector_last_error());
      exit_code = exit_code_for(st);
    }
    return nullptr;
  }
  return LockerPtr(locker);
}

std::string describe_holder(mongoelector_locker* locker) {
  mongoelector_lock_info info;
  int found = 0;
  if (mongoelector_locker_current(locker, &info, &found) != MONGOELECTOR_OK || !found) return "";
  char buf[512];
  snprintf(buf, sizeof buf, "held by %s pid %lld (fence %lld, expires in %.1f s unless renewed)",
           info.host, static_cast<long long>(info.pid), static_cast<long long>(info.fence),
           static_cast<double>(info.expire_ms - wall_ms()) / 1000.0);
  return buf;
}

// ------------------------------------------------------------------ time ----------

double mono_s() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

int64_t wall_ms() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

std::string iso_ms(int64_t ms) {
  time_t secs = static_cast<time_t>(ms / 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char buf[64];
  strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  char out[96];
  snprintf(out, sizeof out, "%s.%03d UTC", buf, static_cast<int>(ms % 1000));
  return out;
}

// ------------------------------------------------------------------ signals -------

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
    std::string dir = dirs.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
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

bool check_command(const std::vector<std::string>& argv, int& exit_code) {
  int err = 0;
  if (!find_executable(argv.empty() ? "" : argv[0], err).empty()) return true;
  if (err == ENOENT) {
    msg("%s: command not found (not a file, nor in PATH)", argv.empty() ? "" : argv[0].c_str());
    exit_code = kExitNotFound;
  } else {
    msg("cannot run %s: %s", argv[0].c_str(), strerror(err));
    exit_code = kExitNoExec;
  }
  return false;
}

pid_t spawn_command(const std::vector<std::string>& argv,
                    const std::vector<std::pair<std::string, std::string>>& env_overrides,
                    int& exit_code, int stdout_fd, bool own_group, bool* took_terminal) {
  if (took_terminal != nullptr) *took_terminal = false;
  const bool take_terminal =
      own_group && isatty(STDIN_FILENO) == 1 && tcgetpgrp(STDIN_FILENO) == getpgrp();
  int err = 0;
  std::string exe = find_executable(argv.empty() ? "" : argv[0], err);
  if (exe.empty()) {
    if (err == ENOENT) {
      msg("%s: command not found (not a file, nor in PATH)", argv.empty() ? "" : argv[0].c_str());
      exit_code = kExitNotFound;
    } else {
      msg("cannot run %s: %s", argv[0].c_str(), strerror(err));
      exit_code = kExitNoExec;
    }
    return -1;
  }
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

// ------------------------------------------------------------------ JSON ----------

const Json* Json::get(const std::string& name) const {
  if (type != Object) return nullptr;
  for (const auto& [k, v] : obj)
    if (k == name) return &v;
  return nullptr;
}

namespace {
// "2026-11-23T17:38:28.123Z" (relaxed Extended JSON's date) -> ms since the epoch, UTC.
std::optional<int64_t> iso8601_ms(const std::string& s) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0, ms = 0, n = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6)
    return std::nullopt;
  const char* rest = s.c_str() + n;
  if (*rest == '.') {
    int digits = 0;
    for (++rest; *rest >= '0' && *rest <= '9'; ++rest, ++digits)
      if (digits < 3) ms = ms * 10 + (*rest - '0');
    for (; digits < 3; ++digits) ms *= 10;
  }
  if (std::strcmp(rest, "Z") != 0) return std::nullopt;
  // Days from 1970-01-01 to the civil date (proleptic Gregorian).
  const int yy = y - (mo <= 2);
  const int era = (yy >= 0 ? yy : yy - 399) / 400;
  const int yoe = yy - era * 400;
  const int doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const int64_t days = static_cast<int64_t>(era) * 146097 + doe - 719468;
  return ((days * 24 + h) * 60 + mi) * 60000 + static_cast<int64_t>(sec) * 1000 + ms;
}
}  // namespace

std::optional<int64_t> Json::as_date_ms() const {
  if (type == Number) return i;
  if (const Json* d = get("$date")) {
    if (d->type == Number) return d->i;
    if (d->type == String) return iso8601_ms(d->str);
    if (const Json* n = d->get("$numberLong"))
      if (n->type == String) return std::strtoll(n->str.c_str(), nullptr, 10);
  }
  return std::nullopt;
}

namespace {
struct Parser {
  const std::string& s;
  size_t p = 0;
  std::string err;
  void ws() {
    while (p < s.size() && (s[p] == ' ' || s[p] == '\n' || s[p] == '\t' || s[p] == '\r')) ++p;
  }
  bool fail(const std::string& e) {
    if (err.empty()) err = e + " at offset " + std::to_string(p);
    return false;
  }
  static void put_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) out += static_cast<char>(cp);
    else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  bool hex4(unsigned& v) {
    if (p + 4 > s.size()) return fail("short \\u escape");
    v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s[p++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<unsigned>(c - 'A' + 10);
      else return fail("bad \\u escape");
    }
    return true;
  }
  bool string(std::string& out) {
    if (p >= s.size() || s[p] != '"') return fail("expected a string");
    ++p;
    while (p < s.size() && s[p] != '"') {
      char c = s[p++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (p >= s.size()) return fail("bad escape");
      char e = s[p++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = 0;
          if (!hex4(cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00 && p + 1 < s.size() && s[p] == '\\' && s[p + 1] == 'u') {
            p += 2;
            unsigned lo = 0;
            if (!hex4(lo)) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          put_utf8(out, cp);
          break;
        }
        default: return fail("bad escape");
      }
    }
    if (p >= s.size()) return fail("unterminated string");
    ++p;
    return true;
  }
  bool value(Json& v, int depth) {
    if (depth > 64) return fail("nested too deeply");
    ws();
    if (p >= s.size()) return fail("unexpected end");
    char c = s[p];
    if (c == '{') {
      v.type = Json::Object;
      ++p;
      ws();
      if (p < s.size() && s[p] == '}') return ++p, true;
      for (;;) {
        ws();
        std::string k;
        if (!string(k)) return false;
        ws();
        if (p >= s.size() || s[p] != ':') return fail("expected ':'");
        ++p;
        Json child;
        if (!value(child, depth + 1)) return false;
        v.obj.emplace_back(std::move(k), std::move(child));
        ws();
        if (p < s.size() && s[p] == ',') { ++p; continue; }
        if (p < s.size() && s[p] == '}') return ++p, true;
        return fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      v.type = Json::Array;
      ++p;
      ws();
      if (p < s.size() && s[p] == ']') return ++p, true;
      for (;;) {
        Json child;
        if (!value(child, depth + 1)) return false;
        v.arr.push_back(std::move(child));
        ws();
        if (p < s.size() && s[p] == ',') { ++p; continue; }
        if (p < s.size() && s[p] == ']') return ++p, true;
        return fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v.type = Json::String;
      return string(v.str);
    }
    if (s.compare(p, 4, "true") == 0) { v.type = Json::Bool; v.b = true; p += 4; return true; }
    if (s.compare(p, 5, "false") == 0) { v.type = Json::Bool; p += 5; return true; }
    if (s.compare(p, 4, "null") == 0) { v.type = Json::Null; p += 4; return true; }
    size_t start = p;
    if (s[p] == '-') ++p;
    bool integral = true;
    while (p < s.size() && (isdigit(static_cast<unsigned char>(s[p])) || s[p] == '.' || s[p] == 'e' ||
                            s[p] == 'E' || s[p] == '+' || s[p] == '-')) {
      if (!isdigit(static_cast<unsigned char>(s[p]))) integral = false;
      ++p;
    }
    if (p == start) return fail("unexpected character");
    std::string num = s.substr(start, p - start);
    v.type = Json::Number;
    v.num = std::strtod(num.c_str(), nullptr);
    v.i = integral ? std::strtoll(num.c_str(), nullptr, 10) : static_cast<int64_t>(v.num);
    return true;
  }
};
}  // namespace

bool parse_json(const std::string& text, Json& out, std::string& error) {
  Parser parser{text, 0, {}};
  if (!parser.value(out, 0)) {
    error = parser.err;
    return false;
  }
  parser.ws();
  if (parser.p != text.size()) {
    error = "trailing characters at offset " + std::to_string(parser.p);
    return false;
  }
  return true;
}

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

}  // namespace cli
