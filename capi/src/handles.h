// The structs behind the opaque handles, and their validation.
//
// Each handle starts with a magic number that *_free overwrites before releasing the
// memory, so a call on a freed handle usually finds the poison (or a reused block with
// another value) and answers MONGOELECTOR_ERR_INVALID_ARGUMENT. This is best effort: once
// freed, the memory may be reused by anything, and reading it is undefined behaviour.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "election/elector.h"
#include "exceptions.h"
#include "guard.h"
#include "locker.h"
#include "storage/client.h"

namespace mongoelector::capi {

constexpr std::uint64_t kClientMagic = 0x6d65436c69656e74ULL;   // "meClient"
constexpr std::uint64_t kLockerMagic = 0x6d654c6f636b6572ULL;   // "meLocker"
constexpr std::uint64_t kElectorMagic = 0x6d65456c6563746fULL;  // "meElecto"
constexpr std::uint64_t kCancelMagic = 0x6d6543616e63656cULL;   // "meCancel"
constexpr std::uint64_t kFreedMagic = 0x6672656564646561ULL;    // "freeddea"

}  // namespace mongoelector::capi

struct mongoelector_client {
  std::uint64_t magic = mongoelector::capi::kClientMagic;
  // The backend chosen by the URI (storage/client.h: MongoDB pools or one SQLite
  // connection), shared by every locker and elector made from this handle; each of
  // them holds a reference, so freeing the handle first is safe.
  std::shared_ptr<mongoelector::StorageClient> client;
  std::mutex info_mu;
  std::shared_ptr<mongoelector::Storage> info_storage;  // server_info(), made on first use
  std::string server_name;
  std::string server_version;
  bool info_known = false;  // server_name/version hold an answer (server_info_copy reuses it)
};

struct mongoelector_locker {
  std::uint64_t magic = mongoelector::capi::kLockerMagic;
  std::shared_ptr<mongoelector::Storage> storage;
  std::unique_ptr<mongoelector::Locker> locker;
  // Serialises every call except cancel, which must get through while acquire blocks.
  std::mutex mu;
  // Set by mongoelector_locker_cancel(); consumed by the next blocking acquire.
  std::atomic<bool> cancel_requested{false};
  // A live mongoelector_lease keeps this locker's lock alive (one at a time: lease.cpp).
  std::atomic<bool> has_lease{false};
};

struct mongoelector_cancel_token {
  std::uint64_t magic = mongoelector::capi::kCancelMagic;
  std::atomic<bool> cancelled{false};
};

struct mongoelector_elector {
  std::uint64_t magic = mongoelector::capi::kElectorMagic;
  std::shared_ptr<mongoelector::Storage> storage;
  // No handle mutex: Elector is thread-safe, and its callbacks may call stop() or
  // release() on this same handle from inside poll().
  std::unique_ptr<mongoelector::Elector> elector;
  // Shared with the callback wrappers and the calls that may run callbacks (elector.cpp),
  // so that a free from inside a callback can be completed safely on another thread.
  struct Shared {
    std::atomic<bool> callbacks_enabled{true};  // cleared by free: no callback starts after
    std::atomic<int> callbacks_running{0};      // user callbacks inside fn() right now
    std::atomic<int> calls_in_flight{0};        // poll/release/stop running on this handle
  };
  std::shared_ptr<Shared> shared = std::make_shared<Shared>();
};

namespace mongoelector::capi {

// `*h`, or InvalidArgument unless `h` is a live handle whose magic is `magic` (`kind`
// names it in the message: "observer handle is NULL").
template <class H>
H& checked_handle(H* h, std::uint64_t magic, const char* kind) {
  if (h == nullptr) throw InvalidArgument(std::string(kind) + " handle is NULL");
  if (h->magic != magic) {
    const bool vowel = std::string("aeiou").find(kind[0]) != std::string::npos;
    throw InvalidArgument(std::string(kind) + " handle is not valid (already freed, or not " +
                          (vowel ? "an " : "a ") + kind + ")");
  }
  return *h;
}

// Throw InvalidArgument unless `h` is a live handle of the right kind.
mongoelector_client& checked(mongoelector_client* h);
mongoelector_locker& checked(mongoelector_locker* h);
mongoelector_elector& checked(mongoelector_elector* h);
mongoelector_cancel_token& checked(mongoelector_cancel_token* h);
mongoelector_partitioner& checked(mongoelector_partitioner* h);  // partitioner.cpp

// The shape of every accessor: check the handle and the out pointer, then write what
// `read(handle)` returns. Exceptions become status codes (guard).
template <class Handle, class Out, class Read>
mongoelector_status read_out(Handle* handle, Out* out, Read&& read) noexcept {
  return guard([&] {
    auto& h = checked(handle);
    require(out != nullptr, "out is NULL");
    *out = read(h);
  });
}

// Runs `stop(*h)` and deletes `h`, letting no exception out: the end of a handle whose
// *_free has no status to return, or that is completed on another thread.
template <class H, class Stop>
void stop_and_delete(H* h, Stop&& stop) noexcept {
  try {
    stop(*h);
  } catch (...) {
  }
  try {
    delete h;
  } catch (...) {
  }
}

// A key given by C: non-NULL and valid (core's validate_key: non-empty, UTF-8, <= 1024).
std::string checked_key(const char* key);
// An options struct's version field: 1..latest (fields are only ever appended), else
// InvalidArgument naming the init function to use.
void check_options_version(std::uint32_t version, std::uint32_t latest, const char* kind);
// The same for a 1.1 struct whose init is `init_name`.
void check_struct_version(std::uint32_t version, std::uint32_t latest, const char* init_name);

// A mongoelector_acquire_options, checked (the fields of its version).
struct AcquireArgs {
  bool blocking = true;
  std::optional<double> timeout_s;  // none: wait forever
  double step_s = 0.25;
  bool force = false;
  mongoelector_cancel_token* cancel = nullptr;  // borrowed for the call
};
AcquireArgs to_acquire_args(const mongoelector_acquire_options* options);
// The core cancel function of args.cancel (empty without a token); throws Cancelled at
// once when the token is already cancelled.
CancelFn cancel_fn(const AcquireArgs& args);

// op_timeout_seconds of a 1.1 config: 0 means the default for the ttl.
std::int64_t op_timeout_ms(double op_timeout_s, double ttl_s);

}  // namespace mongoelector::capi
