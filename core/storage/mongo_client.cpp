// See mongo_client.h: one client, a few pools (one per timeout class), fork-aware.
#include "mongo_client.h"

#include <unistd.h>

#include <cmath>

#include "../server_clock.h"
#include "mongo_connection.h"
#include "mongo_storage.h"

namespace mongoelector {

struct MongoClient::Impl {
  ClientUri uri;
};

std::shared_ptr<MongoClient> MongoClient::open(const std::string& uri,
                                               const std::string& database) {
  std::shared_ptr<MongoClient> client(new MongoClient());
  client->impl_ = std::make_unique<Impl>();
  client->impl_->uri = parse_client_uri(uri, database, kDefaultPoolSize);
  client->uri_ = uri;
  client->database_ = client->impl_->uri.database;
  client->pool_size_ = client->impl_->uri.pool_size;
  client->owner_pid_ = static_cast<long>(getpid());
  return client;
}

MongoClient::~MongoClient() = default;

std::shared_ptr<Storage> MongoClient::open_storage(std::int64_t op_timeout_ms) {
  return std::make_shared<MongoStorage>(shared_from_this(), op_timeout_ms);
}

std::int64_t MongoClient::timeout_class_ms(std::int64_t op_timeout_ms) {
  // Rungs 100 * sqrt(2)^k: a handful of pools cover every ttl, and a class is never
  // more than 29 % below the timeout asked for. Below 100 ms the timeout is its own
  // class (rare, tests).
  if (op_timeout_ms < 100) return op_timeout_ms;
  std::int64_t best = 100;
  for (int k = 1;; ++k) {
    const auto rung = static_cast<std::int64_t>(std::floor(100.0 * std::pow(2.0, k / 2.0)));
    if (rung > op_timeout_ms) return best;
    best = rung;
  }
}

std::shared_ptr<MongoPool> MongoClient::pool_for(std::int64_t op_timeout_ms) {
  const std::int64_t cls = timeout_class_ms(op_timeout_ms);
  std::lock_guard<std::mutex> g(mu_);
  const long pid = static_cast<long>(getpid());
  if (pid != owner_pid_) {
    // A fork's child: the parent's pools are unusable here (mongo_client.h). Storages
    // of the parent keep theirs and refuse to run; new ones get fresh pools.
    pools_.clear();
    owner_pid_ = pid;
  }
  auto& pool = pools_[cls];
  if (!pool) pool = std::make_shared<MongoPool>(impl_->uri.uri.get(), database_, cls, pool_size_);
  return pool;
}

std::size_t MongoClient::pool_count() {
  std::lock_guard<std::mutex> g(mu_);
  return pools_.size();
}

std::shared_ptr<MongoBatchDomain> MongoClient::batch_domain() {
  std::lock_guard<std::mutex> g(mu_);
  const long pid = static_cast<long>(getpid());
  if (!domain_ || domain_pid_ != pid) {
    domain_ = std::make_shared<MongoBatchDomain>();
    domain_->board = std::make_shared<ClockSampleBoard>();
    domain_pid_ = pid;
  }
  return domain_;
}

std::optional<ServerInfo> MongoClient::known_server_info() {
  std::lock_guard<std::mutex> g(mu_);
  return server_info_;
}

void MongoClient::remember_server_info(const ServerInfo& info) {
  std::lock_guard<std::mutex> g(mu_);
  server_info_ = info;
}

}  // namespace mongoelector
