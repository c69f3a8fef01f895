// open_client: the backend by the URI's scheme (client.h).
#include "client.h"

#include "../exceptions.h"
#include "memory_storage.h"
#include "mongo_client.h"
#include "sqlite_storage.h"
#include "uri.h"

namespace mongoelector {

bool is_sqlite_uri(const std::string& uri) { return uri.rfind("sqlite://", 0) == 0; }

bool is_mongodb_uri(const std::string& uri) {
  return uri.rfind("mongodb://", 0) == 0 || uri.rfind("mongodb+srv://", 0) == 0;
}

std::shared_ptr<StorageClient> open_client(const std::string& uri, const std::string& database) {
  const StorageUri parsed = parse_storage_uri(uri);  // InvalidArgument naming what is wrong
  switch (parsed.backend) {
    case UriBackend::Sqlite:
      return SqliteClient::open(uri);  // `database` is not used
    case UriBackend::Memory:
      return MemoryClient::open(uri);  // nor here
    case UriBackend::MongoDB:
      break;
  }
  // libmongoc reads the hosts and options again itself; the database is ours.
  return MongoClient::open(uri, database_for(parsed, database));
}

}  // namespace mongoelector
