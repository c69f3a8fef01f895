#include "handover_storage.h"

namespace mongoelector {

Document HandOverStorage::HandOver::fields() const {
  return Document{{"uuid", to_uuid},
                  {"host", to_host},
                  {"pid", to_pid},
                  {"fence", to_fence},
                  {"ts_created", DateTime{now_ms}},
                  {"ts_expire", DateTime{expire_ms}},
                  {"handover_from", from_uuid},
                  {"handover_fence", to_fence},
                  {"handover_expire", DateTime{expire_ms}},
                  // The target's term starts without the old leader's payload (the
                  // target writes its own once it leads: payload_storage.h).
                  {"payload", Null{}},
                  {"payload_version", std::int64_t{0}}};
}

bool HandOverStorage::HandOver::apply_to(Document& doc) const {
  const LockDoc cur = LockDoc::from_document(doc);
  if (!cur.locked || cur.uuid != from_uuid || cur.fence != from_fence || !cur.held_at(now_ms))
    return false;
  const Document set = fields();
  for (const Document::Field& f : set.fields()) doc.set(f.first, f.second);
  return true;
}

bool HandOverStorage::HandOver::marks(const LockDoc& doc) {
  const std::optional<std::int64_t> marked = doc.raw.get_int("handover_fence");
  return marked && *marked == doc.fence && doc.fence != 0;
}

bool HandOverStorage::HandOver::pending_in(const LockDoc& doc) {
  if (!marks(doc) || !doc.ts_expire) return false;
  // A hand-over written by a version without this field: its acceptance cannot be told
  // apart, so the target is taken to lead (as that version's observers showed it).
  const std::optional<DateTime> written = doc.raw.get_date("handover_expire");
  return written && written->ms == doc.ts_expire->ms;
}

}  // namespace mongoelector
