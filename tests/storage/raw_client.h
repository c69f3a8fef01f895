// Direct libmongoc access for the tests: writes documents MongoStorage would never write
// (odd types), inspects indexes and drops the test database. Test-only: JSON literals are
// fine here, the backend itself builds BSON with bson_t builders.
#pragma once

#include <mongoc/mongoc.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace mongoelector::storage_test {

class RawClient {
 public:
  RawClient(const std::string& uri, std::string database) : database_(std::move(database)) {
    mongoc_init();
    client_ = mongoc_client_new(uri.c_str());
    if (client_ == nullptr) throw std::runtime_error("RawClient: bad URI " + uri);
    mongoc_client_set_error_api(client_, MONGOC_ERROR_API_VERSION_2);
  }
  ~RawClient() { mongoc_client_destroy(client_); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  // Runs a command given as extended JSON; returns the reply as relaxed JSON, or throws
  // with the server's message.
  std::string command(const std::string& json) {
    bson_error_t error;
    bson_t* cmd = bson_new_from_json(reinterpret_cast<const uint8_t*>(json.data()),
                                     static_cast<ssize_t>(json.size()), &error);
    if (cmd == nullptr) throw std::runtime_error(std::string("bad test JSON: ") + error.message);
    bson_t reply;
    bool ok =
        mongoc_client_command_simple(client_, database_.c_str(), cmd, nullptr, &reply, &error);
    bson_destroy(cmd);
    char* text = bson_as_relaxed_extended_json(&reply, nullptr);
    std::string out = text ? text : "";
    bson_free(text);
    bson_destroy(&reply);
    if (!ok)
      throw std::runtime_error("command failed (" + std::to_string(error.code) +
                               "): " + error.message);
    return out;
  }

  void insert(const std::string& collection, const std::string& doc_json) {
    command("{\"insert\": \"" + collection + "\", \"documents\": [" + doc_json + "]}");
  }

  struct Index {
    std::string name;
    std::string key_json;
    std::optional<long long> expire_after_s;
  };

  std::vector<Index> indexes(const std::string& collection) {
    std::vector<Index> out;
    mongoc_collection_t* coll =
        mongoc_client_get_collection(client_, database_.c_str(), collection.c_str());
    mongoc_cursor_t* cursor = mongoc_collection_find_indexes_with_opts(coll, nullptr);
    const bson_t* doc = nullptr;
    while (mongoc_cursor_next(cursor, &doc)) {
      Index index;
      bson_iter_t it;
      if (bson_iter_init_find(&it, doc, "name") && BSON_ITER_HOLDS_UTF8(&it)) {
        index.name = bson_iter_utf8(&it, nullptr);
      }
      if (bson_iter_init_find(&it, doc, "key") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        uint32_t len = 0;
        const uint8_t* data = nullptr;
        bson_iter_document(&it, &len, &data);
        bson_t key;
        if (bson_init_static(&key, data, len)) {
          char* text = bson_as_canonical_extended_json(&key, nullptr);
          index.key_json = text ? text : "";
          bson_free(text);
        }
      }
      if (bson_iter_init_find(&it, doc, "expireAfterSeconds") && BSON_ITER_HOLDS_NUMBER(&it)) {
        index.expire_after_s = bson_iter_as_int64(&it);
      }
      out.push_back(index);
    }
    bson_error_t error;
    bool failed = mongoc_cursor_error(cursor, &error);
    mongoc_cursor_destroy(cursor);
    mongoc_collection_destroy(coll);
    if (failed) throw std::runtime_error(std::string("listIndexes: ") + error.message);
    return out;
  }

  // Best effort: some servers (mongo-java-server) fail to drop what they let us create.
  void drop_database() noexcept {
    try {
      command("{\"dropDatabase\": 1}");
    } catch (...) {
    }
  }

 private:
  std::string database_;
  mongoc_client_t* client_ = nullptr;
};

}  // namespace mongoelector::storage_test
