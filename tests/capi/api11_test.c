/*
 * api11_test: the C API additions of 1.1, seen from C (only the public header, only the
 * shared library, -std=c99 -pedantic -Werror).
 *
 * Usage: api11_test [--offline]
 *   --offline   versioned inits, cancel tokens, the log handler's hand-over, lock details,
 *               acquire_with and elector_free from a callback on the embedded SQLite
 *               backend (no server).
 *   (default)   those, then against the server at MONGOELECTOR_TEST_URI (exit 77 without
 *               it): per-call cancel on a real server, the server's error code and name.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK_PROGRAM "api11_test"
#include "check.h"
#include "mongoelector.h"

/* FerretDB (non-atomic findAndModify): lockers opt in, electors are skipped. */
static int g_unsafe_server = 0;

static void unique_key(char *out, size_t n, const char *prefix) {
  static int counter = 0;
  snprintf(out, n, "%s-%ld-%d-%d", prefix, (long)getpid(), (int)time(NULL), ++counter);
}

/* ---- versioned inits ------------------------------------------------------------------ */

static void test_inits(void) {
  mongoelector_locker_config lc;
  mongoelector_elector_config ec;
  mongoelector_acquire_options ao;
  mongoelector_error_info info;

  CHECK_INVALID(mongoelector_locker_config_init(NULL, MONGOELECTOR_LOCKER_CONFIG_VERSION));
  CHECK_INVALID(mongoelector_locker_config_init(&lc, 0));
  CHECK_INVALID(mongoelector_locker_config_init(&lc, MONGOELECTOR_LOCKER_CONFIG_VERSION + 1));
  CHECK(strstr(mongoelector_last_error(), "mongoelector_locker_config_init") != NULL);
  /* The error of the last failed call, with no server detail. */
  info.version = MONGOELECTOR_ERROR_INFO_VERSION;
  CHECK_OK(mongoelector_last_error_info(&info));
  CHECK(info.status == MONGOELECTOR_ERR_INVALID_ARGUMENT);
  CHECK(info.code == 0 && info.label_count == 0 && info.labels == NULL);
  CHECK(strcmp(info.code_name, "") == 0);
  CHECK(strcmp(info.message, mongoelector_last_error()) == 0);
  CHECK(mongoelector_last_error_has_label("RetryableWriteError") == 0);
  CHECK(mongoelector_last_error_has_label(NULL) == 0);
  info.version = 0;
  CHECK_INVALID(mongoelector_last_error_info(&info));
  CHECK_INVALID(mongoelector_last_error_info(NULL));

  /* The documented defaults, shared by every binding. */
  CHECK_OK(mongoelector_locker_config_init(&lc, MONGOELECTOR_LOCKER_CONFIG_VERSION));
  CHECK(lc.version == MONGOELECTOR_LOCKER_CONFIG_VERSION);
  CHECK(lc.collection == NULL && lc.ttl_seconds == 600 && lc.timeparanoid == 1);
  CHECK(lc.max_offset_seconds == 0.5 && lc.delete_on_release == 0);
  CHECK(lc.allow_unsafe_server == 0 && lc.op_timeout_seconds == 0);
  CHECK_OK(mongoelector_elector_config_init(&ec, MONGOELECTOR_ELECTOR_CONFIG_VERSION));
  CHECK(ec.ttl_seconds == 15 && ec.report_status == 1 && ec.delete_on_release == 1);
  CHECK(ec.on_leader == NULL && ec.user_data == NULL && ec.op_timeout_seconds == 0);
  CHECK_INVALID(mongoelector_elector_config_init(&ec, 7));
  CHECK_OK(mongoelector_acquire_options_init(&ao, MONGOELECTOR_ACQUIRE_OPTIONS_VERSION));
  CHECK(ao.blocking == 1 && ao.timeout_seconds < 0 && ao.step_seconds == 0.25);
  CHECK(ao.force == 0 && ao.cancel == NULL);
}

/* ---- cancel tokens ---------------------------------------------------------------------- */

static void test_cancel_token_handle(void) {
  mongoelector_cancel_token *t = NULL;
  int c = -1;
  CHECK_INVALID(mongoelector_cancel_token_new(NULL));
  CHECK_INVALID(mongoelector_cancel_token_cancel(NULL));
  CHECK_INVALID(mongoelector_cancel_token_is_cancelled(NULL, &c));
  mongoelector_cancel_token_free(NULL);
  CHECK_OK(mongoelector_cancel_token_new(&t));
  CHECK_INVALID(mongoelector_cancel_token_is_cancelled(t, NULL));
  CHECK_OK(mongoelector_cancel_token_is_cancelled(t, &c));
  CHECK(c == 0);
  CHECK_OK(mongoelector_cancel_token_cancel(t));
  CHECK_OK(mongoelector_cancel_token_cancel(t)); /* any number of times */
  CHECK_OK(mongoelector_cancel_token_is_cancelled(t, &c));
  CHECK(c == 1);
  mongoelector_cancel_token_free(t);
}

typedef struct canceller {
  mongoelector_cancel_token *token;
  double after_s;
  double cancelled_at;
} canceller;

static void *cancel_later(void *arg) {
  canceller *c = (canceller *)arg;
  sleep_s(c->after_s);
  c->cancelled_at = now_s();
  mongoelector_cancel_token_cancel(c->token);
  return NULL;
}

typedef struct waiter {
  mongoelector_locker *locker;
  mongoelector_acquire_options options;
  mongoelector_status status;
  int64_t fence;
  double returned_at;
} waiter;

static void *acquire_in_thread(void *arg) {
  waiter *w = (waiter *)arg;
  w->status = mongoelector_locker_acquire_with(w->locker, &w->options, &w->fence);
  w->returned_at = now_s();
  return NULL;
}

/* Cancellation is per call: a cancel with no acquire in flight (a token cancelled after
 * its call returned, or mongoelector_locker_cancel) never fails a later acquire_with;
 * a cancel during the wait ends it within ~100 ms; the wait does not hold the locker. */
static void test_per_call_cancel(mongoelector_client *client, const char *what) {
  char key[128];
  mongoelector_locker_config cfg;
  mongoelector_locker *holder = NULL, *waiting = NULL;
  mongoelector_acquire_options once;
  mongoelector_cancel_token *stale = NULL, *token = NULL;
  int64_t fence = 0;
  int locked = 0;
  double t0, t1;
  waiter w;
  canceller c;
  pthread_t wt, ct;

  unique_key(key, sizeof key, "api11-cancel");
  CHECK_OK(mongoelector_locker_config_init(&cfg, MONGOELECTOR_LOCKER_CONFIG_VERSION));
  cfg.ttl_seconds = 30;
  cfg.timeparanoid = 0;
  cfg.allow_unsafe_server = g_unsafe_server;
  CHECK_OK(mongoelector_locker_new_with(client, key, &cfg, &holder));
  CHECK_OK(mongoelector_locker_new_with(client, key, &cfg, &waiting));

  /* A token cancelled with no acquire in flight affects no other call. */
  CHECK_OK(mongoelector_cancel_token_new(&stale));
  CHECK_OK(mongoelector_cancel_token_cancel(stale));
  CHECK_OK(mongoelector_locker_cancel(waiting)); /* the 1.0 sticky flag: not for _with */
  CHECK_OK(mongoelector_acquire_options_init(&once, MONGOELECTOR_ACQUIRE_OPTIONS_VERSION));
  CHECK_OK(mongoelector_locker_acquire_with(waiting, &once, &fence));
  CHECK(fence > 0);
  CHECK_OK(mongoelector_locker_release(waiting, 0));
  /* ...and a call given an already cancelled token ends at once, without a round trip. */
  once.cancel = stale;
  CHECK_STATUS(mongoelector_locker_acquire_with(waiting, &once, &fence),
               MONGOELECTOR_ERR_CANCELLED);
  mongoelector_cancel_token_free(stale);
  /* Consume the 1.0 flag, so that the legacy entry point is as before. */
  CHECK_STATUS(mongoelector_locker_acquire(waiting, 1, -1, 0.05, 0, NULL),
               MONGOELECTOR_ERR_CANCELLED);

  /* A blocking wait, cancelled from another thread while the lock is held. */
  CHECK_OK(mongoelector_locker_acquire_with(holder, NULL, &fence));
  CHECK_OK(mongoelector_cancel_token_new(&token));
  memset(&w, 0, sizeof w);
  w.locker = waiting;
  CHECK_OK(mongoelector_acquire_options_init(&w.options, MONGOELECTOR_ACQUIRE_OPTIONS_VERSION));
  w.options.step_seconds = 0.05;
  w.options.cancel = token;
  c.token = token;
  c.after_s = 0.6;
  CHECK(pthread_create(&wt, NULL, acquire_in_thread, &w) == 0);
  sleep_s(0.2);
  /* While it waits, the same locker answers other calls (the wait holds no lock). */
  t0 = now_s();
  CHECK_OK(mongoelector_locker_locked(waiting, &locked));
  t1 = now_s();
  CHECK(locked == 1);
  CHECK(t1 - t0 < 1.0);
  CHECK(pthread_create(&ct, NULL, cancel_later, &c) == 0);
  pthread_join(ct, NULL);
  pthread_join(wt, NULL);
  CHECK(w.status == MONGOELECTOR_ERR_CANCELLED);
  printf("  %s: cancel ended the wait %.0f ms after the cancel\n", what,
         (w.returned_at - c.cancelled_at) * 1000);
  CHECK(w.returned_at - c.cancelled_at < 0.5);
  mongoelector_cancel_token_free(token);

  /* The next acquire, with no token, works as soon as the lock is free. */
  CHECK_OK(mongoelector_locker_release(holder, 0));
  once.cancel = NULL;
  once.blocking = 0;
  CHECK_OK(mongoelector_locker_acquire_with(waiting, &once, &fence));
  CHECK_OK(mongoelector_locker_release(waiting, 0));
  /* A non-blocking attempt takes no timeout. */
  once.timeout_seconds = 1;
  CHECK_INVALID(mongoelector_locker_acquire_with(waiting, &once, &fence));
  mongoelector_locker_free(holder);
  mongoelector_locker_free(waiting);
}

/* ---- lock details and server info --------------------------------------------------------- */

static void test_lock_details(mongoelector_client *client) {
  char key[128];
  mongoelector_locker *l = NULL;
  mongoelector_lock_details d;
  const char *uuid = NULL;
  int found = -1;
  int64_t fence = 0;
  char *name = NULL, *version = NULL;

  mongoelector_locker_config cfg;
  unique_key(key, sizeof key, "api11-details");
  CHECK_OK(mongoelector_locker_config_init(&cfg, MONGOELECTOR_LOCKER_CONFIG_VERSION));
  cfg.allow_unsafe_server = g_unsafe_server;
  CHECK_OK(mongoelector_locker_new_with(client, key, &cfg, &l));
  memset(&d, 0, sizeof d);
  CHECK_INVALID(mongoelector_locker_current_details(l, &d, &found)); /* version unset */
  d.version = MONGOELECTOR_LOCK_DETAILS_VERSION;
  CHECK_INVALID(mongoelector_locker_current_details(l, &d, NULL));
  CHECK_OK(mongoelector_locker_current_details(l, &d, &found));
  CHECK(found == 0 && d.uuid == NULL && d.host == NULL);
  CHECK_OK(mongoelector_locker_acquire_with(l, NULL, &fence));
  CHECK_OK(mongoelector_locker_uuid(l, &uuid));
  CHECK_OK(mongoelector_locker_current_details(l, &d, &found));
  CHECK(found == 1);
  CHECK(strcmp(d.uuid, uuid) == 0);
  CHECK(d.host != NULL && strlen(d.host) > 0);
  CHECK(d.pid == (int64_t)getpid() && d.fence == fence);
  CHECK(d.expire_ms > d.created_ms && d.created_ms > 0);
  mongoelector_lock_details_clear(&d);
  /* The same holder, read without a locker (mongoelector_client_read_lock: reads only). */
  CHECK_INVALID(mongoelector_client_read_lock(client, NULL, key, &d, NULL));
  CHECK_INVALID(mongoelector_client_read_lock(client, NULL, "", &d, &found));
  CHECK_OK(mongoelector_client_read_lock(client, NULL, key, &d, &found));
  CHECK(found == 1 && strcmp(d.uuid, uuid) == 0 && d.fence == fence);
  mongoelector_lock_details_clear(&d);
  CHECK_OK(mongoelector_client_read_lock(client, "elector.locks", key, &d, &found));
  CHECK(found == 0 && d.uuid == NULL); /* another collection: not held there */
  {
    char *detail = NULL;
    CHECK_OK(mongoelector_client_cluster_detail(client, key, &detail));
    /* libbson's relaxed JSON: no member, no leader (the key is a lock, not an election). */
    CHECK(detail != NULL && strstr(detail, "\"member_detail\" : [  ]") != NULL);
    CHECK(strstr(detail, "\"leader\" : null") != NULL);
    mongoelector_free(detail);
    CHECK_INVALID(mongoelector_client_cluster_detail(client, key, NULL));
  }
  CHECK(d.uuid == NULL && d.host == NULL);
  mongoelector_lock_details_clear(&d); /* twice is fine */
  mongoelector_lock_details_clear(NULL);
  CHECK_OK(mongoelector_locker_release(l, 0));
  mongoelector_locker_free(l);

  CHECK_INVALID(mongoelector_client_server_info_copy(client, NULL, &version));
  CHECK_OK(mongoelector_client_server_info_copy(client, &name, &version));
  CHECK(name != NULL && version != NULL && strlen(name) > 0);
  printf("  server_info_copy: %s %s\n", name, version);
  mongoelector_free(name);
  mongoelector_free(version);
}

/* ---- configs ------------------------------------------------------------------------------- */

static void test_config_checks(mongoelector_client *client) {
  mongoelector_locker_config lc;
  mongoelector_elector_config ec;
  mongoelector_locker *l = NULL;
  mongoelector_elector *e = NULL;
  CHECK_OK(mongoelector_locker_config_init(&lc, MONGOELECTOR_LOCKER_CONFIG_VERSION));
  lc.ttl_seconds = 10;
  lc.op_timeout_seconds = 6; /* more than ttl/2 */
  CHECK_INVALID(mongoelector_locker_new_with(client, "k", &lc, &l));
  CHECK(strstr(mongoelector_last_error(), "op_timeout_seconds") != NULL);
  lc.op_timeout_seconds = -1;
  CHECK_INVALID(mongoelector_locker_new_with(client, "k", &lc, &l));
  lc.op_timeout_seconds = NAN;
  CHECK_INVALID(mongoelector_locker_new_with(client, "k", &lc, &l));
  lc.op_timeout_seconds = 2;
  lc.allow_unsafe_server = g_unsafe_server;
  CHECK_OK(mongoelector_locker_new_with(client, "k", &lc, &l));
  mongoelector_locker_free(l);
  lc.version = 0;
  CHECK_INVALID(mongoelector_locker_new_with(client, "k", &lc, &l));
  CHECK_INVALID(mongoelector_locker_new_with(client, "", NULL, &l));
  CHECK_OK(mongoelector_elector_config_init(&ec, MONGOELECTOR_ELECTOR_CONFIG_VERSION));
  ec.ttl_seconds = 4;
  ec.op_timeout_seconds = 3;
  CHECK_INVALID(mongoelector_elector_new_with(client, "k", &ec, &e));
  CHECK_INVALID(mongoelector_elector_new_with(client, "k", NULL, NULL));
}

/* ---- log handler: level filter and hand-over ----------------------------------------------- */

typedef struct log_sink {
  pthread_mutex_t mu;
  int messages;
  int below_min;
  int released;
  mongoelector_log_level min;
} log_sink;

static void sink_log(mongoelector_log_level level, const char *message, void *user_data) {
  log_sink *s = (log_sink *)user_data;
  (void)message;
  pthread_mutex_lock(&s->mu);
  s->messages++;
  if (level < s->min) s->below_min++;
  pthread_mutex_unlock(&s->mu);
}

static void sink_release(void *user_data) {
  log_sink *s = (log_sink *)user_data;
  pthread_mutex_lock(&s->mu);
  s->released++;
  pthread_mutex_unlock(&s->mu);
}

/* Makes the library log a warning: an elector whose calls may take too long for its ttl
 * (SQLite: no server needed). */
static void provoke_logs(void) {
  char path[256];
  mongoelector_client *c = NULL;
  mongoelector_elector *e = NULL;
  mongoelector_elector_config cfg;
  snprintf(path, sizeof path, "sqlite://%s/api11-log-%ld.db",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid());
  CHECK_OK(mongoelector_client_new(path, "", &c));
  CHECK_OK(mongoelector_elector_config_init(&cfg, MONGOELECTOR_ELECTOR_CONFIG_VERSION));
  cfg.ttl_seconds = 1;
  cfg.op_timeout_seconds = 0.5;
  CHECK_OK(mongoelector_elector_new_with(c, "log-key", &cfg, &e));
  mongoelector_elector_free(e);
  mongoelector_client_free(c);
  unlink(path + strlen("sqlite://"));
}

static void test_log_handler(void) {
  log_sink a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  pthread_mutex_init(&a.mu, NULL);
  pthread_mutex_init(&b.mu, NULL);
  a.min = MONGOELECTOR_LOG_DEBUG;
  b.min = MONGOELECTOR_LOG_ERROR;
  CHECK_INVALID(
      mongoelector_set_log_handler((mongoelector_log_level)15, sink_log, &a, sink_release));
  CHECK(a.released == 0); /* refused: never installed, never released */
  CHECK_OK(mongoelector_set_log_handler(MONGOELECTOR_LOG_DEBUG, sink_log, &a, sink_release));
  provoke_logs();
  CHECK(a.messages > 0);
  CHECK(a.released == 0);
  CHECK_OK(mongoelector_set_log_handler(MONGOELECTOR_LOG_ERROR, sink_log, &b, sink_release));
  /* No call of a's handler was in flight: released on this thread, before returning. */
  CHECK(a.released == 1);
  provoke_logs();
  CHECK(b.below_min == 0); /* lower levels are dropped before the handler */
  CHECK(b.released == 0);
  CHECK_OK(mongoelector_set_log_handler(MONGOELECTOR_LOG_DEBUG, NULL, NULL, NULL));
  CHECK(b.released == 1 && a.released == 1);
  printf("  log handler: %d messages at debug, %d at error and above\n", a.messages, b.messages);
}

/* ---- elector: free from its own callback, delete_on_release -------------------------------- */

typedef struct self_freeing {
  pthread_mutex_t mu;
  mongoelector_elector *elector;
  int led;
  int losses;
  int freed_in_callback;
} self_freeing;

static void free_self_on_leader(void *user_data) {
  self_freeing *s = (self_freeing *)user_data;
  pthread_mutex_lock(&s->mu);
  s->led++;
  pthread_mutex_unlock(&s->mu);
  mongoelector_elector_free(s->elector); /* from its own callback: returns at once */
  pthread_mutex_lock(&s->mu);
  s->freed_in_callback = 1;
  pthread_mutex_unlock(&s->mu);
}

static void count_loss(void *user_data) {
  self_freeing *s = (self_freeing *)user_data;
  pthread_mutex_lock(&s->mu);
  s->losses++;
  pthread_mutex_unlock(&s->mu);
}

static int wait_until_set(pthread_mutex_t *mu, int *flag, double timeout_s) {
  double end = now_s() + timeout_s;
  for (;;) {
    int v;
    pthread_mutex_lock(mu);
    v = *flag;
    pthread_mutex_unlock(mu);
    if (v || now_s() > end) return v;
    sleep_s(0.01);
  }
}

static void test_elector_free_from_callback(mongoelector_client *client) {
  char key[128];
  mongoelector_elector_config cfg;
  mongoelector_elector *next = NULL;
  mongoelector_locker *probe = NULL;
  mongoelector_locker_config lc;
  self_freeing s;
  int leader = 0, locked = 1;
  double t0;

  memset(&s, 0, sizeof s);
  pthread_mutex_init(&s.mu, NULL);
  unique_key(key, sizeof key, "api11-selffree");
  CHECK_OK(mongoelector_elector_config_init(&cfg, MONGOELECTOR_ELECTOR_CONFIG_VERSION));
  cfg.ttl_seconds = 30;
  cfg.on_leader = free_self_on_leader;
  cfg.on_leader_loss = count_loss;
  cfg.user_data = &s;
  CHECK_OK(mongoelector_elector_new_with(client, key, &cfg, &s.elector));
  CHECK_OK(mongoelector_elector_start(s.elector));
  CHECK(wait_until_set(&s.mu, &s.freed_in_callback, 10));
  /* Stopped and freed on another thread: with delete_on_release (the default) the lock
   * document goes at once, so the key is free long before its ttl (30 s). */
  CHECK_OK(mongoelector_locker_config_init(&lc, MONGOELECTOR_LOCKER_CONFIG_VERSION));
  lc.collection = "elector.locks";
  CHECK_OK(mongoelector_locker_new_with(client, key, &lc, &probe));
  t0 = now_s();
  while (locked && now_s() - t0 < 5) {
    CHECK_OK(mongoelector_locker_locked(probe, &locked));
    if (locked) sleep_s(0.02);
  }
  CHECK(locked == 0);
  printf("  elector freed from on_leader: key free after %.0f ms\n", (now_s() - t0) * 1000);
  mongoelector_locker_free(probe);
  /* No callback of the freed handle ran after its free (on_leader_loss included). */
  sleep_s(0.2);
  pthread_mutex_lock(&s.mu);
  CHECK(s.led == 1 && s.losses == 0);
  pthread_mutex_unlock(&s.mu);
  /* Another node leads at its first poll. */
  CHECK_OK(mongoelector_elector_new_with(client, key, NULL, &next));
  CHECK_OK(mongoelector_elector_poll(next));
  CHECK_OK(mongoelector_elector_is_leader(next, &leader));
  CHECK(leader == 1);
  mongoelector_elector_free(next);
}

/* ---- the server's error code ---------------------------------------------------------------- */

static void test_server_error_code(mongoelector_client *client, const char *server_name) {
  char coll[191];
  mongoelector_locker_config lc;
  mongoelector_locker *l = NULL;
  mongoelector_error_info info;
  mongoelector_status st;
  size_t i;
  /* A collection name within our own limit (200) whose namespace exceeds the test
   * servers' (mongo-java-server: 128 bytes): the server refuses the index creation. */
  memset(coll, 'x', 190);
  coll[190] = '\0';
  CHECK_OK(mongoelector_locker_config_init(&lc, MONGOELECTOR_LOCKER_CONFIG_VERSION));
  lc.collection = coll;
  lc.allow_unsafe_server = g_unsafe_server;
  st = mongoelector_locker_new_with(client, "k", &lc, &l);
  if (st == MONGOELECTOR_OK && strcmp(server_name, "mongo-java-server") != 0) {
    /* MongoDB 4.4+ allows 255-byte namespaces, FerretDB longer ones: nothing to refuse. */
    printf("  server error code: not applicable on %s (the namespace is accepted)\n", server_name);
    mongoelector_locker_free(l);
    return;
  }
  CHECK_STATUS(st, MONGOELECTOR_ERR_SERVER);
  info.version = MONGOELECTOR_ERROR_INFO_VERSION;
  CHECK_OK(mongoelector_last_error_info(&info));
  CHECK(info.status == MONGOELECTOR_ERR_SERVER);
  CHECK(info.code != 0);
  printf("  server error: code %d codeName \"%s\", %zu labels:", (int)info.code, info.code_name,
         info.label_count);
  for (i = 0; i < info.label_count; i++) printf(" %s", info.labels[i]);
  printf("\n");
}

/* ---- metrics and structured log records -------------------------------------------- */

typedef struct record_sink {
  pthread_mutex_t mu;
  char key[128];
  int elected;
  int lost;
  int info_other; /* records at INFO or above about the key, other than the two above */
  int64_t elected_fence;
  char uuid[64];
  char host[256];
} record_sink;

static void sink_record(const mongoelector_log_record *r, void *user_data) {
  record_sink *s = (record_sink *)user_data;
  if (r->version < 1 || strcmp(r->key, s->key) != 0) return;
  pthread_mutex_lock(&s->mu);
  if (r->event == MONGOELECTOR_EVENT_LEADER_ELECTED && r->level == MONGOELECTOR_LOG_INFO) {
    s->elected++;
    s->elected_fence = r->fence;
    snprintf(s->uuid, sizeof s->uuid, "%s", r->uuid);
    snprintf(s->host, sizeof s->host, "%s", r->host);
  } else if (r->event == MONGOELECTOR_EVENT_LEADER_LOST && r->level == MONGOELECTOR_LOG_INFO) {
    s->lost++;
  } else if (r->level >= MONGOELECTOR_LOG_INFO) {
    s->info_other++;
  }
  pthread_mutex_unlock(&s->mu);
}

static void test_stats_and_records(mongoelector_client *client) {
  mongoelector_stats before, after;
  mongoelector_locker *a = NULL, *b = NULL;
  mongoelector_elector *e = NULL;
  mongoelector_acquire_options once;
  mongoelector_locker_config cfg;
  record_sink rs;
  const char *uuid = NULL;
  int64_t fence = 0;
  int leader = 0;
  size_t i;
  uint64_t in_buckets = 0;

  memset(&before, 0, sizeof before);
  CHECK_INVALID(mongoelector_stats_get(&before)); /* version unset */
  CHECK_INVALID(mongoelector_stats_get(NULL));
  before.version = MONGOELECTOR_STATS_VERSION;
  after.version = MONGOELECTOR_STATS_VERSION;
  CHECK_OK(mongoelector_stats_get(&before));

  memset(&rs, 0, sizeof rs);
  pthread_mutex_init(&rs.mu, NULL);
  unique_key(rs.key, sizeof rs.key, "api11-stats");
  CHECK_OK(mongoelector_set_log_record_handler(MONGOELECTOR_LOG_DEBUG, sink_record, &rs, NULL));

  CHECK_OK(mongoelector_locker_config_init(&cfg, MONGOELECTOR_LOCKER_CONFIG_VERSION));
  cfg.allow_unsafe_server = g_unsafe_server;
  CHECK_OK(mongoelector_locker_new_with(client, rs.key, &cfg, &a));
  CHECK_OK(mongoelector_locker_new_with(client, rs.key, &cfg, &b));
  CHECK_OK(mongoelector_acquire_options_init(&once, MONGOELECTOR_ACQUIRE_OPTIONS_VERSION));
  CHECK_OK(mongoelector_locker_acquire_with(a, &once, &fence));
  once.blocking = 0;
  CHECK_STATUS(mongoelector_locker_acquire_with(b, &once, &fence), MONGOELECTOR_ERR_LOCK_EXISTS);
  once.blocking = 1;
  once.timeout_seconds = 0.1;
  once.step_seconds = 0.05;
  CHECK_STATUS(mongoelector_locker_acquire_with(b, &once, &fence), MONGOELECTOR_ERR_TIMEOUT);
  CHECK_OK(mongoelector_locker_release(a, 0));
  mongoelector_locker_free(a);
  mongoelector_locker_free(b);

  if (!g_unsafe_server) {
    char ekey[160];
    snprintf(ekey, sizeof ekey, "%s", rs.key);
    CHECK_OK(mongoelector_elector_new_with(client, ekey, NULL, &e));
    CHECK_OK(mongoelector_elector_poll(e));
    CHECK_OK(mongoelector_elector_is_leader(e, &leader));
    CHECK(leader == 1);
    CHECK_OK(mongoelector_elector_fence(e, &fence));
    CHECK_OK(mongoelector_elector_uuid(e, &uuid));
    CHECK_OK(mongoelector_elector_release(e));
    pthread_mutex_lock(&rs.mu);
    CHECK(rs.elected == 1 && rs.lost == 1);
    CHECK(rs.elected_fence == fence);
    CHECK(strcmp(rs.uuid, uuid) == 0 && strlen(rs.host) > 0);
    CHECK(rs.info_other == 0); /* nothing chatty at INFO */
    pthread_mutex_unlock(&rs.mu);
    mongoelector_elector_free(e);
  }
  CHECK_OK(mongoelector_set_log_record_handler(MONGOELECTOR_LOG_DEBUG, NULL, NULL, NULL));
  CHECK(strcmp(mongoelector_log_event_name(MONGOELECTOR_EVENT_STEP_DOWN), "step_down") == 0);
  CHECK(strcmp(mongoelector_log_event_name((mongoelector_log_event)99), "unknown") == 0);

  CHECK_OK(mongoelector_stats_get(&after));
  CHECK(after.acquires_acquired - before.acquires_acquired >= 1);
  CHECK(after.acquires_held - before.acquires_held == 1);
  CHECK(after.acquires_timeout - before.acquires_timeout == 1);
  CHECK(after.acquire_latency_count - before.acquire_latency_count >= 3);
  CHECK(after.acquire_latency_sum_seconds - before.acquire_latency_sum_seconds >= 0.09);
  CHECK(after.round_trips > before.round_trips);
  CHECK(after.renewals >= before.renewals);
  if (!g_unsafe_server) {
    CHECK(after.leader_elected - before.leader_elected == 1);
    CHECK(after.leader_lost - before.leader_lost == 1);
  }
  for (i = 0; i < MONGOELECTOR_STATS_LATENCY_BUCKETS; i++)
    in_buckets += after.acquire_latency_buckets[i];
  CHECK(in_buckets == after.acquire_latency_count);
  for (i = 1; i + 1 < MONGOELECTOR_STATS_LATENCY_BUCKETS; i++)
    CHECK(after.acquire_latency_bounds[i] > after.acquire_latency_bounds[i - 1]);
  printf("  stats: %llu acquired, %llu held, %llu timeout, %llu round trips, clock offset %.3f s\n",
         (unsigned long long)after.acquires_acquired, (unsigned long long)after.acquires_held,
         (unsigned long long)after.acquires_timeout, (unsigned long long)after.round_trips,
         after.clock_offset_seconds);
}

/* ---- semaphores ---------------------------------------------------------------------- */

static void test_semaphore(mongoelector_client *client) {
  char key[128];
  mongoelector_semaphore_config cfg;
  mongoelector_semaphore *a = NULL, *b = NULL, *c = NULL, *wrong = NULL;
  mongoelector_acquire_options once;
  mongoelector_semaphore_holder *holders = NULL;
  size_t n = 0, i;
  int64_t fa = 0, fb = 0, fc = 0, expire = 0, f = 0;
  int renewed = 0;

  unique_key(key, sizeof key, "api11-sem");
  CHECK_INVALID(mongoelector_semaphore_config_init(&cfg, 0));
  CHECK_OK(mongoelector_semaphore_config_init(&cfg, MONGOELECTOR_SEMAPHORE_CONFIG_VERSION));
  CHECK(cfg.limit == 1 && cfg.ttl_seconds == 600 && cfg.collection == NULL);
  cfg.limit = 2;
  cfg.ttl_seconds = 30;
  cfg.allow_unsafe_server = g_unsafe_server;
  CHECK_INVALID(mongoelector_semaphore_new(client, "", &cfg, &a));
  CHECK_OK(mongoelector_semaphore_new(client, key, &cfg, &a));
  CHECK_OK(mongoelector_semaphore_new(client, key, &cfg, &b));
  CHECK_OK(mongoelector_semaphore_new(client, key, &cfg, &c));
  CHECK_OK(mongoelector_semaphore_acquire(a, NULL, &fa));
  CHECK_OK(mongoelector_semaphore_acquire(b, NULL, &fb));
  CHECK(fb > fa && fa > 0); /* one token sequence per key, across slots */
  /* Both slots held: a third holder is refused (non-blocking) or times out. */
  CHECK_OK(mongoelector_acquire_options_init(&once, MONGOELECTOR_ACQUIRE_OPTIONS_VERSION));
  once.blocking = 0;
  CHECK_STATUS(mongoelector_semaphore_acquire(c, &once, &fc), MONGOELECTOR_ERR_LOCK_EXISTS);
  once.blocking = 1;
  once.timeout_seconds = 0.2;
  once.step_seconds = 0.05;
  CHECK_STATUS(mongoelector_semaphore_acquire(c, &once, &fc), MONGOELECTOR_ERR_TIMEOUT);
  CHECK_OK(mongoelector_semaphore_holders(a, &holders, &n));
  CHECK(n == 2);
  for (i = 0; i < n; i++) CHECK(holders[i].pid == (int64_t)getpid() && holders[i].expire_ms > 0);
  CHECK((holders[0].fence == fa && holders[1].fence == fb) ||
        (holders[0].fence == fb && holders[1].fence == fa));
  mongoelector_semaphore_holders_free(holders, n);
  CHECK_OK(mongoelector_semaphore_touch(a, &renewed, &expire));
  CHECK(renewed == 1 && expire > 0);
  /* A slot freed by a release is taken at once, with a larger token. */
  CHECK_OK(mongoelector_semaphore_release(a));
  CHECK_OK(mongoelector_semaphore_fence(a, &f));
  CHECK(f == 0);
  CHECK_OK(mongoelector_semaphore_touch(a, &renewed, NULL));
  CHECK(renewed == 0);
  once.blocking = 0;
  once.timeout_seconds = -1;
  CHECK_OK(mongoelector_semaphore_acquire(c, &once, &fc));
  CHECK(fc > fb);
  /* A holder asking for another limit is refused, and writes nothing. */
  cfg.limit = 3;
  CHECK_OK(mongoelector_semaphore_new(client, key, &cfg, &wrong));
  CHECK_INVALID(mongoelector_semaphore_acquire(wrong, &once, &f));
  CHECK(strstr(mongoelector_last_error(), "limit") != NULL);
  CHECK_OK(mongoelector_semaphore_release(b));
  CHECK_OK(mongoelector_semaphore_release(c));
  mongoelector_semaphore_free(a);
  mongoelector_semaphore_free(b);
  mongoelector_semaphore_free(c);
  mongoelector_semaphore_free(wrong);
  mongoelector_semaphore_free(NULL);
  printf("  semaphore: tokens %lld < %lld < %lld, limit 2 enforced\n", (long long)fa, (long long)fb,
         (long long)fc);
}

/* A semaphore slot kept alive by the renewer: it outlives its ttl, counts against the
 * limit, and its free releases it at once. */
static void test_semaphore_lease(mongoelector_client *client) {
  char key[128];
  mongoelector_semaphore_config cfg;
  mongoelector_semaphore *a = NULL, *b = NULL;
  mongoelector_semaphore_lease *lease = NULL, *second = NULL;
  mongoelector_acquire_options once;
  int64_t fence = 0, fb = 0;
  int lost = -1;

  unique_key(key, sizeof key, "api11-semlease");
  CHECK_OK(mongoelector_semaphore_config_init(&cfg, MONGOELECTOR_SEMAPHORE_CONFIG_VERSION));
  cfg.limit = 1;
  cfg.ttl_seconds = 1; /* renewed about every 0.33 s */
  cfg.allow_unsafe_server = g_unsafe_server;
  CHECK_OK(mongoelector_semaphore_new(client, key, &cfg, &a));
  CHECK_OK(mongoelector_semaphore_new(client, key, &cfg, &b));
  CHECK_INVALID(mongoelector_semaphore_lease_acquire(a, NULL, NULL, NULL, NULL));
  CHECK_OK(mongoelector_semaphore_lease_acquire(a, NULL, NULL, NULL, &lease));
  CHECK_INVALID(mongoelector_semaphore_lease_acquire(a, NULL, NULL, NULL, &second));
  CHECK_OK(mongoelector_semaphore_lease_fence(lease, &fence));
  CHECK(fence > 0);
  /* Twice the ttl later the slot is still held: the renewer kept it alive. */
  CHECK_OK(mongoelector_semaphore_lease_wait_lost(lease, 2.0, &lost));
  CHECK(lost == 0);
  CHECK_OK(mongoelector_acquire_options_init(&once, MONGOELECTOR_ACQUIRE_OPTIONS_VERSION));
  once.blocking = 0;
  CHECK_STATUS(mongoelector_semaphore_acquire(b, &once, &fb), MONGOELECTOR_ERR_LOCK_EXISTS);
  CHECK_OK(mongoelector_semaphore_lease_lost(lease, &lost));
  CHECK(lost == 0);
  mongoelector_semaphore_lease_free(lease); /* releases the slot */
  mongoelector_semaphore_lease_free(NULL);
  CHECK_OK(mongoelector_semaphore_acquire(b, &once, &fb));
  CHECK(fb > fence);
  CHECK_OK(mongoelector_semaphore_release(b));
  /* After the free, the handle may hold a lease again. */
  CHECK_OK(mongoelector_semaphore_lease_acquire(a, &once, NULL, NULL, &lease));
  mongoelector_semaphore_lease_free(lease);
  mongoelector_semaphore_free(a);
  mongoelector_semaphore_free(b);
  printf("  semaphore lease: kept past 2 ttls, freed slot taken at once (token %lld > %lld)\n",
         (long long)fb, (long long)fence);
}

/* ---- scheduler semantics: min_hold and once per window ----------------------------------- */

static void sleep_ms(long ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (ms % 1000) * 1000000L;
  nanosleep(&ts, NULL);
}

static void test_scheduler(mongoelector_client *client) {
  char key[128];
  mongoelector_locker_config cfg;
  mongoelector_locker *a = NULL, *b = NULL;
  mongoelector_lease *lease = NULL;
  mongoelector_acquire_options once;
  int64_t fence = 0, frees_at = -1, start = -1, start_b = -1;
  int claimed = -1;
  mongoelector_lock_details d;

  unique_key(key, sizeof key, "api11-sched");
  CHECK_OK(mongoelector_locker_config_init(&cfg, MONGOELECTOR_LOCKER_CONFIG_VERSION));
  cfg.allow_unsafe_server = g_unsafe_server;
  cfg.ttl_seconds = 30;
  CHECK_OK(mongoelector_locker_new_with(client, key, &cfg, &a));
  CHECK_OK(mongoelector_locker_new_with(client, key, &cfg, &b));
  CHECK_OK(mongoelector_acquire_options_init(&once, MONGOELECTOR_ACQUIRE_OPTIONS_VERSION));
  once.blocking = 0;

  /* min_hold: the 30 s lease is cut to 1.5 s after the acquire, and holds until then. */
  CHECK_OK(mongoelector_locker_acquire_with(a, &once, &fence));
  memset(&d, 0, sizeof d);
  d.version = MONGOELECTOR_LOCK_DETAILS_VERSION;
  CHECK_OK(mongoelector_locker_current_details(a, &d, &claimed));
  CHECK(claimed == 1);
  CHECK_INVALID(mongoelector_locker_release_min_hold(a, -1, &frees_at));
  CHECK_INVALID(mongoelector_locker_release_min_hold(a, NAN, &frees_at));
  CHECK_OK(mongoelector_locker_fence(a, &fence));
  CHECK(fence > 0); /* a refused call kept the hold */
  CHECK_OK(mongoelector_locker_release_min_hold(a, 1.5, &frees_at));
  /* Never early: from the latest the server's clock could read at the claim's reply, at
     or after ts_created (later by a round trip and the clock sample's uncertainty). */
  CHECK(frees_at >= d.created_ms + 1500 && frees_at <= d.created_ms + 1500 + 1000);
  mongoelector_lock_details_clear(&d);
  CHECK_OK(mongoelector_locker_fence(a, &fence));
  CHECK(fence == 0); /* let go locally */
  CHECK_STATUS(mongoelector_locker_acquire_with(b, &once, NULL), MONGOELECTOR_ERR_LOCK_EXISTS);
  sleep_ms(1700);
  CHECK_OK(mongoelector_locker_acquire_with(b, &once, NULL));
  /* Past min_hold it is a plain release (100 ms: well past any clock uncertainty here). */
  sleep_ms(200);
  CHECK_OK(mongoelector_locker_release_min_hold(b, 0.1, &frees_at));
  CHECK(frees_at == 0);
  CHECK_OK(mongoelector_locker_acquire_with(a, &once, NULL));
  CHECK_OK(mongoelector_locker_release(a, 0));

  /* The lease's release with min_hold, then free releases nothing more. */
  CHECK_OK(mongoelector_lease_acquire_with(a, &once, NULL, NULL, &lease));
  CHECK_INVALID(mongoelector_lease_release(lease, -2));
  CHECK_INVALID(mongoelector_lease_release(NULL, 0));
  CHECK_OK(mongoelector_lease_release(lease, 60));
  CHECK_OK(mongoelector_lease_release(lease, 0)); /* idempotent: still held for min_hold */
  mongoelector_lease_free(lease);
  CHECK_STATUS(mongoelector_locker_acquire_with(b, &once, NULL), MONGOELECTOR_ERR_LOCK_EXISTS);
  CHECK_OK(mongoelector_locker_release(b, 1)); /* force: free the min_hold for what follows */

  /* Once per window: an hour window, aligned on the server's clock. */
  CHECK_INVALID(mongoelector_locker_claim_window(a, 0, &claimed, &start));
  CHECK_INVALID(mongoelector_locker_claim_window(a, 3600, NULL, &start));
  CHECK_OK(mongoelector_locker_claim_window(a, 3600, &claimed, &start));
  CHECK(claimed == 1 && start > 0 && start % 3600000 == 0);
  CHECK_OK(mongoelector_locker_claim_window(b, 3600, &claimed, &start_b));
  CHECK(claimed == 0 && start_b == 0);
  CHECK_OK(mongoelector_locker_claim_window(a, 3600, &claimed, NULL));
  CHECK(claimed == 0);
  /* The key's own lock is independent of its windows. */
  CHECK_OK(mongoelector_locker_acquire_with(b, &once, NULL));
  CHECK_OK(mongoelector_locker_release(b, 0));
  mongoelector_locker_free(a);
  mongoelector_locker_free(b);
  printf("  scheduler: min_hold kept the lock 1.5 s after the acquire, window %lld claimed once\n",
         (long long)start);
}

/* ---- memory:// (the testing kit's backend) ------------------------------------------------ */

static void test_memory_backend(void) {
  mongoelector_client *c1 = NULL, *c2 = NULL, *other = NULL, *bad = NULL;
  mongoelector_locker *a = NULL, *b = NULL, *c = NULL;
  mongoelector_acquire_options once;
  int64_t fa = 0, fb = 0;
  char name[128], uri[160];

  unique_key(name, sizeof name, "api11-mem");
  snprintf(uri, sizeof uri, "memory://%s", name);
  CHECK_OK(mongoelector_client_new(uri, "", &c1));
  CHECK_OK(mongoelector_client_new(uri, "", &c2)); /* the same name: the same locks */
  CHECK_OK(mongoelector_client_new("memory://api11-other-world", "", &other));
  CHECK_INVALID(mongoelector_client_new("memory://x?opt=1", "", &bad));
  CHECK_OK(mongoelector_acquire_options_init(&once, MONGOELECTOR_ACQUIRE_OPTIONS_VERSION));
  once.blocking = 0;
  CHECK_OK(mongoelector_locker_new(c1, "k", NULL, &a));
  CHECK_OK(mongoelector_locker_new(c2, "k", NULL, &b));
  CHECK_OK(mongoelector_locker_new(other, "k", NULL, &c));
  CHECK_OK(mongoelector_locker_acquire_with(a, &once, &fa));
  CHECK_STATUS(mongoelector_locker_acquire_with(b, &once, NULL), MONGOELECTOR_ERR_LOCK_EXISTS);
  CHECK_OK(mongoelector_locker_acquire_with(c, &once, NULL));
  CHECK_OK(mongoelector_locker_release(a, 0));
  CHECK_OK(mongoelector_locker_acquire_with(b, &once, &fb));
  CHECK(fb > fa);
  mongoelector_locker_free(a);
  mongoelector_locker_free(b);
  mongoelector_locker_free(c);
  mongoelector_client_free(c1);
  mongoelector_client_free(c2);
  mongoelector_client_free(other);
  printf("  memory://: shared by name, tokens %lld < %lld\n", (long long)fa, (long long)fb);
}

/* ---- main -------------------------------------------------------------------------------- */

static void run_backend(mongoelector_client *client, const char *what) {
  test_per_call_cancel(client, what);
  test_lock_details(client);
  test_config_checks(client);
  test_stats_and_records(client);
  test_semaphore(client);
  test_semaphore_lease(client);
  test_scheduler(client);
  if (!g_unsafe_server) test_elector_free_from_callback(client);
}

int main(int argc, char **argv) {
  int offline = argc > 1 && strcmp(argv[1], "--offline") == 0;
  const char *uri = getenv("MONGOELECTOR_TEST_URI");
  char path[256];
  char *name = NULL, *version = NULL;
  mongoelector_client *client = NULL;

  test_inits();
  test_cancel_token_handle();
  test_log_handler();
  test_memory_backend();
  if (offline) {
    snprintf(path, sizeof path, "sqlite://%s/api11-%ld.db",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid());
    CHECK_OK(mongoelector_client_new(path, "", &client));
    run_backend(client, "sqlite");
    mongoelector_client_free(client);
    unlink(path + strlen("sqlite://"));
    printf("api11_test: %d passed, 0 failed\n", g_passed);
    return 0;
  }
  if (uri == NULL || uri[0] == '\0') {
    printf("api11_test: MONGOELECTOR_TEST_URI is not set: skipped\n");
    return 77;
  }
  CHECK_OK(mongoelector_client_new(uri, "api11_test", &client));
  CHECK_OK(mongoelector_client_server_info_copy(client, &name, &version));
  g_unsafe_server = strcmp(name, "FerretDB") == 0;
  printf("api11_test on %s %s\n", name, version);
  run_backend(client, "server");
  test_server_error_code(client, name);
  mongoelector_free(name);
  mongoelector_free(version);
  mongoelector_client_free(client);
  printf("api11_test: %d passed, 0 failed\n", g_passed);
  return 0;
}
