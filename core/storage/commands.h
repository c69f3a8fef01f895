// Every MongoDB command of the protocol, built ONCE as data: the filter, update and options
// of each storage operation as a document tree. The two MongoDB transports only encode and
// send them: libmongoc (mongo_storage.cpp, via mongo_bson.h) and pymongo
// (python/src/pymongo_storage.cpp, via convert.h). A protocol rule therefore has one
// place: change a filter here and both transports send the new one. The memory and SQLite
// backends edit documents themselves with the same rules (RenewRequest::apply_to, ...).
//
// Why each filter is what it is: storage.h, on the operation of the same name.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "../value.h"
#include "storage.h"

namespace mongoelector::commands {

// A node of a document tree: a scalar, a sub-document or an array. Document children
// carry their field name (order kept, as in Document); array elements have none.
struct Node {
  enum class Kind : std::uint8_t { scalar, document, array };

  std::string name;
  Kind kind = Kind::document;
  Value value;
  std::vector<Node> children;

  Node() = default;
  Node(std::string n, Value v) : name(std::move(n)), kind(Kind::scalar), value(std::move(v)) {}
  Node(std::string n, Node sub) : Node(std::move(sub)) { name = std::move(n); }

  static Node doc(std::vector<Node> fields);
  static Node array(std::vector<Node> elements);
  static Node scalar(Value v) { return Node("", std::move(v)); }
  // A flat Document as a tree.
  static Node of(const Document& d);

  bool empty() const { return kind != Kind::scalar && children.empty(); }
  Node& add(std::string n, Value v) { return children.emplace_back(std::move(n), std::move(v)); }
  Node& add(std::string n, Node sub) { return children.emplace_back(std::move(n), std::move(sub)); }
};

// One statement of a bulk `update` command (Op::bulk_update).
struct Statement {
  Node filter;
  Node update;
};

enum class Op : std::uint8_t {
  find_and_modify,  // upsert, returns the document after the write
  update_one,       // result: matched count > 0
  update_many,      // one statement, multi: its counts are never used
  bulk_update,      // one `update` command, one statement each, unordered; counts unused
  delete_one,       // result: deleted count > 0
  find,             // limit 0: all; n: at most n in ONE batch (no cursor left open)
  insert_one,       // `update` is the document; E11000 is the caller's to map
  replace_one,      // upsert; `update` is the replacement
};

struct Command {
  Op op = Op::find;
  std::string collection;
  Node filter;
  Node update;                        // update, document to insert, or replacement
  std::vector<Statement> statements;  // bulk_update only
  Node sort;                          // find: empty for none
  std::int64_t limit = 0;             // find
  bool one = false;                   // find: the document of one _id (or none)
  std::string what;                   // names the command in errors: "update (renew)"
};

// ---- locks ----------------------------------------------------------------------------
Command claim(const std::string& collection, const LockClaim& claim, bool force);
// insert_claim: insert_one of claim.document().
Command insert_claim(const std::string& collection, const LockClaim& claim);
// On "<collection>.fences".
Command bump_epoch(const std::string& collection, const std::string& key);
Command set_fence(const std::string& collection, const std::string& key, const std::string& uuid,
                  std::int64_t old_fence, std::int64_t created_ms, std::int64_t new_fence);
// renew() ($max) or, with `exact`, set_expiry() ($set; created_ms: see set_expiry).
Command renew(const std::string& collection, const std::string& key, const std::string& uuid,
              std::int64_t fence, std::int64_t now_ms, std::int64_t expire_ms, bool exact = false,
              std::int64_t created_ms = 0);
// renew_many: one update_many per group (renew_groups), then renew_read_back.
Command renew_group(const std::string& collection, const std::vector<RenewRequest>& requests,
                    const RenewGroup& group, std::int64_t now_ms);
// The documents of `keys` (distinct) in one batch: the read-back of a batched renewal.
Command read_keys(const std::string& collection, const std::vector<std::string>& keys);
Command release(const std::string& collection, const std::string& key,
                const std::optional<std::string>& uuid, std::int64_t fence, std::int64_t now_ms,
                bool delete_document);
// The document of `key` (lock or semaphore): find, limit 1.
Command read(const std::string& collection, const std::string& key);
Command hand_over(const std::string& collection, const Storage::HandOver& h);
Command set_payload(const std::string& collection, const PayloadWrite& w);

// ---- semaphores -----------------------------------------------------------------------
Command create_semaphore(const std::string& collection, const SemaphoreClaim& claim);
Command claim_semaphore(const std::string& collection, const SemaphoreClaim& claim);
Command renew_semaphore(const std::string& collection, const std::string& key, std::int64_t slot,
                        const std::string& uuid, std::int64_t fence, std::int64_t now_ms,
                        std::int64_t expire_ms);
Command release_semaphore(const std::string& collection, const std::string& key, std::int64_t slot,
                          const std::string& uuid, std::int64_t fence);
// Fair queueing (semaphore_storage.h): claim_semaphore also builds an enqueue ($push),
// and a claim's queue_passed / queue_own ($pull up to the last ticket removed).
Command renew_queue_entry(const std::string& collection, const std::string& key, std::int64_t index,
                          const std::string& uuid, std::int64_t ticket, std::int64_t now_ms,
                          std::int64_t expire_ms);
Command leave_queue(const std::string& collection, const std::string& key, const std::string& uuid,
                    std::int64_t ticket);
// renew_semaphores: ONE unordered bulk `update` of requests[from, to), one statement per
// request (renew_semaphore's filter and $max), then read_keys over their distinct keys
// (semaphore_keys), whose documents decide (SemaphoreRenewRequest::renewed_by).
Command renew_semaphores(const std::string& collection,
                         const std::vector<SemaphoreRenewRequest>& requests, std::size_t from,
                         std::size_t to, std::int64_t now_ms);
std::vector<std::string> semaphore_keys(const std::vector<SemaphoreRenewRequest>& requests,
                                        std::size_t from, std::size_t to);

// ---- status ---------------------------------------------------------------------------
Command put_status(const std::string& collection, const Document& doc);  // doc has _id
Command list_status(const std::string& collection, const std::string& key);

// ---- indexes --------------------------------------------------------------------------
// {field: 1} named "<field>_1" (pymongo's default, as the original), a TTL index when
// expire_after_s is set.
struct IndexSpec {
  std::string field;
  std::optional<std::int64_t> expire_after_s;
};
std::vector<IndexSpec> lock_indexes();
std::vector<IndexSpec> status_indexes(std::int64_t ttl_s);

// A batched renewal (renew_many, renew_semaphores) on a document server, whatever the
// transport: `send(from, to)` writes requests[from, to) and returns the documents it read
// back, by key; each request is renewed when its document says so (renewed_by), never by
// counts. Chunks of at most `chunk` requests (Storage::max_renew_batch).
template <class Doc, class Request, class Send>
std::vector<bool> renew_in_chunks(const std::vector<Request>& requests, std::size_t chunk,
                                  Send&& send) {
  std::vector<bool> renewed(requests.size(), false);
  chunk = std::max<std::size_t>(1, chunk);
  for (std::size_t from = 0; from < requests.size(); from += chunk) {
    const std::size_t to = std::min(requests.size(), from + chunk);
    const std::map<std::string, Doc> docs = send(from, to);
    for (std::size_t i = from; i < to; ++i) {
      auto it = docs.find(requests[i].key);
      renewed[i] = it != docs.end() && requests[i].renewed_by(it->second);
    }
  }
  return renewed;
}

}  // namespace mongoelector::commands
