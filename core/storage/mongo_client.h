// MongoClient: the connections of one MongoDB deployment, shared by every locker,
// elector and lease made from it (one pool, not one per key; protocol-notes "cost per
// key"). Thread-safe.
//
// - Pools by timeout class. A call's bound comes from its socket, connect and
//   server-selection timeouts, which libmongoc fixes per pool. So the client keeps one
//   libmongoc pool per *timeout class*: a storage asking for op_timeout_ms gets the
//   pool whose class is the largest rung of a sqrt(2) ladder (100, 141, 200, 282, ...
//   ms) not above it. Its bound never grows past what it asked for, at most 29 %
//   shorter, and a process with any number of lockers has a handful of pools: lockers
//   of one ttl share one. Each pool has one monitor per server (libmongoc), opens
//   connections lazily, at most `pool_size()` of them for commands.
// - Pool size: the URI's maxPoolSize, else kDefaultPoolSize. A call waits at most
//   half its class for a free slot (then StorageUnavailable, never a hang); selection,
//   connect and reply get a class each, so one call's worst case is 3.5 classes, at
//   most 0.35 ttl.
// - fork(): libmongoc pools must not be used across fork. In a child the client opens
//   fresh pools on the next use (lockers made in the child work transparently); a
//   storage made in the parent refuses to run in the child (InvalidArgument saying to
//   make a new locker there), and the parent's pools are left alone (destroying them
//   in the child would send on the parent's sockets and join threads that do not exist
//   there).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "client.h"
#include "ensured_indexes.h"
#include "storage.h"

namespace mongoelector {

class MongoPool;         // mongo_connection.h
class ClockSampleBoard;  // server_clock.h

// What every storage of one client (one database) shares for batched renewal: its
// address is their Storage::batch_domain(), and its board their clock samples.
struct MongoBatchDomain {
  std::shared_ptr<ClockSampleBoard> board;
};

class MongoClient final : public StorageClient, public std::enable_shared_from_this<MongoClient> {
 public:
  static constexpr int kDefaultPoolSize = 10;

  // Parses the URI and checks the database name (empty: the URI's, database_for in
  // uri.h); InvalidArgument when either is unusable. Does not connect.
  static std::shared_ptr<MongoClient> open(const std::string& uri, const std::string& database);
  ~MongoClient() override;
  MongoClient(const MongoClient&) = delete;
  MongoClient& operator=(const MongoClient&) = delete;

  // StorageClient: a MongoStorage on this client's pool of that timeout class.
  std::shared_ptr<Storage> open_storage(std::int64_t op_timeout_ms) override;
  const char* backend() const override { return "mongodb"; }
  const std::string& uri() const override { return uri_; }
  const std::string& database() const override { return database_; }
  int pool_size() const { return pool_size_; }

  // The pool of the timeout class of op_timeout_ms (created on first use; after a fork,
  // created afresh in the child).
  std::shared_ptr<MongoPool> pool_for(std::int64_t op_timeout_ms);
  // The class a timeout falls in (exposed for tests and docs).
  static std::int64_t timeout_class_ms(std::int64_t op_timeout_ms);
  // Pools opened so far in this process (tests, benchmarks).
  std::size_t pool_count();

  // What the deployment is, learnt by the first storage that asks and shared by all
  // the client's storages, so a new locker on a shared client does not ask again.
  std::optional<ServerInfo> known_server_info();
  void remember_server_info(const ServerInfo& info);
  // The server answers no `hello` (mongo-java-server): the clock is sampled with isMaster.
  std::atomic<bool> hello_unsupported{false};
  // The batch domain of this client's storages (created on first use). After a fork
  // the child gets a new one: the parent's storages refuse to run there, so they must
  // not carry the child's renewals.
  std::shared_ptr<MongoBatchDomain> batch_domain();
  // The indexes its storages have ensured: createIndexes once per collection.
  EnsuredIndexes& ensured_indexes() { return ensured_indexes_; }

  struct Impl;

 private:
  MongoClient() = default;
  std::optional<ServerInfo> server_info_;  // under mu_
  std::string uri_;
  std::string database_;
  int pool_size_ = kDefaultPoolSize;
  std::unique_ptr<Impl> impl_;
  std::mutex mu_;
  std::map<std::int64_t, std::shared_ptr<MongoPool>> pools_;  // by timeout class
  long owner_pid_ = 0;                                        // process the pools belong to
  std::shared_ptr<MongoBatchDomain> domain_;                  // under mu_
  long domain_pid_ = 0;                                       // process domain_ belongs to
  EnsuredIndexes ensured_indexes_;
};

}  // namespace mongoelector
