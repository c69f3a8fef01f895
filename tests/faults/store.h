/* The fenced resource of the fault suite: a file store under flock(2).
 * A write carries a fencing token; it is accepted only if the token is >= the highest
 * token the store has seen (then the highest becomes the token). Every attempt appends
 * one line to STORE_DIR/store.log:  t node token seq accepted highest_before
 * (t = CLOCK_MONOTONIC seconds, taken under the lock). store.py implements the same. */
#ifndef FAULT_STORE_H
#define FAULT_STORE_H
#include <stdint.h>

typedef struct fault_store {
  int lock_fd, state_fd, log_fd;
} fault_store;

int fault_store_open(fault_store *s, const char *dir);
/* Returns 1 if accepted, 0 if rejected, -1 on an I/O error; *t_out = time of the decision. */
int fault_store_write(fault_store *s, const char *node, int64_t token, long seq, double *t_out);
#endif
