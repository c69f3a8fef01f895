/*
 * rwlock_test: the read-write lock C API (mongoelector_rwlock_*) seen from C. Includes ONLY
 * the public header, links ONLY libmongoelector.so, builds as -std=c99 -pedantic -Werror.
 *
 * Usage: rwlock_test [--offline]
 *   --offline   argument checks, then the suite on memory:// and on the embedded SQLite
 *               backend in a temporary directory (no server).
 *   (default)   the argument checks, then the suite against the server at
 *               MONGOELECTOR_TEST_URI; exits 77 (ctest: skipped) when it is unset.
 * Every check counts; the first failing one prints file:line and exits 1.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK_PROGRAM "rwlock_test"
#include "check.h"
#include "mongoelector.h"

static int g_unsafe_server = 0; /* the test server is FerretDB */

static void unique_key(char *out, size_t n, const char *prefix) {
  static int counter = 0;
  snprintf(out, n, "%s-%ld-%d-%d", prefix, (long)getpid(), (int)time(NULL), ++counter);
}

static void config(mongoelector_rwlock_config *cfg, int64_t max_readers, double ttl) {
  CHECK_OK(mongoelector_rwlock_config_init(cfg, MONGOELECTOR_RWLOCK_CONFIG_VERSION));
  cfg->max_readers = max_readers;
  cfg->ttl_seconds = ttl;
  cfg->max_offset_seconds = 2; /* the test server runs on this host; allow a loaded machine */
  cfg->allow_unsafe_server = g_unsafe_server;
}

static mongoelector_rwlock *new_rwlock(mongoelector_client *client, const char *key,
                                       const mongoelector_rwlock_config *cfg) {
  mongoelector_rwlock *rw = NULL;
  CHECK_OK(mongoelector_rwlock_new(client, key, cfg, &rw));
  CHECK(rw != NULL);
  return rw;
}

static void options(mongoelector_acquire_options *o, int blocking, double timeout) {
  CHECK_OK(mongoelector_acquire_options_init(o, MONGOELECTOR_ACQUIRE_OPTIONS_VERSION));
  o->blocking = blocking;
  o->timeout_seconds = timeout;
  o->step_seconds = 0.05;
}

/* ---- argument checks (no backend needed) ------------------------------------------- */

static void test_args(void) {
  mongoelector_rwlock_config cfg;
  mongoelector_rwlock *rw = NULL;
  mongoelector_rwlock_lease *lease = NULL;
  mongoelector_rwlock_holder *holders = NULL;
  mongoelector_rwlock_side side = MONGOELECTOR_RWLOCK_READ;
  mongoelector_client *client = NULL;
  size_t n = 0;
  int64_t fence = 0;
  int flag = 0;

  CHECK_INVALID(mongoelector_rwlock_config_init(NULL, MONGOELECTOR_RWLOCK_CONFIG_VERSION));
  CHECK_INVALID(mongoelector_rwlock_config_init(&cfg, 0));
  CHECK_INVALID(mongoelector_rwlock_config_init(&cfg, MONGOELECTOR_RWLOCK_CONFIG_VERSION + 1));
  CHECK_ERROR_SAYS("mongoelector_rwlock_config_init");
  /* The documented defaults, shared by every binding. */
  memset(&cfg, 0xab, sizeof cfg);
  CHECK_OK(mongoelector_rwlock_config_init(&cfg, MONGOELECTOR_RWLOCK_CONFIG_VERSION));
  CHECK(cfg.version == MONGOELECTOR_RWLOCK_CONFIG_VERSION && cfg.collection == NULL);
  CHECK(cfg.max_readers == 64 && cfg.writer_preference == 1 && cfg.ttl_seconds == 600);
  CHECK(cfg.timeparanoid == 1 && cfg.max_offset_seconds == 0.5);
  CHECK(cfg.allow_unsafe_server == 0 && cfg.op_timeout_seconds == 0);

  CHECK(strcmp(mongoelector_rwlock_side_name(MONGOELECTOR_RWLOCK_READ), "read") == 0);
  CHECK(strcmp(mongoelector_rwlock_side_name(MONGOELECTOR_RWLOCK_WRITE), "write") == 0);
  CHECK(strcmp(mongoelector_rwlock_side_name(MONGOELECTOR_RWLOCK_NONE), "none") == 0);
  CHECK(strcmp(mongoelector_rwlock_side_name(MONGOELECTOR_RWLOCK_WAITING_WRITER),
               "waiting_writer") == 0);
  CHECK(strcmp(mongoelector_rwlock_side_name((mongoelector_rwlock_side)42), "unknown") == 0);

  /* NULL and dead handles: an error, never a crash. */
  CHECK_INVALID(mongoelector_rwlock_new(NULL, "k", NULL, &rw));
  CHECK_INVALID(mongoelector_rwlock_acquire(NULL, MONGOELECTOR_RWLOCK_READ, NULL, &fence));
  CHECK_ERROR_SAYS("read-write lock handle is NULL");
  CHECK_INVALID(mongoelector_rwlock_release(NULL));
  CHECK_INVALID(mongoelector_rwlock_touch(NULL, &flag, NULL));
  CHECK_INVALID(mongoelector_rwlock_fence(NULL, &fence));
  CHECK_INVALID(mongoelector_rwlock_held_side(NULL, &side));
  CHECK_INVALID(mongoelector_rwlock_holders(NULL, &holders, &n));
  CHECK_INVALID(
      mongoelector_rwlock_lease_acquire(NULL, MONGOELECTOR_RWLOCK_READ, NULL, NULL, NULL, &lease));
  CHECK_INVALID(mongoelector_rwlock_lease_fence(NULL, &fence));
  CHECK_INVALID(mongoelector_rwlock_lease_lost(NULL, &flag));
  CHECK_INVALID(mongoelector_rwlock_lease_wait_lost(NULL, 0, &flag));
  mongoelector_rwlock_free(NULL);
  mongoelector_rwlock_lease_free(NULL);
  mongoelector_rwlock_holders_free(NULL, 0);

  /* Bad configurations are refused at new(), naming the field, before any I/O. */
  CHECK_OK(mongoelector_client_new("memory://rwlock-args", "", &client));
  CHECK_INVALID(mongoelector_rwlock_new(client, "", NULL, &rw));
  CHECK_INVALID(mongoelector_rwlock_new(client, NULL, NULL, &rw));
  CHECK_INVALID(mongoelector_rwlock_new(client, "k", NULL, NULL));
  config(&cfg, 0, 30);
  CHECK_INVALID(mongoelector_rwlock_new(client, "k", &cfg, &rw));
  CHECK_ERROR_SAYS("max_readers");
  cfg.max_readers = -3;
  CHECK_INVALID(mongoelector_rwlock_new(client, "k", &cfg, &rw));
  CHECK_ERROR_SAYS("max_readers");
  cfg.max_readers = 1001;
  CHECK_INVALID(mongoelector_rwlock_new(client, "k", &cfg, &rw));
  config(&cfg, 4, -1);
  CHECK_INVALID(mongoelector_rwlock_new(client, "k", &cfg, &rw));
  config(&cfg, 4, 30);
  cfg.version = 0;
  CHECK_INVALID(mongoelector_rwlock_new(client, "k", &cfg, &rw));
  CHECK(rw == NULL);
  mongoelector_client_free(client);
}

/* ---- the suite, on one backend ---------------------------------------------------- */

typedef struct waiter {
  mongoelector_rwlock *rw;
  mongoelector_rwlock_side side;
  mongoelector_acquire_options options;
  mongoelector_status status;
  int64_t fence;
  char error[512];
} waiter;

static void *wait_thread(void *arg) {
  waiter *w = (waiter *)arg;
  w->status = mongoelector_rwlock_acquire(w->rw, w->side, &w->options, &w->fence);
  snprintf(w->error, sizeof w->error, "%s", mongoelector_last_error());
  return NULL;
}

/* Starts an acquire of `side` by `rw` on a thread of its own, waiting at most `timeout`. */
static void start_waiter(waiter *w, mongoelector_rwlock *rw, mongoelector_rwlock_side side,
                         double timeout, pthread_t *thread) {
  memset(w, 0, sizeof *w);
  w->rw = rw;
  w->side = side;
  options(&w->options, 1, timeout);
  CHECK(pthread_create(thread, NULL, wait_thread, w) == 0);
}

/* Whether the holders of `rw`'s key show one of `side` within 10 s. */
static int holders_show(mongoelector_rwlock *rw, mongoelector_rwlock_side side) {
  double until = now_s() + 10;
  while (now_s() < until) {
    mongoelector_rwlock_holder *h = NULL;
    size_t n = 0, i;
    int seen = 0;
    CHECK_OK(mongoelector_rwlock_holders(rw, &h, &n));
    for (i = 0; i < n; i++) seen |= h[i].side == side;
    mongoelector_rwlock_holders_free(h, n);
    if (seen) return 1;
    sleep_s(0.02);
  }
  return 0;
}

static void test_readers_and_writer(mongoelector_client *client, const char *what) {
  char key[128];
  mongoelector_rwlock_config cfg;
  mongoelector_rwlock *r1, *r2, *r3, *w, *late;
  mongoelector_acquire_options once, briefly;
  mongoelector_rwlock_holder *holders = NULL;
  mongoelector_rwlock_side side = MONGOELECTOR_RWLOCK_NONE;
  size_t n = 0, i;
  int64_t f1 = 0, f2 = 0, f3 = 0, fw = 0, fr = 0, expire = 0, f = 0;
  int renewed = 0;
  const char *uuid = NULL;
  waiter wt;
  pthread_t thread;

  unique_key(key, sizeof key, "rw");
  config(&cfg, 3, 30);
  r1 = new_rwlock(client, key, &cfg);
  r2 = new_rwlock(client, key, &cfg);
  r3 = new_rwlock(client, key, &cfg);
  w = new_rwlock(client, key, &cfg);
  late = new_rwlock(client, key, &cfg);
  options(&once, 0, -1);
  options(&briefly, 1, 0.3);

  /* Many readers at once, one token sequence. */
  CHECK_OK(mongoelector_rwlock_acquire(r1, MONGOELECTOR_RWLOCK_READ, &once, &f1));
  CHECK_OK(mongoelector_rwlock_acquire(r2, MONGOELECTOR_RWLOCK_READ, NULL, &f2));
  CHECK_OK(mongoelector_rwlock_acquire(r3, MONGOELECTOR_RWLOCK_READ, &once, &f3));
  CHECK(f1 > 0 && f2 > f1 && f3 > f2);
  CHECK_OK(mongoelector_rwlock_held_side(r1, &side));
  CHECK(side == MONGOELECTOR_RWLOCK_READ);
  CHECK_OK(mongoelector_rwlock_fence(r2, &f));
  CHECK(f == f2);
  CHECK_OK(mongoelector_rwlock_held_side(w, &side));
  CHECK(side == MONGOELECTOR_RWLOCK_NONE);
  CHECK_OK(mongoelector_rwlock_holders(w, &holders, &n));
  CHECK(n == 3);
  CHECK_OK(mongoelector_rwlock_uuid(r1, &uuid));
  CHECK(strcmp(holders[0].uuid, uuid) == 0); /* slot order: the first reader first */
  CHECK_INVALID(mongoelector_rwlock_uuid(r1, NULL));
  CHECK_INVALID(mongoelector_rwlock_uuid(NULL, &uuid));
  for (i = 0; i < n; i++) {
    CHECK(holders[i].side == MONGOELECTOR_RWLOCK_READ);
    CHECK(holders[i].pid == (int64_t)getpid() && holders[i].expire_ms > holders[i].created_ms);
    CHECK(holders[i].uuid != NULL && holders[i].host != NULL && holders[i].host[0] != '\0');
  }
  mongoelector_rwlock_holders_free(holders, n);
  /* max_readers: a fourth reader is refused. */
  CHECK_STATUS(mongoelector_rwlock_acquire(late, MONGOELECTOR_RWLOCK_READ, &once, NULL),
               MONGOELECTOR_ERR_LOCK_EXISTS);
  CHECK_ERROR_SAYS("all 3 read slots held");
  /* One hold per handle. */
  CHECK_INVALID(mongoelector_rwlock_acquire(r1, MONGOELECTOR_RWLOCK_READ, &once, NULL));
  CHECK_INVALID(mongoelector_rwlock_acquire(r1, MONGOELECTOR_RWLOCK_WRITE, &once, NULL));

  /* The writer waits for the readers: refused, then timed out (its mark removed). */
  CHECK_STATUS(mongoelector_rwlock_acquire(w, MONGOELECTOR_RWLOCK_WRITE, &once, &fw),
               MONGOELECTOR_ERR_LOCK_EXISTS);
  CHECK_ERROR_SAYS("held for reading");
  CHECK_STATUS(mongoelector_rwlock_acquire(w, MONGOELECTOR_RWLOCK_WRITE, &briefly, &fw),
               MONGOELECTOR_ERR_TIMEOUT);
  CHECK_OK(mongoelector_rwlock_release(r3));
  CHECK_OK(mongoelector_rwlock_acquire(late, MONGOELECTOR_RWLOCK_READ, &once, &f3));
  CHECK(f3 > f2);
  CHECK_OK(mongoelector_rwlock_release(late));

  /* Writer preference: a waiting writer stops new readers; readers in keep their holds. */
  start_waiter(&wt, w, MONGOELECTOR_RWLOCK_WRITE, 30, &thread);
  CHECK(holders_show(r1, MONGOELECTOR_RWLOCK_WAITING_WRITER));
  CHECK_STATUS(mongoelector_rwlock_acquire(late, MONGOELECTOR_RWLOCK_READ, &once, NULL),
               MONGOELECTOR_ERR_LOCK_EXISTS);
  CHECK_ERROR_SAYS("a writer is waiting");
  CHECK_OK(mongoelector_rwlock_touch(r1, &renewed, &expire));
  CHECK(renewed == 1 && expire > 0);
  CHECK_OK(mongoelector_rwlock_release(r1));
  CHECK_OK(mongoelector_rwlock_release(r2));
  CHECK(pthread_join(thread, NULL) == 0);
  if (wt.status != MONGOELECTOR_OK) fprintf(stderr, "writer: %s\n", wt.error);
  CHECK(wt.status == MONGOELECTOR_OK);
  fw = wt.fence;
  CHECK(fw > f3); /* above every token granted before it */
  CHECK_OK(mongoelector_rwlock_held_side(w, &side));
  CHECK(side == MONGOELECTOR_RWLOCK_WRITE);
  CHECK_OK(mongoelector_rwlock_holders(r1, &holders, &n));
  CHECK(n == 1 && holders[0].side == MONGOELECTOR_RWLOCK_WRITE && holders[0].fence == fw);
  mongoelector_rwlock_holders_free(holders, n);

  /* While the writer holds: no reader, no other writer. */
  CHECK_STATUS(mongoelector_rwlock_acquire(r1, MONGOELECTOR_RWLOCK_READ, &once, NULL),
               MONGOELECTOR_ERR_LOCK_EXISTS);
  CHECK_ERROR_SAYS("held for writing");
  CHECK_STATUS(mongoelector_rwlock_acquire(r2, MONGOELECTOR_RWLOCK_READ, &briefly, NULL),
               MONGOELECTOR_ERR_TIMEOUT);
  CHECK_STATUS(mongoelector_rwlock_acquire(late, MONGOELECTOR_RWLOCK_WRITE, &once, NULL),
               MONGOELECTOR_ERR_LOCK_EXISTS);

  /* A reader waiting for the writer gets in, with a larger token, once it is released. */
  start_waiter(&wt, r1, MONGOELECTOR_RWLOCK_READ, 30, &thread);
  sleep_s(0.15);
  CHECK_OK(mongoelector_rwlock_release(w));
  CHECK(pthread_join(thread, NULL) == 0);
  CHECK(wt.status == MONGOELECTOR_OK);
  fr = wt.fence;
  CHECK(fr > fw);
  CHECK_OK(mongoelector_rwlock_held_side(w, &side));
  CHECK(side == MONGOELECTOR_RWLOCK_NONE);
  CHECK_OK(mongoelector_rwlock_fence(w, &f));
  CHECK(f == 0);
  CHECK_OK(mongoelector_rwlock_touch(w, &renewed, NULL));
  CHECK(renewed == 0);
  CHECK_OK(mongoelector_rwlock_release(w)); /* not holding: not an error */
  CHECK_OK(mongoelector_rwlock_release(r1));

  mongoelector_rwlock_free(r1);
  mongoelector_rwlock_free(r2);
  mongoelector_rwlock_free(r3);
  mongoelector_rwlock_free(w);
  mongoelector_rwlock_free(late);
  printf(
      "  %s: 3 readers together (tokens %lld < %lld), the writer after them (%lld), a reader "
      "after it (%lld)\n",
      what, (long long)f1, (long long)f2, (long long)fw, (long long)fr);
}

static void *cancel_later(void *arg) {
  sleep_s(0.2);
  mongoelector_cancel_token_cancel((mongoelector_cancel_token *)arg);
  return NULL;
}

/* Cancel tokens, writer preference off, and bad input on a live key. */
static void test_cancel_and_bad_input(mongoelector_client *client, const char *what) {
  char key[128], skey[128];
  mongoelector_rwlock_config cfg;
  mongoelector_semaphore_config scfg;
  mongoelector_rwlock *r, *w, *other, *wrong, *on_sem;
  mongoelector_semaphore *sem = NULL, *on_rw = NULL;
  mongoelector_acquire_options once, wait_cancel, forced;
  mongoelector_cancel_token *token = NULL;
  mongoelector_rwlock_lease *lease = NULL;
  waiter wt;
  pthread_t thread, canceller;
  int64_t f = 0;
  double t0;

  unique_key(key, sizeof key, "rw-cancel");
  config(&cfg, 4, 30);
  cfg.writer_preference = 0;
  r = new_rwlock(client, key, &cfg);
  w = new_rwlock(client, key, &cfg);
  other = new_rwlock(client, key, &cfg);
  options(&once, 0, -1);

  /* A wait ends with CANCELLED when its token is cancelled, at once if it already is. */
  CHECK_OK(mongoelector_rwlock_acquire(r, MONGOELECTOR_RWLOCK_READ, &once, &f));
  CHECK_OK(mongoelector_cancel_token_new(&token));
  options(&wait_cancel, 1, -1);
  wait_cancel.cancel = token;
  CHECK(pthread_create(&canceller, NULL, cancel_later, token) == 0);
  t0 = now_s();
  CHECK_STATUS(mongoelector_rwlock_acquire(w, MONGOELECTOR_RWLOCK_WRITE, &wait_cancel, NULL),
               MONGOELECTOR_ERR_CANCELLED);
  CHECK(now_s() - t0 < 5);
  CHECK(pthread_join(canceller, NULL) == 0);
  CHECK_STATUS(mongoelector_rwlock_acquire(w, MONGOELECTOR_RWLOCK_WRITE, &wait_cancel, NULL),
               MONGOELECTOR_ERR_CANCELLED);
  mongoelector_cancel_token_free(token);

  /* Writer preference off: readers enter while a writer waits. */
  start_waiter(&wt, w, MONGOELECTOR_RWLOCK_WRITE, 1.0, &thread);
  sleep_s(0.2);
  CHECK_OK(mongoelector_rwlock_acquire(other, MONGOELECTOR_RWLOCK_READ, &once, NULL));
  CHECK(pthread_join(thread, NULL) == 0);
  CHECK(wt.status == MONGOELECTOR_ERR_TIMEOUT);
  CHECK_OK(mongoelector_rwlock_release(other));

  /* Bad input on a live key: refused by name, nothing taken, the lock still works. */
  CHECK_INVALID(mongoelector_rwlock_acquire(w, MONGOELECTOR_RWLOCK_NONE, &once, NULL));
  CHECK_ERROR_SAYS("MONGOELECTOR_RWLOCK_READ");
  CHECK_INVALID(mongoelector_rwlock_acquire(w, (mongoelector_rwlock_side)7, NULL, NULL));
  CHECK_ERROR_SAYS("side 7");
  CHECK_INVALID(mongoelector_rwlock_acquire(w, MONGOELECTOR_RWLOCK_WAITING_WRITER, &once, NULL));
  CHECK_INVALID(mongoelector_rwlock_acquire(w, (mongoelector_rwlock_side)-1, &once, NULL));
  forced = once;
  forced.force = 1;
  CHECK_INVALID(mongoelector_rwlock_acquire(w, MONGOELECTOR_RWLOCK_WRITE, &forced, NULL));
  CHECK_ERROR_SAYS("force");
  options(&wait_cancel, 0, 5); /* a timeout on a non-blocking acquire */
  CHECK_INVALID(mongoelector_rwlock_acquire(w, MONGOELECTOR_RWLOCK_READ, &wait_cancel, NULL));
  CHECK_INVALID(mongoelector_rwlock_held_side(w, NULL));
  CHECK_INVALID(mongoelector_rwlock_fence(w, NULL));
  CHECK_INVALID(mongoelector_rwlock_touch(w, NULL, NULL));
  CHECK_INVALID(mongoelector_rwlock_holders(w, NULL, NULL));
  CHECK_INVALID(
      mongoelector_rwlock_lease_acquire(w, (mongoelector_rwlock_side)9, NULL, NULL, NULL, &lease));
  CHECK_INVALID(
      mongoelector_rwlock_lease_acquire(w, MONGOELECTOR_RWLOCK_READ, &forced, NULL, NULL, &lease));
  CHECK(lease == NULL);
  /* Another max_readers than the key's document. */
  config(&cfg, 5, 30);
  wrong = new_rwlock(client, key, &cfg);
  CHECK_INVALID(mongoelector_rwlock_acquire(wrong, MONGOELECTOR_RWLOCK_READ, &once, NULL));
  CHECK_ERROR_SAYS("max_readers 4");
  mongoelector_rwlock_free(wrong);

  /* A key holding another kind of document: a semaphore's, in the rwlock's collection,
   * and the other way round. Refused by name, nothing written. */
  unique_key(skey, sizeof skey, "rw-sem");
  CHECK_OK(mongoelector_semaphore_config_init(&scfg, MONGOELECTOR_SEMAPHORE_CONFIG_VERSION));
  scfg.collection = "mongorwlock";
  scfg.limit = 2;
  scfg.allow_unsafe_server = g_unsafe_server;
  scfg.max_offset_seconds = 2;
  CHECK_OK(mongoelector_semaphore_new(client, skey, &scfg, &sem));
  CHECK_OK(mongoelector_semaphore_acquire(sem, &once, NULL));
  config(&cfg, 2, 30);
  on_sem = new_rwlock(client, skey, &cfg);
  CHECK_INVALID(mongoelector_rwlock_acquire(on_sem, MONGOELECTOR_RWLOCK_WRITE, &once, NULL));
  CHECK_ERROR_SAYS("semaphore");
  CHECK_INVALID(mongoelector_rwlock_acquire(on_sem, MONGOELECTOR_RWLOCK_READ, NULL, NULL));
  CHECK_INVALID(mongoelector_rwlock_lease_acquire(on_sem, MONGOELECTOR_RWLOCK_READ, &once, NULL,
                                                  NULL, &lease));
  CHECK(lease == NULL);
  CHECK_OK(mongoelector_semaphore_release(sem));
  mongoelector_semaphore_free(sem);
  mongoelector_rwlock_free(on_sem);
  CHECK_OK(mongoelector_semaphore_new(client, key, &scfg, &on_rw));
  CHECK_INVALID(mongoelector_semaphore_acquire(on_rw, &once, NULL));
  CHECK_ERROR_SAYS("read-write lock");
  mongoelector_semaphore_free(on_rw);

  /* Still a working lock: the reader holds, the writer gets it after. */
  CHECK_STATUS(mongoelector_rwlock_acquire(w, MONGOELECTOR_RWLOCK_WRITE, &once, NULL),
               MONGOELECTOR_ERR_LOCK_EXISTS);
  CHECK_OK(mongoelector_rwlock_release(r));
  CHECK_OK(mongoelector_rwlock_acquire(w, MONGOELECTOR_RWLOCK_WRITE, &once, &f));
  CHECK_OK(mongoelector_rwlock_release(w));
  mongoelector_rwlock_free(r);
  mongoelector_rwlock_free(w);
  mongoelector_rwlock_free(other);
  printf("  %s: cancel, writer preference off, bad input refused by name\n", what);
}

/* Keep-alive leases of both sides: kept past their ttl, released by free. */
static void test_leases(mongoelector_client *client, const char *what) {
  char key[128];
  mongoelector_rwlock_config cfg;
  mongoelector_rwlock *a, *b, *w;
  mongoelector_rwlock_lease *la = NULL, *lb = NULL, *lw = NULL, *second = NULL;
  mongoelector_acquire_options once;
  mongoelector_rwlock_side side = MONGOELECTOR_RWLOCK_NONE;
  int64_t fa = 0, fb = 0, fw = 0, f = 0;
  int lost = -1;

  unique_key(key, sizeof key, "rw-lease");
  config(&cfg, 8, 1.0); /* renewed about every 0.33 s */
  a = new_rwlock(client, key, &cfg);
  b = new_rwlock(client, key, &cfg);
  w = new_rwlock(client, key, &cfg);
  options(&once, 0, -1);
  CHECK_INVALID(
      mongoelector_rwlock_lease_acquire(a, MONGOELECTOR_RWLOCK_READ, NULL, NULL, NULL, NULL));
  CHECK_OK(mongoelector_rwlock_lease_acquire(a, MONGOELECTOR_RWLOCK_READ, NULL, NULL, NULL, &la));
  CHECK_INVALID(
      mongoelector_rwlock_lease_acquire(a, MONGOELECTOR_RWLOCK_READ, NULL, NULL, NULL, &second));
  CHECK_ERROR_SAYS("one lease per handle");
  CHECK(second == NULL);
  CHECK_OK(mongoelector_rwlock_lease_acquire(b, MONGOELECTOR_RWLOCK_READ, &once, NULL, NULL, &lb));
  CHECK_OK(mongoelector_rwlock_lease_fence(la, &fa));
  CHECK_OK(mongoelector_rwlock_lease_fence(lb, &fb));
  CHECK(fa > 0 && fb > fa);
  CHECK_OK(mongoelector_rwlock_held_side(a, &side));
  CHECK(side == MONGOELECTOR_RWLOCK_READ);
  /* Twice the ttl later both reads are still held: the renewer kept them alive. */
  CHECK_OK(mongoelector_rwlock_lease_wait_lost(la, 2.0, &lost));
  CHECK(lost == 0);
  CHECK_OK(mongoelector_rwlock_lease_lost(lb, &lost));
  CHECK(lost == 0);
  CHECK_STATUS(mongoelector_rwlock_acquire(w, MONGOELECTOR_RWLOCK_WRITE, &once, NULL),
               MONGOELECTOR_ERR_LOCK_EXISTS);
  mongoelector_rwlock_lease_free(la);
  CHECK_STATUS(mongoelector_rwlock_acquire(w, MONGOELECTOR_RWLOCK_WRITE, &once, NULL),
               MONGOELECTOR_ERR_LOCK_EXISTS);
  mongoelector_rwlock_lease_free(lb); /* the last reader: the writer may go */
  CHECK_OK(mongoelector_rwlock_lease_acquire(w, MONGOELECTOR_RWLOCK_WRITE, &once, NULL, NULL, &lw));
  CHECK_OK(mongoelector_rwlock_lease_fence(lw, &fw));
  CHECK(fw > fb);
  CHECK_OK(mongoelector_rwlock_lease_wait_lost(lw, 1.5, &lost));
  CHECK(lost == 0);
  CHECK_STATUS(mongoelector_rwlock_acquire(a, MONGOELECTOR_RWLOCK_READ, &once, NULL),
               MONGOELECTOR_ERR_LOCK_EXISTS);
  mongoelector_rwlock_lease_free(lw);
  CHECK_OK(mongoelector_rwlock_acquire(a, MONGOELECTOR_RWLOCK_READ, &once, &f));
  CHECK(f > fw);
  CHECK_OK(mongoelector_rwlock_release(a));
  mongoelector_rwlock_free(a);
  mongoelector_rwlock_free(b);
  mongoelector_rwlock_free(w);
  printf("  %s: leases kept past 2 ttls (read %lld, %lld; write %lld), freed at once\n", what,
         (long long)fa, (long long)fb, (long long)fw);
}

static void run_backend(mongoelector_client *client, const char *what) {
  test_readers_and_writer(client, what);
  test_cancel_and_bad_input(client, what);
  test_leases(client, what);
}

int main(int argc, char **argv) {
  int offline = argc > 1 && strcmp(argv[1], "--offline") == 0;
  const char *uri = getenv("MONGOELECTOR_TEST_URI");
  const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char path[256], mem[128];
  char *name = NULL, *version = NULL;
  mongoelector_client *client = NULL;

  test_args();
  if (offline) {
    unique_key(mem, sizeof mem, "memory://rwlock");
    CHECK_OK(mongoelector_client_new(mem, "", &client));
    run_backend(client, "memory://");
    mongoelector_client_free(client);
    snprintf(path, sizeof path, "sqlite://%s/rwlock-%ld.db", tmp, (long)getpid());
    CHECK_OK(mongoelector_client_new(path, "", &client));
    run_backend(client, "sqlite");
    mongoelector_client_free(client);
    unlink(path + strlen("sqlite://"));
    printf("rwlock_test: %d passed, 0 failed\n", g_passed);
    return 0;
  }
  if (uri == NULL || uri[0] == '\0') {
    printf("rwlock_test: MONGOELECTOR_TEST_URI is not set: skipped\n");
    return 77;
  }
  CHECK_OK(mongoelector_client_new(uri, "rwlock_test", &client));
  CHECK_OK(mongoelector_client_server_info_copy(client, &name, &version));
  g_unsafe_server = strcmp(name, "FerretDB") == 0;
  printf("rwlock_test on %s %s\n", name, version);
  run_backend(client, name);
  mongoelector_free(name);
  mongoelector_free(version);
  mongoelector_client_free(client);
  printf("rwlock_test: %d passed, 0 failed\n", g_passed);
  return 0;
}
