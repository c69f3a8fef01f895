#include "identity.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <random>

#include "errors.h"

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

namespace {
bool valid_utf8(const std::string& s) {
  std::size_t i = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  while (i < s.size()) {
    unsigned char c = p[i];
    std::size_t n;
    std::uint32_t cp;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xE0) == 0xC0) { n = 1; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { n = 2; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { n = 3; cp = c & 0x07; }
    else return false;
    if (i + n >= s.size()) return false;  // truncated sequence
    for (std::size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size() || (p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
      return false;
    i += n + 1;
  }
  return true;
}
}  // namespace

void validate_key(const std::string& key) {
  if (key.empty()) throw InvalidArgument("key must be a non-empty string");
  if (key.size() > kMaxKeyBytes)
    throw InvalidArgument("key is " + std::to_string(key.size()) + " bytes; at most " +
                          std::to_string(kMaxKeyBytes) + " are allowed");
  if (key.find('\0') != std::string::npos) throw InvalidArgument("key must not contain NUL");
  if (!valid_utf8(key)) throw InvalidArgument("key must be valid UTF-8");
}

void validate_collection(const std::string& name) {
  if (name.empty()) throw InvalidArgument("collection name must be non-empty");
  if (name.find('\0') != std::string::npos || name.find('$') != std::string::npos)
    throw InvalidArgument("collection name must not contain NUL or '$': " + name);
  if (name.size() > 200) throw InvalidArgument("collection name is too long");
  if (!valid_utf8(name)) throw InvalidArgument("collection name must be valid UTF-8");
}

}  // namespace mongoelector
