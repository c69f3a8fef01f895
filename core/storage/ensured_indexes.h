// Which indexes a client has already ensured, so that createIndexes is sent once per
// (client, collection) rather than once per locker, elector or lease made from it: code
// that makes a locker per claim then pays one round trip per claim. The indexes serve
// clean-up (the TTL index) and status lookups; the protocol never depends on them, so a
// collection dropped while the process runs merely goes without them until a new client
// ensures them again. Thread-safe.
#pragma once

#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "commands.h"

namespace mongoelector {

class EnsuredIndexes {
 public:
  // Runs `create` unless these indexes of `collection` (in `database`) were ensured
  // through this object before; remembers them once `create` returned. A failure is not
  // remembered: the next one tries again. Two lockers made at the same moment may both
  // send it (harmless: createIndexes of an existing index does nothing).
  template <class Create>
  void once(const std::string& database, const std::string& collection,
            const std::vector<commands::IndexSpec>& specs, Create&& create) {
    std::string what = database + '\0' + collection;
    for (const auto& s : specs)
      what += '\0' + s.field + '/' + (s.expire_after_s ? std::to_string(*s.expire_after_s) : "");
    {
      std::lock_guard<std::mutex> g(mu_);
      if (done_.count(what)) return;
    }
    create();
    std::lock_guard<std::mutex> g(mu_);
    done_.insert(what);
  }

 private:
  std::mutex mu_;
  std::set<std::string> done_;
};

}  // namespace mongoelector
