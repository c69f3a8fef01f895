// Reads the JSON the C API hands out (mongoelector_elector_cluster_detail: relaxed
// Extended JSON with arrays of member objects). The command is a C API consumer only
// (CMakeLists.txt), so it cannot call the core's readers, which are not part of the ABI;
// and the core's document_json reads flat documents only (it skips arrays and objects).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cli {

struct Json {
  enum Type { Null, Bool, Number, String, Array, Object } type = Null;
  bool b = false;
  double num = 0;
  int64_t i = 0;  // exact value when the number is an integer
  std::string str;
  std::vector<Json> arr;
  std::vector<std::pair<std::string, Json>> obj;
  const Json* get(const std::string& name) const;
  // {"$date": "ISO-8601"}, {"$date": {"$numberLong": "ms"}}, {"$date": ms} or a number
  // -> ms; nullopt otherwise.
  std::optional<int64_t> as_date_ms() const;
};
bool parse_json(const std::string& text, Json& out, std::string& error);
// Compact JSON text of `v` (numbers: integers exactly, others with 17 digits).
std::string json_text(const Json& v);

}  // namespace cli
