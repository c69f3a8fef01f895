// Helpers for the integration suite: the server under test, child processes that run
// a role (this same binary re-executed), and raw document access for setting up
// documents as other writers (an original node, the TTL monitor) would leave them.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "storage/mongo_storage.h"

namespace it {

// MONGOELECTOR_TEST_URI, or "" (tests then skip). A sqlite:///dir/name.db URI runs the
// suite on the embedded backend, no server: each "database" is then a file of its own
// in that directory (dir/<db>.db), removed when the test process ends.
std::string test_uri();
bool sqlite_backend();
// "java", "ferretdb" or "" (a user's own server).
std::string test_server_kind();
// A database name unique to this process and test.
std::string unique_db(const std::string& tag);
// Host monotonic ms (CLOCK_MONOTONIC is system-wide: comparable across processes).
std::int64_t mono_ms();

// A storage on the backend the URI names (MongoDB: database `db`; SQLite: see above).
std::shared_ptr<mongoelector::Storage> storage(const std::string& uri, const std::string& db,
                                               std::int64_t op_timeout_ms = 3000);
// Calls counted by the backend (MongoDB: commands sent; SQLite: calls made).
std::int64_t round_trips(const mongoelector::Storage& s);
// Removes the SQLite files this process created (main() calls it at the end).
void remove_sqlite_files();
// Servers whose findAndModify is not atomic need the opt-in even for single-client tests.
bool unsafe_server();

#define SKIP_WITHOUT_SERVER()                                                       \
  do {                                                                              \
    if (it::test_uri().empty()) GTEST_SKIP() << "MONGOELECTOR_TEST_URI is not set"; \
  } while (0)

// Tests of MongoDB-only machinery (servers that die or hang, libmongoc timeouts).
#define SKIP_ON_SQLITE(why)                                                \
  do {                                                                     \
    if (it::sqlite_backend()) GTEST_SKIP() << "MongoDB-specific: " << why; \
  } while (0)

// A child process running `role` with args; its stdout is readable line by line.
class Child {
 public:
  Child(const std::string& role, const std::vector<std::string>& args);
  ~Child();
  // Next line of stdout, or "" on EOF / after timeout_ms.
  std::string read_line(std::int64_t timeout_ms);
  void kill9();
  int wait();  // exit status
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string buf_;
};

// Runs a child role if argv asks for one; returns true if it did (main then exits).
bool run_child_role(int argc, char** argv, int* exit_code);

// Inserts a raw lock document in the ORIGINAL package's schema (no fence field).
void insert_original_lock(const std::string& uri, const std::string& db,
                          const std::string& collection, const std::string& key,
                          const std::string& uuid, std::int64_t created_ms, std::int64_t expire_ms);

// A private server started through tests/servers/testserver.sh (for tests that stop or
// freeze it). kind: "java" or "ferretdb".
class PrivateServer {
 public:
  explicit PrivateServer(const std::string& kind);
  ~PrivateServer();
  bool ok() const { return !uri_.empty(); }
  const std::string& uri() const { return uri_; }
  void freeze();  // SIGSTOP: calls hang instead of failing
  void kill();    // stops it for good

 private:
  std::string kind_, uri_;
  pid_t pid_ = -1;
};

}  // namespace it
