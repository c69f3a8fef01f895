/*
 * capi_test: the C API seen from C. Includes ONLY the public header, links ONLY
 * libmongoelector.so, builds as -std=c99 -pedantic -Werror.
 *
 * Usage: capi_test [--offline]
 *   --offline   only the tests that need no server (argument checks, a server that is
 *               down, versions, status names, last error). Always runs in ctest.
 *   (default)   those, then everything against the server at MONGOELECTOR_TEST_URI;
 *               exits 77 (ctest: skipped) when that variable is unset.
 * CAPI_TEST_NO_FREED_HANDLES=1 skips the calls on freed handles (for valgrind/ASan).
 *
 * Every check counts; the first failing one prints file:line and exits 1.
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHECK_PROGRAM "capi_test"
#include "check.h"
#include "mongoelector.h"

/* ---- checks -------------------------------------------------------------------------- */

/* Set when the server cannot run the protocol safely (FerretDB): the tests then opt in
 * with allow_unsafe_server after checking the refusal. */
static int g_allow_unsafe = 0;
/* Calls on freed handles read freed memory on purpose (the library detects them when it
 * can); CAPI_TEST_NO_FREED_HANDLES=1 skips them under valgrind or ASan. */
static int g_freed_handle_checks = 1;

/* The last error mentions `needle` (so messages say what was wrong). */
#define CHECK_ERROR_MENTIONS(needle) CHECK(strstr(mongoelector_last_error(), (needle)) != NULL)

/* ---- helpers ------------------------------------------------------------------------- */

/* A loopback port nobody listens on: bind an ephemeral port, then close it. */
static int closed_port(void) {
  struct sockaddr_in addr;
  socklen_t len = sizeof addr;
  int port;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  CHECK(bind(fd, (struct sockaddr *)&addr, sizeof addr) == 0);
  CHECK(getsockname(fd, (struct sockaddr *)&addr, &len) == 0);
  port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

/* A mutex-guarded counter (C99 has no atomics), shared with callbacks and threads. */
typedef struct counter {
  pthread_mutex_t mu;
  int value;
} counter;

static void counter_init(counter *c) {
  pthread_mutex_init(&c->mu, NULL);
  c->value = 0;
}
static void counter_add(counter *c) {
  pthread_mutex_lock(&c->mu);
  c->value++;
  pthread_mutex_unlock(&c->mu);
}
static int counter_get(counter *c) {
  int v;
  pthread_mutex_lock(&c->mu);
  v = c->value;
  pthread_mutex_unlock(&c->mu);
  return v;
}
static void counter_destroy(counter *c) { pthread_mutex_destroy(&c->mu); }

/* ---- log callback ---------------------------------------------------------------------- */

typedef struct log_capture {
  pthread_mutex_t mu;
  int count;
  int bad_level;    /* a level outside the enum was seen */
  char last[512];   /* the last message */
  char wanted[256]; /* count `hits` of messages containing this */
  int hits;
} log_capture;

static void on_log(mongoelector_log_level level, const char *message, void *user_data) {
  log_capture *cap = (log_capture *)user_data;
  pthread_mutex_lock(&cap->mu);
  cap->count++;
  if (level != MONGOELECTOR_LOG_DEBUG && level != MONGOELECTOR_LOG_INFO &&
      level != MONGOELECTOR_LOG_WARNING && level != MONGOELECTOR_LOG_ERROR)
    cap->bad_level = 1;
  if (message == NULL) {
    cap->bad_level = 1;
  } else {
    strncpy(cap->last, message, sizeof cap->last - 1);
    cap->last[sizeof cap->last - 1] = '\0';
    if (cap->wanted[0] != '\0' && strstr(message, cap->wanted) != NULL) cap->hits++;
  }
  pthread_mutex_unlock(&cap->mu);
}

static log_capture g_log;

static void log_capture_reset(const char *wanted) {
  pthread_mutex_lock(&g_log.mu);
  g_log.count = 0;
  g_log.hits = 0;
  g_log.bad_level = 0;
  g_log.last[0] = '\0';
  strncpy(g_log.wanted, wanted, sizeof g_log.wanted - 1);
  g_log.wanted[sizeof g_log.wanted - 1] = '\0';
  pthread_mutex_unlock(&g_log.mu);
}

static int log_hits(void) {
  int n;
  pthread_mutex_lock(&g_log.mu);
  n = g_log.hits;
  pthread_mutex_unlock(&g_log.mu);
  return n;
}

/* ---- offline: library calls ------------------------------------------------------------ */

static void *fail_on_other_thread(void *arg) {
  mongoelector_status *st = (mongoelector_status *)arg;
  *st = mongoelector_client_new(NULL, "db", NULL);
  return NULL;
}

static void test_library(void) {
  char expected[64];
  pthread_t t;
  mongoelector_status other = MONGOELECTOR_OK;

  /* Version calls match the macros, and the macros agree with each other. */
  CHECK(strcmp(mongoelector_version(), MONGOELECTOR_VERSION_STRING) == 0);
  CHECK(mongoelector_version_number() == MONGOELECTOR_VERSION_NUMBER);
  sprintf(expected, "%d.%d.%d", MONGOELECTOR_VERSION_MAJOR, MONGOELECTOR_VERSION_MINOR,
          MONGOELECTOR_VERSION_PATCH);
  CHECK(strcmp(expected, MONGOELECTOR_VERSION_STRING) == 0);
  CHECK(MONGOELECTOR_VERSION_NUMBER == MONGOELECTOR_VERSION_MAJOR * 10000 +
                                           MONGOELECTOR_VERSION_MINOR * 100 +
                                           MONGOELECTOR_VERSION_PATCH);

  /* Status names. */
  CHECK(strcmp(mongoelector_status_name(MONGOELECTOR_OK), "MONGOELECTOR_OK") == 0);
  CHECK(strcmp(mongoelector_status_name(MONGOELECTOR_ERR_INVALID_ARGUMENT),
               "MONGOELECTOR_ERR_INVALID_ARGUMENT") == 0);
  CHECK(strcmp(mongoelector_status_name(MONGOELECTOR_ERR_LOCK_EXISTS),
               "MONGOELECTOR_ERR_LOCK_EXISTS") == 0);
  CHECK(strcmp(mongoelector_status_name(MONGOELECTOR_ERR_TIMEOUT), "MONGOELECTOR_ERR_TIMEOUT") ==
        0);
  CHECK(strcmp(mongoelector_status_name(MONGOELECTOR_ERR_TIME_OFFSET),
               "MONGOELECTOR_ERR_TIME_OFFSET") == 0);
  CHECK(strcmp(mongoelector_status_name(MONGOELECTOR_ERR_CANCELLED),
               "MONGOELECTOR_ERR_CANCELLED") == 0);
  CHECK(strcmp(mongoelector_status_name(MONGOELECTOR_ERR_UNAVAILABLE),
               "MONGOELECTOR_ERR_UNAVAILABLE") == 0);
  CHECK(strcmp(mongoelector_status_name(MONGOELECTOR_ERR_SERVER), "MONGOELECTOR_ERR_SERVER") == 0);
  CHECK(strcmp(mongoelector_status_name(MONGOELECTOR_ERR_UNSAFE_SERVER),
               "MONGOELECTOR_ERR_UNSAFE_SERVER") == 0);
  CHECK(strcmp(mongoelector_status_name(MONGOELECTOR_ERR_LOST), "MONGOELECTOR_ERR_LOST") == 0);
  CHECK(strcmp(mongoelector_status_name(MONGOELECTOR_ERR_INTERNAL), "MONGOELECTOR_ERR_INTERNAL") ==
        0);
  CHECK(strcmp(mongoelector_status_name((mongoelector_status)42), "unknown") == 0);

  /* No failure yet on this thread: empty message. */
  CHECK(strcmp(mongoelector_last_error(), "") == 0);

  /* mongoelector_free accepts NULL and what the library allocated (tested later). */
  mongoelector_free(NULL);

  /* The last error is per thread: a failure elsewhere leaves ours alone. */
  CHECK(pthread_create(&t, NULL, fail_on_other_thread, &other) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  CHECK(other == MONGOELECTOR_ERR_INVALID_ARGUMENT);
  CHECK(strcmp(mongoelector_last_error(), "") == 0);

  /* Log callback: install, reset to default. */
  CHECK_OK(mongoelector_set_log_callback(on_log, &g_log));
  CHECK_OK(mongoelector_set_log_callback(NULL, NULL));
}

/* ---- offline: options ------------------------------------------------------------------ */

static void test_options_init(void) {
  mongoelector_locker_options lo;
  mongoelector_elector_options eo;

  memset(&lo, 0xAB, sizeof lo);
  mongoelector_locker_options_init(&lo);
  CHECK(lo.version == MONGOELECTOR_LOCKER_OPTIONS_VERSION);
  CHECK(lo.collection == NULL);
  CHECK(lo.ttl_seconds == 600);
  CHECK(lo.timeparanoid == 1);
  CHECK(lo.max_offset_seconds == 0.5);
  CHECK(lo.delete_on_release == 0);
  CHECK(lo.allow_unsafe_server == 0);
  mongoelector_locker_options_init(NULL); /* no crash */

  memset(&eo, 0xAB, sizeof eo);
  mongoelector_elector_options_init(&eo);
  CHECK(eo.version == MONGOELECTOR_ELECTOR_OPTIONS_VERSION);
  CHECK(eo.ttl_seconds == 15);
  CHECK(eo.report_status == 1);
  CHECK(eo.app_version == NULL);
  CHECK(eo.on_leader == NULL && eo.on_leader_loss == NULL && eo.on_loop == NULL);
  CHECK(eo.user_data == NULL);
  CHECK(eo.allow_unsafe_server == 0);
  mongoelector_elector_options_init(NULL);
}

/* ---- offline: argument checks (none of these may touch the network) -------------------- */

static void check_bad_locker_args(mongoelector_client *client) {
  mongoelector_locker *lk = (mongoelector_locker *)0x1; /* must stay untouched */
  mongoelector_locker_options o;
  char long_key[2001];
  const char *non_utf8 = "bad\xff\xfekey";
  const char *truncated_utf8 = "caf\xc3";
  double t0 = now_s();

  memset(long_key, 'k', 2000);
  long_key[2000] = '\0';

  CHECK_INVALID(mongoelector_locker_new(NULL, "k", NULL, &lk));
  CHECK_ERROR_MENTIONS("client");
  CHECK_INVALID(mongoelector_locker_new(client, NULL, NULL, &lk));
  CHECK_ERROR_MENTIONS("key");
  CHECK_INVALID(mongoelector_locker_new(client, "", NULL, &lk));
  CHECK_ERROR_MENTIONS("key");
  CHECK_INVALID(mongoelector_locker_new(client, non_utf8, NULL, &lk));
  CHECK_ERROR_MENTIONS("UTF-8");
  CHECK_INVALID(mongoelector_locker_new(client, truncated_utf8, NULL, &lk));
  CHECK_INVALID(mongoelector_locker_new(client, long_key, NULL, &lk));
  CHECK_ERROR_MENTIONS("1024");
  CHECK_INVALID(mongoelector_locker_new(client, "k", NULL, NULL));

  mongoelector_locker_options_init(&o);
  o.version = 0;
  CHECK_INVALID(mongoelector_locker_new(client, "k", &o, &lk));
  CHECK_ERROR_MENTIONS("version");
  o.version = MONGOELECTOR_LOCKER_OPTIONS_VERSION + 1;
  CHECK_INVALID(mongoelector_locker_new(client, "k", &o, &lk));
  CHECK_ERROR_MENTIONS("version");

  mongoelector_locker_options_init(&o);
  o.ttl_seconds = 0;
  CHECK_INVALID(mongoelector_locker_new(client, "k", &o, &lk));
  CHECK_ERROR_MENTIONS("ttl");
  o.ttl_seconds = -1;
  CHECK_INVALID(mongoelector_locker_new(client, "k", &o, &lk));
  o.ttl_seconds = NAN;
  CHECK_INVALID(mongoelector_locker_new(client, "k", &o, &lk));
  o.ttl_seconds = INFINITY;
  CHECK_INVALID(mongoelector_locker_new(client, "k", &o, &lk));

  mongoelector_locker_options_init(&o);
  o.max_offset_seconds = NAN;
  CHECK_INVALID(mongoelector_locker_new(client, "k", &o, &lk));
  o.max_offset_seconds = -0.5;
  CHECK_INVALID(mongoelector_locker_new(client, "k", &o, &lk));

  mongoelector_locker_options_init(&o);
  o.collection = "";
  CHECK_INVALID(mongoelector_locker_new(client, "k", &o, &lk));
  o.collection = "bad$name";
  CHECK_INVALID(mongoelector_locker_new(client, "k", &o, &lk));
  o.collection = "bad\xffname";
  CHECK_INVALID(mongoelector_locker_new(client, "k", &o, &lk));
  CHECK_ERROR_MENTIONS("UTF-8");

  CHECK(lk == (mongoelector_locker *)0x1); /* out untouched on failure */
  CHECK(now_s() - t0 < 1.0);               /* rejected before any network access */
}

static void check_bad_elector_args(mongoelector_client *client) {
  mongoelector_elector *el = NULL;
  mongoelector_elector_options o;
  char long_key[2001];

  memset(long_key, 'e', 2000);
  long_key[2000] = '\0';

  CHECK_INVALID(mongoelector_elector_new(NULL, "k", NULL, &el));
  CHECK_INVALID(mongoelector_elector_new(client, NULL, NULL, &el));
  CHECK_INVALID(mongoelector_elector_new(client, "", NULL, &el));
  CHECK_INVALID(mongoelector_elector_new(client, "\xc0\xaf", NULL, &el)); /* overlong '/' */
  CHECK_INVALID(mongoelector_elector_new(client, long_key, NULL, &el));
  CHECK_INVALID(mongoelector_elector_new(client, "k", NULL, NULL));

  mongoelector_elector_options_init(&o);
  o.version = 0;
  CHECK_INVALID(mongoelector_elector_new(client, "k", &o, &el));
  o.version = 1000;
  CHECK_INVALID(mongoelector_elector_new(client, "k", &o, &el));
  CHECK_ERROR_MENTIONS("version");

  mongoelector_elector_options_init(&o);
  o.ttl_seconds = 0;
  CHECK_INVALID(mongoelector_elector_new(client, "k", &o, &el));
  o.ttl_seconds = -3;
  CHECK_INVALID(mongoelector_elector_new(client, "k", &o, &el));
  o.ttl_seconds = NAN;
  CHECK_INVALID(mongoelector_elector_new(client, "k", &o, &el));
  CHECK_ERROR_MENTIONS("ttl");
  o.ttl_seconds = -INFINITY;
  CHECK_INVALID(mongoelector_elector_new(client, "k", &o, &el));

  mongoelector_elector_options_init(&o);
  o.app_version = "1.0\xff";
  CHECK_INVALID(mongoelector_elector_new(client, "k", &o, &el));
  CHECK_ERROR_MENTIONS("app_version");
  CHECK(el == NULL);
}

static void check_null_handles(void) {
  const char *s = NULL;
  const char *s2 = NULL;
  char *json = NULL;
  int i = 0;
  int64_t i64 = 0;
  double d = 0;
  mongoelector_lock_info info;

  /* Every call on a NULL handle: INVALID_ARGUMENT, and the *_free functions accept NULL. */
  CHECK_INVALID(mongoelector_client_server_info(NULL, &s, &s2));
  CHECK_ERROR_MENTIONS("NULL");
  mongoelector_client_free(NULL);

  CHECK_INVALID(mongoelector_locker_acquire(NULL, 0, -1, 0.25, 0, &i64));
  CHECK_INVALID(mongoelector_locker_cancel(NULL));
  CHECK_INVALID(mongoelector_locker_release(NULL, 0));
  CHECK_INVALID(mongoelector_locker_touch(NULL, &i, &i64));
  CHECK_INVALID(mongoelector_locker_locked(NULL, &i));
  CHECK_INVALID(mongoelector_locker_owned(NULL, &i));
  CHECK_INVALID(mongoelector_locker_fence(NULL, &i64));
  CHECK_INVALID(mongoelector_locker_uuid(NULL, &s));
  CHECK_INVALID(mongoelector_locker_verify_time(NULL, &d));
  CHECK_INVALID(mongoelector_locker_current(NULL, &info, &i));
  mongoelector_locker_free(NULL);

  CHECK_INVALID(mongoelector_elector_start(NULL));
  CHECK_INVALID(mongoelector_elector_stop(NULL));
  CHECK_INVALID(mongoelector_elector_poll(NULL));
  CHECK_INVALID(mongoelector_elector_release(NULL));
  CHECK_INVALID(mongoelector_elector_is_leader(NULL, &i));
  CHECK_INVALID(mongoelector_elector_leader_exists(NULL, &i));
  CHECK_INVALID(mongoelector_elector_running(NULL, &i));
  CHECK_INVALID(mongoelector_elector_poll_wait(NULL, &d));
  CHECK_INVALID(mongoelector_elector_fence(NULL, &i64));
  CHECK_INVALID(mongoelector_elector_uuid(NULL, &s));
  CHECK_INVALID(mongoelector_elector_node_status(NULL, &json));
  CHECK_INVALID(mongoelector_elector_cluster_detail(NULL, &json));
  mongoelector_elector_free(NULL);

  CHECK(s == NULL && s2 == NULL && json == NULL); /* outs untouched */
}

static void test_offline(void) {
  mongoelector_client *client = NULL;
  mongoelector_client *freed = NULL;
  mongoelector_locker *lk = NULL;
  mongoelector_elector *el = NULL;
  mongoelector_locker_options lo;
  mongoelector_elector_options eo;
  const char *name = NULL;
  const char *version = NULL;
  char uri[128];
  double t0;
  double elapsed;

  test_library();
  test_options_init();
  check_null_handles();

  /* Client arguments. */
  CHECK_INVALID(mongoelector_client_new(NULL, "db", &client));
  CHECK_ERROR_MENTIONS("uri");
  CHECK_INVALID(mongoelector_client_new("mongodb://127.0.0.1:1/", NULL, &client));
  CHECK_ERROR_MENTIONS("database");
  CHECK_INVALID(mongoelector_client_new("mongodb://127.0.0.1:1/", "db", NULL));
  CHECK_INVALID(mongoelector_client_new("not a uri", "db", &client));
  CHECK_INVALID(mongoelector_client_new("mongodb://127.0.0.1:1/", "", &client));
  CHECK_INVALID(mongoelector_client_new("mongodb://127.0.0.1:1/",
                                        "d\xe9"
                                        "b",
                                        &client));
  CHECK_INVALID(mongoelector_client_new("mongodb://127.0.0.1:1/", "a.b", &client));
  CHECK(client == NULL);

  /* A server that is down: creating the client is lazy, the first call waits a bounded
   * time, then UNAVAILABLE. */
  sprintf(uri, "mongodb://127.0.0.1:%d/", closed_port());
  CHECK_OK(mongoelector_client_new(uri, "capi_test", &client));
  CHECK(client != NULL);
  check_bad_locker_args(client);
  check_bad_elector_args(client);
  CHECK_INVALID(mongoelector_client_server_info(client, NULL, &version));
  CHECK_INVALID(mongoelector_client_server_info(client, &name, NULL));

  t0 = now_s();
  CHECK_STATUS(mongoelector_client_server_info(client, &name, &version),
               MONGOELECTOR_ERR_UNAVAILABLE);
  elapsed = now_s() - t0;
  printf("capi_test: server_info on a closed port: UNAVAILABLE after %.2f s (%s)\n", elapsed,
         mongoelector_last_error());
  CHECK(elapsed < 10.0);
  CHECK(strlen(mongoelector_last_error()) > 0);
  CHECK(name == NULL && version == NULL);

  /* A locker (short ttl: short operation timeout) ensures its index on creation. */
  mongoelector_locker_options_init(&lo);
  lo.ttl_seconds = 2;
  t0 = now_s();
  CHECK_STATUS(mongoelector_locker_new(client, "down", &lo, &lk), MONGOELECTOR_ERR_UNAVAILABLE);
  elapsed = now_s() - t0;
  printf("capi_test: locker_new on a closed port: UNAVAILABLE after %.2f s\n", elapsed);
  CHECK(elapsed < 10.0);
  CHECK(lk == NULL);

  /* The default ttl (600 s) still gives a bounded wait. */
  t0 = now_s();
  CHECK_STATUS(mongoelector_locker_new(client, "down", NULL, &lk), MONGOELECTOR_ERR_UNAVAILABLE);
  elapsed = now_s() - t0;
  printf("capi_test: locker_new (ttl 600) on a closed port: UNAVAILABLE after %.2f s\n", elapsed);
  CHECK(elapsed < 10.0);

  mongoelector_elector_options_init(&eo);
  eo.ttl_seconds = 2;
  t0 = now_s();
  CHECK_STATUS(mongoelector_elector_new(client, "down", &eo, &el), MONGOELECTOR_ERR_UNAVAILABLE);
  elapsed = now_s() - t0;
  printf("capi_test: elector_new on a closed port: UNAVAILABLE after %.2f s\n", elapsed);
  CHECK(elapsed < 10.0);
  CHECK(el == NULL);

  mongoelector_client_free(client);

  /* A freed handle is detected (best effort: the memory may already be reused). */
  CHECK_OK(mongoelector_client_new(uri, "capi_test", &freed));
  mongoelector_client_free(freed);
  if (g_freed_handle_checks) {
    CHECK_INVALID(mongoelector_client_server_info(freed, &name, &version));
    CHECK_ERROR_MENTIONS("client");
    mongoelector_client_free(freed); /* a double free is ignored when detected */
  }
}

/* ---- online: locker -------------------------------------------------------------------- */

typedef struct acquire_job {
  mongoelector_locker *locker;
  double timeout;
  mongoelector_status status;
  int64_t fence;
  double elapsed;
} acquire_job;

static void *run_blocking_acquire(void *arg) {
  acquire_job *job = (acquire_job *)arg;
  double t0 = now_s();
  job->status = mongoelector_locker_acquire(job->locker, 1, job->timeout, 0.05, 0, &job->fence);
  job->elapsed = now_s() - t0;
  return NULL;
}

static void new_locker(mongoelector_client *client, const char *key, double ttl,
                       mongoelector_locker **out) {
  mongoelector_locker_options o;
  mongoelector_locker_options_init(&o);
  o.collection = "capi_locks";
  o.ttl_seconds = ttl;
  o.max_offset_seconds = 2; /* the test server runs on this host; allow a loaded machine */
  o.allow_unsafe_server = g_allow_unsafe;
  CHECK_OK(mongoelector_locker_new(client, key, &o, out));
  CHECK(*out != NULL);
}

static void test_locker(mongoelector_client *client, const char *key) {
  mongoelector_locker *a = NULL;
  mongoelector_locker *b = NULL;
  mongoelector_locker *c = NULL;
  mongoelector_locker_options o;
  mongoelector_lock_info info;
  const char *uuid_a = NULL;
  const char *uuid_b = NULL;
  int64_t f1 = 0, f2 = 0, f3 = 0, f = 0, last = 0;
  int64_t expire1 = 0, expire2 = 0;
  int i = -1, found = -1, renewed = -1, round;
  double offset = 1e9, t0, elapsed;
  char utf8_key[300];
  acquire_job job;
  pthread_t t;

  new_locker(client, key, 5, &a);
  new_locker(client, key, 5, &b);

  CHECK_OK(mongoelector_locker_uuid(a, &uuid_a));
  CHECK_OK(mongoelector_locker_uuid(b, &uuid_b));
  CHECK(uuid_a != NULL && strlen(uuid_a) == 36);
  CHECK(strcmp(uuid_a, uuid_b) != 0);
  CHECK_INVALID(mongoelector_locker_uuid(a, NULL));

  /* Nobody holds it yet. */
  CHECK_OK(mongoelector_locker_locked(a, &i));
  CHECK(i == 0);
  CHECK_OK(mongoelector_locker_current(a, &info, &found));
  CHECK(found == 0);
  CHECK_OK(mongoelector_locker_fence(a, &f));
  CHECK(f == 0);

  /* Argument checks of acquire. */
  CHECK_INVALID(mongoelector_locker_acquire(a, 0, 1.0, 0.25, 0, &f)); /* blocking=0 + timeout */
  CHECK_ERROR_MENTIONS("timeout");
  CHECK_INVALID(mongoelector_locker_acquire(a, 0, 0.0, 0.25, 0, &f));
  CHECK_INVALID(mongoelector_locker_acquire(a, 1, NAN, 0.25, 0, &f));
  CHECK_INVALID(mongoelector_locker_acquire(a, 1, 1.0, 0, 0, &f));
  CHECK_INVALID(mongoelector_locker_acquire(a, 1, 1.0, NAN, 0, &f));
  CHECK_INVALID(mongoelector_locker_acquire(a, 1, 1.0, -1, 0, &f));

  /* A takes it: fence > 0, owned, locked, current shows A. */
  CHECK_OK(mongoelector_locker_acquire(a, 0, -1, 0.25, 0, &f1));
  CHECK(f1 > 0);
  CHECK_OK(mongoelector_locker_fence(a, &f));
  CHECK(f == f1);
  CHECK_OK(mongoelector_locker_owned(a, &i));
  CHECK(i == 1);
  CHECK_OK(mongoelector_locker_locked(a, &i));
  CHECK(i == 1);
  CHECK_OK(mongoelector_locker_owned(b, &i));
  CHECK(i == 0);
  CHECK_OK(mongoelector_locker_locked(b, &i));
  CHECK(i == 1);
  CHECK_OK(mongoelector_locker_current(b, &info, &found));
  CHECK(found == 1);
  CHECK(strcmp(info.uuid, uuid_a) == 0);
  CHECK(strlen(info.host) > 0);
  CHECK(info.pid == (int64_t)getpid());
  CHECK(info.fence == f1);
  CHECK(info.created_ms > 1500000000000LL);
  CHECK(info.expire_ms - info.created_ms >= 4900 && info.expire_ms - info.created_ms <= 5100);
  CHECK_INVALID(mongoelector_locker_current(b, NULL, &found));
  CHECK_INVALID(mongoelector_locker_current(b, &info, NULL));
  CHECK_INVALID(mongoelector_locker_owned(b, NULL));
  CHECK_INVALID(mongoelector_locker_locked(b, NULL));
  CHECK_INVALID(mongoelector_locker_fence(b, NULL));

  /* B: LOCK_EXISTS (non-blocking), TIMEOUT (blocking with a timeout). */
  CHECK_STATUS(mongoelector_locker_acquire(b, 0, -1, 0.25, 0, &f), MONGOELECTOR_ERR_LOCK_EXISTS);
  CHECK_ERROR_MENTIONS(key);
  CHECK_ERROR_MENTIONS("owned by");
  t0 = now_s();
  CHECK_STATUS(mongoelector_locker_acquire(b, 1, 0.3, 0.05, 0, &f), MONGOELECTOR_ERR_TIMEOUT);
  elapsed = now_s() - t0;
  CHECK(elapsed >= 0.29 && elapsed < 5.0);
  CHECK_OK(mongoelector_locker_fence(b, &f));
  CHECK(f == 0);

  /* touch: A renews, B cannot. */
  expire1 = info.expire_ms;
  sleep_s(0.05);
  CHECK_OK(mongoelector_locker_touch(a, &renewed, &expire2));
  CHECK(renewed == 1);
  CHECK(expire2 >= expire1);
  CHECK_OK(mongoelector_locker_touch(a, &renewed, NULL));
  CHECK(renewed == 1);
  expire2 = 42;
  CHECK_OK(mongoelector_locker_touch(b, &renewed, &expire2));
  CHECK(renewed == 0 && expire2 == 0);
  CHECK_INVALID(mongoelector_locker_touch(a, NULL, &expire2));

  /* Time check against the server. */
  CHECK_OK(mongoelector_locker_verify_time(a, &offset));
  CHECK(offset > -2.0 && offset < 2.0);
  CHECK_OK(mongoelector_locker_verify_time(a, NULL));

  /* Releasing a lock one does not hold leaves the holder's lock alone. */
  CHECK_OK(mongoelector_locker_release(b, 0));
  CHECK_OK(mongoelector_locker_owned(a, &i));
  CHECK(i == 1);

  /* A releases: nobody holds it; releasing again is fine. */
  CHECK_OK(mongoelector_locker_release(a, 0));
  CHECK_OK(mongoelector_locker_owned(a, &i));
  CHECK(i == 0);
  CHECK_OK(mongoelector_locker_locked(b, &i));
  CHECK(i == 0);
  CHECK_OK(mongoelector_locker_fence(a, &f));
  CHECK(f == 0);
  CHECK_OK(mongoelector_locker_current(b, &info, &found));
  CHECK(found == 0);
  CHECK_OK(mongoelector_locker_release(a, 0));
  CHECK_OK(mongoelector_locker_touch(a, &renewed, NULL));
  CHECK(renewed == 0);

  /* B gets it with a bigger token; A forces it away with a bigger one still. */
  CHECK_OK(mongoelector_locker_acquire(b, 1, 2.0, 0.05, 0, &f2));
  CHECK(f2 > f1);
  CHECK_OK(mongoelector_locker_acquire(a, 0, -1, 0.25, 1, &f3));
  CHECK(f3 > f2);
  CHECK_OK(mongoelector_locker_owned(b, &i));
  CHECK(i == 0);
  CHECK_OK(mongoelector_locker_touch(b, &renewed, NULL)); /* B's lease was taken over */
  CHECK(renewed == 0);
  CHECK_OK(mongoelector_locker_release(b, 1)); /* force: releases A's lock */
  CHECK_OK(mongoelector_locker_owned(a, &i));
  CHECK(i == 0);

  /* Tokens strictly increase over many acquisitions mixing release, force, and
   * acquisitions without a release (the next one forces). */
  last = f3;
  for (round = 0; round < 12; round++) {
    mongoelector_locker *who = (round % 2 == 0) ? a : b;
    int force = (round % 3 == 0);
    CHECK_OK(mongoelector_locker_acquire(who, 1, 5.0, 0.05, force, &f));
    CHECK(f > last);
    last = f;
    if (round % 4 != 3) {
      CHECK_OK(mongoelector_locker_release(who, 0));
    } else {
      CHECK_OK(mongoelector_locker_acquire(who == a ? b : a, 0, -1, 0.25, 1, &f));
      CHECK(f > last);
      last = f;
      CHECK_OK(mongoelector_locker_release(who == a ? b : a, 0));
    }
  }

  /* Expiry: a lock whose holder stopped renewing is taken over at its ttl. */
  mongoelector_locker_options_init(&o);
  o.collection = "capi_locks";
  o.ttl_seconds = 1;
  o.max_offset_seconds = 2;
  o.allow_unsafe_server = g_allow_unsafe;
  CHECK_OK(mongoelector_locker_new(client, key, &o, &c));
  CHECK_OK(mongoelector_locker_acquire(c, 0, -1, 0.25, 0, &f));
  CHECK(f > last);
  last = f;
  CHECK_STATUS(mongoelector_locker_acquire(a, 0, -1, 0.25, 0, &f), MONGOELECTOR_ERR_LOCK_EXISTS);
  t0 = now_s();
  CHECK_OK(mongoelector_locker_acquire(a, 1, 5.0, 0.05, 0, &f));
  elapsed = now_s() - t0;
  printf("capi_test: takeover of an expired lock (ttl 1 s) after %.2f s\n", elapsed);
  CHECK(elapsed < 2.5);
  CHECK(f > last);
  last = f;
  CHECK_OK(mongoelector_locker_owned(c, &i));
  CHECK(i == 0);
  mongoelector_locker_free(c);

  /* cancel from another thread: a blocking acquire (no timeout) returns CANCELLED. */
  memset(&job, 0, sizeof job);
  job.locker = b;
  job.timeout = -1;
  CHECK(pthread_create(&t, NULL, run_blocking_acquire, &job) == 0);
  sleep_s(0.4);
  /* Local reads answer while the acquire blocks (they skip the handle's mutex). */
  t0 = now_s();
  CHECK_OK(mongoelector_locker_fence(b, &f));
  CHECK_OK(mongoelector_locker_uuid(b, &uuid_b));
  CHECK(now_s() - t0 < 1.0); /* a read that took the mutex would wait forever */
  t0 = now_s();
  CHECK_OK(mongoelector_locker_cancel(b));
  CHECK(pthread_join(t, NULL) == 0);
  elapsed = now_s() - t0;
  CHECK(job.status == MONGOELECTOR_ERR_CANCELLED);
  CHECK(job.elapsed >= 0.35);
  printf("capi_test: cancelled blocking acquire returned %.3f s after cancel\n", elapsed);
  CHECK(elapsed < 1.0);

  /* A cancel that comes first is not lost, and is consumed by the acquire it stops. */
  CHECK_OK(mongoelector_locker_cancel(b));
  CHECK_STATUS(mongoelector_locker_acquire(b, 1, -1, 0.05, 0, &f), MONGOELECTOR_ERR_CANCELLED);
  CHECK_STATUS(mongoelector_locker_acquire(b, 1, 0.2, 0.05, 0, &f), MONGOELECTOR_ERR_TIMEOUT);

  /* A still holds; release, then B can take it. */
  CHECK_OK(mongoelector_locker_release(a, 0));
  CHECK_OK(mongoelector_locker_acquire(b, 1, 2.0, 0.05, 0, &f));
  CHECK(f > last);
  CHECK_OK(mongoelector_locker_release(b, 0));

  /* A key of multi-byte UTF-8 characters is accepted and round-trips. */
  memset(utf8_key, 0, sizeof utf8_key);
  for (round = 0; round < 100; round++) strcat(utf8_key, "\xc3\xa9"); /* e acute */
  mongoelector_locker_options_init(&o);
  o.allow_unsafe_server = g_allow_unsafe;
  CHECK_OK(mongoelector_locker_new(client, utf8_key, &o, &c));
  CHECK_OK(mongoelector_locker_acquire(c, 0, -1, 0.25, 0, &f));
  CHECK_OK(mongoelector_locker_current(c, &info, &found));
  CHECK(found == 1 && info.fence == f);
  CHECK_OK(mongoelector_locker_release(c, 0));
  mongoelector_locker_free(c);

  /* A freed locker is detected (best effort). */
  mongoelector_locker_free(b);
  if (g_freed_handle_checks) {
    CHECK_INVALID(mongoelector_locker_owned(b, &i));
    CHECK_INVALID(mongoelector_locker_cancel(b));
  }
  mongoelector_locker_free(a);
}

/* Exactly 1024 bytes with a 4-byte character at the end; 1025 is rejected. */
static void test_key_limits(mongoelector_client *client) {
  char key[1100];
  mongoelector_locker *lk = NULL;
  memset(key, 'x', sizeof key);
  memcpy(key + 1020, "\xf0\x9f\x94\x92", 4); /* U+1F512 */
  key[1024] = '\0';
  CHECK_OK(mongoelector_locker_new(client, key, NULL, &lk));
  mongoelector_locker_free(lk);
  lk = NULL;
  key[1024] = 'x';
  key[1025] = '\0';
  CHECK_INVALID(mongoelector_locker_new(client, key, NULL, &lk));
  CHECK(lk == NULL);
}

/* A max offset of 0 fails whenever the clocks differ at all; the offset is written in
 * both cases. */
static void test_time_offset(mongoelector_client *client, const char *key) {
  mongoelector_locker *lk = NULL;
  mongoelector_locker_options o;
  mongoelector_status st;
  double offset = 1e9;
  int64_t f = 0;
  mongoelector_locker_options_init(&o);
  o.collection = "capi_locks";
  o.max_offset_seconds = 0;
  o.allow_unsafe_server = g_allow_unsafe;
  CHECK_OK(mongoelector_locker_new(client, key, &o, &lk));
  st = mongoelector_locker_verify_time(lk, &offset);
  CHECK(offset > -2.0 && offset < 2.0);
  printf("capi_test: verify_time with max offset 0: %s, offset %.4f s\n",
         mongoelector_status_name(st), offset);
  /* An offset is only reported when it is certain: beyond the estimate's uncertainty
   * (half the sample's round trip), which on loopback is a few ms. */
  if (st == MONGOELECTOR_ERR_TIME_OFFSET) {
    CHECK(offset != 0);
    CHECK_ERROR_MENTIONS("maxoffset");
  } else {
    CHECK(st == MONGOELECTOR_OK);
    CHECK(offset > -0.05 && offset < 0.05);
  }
  /* timeparanoid (the default) measures again before acquiring: refused unless that
   * measurement happens to find the clocks equal to the millisecond. */
  st = mongoelector_locker_acquire(lk, 0, -1, 0.25, 0, &f);
  CHECK(st == MONGOELECTOR_ERR_TIME_OFFSET || st == MONGOELECTOR_OK);
  if (st == MONGOELECTOR_OK) CHECK_OK(mongoelector_locker_release(lk, 0));
  mongoelector_locker_free(lk);
}

/* ---- online: elector ------------------------------------------------------------------- */

typedef struct elector_probe {
  counter leader;
  counter loss;
  counter loop;
  mongoelector_elector *self; /* for stop-from-callback */
  int stop_in_loop;
  mongoelector_status stop_status;
} elector_probe;

static void probe_init(elector_probe *p) {
  counter_init(&p->leader);
  counter_init(&p->loss);
  counter_init(&p->loop);
  p->self = NULL;
  p->stop_in_loop = 0;
  p->stop_status = MONGOELECTOR_ERR_INTERNAL;
}
static void probe_destroy(elector_probe *p) {
  counter_destroy(&p->leader);
  counter_destroy(&p->loss);
  counter_destroy(&p->loop);
}

static void cb_leader(void *ud) { counter_add(&((elector_probe *)ud)->leader); }
static void cb_loss(void *ud) { counter_add(&((elector_probe *)ud)->loss); }
static void cb_loop(void *ud) {
  elector_probe *p = (elector_probe *)ud;
  counter_add(&p->loop);
  /* Callbacks may stop their own elector. */
  if (p->stop_in_loop && p->self != NULL) p->stop_status = mongoelector_elector_stop(p->self);
}

static void new_elector(mongoelector_client *client, const char *key, double ttl,
                        elector_probe *probe, mongoelector_elector **out) {
  mongoelector_elector_options o;
  mongoelector_elector_options_init(&o);
  o.ttl_seconds = ttl;
  o.app_version = "9.8.7-capi";
  o.on_leader = cb_leader;
  o.on_leader_loss = cb_loss;
  o.on_loop = cb_loop;
  o.user_data = probe;
  o.allow_unsafe_server = g_allow_unsafe;
  CHECK_OK(mongoelector_elector_new(client, key, &o, out));
  CHECK(*out != NULL);
}

static int wait_for_flag(mongoelector_elector *el,
                         mongoelector_status (*get)(mongoelector_elector *, int *), int want,
                         double timeout) {
  double deadline = now_s() + timeout;
  int v = -1;
  for (;;) {
    CHECK_OK(get(el, &v));
    if (v == want) return 1;
    if (now_s() > deadline) return 0;
    sleep_s(0.02);
  }
}

/* Waits until the counter reaches `want` (callbacks run just after the state they
 * report changes, on the elector's thread). */
static int wait_for_count(counter *c, int want, double timeout) {
  double deadline = now_s() + timeout;
  while (counter_get(c) < want) {
    if (now_s() > deadline) return 0;
    sleep_s(0.01);
  }
  return 1;
}

static void test_elector(mongoelector_client *client, const char *key) {
  mongoelector_elector *e1 = NULL;
  mongoelector_elector *e2 = NULL;
  mongoelector_elector *e3 = NULL;
  elector_probe p1, p2, p3;
  const char *uuid1 = NULL;
  const char *uuid2 = NULL;
  char *json = NULL;
  char needle[128];
  int i = -1;
  int64_t fence1 = 0, fence2 = 0;
  double wait = 0, t0;

  probe_init(&p1);
  probe_init(&p2);
  probe_init(&p3);
  log_capture_reset("became leader");
  CHECK_OK(mongoelector_set_log_callback(on_log, &g_log));

  new_elector(client, key, 2, &p1, &e1);
  new_elector(client, key, 2, &p2, &e2);
  CHECK_OK(mongoelector_elector_uuid(e1, &uuid1));
  CHECK_OK(mongoelector_elector_uuid(e2, &uuid2));
  CHECK(strlen(uuid1) == 36 && strcmp(uuid1, uuid2) != 0);

  CHECK_OK(mongoelector_elector_running(e1, &i));
  CHECK(i == 0);
  CHECK_OK(mongoelector_elector_is_leader(e1, &i));
  CHECK(i == 0);
  CHECK_OK(mongoelector_elector_fence(e1, &fence1));
  CHECK(fence1 == 0);

  /* e1 runs its loop and becomes leader. */
  t0 = now_s();
  CHECK_OK(mongoelector_elector_start(e1));
  CHECK_OK(mongoelector_elector_start(e1)); /* no-op while running */
  CHECK_OK(mongoelector_elector_running(e1, &i));
  CHECK(i == 1);
  CHECK(wait_for_flag(e1, mongoelector_elector_is_leader, 1, 10.0));
  printf("capi_test: elector became leader %.2f s after start\n", now_s() - t0);
  CHECK(wait_for_count(&p1.leader, 1, 5.0));
  CHECK(wait_for_count(&p1.loop, 1, 5.0));
  CHECK(counter_get(&p1.leader) == 1);
  CHECK(counter_get(&p1.loss) == 0);
  CHECK_OK(mongoelector_elector_leader_exists(e1, &i));
  CHECK(i == 1);
  CHECK_OK(mongoelector_elector_poll_wait(e1, &wait));
  CHECK(wait == 1.0); /* ttl/2 as leader */
  CHECK_OK(mongoelector_elector_fence(e1, &fence1));
  CHECK(fence1 > 0);

  /* The log callback heard about it. */
  CHECK(log_hits() >= 1);
  pthread_mutex_lock(&g_log.mu);
  CHECK(g_log.bad_level == 0);
  pthread_mutex_unlock(&g_log.mu);

  /* Node status and cluster detail as JSON. */
  CHECK_OK(mongoelector_elector_node_status(e1, &json));
  CHECK(json != NULL && json[0] == '{');
  printf("capi_test: node_status %s\n", json);
  CHECK(strstr(json, "\"is_leader\" : true") != NULL);
  CHECK(strstr(json, "\"elector_running\" : true") != NULL);
  CHECK(strstr(json, uuid1) != NULL);
  CHECK(strstr(json, "\"app_version\" : \"9.8.7-capi\"") != NULL);
  CHECK(strstr(json, "{ \"$date\" : \"20") != NULL); /* relaxed Extended JSON: ISO-8601 */
  mongoelector_free(json);
  json = NULL;

  /* e2 (not started) polls by hand: follower. */
  CHECK_OK(mongoelector_elector_poll(e2));
  CHECK(counter_get(&p2.loop) == 1);
  CHECK(counter_get(&p2.leader) == 0);
  CHECK_OK(mongoelector_elector_is_leader(e2, &i));
  CHECK(i == 0);
  CHECK_OK(mongoelector_elector_leader_exists(e2, &i));
  CHECK(i == 1);
  CHECK_OK(mongoelector_elector_poll_wait(e2, &wait));
  CHECK(wait == 2.0); /* ttl as follower */
  CHECK_OK(mongoelector_elector_fence(e2, &fence2));
  CHECK(fence2 == 0);
  CHECK_OK(mongoelector_elector_running(e2, &i));
  CHECK(i == 0);

  CHECK_OK(mongoelector_elector_cluster_detail(e2, &json));
  printf("capi_test: cluster_detail %s\n", json);
  CHECK(strncmp(json, "{ \"member_detail\" : [ ", 22) == 0);
  sprintf(needle, "\"leader\" : { \"host\" : ");
  CHECK(strstr(json, needle) != NULL);
  sprintf(needle, "\"uuid\" : \"%s\", \"payload\" : null }", uuid1);
  CHECK(strstr(json, needle) != NULL); /* the leader is e1, which publishes no payload */
  CHECK(strstr(json, "\"timestamp\" : { \"$date\" : \"20") != NULL);
  mongoelector_free(json);
  json = NULL;

  /* NULL outs. */
  CHECK_INVALID(mongoelector_elector_is_leader(e1, NULL));
  CHECK_INVALID(mongoelector_elector_leader_exists(e1, NULL));
  CHECK_INVALID(mongoelector_elector_running(e1, NULL));
  CHECK_INVALID(mongoelector_elector_poll_wait(e1, NULL));
  CHECK_INVALID(mongoelector_elector_fence(e1, NULL));
  CHECK_INVALID(mongoelector_elector_uuid(e1, NULL));
  CHECK_INVALID(mongoelector_elector_node_status(e1, NULL));
  CHECK_INVALID(mongoelector_elector_cluster_detail(e1, NULL));

  /* stop: the loop ends, leadership is released, on_leader_loss fires once. */
  CHECK_OK(mongoelector_elector_stop(e1));
  CHECK_OK(mongoelector_elector_running(e1, &i));
  CHECK(i == 0);
  CHECK_OK(mongoelector_elector_is_leader(e1, &i));
  CHECK(i == 0);
  CHECK(counter_get(&p1.loss) == 1);
  CHECK_OK(mongoelector_elector_fence(e1, &fence2));
  CHECK(fence2 == 0);
  CHECK_OK(mongoelector_elector_stop(e1)); /* again: no-op */
  CHECK(counter_get(&p1.loss) == 1);

  /* e2 takes over at once (the lock was released, not left to expire). */
  CHECK_OK(mongoelector_elector_poll(e2));
  CHECK_OK(mongoelector_elector_is_leader(e2, &i));
  CHECK(i == 1);
  CHECK(counter_get(&p2.leader) == 1);
  CHECK_OK(mongoelector_elector_fence(e2, &fence2));
  CHECK(fence2 > fence1);
  CHECK_OK(mongoelector_elector_node_status(e2, &json));
  CHECK(strstr(json, "\"is_leader\" : true") != NULL);
  CHECK(strstr(json, "\"elector_running\" : false") != NULL);
  mongoelector_free(json);
  json = NULL;

  /* release: gives up leadership now. */
  CHECK_OK(mongoelector_elector_release(e2));
  CHECK_OK(mongoelector_elector_is_leader(e2, &i));
  CHECK(i == 0);
  CHECK(counter_get(&p2.loss) == 1);
  CHECK_OK(mongoelector_elector_release(e2)); /* not leader: nothing fires */
  CHECK(counter_get(&p2.loss) == 1);

  /* A callback may stop its own elector. */
  new_elector(client, key, 2, &p3, &e3);
  p3.self = e3;
  p3.stop_in_loop = 1;
  CHECK_OK(mongoelector_elector_start(e3));
  CHECK(wait_for_flag(e3, mongoelector_elector_running, 0, 10.0));
  CHECK(p3.stop_status == MONGOELECTOR_OK);
  CHECK(counter_get(&p3.loop) == 1);
  mongoelector_elector_free(e3);

  /* free of a running leader stops it and fires on_leader_loss. */
  CHECK_OK(mongoelector_elector_start(e2));
  CHECK(wait_for_flag(e2, mongoelector_elector_is_leader, 1, 10.0));
  CHECK(wait_for_count(&p2.leader, 2, 5.0));
  CHECK(counter_get(&p2.leader) == 2);
  mongoelector_elector_free(e2);
  CHECK(counter_get(&p2.loss) == 2);

  /* node_status is strict JSON: quotes, backslashes and control characters escaped,
   * UTF-8 kept as is. */
  {
    mongoelector_elector *e4 = NULL;
    mongoelector_elector_options o;
    mongoelector_elector_options_init(&o);
    o.ttl_seconds = 2;
    o.report_status = 0;
    o.allow_unsafe_server = g_allow_unsafe;
    o.app_version = "q\"b\\s\n\t\x01 \xc3\xa9";
    CHECK_OK(mongoelector_elector_new(client, key, &o, &e4));
    CHECK_OK(mongoelector_elector_node_status(e4, &json));
    CHECK(strstr(json, "\"app_version\" : \"q\\\"b\\\\s\\n\\t\\u0001 \xc3\xa9\"") != NULL);
    CHECK(strstr(json, "\"is_leader\" : false") != NULL);
    mongoelector_free(json);
    json = NULL;
    mongoelector_elector_free(e4);
  }

  /* A freed elector is detected (best effort). */
  mongoelector_elector_free(e1);
  if (g_freed_handle_checks) CHECK_INVALID(mongoelector_elector_is_leader(e1, &i));

  CHECK_OK(mongoelector_set_log_callback(NULL, NULL));
  probe_destroy(&p1);
  probe_destroy(&p2);
  probe_destroy(&p3);
}

/* ---- online: server safety ------------------------------------------------------------- */

/* MongoDB and mongo-java-server run findAndModify atomically; others (FerretDB) are
 * refused unless allow_unsafe_server is set. */
static void test_server_safety(mongoelector_client *client, const char *key, const char *name) {
  mongoelector_locker *lk = NULL;
  mongoelector_locker_options o;
  mongoelector_status st;
  int64_t f = 0;
  mongoelector_locker_options_init(&o);
  o.collection = "capi_locks";
  o.max_offset_seconds = 2;
  CHECK_OK(mongoelector_locker_new(client, key, &o, &lk));
  st = mongoelector_locker_acquire(lk, 0, -1, 0.25, 0, &f);
  if (strcmp(name, "MongoDB") == 0 || strcmp(name, "mongo-java-server") == 0 ||
      strcmp(name, "SQLite") == 0) {
    CHECK_OK(st);
    CHECK_OK(mongoelector_locker_release(lk, 0));
  } else {
    CHECK(st == MONGOELECTOR_ERR_UNSAFE_SERVER);
    CHECK_ERROR_MENTIONS("allow_unsafe_server");
    printf("capi_test: %s refused as unsafe (%s); continuing with allow_unsafe_server=1\n", name,
           mongoelector_last_error());
    g_allow_unsafe = 1;
  }
  mongoelector_locker_free(lk);
}

static void test_elector_refuses_unsafe(mongoelector_client *client, const char *key) {
  mongoelector_elector_options o;
  mongoelector_elector *e = NULL;
  mongoelector_elector_options_init(&o);
  o.allow_unsafe_server = 1;
  CHECK_INVALID(mongoelector_elector_new(client, key, &o, &e));
  CHECK(e == NULL);
  CHECK_ERROR_MENTIONS("allow_unsafe_server");
}

/* ---- online: client -------------------------------------------------------------------- */

static void test_online(const char *uri) {
  mongoelector_client *client = NULL;
  const char *name = NULL;
  const char *version = NULL;
  char db[64];
  char key[64];
  long tag = (long)getpid() * 1000 + (long)(now_s() * 1000) % 1000;

  sprintf(db, "capi_test_%ld", tag);
  CHECK_OK(mongoelector_client_new(uri, db, &client));
  CHECK_OK(mongoelector_client_server_info(client, &name, &version));
  CHECK(name != NULL && strlen(name) > 0);
  CHECK(version != NULL && strlen(version) > 0);
  printf("capi_test: server %s %s at %s\n", name, version, uri);

  sprintf(key, "capi-lock-%ld", tag);
  test_server_safety(client, key, name);
  test_locker(client, key);
  test_key_limits(client);
  test_time_offset(client, "capi-time");
  sprintf(key, "capi-elector-%ld", tag);
  if (g_allow_unsafe) {
    /* Electors refuse allow_unsafe_server (two leaders and repeated tokens are possible
     * on a server whose findAndModify is not atomic): only the refusal is tested here. */
    test_elector_refuses_unsafe(client, key);
    printf("capi_test: elector tests skipped on %s: electors refuse allow_unsafe_server\n", name);
  } else {
    test_elector(client, key);
  }

  mongoelector_client_free(client);
}

int main(int argc, char **argv) {
  const char *uri = getenv("MONGOELECTOR_TEST_URI");
  int offline = argc > 1 && strcmp(argv[1], "--offline") == 0;

  const char *no_freed = getenv("CAPI_TEST_NO_FREED_HANDLES");
  g_freed_handle_checks = !(no_freed != NULL && strcmp(no_freed, "1") == 0);
  pthread_mutex_init(&g_log.mu, NULL);
  setvbuf(stdout, NULL, _IOLBF, 0);

  test_offline();
  if (offline) {
    printf("capi_test: %d passed, 0 failed\n", g_passed);
    return 0;
  }
  if (uri == NULL || uri[0] == '\0') {
    printf(
        "capi_test: MONGOELECTOR_TEST_URI is not set: skipping the server tests "
        "(tests/servers/testserver.sh run java -- ctest -L integration)\n");
    return 77;
  }
  test_online(uri);
  printf("capi_test: %d passed, 0 failed\n", g_passed);
  return 0;
}
