// libFuzzer target: documents as a server may return them. The input is a stream of
// BSON documents (what libmongoc hands the core from a reply: wrong types, missing
// fields, huge values, dates out of range, nested documents and arrays, invalid UTF-8)
// followed by a few control bytes (FuzzedDataProvider reads integers from the end).
//
// For every document:
//   - the core's BSON -> Document conversion (core/storage/mongo_bson.h to_document) and
//     the reply helpers (find_utf8 with a nested path, find_date_time);
//   - LockDoc::from_document and held_at() at edge instants;
//   - the C API's JSON writer (capi/src/json.cpp), whose output must be strict JSON and
//     valid UTF-8, and the round trip Document -> BSON (append_document), which must
//     either succeed or refuse with InvalidArgument.
// Then, as the server's state on an in-memory backend (MemoryStorage, FakeClock): the
// first document is the lock document, the others are node status documents, the
// server's clock reads a fuzzed instant, and a locker and an elector run the protocol
// against that state (acquire, touch, current, release, poll, node_status,
// cluster_detail) -- each either works or throws one of the core's exceptions.
#include <mongoc/mongoc.h>

#include <vector>

#include "election/elector.h"
#include "exceptions.h"
#include "fuzz_common.h"
#include "json.h"
#include "locker.h"
#include "storage/memory_storage.h"
#include "storage/mongo_bson.h"

using namespace mongoelector;

namespace {

void check_json_of(const Document& d) {
  const std::string json = capi::json::to_json(d);
  fuzz::check_json(json.c_str());
}

void convert(const bson_t* b, FuzzedDataProvider& p, std::vector<Document>& docs) {
  Document d = mongo_bson::to_document(b);
  // Reply helpers on the same bytes, with a fuzzed (possibly nested) path.
  const std::string path =
      p.ConsumeBool() ? std::string("value.uuid") : p.ConsumeRandomLengthString(40);
  (void)mongo_bson::find_utf8(b, path.c_str());
  (void)mongo_bson::find_date_time(b, p.ConsumeBool() ? "localTime" : "ts_expire");

  LockDoc lock = LockDoc::from_document(d);
  for (std::int64_t now : {std::numeric_limits<std::int64_t>::min(), std::int64_t{-1},
                           std::int64_t{0}, std::int64_t{1700000000000},
                           std::numeric_limits<std::int64_t>::max(), fuzz::odd_int64(p)}) {
    const bool held = lock.held_at(now);
    if (held) FUZZ_CHECK(lock.locked && lock.ts_expire && lock.ts_expire->ms > now, "");
  }
  check_json_of(d);

  // Back to BSON (what put_status / a replacement would send): works or InvalidArgument.
  mongo_bson::Bson out;
  try {
    mongo_bson::append_document(out.get(), d);
    // Compared as JSON: NaN != NaN as a double, and both spell it null.
    const std::string before = capi::json::to_json(d);
    FUZZ_CHECK(capi::json::to_json(mongo_bson::to_document(out.get())) == before, before);
  } catch (const InvalidArgument&) {
  }
  docs.push_back(std::move(d));
}

// The protocol against a server whose state is `docs` (lock document first).
void run_protocol(const std::vector<Document>& docs, FuzzedDataProvider& p) {
  auto mem = std::make_shared<MemoryStorage>();
  auto clock = std::make_shared<FakeClock>(1700000000000, 1000);
  const std::int64_t server_time =
      p.ConsumeBool() ? fuzz::odd_int64(p)
                      : 1700000000000 + p.ConsumeIntegralInRange<std::int64_t>(-3600000, 3600000);
  mem->set_server_time(server_time);
  const std::string key = "k";
  const std::string uuid = "00000000-0000-4000-8000-000000000003";
  Document lock_doc = docs.empty() ? Document{} : docs.front();
  if (p.ConsumeBool()) lock_doc.set("_id", key);    // make it the key's document
  if (p.ConsumeBool()) lock_doc.set("uuid", uuid);  // ... and ours
  mem->put_lock("elector.locks", lock_doc);
  mem->put_lock("mongolocker", lock_doc);
  for (std::size_t i = 1; i < docs.size(); ++i) {
    Document s = docs[i];
    if (p.ConsumeBool()) s.set("key", key);
    mem->put_status("elector.leader_status", s);
  }

  LockerOptions lo;
  lo.key = key;
  lo.ttl_s = p.ConsumeFloatingPointInRange<double>(0.001, 1e6);
  lo.timeparanoid = p.ConsumeBool();
  Locker locker(mem, lo, clock, fuzz::identity(uuid));
  const int ops = p.ConsumeIntegralInRange<int>(1, 12);
  for (int i = 0; i < ops; ++i) {
    try {
      switch (p.ConsumeIntegralInRange<int>(0, 7)) {
        case 0:
          locker.acquire(false, std::nullopt, 0.25, p.ConsumeBool());
          break;
        case 1:
          (void)locker.try_acquire(p.ConsumeBool());
          break;
        case 2:
          (void)locker.touch();
          break;
        case 3:
          (void)locker.current();
          break;
        case 4:
          (void)locker.owned();
          break;
        case 5:
          locker.release(p.ConsumeBool());
          break;
        case 6:
          check_json_of(Elector::locker_status(locker));
          break;
        case 7:
          clock->advance(p.ConsumeIntegralInRange<std::int64_t>(0, 1000000000));
          break;
      }
    } catch (const Error&) {
      // LockExists, TimeOffsetError, StorageError, ...: a clean error.
    }
  }

  ElectorOptions eo;
  eo.key = key;
  eo.ttl_s = p.ConsumeFloatingPointInRange<double>(0.001, 1e6);
  eo.app_version = "fuzz";
  Elector elector(mem, eo, ElectorCallbacks{}, clock, fuzz::identity(uuid));
  for (int i = 0, n = p.ConsumeIntegralInRange<int>(1, 4); i < n; ++i) {
    elector.poll();  // logs storage errors, never throws them
    clock->advance(p.ConsumeIntegralInRange<std::int64_t>(0, 100000));
  }
  try {
    check_json_of(elector.node_status());
    auto cd = elector.cluster_detail();
    for (const auto& m : cd.member_detail) check_json_of(m);
    if (cd.leader) check_json_of(cd.leader->raw);
  } catch (const Error&) {
  }
  elector.release();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::silence_logs();
  if (size < 4) return 0;
  // Control bytes: the last 16 (or fewer), the BSON stream is the rest.
  const std::size_t ctl = std::min<std::size_t>(16, size / 4);
  FuzzedDataProvider p(data + size - ctl, ctl);
  const std::uint8_t* bson = data;
  std::size_t len = size - ctl;

  std::vector<Document> docs;
  // bson_reader validates each document's framing (length, terminator) as it goes.
  bson_reader_t* reader = bson_reader_new_from_data(bson, len);
  bool eof = false;
  for (int n = 0; n < 8; ++n) {
    const bson_t* b = bson_reader_read(reader, &eof);
    if (b == nullptr) break;
    convert(b, p, docs);
  }
  bson_reader_destroy(reader);
  // A reply value that is not a whole document: bson_init_static refuses bad framing.
  bson_t raw;
  if (bson_init_static(&raw, bson, len)) {
    Document d = mongo_bson::to_document(&raw);
    check_json_of(d);
  }
  run_protocol(docs, p);
  return 0;
}
