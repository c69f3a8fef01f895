// mongoelector_client_*: a URI and a database name, plus a connection for server_info.
#include <memory>

#include "handles.h"
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
    auto client = std::make_unique<mongoelector_client>();
    client->uri = uri;
    client->database = database;
    require(mongoelector::is_valid_utf8(client->uri), "uri is not valid UTF-8");
    require(mongoelector::is_valid_utf8(client->database), "database is not valid UTF-8");
    // Parses the URI and the database name now (InvalidArgument), connects on first use.
    client->storage = std::make_unique<mongoelector::MongoStorage>(
        mongoelector::MongoStorageOptions{client->uri, client->database, 5000});
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
    auto info = c.storage->server_info();
    std::lock_guard<std::mutex> g(c.info_mu);
    c.server_name = std::move(info.name);
    c.server_version = std::move(info.version);
    *name_out = c.server_name.c_str();
    *version_out = c.server_version.c_str();
  });
}

}  // extern "C"
