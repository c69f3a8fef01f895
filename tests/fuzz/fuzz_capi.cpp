// libFuzzer target: the C API's inputs. Every input must give a status code (never a
// crash, a hang, a leak, or MONGOELECTOR_ERR_INTERNAL), and every JSON or string the
// library hands back must be well-formed.
//
// One byte (FuzzedDataProvider takes integers from the end of the input) picks a mode:
//   0  mongoelector_client_new(uri, database) with fuzzed strings. Construction only: it
//      parses the URI and never connects (URIs whose construction would do I/O are
//      skipped: mongodb+srv:// resolves DNS, tls*File options read files).
//   1  mongoelector_locker_new / mongoelector_elector_new with fuzzed keys and options
//      structs (version, ttl incl. NaN/inf/huge, collection names, flags, app_version) on
//      a client whose URI is a unix socket that does not exist: invalid input fails
//      before any I/O, valid input fails fast with MONGOELECTOR_ERR_UNAVAILABLE.
//   2  a locker handle on an in-memory server (MemoryStorage) whose lock document and
//      clock the fuzzer writes, then a fuzzed sequence of mongoelector_locker_* calls
//      (acquire/touch/release/locked/owned/fence/uuid/verify_time/current/cancel, with
//      fuzzed doubles and NULL out pointers). Checks: fencing tokens strictly increase
//      while nobody but the library writes the fence; lock_info strings stay
//      NUL-terminated.
//   3  an elector handle on MemoryStorage with fuzzed status documents of other nodes:
//      poll/release/is_leader/... and the JSON of node_status and cluster_detail.
// Handles for modes 2 and 3 are built around the core objects the way
// mongoelector_locker_new / mongoelector_elector_new build them, but on MemoryStorage
// and a FakeClock so that nothing waits or touches the network.
#include <mongoc/mongoc.h>

#include <algorithm>
#include <cctype>
#include <vector>

#include "election/elector.h"
#include "exceptions.h"
#include "fuzz_common.h"
#include "handles.h"
#include "locker.h"
#include "storage/memory_storage.h"

using namespace mongoelector;

namespace {

constexpr const char* kOfflineUri =
    "mongodb://%2Ftmp%2Fmongoelector-fuzz-no-such.sock/"
    "?serverSelectionTimeoutMS=1&connectTimeoutMS=1&socketTimeoutMS=1";

// True when constructing a client from `uri` does no I/O (see the header comment).
bool construction_is_offline(const std::string& uri) {
  bson_error_t error;
  mongoc_uri_t* u = mongoc_uri_new_with_error(uri.c_str(), &error);
  if (u == nullptr) return true;  // refused by the parser: no I/O either
  bool offline = mongoc_uri_get_srv_hostname(u) == nullptr;
  bson_iter_t it;
  for (const bson_t* opts : {mongoc_uri_get_options(u), mongoc_uri_get_credentials(u)}) {
    if (opts == nullptr || !bson_iter_init(&it, opts)) continue;
    while (bson_iter_next(&it)) {
      std::string k = bson_iter_key(&it);
      std::transform(k.begin(), k.end(), k.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      if (k.find("file") != std::string::npos) offline = false;
    }
  }
  // Any "+srv" spelling the parser might accept later is skipped as well.
  std::string lower = uri;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (lower.find("srv") != std::string::npos) offline = false;
  mongoc_uri_destroy(u);
  return offline;
}

std::string fuzz_string(FuzzedDataProvider& p, std::size_t max) {
  return p.ConsumeRandomLengthString(max);
}

// NULL, a fuzzed string, or one of the usual values.
const char* maybe_string(FuzzedDataProvider& p, std::string& storage, std::size_t max,
                         const char* usual) {
  switch (p.ConsumeIntegralInRange<int>(0, 5)) {
    case 0:
      return nullptr;
    case 1:
      return usual;
    case 2:
      storage.assign(p.ConsumeIntegralInRange<std::size_t>(0, 2000), 'k');
      return storage.c_str();
    default:
      storage = fuzz_string(p, max);
      return storage.c_str();
  }
}

// ------------------------------------------------------------------- mode 0 ---

void client_new(FuzzedDataProvider& p) {
  std::string uri = fuzz_string(p, 4096);
  std::string db = fuzz_string(p, 256);
  if (p.ConsumeBool()) uri = "mongodb://127.0.0.1:27017/" + uri;
  if (!construction_is_offline(uri)) return;
  mongoelector_client* c = nullptr;
  const int nulls = p.ConsumeIntegralInRange<int>(0, 7);
  mongoelector_status st =
      mongoelector_client_new(nulls == 1 ? nullptr : uri.c_str(), nulls == 2 ? nullptr : db.c_str(),
                              nulls == 3 ? nullptr : &c);
  fuzz::check_status(st);
  if (st == MONGOELECTOR_OK) {
    FUZZ_CHECK(c != nullptr, uri);
  } else {
    FUZZ_CHECK(c == nullptr, uri);  // out written only on success
  }
  mongoelector_client_free(c);
}

// ------------------------------------------------------------------- mode 1 ---

mongoelector_client* offline_client() {
  static mongoelector_client* c = [] {
    mongoelector_client* out = nullptr;
    if (mongoelector_client_new(kOfflineUri, "fuzz", &out) != MONGOELECTOR_OK) std::abort();
    return out;
  }();
  return c;
}

std::uint32_t fuzz_version(FuzzedDataProvider& p, std::uint32_t latest) {
  switch (p.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      return p.ConsumeIntegral<std::uint32_t>();
    case 1:
      return 0;
    default:
      return latest;
  }
}

void new_handles(FuzzedDataProvider& p) {
  std::string key_s, coll_s, app_s;
  const char* key = maybe_string(p, key_s, 1100, "k");
  if (p.ConsumeBool()) {
    mongoelector_locker_options o;
    mongoelector_locker_options_init(&o);
    o.version = fuzz_version(p, MONGOELECTOR_LOCKER_OPTIONS_VERSION);
    o.collection = maybe_string(p, coll_s, 300, "mongolocker");
    o.ttl_seconds = fuzz::odd_double(p);
    o.timeparanoid = p.ConsumeIntegral<int>();
    o.max_offset_seconds = fuzz::odd_double(p);
    o.delete_on_release = p.ConsumeIntegral<int>();
    o.allow_unsafe_server = p.ConsumeIntegral<int>();
    mongoelector_locker* l = nullptr;
    mongoelector_status st =
        mongoelector_locker_new(offline_client(), key, p.ConsumeBool() ? &o : nullptr, &l);
    fuzz::check_status(st);
    FUZZ_CHECK(st != MONGOELECTOR_OK && l == nullptr, "a locker without a server");
  } else {
    mongoelector_elector_options o;
    mongoelector_elector_options_init(&o);
    o.version = fuzz_version(p, MONGOELECTOR_ELECTOR_OPTIONS_VERSION);
    o.ttl_seconds = fuzz::odd_double(p);
    o.report_status = p.ConsumeIntegral<int>();
    o.app_version = maybe_string(p, app_s, 300, "1.2.3");
    o.allow_unsafe_server = p.ConsumeIntegral<int>();
    mongoelector_elector* e = nullptr;
    mongoelector_status st =
        mongoelector_elector_new(offline_client(), key, p.ConsumeBool() ? &o : nullptr, &e);
    fuzz::check_status(st);
    FUZZ_CHECK(st != MONGOELECTOR_OK && e == nullptr, "an elector without a server");
  }
}

// ------------------------------------------------------------------- mode 2 ---

// A lock document as another writer (an original node, a shell, a broken client) might
// have left it: each field absent, of the right type with an edge value, or of a wrong
// type. With `with_fence` false it never carries a fence (an original node's document).
Document fuzz_lock_doc(FuzzedDataProvider& p, const std::string& key, const std::string& our_uuid,
                       bool with_fence) {
  Document d;
  d.set("_id", p.ConsumeIntegralInRange<int>(0, 7) == 0 ? fuzz_string(p, 64) : key);
  auto field = [&](const char* name, auto right) {
    switch (p.ConsumeIntegralInRange<int>(0, 7)) {
      case 0:
        return;  // absent
      case 1:
        d.set(name, Null{});
        return;
      case 2:
        d.set(name, fuzz::odd_double(p));
        return;
      case 3:
        d.set(name, fuzz_string(p, 400));
        return;
      case 4:
        d.set(name, DateTime{fuzz::odd_int64(p)});
        return;
      case 5:
        d.set(name, p.ConsumeBool());
        return;
      default:
        right();
        return;
    }
  };
  field("locked", [&] { d.set("locked", p.ConsumeIntegralInRange<int>(0, 3) != 0); });
  field("host", [&] { d.set("host", fuzz_string(p, 600)); });
  field("uuid", [&] { d.set("uuid", p.ConsumeBool() ? our_uuid : fuzz_string(p, 100)); });
  field("pid", [&] { d.set("pid", fuzz::odd_int64(p)); });
  field("ts_created", [&] { d.set("ts_created", DateTime{fuzz::odd_int64(p)}); });
  field("ts_expire", [&] {
    d.set("ts_expire",
          DateTime{p.ConsumeBool() ? fuzz::odd_int64(p)
                                   : 1700000000000 + p.ConsumeIntegralInRange<std::int64_t>(
                                                         -1000000, 1000000)});
  });
  if (with_fence) {
    field("fence", [&] { d.set("fence", fuzz::odd_int64(p)); });
  } else {
    d.erase("fence");
  }
  return d;
}

std::int64_t fuzz_server_time(FuzzedDataProvider& p) {
  if (p.ConsumeIntegralInRange<int>(0, 3) == 0) return fuzz::odd_int64(p);
  return 1700000000000 + p.ConsumeIntegralInRange<std::int64_t>(-3600000, 3600000);
}

void locker_calls(FuzzedDataProvider& p) {
  auto mem = std::make_shared<MemoryStorage>();
  const std::int64_t wall = 1700000000000 + p.ConsumeIntegralInRange<std::int64_t>(-600000, 600000);
  auto clock = std::make_shared<FakeClock>(wall, 1000);
  mem->set_server_time(fuzz_server_time(p));
  LockerOptions opts;
  opts.key = p.ConsumeBool() ? std::string("k") : fuzz_string(p, 80);
  opts.ttl_s =
      p.ConsumeBool() ? p.ConsumeFloatingPointInRange<double>(0.001, 1000) : fuzz::odd_double(p);
  opts.timeparanoid = p.ConsumeBool();
  opts.maxoffset_s = p.ConsumeBool() ? 0.5 : fuzz::odd_double(p);
  opts.delete_on_release = p.ConsumeBool();
  if (p.ConsumeIntegralInRange<int>(0, 7) == 0) {  // a storage that cannot bound its calls
    // Up to what MongoStorage can report: 3 x (2^31-1) ms, doubled with retries, + pool wait.
    mem->set_call_bound_ms(p.ConsumeIntegralInRange<std::int64_t>(-1, 13000000000));
    opts.allow_unbounded_calls = p.ConsumeBool();
  }
  const std::string our_uuid = "00000000-0000-4000-8000-000000000001";
  // Tokens must strictly increase across deletions (TTL monitor) and fence-less
  // documents (an original node's). A fence the fuzzer writes was not issued through the
  // epoch store, so once one was written the check is off (the rest still runs).
  bool tampered = false;
  if (p.ConsumeBool()) {
    const bool fenced = p.ConsumeBool();
    mem->put_lock(opts.collection, fuzz_lock_doc(p, opts.key, our_uuid, fenced));
    tampered = fenced;
  }

  auto* h = new mongoelector_locker;
  try {
    h->locker = std::make_unique<Locker>(mem, opts, clock, fuzz::identity(our_uuid));
  } catch (const InvalidArgument&) {
    delete h;
    return;
  }
  std::int64_t last_fence = 0;
  bool acquired_once = false;
  for (int i = 0, n = p.ConsumeIntegralInRange<int>(1, 24); i < n && p.remaining_bytes() > 0; ++i) {
    mongoelector_status st = MONGOELECTOR_OK;
    switch (p.ConsumeIntegralInRange<int>(0, 15)) {
      case 0:
      case 1: {
        const int blocking = p.ConsumeIntegralInRange<int>(0, 1);
        double timeout = p.ConsumeBool() ? -1.0 : fuzz::odd_double(p);
        double step = p.ConsumeBool() ? 0.25 : fuzz::odd_double(p);
        // A blocking wait on a lock that never expires only ends by its timeout. The
        // FakeClock makes each sleep instant, but the wait still runs one iteration per
        // step and per 100 ms slice: cap both (longer waits are cancelled up front).
        const bool bounded = std::isfinite(timeout) && timeout >= 0 && timeout <= 20 &&
                             std::isfinite(step) && step > 0 &&
                             timeout / std::max(step, 0.001) < 100;
        if (blocking && !bounded) mongoelector_locker_cancel(h);
        std::int64_t fence = -7;
        const bool want_fence = p.ConsumeBool();
        if (std::getenv("FUZZ_TRACE"))
          std::fprintf(stderr, "acquire blocking=%d timeout=%g step=%g bounded=%d\n", blocking,
                       timeout, step, bounded);
        st = mongoelector_locker_acquire(h, blocking, timeout, step, p.ConsumeBool(),
                                         want_fence ? &fence : nullptr);
        if (st == MONGOELECTOR_OK) {
          if (!want_fence) FUZZ_CHECK(mongoelector_locker_fence(h, &fence) == MONGOELECTOR_OK, "");
          FUZZ_CHECK(fence > 0, std::to_string(fence));
          if (acquired_once && !tampered)
            FUZZ_CHECK(fence > last_fence,
                       std::to_string(fence) + " after " + std::to_string(last_fence));
          acquired_once = true;
          last_fence = fence;
        } else if (want_fence && st != MONGOELECTOR_OK) {
          FUZZ_CHECK(fence == -7, "fence_out written on failure");
        }
        break;
      }
      case 2:
        st = mongoelector_locker_release(h, p.ConsumeBool());
        break;
      case 3: {
        int renewed = -1;
        std::int64_t expire = -1;
        st = mongoelector_locker_touch(h, p.ConsumeBool() ? &renewed : nullptr,
                                       p.ConsumeBool() ? &expire : nullptr);
        break;
      }
      case 4: {
        int out = -1;
        st = mongoelector_locker_locked(h, p.ConsumeBool() ? &out : nullptr);
        if (st == MONGOELECTOR_OK) FUZZ_CHECK(out == 0 || out == 1, "");
        break;
      }
      case 5: {
        int out = -1;
        st = mongoelector_locker_owned(h, p.ConsumeBool() ? &out : nullptr);
        if (st == MONGOELECTOR_OK) FUZZ_CHECK(out == 0 || out == 1, "");
        break;
      }
      case 6: {
        std::int64_t out = -1;
        st = mongoelector_locker_fence(h, p.ConsumeBool() ? &out : nullptr);
        break;
      }
      case 7: {
        const char* out = nullptr;
        st = mongoelector_locker_uuid(h, p.ConsumeBool() ? &out : nullptr);
        if (st == MONGOELECTOR_OK) FUZZ_CHECK(out != nullptr && our_uuid == out, "");
        break;
      }
      case 8: {
        double off = 0;
        st = mongoelector_locker_verify_time(h, p.ConsumeBool() ? &off : nullptr);
        break;
      }
      case 9: {
        mongoelector_lock_info info;
        std::memset(&info, 0x5a, sizeof info);  // no terminator unless the library writes one
        int found = -1;
        st = mongoelector_locker_current(h, p.ConsumeBool() ? &info : nullptr,
                                         p.ConsumeBool() ? &found : nullptr);
        if (st == MONGOELECTOR_OK && found == 1) {
          FUZZ_CHECK(strnlen(info.uuid, sizeof info.uuid) < sizeof info.uuid, "");
          FUZZ_CHECK(strnlen(info.host, sizeof info.host) < sizeof info.host, "");
        }
        break;
      }
      case 10:
        st = mongoelector_locker_cancel(h);
        break;
      case 11: {  // someone else writes the document
        const bool fenced = p.ConsumeBool();
        mem->put_lock(opts.collection, fuzz_lock_doc(p, opts.key, our_uuid, fenced));
        tampered = tampered || fenced;
        break;
      }
      case 12:
        mem->delete_lock(opts.collection, opts.key);
        break;  // TTL monitor
      case 13:
        clock->advance(p.ConsumeIntegralInRange<std::int64_t>(0, 4000000000));
        break;
      case 14:
        mem->set_unavailable(p.ConsumeBool());
        break;
      case 15:
        mem->set_server_time(fuzz_server_time(p));
        break;
    }
    fuzz::check_status(st);
  }
  mongoelector_locker_free(h);
}

// ------------------------------------------------------------------- mode 3 ---

Document fuzz_status_doc(FuzzedDataProvider& p, const std::string& key) {
  Document d;
  for (int i = 0, n = p.ConsumeIntegralInRange<int>(0, 12); i < n; ++i) {
    std::string name;
    switch (p.ConsumeIntegralInRange<int>(0, 9)) {
      case 0:
        name = "_id";
        break;
      case 1:
        name = "key";
        break;
      case 2:
        name = "timestamp";
        break;
      case 3:
        name = "host";
        break;
      case 4:
        name = "is_leader";
        break;
      default:
        name = fuzz_string(p, 40);
        break;
    }
    switch (p.ConsumeIntegralInRange<int>(0, 6)) {
      case 0:
        d.set(name, Null{});
        break;
      case 1:
        d.set(name, p.ConsumeBool());
        break;
      case 2:
        d.set(name, fuzz::odd_int64(p));
        break;
      case 3:
        d.set(name, fuzz::odd_double(p));
        break;
      case 4:
        d.set(name, DateTime{fuzz::odd_int64(p)});
        break;
      default:
        d.set(name, fuzz_string(p, 300));
        break;
    }
  }
  if (p.ConsumeIntegralInRange<int>(0, 3) != 0) d.set("key", key);
  return d;
}

void elector_calls(FuzzedDataProvider& p) {
  auto mem = std::make_shared<MemoryStorage>();
  auto clock = std::make_shared<FakeClock>(1700000000000, 1000);
  mem->set_server_time(fuzz_server_time(p));
  ElectorOptions opts;
  opts.key = p.ConsumeBool() ? std::string("k") : fuzz_string(p, 80);
  opts.ttl_s =
      p.ConsumeBool() ? p.ConsumeFloatingPointInRange<double>(0.001, 1000) : fuzz::odd_double(p);
  opts.report_status = p.ConsumeBool();
  if (p.ConsumeBool()) opts.app_version = fuzz_string(p, 200);
  if (p.ConsumeIntegralInRange<int>(0, 7) == 0) {  // a storage that cannot bound its calls
    // Up to what MongoStorage can report: 3 x (2^31-1) ms, doubled with retries, + pool wait.
    mem->set_call_bound_ms(p.ConsumeIntegralInRange<std::int64_t>(-1, 13000000000));
    opts.allow_unbounded_calls = p.ConsumeBool();
  }
  const std::string our_uuid = "00000000-0000-4000-8000-000000000002";
  if (p.ConsumeBool())
    mem->put_lock(opts.lock_collection, fuzz_lock_doc(p, opts.key, our_uuid, true));
  for (int i = 0, n = p.ConsumeIntegralInRange<int>(0, 6); i < n; ++i)
    mem->put_status(opts.status_collection, fuzz_status_doc(p, opts.key));

  auto* h = new mongoelector_elector;
  try {
    h->elector = std::make_unique<Elector>(mem, opts, ElectorCallbacks{}, clock,
                                           fuzz::identity(our_uuid, fuzz_string(p, 300)));
  } catch (const InvalidArgument&) {
    delete h;
    return;
  }
  bool down = false;
  for (int i = 0, n = p.ConsumeIntegralInRange<int>(1, 16); i < n && p.remaining_bytes() > 0; ++i) {
    mongoelector_status st = MONGOELECTOR_OK;
    switch (p.ConsumeIntegralInRange<int>(0, 12)) {
      case 0:
      case 1:
        st = mongoelector_elector_poll(h);
        break;
      case 2:
        st = mongoelector_elector_release(h);
        break;
      case 3: {
        int out = -1;
        st = mongoelector_elector_is_leader(h, p.ConsumeBool() ? &out : nullptr);
        break;
      }
      case 4: {
        double out = 0;
        st = mongoelector_elector_poll_wait(h, p.ConsumeBool() ? &out : nullptr);
        break;
      }
      case 5: {
        std::int64_t out = 0;
        st = mongoelector_elector_fence(h, p.ConsumeBool() ? &out : nullptr);
        break;
      }
      case 6:
      case 7: {
        char* json = nullptr;
        st = p.ConsumeBool()
                 ? mongoelector_elector_node_status(h, p.ConsumeBool() ? &json : nullptr)
                 : mongoelector_elector_cluster_detail(h, p.ConsumeBool() ? &json : nullptr);
        if (st == MONGOELECTOR_OK) fuzz::check_json(json);
        mongoelector_free(json);
        break;
      }
      case 8:  // another node reports (the harness's write, not the library's)
        if (!down) mem->put_status(opts.status_collection, fuzz_status_doc(p, opts.key));
        break;
      case 9:
        mem->put_lock(opts.lock_collection, fuzz_lock_doc(p, opts.key, our_uuid, true));
        break;
      case 10:
        clock->advance(p.ConsumeIntegralInRange<std::int64_t>(0, 4000000000));
        break;
      case 11:
        down = p.ConsumeBool();
        mem->set_unavailable(down);
        break;
      case 12:
        mem->set_server_time(fuzz_server_time(p));
        break;
    }
    fuzz::check_status(st);
  }
  mongoelector_elector_free(h);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::silence_logs();
  FuzzedDataProvider p(data, size);
  switch (p.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      client_new(p);
      break;
    case 1:
      new_handles(p);
      break;
    case 2:
      locker_calls(p);
      break;
    case 3:
      elector_calls(p);
      break;
  }
  return 0;
}
