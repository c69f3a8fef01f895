/* Functions of newer glibc versions that mongoelector uses, for builds against an older
 * glibc (the wheel targets glibc 2.17: manylinux2014). Compiled only when the target's
 * glibc lacks them (cmake/MongoelectorGlibcCompat.cmake); hidden, so they never replace
 * the real ones for anyone else in the process. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#define COMPAT_HIDDEN __attribute__((visibility("hidden")))

#ifdef MONGOELECTOR_COMPAT_GETRANDOM
/* glibc 2.25. The system call exists since Linux 3.17; older kernels (CentOS 7's 3.10)
 * get /dev/urandom instead. */
COMPAT_HIDDEN ssize_t getrandom(void* buf, size_t len, unsigned int flags) {
#ifdef SYS_getrandom
  long n = syscall(SYS_getrandom, buf, len, flags);
  if (n >= 0 || errno != ENOSYS) return (ssize_t)n;
#endif
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t got = read(fd, buf, len);
  int saved = errno;
  close(fd);
  errno = saved;
  return got;
}
#endif

#ifdef MONGOELECTOR_COMPAT_SIGABBREV_NP
/* glibc 2.32: the signal's abbreviation without "SIG", NULL for an unknown number. */
COMPAT_HIDDEN const char* sigabbrev_np(int sig) {
  switch (sig) {
    case SIGHUP:
      return "HUP";
    case SIGINT:
      return "INT";
    case SIGQUIT:
      return "QUIT";
    case SIGILL:
      return "ILL";
    case SIGTRAP:
      return "TRAP";
    case SIGABRT:
      return "ABRT";
    case SIGBUS:
      return "BUS";
    case SIGFPE:
      return "FPE";
    case SIGKILL:
      return "KILL";
    case SIGUSR1:
      return "USR1";
    case SIGSEGV:
      return "SEGV";
    case SIGUSR2:
      return "USR2";
    case SIGPIPE:
      return "PIPE";
    case SIGALRM:
      return "ALRM";
    case SIGTERM:
      return "TERM";
    case SIGSTKFLT:
      return "STKFLT";
    case SIGCHLD:
      return "CHLD";
    case SIGCONT:
      return "CONT";
    case SIGSTOP:
      return "STOP";
    case SIGTSTP:
      return "TSTP";
    case SIGTTIN:
      return "TTIN";
    case SIGTTOU:
      return "TTOU";
    case SIGURG:
      return "URG";
    case SIGXCPU:
      return "XCPU";
    case SIGXFSZ:
      return "XFSZ";
    case SIGVTALRM:
      return "VTALRM";
    case SIGPROF:
      return "PROF";
    case SIGWINCH:
      return "WINCH";
    case SIGIO:
      return "IO";
    case SIGPWR:
      return "PWR";
    case SIGSYS:
      return "SYS";
    default:
      return NULL;
  }
}
#endif
