#include "uri_binding.h"

#include <string>

#include "storage/uri.h"

namespace me = mongoelector;

namespace mongoelector_py {

void bind_uri(py::module_& m) {
  m.def(
      "parse_uri",
      [](const std::string& uri) {
        const me::StorageUri u = me::parse_storage_uri(uri);
        py::list options;
        for (const auto& [key, value] : u.options) options.append(py::make_tuple(key, value));
        py::dict d;
        d["scheme"] = u.scheme;
        d["backend"] = std::string(u.backend_name());
        d["hosts"] = u.hosts;
        // None when the URI names none, as _transport.database_from_uri always returned.
        d["database"] = u.database.empty() ? py::object(py::none()) : py::str(u.database);
        d["path"] = u.path;
        d["username"] = u.username;
        d["password"] = u.has_password ? py::object(py::str(u.password)) : py::object(py::none());
        d["options"] = options;
        return d;
      },
      py::arg("uri"),
      "The storage URI's parts (core/storage/uri.h): scheme, backend, hosts, database "
      "(None if absent), path, username, password, options [(key, value)]. ValueError "
      "naming the URI when it is malformed.");
}

}  // namespace mongoelector_py
