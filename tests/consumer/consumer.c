/* A tiny program built out of tree against an INSTALLED libmongoelector: it proves the
 * installed header, library, pkg-config file and CMake package work together.
 * Exit 0 when the runtime version equals the header's and, with MONGOELECTOR_TEST_URI
 * set, a lock round trip succeeds. */
#include <mongoelector.h>
#include <mongoelector/testing.h> /* the opt-in testing kit is installed too */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define getpid_portable getpid

static int fail(const char *what) {
  fprintf(stderr, "consumer: %s failed: %s\n", what, mongoelector_last_error());
  return 1;
}

int main(void) {
  printf("consumer: libmongoelector %s (header %s)\n", mongoelector_version(),
         MONGOELECTOR_VERSION_STRING);
  if (strcmp(mongoelector_version(), MONGOELECTOR_VERSION_STRING) != 0 ||
      mongoelector_version_number() != MONGOELECTOR_VERSION_NUMBER) {
    fprintf(stderr, "consumer: runtime and header versions differ\n");
    return 1;
  }
  mongoelector_fake_clock *clock = NULL;
  if (mongoelector_fake_clock_new(0, 0, &clock) != MONGOELECTOR_OK) return fail("fake_clock_new");
  mongoelector_fake_clock_free(clock);
  const char *uri = getenv("MONGOELECTOR_TEST_URI");
  if (uri == NULL || *uri == '\0') {
    printf("consumer: MONGOELECTOR_TEST_URI not set, lock round trip skipped\n");
    return 0;
  }
  mongoelector_client *client = NULL;
  if (mongoelector_client_new(uri, "mongoelector_consumer_test", &client) != MONGOELECTOR_OK)
    return fail("client_new");
  mongoelector_locker_options opts;
  mongoelector_locker_options_init(&opts);
  opts.ttl_seconds = 10;
  char key[64];
  snprintf(key, sizeof key, "consumer-%ld", (long)getpid_portable());
  mongoelector_locker *locker = NULL;
  if (mongoelector_locker_new(client, key, &opts, &locker) != MONGOELECTOR_OK)
    return fail("locker_new");
  int64_t fence = 0;
  if (mongoelector_locker_acquire(locker, 1, 5.0, 0.1, 0, &fence) != MONGOELECTOR_OK)
    return fail("acquire");
  int owned = 0;
  if (mongoelector_locker_owned(locker, &owned) != MONGOELECTOR_OK || !owned) return fail("owned");
  if (mongoelector_locker_release(locker, 0) != MONGOELECTOR_OK) return fail("release");
  printf("consumer: acquired and released %s with fencing token %lld\n", key, (long long)fence);
  mongoelector_locker_free(locker);
  mongoelector_client_free(client);
  return fence > 0 ? 0 : 1;
}
