#include "harness.h"

#include "../storage/raw_client.h"
#include "storage/sqlite_storage.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

namespace it {

std::string test_uri() {
  const char* v = std::getenv("MONGOELECTOR_TEST_URI");
  return v ? v : "";
}

std::string test_server_kind() {
  const char* v = std::getenv("MONGOELECTOR_TEST_SERVER");
  return v ? v : "";
}

bool unsafe_server() { return test_server_kind() == "ferretdb"; }

bool sqlite_backend() { return mongoelector::is_sqlite_uri(test_uri()); }

namespace {
std::mutex g_files_mu;
std::set<std::string> g_files;  // SQLite files created by this process

// sqlite:///dir/any.db + db -> sqlite:///dir/<db>.db: one file per "database".
std::string sqlite_uri_for(const std::string& uri, const std::string& db) {
  const std::string path = mongoelector::SqliteClient::path_from_uri(uri);
  const std::string file = path.substr(0, path.find_last_of('/') + 1) + db + ".db";
  std::lock_guard<std::mutex> g(g_files_mu);
  g_files.insert(file);
  return "sqlite://" + file;
}
}  // namespace

void remove_sqlite_files() {
  std::lock_guard<std::mutex> g(g_files_mu);
  for (const auto& f : g_files) {
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((f + suffix).c_str());
  }
  g_files.clear();
}

std::int64_t round_trips(const mongoelector::Storage& s) {
  if (auto* m = dynamic_cast<const mongoelector::MongoStorage*>(&s)) return m->round_trips();
  if (auto* q = dynamic_cast<const mongoelector::SqliteStorage*>(&s)) return q->round_trips();
  throw std::logic_error("round_trips: unknown storage type");
}

namespace {
std::string sqlite_uri_for(const std::string& uri, const std::string& db);
}  // namespace

std::string unique_db(const std::string& tag) {
  static int counter = 0;
  std::string db =
      "me_it_" + std::to_string(getpid()) + "_" + std::to_string(++counter) + "_" + tag;
  if (sqlite_backend()) (void)sqlite_uri_for(test_uri(), db);  // removed at the end
  return db;
}

std::int64_t mono_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::shared_ptr<mongoelector::Storage> storage(const std::string& uri, const std::string& db,
                                               std::int64_t op_timeout_ms) {
  if (mongoelector::is_sqlite_uri(uri)) {
    return mongoelector::open_client(sqlite_uri_for(uri, db), "")->open_storage(op_timeout_ms);
  }
  mongoelector::MongoStorageOptions o;
  o.uri = uri;
  o.database = db;
  o.op_timeout_ms = op_timeout_ms;
  return std::make_shared<mongoelector::MongoStorage>(o);
}

Child::Child(const std::string& role, const std::vector<std::string>& args) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    std::vector<std::string> argv_s{"/proc/self/exe", "--child", role};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& s : argv_s) argv.push_back(s.data());
    argv.push_back(nullptr);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  close(fds[1]);
  out_fd_ = fds[0];
}

Child::~Child() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
}

std::string Child::read_line(std::int64_t timeout_ms) {
  std::int64_t end = mono_ms() + timeout_ms;
  for (;;) {
    auto nl = buf_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      return line;
    }
    std::int64_t left = end - mono_ms();
    if (left <= 0) return "";
    pollfd p{out_fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char tmp[512];
    ssize_t n = ::read(out_fd_, tmp, sizeof tmp);
    if (n <= 0) return "";
    buf_.append(tmp, static_cast<std::size_t>(n));
  }
}

void Child::kill9() {
  if (pid_ > 0) ::kill(pid_, SIGKILL);
}

int Child::wait() {
  int status = 0;
  if (pid_ > 0) waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void insert_original_lock(const std::string& uri, const std::string& db,
                          const std::string& collection, const std::string& key,
                          const std::string& uuid, std::int64_t created_ms,
                          std::int64_t expire_ms) {
  auto date = [](std::int64_t ms) {
    return "{\"$date\": {\"$numberLong\": \"" + std::to_string(ms) + "\"}}";
  };
  // Exactly what the original package inserts: no fence field, pid as int32.
  if (mongoelector::is_sqlite_uri(uri)) {
    auto s = mongoelector::SqliteClient::open(sqlite_uri_for(uri, db));
    mongoelector::SqliteStorage(s, 3000).put_document(
        collection, mongoelector::Document{{"_id", key},
                                           {"locked", true},
                                           {"host", std::string("original-host")},
                                           {"uuid", uuid},
                                           {"pid", std::int64_t{4242}},
                                           {"ts_created", mongoelector::DateTime{created_ms}},
                                           {"ts_expire", mongoelector::DateTime{expire_ms}}});
    return;
  }
  mongoelector::storage_test::RawClient(uri, db).insert(
      collection, "{\"_id\": \"" + key +
                      "\", \"locked\": true, \"host\": "
                      "\"original-host\", \"uuid\": \"" +
                      uuid +
                      "\", \"pid\": 4242, "
                      "\"ts_created\": " +
                      date(created_ms) + ", \"ts_expire\": " + date(expire_ms) + "}");
}

namespace {
std::string run_capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  pclose(p);
  return out;
}
}  // namespace

PrivateServer::PrivateServer(const std::string& kind) : kind_(kind) {
  std::string script = MONGOELECTOR_TESTSERVER_SCRIPT;
  if (access(script.c_str(), X_OK) != 0) return;
  std::string out = run_capture(script + " start " + kind + " 2>/dev/null");
  auto pos = out.rfind("mongodb://");
  if (pos == std::string::npos) return;
  uri_ = out.substr(pos);
  while (!uri_.empty() && (uri_.back() == '\n' || uri_.back() == ' ')) uri_.pop_back();
  // The script keeps the server's pid in $CACHE/run/<port>/pid.
  auto colon = uri_.rfind(':');
  std::string port = uri_.substr(colon + 1);
  while (!port.empty() && !isdigit(static_cast<unsigned char>(port.back()))) port.pop_back();
  const char* cache = std::getenv("MONGOELECTOR_CACHE");
  std::string dir = cache ? cache : std::string(std::getenv("HOME")) + "/.cache/mongoelector";
  std::ifstream pidf(dir + "/run/" + port + "/pid");
  pidf >> pid_;
}

PrivateServer::~PrivateServer() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
  if (!uri_.empty())
    run_capture(std::string(MONGOELECTOR_TESTSERVER_SCRIPT) + " stop " + uri_ + " 2>/dev/null");
}

void PrivateServer::freeze() {
  if (pid_ > 0) ::kill(pid_, SIGSTOP);
}

void PrivateServer::kill() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
  run_capture(std::string(MONGOELECTOR_TESTSERVER_SCRIPT) + " stop " + uri_ + " 2>/dev/null");
  pid_ = -1;
}

}  // namespace it
