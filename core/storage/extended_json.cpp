#include "extended_json.h"

#include <new>

#include "../utf8.h"
#include "mongo_bson.h"

namespace mongoelector {

namespace {

// libbson writes what it is given; JSON must be valid UTF-8, and names cannot hold NUL.
std::string lossy(const std::string& s, bool name) {
  if (is_valid_utf8(s) && (!name || s.find('\0') == std::string::npos)) return s;
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t len = s[i] == '\0' ? (name ? 0 : 1) : utf8_sequence_length(s, i);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s, i, len);
      i += len;
    }
  }
  return out;
}

Document lossy(const Document& doc) {
  Document out;
  for (const auto& [name, v] : doc.fields()) {
    if (const std::string* s = std::get_if<std::string>(&v))
      out.set(lossy(name, true), lossy(*s, false));
    else
      out.set(lossy(name, true), v);
  }
  return out;
}

}  // namespace

struct ExtendedJsonWriter::Bson {
  mongo_bson::Bson doc;
};

ExtendedJsonWriter::ExtendedJsonWriter() : bson_(std::make_unique<Bson>()) {}
ExtendedJsonWriter::~ExtendedJsonWriter() = default;

void ExtendedJsonWriter::value(const std::string& name, const Value& v) {
  const std::string* s = std::get_if<std::string>(&v);
  mongo_bson::append_value(bson_->doc.get(), lossy(name, true), s ? Value(lossy(*s, false)) : v);
}

void ExtendedJsonWriter::document(const std::string& name, const std::optional<Document>& doc) {
  if (!doc) return value(name, Null{});
  mongo_bson::Bson sub;
  mongo_bson::append_document(sub.get(), lossy(*doc));
  const std::string key = lossy(name, true);
  if (!bson_append_document(bson_->doc.get(), key.c_str(), -1, sub.get()))
    throw InvalidArgument("document " + key + " does not fit in a BSON document");
}

void ExtendedJsonWriter::document_array(const std::string& name,
                                        const std::vector<Document>& docs) {
  bson_t array;
  const std::string key = lossy(name, true);
  bson_append_array_begin(bson_->doc.get(), key.c_str(), -1, &array);
  for (std::size_t i = 0; i < docs.size(); ++i) {
    mongo_bson::Bson sub;
    mongo_bson::append_document(sub.get(), lossy(docs[i]));
    const std::string index = std::to_string(i);
    bson_append_document(&array, index.c_str(), -1, sub.get());
  }
  if (!bson_append_array_end(bson_->doc.get(), &array))
    throw InvalidArgument("array " + key + " does not fit in a BSON document");
}

void ExtendedJsonWriter::json_object(const std::string& name,
                                     const std::optional<std::string>& json) {
  if (!json) return value(name, Null{});
  bson_error_t error;
  bson_t* parsed = bson_new_from_json(reinterpret_cast<const std::uint8_t*>(json->data()),
                                      static_cast<ssize_t>(json->size()), &error);
  if (parsed == nullptr)
    throw InvalidArgument("field " + name + " is not a JSON object: " + error.message);
  const std::string key = lossy(name, true);
  const bool ok = bson_append_document(bson_->doc.get(), key.c_str(), -1, parsed);
  bson_destroy(parsed);
  if (!ok) throw InvalidArgument("document " + key + " does not fit in a BSON document");
}

void ExtendedJsonWriter::nested(const std::string& name, const ExtendedJsonWriter& sub) {
  const std::string key = lossy(name, true);
  if (!bson_append_document(bson_->doc.get(), key.c_str(), -1, sub.bson_->doc.get()))
    throw InvalidArgument("document " + key + " does not fit in a BSON document");
}

std::string ExtendedJsonWriter::json() const {
  std::size_t len = 0;
  char* text = bson_as_relaxed_extended_json(bson_->doc.get(), &len);
  if (text == nullptr) throw std::bad_alloc();
  std::string out(text, len);
  bson_free(text);
  return out;
}

std::string to_extended_json(const Document& doc) {
  ExtendedJsonWriter w;
  for (const auto& [name, v] : doc.fields()) w.value(name, v);
  return w.json();
}

}  // namespace mongoelector
