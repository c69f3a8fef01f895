// Calling code the library does not control (a user's callback, a log sink, a timer task
// that may reach one) from a library thread. One rule, one place.
#pragma once

#include <functional>

namespace mongoelector {

// Runs `fn`. An exception it raises goes no further than `report` (given its what(), or
// nullptr when it is not a std::exception), so a faulty callback cannot break the thread
// that called it. Thread cancellation is not an exception of the callback and always
// unwinds: CPython ends a thread that waits for the GIL at interpreter exit with
// pthread_exit, and a catch(...) that swallows that unwind makes glibc abort the process.
void call_user_code(const std::function<void()>& fn,
                    const std::function<void(const char* what)>& report);

}  // namespace mongoelector
