// A small document model shared by the storage backends and the bindings, so that
// core/ never depends on BSON or on Python objects.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace mongoelector {

// A UTC instant in milliseconds since the Unix epoch (BSON's date type).
struct DateTime {
  std::int64_t ms = 0;
  bool operator==(const DateTime& o) const { return ms == o.ms; }
};

struct Null {
  bool operator==(const Null&) const { return true; }
};

using Value = std::variant<Null, bool, std::int64_t, double, std::string, DateTime>;

// Field order is kept: documents written by us look like the original's.
class Document {
 public:
  using Field = std::pair<std::string, Value>;

  Document() = default;
  Document(std::initializer_list<Field> fields) : fields_(fields) {}

  void set(const std::string& name, Value v);
  const Value* get(const std::string& name) const;
  bool has(const std::string& name) const { return get(name) != nullptr; }
  void erase(const std::string& name);

  std::optional<std::string> get_string(const std::string& name) const;
  std::optional<std::int64_t> get_int(const std::string& name) const;  // int or integral double
  std::optional<bool> get_bool(const std::string& name) const;
  std::optional<DateTime> get_date(const std::string& name) const;

  const std::vector<Field>& fields() const { return fields_; }
  bool operator==(const Document& o) const { return fields_ == o.fields_; }

 private:
  std::vector<Field> fields_;
};

}  // namespace mongoelector
