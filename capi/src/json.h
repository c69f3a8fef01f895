// JSON handed to C callers: node status and cluster detail in MongoDB's relaxed Extended
// JSON, written by libbson (core/storage/extended_json.h).
#pragma once

#include <string>

#include "election/elector.h"

namespace mongoelector::capi::json {

// cluster_detail as the original shapes it: {member_detail, leader, timestamp}.
std::string cluster_detail(const Elector::ClusterDetail& d);

// A malloc'd copy for the caller to release with mongoelector_free(); throws
// std::bad_alloc when malloc fails.
char* malloc_copy(const std::string& s);

}  // namespace mongoelector::capi::json
