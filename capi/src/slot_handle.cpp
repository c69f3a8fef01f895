// The calls the slot handles share (slot_handle.h).
#include "slot_handle.h"

namespace mongoelector::capi {

void touch_slot(SlotHolder& holder, int* renewed_out, int64_t* expire_ms_out) {
  require(renewed_out != nullptr, "renewed_out is NULL");
  const std::optional<std::int64_t> expire = holder.touch();
  *renewed_out = expire ? 1 : 0;
  if (expire_ms_out != nullptr) *expire_ms_out = expire.value_or(0);
}

void fill_holder_strings(char*& uuid, char*& host, const SemaphoreSlot& s) {
  uuid = json::malloc_copy(s.uuid);
  host = json::malloc_copy(s.host);
}

}  // namespace mongoelector::capi
