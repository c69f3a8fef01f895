#include "user_code.h"

#include <cxxabi.h>

#include <exception>

namespace mongoelector {

void call_user_code(const std::function<void()>& fn,
                    const std::function<void(const char* what)>& report) {
  if (!fn) return;
  try {
    fn();
#if defined(__GLIBCXX__)
  } catch (abi::__forced_unwind&) {
    throw;
#endif
  } catch (const std::exception& ex) {
    if (report) report(ex.what());
  } catch (...) {
#if !defined(__GLIBCXX__)
    // libc++abi shows thread cancellation's forced unwind as a foreign exception.
    if (!abi::__cxa_current_exception_type()) throw;
#endif
    if (report) report(nullptr);
  }
}

}  // namespace mongoelector
