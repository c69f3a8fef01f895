/* ThreadSanitizer builds only (-DMONGOELECTOR_SANITIZE=thread, see CMakeLists.txt).
 *
 * libstdc++ (GCC >= 11 on glibc >= 2.30) implements std::timed_mutex::try_lock_for and
 * try_lock_until with pthread_mutex_clocklock(), which the TSan runtime does not intercept
 * (llvm/llvm-project#62623; GCC 12's libtsan.so.2 has no such interceptor either). TSan
 * then never sees the lock taken, reports "unlock of an unlocked mutex" when it is
 * released, and would miss the happens-before edges it creates. This definition, linked
 * into the core, routes the call through pthread_mutex_timedlock(), which TSan does
 * intercept, so the lock is modelled exactly instead of suppressing the reports.
 * Accuracy: a CLOCK_MONOTONIC deadline is converted to CLOCK_REALTIME once, at the call. */
#include <errno.h>
#include <pthread.h>
#include <time.h>

extern "C" int pthread_mutex_clocklock(pthread_mutex_t *mutex, clockid_t clockid,
                                       const struct timespec *abstime) noexcept {
  struct timespec now_clock, now_real, deadline;
  long long left_ns;
  if (clockid == CLOCK_REALTIME) return pthread_mutex_timedlock(mutex, abstime);
  if (clockid != CLOCK_MONOTONIC) return EINVAL;
  clock_gettime(CLOCK_MONOTONIC, &now_clock);
  clock_gettime(CLOCK_REALTIME, &now_real);
  left_ns = (long long)(abstime->tv_sec - now_clock.tv_sec) * 1000000000LL +
            (abstime->tv_nsec - now_clock.tv_nsec);
  if (left_ns < 0) left_ns = 0;
  deadline.tv_sec = now_real.tv_sec + (time_t)(left_ns / 1000000000LL);
  deadline.tv_nsec = now_real.tv_nsec + (long)(left_ns % 1000000000LL);
  if (deadline.tv_nsec >= 1000000000L) {
    deadline.tv_sec += 1;
    deadline.tv_nsec -= 1000000000L;
  }
  return pthread_mutex_timedlock(mutex, &deadline);
}
