// The SQLite backend's own tests (no server needed; they run whatever
// MONGOELECTOR_TEST_URI says): the document encoding, choosing a backend by URI, bad
// input at open (missing directory, read-only file, not a database, another
// application's database, newer schema version), several processes on one file, a
// writer killed with -9 inside its transaction, and the busy timeout. The lock
// semantics themselves are checked by the shared conformance suite (fixture.h) when
// MONGOELECTOR_TEST_URI is a sqlite:/// URI.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "exceptions.h"
#include "storage/client.h"
#include "storage/document_json.h"
#include "storage/sqlite_storage.h"

namespace mongoelector::storage_test {
namespace {

namespace dj = document_json;

// ------------------------------------------------------------ document_json ------

TEST(DocumentJson, EveryValueTypeRoundTripsInOrder) {
  Document doc{{"_id", std::string("k")},
               {"null", Null{}},
               {"t", true},
               {"f", false},
               {"i", std::int64_t{-42}},
               {"imax", std::numeric_limits<std::int64_t>::max()},
               {"imin", std::numeric_limits<std::int64_t>::min()},
               {"d", 2.5},
               {"dint", 3.0},
               {"tiny", 5e-324},
               {"s", std::string("quote \" backslash \\ tab \t nl \n \x01 é 漢 😀")},
               {"nul", std::string("a\0b", 3)},
               {"empty", std::string()},
               {"when", DateTime{1700000000123}},
               {"before1970", DateTime{-5}}};
  const std::string text = dj::encode(doc);
  EXPECT_EQ(dj::decode(text), doc) << text;
  // Types survive: an integral double stays a double, an int64 an int64.
  Document back = dj::decode(text);
  EXPECT_TRUE(std::holds_alternative<double>(*back.get("dint")));
  EXPECT_TRUE(std::holds_alternative<std::int64_t>(*back.get("i")));
  EXPECT_TRUE(std::holds_alternative<DateTime>(*back.get("when")));
}

TEST(DocumentJson, NonFiniteDoublesRoundTrip) {
  Document doc{{"nan", std::numeric_limits<double>::quiet_NaN()},
               {"inf", std::numeric_limits<double>::infinity()},
               {"ninf", -std::numeric_limits<double>::infinity()}};
  Document back = dj::decode(dj::encode(doc));
  EXPECT_TRUE(std::isnan(std::get<double>(*back.get("nan"))));
  EXPECT_EQ(std::get<double>(*back.get("inf")), std::numeric_limits<double>::infinity());
  EXPECT_EQ(std::get<double>(*back.get("ninf")), -std::numeric_limits<double>::infinity());
}

TEST(DocumentJson, WritesCanonicalExtendedJson) {
  Document doc{{"_id", std::string("k")}, {"n", std::int64_t{7}}, {"at", DateTime{12}}};
  EXPECT_EQ(dj::encode(doc),
            R"({"_id":"k","n":{"$numberLong":"7"},"at":{"$date":{"$numberLong":"12"}}})");
}

TEST(DocumentJson, ReadsOtherJsonAndSkipsTypesAValueCannotHold) {
  Document doc = dj::decode(R"( { "a" : 12, "b": -1.5e3, "c": {"$numberInt": "5"},
      "d": {"$date": 99}, "oid": {"$oid": "0123456789abcdef01234567"}, "nested": {"x": [1, {}]},
      "list": [1, 2, "three"], "big": 123456789012345678901234, "u": "\u00e9\ud83d\ude00",
      "e": {}, "iso": {"$date": "2020-01-01T00:00:00Z"} } )");
  EXPECT_EQ(doc.get_int("a"), 12);
  EXPECT_TRUE(std::holds_alternative<std::int64_t>(*doc.get("a")));
  EXPECT_EQ(std::get<double>(*doc.get("b")), -1500.0);
  EXPECT_EQ(doc.get_int("c"), 5);
  EXPECT_EQ(doc.get_date("d")->ms, 99);
  EXPECT_FALSE(doc.has("oid"));
  EXPECT_FALSE(doc.has("nested"));
  EXPECT_FALSE(doc.has("list"));
  EXPECT_FALSE(doc.has("e"));
  EXPECT_FALSE(doc.has("iso"));
  EXPECT_TRUE(std::holds_alternative<double>(*doc.get("big")));  // out of int64 range
  EXPECT_EQ(doc.get_string("u"), "\xc3\xa9\xf0\x9f\x98\x80");
}

TEST(DocumentJson, MalformedTextIsAStorageErrorNeverACrash) {
  for (const char* bad :
       {"", "   ", "[]", "\"s\"", "{", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{\"a\":1} x",
        "{\"a\":tru}", "{\"a\":\"\\x\"}", "{\"a\":\"\\ud800\"}", "{\"a\":\"\\udc00\"}",
        "{\"a\":\"\xff\"}", "{\"a\":\"unterminated}", "{\"a\":{\"$numberLong\":\"x\"}}",
        "{\"a\":{\"$numberLong\":5}}", "{\"a\":{\"$numberDouble\":\"one\"}}", "{\"a\":-}",
        "{\"a\":1.}", "{\"a\":\"\x01\"}",
        // Found by tests/fuzz: a $date beyond int64 milliseconds (was undefined behaviour).
        "{\"t\":{\"$date\":1700000000700000000000}}", "{\"t\":{\"$date\":-1e300}}"}) {
    EXPECT_THROW(dj::decode(bad), StorageError) << bad;
  }
  std::string deep(200, '[');
  EXPECT_THROW(dj::decode("{\"a\":" + deep + "}"), StorageError);
}

TEST(DocumentJson, InvalidInputToTheEncoderIsAnInvalidArgument) {
  EXPECT_THROW(dj::encode(Document{{"s", std::string("\xff")}}), InvalidArgument);
  EXPECT_THROW(dj::encode(Document{{std::string("a\0b", 3), true}}), InvalidArgument);
  EXPECT_THROW(dj::encode(Document{{"\xc3", true}}), InvalidArgument);
}

// ------------------------------------------------------------------ files --------

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/me_sqlite_XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    if (d == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = d;
  }
  ~TempDir() { (void)std::system(("rm -rf '" + path_ + "'").c_str()); }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  std::string uri(const std::string& name) const { return "sqlite://" + file(name); }

 private:
  std::string path_;
};

void raw_exec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  std::string msg = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << msg;
}

template <class E>
std::string open_error(const std::string& uri) {
  try {
    (void)open_client(uri, "");
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "opening " << uri << " did not throw the expected error";
  return "";
}

TEST(SqliteOpen, UriChoosesTheBackend) {
  TempDir dir;
  auto c = open_client(dir.uri("locks.db"), "ignored");
  EXPECT_STREQ(c->backend(), "sqlite");
  EXPECT_EQ(c->database(), "");
  EXPECT_EQ(static_cast<SqliteClient&>(*c).path(), dir.file("locks.db"));
  auto s = c->open_storage(1000);
  EXPECT_EQ(s->server_info().name, "SQLite");
  EXPECT_EQ(s->server_info().version, sqlite3_libversion());
  EXPECT_TRUE(s->server_info().atomic_find_and_modify);
  EXPECT_EQ(s->call_bound_ms(), 1000 + SqliteStorage::kCallMarginMs);
  auto m = open_client("mongodb://127.0.0.1:1/db", "");
  EXPECT_STREQ(m->backend(), "mongodb");
  EXPECT_EQ(m->database(), "db");
  EXPECT_THROW(open_client("redis://x", ""), InvalidArgument);
}

TEST(SqliteOpen, PercentEscapesAreDecoded) {
  TempDir dir;
  auto c = open_client("sqlite://" + dir.path() + "/with%20space.db", "");
  EXPECT_EQ(static_cast<SqliteClient&>(*c).path(), dir.file("with space.db"));
  struct stat st {};
  EXPECT_EQ(::stat(dir.file("with space.db").c_str(), &st), 0);
}

TEST(SqliteOpen, MalformedUrisAreInvalidArguments) {
  EXPECT_NE(open_error<InvalidArgument>("sqlite://relative/locks.db").find("absolute"),
            std::string::npos);
  EXPECT_NE(open_error<InvalidArgument>("sqlite://").find("absolute"), std::string::npos);
  EXPECT_NE(open_error<InvalidArgument>("sqlite:///tmp/x.db?mode=ro").find("no options"),
            std::string::npos);
  open_error<InvalidArgument>("sqlite:///tmp/");
  open_error<InvalidArgument>("sqlite:///tmp/bad%zz.db");
  open_error<InvalidArgument>("sqlite:///tmp/bad%00.db");
  open_error<InvalidArgument>("sqlite:///tmp/trail%2");
}

TEST(SqliteOpen, MissingDirectoryIsAClearInvalidArgument) {
  TempDir dir;
  const std::string msg = open_error<InvalidArgument>(dir.uri("no/such/dir/locks.db"));
  EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir.file("no/such/dir")), std::string::npos) << msg;
}

TEST(SqliteOpen, DirectoryInsteadOfAFileIsAnInvalidArgument) {
  TempDir dir;
  ASSERT_EQ(::mkdir(dir.file("sub").c_str(), 0755), 0);
  EXPECT_NE(open_error<InvalidArgument>(dir.uri("sub")).find("directory"), std::string::npos);
}

TEST(SqliteOpen, FileThatIsNotADatabaseIsAnInvalidArgument) {
  TempDir dir;
  {
    std::ofstream f(dir.file("notes.txt"));
    f << "these are my notes, not a database; long enough to fill a header: "
      << std::string(200, 'x') << "\n";
  }
  const std::string msg = open_error<InvalidArgument>(dir.uri("notes.txt"));
  EXPECT_NE(msg.find("not a SQLite database"), std::string::npos) << msg;
  // And the file is left as it was.
  std::ifstream f(dir.file("notes.txt"));
  std::string first;
  std::getline(f, first);
  EXPECT_EQ(first.rfind("these are my notes", 0), 0u);
}

TEST(SqliteOpen, EmptyFileBecomesADatabase) {
  TempDir dir;
  { std::ofstream f(dir.file("empty.db")); }
  auto s = open_client(dir.uri("empty.db"), "")->open_storage(1000);
  EXPECT_FALSE(s->read("c", "k").has_value());
}

TEST(SqliteOpen, DatabaseOfAnotherApplicationIsRefused) {
  TempDir dir;
  raw_exec(dir.file("app.db"), "CREATE TABLE users (name TEXT); INSERT INTO users VALUES ('x');");
  const std::string msg = open_error<InvalidArgument>(dir.uri("app.db"));
  EXPECT_NE(msg.find("another application"), std::string::npos) << msg;
}

TEST(SqliteOpen, NewerSchemaVersionIsAClearStorageError) {
  TempDir dir;
  { (void)open_client(dir.uri("locks.db"), ""); }
  raw_exec(dir.file("locks.db"), "UPDATE meta SET value = '2' WHERE name = 'schema_version'");
  const std::string msg = open_error<StorageError>(dir.uri("locks.db"));
  EXPECT_NE(msg.find("newer"), std::string::npos) << msg;
  EXPECT_NE(msg.find("schema version 2"), std::string::npos) << msg;
  raw_exec(dir.file("locks.db"), "UPDATE meta SET value = 'x' WHERE name = 'schema_version'");
  open_error<StorageError>(dir.uri("locks.db"));
}

TEST(SqliteOpen, ReopeningKeepsTheLocks) {
  TempDir dir;
  {
    auto s = open_client(dir.uri("locks.db"), "")->open_storage(1000);
    LockClaim c{"k", "u", "h", 1, 1000, 2000};
    ASSERT_TRUE(s->claim("coll", c, false));
  }
  auto s = open_client(dir.uri("locks.db"), "")->open_storage(1000);
  auto doc = s->read("coll", "k");
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(doc->uuid, "u");
  EXPECT_EQ(doc->fence, 1);
}

// Runs `body` in a child process as an unprivileged user (root bypasses file modes):
// returns the child's exit code.
template <class F>
int as_nobody(F&& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(90);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

TEST(SqliteOpen, ReadOnlyFileIsAClearInvalidArgument) {
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  { (void)open_client(dir.uri("locks.db"), ""); }
  (void)::unlink((dir.file("locks.db") + "-wal").c_str());
  (void)::unlink((dir.file("locks.db") + "-shm").c_str());
  ASSERT_EQ(::chmod(dir.file("locks.db").c_str(), 0444), 0);
  const std::string uri = dir.uri("locks.db");
  const int code = as_nobody([&] {
    try {
      (void)open_client(uri, "");
      return 2;
    } catch (const InvalidArgument& e) {
      return std::string(e.what()).find("writable") != std::string::npos ? 0 : 3;
    } catch (...) {
      return 4;
    }
  });
  EXPECT_EQ(code, 0) << "0: InvalidArgument naming write access; 2: opened; 3: other message; "
                        "4: other exception; 90: cannot drop privileges";
}

TEST(SqliteOpen, ReadOnlyDirectoryIsAClearInvalidArgument) {
  TempDir dir;
  ASSERT_EQ(::mkdir(dir.file("ro").c_str(), 0555), 0);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  const std::string uri = dir.uri("ro/locks.db");
  const int code = as_nobody([&] {
    try {
      (void)open_client(uri, "");
      return 2;
    } catch (const InvalidArgument& e) {
      return std::string(e.what()).find("not writable") != std::string::npos ? 0 : 3;
    } catch (...) {
      return 4;
    }
  });
  EXPECT_EQ(code, 0);
}

TEST(SqliteStorageOps, CorruptRowIsAStorageErrorNeverACrash) {
  TempDir dir;
  auto s = open_client(dir.uri("locks.db"), "")->open_storage(1000);
  raw_exec(dir.file("locks.db"),
           "INSERT INTO documents (coll, id, doc) VALUES ('c', '\"k\"', '{\"locked\": tru')");
  EXPECT_THROW(s->read("c", "k"), StorageError);
  EXPECT_THROW(s->claim("c", LockClaim{"k", "u", "h", 1, 0, 10}, true), StorageError);
  // Other keys are unaffected.
  EXPECT_TRUE(s->claim("c", LockClaim{"k2", "u", "h", 1, 0, 10}, false).has_value());
}

TEST(SqliteStorageOps, StatusRowsOlderThanTheTtlAreDeletedOnPut) {
  TempDir dir;
  auto s = open_client(dir.uri("locks.db"), "")->open_storage(1000);
  const std::int64_t now = s->server_time_ms();
  s->put_status("st", Document{{"_id", std::string("old")},
                               {"key", std::string("k")},
                               {"timestamp", DateTime{now - 60000}}});
  EXPECT_EQ(s->list_status("st", "k").size(), 1u);  // no TTL known yet: kept
  s->ensure_status_indexes("st", 30);
  s->put_status("st", Document{{"_id", std::string("new")},
                               {"key", std::string("k")},
                               {"timestamp", DateTime{now}}});
  auto list = s->list_status("st", "k");
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].get_string("_id"), "new");
}

// ------------------------------------------------------------- processes ---------

TEST(SqliteProcesses, ConcurrentClaimsFromManyProcessesHaveOneWinnerPerRound) {
  TempDir dir;
  const std::string uri = dir.uri("locks.db");
  { (void)open_client(uri, ""); }
  constexpr int kProcs = 6, kRounds = 20;
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int wins = 0;
      try {
        auto s = open_client(uri, "")->open_storage(5000);
        for (int r = 0; r < kRounds; ++r) {
          LockClaim c{"k" + std::to_string(r), "p" + std::to_string(p), "h", p, 1000, 1000000};
          if (s->claim("c", c, false)) ++wins;
        }
      } catch (...) {
        ::_exit(99);
      }
      ::_exit(wins);
    }
    kids.push_back(pid);
  }
  int total = 0;
  for (pid_t k : kids) {
    int status = 0;
    ::waitpid(k, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_NE(WEXITSTATUS(status), 99) << "a child failed";
    total += WEXITSTATUS(status);
  }
  EXPECT_EQ(total, kRounds) << "exactly one winner per key";
  auto s = open_client(uri, "")->open_storage(1000);
  for (int r = 0; r < kRounds; ++r) EXPECT_EQ(s->read("c", "k" + std::to_string(r))->fence, 1);
}

TEST(SqliteProcesses, WriterKilledMidTransactionLosesNothingAndBlocksNothing) {
  TempDir dir;
  const std::string uri = dir.uri("locks.db");
  auto s = open_client(uri, "")->open_storage(2000);
  ASSERT_TRUE(s->claim("c", LockClaim{"k", "a", "h", 1, 1000, 2000}, false));  // fence 1
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    // A writer inside BEGIN IMMEDIATE, half-way through a change, then frozen.
    sqlite3* db = nullptr;
    if (sqlite3_open(dir.file("locks.db").c_str(), &db) != SQLITE_OK) ::_exit(1);
    sqlite3_exec(db, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
    if (sqlite3_exec(db, "BEGIN IMMEDIATE; DELETE FROM documents;", nullptr, nullptr, nullptr) !=
        SQLITE_OK)
      ::_exit(2);
    (void)!::write(ready[1], "x", 1);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  // While it holds the write lock, writes wait and then give up within their bound: a
  // claim wrote nothing, so it is "not taken" (an acquire tries again), other writes
  // fail...
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(s->claim("c", LockClaim{"k", "b", "h", 2, 5000, 6000}, false));
  const auto waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_LE(waited, s->call_bound_ms());
  EXPECT_THROW(s->renew("c", "k", "a", 1, 1500, 3000), StorageUnavailable);
  // ...reads are not blocked (WAL).
  EXPECT_EQ(s->read("c", "k")->fence, 1);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  // Killed: its transaction is gone, the lock row intact, and the write lock is free.
  auto doc = s->read("c", "k");
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(doc->uuid, "a");
  auto taken = s->claim("c", LockClaim{"k", "b", "h", 2, 5000, 6000}, false);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->fence, 2);
}

TEST(SqliteProcesses, ThreadsOfOneClientWaitAtMostTheirBudgetForTheConnection) {
  TempDir dir;
  auto client = open_client(dir.uri("locks.db"), "");
  auto slow = client->open_storage(2000);
  auto fast = client->open_storage(100);
  // Another process's writer holds the write lock: `slow` waits up to its busy timeout
  // holding the client's connection; `fast` must give up within its own bound.
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t holder = ::fork();
  if (holder == 0) {
    sqlite3* db = nullptr;
    if (sqlite3_open(dir.file("locks.db").c_str(), &db) != SQLITE_OK) ::_exit(1);
    if (sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) ::_exit(2);
    (void)!::write(ready[1], "x", 1);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  std::thread t([&] {
    // Succeeds once the holder is killed below, or fails at its busy timeout.
    try {
      (void)slow->claim("c", LockClaim{"k", "a", "h", 1, 0, 10}, false);
    } catch (const StorageUnavailable&) {
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // slow now holds the connection
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(fast->read("c", "k"), StorageUnavailable);
  const auto waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_LE(waited, fast->call_bound_ms());
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  t.join();
}

TEST(SqliteProcesses, AForkedChildUsesItsOwnConnection) {
  TempDir dir;
  auto client = open_client(dir.uri("locks.db"), "");
  auto s = client->open_storage(1000);
  ASSERT_TRUE(s->claim("c", LockClaim{"parent", "p", "h", 1, 0, 1000000}, false));
  const pid_t pid = ::fork();
  if (pid == 0) {
    try {
      auto doc = s->claim("c", LockClaim{"child", "c", "h", 2, 0, 1000000}, false);
      auto other = client->open_storage(1000)->read("c", "parent");
      ::_exit(doc && other && other->uuid == "p" ? 0 : 1);
    } catch (...) {
      ::_exit(2);
    }
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(s->read("c", "child")->uuid, "c");
  EXPECT_EQ(s->read("c", "parent")->uuid, "p");
}

}  // namespace
}  // namespace mongoelector::storage_test
