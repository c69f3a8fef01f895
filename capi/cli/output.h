// Output of the command: messages on stderr, times as text, JSON strings.
#pragma once

#include <cstdint>
#include <string>

namespace cli {

extern const char* g_prog;  // "mongoelector"

// "mongoelector: <text>" on stderr (one write, so lines of concurrent processes and of
// the library's threads do not interleave).
void msg(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

double mono_s();                 // CLOCK_MONOTONIC, seconds
int64_t wall_ms();               // CLOCK_REALTIME, ms since the epoch
std::string iso_ms(int64_t ms);  // "2024-05-01 12:00:03.123 UTC"

// The JSON string literal for `s` (status --json).
std::string json_quote(const std::string& s);

}  // namespace cli
