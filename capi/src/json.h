// A tiny JSON writer for mongoelector::Document (node status, cluster detail).
//
// Output is strict JSON (RFC 8259): strings escaped, invalid UTF-8 replaced by U+FFFD,
// dates as {"$date": <ms>} (MongoDB Extended JSON, relaxed), NaN/infinity as null
// (JSON has no spelling for them), doubles in the shortest form that round-trips.
#pragma once

#include <string>

#include "value.h"

namespace mongoelector::capi::json {

void append_string(std::string& out, const std::string& s);
void append_value(std::string& out, const Value& v);
void append_document(std::string& out, const Document& doc);

std::string to_json(const Document& doc);

// A malloc'd copy for the caller to release with mongoelector_free(); throws
// std::bad_alloc when malloc fails.
char* malloc_copy(const std::string& s);

}  // namespace mongoelector::capi::json
