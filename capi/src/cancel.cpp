// mongoelector_cancel_token_*: a one-shot flag that the calls given it poll while they
// wait (at least every 100 ms: core CancelFn). Per call, so no cancel outlives its call.
#include "handles.h"

using mongoelector::capi::checked;
using mongoelector::capi::guard;
using mongoelector::capi::read_out;
using mongoelector::capi::require;

extern "C" {

MONGOELECTOR_API mongoelector_status
mongoelector_cancel_token_new(mongoelector_cancel_token** out) {
  return guard([&] {
    require(out != nullptr, "out is NULL");
    *out = new mongoelector_cancel_token();
  });
}

MONGOELECTOR_API mongoelector_status
mongoelector_cancel_token_cancel(mongoelector_cancel_token* token) {
  return guard([&] { checked(token).cancelled.store(true); });
}

MONGOELECTOR_API mongoelector_status
mongoelector_cancel_token_is_cancelled(mongoelector_cancel_token* token, int* out) {
  return read_out(token, out, [](auto& t) { return t.cancelled.load() ? 1 : 0; });
}

MONGOELECTOR_API void mongoelector_cancel_token_free(mongoelector_cancel_token* token) {
  if (token == nullptr || token->magic != mongoelector::capi::kCancelMagic) return;
  token->magic = mongoelector::capi::kFreedMagic;
  delete token;
}

}  // extern "C"
