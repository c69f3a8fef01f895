#include "utf8.h"

#include <bson/bson.h>

namespace mongoelector {

// libbson's validator, which refuses overlong forms, surrogates and code points above
// U+10FFFF. Its allow_null mode also accepts C0 80 (modified UTF-8's NUL), which RFC 3629
// forbids, so NUL bytes are handled here and never passed to it.
std::size_t utf8_sequence_length(const std::string& s, std::size_t i) {
  if (static_cast<unsigned char>(s[i]) < 0x80) return 1;
  for (std::size_t len = 2; len <= 4 && i + len <= s.size(); ++len) {
    // A valid sequence has no valid proper prefix: the first valid length is its length.
    if (bson_utf8_validate(s.data() + i, len, false)) return len;
  }
  return 0;
}

bool is_valid_utf8(const std::string& s) {
  std::size_t start = 0;
  while (true) {
    const std::size_t nul = s.find('\0', start);
    const std::size_t end = nul == std::string::npos ? s.size() : nul;
    if (!bson_utf8_validate(s.data() + start, end - start, false)) return false;
    if (nul == std::string::npos) return true;
    start = nul + 1;
  }
}

}  // namespace mongoelector
