/*
 * observe_test: the leader observer (mongoelector_observer_*) and graceful handover
 * (mongoelector_elector_resign / _transfer, handover_poll_seconds) seen from C (only the
 * public header, only the shared library, -std=c99 -pedantic -Werror).
 *
 * Usage: observe_test [--offline]
 *   --offline   argument checks, then every scenario on the in-process memory:// backend
 *               and on an SQLite file (no server).
 *   (default)   the scenarios against the server at MONGOELECTOR_TEST_URI (exit 77
 *               without it).
 *
 * Timing: every wait is a poll loop with a deadline about ten times what it should take;
 * assertions are on the order and content of what the observer reports (who, which
 * token), never on durations. The two sleeps are for NEGATIVE checks (nothing happens).
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK_PROGRAM "observe_test"
#include "check.h"
#include "mongoelector.h"
#include "mongoelector/testing.h"

#define MAX_EVENTS 64
#define INTERVAL 0.05 /* the observers' poll interval (seconds) */

/* FerretDB (non-atomic findAndModify): lockers opt in, electors are skipped. */
static int g_unsafe_server = 0;

static void unique_key(char *out, size_t n, const char *prefix) {
  static int counter = 0;
  snprintf(out, n, "%s-%ld-%d-%d", prefix, (long)getpid(), (int)time(NULL), ++counter);
}

/* ---- what an observer reported --------------------------------------------------------- */

typedef struct event {
  int has_leader;
  char uuid[64];
  char host[256];
  int64_t pid;
  int64_t fence;
  int64_t server_time_ms;
  int status; /* version 2 */
  int64_t expire_ms;
  char handover_uuid[64];
  char handover_host[256];
  int64_t handover_pid;
  int64_t handover_fence;
} event;

typedef struct recorder {
  pthread_mutex_t mu;
  event ev[MAX_EVENTS];
  int n;
  int bad;         /* a report that broke the callback's contract */
  int in_callback; /* on_change is running now */
  double hold_s;   /* each call sleeps this long (free from another thread) */
  int returned;    /* calls that returned */
  int free_on;     /* free `self` from inside the call number free_on (0: never) */
  mongoelector_observer *self;
} recorder;

static void recorder_init(recorder *r) {
  memset(r, 0, sizeof *r);
  pthread_mutex_init(&r->mu, NULL);
}

static void copy_event(event *e, const mongoelector_leader_state *s) {
  e->has_leader = s->has_leader;
  snprintf(e->uuid, sizeof e->uuid, "%s", s->uuid);
  snprintf(e->host, sizeof e->host, "%s", s->host);
  e->pid = s->pid;
  e->fence = s->fence;
  e->server_time_ms = s->server_time_ms;
  e->status = s->status;
  e->expire_ms = s->expire_ms;
  snprintf(e->handover_uuid, sizeof e->handover_uuid, "%s", s->handover_uuid);
  snprintf(e->handover_host, sizeof e->handover_host, "%s", s->handover_host);
  e->handover_pid = s->handover_pid;
  e->handover_fence = s->handover_fence;
}

/* The version-2 fields agree with the version-1 ones: LEADS exactly when has_leader, a
 * lease end with LEADS, PENDING and UNKNOWN, the target only with PENDING. */
static int state_consistent(const mongoelector_leader_state *s) {
  if (s->handover_uuid == NULL || s->handover_host == NULL) return 0;
  if ((s->status == MONGOELECTOR_LEADER_LEADS) != (s->has_leader != 0)) return 0;
  if ((s->status == MONGOELECTOR_LEADER_NONE) != (s->expire_ms == 0)) return 0;
  if (s->status == MONGOELECTOR_LEADER_PENDING) {
    return s->handover_uuid[0] != '\0' && s->handover_fence > 0;
  }
  return s->status >= MONGOELECTOR_LEADER_NONE && s->status <= MONGOELECTOR_LEADER_UNKNOWN &&
         s->handover_uuid[0] == '\0' && s->handover_host[0] == '\0' && s->handover_pid == 0 &&
         s->handover_fence == 0;
}

static void on_change(const mongoelector_leader_state *s, void *user_data) {
  recorder *r = (recorder *)user_data;
  mongoelector_observer *self = NULL;
  int n;
  pthread_mutex_lock(&r->mu);
  if (r->in_callback) r->bad = 1; /* calls of one observer never overlap */
  r->in_callback = 1;
  if (s == NULL || s->version != MONGOELECTOR_LEADER_STATE_VERSION || s->uuid == NULL ||
      s->host == NULL || (!s->has_leader && (s->uuid[0] || s->fence)) || !state_consistent(s)) {
    r->bad = 1;
  }
  if (r->n < MAX_EVENTS && s != NULL && s->uuid != NULL && s->host != NULL) {
    copy_event(&r->ev[r->n], s);
  }
  n = ++r->n;
  if (r->free_on == n) self = r->self;
  pthread_mutex_unlock(&r->mu);
  if (r->hold_s > 0) sleep_s(r->hold_s);
  if (self != NULL) mongoelector_observer_free(self); /* returns at once */
  pthread_mutex_lock(&r->mu);
  r->in_callback = 0;
  r->returned++;
  pthread_mutex_unlock(&r->mu);
}

static int recorded(recorder *r) {
  int n;
  pthread_mutex_lock(&r->mu);
  n = r->n;
  pthread_mutex_unlock(&r->mu);
  return n;
}

/* Waits until the observer reported, at index >= from, a state of `status` naming uuid
 * and fence (the leader's, or with PENDING the target's; uuid NULL/fence 0: any).
 * Returns its index. */
static int wait_status(recorder *r, int from, int status, const char *uuid, int64_t fence,
                       double timeout_s) {
  double t0 = now_s();
  for (;;) {
    int i, n;
    pthread_mutex_lock(&r->mu);
    n = r->n < MAX_EVENTS ? r->n : MAX_EVENTS;
    for (i = from; i < n; ++i) {
      const event *e = &r->ev[i];
      const char *named = status == MONGOELECTOR_LEADER_PENDING ? e->handover_uuid : e->uuid;
      int64_t token = status == MONGOELECTOR_LEADER_PENDING ? e->handover_fence : e->fence;
      if (e->status == status && (uuid == NULL || strcmp(named, uuid) == 0) &&
          (fence == 0 || token == fence)) {
        pthread_mutex_unlock(&r->mu);
        return i;
      }
    }
    pthread_mutex_unlock(&r->mu);
    if (now_s() - t0 > timeout_s) {
      fprintf(stderr, "no report of status=%d uuid=%s fence=%lld within %.1f s; reports:\n", status,
              uuid ? uuid : "(any)", (long long)fence, timeout_s);
      for (i = 0; i < n; ++i) {
        fprintf(stderr, "  [%d] status=%d uuid=%s fence=%lld handover_uuid=%s\n", i,
                r->ev[i].status, r->ev[i].uuid, (long long)r->ev[i].fence, r->ev[i].handover_uuid);
      }
      CHECK(!"the observer reported the expected state");
    }
    sleep_s(0.01);
  }
}

/* wait_status with has_leader 1 (LEADS) or 0 (NONE). */
static int wait_event(recorder *r, int from, int has_leader, const char *uuid, int64_t fence,
                      double timeout_s) {
  return wait_status(r, from, has_leader ? MONGOELECTOR_LEADER_LEADS : MONGOELECTOR_LEADER_NONE,
                     uuid, fence, timeout_s);
}

/* The contract of every sequence of reports: well-formed calls that never overlap, each
 * one a CHANGE (differs from the one before), tokens of successive leaders increasing. */
static void check_sequence(recorder *r) {
  int i;
  int64_t last_fence = 0;
  pthread_mutex_lock(&r->mu);
  CHECK(r->bad == 0);
  CHECK(r->n <= MAX_EVENTS);
  for (i = 0; i < r->n; ++i) {
    const event *e = &r->ev[i];
    if (i > 0) {
      const event *p = &r->ev[i - 1];
      CHECK(e->status != p->status || strcmp(e->uuid, p->uuid) != 0 || e->fence != p->fence ||
            strcmp(e->handover_uuid, p->handover_uuid) != 0 ||
            e->handover_fence != p->handover_fence);
    }
    if (e->has_leader) {
      CHECK(e->fence > last_fence);
      CHECK(e->uuid[0] != '\0' && e->host[0] != '\0' && e->pid == (int64_t)getpid());
      last_fence = e->fence;
    }
    CHECK(e->server_time_ms > (int64_t)1500000000 * 1000);
  }
  pthread_mutex_unlock(&r->mu);
}

/* ---- electors ------------------------------------------------------------------------- */

typedef struct node {
  mongoelector_elector *e;
  const char *uuid;
  pthread_mutex_t mu;
  int led, lost, loops;
} node;

static void on_leader(void *ud) {
  node *n = (node *)ud;
  pthread_mutex_lock(&n->mu);
  n->led++;
  pthread_mutex_unlock(&n->mu);
}
static void on_loss(void *ud) {
  node *n = (node *)ud;
  pthread_mutex_lock(&n->mu);
  n->lost++;
  pthread_mutex_unlock(&n->mu);
}
static void on_loop(void *ud) {
  node *n = (node *)ud;
  pthread_mutex_lock(&n->mu);
  n->loops++;
  pthread_mutex_unlock(&n->mu);
}

static int counter(node *n, const int *field) {
  int v;
  pthread_mutex_lock(&n->mu);
  v = *field;
  pthread_mutex_unlock(&n->mu);
  return v;
}

/* handover_poll < -1.5: leave the field at its default (-1 from config_init). */
static void node_new(node *n, mongoelector_client *client, const char *key, double ttl,
                     double handover_poll) {
  mongoelector_elector_config cfg;
  memset(n, 0, sizeof *n);
  pthread_mutex_init(&n->mu, NULL);
  CHECK_OK(mongoelector_elector_config_init(&cfg, MONGOELECTOR_ELECTOR_CONFIG_VERSION));
  CHECK(cfg.handover_poll_seconds == -1);
  cfg.ttl_seconds = ttl;
  if (handover_poll > -1.5) cfg.handover_poll_seconds = handover_poll;
  cfg.on_leader = on_leader;
  cfg.on_leader_loss = on_loss;
  cfg.on_loop = on_loop;
  cfg.user_data = n;
  CHECK_OK(mongoelector_elector_new_with(client, key, &cfg, &n->e));
  CHECK_OK(mongoelector_elector_uuid(n->e, &n->uuid));
}

static void node_free(node *n) {
  mongoelector_elector_free(n->e);
  pthread_mutex_destroy(&n->mu);
}

/* Polled in wait loops: counts as a check only when it fails (the summary's count stays
 * the same from run to run). */
static int is_leader(node *n) {
  int v = -1;
  mongoelector_status st = mongoelector_elector_is_leader(n->e, &v);
  if (st != MONGOELECTOR_OK) CHECK_OK(st);
  return v;
}

static int64_t fence_of(node *n) {
  int64_t f = -1;
  CHECK_OK(mongoelector_elector_fence(n->e, &f));
  return f;
}

/* on_leader runs just after is_leader turns 1: wait for the count, don't sample it. */
static void wait_count(node *n, const int *field, int want, double timeout_s) {
  double t0 = now_s();
  while (counter(n, field) != want) {
    if (now_s() - t0 > timeout_s) CHECK(counter(n, field) == want);
    sleep_s(0.01);
  }
}

static void wait_leader(node *n, int want, double timeout_s) {
  double t0 = now_s();
  while (is_leader(n) != want) {
    if (now_s() - t0 > timeout_s) CHECK(is_leader(n) == want);
    sleep_s(0.01);
  }
}

/* Started, and its first poll (which reports its status document) is done. */
static void start_and_wait_first_poll(node *n) {
  double t0 = now_s();
  CHECK_OK(mongoelector_elector_start(n->e));
  while (counter(n, &n->loops) < 1) {
    if (now_s() - t0 > 10) CHECK(counter(n, &n->loops) >= 1);
    sleep_s(0.01);
  }
}

static mongoelector_observer *observer_new(mongoelector_client *client, const char *key,
                                           recorder *r) {
  mongoelector_observer_config oc;
  mongoelector_observer *o = NULL;
  CHECK_OK(mongoelector_observer_config_init(&oc, MONGOELECTOR_OBSERVER_CONFIG_VERSION));
  oc.interval_seconds = INTERVAL;
  pthread_mutex_lock(&r->mu); /* the thread may report before *out is written */
  CHECK_OK(mongoelector_observer_new(client, key, &oc, on_change, r, &o));
  r->self = o;
  pthread_mutex_unlock(&r->mu);
  return o;
}

/* ---- argument checks ---------------------------------------------------------------------- */

static void test_arguments(void) {
  mongoelector_client *client = NULL;
  mongoelector_observer_config oc;
  mongoelector_observer *o = NULL;
  mongoelector_leader_state st;
  mongoelector_elector_config ec;
  mongoelector_elector *e = NULL;
  char name[128], uri[160];

  unique_key(name, sizeof name, "observe-args");
  snprintf(uri, sizeof uri, "memory://%s", name);
  CHECK_OK(mongoelector_client_new(uri, "", &client));

  /* Observer config: versioned init, documented defaults. */
  CHECK_INVALID(mongoelector_observer_config_init(NULL, MONGOELECTOR_OBSERVER_CONFIG_VERSION));
  CHECK_INVALID(mongoelector_observer_config_init(&oc, 0));
  CHECK_INVALID(mongoelector_observer_config_init(&oc, MONGOELECTOR_OBSERVER_CONFIG_VERSION + 1));
  CHECK(strstr(mongoelector_last_error(), "mongoelector_observer_config_init") != NULL);
  CHECK_OK(mongoelector_observer_config_init(&oc, MONGOELECTOR_OBSERVER_CONFIG_VERSION));
  CHECK(oc.version == MONGOELECTOR_OBSERVER_CONFIG_VERSION);
  CHECK(oc.interval_seconds == 1.0 && oc.op_timeout_seconds == 0);

  /* Handles, keys, out pointers, values: refused with a message, nothing made. */
  CHECK_INVALID(mongoelector_observer_new(NULL, "k", NULL, NULL, NULL, &o));
  CHECK(strstr(mongoelector_last_error(), "client") != NULL);
  CHECK_INVALID(mongoelector_observer_new(client, NULL, NULL, NULL, NULL, &o));
  CHECK(strstr(mongoelector_last_error(), "key") != NULL);
  CHECK_INVALID(mongoelector_observer_new(client, "", NULL, NULL, NULL, &o));
  CHECK(strstr(mongoelector_last_error(), "key") != NULL);
  CHECK_INVALID(mongoelector_observer_new(client, "\xff\xfe", NULL, NULL, NULL, &o));
  CHECK_INVALID(mongoelector_observer_new(client, "k", NULL, NULL, NULL, NULL));
  CHECK(strstr(mongoelector_last_error(), "out") != NULL);
  oc.interval_seconds = 0;
  CHECK_INVALID(mongoelector_observer_new(client, "k", &oc, NULL, NULL, &o));
  CHECK(strstr(mongoelector_last_error(), "interval") != NULL);
  oc.interval_seconds = NAN;
  CHECK_INVALID(mongoelector_observer_new(client, "k", &oc, NULL, NULL, &o));
  oc.interval_seconds = -1;
  CHECK_INVALID(mongoelector_observer_new(client, "k", &oc, NULL, NULL, &o));
  oc.interval_seconds = 1;
  oc.op_timeout_seconds = -2;
  CHECK_INVALID(mongoelector_observer_new(client, "k", &oc, NULL, NULL, &o));
  CHECK(strstr(mongoelector_last_error(), "op_timeout_seconds") != NULL);
  oc.op_timeout_seconds = 0;
  oc.version = MONGOELECTOR_OBSERVER_CONFIG_VERSION + 1;
  CHECK_INVALID(mongoelector_observer_new(client, "k", &oc, NULL, NULL, &o));
  CHECK(o == NULL);

  /* Read: handle, out and its version checked; a fresh key has no leader. */
  CHECK_OK(mongoelector_observer_new(client, "k", NULL, NULL, NULL, &o));
  CHECK(o != NULL);
  memset(&st, 0, sizeof st);
  CHECK_INVALID(mongoelector_observer_read(o, &st)); /* version 0 */
  CHECK(strstr(mongoelector_last_error(), "MONGOELECTOR_LEADER_STATE_VERSION") != NULL);
  st.version = MONGOELECTOR_LEADER_STATE_VERSION + 1;
  CHECK_INVALID(mongoelector_observer_read(o, &st));
  CHECK_INVALID(mongoelector_observer_read(o, NULL));
  CHECK_INVALID(mongoelector_observer_read(NULL, &st));
  CHECK(strstr(mongoelector_last_error(), "observer") != NULL);
  CHECK_INVALID(mongoelector_observer_read((mongoelector_observer *)client, &st));
  st.version = MONGOELECTOR_LEADER_STATE_VERSION;
  CHECK_OK(mongoelector_observer_read(o, &st));
  CHECK(st.has_leader == 0 && st.uuid != NULL && st.uuid[0] == '\0' && st.host != NULL &&
        st.host[0] == '\0' && st.pid == 0 && st.fence == 0 && st.server_time_ms > 0);
  CHECK(MONGOELECTOR_LEADER_STATE_VERSION == 3 && st.status == MONGOELECTOR_LEADER_NONE &&
        st.expire_ms == 0 && st.handover_uuid != NULL && st.handover_uuid[0] == '\0' &&
        st.payload_json != NULL && st.payload_json[0] == '\0' && state_consistent(&st));
  /* A version-1 struct (a program built against it): its fields only, nothing past them. */
  memset(&st, 0x5a, sizeof st);
  st.version = 1;
  CHECK_OK(mongoelector_observer_read(o, &st));
  CHECK(st.version == 1 && st.has_leader == 0 && st.uuid[0] == '\0' && st.server_time_ms > 0);
  CHECK(st.status == 0x5a5a5a5a && st.expire_ms == 0x5a5a5a5a5a5a5a5aLL);
  mongoelector_observer_free(o);
  mongoelector_observer_free(NULL);

  /* Elector config version 2: handover_poll_seconds; version 1 structs leave it alone. */
  memset(&ec, 0, sizeof ec);
  ec.handover_poll_seconds = 123;
  CHECK_OK(mongoelector_elector_config_init(&ec, 1));
  CHECK(ec.version == 1 && ec.handover_poll_seconds == 123);     /* not a version-1 field */
  CHECK_OK(mongoelector_elector_new_with(client, "k", &ec, &e)); /* field ignored */
  mongoelector_elector_free(e);
  e = NULL;
  CHECK_OK(mongoelector_elector_config_init(&ec, MONGOELECTOR_ELECTOR_CONFIG_VERSION));
  CHECK(MONGOELECTOR_ELECTOR_CONFIG_VERSION >= 2 && ec.handover_poll_seconds == -1);
  ec.handover_poll_seconds = NAN;
  CHECK_INVALID(mongoelector_elector_new_with(client, "k", &ec, &e));
  CHECK(strstr(mongoelector_last_error(), "handover_poll") != NULL);
  ec.handover_poll_seconds = 2e9;
  CHECK_INVALID(mongoelector_elector_new_with(client, "k", &ec, &e));
  ec.handover_poll_seconds = INFINITY;
  CHECK_INVALID(mongoelector_elector_new_with(client, "k", &ec, &e));
  CHECK(e == NULL);
  ec.handover_poll_seconds = 0; /* off */
  CHECK_OK(mongoelector_elector_new_with(client, "k", &ec, &e));
  mongoelector_elector_free(e);
  mongoelector_client_free(client);
}

/* ---- observe + transfer + resign ------------------------------------------------------- */

/* Two electors A and B (ttl 2 s, followers peek every ttl/4) and an observer:
 * nobody -> A -> (transfer) B -> (resign) A -> (stop) nobody. */
static void test_observe_handover(mongoelector_client *client, const char *what) {
  const double ttl = 2;
  char key[128];
  recorder r;
  mongoelector_observer *o;
  mongoelector_leader_state st;
  node a, b;
  int i_a, i_b, i_a2, i_none;
  int64_t fa, fb, fa2;
  double t0, took_transfer, took_resign;

  unique_key(key, sizeof key, "observe-handover");
  recorder_init(&r);
  o = observer_new(client, key, &r);
  /* The first poll reports the current state: nobody leads a fresh key. */
  CHECK(wait_event(&r, 0, 0, NULL, 0, 10) == 0);

  node_new(&a, client, key, ttl, -2);
  node_new(&b, client, key, ttl, -2);
  start_and_wait_first_poll(&a);
  wait_leader(&a, 1, 10);
  fa = fence_of(&a);
  CHECK(fa > 0);
  i_a = wait_event(&r, 1, 1, a.uuid, fa, 10);
  start_and_wait_first_poll(&b); /* its status document exists: a transfer target */
  CHECK(is_leader(&b) == 0);

  /* The one-shot read agrees, with the leader's details. */
  st.version = MONGOELECTOR_LEADER_STATE_VERSION;
  CHECK_OK(mongoelector_observer_read(o, &st));
  CHECK(st.has_leader == 1 && strcmp(st.uuid, a.uuid) == 0 && st.fence == fa);
  CHECK(st.pid == (int64_t)getpid() && st.host[0] != '\0');

  /* Refusals: not leader, itself, NULL/empty, a uuid that never reported. */
  CHECK_INVALID(mongoelector_elector_transfer(b.e, a.uuid));
  CHECK_INVALID(mongoelector_elector_transfer(a.e, a.uuid));
  CHECK_INVALID(mongoelector_elector_transfer(a.e, NULL));
  CHECK_INVALID(mongoelector_elector_transfer(a.e, ""));
  CHECK_INVALID(mongoelector_elector_transfer(a.e, "no-such-member"));
  CHECK_INVALID(mongoelector_elector_transfer(NULL, b.uuid));
  CHECK_INVALID(mongoelector_elector_resign(a.e, NAN));
  CHECK_INVALID(mongoelector_elector_resign(a.e, 2e9));
  CHECK_INVALID(mongoelector_elector_resign(NULL, 1));
  CHECK(is_leader(&a) == 1 && fence_of(&a) == fa); /* refused calls changed nothing */

  /* transfer: A's term ends (its loss callback returned) before the call returns; the
   * observer sees the hand-over to B pending (nobody leads, B named as the target with
   * the token right after A's) until B has taken it, then B; B leads at its next peek,
   * with the token the observer saw. (A poll may miss the pending state when B takes the
   * hand-over within one interval.) */
  t0 = now_s();
  CHECK_OK(mongoelector_elector_transfer(a.e, b.uuid));
  CHECK(is_leader(&a) == 0 && counter(&a, &a.lost) == 1);
  i_b = wait_event(&r, i_a + 1, 1, b.uuid, 0, 10 * ttl);
  CHECK(i_b == i_a + 1 ||
        (i_b == i_a + 2 && r.ev[i_a + 1].status == MONGOELECTOR_LEADER_PENDING &&
         strcmp(r.ev[i_a + 1].handover_uuid, b.uuid) == 0 &&
         r.ev[i_a + 1].handover_fence == fa + 1 && r.ev[i_a + 1].has_leader == 0));
  CHECK(r.ev[i_b].expire_ms > r.ev[i_b].server_time_ms);
  wait_leader(&b, 1, 10 * ttl);
  took_transfer = now_s() - t0;
  fb = fence_of(&b);
  CHECK(fb == fa + 1 && r.ev[i_b].fence == fb);
  wait_count(&b, &b.led, 1, 10);
  CHECK(is_leader(&a) == 0);

  /* resign with a hold-off longer than the rest of the test: A takes over (B would not
   * stand again), with a newer token. "Nobody" may show in between. */
  t0 = now_s();
  CHECK_OK(mongoelector_elector_resign(b.e, 60));
  CHECK(is_leader(&b) == 0 && counter(&b, &b.lost) == 1);
  wait_leader(&a, 1, 10 * ttl);
  took_resign = now_s() - t0;
  fa2 = fence_of(&a);
  CHECK(fa2 > fb);
  i_a2 = wait_event(&r, i_b + 1, 1, a.uuid, fa2, 10);
  CHECK(i_a2 == i_b + 1 || (i_a2 == i_b + 2 && r.ev[i_b + 1].status == MONGOELECTOR_LEADER_NONE));
  wait_count(&a, &a.led, 2, 10);
  CHECK(is_leader(&b) == 0);
  /* Resigning when not leader: only the hold-off applies. */
  CHECK_OK(mongoelector_elector_resign(b.e, 60));
  CHECK(is_leader(&a) == 1);

  /* Stopping every node: the observer reports that nobody leads. */
  CHECK_OK(mongoelector_elector_stop(a.e));
  CHECK_OK(mongoelector_elector_stop(b.e));
  i_none = wait_event(&r, i_a2 + 1, 0, NULL, 0, 10 * ttl);
  CHECK(i_none == i_a2 + 1);
  CHECK(counter(&a, &a.lost) == 2 && counter(&b, &b.led) == 1 && counter(&b, &b.lost) == 1);
  st.version = MONGOELECTOR_LEADER_STATE_VERSION;
  CHECK_OK(mongoelector_observer_read(o, &st));
  CHECK(st.has_leader == 0 && st.uuid[0] == '\0');

  mongoelector_observer_free(o);
  check_sequence(&r);
  CHECK(recorded(&r) == i_none + 1); /* nothing after the free */
  node_free(&a);
  node_free(&b);
  printf(
      "  %s: nobody -> A -> B (transfer, %.0f ms) -> A (resign, %.0f ms) -> nobody: %d reports\n",
      what, took_transfer * 1000, took_resign * 1000, recorded(&r));
}

/* handover_poll_seconds reaches the elector: with ttl 60 s (default peek 15 s) a target
 * peeking every 0.05 s takes a hand-over at once; a target with peeks off (0) has not
 * taken it a while later: the observer shows it as the pending target, not as leader. */
static void test_handover_poll_option(mongoelector_client *client, const char *what) {
  const double ttl = 60;
  char key[128];
  node a, fast, off;
  mongoelector_observer *o = NULL;
  mongoelector_leader_state st;
  double t0, took;
  int64_t f;

  unique_key(key, sizeof key, "observe-peek");
  node_new(&a, client, key, ttl, -2);
  node_new(&fast, client, key, ttl, 0.05);
  node_new(&off, client, key, ttl, 0);
  start_and_wait_first_poll(&a);
  wait_leader(&a, 1, 10);
  start_and_wait_first_poll(&fast);
  start_and_wait_first_poll(&off);
  t0 = now_s();
  CHECK_OK(mongoelector_elector_transfer(a.e, fast.uuid));
  wait_leader(&fast, 1, 5); /* at the default peek, 15 s after its first poll, it would not */
  took = now_s() - t0;
  f = fence_of(&fast);
  CHECK_OK(mongoelector_elector_transfer(fast.e, off.uuid));
  CHECK(is_leader(&fast) == 0);
  CHECK_OK(mongoelector_observer_new(client, key, NULL, NULL, NULL, &o));
  st.version = MONGOELECTOR_LEADER_STATE_VERSION;
  CHECK_OK(mongoelector_observer_read(o, &st));
  CHECK(st.has_leader == 0 && st.status == MONGOELECTOR_LEADER_PENDING && st.uuid[0] == '\0');
  CHECK(strcmp(st.handover_uuid, off.uuid) == 0 && st.handover_fence == f + 1);
  CHECK(st.handover_pid == (int64_t)getpid() && st.handover_host[0] != '\0');
  CHECK(st.expire_ms > st.server_time_ms && st.expire_ms <= st.server_time_ms + 60000);
  CHECK(state_consistent(&st));
  sleep_s(1.5); /* negative check: without peeks, off wakes only near the lease's end */
  CHECK(is_leader(&off) == 0 && counter(&off, &off.led) == 0);
  CHECK_OK(mongoelector_observer_read(o, &st));
  CHECK(st.status == MONGOELECTOR_LEADER_PENDING); /* still not taken */
  mongoelector_observer_free(o);
  node_free(&off);
  node_free(&fast);
  node_free(&a);
  printf("  %s: handover_poll_seconds 0.05 took a hand-over in %.0f ms; 0 did not\n", what,
         took * 1000);
}

/* ---- a lease that ends unseen (fake clock) ---------------------------------------------- */

/* A lock in elector.locks whose holder stops renewing while every read fails: the
 * observer reports UNKNOWN at the instant its lease ends on the observer's estimate of
 * the server's clock (no read needed), carrying that end; reads back, nobody leads. */
static void test_unknown_on_fake_clock(void) {
  char name[128], uri[160];
  mongoelector_fake_clock *fc = NULL;
  mongoelector_client *client = NULL;
  mongoelector_locker_config lc;
  mongoelector_locker *l = NULL;
  mongoelector_observer *o;
  recorder r;
  int64_t wall = 0, expire;

  unique_key(name, sizeof name, "observe-unknown");
  snprintf(uri, sizeof uri, "memory://%s", name);
  CHECK_OK(mongoelector_fake_clock_new((int64_t)1700000000000LL, 0, &fc));
  CHECK_OK(mongoelector_fake_clock_attach(fc, uri));
  CHECK_OK(mongoelector_client_new(uri, "", &client));
  CHECK_OK(mongoelector_locker_config_init(&lc, MONGOELECTOR_LOCKER_CONFIG_VERSION));
  lc.collection = "elector.locks";
  lc.ttl_seconds = 5;
  CHECK_OK(mongoelector_locker_new_with(client, "svc", &lc, &l));
  CHECK_OK(mongoelector_locker_acquire(l, 0, -1, 0.25, 0, NULL));
  recorder_init(&r);
  o = observer_new(client, "svc", &r);
  CHECK_OK(mongoelector_fake_clock_settle(fc));
  CHECK(recorded(&r) == 1 && r.ev[0].status == MONGOELECTOR_LEADER_LEADS);
  expire = r.ev[0].expire_ms;
  CHECK_OK(mongoelector_fake_clock_now(fc, &wall, NULL));
  CHECK(expire > wall && expire <= wall + 5000);
  CHECK_OK(mongoelector_memory_set_unavailable(uri, 1));
  CHECK_OK(mongoelector_fake_clock_advance(fc, expire - wall - 100));
  CHECK(recorded(&r) == 1); /* the lease still runs: nothing to say */
  CHECK_OK(mongoelector_fake_clock_advance(fc, 200));
  CHECK(recorded(&r) == 2);
  CHECK(r.ev[1].status == MONGOELECTOR_LEADER_UNKNOWN && r.ev[1].has_leader == 0 &&
        r.ev[1].expire_ms == expire && r.ev[1].uuid[0] == '\0');
  CHECK_OK(mongoelector_memory_set_unavailable(uri, 0));
  CHECK_OK(mongoelector_fake_clock_advance(fc, 1000));
  CHECK(recorded(&r) == 3 && r.ev[2].status == MONGOELECTOR_LEADER_NONE);
  mongoelector_observer_free(o);
  check_sequence(&r);
  mongoelector_locker_free(l);
  mongoelector_client_free(client);
  mongoelector_fake_clock_free(fc);
  printf("  memory:// on a fake clock: leader -> unknown (reads failing, lease ended) -> nobody\n");
}

/* ---- freeing ---------------------------------------------------------------------------- */

/* Free from inside on_change returns at once, and no call follows; free from another
 * thread waits for the running call. Driven by a plain lock on the elector collection. */
static void test_free(mongoelector_client *client, const char *what) {
  char key[128];
  recorder self_free, busy;
  mongoelector_observer *o;
  mongoelector_locker_config lc;
  mongoelector_locker *l = NULL;
  double t0;

  unique_key(key, sizeof key, "observe-free");
  CHECK_OK(mongoelector_locker_config_init(&lc, MONGOELECTOR_LOCKER_CONFIG_VERSION));
  lc.collection = "elector.locks";
  lc.ttl_seconds = 30;
  lc.allow_unsafe_server = g_unsafe_server;
  CHECK_OK(mongoelector_locker_new_with(client, key, &lc, &l));

  /* Freed from its second call (the lock taken). */
  recorder_init(&self_free);
  self_free.free_on = 2;
  observer_new(client, key, &self_free);
  wait_event(&self_free, 0, 0, NULL, 0, 10);
  CHECK_OK(mongoelector_locker_acquire(l, 0, -1, 0.25, 0, NULL));
  wait_event(&self_free, 1, 1, NULL, 0, 10);
  t0 = now_s();
  while (1) {
    int returned;
    pthread_mutex_lock(&self_free.mu);
    returned = self_free.returned;
    pthread_mutex_unlock(&self_free.mu);
    if (returned == 2) break;
    if (now_s() - t0 > 10) CHECK(returned == 2);
    sleep_s(0.01);
  }
  CHECK_OK(mongoelector_locker_release(l, 0)); /* a change nobody may report now */
  sleep_s(20 * INTERVAL);                      /* negative check */
  CHECK(recorded(&self_free) == 2);
  check_sequence(&self_free);

  /* Freed from this thread while a call runs (each call takes 0.3 s): free waits for it. */
  recorder_init(&busy);
  busy.hold_s = 0.3;
  o = observer_new(client, key, &busy);
  wait_event(&busy, 0, 0, NULL, 0, 10);
  mongoelector_observer_free(o);
  pthread_mutex_lock(&busy.mu);
  CHECK(busy.in_callback == 0 && busy.returned == busy.n && busy.n == 1);
  pthread_mutex_unlock(&busy.mu);
  mongoelector_locker_free(l);
  printf("  %s: observer freed from its callback and during one\n", what);
}

/* ---- main -------------------------------------------------------------------------------- */

static void run_backend(mongoelector_client *client, const char *what) {
  test_free(client, what);
  if (g_unsafe_server) return;
  test_observe_handover(client, what);
  test_handover_poll_option(client, what);
}

int main(int argc, char **argv) {
  int offline = argc > 1 && strcmp(argv[1], "--offline") == 0;
  const char *uri = getenv("MONGOELECTOR_TEST_URI");
  char path[256], name[128], mem[160];
  char *server = NULL, *version = NULL;
  mongoelector_client *client = NULL;

  if (offline) {
    test_arguments();
    test_unknown_on_fake_clock();
    unique_key(name, sizeof name, "observe");
    snprintf(mem, sizeof mem, "memory://%s", name);
    CHECK_OK(mongoelector_client_new(mem, "", &client));
    run_backend(client, "memory://");
    mongoelector_client_free(client);
    snprintf(path, sizeof path, "sqlite://%s/observe-%ld.db",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid());
    CHECK_OK(mongoelector_client_new(path, "", &client));
    run_backend(client, "sqlite");
    mongoelector_client_free(client);
    unlink(path + strlen("sqlite://"));
    printf("observe_test: %d passed, 0 failed\n", g_passed);
    return 0;
  }
  if (uri == NULL || uri[0] == '\0') {
    printf("observe_test: MONGOELECTOR_TEST_URI is not set: skipped\n");
    return 77;
  }
  CHECK_OK(mongoelector_client_new(uri, "observe_test", &client));
  CHECK_OK(mongoelector_client_server_info_copy(client, &server, &version));
  printf("observe_test on %s %s\n", server, version);
  g_unsafe_server = strcmp(server, "FerretDB") == 0;
  run_backend(client, "server");
  mongoelector_free(server);
  mongoelector_free(version);
  mongoelector_client_free(client);
  printf("observe_test: %d passed, 0 failed\n", g_passed);
  return 0;
}
