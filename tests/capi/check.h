/*
 * Checks and timing helpers shared by the C API test programs (C99, one per program).
 * Define CHECK_PROGRAM (the program's name, for the summary line) before including.
 * Every check counts; the first failing one prints file:line and exits 1.
 */
#ifndef MONGOELECTOR_TESTS_CHECK_H
#define MONGOELECTOR_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mongoelector.h"

#ifndef CHECK_PROGRAM
#error "define CHECK_PROGRAM before including check.h"
#endif

static int g_passed = 0;

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (cond) {                                                                                    \
      g_passed++;                                                                                  \
    } else {                                                                                       \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: \"%s\")\n", __FILE__, __LINE__, #cond, \
              mongoelector_last_error());                                                          \
      fprintf(stderr, "%s: %d passed, 1 failed\n", CHECK_PROGRAM, g_passed);                       \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

#define CHECK_STATUS(expr, expected)                                                              \
  do {                                                                                            \
    mongoelector_status st_ = (expr);                                                             \
    if (st_ == (expected)) {                                                                      \
      g_passed++;                                                                                 \
    } else {                                                                                      \
      fprintf(stderr, "%s:%d: %s returned %s, expected %s (last error: \"%s\")\n", __FILE__,      \
              __LINE__, #expr, mongoelector_status_name(st_), mongoelector_status_name(expected), \
              mongoelector_last_error());                                                         \
      fprintf(stderr, "%s: %d passed, 1 failed\n", CHECK_PROGRAM, g_passed);                      \
      exit(1);                                                                                    \
    }                                                                                             \
  } while (0)

#define CHECK_ERROR_SAYS(text) CHECK(strstr(mongoelector_last_error(), (text)) != NULL)

#define CHECK_OK(expr) CHECK_STATUS(expr, MONGOELECTOR_OK)
#define CHECK_INVALID(expr) CHECK_STATUS(expr, MONGOELECTOR_ERR_INVALID_ARGUMENT)

/* A name no earlier run used: prefix-pid-time-counter. */
static inline void unique_name(char *out, size_t n, const char *prefix) {
  static int counter = 0;
  snprintf(out, n, "%s-%ld-%d-%d", prefix, (long)getpid(), (int)time(NULL), ++counter);
}

/* The test server is FerretDB (MONGOELECTOR_TEST_SERVER=ferretdb), whose conditional
 * writes are not atomic: locks and everything built on them refuse it by default. */
static inline int on_ferretdb(void) {
  const char *env = getenv("MONGOELECTOR_TEST_SERVER");
  return env != NULL && strcmp(env, "ferretdb") == 0;
}

static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void sleep_s(double s) {
  struct timespec ts;
  ts.tv_sec = (time_t)s;
  ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
  while (nanosleep(&ts, &ts) != 0) {
  }
}

#endif
