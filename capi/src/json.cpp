#include "json.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "storage/extended_json.h"

namespace mongoelector::capi::json {

std::string cluster_detail(const Elector::ClusterDetail& d) {
  ExtendedJsonWriter w;
  w.document_array("member_detail", d.member_detail);
  if (d.leader) {
    // The leader's payload as a JSON object (null when none), beside the original fields.
    ExtendedJsonWriter leader;
    leader.value("host", d.leader->host);
    leader.value("process_id", d.leader->pid);
    leader.value("uuid", d.leader->uuid);
    leader.json_object("payload", d.leader->payload);
    w.nested("leader", leader);
  } else {
    w.value("leader", Null{});
  }
  w.value("timestamp", d.timestamp);
  return w.json();
}

char* malloc_copy(const std::string& s) {
  auto* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p == nullptr) throw std::bad_alloc();
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  return p;
}

}  // namespace mongoelector::capi::json
