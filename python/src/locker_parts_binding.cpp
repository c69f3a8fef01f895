// The Locker's operations in parts (locker.h, "in parts"), for mongoelector.aio over a
// pymongo AsyncDatabase: the core decides what to send and what the reply means, the
// event loop awaits pymongo itself (no worker thread, no hop back to the loop). A part
// that needs round trips of its own says so ("on a thread"), and the caller runs it, or
// the whole operation, on a worker as before.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "binding_util.h"
#include "bindings.h"
#include "convert.h"
#include "exceptions.h"
#include "locker.h"
#include "pymongo_storage.h"

namespace mongoelector_py {

namespace {

// A claim between its parts: what begin_claim prepared, and the document its write
// returned once known.
struct ClaimInParts {
  me::Locker::PendingClaim pending;
  me::commands::Command command;
  std::optional<me::LockDoc> doc;
  bool refused_insert = false;  // the insert met a document: claim_after_insert_refused
};

struct ReleaseInParts {
  me::Locker::PendingRelease pending;
  me::commands::Command command;
};

struct TouchInParts {
  me::RenewTicket ticket;
  me::commands::Command command;
};

PyMongoStorage& loop_storage(me::Locker& l) {
  auto* s = dynamic_cast<PyMongoStorage*>(&l.storage());
  if (s == nullptr || !s->fronts_async_database())
    throw me::InvalidArgument("this locker's storage is not a pymongo AsyncDatabase");
  return *s;
}

py::object claimed_tuple(const std::optional<me::Claimed>& c) {
  if (!c) return py::none();
  return py::make_tuple(c->token, c->fence);
}

}  // namespace

void bind_locker_parts(py::module_& m, py::class_<me::Locker, std::shared_ptr<me::Locker>>& cls) {
  py::class_<ClaimInParts, std::shared_ptr<ClaimInParts>>(
      m, "ClaimInParts", "A claim between its parts (Locker.claim_begin).")
      .def_property_readonly("insert", [](const ClaimInParts& c) { return c.pending.insert; })
      .def_property_readonly("refused_insert",
                             [](const ClaimInParts& c) { return c.refused_insert; });
  py::class_<ReleaseInParts, std::shared_ptr<ReleaseInParts>>(
      m, "ReleaseInParts", "A release between its parts (Locker.release_begin).")
      .def_property_readonly("on_thread",
                             [](const ReleaseInParts& r) { return r.pending.on_thread; })
      .def_property_readonly("holds",
                             [](const ReleaseInParts& r) { return r.pending.hold.has_value(); });
  py::class_<TouchInParts, std::shared_ptr<TouchInParts>>(
      m, "TouchInParts", "A renewal between its parts (Locker.touch_begin).");

  cls.def_property_readonly(
         "loop_io",
         [](me::Locker& l) {
           auto* s = dynamic_cast<PyMongoStorage*>(&l.storage());
           return s != nullptr && s->fronts_async_database();
         },
         "Whether this locker's storage is a pymongo AsyncDatabase, whose commands the "
         "event loop can await itself (the *_begin parts).")
      // ---- claims ----
      .def(
          "claim_begin",
          [](me::Locker& l, bool force) -> std::shared_ptr<ClaimInParts> {
            std::optional<me::Locker::PendingClaim> p = l.begin_claim(force);
            if (!p) return nullptr;
            auto c = std::make_shared<ClaimInParts>();
            c->command = l.claim_command(*p);
            c->pending = std::move(*p);
            return c;
          },
          py::arg("force") = false,
          "What an attempt does before its claim's write when that needs no round trip; "
          "None: run the attempt on a thread (AcquireRun.attempt).")
      .def(
          "claim_send",
          [](me::Locker& l, ClaimInParts& c) { return loop_storage(l).start(c.command); },
          "The claim's write, a coroutine of the AsyncDatabase.")
      .def(
          "claim_reply",
          [](me::Locker&, ClaimInParts& c, const py::object& reply) {
            // An insert writes exactly its document; the upsert returns it.
            c.doc = c.pending.insert ? c.pending.claim.inserted()
                                     : PyMongoStorage::claimed_doc_of(reply);
          },
          "The write's reply (not a duplicate-key error).")
      .def(
          "claim_duplicate",
          [](me::Locker&, ClaimInParts& c) {
            // The upsert's E11000 means held; the insert's, that a document is there.
            c.doc.reset();
            c.refused_insert = c.pending.insert;
            return c.refused_insert;
          },
          "The write met a duplicate key: True when what follows needs round trips "
          "(claim_after_insert_refused, on a thread).")
      .def(
          "claim_after_insert_refused",
          [](me::Locker& l, ClaimInParts& c) {
            c.doc = nogil<std::optional<me::LockDoc>>(
                [&] { return l.claim_after_insert_refused(c.pending); });
            c.refused_insert = false;
          },
          "Round trips: the read, and maybe the upsert, after a refused insert.")
      .def(
          "claim_lands_on_thread",
          [](me::Locker& l, const ClaimInParts& c) { return l.anchors(c.doc); },
          "Whether claim_land makes round trips (a new fence epoch): run it on a thread.")
      .def(
          "claim_land",
          [](me::Locker& l, ClaimInParts& c) {
            return claimed_tuple(
                nogil<std::optional<me::Claimed>>([&] { return l.land_claim(c.pending, c.doc); }));
          },
          "The attempt's outcome: (token, fence) of the hold installed, None when held.")
      .def(
          "claim_drop", [](me::Locker& l, ClaimInParts& c) { l.drop_claim(c.pending); },
          "The write failed or was cancelled: what it may have written is stranded (settle "
          "it with settle_stranded on a thread).")
      .def(
          "settle_stranded", [](me::Locker& l) { nogil<void>([&] { l.settle_stranded(); }); },
          "Round trips: releases a stranded hold now (a failure is logged; retried before the "
          "next claim).")
      .def(
          "refusal_message",
          [](me::Locker& l) { return nogil<std::string>([&] { return l.refusal_message(); }); },
          "Round trips maybe: who holds the lock, for a refused non-blocking acquire.")
      // ---- release ----
      .def(
          "release_begin",
          [](me::Locker& l) {
            auto r = std::make_shared<ReleaseInParts>();
            r->pending = l.begin_release();
            if (!r->pending.on_thread && r->pending.hold)
              r->command = l.release_command(r->pending);
            return r;
          },
          "release() in parts: .on_thread -> release() on a thread; .holds False -> "
          "nothing to send.")
      .def("release_send",
           [](me::Locker& l, ReleaseInParts& r) { return loop_storage(l).start(r.command); })
      .def("release_reply",
           [](me::Locker& l, ReleaseInParts& r, const py::object& reply) {
             l.release_landed(r.pending, PyMongoStorage::matched_of(r.command, reply));
           })
      .def("release_failed", [](me::Locker& l, ReleaseInParts& r) { l.release_failed(r.pending); })
      // ---- touch ----
      .def(
          "touch_begin",
          [](me::Locker& l) -> std::shared_ptr<TouchInParts> {
            std::optional<me::RenewTicket> t = l.begin_touch();
            if (!t) return nullptr;
            auto p = std::make_shared<TouchInParts>();
            p->command = l.renew_command(*t);
            p->ticket = std::move(*t);
            return p;
          },
          "touch() in parts; None: touch() on a thread.")
      .def("touch_send",
           [](me::Locker& l, TouchInParts& t) { return loop_storage(l).start(t.command); })
      .def("touch_reply",
           [](me::Locker& l, TouchInParts& t, const py::object& reply) -> py::object {
             const std::optional<std::int64_t> e =
                 l.finish_touch(t.ticket, PyMongoStorage::matched_of(t.command, reply));
             return e ? datetime_from_ms(*e) : py::none();
           })
      .def("touch_failed", [](me::Locker& l, TouchInParts& t) { l.fail_touch(t.ticket); })
      // ---- reads ----
      .def(
          "read_begin",
          [](me::Locker& l) -> py::object {
            if (l.server_clock().stale()) return py::none();  // its sample: a round trip
            return loop_storage(l).start(me::commands::read(l.options().collection, l.key()));
          },
          "The read of owned()/current()/locked(), a coroutine; None: call those on a "
          "thread.")
      // Without the GIL: with a stale clock sample (clock_stale) they take one, on a
      // thread.
      .def("owned_by",
           [](me::Locker& l, const py::object& reply) {
             std::optional<me::LockDoc> doc = PyMongoStorage::lock_doc_of(reply);
             return nogil<bool>([&] { return l.owned_by(doc); });
           })
      .def("current_of", [](me::Locker& l, const py::object& reply) -> py::object {
        std::optional<me::LockDoc> doc = PyMongoStorage::lock_doc_of(reply);
        const std::optional<me::LockDoc> d =
            nogil<std::optional<me::LockDoc>>([&] { return l.current_of(std::move(doc)); });
        return d ? py::object(to_py(d->raw)) : py::none();
      });
}

}  // namespace mongoelector_py
