// The bindings of each core type into _native, one source file each
// (python/src/<type>_binding.cpp); module.cpp assembles them.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>

namespace mongoelector {
class Locker;
}

namespace mongoelector_py {

namespace py = pybind11;

void bind_storage(py::module_& m);      // Identity, Storage and the storages and clients
void bind_locker(py::module_& m);       // Locker
void bind_lease(py::module_& m);        // KeepAliveLease
void bind_elector(py::module_& m);      // Elector, wait_reapers
void bind_semaphore(py::module_& m);    // _Semaphore, _SemaphoreLease
void bind_rwlock(py::module_& m);       // _RwLock, _RwLockLease
void bind_partitioner(py::module_& m);  // Partitioner, partition_status, rendezvous_*
void bind_acquire_run(py::module_& m);  // AcquireRun (Locker/_Semaphore.start_acquire)
// The Locker's operations in parts, for mongoelector.aio (locker_parts_binding.cpp).
void bind_locker_parts(
    py::module_& m, py::class_<mongoelector::Locker, std::shared_ptr<mongoelector::Locker>>& cls);

}  // namespace mongoelector_py
