// Handle validation and the per-handle storage timeouts.
#include "handles.h"

#include <algorithm>
#include <cmath>

#include "exceptions.h"
#include "identity.h"
#include "storage/mongo_storage.h"

namespace mongoelector::capi {

namespace {
template <class H>
H& checked_handle(H* h, std::uint64_t magic, const char* kind) {
  if (h == nullptr) throw InvalidArgument(std::string(kind) + " handle is NULL");
  if (h->magic != magic) {
    throw InvalidArgument(std::string(kind) +
                          " handle is not valid (already freed, or not a " + kind + ")");
  }
  return *h;
}
}  // namespace

mongoelector_client& checked(mongoelector_client* h) {
  return checked_handle(h, kClientMagic, "client");
}
mongoelector_locker& checked(mongoelector_locker* h) {
  return checked_handle(h, kLockerMagic, "locker");
}
mongoelector_elector& checked(mongoelector_elector* h) {
  return checked_handle(h, kElectorMagic, "elector");
}

void check_options_version(std::uint32_t version, std::uint32_t latest, const char* kind) {
  if (version == 0 || version > latest) {
    throw InvalidArgument(std::string(kind) + " options version " + std::to_string(version) +
                          " is not supported (this library knows 1.." + std::to_string(latest) +
                          "); initialise options with mongoelector_" + kind +
                          "_options_init()");
  }
}

std::string checked_key(const char* key) {
  require(key != nullptr, "key is NULL");
  std::string k(key);
  validate_key(k);
  return k;
}

}  // namespace mongoelector::capi
