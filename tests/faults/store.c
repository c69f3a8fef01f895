/* See store.h. */
#define _GNU_SOURCE
#include "store.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

int fault_store_open(fault_store *s, const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/store.lock", dir);
  s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  snprintf(path, sizeof path, "%s/store.state", dir);
  s->state_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  snprintf(path, sizeof path, "%s/store.log", dir);
  s->log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  return (s->lock_fd < 0 || s->state_fd < 0 || s->log_fd < 0) ? -1 : 0;
}

int fault_store_write(fault_store *s, const char *node, int64_t token, long seq, double *t_out) {
  if (flock(s->lock_fd, LOCK_EX) != 0) return -1;
  char buf[64] = {0};
  ssize_t n = pread(s->state_fd, buf, sizeof buf - 1, 0);
  long long highest = n > 0 ? atoll(buf) : 0;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  double t = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
  int accepted = token >= highest;
  if (accepted && token > highest) {
    int len = snprintf(buf, sizeof buf, "%lld\n", (long long)token);
    if (ftruncate(s->state_fd, 0) != 0 || pwrite(s->state_fd, buf, (size_t)len, 0) != len) {
      flock(s->lock_fd, LOCK_UN);
      return -1;
    }
  }
  char line[256];
  int len = snprintf(line, sizeof line, "%.6f %s %lld %ld %d %lld\n", t, node, (long long)token,
                     seq, accepted, highest);
  ssize_t w = write(s->log_fd, line, (size_t)len);
  flock(s->lock_fd, LOCK_UN);
  if (t_out) *t_out = t;
  return w == len ? accepted : -1;
}
