/*
 * locker_fair_test: fair (FIFO) plain locks (`fair` in mongoelector_locker_config,
 * version 2) seen from C. Includes ONLY the public headers, links ONLY libmongoelector.so,
 * builds as -std=c99 -pedantic -Werror.
 *
 * Usage: locker_fair_test [--offline]
 *   --offline   the config's defaults and versions, then the scenarios on a memory://
 *               backend driven by a fake clock (no server, no sleeps).
 *   (default)   the defaults, then two waiters served in arrival order against the server
 *               at MONGOELECTOR_TEST_URI in real time; exits 77 (ctest: skipped) when it is
 *               unset.
 * Every check counts; the first failing one prints file:line and exits 1.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK_PROGRAM "locker_fair_test"
#include "check.h"
#include "mongoelector.h"
#include "mongoelector/testing.h"

#define WALL_START INT64_C(1800000000000)

/* The order in which the waiters got the lock. */
typedef struct turns {
  pthread_mutex_t mu;
  char order[8];
  int n;
} turns;

/* A blocking acquire on its own thread: `step` is its retry interval, `timeout` its limit
 * (< 0: none); records its name in `log` once it holds the lock. */
typedef struct waiter {
  char name;
  mongoelector_locker *locker;
  double step;
  double timeout;
  turns *log;
  mongoelector_status st;
  int64_t fence;
} waiter;

static void *wait_acquire(void *arg) {
  waiter *w = (waiter *)arg;
  mongoelector_acquire_options o;
  mongoelector_acquire_options_init(&o, MONGOELECTOR_ACQUIRE_OPTIONS_VERSION);
  o.step_seconds = w->step;
  o.timeout_seconds = w->timeout;
  w->st = mongoelector_locker_acquire_with(w->locker, &o, &w->fence);
  if (w->st == MONGOELECTOR_OK && w->log != NULL) {
    pthread_mutex_lock(&w->log->mu);
    w->log->order[w->log->n++] = w->name;
    pthread_mutex_unlock(&w->log->mu);
  }
  return NULL;
}

static mongoelector_status try_once(mongoelector_locker *l, int64_t *fence) {
  mongoelector_acquire_options o;
  mongoelector_acquire_options_init(&o, MONGOELECTOR_ACQUIRE_OPTIONS_VERSION);
  o.blocking = 0;
  return mongoelector_locker_acquire_with(l, &o, fence);
}

static int owned(mongoelector_locker *l) {
  int out = -1;
  CHECK_OK(mongoelector_locker_owned(l, &out));
  return out;
}

static mongoelector_locker *new_locker(mongoelector_client *client, const char *key, int fair,
                                       uint32_t version) {
  mongoelector_locker_config c;
  mongoelector_locker *l = NULL;
  memset(&c, 0, sizeof c);
  CHECK_OK(mongoelector_locker_config_init(&c, version));
  c.ttl_seconds = 30;
  /* Version 1 has no fair field: what follows its struct is ignored (garbage here). */
  c.fair = version >= 2 ? fair : 1;
  CHECK_OK(mongoelector_locker_new_with(client, key, &c, &l));
  return l;
}

/* Defaults: off; a version 1 struct is not written past its end. */
static void test_defaults(void) {
  mongoelector_locker_config c;
  memset(&c, 0xab, sizeof c);
  CHECK_OK(mongoelector_locker_config_init(&c, MONGOELECTOR_LOCKER_CONFIG_VERSION));
  CHECK(MONGOELECTOR_LOCKER_CONFIG_VERSION == 2 && c.version == 2 && c.fair == 0);
  memset(&c, 0xab, sizeof c);
  CHECK_OK(mongoelector_locker_config_init(&c, 1));
  CHECK(c.version == 1 && c.ttl_seconds > 0);
  CHECK(((unsigned char *)&c.fair)[0] == 0xab); /* not a field of version 1 */
}

/* A holder, then waiter A (retrying every 10 s), then waiter B (every 0.25 s). The
 * holder releases; one second later B looks again, long before A does. Fair: B is behind
 * A in the queue and keeps waiting; A gets the lock at its next look, B after A. Unfair
 * (fair 0, or a version 1 struct whatever follows it): B takes the free lock first. */
static void order_case(mongoelector_fake_clock *clock, mongoelector_client *client, int fair,
                       uint32_t version) {
  char key[96];
  mongoelector_locker *holder, *late;
  waiter a, b;
  turns log;
  pthread_t ta, tb;
  size_t waiting = 0;
  int64_t fence = 0;

  unique_name(key, sizeof key, "fair-order");
  memset(&log, 0, sizeof log);
  pthread_mutex_init(&log.mu, NULL);
  holder = new_locker(client, key, fair, version);
  late = new_locker(client, key, fair, version);
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  a.name = 'A';
  b.name = 'B';
  a.step = 10;
  b.step = 0.25;
  a.timeout = b.timeout = -1;
  a.log = b.log = &log;
  a.locker = new_locker(client, key, fair, version);
  b.locker = new_locker(client, key, fair, version);

  CHECK_OK(try_once(holder, &fence));
  CHECK_OK(mongoelector_fake_clock_wait_for_waiters(clock, 0, -1, &waiting));
  CHECK(pthread_create(&ta, NULL, wait_acquire, &a) == 0);
  CHECK_OK(mongoelector_fake_clock_wait_for_waiters(clock, waiting + 1, -1, NULL));
  CHECK(pthread_create(&tb, NULL, wait_acquire, &b) == 0);
  CHECK_OK(mongoelector_fake_clock_wait_for_waiters(clock, waiting + 2, -1, NULL));
  CHECK_OK(mongoelector_locker_release(holder, 0));
  if (fair) {
    /* Free, but two live waiters are queued: a non-blocking fair acquire is refused. */
    CHECK_STATUS(try_once(late, NULL), MONGOELECTOR_ERR_LOCK_EXISTS);
    CHECK_ERROR_SAYS("2 waiter(s) before this one");
  }
  CHECK_OK(mongoelector_fake_clock_advance(clock, 1000)); /* B looks, A does not yet */
  if (fair) {
    CHECK(owned(b.locker) == 0);
    CHECK(owned(a.locker) == 0);
    CHECK_OK(mongoelector_fake_clock_advance(clock, 10000)); /* A's turn */
    CHECK(pthread_join(ta, NULL) == 0);
    CHECK_OK(a.st);
    CHECK(a.fence > fence);
    CHECK(owned(b.locker) == 0);
    CHECK_OK(mongoelector_locker_release(a.locker, 0));
    CHECK_OK(mongoelector_fake_clock_advance(clock, 1000));
    CHECK(pthread_join(tb, NULL) == 0);
    CHECK_OK(b.st);
    CHECK(b.fence > a.fence);
    CHECK(log.n == 2 && log.order[0] == 'A' && log.order[1] == 'B');
    CHECK_OK(mongoelector_locker_release(b.locker, 0));
  } else {
    CHECK(pthread_join(tb, NULL) == 0);
    CHECK_OK(b.st);
    CHECK(b.fence > fence);
    CHECK(owned(a.locker) == 0);
    CHECK_OK(mongoelector_locker_release(b.locker, 0));
    CHECK_OK(mongoelector_fake_clock_advance(clock, 10000));
    CHECK(pthread_join(ta, NULL) == 0);
    CHECK_OK(a.st);
    CHECK(log.n == 2 && log.order[0] == 'B' && log.order[1] == 'A');
    CHECK_OK(mongoelector_locker_release(a.locker, 0));
  }
  pthread_mutex_destroy(&log.mu);
  mongoelector_locker_free(a.locker);
  mongoelector_locker_free(b.locker);
  mongoelector_locker_free(holder);
  mongoelector_locker_free(late);
}

/* A fair waiter that times out leaves the queue: the next non-blocking acquire is not
 * refused on its account. */
static void timeout_case(mongoelector_fake_clock *clock, mongoelector_client *client) {
  char key[96];
  mongoelector_locker *holder, *late;
  waiter w;
  pthread_t t;
  size_t waiting = 0;

  unique_name(key, sizeof key, "fair-timeout");
  holder = new_locker(client, key, 1, 2);
  late = new_locker(client, key, 1, 2);
  memset(&w, 0, sizeof w);
  w.name = 'W';
  w.step = 0.25;
  w.timeout = 5;
  w.locker = new_locker(client, key, 1, 2);
  CHECK_OK(try_once(holder, NULL));
  CHECK_OK(mongoelector_fake_clock_wait_for_waiters(clock, 0, -1, &waiting));
  CHECK(pthread_create(&t, NULL, wait_acquire, &w) == 0);
  CHECK_OK(mongoelector_fake_clock_wait_for_waiters(clock, waiting + 1, -1, NULL));
  CHECK_STATUS(try_once(late, NULL), MONGOELECTOR_ERR_LOCK_EXISTS); /* W is queued */
  CHECK_ERROR_SAYS("1 waiter(s) before this one");
  CHECK_OK(mongoelector_fake_clock_advance(clock, 6000)); /* past W's timeout, still held */
  CHECK(pthread_join(t, NULL) == 0);
  CHECK_STATUS(w.st, MONGOELECTOR_ERR_TIMEOUT);
  CHECK_OK(mongoelector_locker_release(holder, 0));
  CHECK_OK(try_once(late, NULL)); /* nobody left in the queue */
  CHECK_OK(mongoelector_locker_release(late, 0));
  mongoelector_locker_free(w.locker);
  mongoelector_locker_free(holder);
  mongoelector_locker_free(late);
}

static void test_offline(void) {
  mongoelector_fake_clock *clock = NULL;
  mongoelector_client *client = NULL;
  char uri[128];

  unique_name(uri, sizeof uri, "memory://fair-lock");
  CHECK_OK(mongoelector_fake_clock_new(WALL_START, 0, &clock));
  CHECK_OK(mongoelector_fake_clock_attach(clock, uri));
  CHECK_OK(mongoelector_client_new(uri, "", &client));
  order_case(clock, client, 1, 2);
  order_case(clock, client, 0, 2);
  order_case(clock, client, 0, 1); /* version 1: fair off whatever follows the struct */
  timeout_case(clock, client);
  mongoelector_client_free(client);
  mongoelector_fake_clock_free(clock);
}

/* Polls a fair non-blocking acquire until it is refused because of `n` queued waiters. */
static void until_queued(mongoelector_locker *late, int n) {
  char says[64];
  snprintf(says, sizeof says, "%d waiter(s) before this one", n);
  for (;;) {
    CHECK_STATUS(try_once(late, NULL), MONGOELECTOR_ERR_LOCK_EXISTS);
    g_passed--; /* a poll, not a check */
    if (strstr(mongoelector_last_error(), says) != NULL) break;
    sleep_s(0.02);
  }
  g_passed++;
}

/* Against the server: A queues, then B; the holder releases; A gets the lock before B. */
static void test_server(mongoelector_client *client) {
  char key[96];
  mongoelector_locker *holder, *late;
  waiter a, b;
  turns log;
  pthread_t ta, tb;
  int64_t fence = 0;

  unique_name(key, sizeof key, "fair-server");
  memset(&log, 0, sizeof log);
  pthread_mutex_init(&log.mu, NULL);
  holder = new_locker(client, key, 1, 2);
  late = new_locker(client, key, 1, 2);
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  a.name = 'A';
  b.name = 'B';
  a.step = b.step = 0.05;
  a.timeout = b.timeout = -1;
  a.log = b.log = &log;
  a.locker = new_locker(client, key, 1, 2);
  b.locker = new_locker(client, key, 1, 2);
  CHECK_OK(try_once(holder, &fence));
  CHECK(pthread_create(&ta, NULL, wait_acquire, &a) == 0);
  until_queued(late, 1);
  CHECK(pthread_create(&tb, NULL, wait_acquire, &b) == 0);
  until_queued(late, 2);
  CHECK_OK(mongoelector_locker_release(holder, 0));
  CHECK(pthread_join(ta, NULL) == 0);
  CHECK_OK(a.st);
  CHECK(a.fence > fence);
  CHECK(owned(b.locker) == 0);
  CHECK_OK(mongoelector_locker_release(a.locker, 0));
  CHECK(pthread_join(tb, NULL) == 0);
  CHECK_OK(b.st);
  CHECK(b.fence > a.fence);
  CHECK(log.n == 2 && log.order[0] == 'A' && log.order[1] == 'B');
  CHECK_OK(mongoelector_locker_release(b.locker, 0));
  pthread_mutex_destroy(&log.mu);
  mongoelector_locker_free(a.locker);
  mongoelector_locker_free(b.locker);
  mongoelector_locker_free(holder);
  mongoelector_locker_free(late);
}

int main(int argc, char **argv) {
  int offline = argc > 1 && strcmp(argv[1], "--offline") == 0;
  const char *uri = getenv("MONGOELECTOR_TEST_URI");
  mongoelector_client *client = NULL;

  test_defaults();
  if (offline) {
    test_offline();
    printf("locker_fair_test: %d passed, 0 failed\n", g_passed);
    return 0;
  }
  if (uri == NULL || uri[0] == '\0') {
    printf("locker_fair_test: MONGOELECTOR_TEST_URI is not set: skipped\n");
    return 77;
  }
  if (on_ferretdb()) {
    printf("locker_fair_test: the test server is FerretDB, which locks refuse: skipped\n");
    return 77;
  }
  CHECK_OK(mongoelector_client_new(uri, "locker_fair_test", &client));
  test_server(client);
  mongoelector_client_free(client);
  printf("locker_fair_test: %d passed, 0 failed\n", g_passed);
  return 0;
}
