/*
 * lease_test: the keep-alive lease C API (mongoelector_lease_*) seen from C. Includes ONLY
 * the public header, links ONLY libmongoelector.so, builds as -std=c99 -pedantic -Werror.
 *
 * Usage: lease_test [--offline]
 *   --offline   argument checks, then the whole suite on the embedded SQLite backend in a
 *               temporary directory (no server).
 *   (default)   that, then the suite against the server at MONGOELECTOR_TEST_URI; exits 77
 *               (ctest: skipped) when that variable is unset.
 * Every check counts; the first failing one prints file:line and exits 1.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK_PROGRAM "lease_test"
#include "check.h"
#include "mongoelector.h"

/* What on_lost saw: how often it ran, on which thread, and what the lease said then. */
typedef struct lost_probe {
  pthread_mutex_t mu;
  int calls;
  int lost_inside;
  int64_t fence_inside;
  pthread_t thread;
  mongoelector_lease *lease;
} lost_probe;

static void on_lost(void *user_data) {
  lost_probe *p = (lost_probe *)user_data;
  int lost = 0;
  int64_t fence = 0;
  /* Allowed inside the callback: lost and fence. */
  mongoelector_lease_lost(p->lease, &lost);
  mongoelector_lease_fence(p->lease, &fence);
  pthread_mutex_lock(&p->mu);
  p->calls++;
  p->lost_inside = lost;
  p->fence_inside = fence;
  p->thread = pthread_self();
  pthread_mutex_unlock(&p->mu);
}

static int probe_calls(lost_probe *p) {
  int n;
  pthread_mutex_lock(&p->mu);
  n = p->calls;
  pthread_mutex_unlock(&p->mu);
  return n;
}

static int g_unsafe_server = 0; /* the test server is FerretDB */

static void new_locker(mongoelector_client *client, const char *key, double ttl,
                       mongoelector_locker **out) {
  mongoelector_locker_options o;
  mongoelector_locker_options_init(&o);
  o.collection = "lease_locks";
  o.ttl_seconds = ttl;
  o.max_offset_seconds = 2; /* the test server runs on this host; allow a loaded machine */
  /* FerretDB (non-atomic findAndModify) is refused by default; this suite's contention
   * is between lockers of one process, taking turns, so the lease surface is what is
   * tested there. MongoDB and mongo-java-server run it without the opt-in. */
  o.allow_unsafe_server = g_unsafe_server;
  CHECK_OK(mongoelector_locker_new(client, key, &o, out));
}

static void test_offline_args(void) {
  mongoelector_lease_options o;
  mongoelector_lease *lease = NULL;
  int64_t fence = 0;
  int lost = 0;

  memset(&o, 0xab, sizeof o);
  mongoelector_lease_options_init(&o);
  CHECK(o.version == MONGOELECTOR_LEASE_OPTIONS_VERSION);
  CHECK(o.blocking == 1);
  CHECK(o.timeout_seconds < 0);
  CHECK(o.step_seconds == 0.25);
  CHECK(o.on_lost == NULL && o.user_data == NULL);
  mongoelector_lease_options_init(NULL);

  CHECK_INVALID(mongoelector_lease_acquire(NULL, NULL, &lease));
  CHECK(lease == NULL);
  CHECK_INVALID(mongoelector_lease_fence(NULL, &fence));
  CHECK_INVALID(mongoelector_lease_lost(NULL, &lost));
  CHECK_INVALID(mongoelector_lease_wait_lost(NULL, 0, &lost));
  mongoelector_lease_free(NULL);
}

static void test_suite(const char *uri, const char *db, const char *key) {
  mongoelector_client *client = NULL;
  mongoelector_locker *a = NULL, *b = NULL;
  mongoelector_lease *la = NULL, *lb = NULL, *other = NULL;
  mongoelector_lease_options o;
  lost_probe probe;
  int64_t fence = 0, fence2 = 0, lfence = 0;
  int lost = -1, locked = -1;
  double t0, ttl = 1.0;

  CHECK_OK(mongoelector_client_new(uri, db, &client));
  new_locker(client, key, ttl, &a);
  new_locker(client, key, ttl, &b);

  /* Bad options. */
  mongoelector_lease_options_init(&o);
  CHECK_INVALID(mongoelector_lease_acquire(a, &o, NULL));
  o.version = 0;
  CHECK_INVALID(mongoelector_lease_acquire(a, &o, &la));
  mongoelector_lease_options_init(&o);
  o.blocking = 0;
  o.timeout_seconds = 1;
  CHECK_INVALID(mongoelector_lease_acquire(a, &o, &la));
  mongoelector_lease_options_init(&o);
  o.step_seconds = 0;
  CHECK_INVALID(mongoelector_lease_acquire(a, &o, &la));
  CHECK(la == NULL);

  /* a takes a lease and keeps it for 3.5 ttl while idle. */
  memset(&probe, 0, sizeof probe);
  pthread_mutex_init(&probe.mu, NULL);
  mongoelector_lease_options_init(&o);
  o.on_lost = on_lost;
  o.user_data = &probe;
  CHECK_OK(mongoelector_lease_acquire(a, &o, &la));
  probe.lease = la;
  CHECK_OK(mongoelector_lease_fence(la, &fence));
  CHECK(fence > 0);
  CHECK_OK(mongoelector_locker_fence(a, &lfence));
  CHECK(lfence == fence);
  /* One live lease per locker. */
  CHECK_INVALID(mongoelector_lease_acquire(a, NULL, &other));
  CHECK(other == NULL);

  t0 = now_s();
  CHECK_OK(mongoelector_lease_wait_lost(la, 0.2, &lost));
  CHECK(lost == 0);
  CHECK(now_s() - t0 >= 0.19);
  sleep_s(3.3 * ttl);
  CHECK_OK(mongoelector_lease_lost(la, &lost));
  CHECK(lost == 0);
  CHECK_OK(mongoelector_locker_owned(a, &locked));
  CHECK(locked == 1);
  CHECK(probe_calls(&probe) == 0);

  /* b cannot take it: LOCK_EXISTS, TIMEOUT, CANCELLED. */
  mongoelector_lease_options_init(&o);
  o.blocking = 0;
  CHECK_STATUS(mongoelector_lease_acquire(b, &o, &lb), MONGOELECTOR_ERR_LOCK_EXISTS);
  mongoelector_lease_options_init(&o);
  o.timeout_seconds = 0.3;
  o.step_seconds = 0.05;
  t0 = now_s();
  CHECK_STATUS(mongoelector_lease_acquire(b, &o, &lb), MONGOELECTOR_ERR_TIMEOUT);
  CHECK(now_s() - t0 >= 0.29);
  CHECK_OK(mongoelector_locker_cancel(b));
  mongoelector_lease_options_init(&o);
  CHECK_STATUS(mongoelector_lease_acquire(b, &o, &lb), MONGOELECTOR_ERR_CANCELLED);
  CHECK(lb == NULL);

  /* b forces the lock away: a's next renewal finds it taken and the lease is lost,
   * announced once on the library's timer thread. */
  CHECK_OK(mongoelector_locker_acquire(b, 0, -1, 0.25, 1, &fence2));
  CHECK(fence2 > fence);
  t0 = now_s();
  CHECK_OK(mongoelector_lease_wait_lost(la, 3 * ttl, &lost));
  CHECK(lost == 1);
  CHECK(now_s() - t0 < ttl / 3 + 0.5);
  sleep_s(0.05);
  CHECK(probe_calls(&probe) == 1);
  CHECK(probe.lost_inside == 1);
  CHECK(probe.fence_inside == fence);
  CHECK(!pthread_equal(probe.thread, pthread_self()));
  CHECK_OK(mongoelector_lease_lost(la, &lost));
  CHECK(lost == 1);
  CHECK_OK(mongoelector_lease_wait_lost(la, -1, &lost)); /* returns at once once lost */
  CHECK(lost == 1);
  CHECK_OK(mongoelector_lease_fence(la, &lfence));
  CHECK(lfence == fence);
  /* Freeing a lost lease releases nothing: b still holds. */
  mongoelector_lease_free(la);
  la = NULL;
  CHECK_OK(mongoelector_locker_owned(b, &locked));
  CHECK(locked == 1);
  CHECK(probe_calls(&probe) == 1);
  CHECK_OK(mongoelector_locker_release(b, 0));

  /* After the free, a may take a new lease; freeing a live lease releases the lock. */
  CHECK_OK(mongoelector_lease_acquire(a, NULL, &la));
  CHECK_OK(mongoelector_lease_fence(la, &fence));
  CHECK(fence > fence2);
  mongoelector_lease_free(la);
  CHECK_OK(mongoelector_locker_locked(a, &locked));
  CHECK(locked == 0);
  CHECK_OK(mongoelector_locker_fence(a, &lfence));
  CHECK(lfence == 0);

  /* Once a frees its lease, b takes the lock at once (no waiting for expiry). */
  CHECK_OK(mongoelector_lease_acquire(a, NULL, &la));
  mongoelector_lease_free(la);
  mongoelector_lease_options_init(&o);
  o.blocking = 0;
  CHECK_OK(mongoelector_lease_acquire(b, &o, &lb));
  CHECK_OK(mongoelector_lease_lost(lb, &lost));
  CHECK(lost == 0);
  /* The locker must outlive the lease: free the lease first. */
  mongoelector_lease_free(lb);

  pthread_mutex_destroy(&probe.mu);
  mongoelector_locker_free(a);
  mongoelector_locker_free(b);
  mongoelector_client_free(client);
}

int main(int argc, char **argv) {
  const char *uri = getenv("MONGOELECTOR_TEST_URI");
  int offline = argc > 1 && strcmp(argv[1], "--offline") == 0;
  char dir[] = "/tmp/lease_test_XXXXXX";
  char sqlite_uri[256];
  char path[200];
  char key[64];
  long tag = (long)getpid() * 1000 + (long)(now_s() * 1000) % 1000;

  setvbuf(stdout, NULL, _IOLBF, 0);
  test_offline_args();

  CHECK(mkdtemp(dir) != NULL);
  sprintf(path, "%s/locks.db", dir);
  sprintf(sqlite_uri, "sqlite://%s", path);
  test_suite(sqlite_uri, "", "lease-sqlite");
  unlink(path);
  {
    char extra[220];
    sprintf(extra, "%s-wal", path);
    unlink(extra);
    sprintf(extra, "%s-shm", path);
    unlink(extra);
  }
  rmdir(dir);
  printf("lease_test: SQLite suite passed\n");
  if (offline) {
    printf("lease_test: %d passed, 0 failed\n", g_passed);
    return 0;
  }
  if (uri == NULL || uri[0] == '\0') {
    printf("lease_test: MONGOELECTOR_TEST_URI is not set: skipping the server tests\n");
    return 77;
  }
  {
    char db[64];
    sprintf(db, "lease_test_%ld", tag);
    sprintf(key, "lease-%ld", tag);
    g_unsafe_server = on_ferretdb();
    test_suite(uri, db, key);
  }
  printf("lease_test: %d passed, 0 failed\n", g_passed);
  return 0;
}
