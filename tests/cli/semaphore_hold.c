/*
 * Test helper of tests/cli/run.sh: takes a slot of KEY's fair semaphore (limit 1),
 * waiting in its queue while the slot is held; prints "held FENCE" once it holds it,
 * then keeps it until a line (or end of file) on stdin, and releases it. Public header
 * and libmongoelector only.
 *
 *   semaphore_hold URI DATABASE KEY
 */
#include <mongoelector.h>

#include <inttypes.h>
#include <stdio.h>

int main(int argc, char **argv) {
  mongoelector_client *client = NULL;
  mongoelector_semaphore *sem = NULL;
  mongoelector_semaphore_config config;
  int64_t fence = 0;
  char line[16];
  if (argc != 4) {
    fprintf(stderr, "usage: %s URI DATABASE KEY\n", argv[0]);
    return 2;
  }
  mongoelector_semaphore_config_init(&config, MONGOELECTOR_SEMAPHORE_CONFIG_VERSION);
  config.ttl_seconds = 30;
  config.fair = 1;
  if (mongoelector_client_new(argv[1], argv[2], &client) != MONGOELECTOR_OK ||
      mongoelector_semaphore_new(client, argv[3], &config, &sem) != MONGOELECTOR_OK ||
      mongoelector_semaphore_acquire(sem, NULL, &fence) != MONGOELECTOR_OK) {
    fprintf(stderr, "semaphore_hold: %s\n", mongoelector_last_error());
    return 1;
  }
  printf("held %" PRId64 "\n", fence);
  fflush(stdout);
  (void)fgets(line, sizeof line, stdin);
  mongoelector_semaphore_release(sem);
  mongoelector_semaphore_free(sem);
  mongoelector_client_free(client);
  return 0;
}
