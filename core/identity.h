// Who a locker is: the same fields the original writes (uuid4 string, FQDN, pid).
#pragma once

#include <cstdint>
#include <string>

namespace mongoelector {

struct Identity {
  std::string uuid;
  std::string host;
  std::int64_t pid = 0;

  // A fresh uuid4, this host's FQDN, this process's pid.
  static Identity generate();
};

std::string new_uuid4();
std::string fqdn();

// Checks a lock key: non-empty, valid UTF-8, no NUL, at most kMaxKeyBytes bytes.
// Throws InvalidArgument with a message naming the problem.
constexpr std::size_t kMaxKeyBytes = 1024;
void validate_key(const std::string& key);
// Checks a collection name the way MongoDB does (non-empty, no NUL, no '$').
void validate_collection(const std::string& name);

}  // namespace mongoelector
