/* One process holding and renewing N keys on ONE client, through the public C API
 * (so the same program measures any build of libmongoelector.so.1):
 *
 *   pool_bench N SECONDS      (server: MONGOELECTOR_TEST_URI)
 *
 * Makes one locker and acquires it (the client's pool and monitor exist from then on),
 * measures threads and RSS, makes and acquires N-1 more (ttl 15), measures again, prints
 * "holding" (the driver samples the server's connection count now), then renews every
 * key every ttl/3 for SECONDS, counting renewals that did not succeed. Prints one line
 * of key=value figures. Driven by pool_bench.py, which prints the tables. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mongoelector.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int thread_count(void) {
  int n = 0;
  DIR *d = opendir("/proc/self/task");
  struct dirent *e;
  if (d == NULL) return -1;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n;
}

static long rss_kib(void) {
  char line[256];
  long kib = -1;
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL) return -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, "VmRSS:", 6) == 0) kib = strtol(line + 6, NULL, 10);
  fclose(f);
  return kib;
}

static int fail(const char *what) {
  fprintf(stderr, "pool_bench: %s: %s\n", what, mongoelector_last_error());
  return 1;
}

int main(int argc, char **argv) {
  const double ttl = 15.0;
  const char *uri = getenv("MONGOELECTOR_TEST_URI");
  mongoelector_client *client = NULL;
  mongoelector_locker **lockers;
  mongoelector_locker_options o;
  int n, i, threads_one, threads_all;
  long rss_one, rss_all;
  long renewals = 0, missed = 0;
  double seconds, start, round_max = 0;
  char db[64], key[64];

  if (argc != 3 || uri == NULL) {
    fprintf(stderr, "usage: MONGOELECTOR_TEST_URI=mongodb://... pool_bench N SECONDS\n");
    return 2;
  }
  n = atoi(argv[1]);
  seconds = atof(argv[2]);
  if (n < 1) return 2;
  lockers = calloc((size_t)n, sizeof *lockers);
  if (lockers == NULL) return 1;
  sprintf(db, "pool_bench_%ld", (long)getpid());
  if (mongoelector_client_new(uri, db, &client) != MONGOELECTOR_OK) return fail("client_new");

  mongoelector_locker_options_init(&o);
  o.ttl_seconds = ttl;
  o.timeparanoid = 0;
  o.allow_unsafe_server = 1; /* one process, distinct keys: no contention to protect */
  for (i = 0; i < n; ++i) {
    sprintf(key, "key-%d", i);
    if (mongoelector_locker_new(client, key, &o, &lockers[i]) != MONGOELECTOR_OK)
      return fail("locker_new");
    if (mongoelector_locker_acquire(lockers[i], 0, -1, 0.25, 0, NULL) != MONGOELECTOR_OK)
      return fail("acquire");
    if (i == 0) {
      threads_one = thread_count();
      rss_one = rss_kib();
    }
  }
  threads_all = thread_count();
  rss_all = rss_kib();
  printf("holding\n");
  fflush(stdout);

  start = now_s();
  while (now_s() - start < seconds) {
    double t0 = now_s(), took;
    for (i = 0; i < n; ++i) {
      int renewed = 0;
      ++renewals;
      if (mongoelector_locker_touch(lockers[i], &renewed, NULL) != MONGOELECTOR_OK || !renewed)
        ++missed;
    }
    took = now_s() - t0;
    if (took > round_max) round_max = took;
    if (took < ttl / 3) {
      double rest = ttl / 3 - took;
      struct timespec ts;
      ts.tv_sec = (time_t)rest;
      ts.tv_nsec = (long)((rest - (double)ts.tv_sec) * 1e9);
      nanosleep(&ts, NULL);
    }
  }
  for (i = 0; i < n; ++i) {
    mongoelector_locker_release(lockers[i], 0);
    mongoelector_locker_free(lockers[i]);
  }
  mongoelector_client_free(client);
  free(lockers);
  printf(
      "n=%d threads_one=%d threads_all=%d rss_one_kib=%ld rss_all_kib=%ld renewals=%ld "
      "missed=%ld round_max_s=%.3f\n",
      n, threads_one, threads_all, rss_one, rss_all, renewals, missed, round_max);
  return 0;
}
