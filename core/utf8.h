// UTF-8 validity (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
#pragma once

#include <cstddef>
#include <string>

namespace mongoelector {

// Length of the valid UTF-8 sequence starting at s[i] (i < s.size()), 0 if invalid.
std::size_t utf8_sequence_length(const std::string& s, std::size_t i);
bool is_valid_utf8(const std::string& s);

}  // namespace mongoelector
