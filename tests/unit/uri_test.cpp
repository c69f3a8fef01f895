// The storage URI parser (core/storage/uri.h): one table of accepted URIs, one of refused
// ones. The C API, the command and the Python package call this parser; their own tests
// only check that they do (tests/cli, tests/python/test_uri.py), not the table again.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "exceptions.h"
#include "storage/uri.h"

using namespace mongoelector;

namespace {

using Options = std::vector<std::pair<std::string, std::string>>;

struct Accepted {
  const char* uri;
  const char* scheme;
  const char* backend;
  const char* hosts;
  const char* database;  // as parsed ("" when absent)
  const char* used_db;   // database_for(uri, "")
  const char* path;
  const char* username;
  const char* password;
  Options options;
};

const Accepted kAccepted[] = {
    // uri, scheme, backend, hosts, database, database_for(""), path, user, password, options
    {"mongodb://h", "mongodb", "mongodb", "h", "", "", "", "", "", {}},
    {"mongodb://h/", "mongodb", "mongodb", "h", "", "", "", "", "", {}},
    {"mongodb://h:27017/app", "mongodb", "mongodb", "h:27017", "app", "app", "", "", "", {}},
    {"mongodb://h1:1,h2:2/app?replicaSet=rs0",
     "mongodb",
     "mongodb",
     "h1:1,h2:2",
     "app",
     "app",
     "",
     "",
     "",
     {{"replicaSet", "rs0"}}},
    {"mongodb://h/?w=majority&appname=a%20b&",
     "mongodb",
     "mongodb",
     "h",
     "",
     "",
     "",
     "",
     "",
     {{"w", "majority"}, {"appname", "a b"}}},
    {"mongodb://h/my%2Ddb?maxPoolSize=5",
     "mongodb",
     "mongodb",
     "h",
     "my-db",
     "my-db",
     "",
     "",
     "",
     {{"maxPoolSize", "5"}}},
    // IPv6 hosts are kept as written (libmongoc reads them).
    {"mongodb://[::1]:27017/app",
     "mongodb",
     "mongodb",
     "[::1]:27017",
     "app",
     "app",
     "",
     "",
     "",
     {}},
    {"mongodb://u:p@[fe80::1%25eth0]:27017,[::1]/db",
     "mongodb",
     "mongodb",
     "[fe80::1%25eth0]:27017,[::1]",
     "db",
     "db",
     "",
     "u",
     "p",
     {}},
    // Credentials: '@' and '/' escaped as the specification asks, and a raw '@'.
    {"mongodb://us%40er:p%40ss%2Fw@h/app",
     "mongodb",
     "mongodb",
     "h",
     "app",
     "app",
     "",
     "us@er",
     "p@ss/w",
     {}},
    {"mongodb://user:p@ss@h:1/app",
     "mongodb",
     "mongodb",
     "h:1",
     "app",
     "app",
     "",
     "user",
     "p@ss",
     {}},
    {"mongodb://user@h/app?authSource=admin",
     "mongodb",
     "mongodb",
     "h",
     "app",
     "app",
     "",
     "user",
     "",
     {{"authSource", "admin"}}},
    {"mongodb+srv://u:p@cluster0.example.net/app?retryWrites=true",
     "mongodb+srv",
     "mongodb",
     "cluster0.example.net",
     "app",
     "app",
     "",
     "u",
     "p",
     {{"retryWrites", "true"}}},
    {"mongodb+srv://cluster0.example.net",
     "mongodb+srv",
     "mongodb",
     "cluster0.example.net",
     "",
     "",
     "",
     "",
     "",
     {}},
    {"sqlite:///var/lib/app/locks.db",
     "sqlite",
     "sqlite",
     "",
     "",
     "",
     "/var/lib/app/locks.db",
     "",
     "",
     {}},
    {"sqlite:///tmp/with%20space/50%25.db",
     "sqlite",
     "sqlite",
     "",
     "",
     "",
     "/tmp/with space/50%.db",
     "",
     "",
     {}},
    {"memory://svc-test", "memory", "memory", "", "", "", "svc-test", "", "", {}},
    {"memory://", "memory", "memory", "", "", "", "", "", "", {}},
};

class UriAccepted : public ::testing::TestWithParam<Accepted> {};

TEST_P(UriAccepted, Parses) {
  const Accepted& c = GetParam();
  const StorageUri u = parse_storage_uri(c.uri);
  EXPECT_EQ(u.scheme, c.scheme);
  EXPECT_STREQ(u.backend_name(), c.backend);
  EXPECT_EQ(u.hosts, c.hosts);
  EXPECT_EQ(u.database, c.database);
  EXPECT_EQ(database_for(u, ""), c.used_db);
  EXPECT_EQ(u.path, c.path);
  EXPECT_EQ(u.username, c.username);
  EXPECT_EQ(u.password, c.password);
  EXPECT_EQ(u.options, c.options);
}

INSTANTIATE_TEST_SUITE_P(Table, UriAccepted, ::testing::ValuesIn(kAccepted));

struct Refused {
  const char* uri;
  const char* message_part;  // what the error must say
};

const Refused kRefused[] = {
    {"", "empty storage URI"},
    {"postgres://h/db", "unknown scheme"},
    {"localhost:27017", "unknown scheme"},
    {"MONGODB://h/db", "unknown scheme"},
    {"mongodb://", "no host"},
    {"mongodb:///app", "no host"},
    {"mongodb://u:p@/app", "no host"},
    {"mongodb://h/app?w", "'w' is not key=value"},
    {"mongodb://h/app?=1", "is not key=value"},
    {"mongodb://h/a%2", "bad percent-escape in the database name"},
    {"mongodb://h/a%zz", "bad percent-escape in the database name"},
    {"mongodb://u:p%4@h/app", "bad percent-escape in the password"},
    {"sqlite://", "absolute path"},
    {"sqlite:///", "directory"},
    {"sqlite:///var/lib/", "directory"},
    {"sqlite://relative/locks.db", "absolute path"},
    {"sqlite:/var/lib/locks.db", "three slashes"},
    {"sqlite:locks.db", "three slashes"},
    {"sqlite:///x.db?mode=ro", "takes no options"},
    {"sqlite:///x%00.db", "NUL"},
    {"sqlite:///x%G1.db", "bad percent-escape in the SQLite path"},
    {"memory://n?x=1", "takes no options"},
};

class UriRefused : public ::testing::TestWithParam<Refused> {};

TEST_P(UriRefused, NamesTheInput) {
  const Refused& c = GetParam();
  try {
    parse_storage_uri(c.uri);
    ADD_FAILURE() << "accepted: " << c.uri;
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(c.message_part), std::string::npos) << what;
    // The input is named (escapes are quoted as written), except an empty one.
    if (c.uri[0] != '\0' && std::string(c.uri).find('@') == std::string::npos) {
      EXPECT_NE(what.find(c.uri), std::string::npos) << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Table, UriRefused, ::testing::ValuesIn(kRefused));

TEST(Uri, ErrorsHideThePassword) {
  try {
    parse_storage_uri("mongodb://user:secret@/app");
    FAIL();
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find("secret"), std::string::npos) << what;
    EXPECT_NE(what.find("mongodb://user:***@/app"), std::string::npos) << what;
  }
}

TEST(Uri, GivenDatabaseWinsForMongoDBOnly) {
  EXPECT_EQ(database_for(parse_storage_uri("mongodb://h/app"), "other"), "other");
  EXPECT_EQ(database_for(parse_storage_uri("mongodb://h/?w=1"), "other"), "other");
  EXPECT_EQ(database_for(parse_storage_uri("sqlite:///x.db"), "other"), "");
  EXPECT_EQ(database_for(parse_storage_uri("memory://m"), "other"), "");
}

TEST(Uri, Redacts) {
  EXPECT_EQ(redact_uri("mongodb://u:pw@h/app?x=1"), "mongodb://u:***@h/app?x=1");
  EXPECT_EQ(redact_uri("mongodb://u:p@w@h1,h2"), "mongodb://u:***@h1,h2");
  EXPECT_EQ(redact_uri("mongodb://u@h/app"), "mongodb://u@h/app");
  EXPECT_EQ(redact_uri("mongodb://h/db@x"), "mongodb://h/db@x");
  EXPECT_EQ(redact_uri("sqlite:///a:b@c.db"), "sqlite:///a:b@c.db");
}

}  // namespace
