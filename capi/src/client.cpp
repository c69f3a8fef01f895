// mongoelector_client_*: a mongoelector::StorageClient chosen by the URI (a MongoClient,
// whose pools every locker and elector made from the handle share, or a SqliteClient).
#include <cstdlib>
#include <memory>

#include "handles.h"
#include "json.h"
#include "utf8.h"

using mongoelector::capi::checked;
using mongoelector::capi::guard;
using mongoelector::capi::require;

extern "C" {

MONGOELECTOR_API mongoelector_status mongoelector_client_new(const char* uri, const char* database,
                                                             mongoelector_client** out) {
  return guard([&] {
    require(out != nullptr, "out is NULL");
    require(uri != nullptr, "uri is NULL");
    require(database != nullptr, "database is NULL");
    require(mongoelector::is_valid_utf8(uri), "uri is not valid UTF-8");
    require(mongoelector::is_valid_utf8(database), "database is not valid UTF-8");
    auto client = std::make_unique<mongoelector_client>();
    // mongodb://: parses the URI and the database name now (InvalidArgument), connects
    // on first use. sqlite:///path: opens (creates) the file now; `database` unused.
    client->client = mongoelector::open_client(uri, database);
    *out = client.release();
  });
}

MONGOELECTOR_API void mongoelector_client_free(mongoelector_client* client) {
  if (client == nullptr || client->magic != mongoelector::capi::kClientMagic) return;
  client->magic = mongoelector::capi::kFreedMagic;
  try {
    delete client;
  } catch (...) {
    // Destructors do not throw; nothing may escape to C anyway.
  }
}

MONGOELECTOR_API mongoelector_status mongoelector_client_server_info(mongoelector_client* client,
                                                                     const char** name_out,
                                                                     const char** version_out) {
  return guard([&] {
    auto& c = checked(client);
    require(name_out != nullptr, "name_out is NULL");
    require(version_out != nullptr, "version_out is NULL");
    std::lock_guard<std::mutex> g(c.info_mu);
    if (!c.info_storage) c.info_storage = c.client->open_storage(5000);
    auto info = c.info_storage->server_info();
    c.server_name = std::move(info.name);
    c.server_version = std::move(info.version);
    c.info_known = true;
    *name_out = c.server_name.c_str();
    *version_out = c.server_version.c_str();
  });
}

MONGOELECTOR_API mongoelector_status mongoelector_client_server_info_copy(
    mongoelector_client* client, char** name_out, char** version_out) {
  return guard([&] {
    auto& c = checked(client);
    require(name_out != nullptr, "name_out is NULL");
    require(version_out != nullptr, "version_out is NULL");
    std::string name, version;
    {
      std::lock_guard<std::mutex> g(c.info_mu);
      if (!c.info_known) {
        if (!c.info_storage) c.info_storage = c.client->open_storage(5000);
        auto info = c.info_storage->server_info();
        c.server_name = std::move(info.name);
        c.server_version = std::move(info.version);
        c.info_known = true;
      }
      name = c.server_name;
      version = c.server_version;
    }
    std::unique_ptr<char, decltype(&std::free)> n(mongoelector::capi::json::malloc_copy(name),
                                                  &std::free);
    *version_out = mongoelector::capi::json::malloc_copy(version);
    *name_out = n.release();
  });
}

}  // extern "C"
