// libFuzzer target: the stored text of a document (core/storage/document_json.h), as the
// SQLite backend reads it back from a database file anyone may have written. decode()
// must return a Document or throw StorageError (never crash, hang or leak); what it
// returns must encode (or be refused with InvalidArgument, e.g. invalid UTF-8), and
// encode -> decode -> encode must be stable.
#include <string>
#include <string_view>

#include "exceptions.h"
#include "fuzz_common.h"
#include "json.h"
#include "storage/document_json.h"

using namespace mongoelector;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::silence_logs();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Document d;
  try {
    d = document_json::decode(text, "fuzz");
  } catch (const StorageError&) {
    return 0;
  }
  // What the C API would print of it (strict JSON, valid UTF-8).
  fuzz::check_json(capi::json::to_json(d).c_str());
  std::string once;
  try {
    once = document_json::encode(d);
  } catch (const InvalidArgument&) {
    return 0;  // e.g. a decoded string that is not valid UTF-8
  }
  Document again;
  try {
    again = document_json::decode(once, "re-encoded");
  } catch (const StorageError& e) {
    fuzz::fail("encode() wrote text decode() refuses", once + " : " + e.what());
  }
  const std::string twice = document_json::encode(again);
  FUZZ_CHECK(once == twice, once + " vs " + twice);
  return 0;
}
