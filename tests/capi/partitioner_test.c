/*
 * partitioner_test: the partitioner (mongoelector_partitioner_*) and fair queueing
 * (`fair` in the semaphore and read-write lock configs, version 2) seen from C. Includes
 * ONLY the public headers, links ONLY libmongoelector.so, builds as -std=c99 -pedantic
 * -Werror.
 *
 * Usage: partitioner_test [--offline]
 *   --offline   argument checks, then the scenarios on memory:// backends driven by a fake
 *               clock (no server, no sleeps).
 *   (default)   the argument checks, then two members sharing a group against the server
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

#define CHECK_PROGRAM "partitioner_test"
#include "check.h"
#include "mongoelector.h"
#include "mongoelector/testing.h"

#define N_PARTS 8
#define WALL_START INT64_C(1800000000000)

/* ---- what the callbacks saw -------------------------------------------------------- */

/* One member's view, filled by its callbacks; `log` is shared by the members of a test
 * so that the order across members can be checked. */
typedef struct event {
  char member;       /* 'A', 'B', ... */
  int assigned;      /* 1: on_assigned, 0: on_revoked */
  int64_t partition; /* the partition */
  int64_t token;     /* on_assigned's token */
} event;

typedef struct event_log {
  pthread_mutex_t mu;
  event events[1024];
  int n;
} event_log;

typedef struct member {
  char name;
  event_log *log;
  int64_t tokens[N_PARTS]; /* the token of each partition's last on_assigned */
  int believes[N_PARTS];   /* assigned and not revoked since */
  int callbacks;
  mongoelector_partitioner *self; /* for the free-from-callback test */
  int free_in_callback;
} member;

static void record(member *m, int assigned, int64_t p, int64_t token) {
  pthread_mutex_lock(&m->log->mu);
  if (m->log->n < 1024) {
    event e;
    e.member = m->name;
    e.assigned = assigned;
    e.partition = p;
    e.token = token;
    m->log->events[m->log->n++] = e;
  }
  m->callbacks++;
  if (p >= 0 && p < N_PARTS) {
    m->believes[p] = assigned;
    if (assigned) m->tokens[p] = token;
  }
  pthread_mutex_unlock(&m->log->mu);
}

static void on_assigned(int64_t p, int64_t token, void *user_data) {
  member *m = (member *)user_data;
  record(m, 1, p, token);
  if (m->free_in_callback) mongoelector_partitioner_free(m->self);
}

static void on_revoked(int64_t p, void *user_data) { record((member *)user_data, 0, p, 0); }

static void init_member(member *m, char name, event_log *log) {
  memset(m, 0, sizeof *m);
  m->name = name;
  m->log = log;
}

static mongoelector_partitioner *new_member(mongoelector_client *client, const char *group,
                                            member *m, double ttl) {
  mongoelector_partitioner_config cfg;
  mongoelector_partitioner *p = NULL;
  CHECK_OK(mongoelector_partitioner_config_init(&cfg, MONGOELECTOR_PARTITIONER_CONFIG_VERSION));
  cfg.partitions = N_PARTS;
  cfg.ttl_seconds = ttl;
  cfg.on_assigned = on_assigned;
  cfg.on_revoked = on_revoked;
  cfg.user_data = m;
  CHECK_OK(mongoelector_partitioner_new(client, group, &cfg, &p));
  CHECK(p != NULL);
  m->self = p;
  return p;
}

/* How many partitions `p` owns (mongoelector_partitioner_owned), each also in `mask`. */
static size_t owned_count(mongoelector_partitioner *p, int mask[N_PARTS]) {
  mongoelector_partition_token *owned = NULL;
  size_t n = 0, i;
  int64_t token = 0;
  CHECK_OK(mongoelector_partitioner_owned(p, &owned, &n));
  CHECK((n == 0) == (owned == NULL));
  if (mask != NULL) memset(mask, 0, sizeof(int) * N_PARTS);
  for (i = 0; i < n; ++i) {
    CHECK(owned[i].partition >= 0 && owned[i].partition < N_PARTS && owned[i].token > 0);
    if (i > 0) CHECK(owned[i].partition > owned[i - 1].partition); /* increasing */
    CHECK_OK(mongoelector_partitioner_token(p, owned[i].partition, &token));
    CHECK(token == owned[i].token);
    if (mask != NULL) mask[owned[i].partition] = 1;
  }
  mongoelector_free(owned);
  return n;
}

/* ---- argument checks (no backend needed beyond memory://) --------------------------- */

static void test_args(void) {
  mongoelector_partitioner_config cfg;
  mongoelector_partitioner *p = NULL;
  mongoelector_client *client = NULL;
  mongoelector_partition_token *owned = NULL;
  char uri[128];
  char *json = NULL;
  const char *uuid = NULL;
  size_t n = 0;
  int64_t token = 0;
  int running = 0;

  CHECK_INVALID(mongoelector_partitioner_config_init(NULL, 1));
  CHECK_INVALID(mongoelector_partitioner_config_init(&cfg, 0));
  CHECK_INVALID(
      mongoelector_partitioner_config_init(&cfg, MONGOELECTOR_PARTITIONER_CONFIG_VERSION + 1));
  CHECK_ERROR_SAYS("mongoelector_partitioner_config_init");
  memset(&cfg, 0xab, sizeof cfg);
  CHECK_OK(mongoelector_partitioner_config_init(&cfg, MONGOELECTOR_PARTITIONER_CONFIG_VERSION));
  CHECK(cfg.version == MONGOELECTOR_PARTITIONER_CONFIG_VERSION && cfg.partitions == 0);
  CHECK(cfg.ttl_seconds == 15 && cfg.poll_seconds == 0 && cfg.op_timeout_seconds == 0);
  CHECK(cfg.locks_collection == NULL && cfg.members_collection == NULL);
  CHECK(cfg.on_assigned == NULL && cfg.on_revoked == NULL && cfg.user_data == NULL);

  unique_name(uri, sizeof uri, "memory://part-args");
  CHECK_OK(mongoelector_client_new(uri, "", &client));
  CHECK_INVALID(mongoelector_partitioner_new(client, "g", NULL, &p));
  CHECK_ERROR_SAYS("partitions");
  CHECK_INVALID(mongoelector_partitioner_new(client, "g", &cfg, &p)); /* partitions 0 */
  CHECK_ERROR_SAYS("partitions must be a whole number in [1, 100000], got 0");
  cfg.partitions = MONGOELECTOR_PARTITIONS_MAX + 1;
  CHECK_INVALID(mongoelector_partitioner_new(client, "g", &cfg, &p));
  CHECK_ERROR_SAYS("got 100001");
  cfg.partitions = 4;
  CHECK_INVALID(mongoelector_partitioner_new(NULL, "g", &cfg, &p));
  CHECK_INVALID(mongoelector_partitioner_new(client, NULL, &cfg, &p));
  CHECK_ERROR_SAYS("group");
  CHECK_INVALID(mongoelector_partitioner_new(client, "", &cfg, &p));
  CHECK_INVALID(mongoelector_partitioner_new(client, "g", &cfg, NULL));
  cfg.ttl_seconds = -1;
  CHECK_INVALID(mongoelector_partitioner_new(client, "g", &cfg, &p));
  CHECK_ERROR_SAYS("ttl");
  cfg.ttl_seconds = 6;
  cfg.poll_seconds = 4; /* above ttl/2 */
  CHECK_INVALID(mongoelector_partitioner_new(client, "g", &cfg, &p));
  CHECK_ERROR_SAYS("poll");
  cfg.poll_seconds = 0;
  cfg.locks_collection = "same";
  cfg.members_collection = "same";
  CHECK_INVALID(mongoelector_partitioner_new(client, "g", &cfg, &p));
  CHECK_ERROR_SAYS("two collections");
  cfg.locks_collection = NULL;
  cfg.members_collection = NULL;
  cfg.version = MONGOELECTOR_PARTITIONER_CONFIG_VERSION + 1;
  CHECK_INVALID(mongoelector_partitioner_new(client, "g", &cfg, &p));
  CHECK_ERROR_SAYS("mongoelector_partitioner_config_init");
  cfg.version = MONGOELECTOR_PARTITIONER_CONFIG_VERSION;

  CHECK_OK(mongoelector_partitioner_new(client, "g", &cfg, &p));
  CHECK_INVALID(mongoelector_partitioner_token(p, 4, &token));
  CHECK_ERROR_SAYS("partition 4 is not one of this group's partitions (0..3)");
  CHECK_INVALID(mongoelector_partitioner_token(p, -1, &token));
  CHECK_INVALID(mongoelector_partitioner_token(p, 0, NULL));
  CHECK_OK(mongoelector_partitioner_token(p, 0, &token));
  CHECK(token == 0); /* not started: owns nothing */
  CHECK_INVALID(mongoelector_partitioner_owned(p, NULL, &n));
  CHECK_INVALID(mongoelector_partitioner_owned(p, &owned, NULL));
  CHECK_OK(mongoelector_partitioner_owned(p, &owned, &n));
  CHECK(n == 0 && owned == NULL);
  CHECK_OK(mongoelector_partitioner_uuid(p, &uuid));
  CHECK(uuid != NULL && strlen(uuid) > 0);
  CHECK_OK(mongoelector_partitioner_running(p, &running));
  CHECK(running == 0);
  CHECK_INVALID(mongoelector_partitioner_status(p, NULL));
  CHECK_INVALID(mongoelector_partitioner_start(NULL));
  CHECK_INVALID(mongoelector_partitioner_stop(NULL));
  mongoelector_partitioner_free(p);
  mongoelector_partitioner_free(NULL);

  /* Status without a member: the count must come from somewhere. */
  CHECK_INVALID(mongoelector_client_partition_status(client, "nobody", 0, NULL, NULL, &json));
  CHECK_ERROR_SAYS("no live member");
  CHECK_INVALID(mongoelector_client_partition_status(client, "g", -1, NULL, NULL, &json));
  CHECK_INVALID(mongoelector_client_partition_status(client, NULL, 4, NULL, NULL, &json));
  CHECK_INVALID(mongoelector_client_partition_status(client, "g", 4, NULL, NULL, NULL));
  CHECK_OK(mongoelector_client_partition_status(client, "nobody", 4, NULL, NULL, &json));
  CHECK(strstr(json, "\"group\" : \"nobody\"") != NULL ||
        strstr(json, "\"group\": \"nobody\"") != NULL);
  CHECK(strstr(json, "\"settled\"") != NULL && strstr(json, "\"owners\"") != NULL);
  mongoelector_free(json);
  mongoelector_client_free(client);
}

/* ---- fair queueing ----------------------------------------------------------------- */

typedef struct waiter {
  mongoelector_semaphore *sem;
  mongoelector_rwlock *rw;
  mongoelector_status st;
  int64_t fence;
} waiter;

static void *wait_acquire(void *arg) {
  waiter *w = (waiter *)arg;
  mongoelector_acquire_options o;
  mongoelector_acquire_options_init(&o, MONGOELECTOR_ACQUIRE_OPTIONS_VERSION);
  o.step_seconds = 0.5;
  if (w->sem != NULL)
    w->st = mongoelector_semaphore_acquire(w->sem, &o, &w->fence);
  else
    w->st = mongoelector_rwlock_acquire(w->rw, MONGOELECTOR_RWLOCK_WRITE, &o, &w->fence);
  return NULL;
}

static mongoelector_acquire_options try_once(void) {
  mongoelector_acquire_options o;
  mongoelector_acquire_options_init(&o, MONGOELECTOR_ACQUIRE_OPTIONS_VERSION);
  o.blocking = 0;
  return o;
}

/* The handles of one fair case: a semaphore's (limit 1) or a read-write lock's writers. */
typedef struct contender {
  mongoelector_semaphore *sem;
  mongoelector_rwlock *rw;
} contender;

static contender new_contender(mongoelector_client *client, const char *key, int rw,
                               const mongoelector_semaphore_config *s,
                               const mongoelector_rwlock_config *r) {
  contender c;
  memset(&c, 0, sizeof c);
  if (rw)
    CHECK_OK(mongoelector_rwlock_new(client, key, r, &c.rw));
  else
    CHECK_OK(mongoelector_semaphore_new(client, key, s, &c.sem));
  return c;
}

static mongoelector_status try_take(contender c, int64_t *fence) {
  mongoelector_acquire_options once = try_once();
  return c.rw != NULL ? mongoelector_rwlock_acquire(c.rw, MONGOELECTOR_RWLOCK_WRITE, &once, fence)
                      : mongoelector_semaphore_acquire(c.sem, &once, fence);
}

static void give_back(contender c) {
  if (c.rw != NULL) {
    CHECK_OK(mongoelector_rwlock_release(c.rw));
  } else {
    CHECK_OK(mongoelector_semaphore_release(c.sem));
  }
}

static void free_contender(contender c) {
  mongoelector_rwlock_free(c.rw);
  mongoelector_semaphore_free(c.sem);
}

/* A holder, a blocking waiter (fair or not; for a read-write lock, writers) and a
 * latecomer's non-blocking try once the holder has released: with a fair waiter queued
 * the latecomer is refused (it would pass a live waiter) and the waiter gets in; without,
 * the latecomer takes it. `version`: the config struct's (1: fair is not a field). */
static void fair_case(mongoelector_fake_clock *clock, mongoelector_client *client, int rw, int fair,
                      uint32_t version) {
  char key[96];
  mongoelector_semaphore_config s;
  mongoelector_rwlock_config r;
  contender holder, late;
  waiter w;
  pthread_t t;
  size_t waiting = 0;
  int64_t fence = 0;

  unique_name(key, sizeof key, rw ? "fair-rw" : "fair-sem");
  memset(&s, 0, sizeof s);
  memset(&r, 0, sizeof r);
  CHECK_OK(mongoelector_semaphore_config_init(&s, version));
  CHECK_OK(mongoelector_rwlock_config_init(&r, version));
  s.ttl_seconds = r.ttl_seconds = 30;
  r.writer_preference = 0; /* what stops the latecomer is the queue, not the mark */
  /* Version 1 has no fair field: what follows its struct is ignored (garbage here). */
  s.fair = r.fair = version >= 2 ? fair : 1;
  holder = new_contender(client, key, rw, &s, &r);
  late = new_contender(client, key, rw, &s, &r);
  {
    contender c = new_contender(client, key, rw, &s, &r);
    memset(&w, 0, sizeof w);
    w.sem = c.sem;
    w.rw = c.rw;
  }
  CHECK_OK(try_take(holder, &fence));
  CHECK_OK(mongoelector_fake_clock_wait_for_waiters(clock, 0, -1, &waiting));
  CHECK(pthread_create(&t, NULL, wait_acquire, &w) == 0);
  CHECK_OK(mongoelector_fake_clock_wait_for_waiters(clock, waiting + 1, -1, NULL));
  give_back(holder);
  if (fair) {
    CHECK_STATUS(try_take(late, NULL), MONGOELECTOR_ERR_LOCK_EXISTS);
  } else {
    CHECK_OK(try_take(late, NULL)); /* no queue to pass */
    give_back(late);
  }
  CHECK_OK(mongoelector_fake_clock_advance(clock, 1000));
  CHECK(pthread_join(t, NULL) == 0);
  CHECK_OK(w.st);
  CHECK(w.fence > fence);
  {
    contender c;
    c.sem = w.sem;
    c.rw = w.rw;
    give_back(c);
    free_contender(c);
  }
  free_contender(holder);
  free_contender(late);
}

static void test_fair(void) {
  mongoelector_fake_clock *clock = NULL;
  mongoelector_client *client = NULL;
  mongoelector_semaphore_config s;
  mongoelector_rwlock_config r;
  char uri[128];
  int rw;

  /* Defaults: off; a version 1 struct is not written past its end and runs unfair. */
  memset(&s, 0xab, sizeof s);
  CHECK_OK(mongoelector_semaphore_config_init(&s, MONGOELECTOR_SEMAPHORE_CONFIG_VERSION));
  CHECK(MONGOELECTOR_SEMAPHORE_CONFIG_VERSION == 2 && s.fair == 0);
  memset(&s, 0xab, sizeof s);
  CHECK_OK(mongoelector_semaphore_config_init(&s, 1));
  CHECK(s.version == 1 && s.limit == 1);
  CHECK(((unsigned char *)&s.fair)[0] == 0xab); /* not a field of version 1 */
  memset(&r, 0xab, sizeof r);
  CHECK_OK(mongoelector_rwlock_config_init(&r, MONGOELECTOR_RWLOCK_CONFIG_VERSION));
  CHECK(MONGOELECTOR_RWLOCK_CONFIG_VERSION == 2 && r.fair == 0);
  memset(&r, 0xab, sizeof r);
  CHECK_OK(mongoelector_rwlock_config_init(&r, 1));
  CHECK(((unsigned char *)&r.fair)[0] == 0xab);

  unique_name(uri, sizeof uri, "memory://fair");
  CHECK_OK(mongoelector_fake_clock_new(WALL_START, 0, &clock));
  CHECK_OK(mongoelector_fake_clock_attach(clock, uri));
  CHECK_OK(mongoelector_client_new(uri, "", &client));
  for (rw = 0; rw <= 1; ++rw) {
    fair_case(clock, client, rw, 1, 2);
    fair_case(clock, client, rw, 0, 2);
    fair_case(clock, client, rw, 0, 1); /* version 1: fair off whatever follows the struct */
  }
  mongoelector_client_free(client);
  mongoelector_fake_clock_free(clock);
}

/* ---- the partitioner: two members share a group ------------------------------------ */

/* What a fixed point must show: every partition owned by exactly one of the members, as
 * its callbacks say (believes) and as owned() says. */
static void check_split(mongoelector_partitioner *a, member *ma, mongoelector_partitioner *b,
                        member *mb, size_t *na_out) {
  int mask_a[N_PARTS], mask_b[N_PARTS], i;
  size_t na = owned_count(a, mask_a);
  size_t nb = b != NULL ? owned_count(b, mask_b) : 0;
  if (b == NULL) memset(mask_b, 0, sizeof mask_b);
  CHECK(na + nb == N_PARTS);
  pthread_mutex_lock(&ma->log->mu);
  for (i = 0; i < N_PARTS; ++i) {
    CHECK(mask_a[i] + mask_b[i] == 1);
    CHECK(ma->believes[i] == mask_a[i]);
    if (mb != NULL) CHECK(mb->believes[i] == mask_b[i]);
  }
  pthread_mutex_unlock(&ma->log->mu);
  if (na_out != NULL) *na_out = na;
}

/* Graceful moves: for every partition that passed from A to B, A's on_revoked comes
 * before B's on_assigned in the shared log, and B's token is above A's; `expected`
 * partitions moved. */
static void check_handover(event_log *log, char from, char to, int expected) {
  int i, j, moved = 0;
  for (i = 0; i < log->n; ++i) {
    const event *e = &log->events[i];
    if (e->member != to || !e->assigned) continue;
    for (j = 0; j < log->n; ++j) {
      const event *o = &log->events[j];
      if (o->member == from && o->partition == e->partition && o->assigned && o->token < e->token) {
        int k, revoked_before = 0;
        for (k = j + 1; k < i; ++k)
          if (log->events[k].member == from && !log->events[k].assigned &&
              log->events[k].partition == e->partition)
            revoked_before = 1;
        CHECK(revoked_before);
        moved++;
        break;
      }
    }
  }
  CHECK(moved == expected);
}

/* Drives time in steps until `done` or `limit_ms` of fake time passed. */
typedef int (*done_fn)(void *);

static void run_fake(mongoelector_fake_clock *clock, int64_t limit_ms, done_fn done, void *arg) {
  int64_t spent = 0;
  while (!done(arg) && spent < limit_ms) {
    CHECK_OK(mongoelector_fake_clock_advance(clock, 500));
    spent += 500;
  }
  CHECK(done(arg));
}

static void run_real(int64_t limit_ms, done_fn done, void *arg) {
  double end = now_s() + (double)limit_ms / 1000.0;
  while (!done(arg) && now_s() < end) sleep_s(0.05);
  CHECK(done(arg));
}

typedef struct pair {
  mongoelector_partitioner *a, *b;
  member *ma, *mb;
  mongoelector_client *client;
  const char *group;
} pair;

/* How many partitions m's callbacks say it owns. */
static size_t believed(member *m) {
  size_t n = 0;
  int i;
  pthread_mutex_lock(&m->log->mu);
  for (i = 0; i < N_PARTS; ++i) n += (size_t)m->believes[i];
  pthread_mutex_unlock(&m->log->mu);
  return n;
}

/* A owns every partition, and its callbacks have said so. */
static int a_owns_all(void *arg) {
  pair *pr = (pair *)arg;
  return owned_count(pr->a, NULL) == N_PARTS && believed(pr->ma) == N_PARTS;
}
/* Both own some, together all, and their callbacks agree. */
/* Both live, every partition held by the member rendezvous hashing assigns it (one of
 * them may be assigned none), and their callbacks agree. */
static int split_settled(void *arg) {
  pair *pr = (pair *)arg;
  size_t na = owned_count(pr->a, NULL), nb = owned_count(pr->b, NULL);
  char *json = NULL, *at;
  int live = 0, settled;
  if (na + nb != N_PARTS || believed(pr->ma) != na || believed(pr->mb) != nb) return 0;
  CHECK_OK(mongoelector_client_partition_status(pr->client, pr->group, N_PARTS, NULL, NULL, &json));
  settled = strstr(json, "\"settled\" : true") != NULL;
  for (at = json; (at = strstr(at, "\"live\" : true")) != NULL; ++at) live++;
  mongoelector_free(json);
  return settled && live == 2;
}
static int not_running(void *arg) {
  int running = 1;
  mongoelector_partitioner_running(((pair *)arg)->b, &running);
  return !running;
}

/* A alone owns everything; B joins and the group splits with graceful moves; B leaves
 * and A takes its partitions back. `clock` NULL: real time (a server). */
static void test_two_members(mongoelector_client *client, mongoelector_fake_clock *clock,
                             double ttl) {
  static event_log log;
  member ma, mb;
  pair pr;
  char group[96], *json = NULL;
  const char *uuid_a = NULL;
  size_t na = 0;
  int i, running = 0;
  const int64_t limit_ms = (int64_t)(ttl * 1000) * 8;

  memset(&log, 0, sizeof log);
  pthread_mutex_init(&log.mu, NULL);
  unique_name(group, sizeof group, "group");
  init_member(&ma, 'A', &log);
  init_member(&mb, 'B', &log);
  pr.ma = &ma;
  pr.mb = &mb;
  pr.client = client;
  pr.group = group;
  pr.a = new_member(client, group, &ma, ttl);
  pr.b = new_member(client, group, &mb, ttl);
  CHECK_OK(mongoelector_partitioner_uuid(pr.a, &uuid_a));

  CHECK_OK(mongoelector_partitioner_start(pr.a));
  CHECK_OK(mongoelector_partitioner_start(pr.a)); /* no-op while running */
  CHECK_OK(mongoelector_partitioner_running(pr.a, &running));
  CHECK(running == 1);
  if (clock) CHECK_OK(mongoelector_fake_clock_settle(clock));
  if (clock)
    run_fake(clock, limit_ms, a_owns_all, &pr);
  else
    run_real(limit_ms, a_owns_all, &pr);
  check_split(pr.a, &ma, NULL, NULL, NULL);
  for (i = 0; i < N_PARTS; ++i) CHECK(ma.tokens[i] > 0);

  /* The group as the documents show it, from the member and from a plain client. */
  CHECK_OK(mongoelector_partitioner_status(pr.a, &json));
  CHECK(strstr(json, "\"settled\" : true") != NULL);
  CHECK(strstr(json, uuid_a) != NULL);
  mongoelector_free(json);
  CHECK_OK(mongoelector_client_partition_status(client, group, 0, NULL, NULL, &json));
  CHECK(strstr(json, "\"partitions\" : 8") != NULL);
  CHECK(strstr(json, "\"live\" : true") != NULL);
  mongoelector_free(json);

  /* A member with another partition count is refused at start, nothing written. */
  {
    mongoelector_partitioner_config cfg;
    mongoelector_partitioner *odd = NULL;
    CHECK_OK(mongoelector_partitioner_config_init(&cfg, MONGOELECTOR_PARTITIONER_CONFIG_VERSION));
    cfg.partitions = N_PARTS + 1;
    cfg.ttl_seconds = ttl;
    CHECK_OK(mongoelector_partitioner_new(client, group, &cfg, &odd));
    CHECK_INVALID(mongoelector_partitioner_start(odd));
    CHECK_ERROR_SAYS("partitions");
    mongoelector_partitioner_free(odd);
  }

  CHECK_OK(mongoelector_partitioner_start(pr.b));
  if (clock)
    run_fake(clock, limit_ms, split_settled, &pr);
  else
    run_real(limit_ms, split_settled, &pr);
  check_split(pr.a, &ma, pr.b, &mb, &na);
  pthread_mutex_lock(&log.mu);
  check_handover(&log, 'A', 'B', (int)(N_PARTS - na)); /* all of B's came from A */
  pthread_mutex_unlock(&log.mu);

  /* B leaves: stop returns once its on_revoked calls have returned. */
  CHECK_OK(mongoelector_partitioner_stop(pr.b));
  CHECK(not_running(&pr));
  CHECK(owned_count(pr.b, NULL) == 0);
  for (i = 0; i < N_PARTS; ++i) CHECK(mb.believes[i] == 0);
  if (clock)
    run_fake(clock, limit_ms, a_owns_all, &pr);
  else
    run_real(limit_ms, a_owns_all, &pr);
  check_split(pr.a, &ma, NULL, NULL, NULL);
  pthread_mutex_lock(&log.mu);
  check_handover(&log, 'B', 'A', (int)(N_PARTS - na)); /* and went back */
  pthread_mutex_unlock(&log.mu);

  mongoelector_partitioner_free(pr.b);
  mongoelector_partitioner_free(pr.a); /* leaves: A's on_revoked for all it held */
  for (i = 0; i < N_PARTS; ++i) CHECK(ma.believes[i] == 0);
}

/* A partitioner freed from its own on_assigned: the call returns at once, no callback of
 * it starts afterwards, and the group forgets it (its partitions are released). */
static int freed_left(void *arg) {
  char *json = NULL;
  int left;
  mongoelector_client *client = (mongoelector_client *)((void **)arg)[0];
  const char *group = (const char *)((void **)arg)[1];
  member *m = (member *)((void **)arg)[2];
  pthread_mutex_lock(&m->log->mu);
  left = m->callbacks;
  pthread_mutex_unlock(&m->log->mu);
  if (left == 0) return 0; /* not joined yet */
  if (mongoelector_client_partition_status(client, group, N_PARTS, NULL, NULL, &json) !=
      MONGOELECTOR_OK)
    return 0;
  left = strstr(json, "\"live\" : true") == NULL && strstr(json, "\"owner\" : null") != NULL &&
         strstr(json, "\"owner\" : \"") == NULL;
  mongoelector_free(json);
  return left;
}

static void test_free_in_callback(mongoelector_client *client, mongoelector_fake_clock *clock) {
  static event_log log;
  member m;
  char group[96];
  void *arg[3];
  int callbacks;

  memset(&log, 0, sizeof log);
  pthread_mutex_init(&log.mu, NULL);
  unique_name(group, sizeof group, "freed");
  init_member(&m, 'F', &log);
  m.free_in_callback = 1;
  new_member(client, group, &m, 6);
  CHECK_OK(mongoelector_partitioner_start(m.self));
  arg[0] = client;
  arg[1] = group;
  arg[2] = &m;
  run_fake(clock, 60000, freed_left, arg);
  pthread_mutex_lock(&log.mu);
  callbacks = m.callbacks;
  pthread_mutex_unlock(&log.mu);
  CHECK(callbacks == 1); /* the on_assigned that freed it, nothing after */
}

int main(int argc, char **argv) {
  int offline = argc > 1 && strcmp(argv[1], "--offline") == 0;
  const char *uri = getenv("MONGOELECTOR_TEST_URI");
  char mem[128];
  mongoelector_client *client = NULL;
  mongoelector_fake_clock *clock = NULL;

  test_args();
  if (offline) {
    test_fair();
    unique_name(mem, sizeof mem, "memory://part");
    CHECK_OK(mongoelector_fake_clock_new(WALL_START, 0, &clock));
    CHECK_OK(mongoelector_fake_clock_attach(clock, mem));
    CHECK_OK(mongoelector_client_new(mem, "", &client));
    test_two_members(client, clock, 6);
    test_free_in_callback(client, clock);
    mongoelector_client_free(client);
    mongoelector_fake_clock_free(clock);
    printf("partitioner_test: %d passed, 0 failed\n", g_passed);
    return 0;
  }
  if (uri == NULL || uri[0] == '\0') {
    printf("partitioner_test: MONGOELECTOR_TEST_URI is not set: skipped\n");
    return 77;
  }
  if (on_ferretdb()) { /* partitions are locks: refused there (an unsafe server) */
    printf("partitioner_test: the test server is FerretDB, which locks refuse: skipped\n");
    return 77;
  }
  CHECK_OK(mongoelector_client_new(uri, "partitioner_test", &client));
  test_two_members(client, NULL, 4);
  mongoelector_client_free(client);
  printf("partitioner_test: %d passed, 0 failed\n", g_passed);
  return 0;
}
