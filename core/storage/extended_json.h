// JSON for documents handed to callers of the C API: MongoDB's relaxed Extended JSON
// (v2), written by libbson: dates as {"$date": "2026-11-23T17:38:28.123Z"} (outside
// years 1970..9999: {"$date": {"$numberLong": "<ms>"}}), NaN and infinities as
// {"$numberDouble": "NaN"}, integers and other doubles as JSON numbers. Always valid
// UTF-8: a string that is not becomes lossy (U+FFFD for each bad byte).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../value.h"

namespace mongoelector {

// Builds one JSON object field by field.
class ExtendedJsonWriter {
 public:
  ExtendedJsonWriter();
  ~ExtendedJsonWriter();
  ExtendedJsonWriter(const ExtendedJsonWriter&) = delete;
  ExtendedJsonWriter& operator=(const ExtendedJsonWriter&) = delete;

  void value(const std::string& name, const Value& v);
  void document(const std::string& name, const std::optional<Document>& doc);  // null if none
  void document_array(const std::string& name, const std::vector<Document>& docs);
  // A JSON object given as text (a leader payload), parsed into the output; null if none.
  // InvalidArgument when the text is not a JSON object.
  void json_object(const std::string& name, const std::optional<std::string>& json);
  // What another writer has built, as a sub-document.
  void nested(const std::string& name, const ExtendedJsonWriter& sub);
  std::string json() const;

 private:
  struct Bson;
  std::unique_ptr<Bson> bson_;
};

std::string to_extended_json(const Document& doc);

}  // namespace mongoelector
