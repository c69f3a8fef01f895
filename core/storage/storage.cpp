#include "storage.h"

#include "../exceptions.h"

namespace mongoelector {

Storage& require_storage(const std::shared_ptr<Storage>& storage) {
  if (!storage) throw InvalidArgument("storage must not be null");
  return *storage;
}

std::shared_ptr<Clock> clock_or_storage_clock(std::shared_ptr<Clock> given,
                                              const std::shared_ptr<Storage>& storage) {
  if (given) return given;
  return storage ? storage->clock() : nullptr;
}

}  // namespace mongoelector
