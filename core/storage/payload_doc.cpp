#include "payload_storage.h"

#include "../exceptions.h"
#include "../utf8.h"
#include "document_json.h"
#include "lock_storage.h"

namespace mongoelector {

namespace {
// What the user passed, short enough for an error message.
std::string excerpt(const std::string& json) {
  constexpr std::size_t kMax = 60;
  std::string s = json.size() > kMax ? json.substr(0, kMax) + "..." : json;
  if (!is_valid_utf8(s)) return "(" + std::to_string(json.size()) + " bytes, not UTF-8)";
  return "'" + s + "'";
}
}  // namespace

std::string validate_payload(const std::string& json) {
  if (json.size() > kMaxPayloadBytes)
    throw InvalidArgument("payload is " + std::to_string(json.size()) +
                          " bytes of JSON, above the limit of " + std::to_string(kMaxPayloadBytes) +
                          " bytes");
  if (!is_valid_utf8(json)) throw InvalidArgument("payload " + excerpt(json) + " is not UTF-8");
  std::size_t i = json.find_first_not_of(" \t\r\n");
  if (i == std::string::npos || json[i] != '{')
    throw InvalidArgument("payload must be a JSON object ({...}), got " + excerpt(json));
  try {
    (void)document_json::decode(json, "payload");
  } catch (const std::exception& ex) {
    throw InvalidArgument("payload " + excerpt(json) + " is not a valid JSON object: " + ex.what());
  }
  return json;
}

Document ClaimPayload::fields() const {
  return Document{{"payload", json ? Value(*json) : Value(Null{})}, {"payload_version", version}};
}

void ClaimPayload::set_on(Document& doc) const {
  const Document set = fields();
  for (const Document::Field& f : set.fields()) doc.set(f.first, f.second);
}

bool PayloadWrite::apply_to(Document& doc) const {
  const LockDoc cur = LockDoc::from_document(doc);
  if (!cur.locked || cur.uuid != uuid || cur.fence != fence) return false;
  if (auto v = doc.get_int("payload_version"); v && *v >= version) return false;
  ClaimPayload{json, version}.set_on(doc);
  return true;
}

}  // namespace mongoelector
