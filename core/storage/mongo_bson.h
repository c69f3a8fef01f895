// BSON <-> mongoelector::Document conversion and reply field access for the libmongoc
// backend (private to core/storage/mongo_*.cpp and its tests). Header-only so it needs
// no build entry.
//
// Reading (to_document): only top-level fields of the types Value can hold are kept:
//   bool -> bool, int32/int64 -> int64, double -> double, utf8 -> string,
//   date_time -> DateTime, null -> Null.
// Fields of any other BSON type (ObjectId, sub-documents, arrays, binary, Timestamp,
// decimal128, regex, ...) are SKIPPED: the protocol never stores them, and a parser that
// sees such a field missing falls back to the field's default (LockDoc::from_document),
// which is the safe reading of a document someone else wrote.
#pragma once

#include <mongoc/mongoc.h>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>

#include "../exceptions.h"
#include "../value.h"
#include "commands.h"

namespace mongoelector {
namespace mongo_bson {

// Owns one bson_t: initialised empty, destroyed once. Also passed as the `reply`
// out-parameter of libmongoc calls, which (re)initialise it without freeing: an empty
// initialised bson_t owns no heap memory, so nothing leaks.
class Bson {
 public:
  Bson() { bson_init(&b_); }
  ~Bson() { bson_destroy(&b_); }
  Bson(const Bson&) = delete;
  Bson& operator=(const Bson&) = delete;

  bson_t* get() { return &b_; }
  const bson_t* get() const { return &b_; }

 private:
  bson_t b_;
};

inline Document to_document(const bson_t* b) {
  Document doc;
  bson_iter_t it;
  if (b == nullptr || !bson_iter_init(&it, b)) return doc;
  while (bson_iter_next(&it)) {
    std::string name(bson_iter_key(&it), bson_iter_key_len(&it));
    switch (bson_iter_type(&it)) {
      case BSON_TYPE_BOOL:
        doc.set(name, bson_iter_bool(&it));
        break;
      case BSON_TYPE_INT32:
        doc.set(name, static_cast<std::int64_t>(bson_iter_int32(&it)));
        break;
      case BSON_TYPE_INT64:
        doc.set(name, static_cast<std::int64_t>(bson_iter_int64(&it)));
        break;
      case BSON_TYPE_DOUBLE:
        doc.set(name, bson_iter_double(&it));
        break;
      case BSON_TYPE_UTF8: {
        std::uint32_t len = 0;
        const char* s = bson_iter_utf8(&it, &len);
        doc.set(name, std::string(s, len));
        break;
      }
      case BSON_TYPE_DATE_TIME:
        doc.set(name, DateTime{bson_iter_date_time(&it)});
        break;
      case BSON_TYPE_NULL:
        doc.set(name, Null{});
        break;
      default:
        break;  // see the header comment: other types are skipped
    }
  }
  return doc;
}

// Strings go to the server as BSON utf8: reject what is not valid UTF-8 here, with a
// clear message, instead of letting the server (or a reader in another language) choke.
inline void check_utf8(const std::string& s, const char* what) {
  if (!bson_utf8_validate(s.data(), s.size(), /*allow_null=*/true)) {
    throw InvalidArgument(std::string(what) + " is not valid UTF-8");
  }
}

inline void append_utf8(bson_t* b, const char* name, const std::string& s) {
  check_utf8(s, name);
  if (!bson_append_utf8(b, name, -1, s.data(), static_cast<int>(s.size()))) {
    throw InvalidArgument(std::string("value of ") + name + " is too large for BSON");
  }
}

inline void append_value(bson_t* b, const std::string& name, const Value& v) {
  if (name.find('\0') != std::string::npos) {
    throw InvalidArgument("document field names cannot contain NUL characters");
  }
  check_utf8(name, "document field name");
  const char* k = name.c_str();
  const int klen = static_cast<int>(name.size());
  bool ok = std::visit(
      [&](const auto& x) -> bool {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Null>) {
          return bson_append_null(b, k, klen);
        } else if constexpr (std::is_same_v<T, bool>) {
          return bson_append_bool(b, k, klen, x);
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          return bson_append_int64(b, k, klen, x);
        } else if constexpr (std::is_same_v<T, double>) {
          return bson_append_double(b, k, klen, x);
        } else if constexpr (std::is_same_v<T, std::string>) {
          check_utf8(x, "document string value");
          return bson_append_utf8(b, k, klen, x.data(), static_cast<int>(x.size()));
        } else {
          return bson_append_date_time(b, k, klen, x.ms);
        }
      },
      v);
  if (!ok) throw InvalidArgument("field " + name + " does not fit in a BSON document");
}

inline void append_document(bson_t* b, const Document& doc) {
  for (const auto& f : doc.fields()) append_value(b, f.first, f.second);
}

// The children of a document or array node (commands.h) appended to `b`: arrays get
// the keys "0", "1", ...
inline void append_tree(bson_t* b, const commands::Node& parent);

inline void append_node(bson_t* b, const std::string& name, const commands::Node& n) {
  using Kind = commands::Node::Kind;
  if (n.kind == Kind::scalar) return append_value(b, name, n.value);
  bson_t child;
  const bool ok =
      n.kind == Kind::array
          ? bson_append_array_begin(b, name.c_str(), static_cast<int>(name.size()), &child)
          : bson_append_document_begin(b, name.c_str(), static_cast<int>(name.size()), &child);
  if (!ok) throw InvalidArgument("field " + name + " does not fit in a BSON document");
  append_tree(&child, n);
  if (!(n.kind == Kind::array ? bson_append_array_end(b, &child)
                              : bson_append_document_end(b, &child)))
    throw InvalidArgument("field " + name + " does not fit in a BSON document");
}

inline void append_tree(bson_t* b, const commands::Node& parent) {
  if (parent.kind != commands::Node::Kind::array) {
    for (const auto& c : parent.children) append_node(b, c.name, c);
    return;
  }
  for (std::size_t i = 0; i < parent.children.size(); ++i)
    append_node(b, std::to_string(i), parent.children[i]);
}

// The string at `path` ("name" or "sub.name") of a command reply, if it is one.
inline std::optional<std::string> find_utf8(const bson_t* reply, const char* path) {
  bson_iter_t it, found;
  if (bson_iter_init(&it, reply) && bson_iter_find_descendant(&it, path, &found) &&
      BSON_ITER_HOLDS_UTF8(&found)) {
    std::uint32_t len = 0;
    const char* s = bson_iter_utf8(&found, &len);
    return std::string(s, len);
  }
  return std::nullopt;
}

// The date field `name` of a command reply, in ms since the epoch, if it is one.
inline std::optional<std::int64_t> find_date_time(const bson_t* reply, const char* name) {
  bson_iter_t it;
  if (bson_iter_init_find(&it, reply, name) && BSON_ITER_HOLDS_DATE_TIME(&it)) {
    return bson_iter_date_time(&it);
  }
  return std::nullopt;
}

}  // namespace mongo_bson
}  // namespace mongoelector
