// open_client: the backend by the URI's scheme (client.h).
#include "client.h"

#include "../exceptions.h"
#include "memory_storage.h"
#include "mongo_client.h"
#include "sqlite_storage.h"

namespace mongoelector {

bool is_sqlite_uri(const std::string& uri) { return uri.rfind("sqlite://", 0) == 0; }

bool is_mongodb_uri(const std::string& uri) {
  return uri.rfind("mongodb://", 0) == 0 || uri.rfind("mongodb+srv://", 0) == 0;
}

std::shared_ptr<StorageClient> open_client(const std::string& uri, const std::string& database) {
  if (is_sqlite_uri(uri)) return SqliteClient::open(uri);  // `database` is not used
  if (is_memory_uri(uri)) return MemoryClient::open(uri);  // nor here
  // Everything else goes to libmongoc, whose parser names what is wrong with the URI
  // (as before the SQLite backend existed).
  return MongoClient::open(uri, database);
}

}  // namespace mongoelector
