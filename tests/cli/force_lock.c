/*
 * Test helper of tests/cli/run.sh: takes KEY away from whoever holds it (force=1), as an
 * operator breaking a lock would, and keeps it (no release: it expires at TTL). Prints
 * the fencing token it got. Public header and libmongoelector only.
 *
 *   force_lock URI DATABASE KEY TTL_SECONDS
 */
#include <mongoelector.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  mongoelector_client *client = NULL;
  mongoelector_locker *locker = NULL;
  mongoelector_locker_options options;
  int64_t fence = 0;
  if (argc != 5) {
    fprintf(stderr, "usage: %s URI DATABASE KEY TTL_SECONDS\n", argv[0]);
    return 2;
  }
  mongoelector_locker_options_init(&options);
  options.ttl_seconds = atof(argv[4]);
  if (mongoelector_client_new(argv[1], argv[2], &client) != MONGOELECTOR_OK ||
      mongoelector_locker_new(client, argv[3], &options, &locker) != MONGOELECTOR_OK ||
      mongoelector_locker_acquire(locker, 0, -1, 0.1, 1, &fence) != MONGOELECTOR_OK) {
    fprintf(stderr, "force_lock: %s\n", mongoelector_last_error());
    return 1;
  }
  printf("%" PRId64 "\n", fence);
  mongoelector_locker_free(locker); /* keeps the lock until its ttl */
  mongoelector_client_free(client);
  return 0;
}
