#include "bindings.h"

#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>

#include "binding_util.h"
#include "convert.h"
#include "identity.h"
#include "pymongo_storage.h"
#include "storage/client.h"
#include "storage/mongo_storage.h"
#include "storage/sqlite_storage.h"

namespace mongoelector_py {

void bind_storage(py::module_& m) {
  // Who a locker is. Python passes the original's values (uuid.uuid4(), socket.getfqdn(),
  // os.getpid()) so documents and messages match what the original writes.
  py::class_<me::Identity>(m, "Identity")
      .def(py::init([](std::string uuid, std::string host, std::int64_t pid) {
             return me::Identity{std::move(uuid), std::move(host), pid};
           }),
           py::arg("uuid"), py::arg("host"), py::arg("pid"))
      .def_readonly("uuid", &me::Identity::uuid)
      .def_readonly("host", &me::Identity::host)
      .def_readonly("pid", &me::Identity::pid);

  py::class_<me::Storage, std::shared_ptr<me::Storage>>(m, "Storage")
      .def("server_time",
           [](me::Storage& s) {
             auto ms = nogil<std::int64_t>([&] { return s.server_time_ms(); });
             return datetime_from_ms(ms);
           })
      .def("server_info", [](me::Storage& s) {
        auto info = nogil<me::ServerInfo>([&] { return s.server_info(); });
        py::dict d;
        d["name"] = info.name;
        d["version"] = info.version;
        d["atomic_find_and_modify"] = info.atomic_find_and_modify;
        return d;
      });

  py::class_<ServerFacts, std::shared_ptr<ServerFacts>>(
      m, "ServerFacts", "What one pymongo client's server is, shared by its storages.")
      .def(py::init<>());

  py::class_<PyMongoStorage, me::Storage, std::shared_ptr<PyMongoStorage>>(m, "PyMongoStorage")
      .def(py::init<py::object, double, std::shared_ptr<ServerFacts>>(), py::arg("db"),
           py::arg("op_timeout"), py::arg("facts") = nullptr)
      .def_property_readonly("is_mock", &PyMongoStorage::is_mock)
      .def_property_readonly("op_timeout", &PyMongoStorage::op_timeout_s)
      .def_property_readonly("timeout_scope", &PyMongoStorage::timeout_scope)
      .def_property_readonly("db", &PyMongoStorage::db);

  // A client for any URI (storage/client.h): the URI transport's handle on a backend.
  py::class_<me::StorageClient, std::shared_ptr<me::StorageClient>>(m, "StorageClient")
      .def(py::init([](const std::string& uri, const std::string& database) {
             return me::open_client(uri, database);
           }),
           py::arg("uri"), py::arg("database"))
      .def(
          "open_storage",
          [](me::StorageClient& c, double op_timeout) {
            return c.open_storage(ms_from_seconds(op_timeout));
          },
          py::arg("op_timeout"))
      .def_property_readonly("backend",
                             [](const me::StorageClient& c) { return std::string(c.backend()); })
      .def_property_readonly("uri", &me::StorageClient::uri);

  py::class_<me::MongoClient, me::StorageClient, std::shared_ptr<me::MongoClient>>(m, "MongoClient")
      .def(py::init([](const std::string& uri, const std::string& database) {
             return me::MongoClient::open(uri, database);
           }),
           py::arg("uri"), py::arg("database"))
      .def_property_readonly("database", &me::MongoClient::database)
      .def_property_readonly("pool_size", &me::MongoClient::pool_size)
      .def_property_readonly("pool_count", &me::MongoClient::pool_count);

  py::class_<me::MongoStorage, me::Storage, std::shared_ptr<me::MongoStorage>>(m, "MongoStorage")
      .def(py::init([](std::shared_ptr<me::MongoClient> client, double op_timeout) {
             return std::make_shared<me::MongoStorage>(std::move(client),
                                                       ms_from_seconds(op_timeout));
           }),
           py::arg("client"), py::arg("op_timeout"))
      .def(py::init([](std::string uri, std::string database, double op_timeout) {
             me::MongoStorageOptions o;
             o.uri = std::move(uri);
             o.database = std::move(database);
             o.op_timeout_ms = ms_from_seconds(op_timeout);
             return std::make_shared<me::MongoStorage>(std::move(o));
           }),
           py::arg("uri"), py::arg("database"), py::arg("op_timeout"))
      .def_property_readonly("round_trips", &me::MongoStorage::round_trips);

  py::class_<me::SqliteStorage, me::Storage, std::shared_ptr<me::SqliteStorage>>(m, "SqliteStorage")
      .def_property_readonly("round_trips", &me::SqliteStorage::round_trips);
}

}  // namespace mongoelector_py
