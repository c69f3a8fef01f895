// Which storage the command uses and how it opens it (connection.h).
#include <chrono>
#include "cli.h"

#include <errno.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cli {

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

bool resolve_uri(const Args& args, std::string& uri, int& exit_code, bool say_host_only) {
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
        "sqlite:///absolute/path.db or mongodb:// URI instead",
        error.c_str());
    exit_code = kExitConfig;
    return false;
  }
  uri = sqlite_uri_for(path);
  if (say_host_only)
    msg("locks on this host only; set MONGOELECTOR_URI or --uri to coordinate hosts");
  return true;
}

// "sqlite:" rather than the library's "sqlite://": a mistyped SQLite URI gets the SQLite hint.
bool is_sqlite_uri(const std::string& uri) { return uri.rfind("sqlite:", 0) == 0; }

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

int exit_code_for(mongoelector_status st) {
  switch (st) {
    case MONGOELECTOR_OK:
      return kExitOk;
    case MONGOELECTOR_ERR_INVALID_ARGUMENT:
      return kExitUsage;
    case MONGOELECTOR_ERR_LOCK_EXISTS:
    case MONGOELECTOR_ERR_TIMEOUT:
      return kExitHeld;
    case MONGOELECTOR_ERR_UNSAFE_SERVER:
      return kExitConfig;
    case MONGOELECTOR_ERR_LOST:
      return kExitLost;
    case MONGOELECTOR_ERR_TIME_OFFSET:
    case MONGOELECTOR_ERR_UNAVAILABLE:
    case MONGOELECTOR_ERR_SERVER:
      return kExitUnavailable;
    default:
      return kExitFailure;
  }
}

namespace {
thread_local bool t_logged_trouble = false;
}  // namespace

bool take_logged_trouble() {
  const bool was = t_logged_trouble;
  t_logged_trouble = false;
  return was;
}

static void log_to_stderr(mongoelector_log_level level, const char* message, void*) {
  if (level < MONGOELECTOR_LOG_WARNING) return;
  t_logged_trouble = true;
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

// The command's documented default database, "mongoelector", for a MongoDB URI that
// names none; "" otherwise (the library then takes the URI's, decoded and checked by its
// parser). The C API has no default of its own, so only whether the URI's path is empty
// is read here.
static const char* default_database_for(const std::string& uri) {
  const auto scheme = uri.find("://");
  if (uri.rfind("mongodb", 0) != 0 || scheme == std::string::npos) return "";
  const std::string rest =
      uri.substr(scheme + 3, uri.find('?') - std::min(uri.find('?'), scheme + 3));
  const auto slash = rest.find('/');
  return slash == std::string::npos || slash + 1 == rest.size() ? "mongoelector" : "";
}

namespace {
std::string g_client_uri;  // what open_client opened, for storage_error
std::chrono::steady_clock::time_point g_client_opened;
}  // namespace

std::string storage_error(mongoelector_status st) {
  const std::string error = mongoelector_last_error();
  const auto nobody = error.find("No suitable servers found");
  if (st != MONGOELECTOR_ERR_UNAVAILABLE || nobody == std::string::npos || g_client_uri.empty())
    return error;
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - g_client_opened).count();
  char buf[64];
  snprintf(buf, sizeof buf, "%.0f s", waited < 1 ? 1 : waited);
  std::string out =
      "cannot reach " + redact_uri(g_client_uri) + ": no server answered within " + buf;
  // The driver's reason, e.g. "[Failed to connect to target host: 127.0.0.1:1]".
  const auto open = error.find('[', nobody), close = error.find(']', open);
  if (open != std::string::npos && close != std::string::npos)
    out += " (" + error.substr(open + 1, close - open - 1) + ")";
  return out;
}

ClientPtr open_client(const std::string& uri, int& exit_code, bool read_only) {
  if (uri.rfind("memory:", 0) == 0) {  // one process's memory: no lock between processes
    msg("%s lives in this process only, so it cannot lock anything between processes; use "
        "sqlite:///absolute/path.db (one host) or mongodb://host:port/database",
        uri.c_str());
    exit_code = kExitConfig;
    return nullptr;
  }
  mongoelector_client* client = nullptr;
  mongoelector_status st =
      read_only ? mongoelector_client_new_read_only(uri.c_str(), default_database_for(uri), &client)
                : mongoelector_client_new(uri.c_str(), default_database_for(uri), &client);
  if (st != MONGOELECTOR_OK) {
    msg("cannot open %s: %s\n  %s", redact_uri(uri).c_str(), mongoelector_last_error(),
        storage_hint(uri).c_str());
    exit_code = st == MONGOELECTOR_ERR_INVALID_ARGUMENT ? kExitConfig : exit_code_for(st);
    return nullptr;
  }
  g_client_uri = uri;
  g_client_opened = std::chrono::steady_clock::now();
  return ClientPtr(client);
}

int report_open_failure(mongoelector_status st, const char* hint) {
  if (st == MONGOELECTOR_ERR_INVALID_ARGUMENT) {
    msg("invalid key or option: %s%s%s", mongoelector_last_error(), *hint != '\0' ? "\n  " : "",
        hint);
    return kExitUsage;
  }
  if (st == MONGOELECTOR_ERR_UNSAFE_SERVER) {
    msg("%s\n  this server cannot run the lock protocol safely; use MongoDB, or SQLite on "
        "one host (sqlite:///path.db)",
        mongoelector_last_error());
    return kExitConfig;
  }
  const std::string error = storage_error(st);
  if (error.rfind("cannot reach ", 0) == 0)
    msg("%s\n  check the URI (--uri or MONGOELECTOR_URI) and that the server is running "
        "and reachable",
        error.c_str());
  else
    msg("cannot use the lock storage: %s\n  the server may be down or unreachable: check "
        "the URI (--uri or MONGOELECTOR_URI)",
        error.c_str());
  return exit_code_for(st);
}

LockerPtr open_locker(mongoelector_client* client, const std::string& key, const char* collection,
                      double ttl, int& exit_code, bool fair) {
  mongoelector_locker_config c;
  mongoelector_locker_config_init(&c, MONGOELECTOR_LOCKER_CONFIG_VERSION);
  c.collection = collection;
  c.ttl_seconds = ttl;
  c.fair = fair ? 1 : 0;
  mongoelector_locker* locker = nullptr;
  mongoelector_status st = mongoelector_locker_new_with(client, key.c_str(), &c, &locker);
  if (st != MONGOELECTOR_OK) {
    exit_code = report_open_failure(st, "a key is 1 to 1024 bytes of UTF-8");
    return nullptr;
  }
  return LockerPtr(locker);
}

}  // namespace cli
