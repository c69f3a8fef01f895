// Documents as text, for the SQLite backend (sqlite_storage.h): MongoDB's canonical
// Extended JSON v2 restricted to the types a Value holds, so a stored row reads like
// what mongoexport prints and can be inspected with the sqlite3 shell:
//   Null      null
//   bool      true / false
//   int64     {"$numberLong": "42"}
//   double    {"$numberDouble": "2.5"}   ("Infinity", "-Infinity", "NaN" too)
//   string    "..."                      (JSON escapes; NUL as \u0000)
//   DateTime  {"$date": {"$numberLong": "1700000000000"}}
// Field order is kept.
//
// Decoding accepts any JSON: plain integers become int64 (doubles when out of range),
// plain fractions doubles, {"$numberInt": "n"} int64, {"$date": n} a DateTime; fields
// holding other objects or arrays (types a Value cannot hold) are skipped, as the
// MongoDB backend skips BSON types it does not know. Malformed text -> StorageError.
#pragma once

#include <string>
#include <string_view>

#include "../value.h"

namespace mongoelector::document_json {

// InvalidArgument for a string that is not valid UTF-8 or a field name with NUL.
std::string encode(const Document& doc);
std::string encode_value(const Value& v);

// StorageError (with `what` in the message) for malformed JSON, a top level that is not
// an object, or nesting deeper than 64.
Document decode(std::string_view text, const std::string& what = "document");

}  // namespace mongoelector::document_json
