// TTL warnings seen through mongoelector's log sink since the process started
// (test_main_env.cpp installs the sink).
#pragma once

#include <atomic>

namespace mongoelector::storage_test {

extern std::atomic<int> g_ttl_warnings;

}  // namespace mongoelector::storage_test
