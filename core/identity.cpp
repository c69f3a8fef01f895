#include "identity.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <random>

#include "errors.h"
#include "utf8.h"

namespace mongoelector {

std::string new_uuid4() {
  static thread_local std::mt19937_64 rng{std::random_device{}() ^
                                          (static_cast<std::uint64_t>(getpid()) << 32)};
  std::uint64_t hi = rng(), lo = rng();
  hi = (hi & 0xFFFFFFFFFFFF0FFFULL) | 0x0000000000004000ULL;  // version 4
  lo = (lo & 0x3FFFFFFFFFFFFFFFULL) | 0x8000000000000000ULL;  // RFC 4122 variant
  char buf[37];
  std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx",
                static_cast<unsigned>(hi >> 32), static_cast<unsigned>((hi >> 16) & 0xFFFF),
                static_cast<unsigned>(hi & 0xFFFF), static_cast<unsigned>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xFFFFFFFFFFFFULL));
  return buf;
}

std::string fqdn() {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) return "localhost";
  addrinfo hints{};
  hints.ai_flags = AI_CANONNAME;
  hints.ai_family = AF_UNSPEC;
  addrinfo* res = nullptr;
  std::string name = host;
  if (getaddrinfo(host, nullptr, &hints, &res) == 0 && res) {
    if (res->ai_canonname && *res->ai_canonname) name = res->ai_canonname;
    freeaddrinfo(res);
  }
  return name;
}

Identity Identity::generate() {
  return Identity{new_uuid4(), fqdn(), static_cast<std::int64_t>(getpid())};
}


void validate_key(const std::string& key) {
  if (key.empty()) throw InvalidArgument("key must be a non-empty string");
  if (key.size() > kMaxKeyBytes)
    throw InvalidArgument("key is " + std::to_string(key.size()) + " bytes; at most " +
                          std::to_string(kMaxKeyBytes) + " are allowed");
  if (key.find('\0') != std::string::npos) throw InvalidArgument("key must not contain NUL");
  if (!is_valid_utf8(key)) throw InvalidArgument("key must be valid UTF-8");
}

void validate_collection(const std::string& name) {
  if (name.empty()) throw InvalidArgument("collection name must be non-empty");
  if (name.find('\0') != std::string::npos || name.find('$') != std::string::npos)
    throw InvalidArgument("collection name must not contain NUL or '$': " + name);
  if (name.size() > 200) throw InvalidArgument("collection name is too long");
  if (!is_valid_utf8(name)) throw InvalidArgument("collection name must be valid UTF-8");
}

}  // namespace mongoelector
