#include "identity.h"

#include <netdb.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "exceptions.h"
#include "utf8.h"

namespace mongoelector {

// Every id comes from the kernel (getrandom(2)): no generator state in the process, so
// processes forked from one parent never repeat each other's ids (a seeded PRNG copied
// by fork() would: the child then "owned" the parent's lock).
std::string new_uuid4() {
  unsigned char bytes[16];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      throw Error(std::string("getrandom failed: ") + std::strerror(errno));
    }
  }
  bytes[6] = static_cast<unsigned char>((bytes[6] & 0x0F) | 0x40);  // version 4
  bytes[8] = static_cast<unsigned char>((bytes[8] & 0x3F) | 0x80);  // RFC 4122 variant
  char buf[37];
  std::snprintf(buf, sizeof buf,
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", bytes[0],
                bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8],
                bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]);
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
  // The name lookup may ask DNS: once per process, not once per locker.
  static const std::string host = fqdn();
  // getpid() now, not cached: a fork's child is another process.
  return Identity{new_uuid4(), host, static_cast<std::int64_t>(getpid())};
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
