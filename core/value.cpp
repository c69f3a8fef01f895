#include "value.h"

#include <algorithm>
#include <cmath>

namespace mongoelector {

void Document::set(const std::string& name, Value v) {
  for (auto& f : fields_) {
    if (f.first == name) {
      f.second = std::move(v);
      return;
    }
  }
  fields_.emplace_back(name, std::move(v));
}

const Value* Document::get(const std::string& name) const {
  for (const auto& f : fields_) {
    if (f.first == name) return &f.second;
  }
  return nullptr;
}

void Document::erase(const std::string& name) {
  fields_.erase(std::remove_if(fields_.begin(), fields_.end(),
                               [&](const Field& f) { return f.first == name; }),
                fields_.end());
}

std::optional<std::string> Document::get_string(const std::string& name) const {
  const Value* v = get(name);
  if (v && std::holds_alternative<std::string>(*v)) return std::get<std::string>(*v);
  return std::nullopt;
}

std::optional<std::int64_t> Document::get_int(const std::string& name) const {
  const Value* v = get(name);
  if (!v) return std::nullopt;
  if (std::holds_alternative<std::int64_t>(*v)) return std::get<std::int64_t>(*v);
  if (std::holds_alternative<double>(*v)) {
    double d = std::get<double>(*v);
    // Other writers (an original node, a shell) may store numbers as doubles.
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15)
      return static_cast<std::int64_t>(d);
  }
  return std::nullopt;
}

std::optional<bool> Document::get_bool(const std::string& name) const {
  const Value* v = get(name);
  if (v && std::holds_alternative<bool>(*v)) return std::get<bool>(*v);
  return std::nullopt;
}

std::optional<DateTime> Document::get_date(const std::string& name) const {
  const Value* v = get(name);
  if (v && std::holds_alternative<DateTime>(*v)) return std::get<DateTime>(*v);
  return std::nullopt;
}

}  // namespace mongoelector
