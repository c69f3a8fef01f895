/*
 * testing_kit_test: the testing kit's fake clock (mongoelector_fake_clock_*) and the levers
 * on memory:// backends (mongoelector_memory_*) seen from C (only the public header, only
 * the shared library, -std=c99 -pedantic -Werror). No server: everything runs on
 * memory:// backends attached to fake clocks.
 *
 * Usage: testing_kit_test [--offline]   (the same either way: there is nothing to run
 * against a server)
 *
 * Timing: no sleeps. Every instant asserted is fake time: a lease must be lost exactly at
 * its renew deadline, not 1 ms before; a renewal that finds its lock stolen comes exactly
 * ttl/3 after the last one. The one real-time bound is the settle timeout of a callback
 * that blocks on the advancing thread (0.2 s).
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK_PROGRAM "testing_kit_test"
#include "check.h"
#include "mongoelector.h"
#include "mongoelector/testing.h"

/* 2030-01-01T00:00:00Z */
#define WALL_START INT64_C(1893456000000)

static void unique_uri(char *out, size_t n, const char *prefix) {
  static int counter = 0;
  snprintf(out, n, "memory://%s-%ld-%d-%d", prefix, (long)getpid(), (int)time(NULL), ++counter);
}

static int64_t mono(mongoelector_fake_clock *clock) {
  int64_t m = -1;
  CHECK_OK(mongoelector_fake_clock_now(clock, NULL, &m));
  return m;
}

static int64_t wall(mongoelector_fake_clock *clock) {
  int64_t w = -1;
  CHECK_OK(mongoelector_fake_clock_now(clock, &w, NULL));
  return w;
}

/* A fake clock with `uri` attached, and a client on it. */
static void open_world(const char *uri, int64_t settle_timeout_ms, mongoelector_fake_clock **clock,
                       mongoelector_client **client) {
  CHECK_OK(mongoelector_fake_clock_new(WALL_START, settle_timeout_ms, clock));
  CHECK_OK(mongoelector_fake_clock_attach(*clock, uri));
  CHECK_OK(mongoelector_client_new(uri, "", client));
}

static void new_locker(mongoelector_client *client, const char *key, double ttl,
                       mongoelector_locker **out) {
  mongoelector_locker_config c;
  CHECK_OK(mongoelector_locker_config_init(&c, MONGOELECTOR_LOCKER_CONFIG_VERSION));
  c.ttl_seconds = ttl;
  CHECK_OK(mongoelector_locker_new_with(client, key, &c, out));
}

/* What a lease's on_lost saw. */
typedef struct lost_probe {
  pthread_mutex_t mu;
  mongoelector_fake_clock *clock;
  int calls;
  pthread_t thread;
  int64_t mono_at_call;
  mongoelector_status nested_advance; /* advance() called from inside on_lost */
  mongoelector_status nested_settle;
} lost_probe;

static void probe_init(lost_probe *p, mongoelector_fake_clock *clock) {
  memset(p, 0, sizeof *p);
  pthread_mutex_init(&p->mu, NULL);
  p->clock = clock;
  p->mono_at_call = -1;
}

static void on_lost(void *user_data) {
  lost_probe *p = (lost_probe *)user_data;
  int64_t m = -1;
  mongoelector_status adv, set;
  mongoelector_fake_clock_now(p->clock, NULL, &m); /* allowed from callbacks */
  adv = mongoelector_fake_clock_advance(p->clock, 1);
  set = mongoelector_fake_clock_settle(p->clock);
  pthread_mutex_lock(&p->mu);
  p->calls++;
  p->thread = pthread_self();
  p->mono_at_call = m;
  p->nested_advance = adv;
  p->nested_settle = set;
  pthread_mutex_unlock(&p->mu);
}

static int probe_calls(lost_probe *p) {
  int n;
  pthread_mutex_lock(&p->mu);
  n = p->calls;
  pthread_mutex_unlock(&p->mu);
  return n;
}

static int lease_lost(mongoelector_lease *lease) {
  int lost = -1;
  CHECK_OK(mongoelector_lease_lost(lease, &lost));
  return lost;
}

/* ---- arguments ------------------------------------------------------------------------- */

static void test_arguments(void) {
  mongoelector_fake_clock *clock = NULL, *other = NULL;
  mongoelector_client *client = NULL;
  int64_t w = -1, m = -1;
  int held = -1;
  char uri[128];

  CHECK_INVALID(mongoelector_fake_clock_new(WALL_START, 0, NULL));
  CHECK_INVALID(mongoelector_fake_clock_new(-1, 0, &clock));
  CHECK_INVALID(mongoelector_fake_clock_new(INT64_C(253402300800000), 0, &clock));
  CHECK_INVALID(mongoelector_fake_clock_new(WALL_START, INT64_C(3600001), &clock));
  CHECK(clock == NULL);

  /* A NULL clock, everywhere. */
  CHECK_INVALID(mongoelector_fake_clock_advance(NULL, 1));
  CHECK(strstr(mongoelector_last_error(), "fake clock handle is NULL") != NULL);
  CHECK_INVALID(mongoelector_fake_clock_settle(NULL));
  CHECK_INVALID(mongoelector_fake_clock_now(NULL, &w, &m));
  CHECK_INVALID(mongoelector_fake_clock_jump_wall(NULL, 1));
  CHECK_INVALID(mongoelector_fake_clock_attach(NULL, "memory://x"));
  mongoelector_fake_clock_free(NULL);

  /* The clock's time: wall from the start given, monotonic from 0, moved only by
   * advance (jump_wall: the wall alone). The settle timeout <= 0 takes the default. */
  CHECK_OK(mongoelector_fake_clock_new(WALL_START, -5, &clock));
  CHECK_OK(mongoelector_fake_clock_now(clock, &w, &m));
  CHECK(w == WALL_START && m == 0);
  CHECK_INVALID(mongoelector_fake_clock_now(clock, NULL, NULL));
  CHECK_OK(mongoelector_fake_clock_advance(clock, 0));
  CHECK_OK(mongoelector_fake_clock_settle(clock));
  CHECK_OK(mongoelector_fake_clock_advance(clock, 1500));
  CHECK(wall(clock) == WALL_START + 1500 && mono(clock) == 1500);
  CHECK_INVALID(mongoelector_fake_clock_advance(clock, -1));
  CHECK(strstr(mongoelector_last_error(), "cannot go back") != NULL);
  CHECK(mono(clock) == 1500);
  CHECK_INVALID(mongoelector_fake_clock_advance(clock, INT64_MAX));
  CHECK(mono(clock) == 1500);
  CHECK_OK(mongoelector_fake_clock_jump_wall(clock, -60000));
  CHECK(wall(clock) == WALL_START + 1500 - 60000 && mono(clock) == 1500);
  CHECK_INVALID(mongoelector_fake_clock_jump_wall(clock, -WALL_START)); /* before 1970 */
  CHECK_INVALID(mongoelector_fake_clock_jump_wall(clock, INT64_MAX));
  CHECK(wall(clock) == WALL_START + 1500 - 60000);

  /* attach: memory:// only; a name already running on another clock is refused. */
  CHECK_INVALID(mongoelector_fake_clock_attach(clock, NULL));
  CHECK_INVALID(mongoelector_fake_clock_attach(clock, "mongodb://127.0.0.1:1/"));
  CHECK(strstr(mongoelector_last_error(), "memory://") != NULL);
  CHECK_INVALID(mongoelector_fake_clock_attach(clock, "sqlite:///tmp/kit.db"));
  CHECK_INVALID(mongoelector_fake_clock_attach(clock, "memory://name?opt=1"));
  unique_uri(uri, sizeof uri, "kit-system-clock");
  CHECK_OK(mongoelector_client_new(uri, "", &client)); /* NAME now runs on the system clock */
  CHECK_INVALID(mongoelector_fake_clock_attach(clock, uri));
  CHECK(strstr(mongoelector_last_error(), "another clock") != NULL);
  mongoelector_client_free(client);
  client = NULL;
  unique_uri(uri, sizeof uri, "kit-attach");
  CHECK_OK(mongoelector_fake_clock_attach(clock, uri));
  CHECK_OK(mongoelector_fake_clock_attach(clock, uri)); /* the same clock again: fine */
  CHECK_OK(mongoelector_fake_clock_new(WALL_START, 0, &other));
  CHECK_INVALID(mongoelector_fake_clock_attach(other, uri));
  CHECK(strstr(mongoelector_last_error(), "another clock") != NULL);
  mongoelector_fake_clock_free(other);

  /* The levers. */
  CHECK_INVALID(mongoelector_memory_force_expire(NULL, NULL, "k", &held));
  CHECK_INVALID(mongoelector_memory_force_expire("mongodb://127.0.0.1:1/", NULL, "k", &held));
  CHECK_INVALID(mongoelector_memory_force_expire(uri, NULL, NULL, &held));
  CHECK_INVALID(mongoelector_memory_force_expire(uri, NULL, "", &held));
  CHECK_INVALID(mongoelector_memory_force_expire(uri, "", "k", &held));
  CHECK_INVALID(mongoelector_memory_force_expire(uri, "a$b", "k", &held));
  CHECK(held == -1);
  CHECK_OK(mongoelector_memory_force_expire(uri, NULL, "k", &held));
  CHECK(held == 0);
  CHECK_OK(mongoelector_memory_force_expire(uri, "elector.locks", "k", NULL));
  CHECK_INVALID(mongoelector_memory_set_unavailable(NULL, 1));
  CHECK_INVALID(mongoelector_memory_set_unavailable("sqlite:///tmp/kit.db", 1));
  {
    char unused[128];
    unique_uri(unused, sizeof unused, "kit-unused");
    CHECK_OK(mongoelector_memory_force_expire(unused, NULL, "k", &held));
    CHECK(held == 0);
    /* Nothing uses that name: turning it off is moot, turning it on would be lost. */
    CHECK_INVALID(mongoelector_memory_set_unavailable(unused, 1));
    CHECK(strstr(mongoelector_last_error(), "not in use") != NULL);
    CHECK_OK(mongoelector_memory_set_unavailable(unused, 0));
  }
  CHECK_OK(mongoelector_memory_set_unavailable(uri, 1)); /* kept alive by the clock */
  CHECK_OK(mongoelector_memory_set_unavailable(uri, 0));
  mongoelector_fake_clock_free(clock);
}

/* The clock keeps an attached backend, and its locks, alive; freed, the name is free. */
static void test_attached_backend_lives_with_the_clock(void) {
  mongoelector_fake_clock *clock = NULL;
  mongoelector_client *client = NULL;
  mongoelector_locker *locker = NULL;
  int locked = -1;
  char uri[128];

  unique_uri(uri, sizeof uri, "kit-lifetime");
  open_world(uri, 0, &clock, &client);
  new_locker(client, "job", 600, &locker);
  CHECK_OK(mongoelector_locker_acquire(locker, 0, -1, 0.25, 0, NULL));
  mongoelector_locker_free(locker);
  mongoelector_client_free(client);
  CHECK_OK(mongoelector_client_new(uri, "", &client));
  new_locker(client, "job", 600, &locker);
  CHECK_OK(mongoelector_locker_locked(locker, &locked));
  CHECK(locked == 1);
  mongoelector_locker_free(locker);
  mongoelector_client_free(client);

  mongoelector_fake_clock_free(clock);
  CHECK_OK(mongoelector_client_new(uri, "", &client)); /* a fresh backend, system clock */
  new_locker(client, "job", 600, &locker);
  CHECK_OK(mongoelector_locker_locked(locker, &locked));
  CHECK(locked == 0);
  CHECK_OK(mongoelector_fake_clock_new(WALL_START, 0, &clock));
  CHECK_INVALID(mongoelector_fake_clock_attach(clock, uri));
  mongoelector_fake_clock_free(clock);
  mongoelector_locker_free(locker);
  mongoelector_client_free(client);
}

/* ---- leases ---------------------------------------------------------------------------- */

/* A lease on "job" (its on_lost recorded by `probe`) on a fresh fake clock and backend,
 * and a second locker of the same key: a peer, or a thief. */
typedef struct lease_world {
  char uri[128];
  mongoelector_fake_clock *clock;
  mongoelector_client *client;
  mongoelector_locker *holder, *other;
  mongoelector_lease *lease;
  lost_probe probe;
} lease_world;

static void lease_world_open(lease_world *w, const char *name, double ttl) {
  memset(w, 0, sizeof *w);
  unique_uri(w->uri, sizeof w->uri, name);
  open_world(w->uri, 0, &w->clock, &w->client);
  probe_init(&w->probe, w->clock);
  new_locker(w->client, "job", ttl, &w->holder);
  new_locker(w->client, "job", ttl, &w->other);
  CHECK_OK(mongoelector_lease_acquire_with(w->holder, NULL, on_lost, &w->probe, &w->lease));
}

static void lease_world_close(lease_world *w) {
  mongoelector_lease_free(w->lease);
  mongoelector_locker_free(w->holder);
  mongoelector_locker_free(w->other);
  mongoelector_client_free(w->client);
  mongoelector_fake_clock_free(w->clock);
}

/* ttl 15 s: renewed every 5 s for an hour of fake time; then, with the backend down, lost
 * exactly at its renew deadline (lease end minus ttl/10), before advance() returns. */
static void test_lease_survives_an_hour_then_is_lost_at_its_deadline(void) {
  lease_world w;
  mongoelector_lock_info info;
  mongoelector_stats before, after;
  int found = 0, locked = 0, lost = 0;
  int64_t deadline_wall, m0;
  uint64_t renewals;

  lease_world_open(&w, "kit-lease", 15);
  before.version = MONGOELECTOR_STATS_VERSION;
  CHECK_OK(mongoelector_stats_get(&before));
  CHECK_OK(mongoelector_fake_clock_advance(w.clock, 3600 * 1000));
  CHECK(mono(w.clock) == 3600 * 1000);
  CHECK(lease_lost(w.lease) == 0);
  CHECK(probe_calls(&w.probe) == 0);
  after.version = MONGOELECTOR_STATS_VERSION;
  CHECK_OK(mongoelector_stats_get(&after));
  renewals = after.renewals - before.renewals;
  CHECK(renewals >= 719 && renewals <= 721); /* every ttl/3 = 5 s, as an hour would */
  CHECK(after.renewal_failures == before.renewal_failures);
  CHECK_OK(mongoelector_locker_locked(w.other, &locked));
  CHECK(locked == 1);
  CHECK_OK(mongoelector_locker_current(w.other, &info, &found));
  CHECK(found == 1);
  /* Renewed at this very instant: the document runs a full ttl from now. */
  CHECK(info.expire_ms == wall(w.clock) + 15000);

  /* Cut off: no renewal gets through. The lease is lost at lease end - ttl/10. */
  deadline_wall = info.expire_ms - 1500;
  CHECK_OK(mongoelector_memory_set_unavailable(w.uri, 1));
  CHECK_OK(mongoelector_fake_clock_advance(w.clock, deadline_wall - wall(w.clock) - 1));
  CHECK(lease_lost(w.lease) == 0);
  CHECK(probe_calls(&w.probe) == 0);
  m0 = mono(w.clock);
  CHECK_OK(mongoelector_fake_clock_advance(w.clock, 1));
  CHECK(lease_lost(w.lease) == 1);
  CHECK(probe_calls(&w.probe) == 1);
  pthread_mutex_lock(&w.probe.mu);
  /* on_lost ran inside advance(), at the deadline, on the clock's callback thread (never
   * the thread that moves time or runs the timers: a slow callback delays no other
   * loss); it could read the clock but not drive it (this thread is advancing it). */
  CHECK(!pthread_equal(w.probe.thread, pthread_self()));
  CHECK(w.probe.mono_at_call == m0 + 1);
  CHECK(w.probe.nested_advance == MONGOELECTOR_ERR_INVALID_ARGUMENT);
  CHECK(w.probe.nested_settle == MONGOELECTOR_ERR_INVALID_ARGUMENT);
  pthread_mutex_unlock(&w.probe.mu);
  CHECK(mono(w.clock) == m0 + 1); /* the nested advance did not move it */
  CHECK_OK(mongoelector_lease_wait_lost(w.lease, 0, &lost));
  CHECK(lost == 1);

  /* Back up: the lock expires at its ttl, then the peer takes it. Nothing more for the
   * lost lease (on_lost ran once). */
  CHECK_OK(mongoelector_memory_set_unavailable(w.uri, 0));
  CHECK_STATUS(mongoelector_locker_acquire(w.other, 0, -1, 0.25, 0, NULL),
               MONGOELECTOR_ERR_LOCK_EXISTS);
  CHECK_OK(mongoelector_fake_clock_advance(w.clock, 1500));
  CHECK_OK(mongoelector_locker_acquire(w.other, 0, -1, 0.25, 0, NULL));
  CHECK(probe_calls(&w.probe) == 1);
  CHECK_OK(mongoelector_locker_release(w.other, 0));
  lease_world_close(&w);
}

/* Another node forces the lock away: the holder learns it at its next renewal, ttl/3
 * after the last one, not a millisecond before. */
static void test_stolen_lock_is_lost_at_the_next_renewal(void) {
  lease_world w;
  int64_t lease_fence = 0, thief_fence = 0;
  int owned = 0;

  lease_world_open(&w, "kit-steal", 9);
  CHECK_OK(mongoelector_lease_fence(w.lease, &lease_fence));
  /* Two renewals first: the schedule runs from the last one. */
  CHECK_OK(mongoelector_fake_clock_advance(w.clock, 6000));
  CHECK_OK(mongoelector_locker_acquire(w.other, 0, -1, 0.25, /*force=*/1, &thief_fence));
  CHECK(thief_fence > lease_fence);
  CHECK_OK(mongoelector_fake_clock_advance(w.clock, 2999));
  CHECK(lease_lost(w.lease) == 0);
  CHECK(probe_calls(&w.probe) == 0);
  CHECK_OK(mongoelector_fake_clock_advance(w.clock, 1));
  CHECK(lease_lost(w.lease) == 1);
  CHECK(probe_calls(&w.probe) == 1);
  CHECK(w.probe.mono_at_call == 9000);
  /* The loss is the holder's alone: the thief keeps the lock, also once the lost lease
   * is freed (it releases nothing). */
  mongoelector_lease_free(w.lease);
  w.lease = NULL;
  CHECK_OK(mongoelector_locker_owned(w.other, &owned));
  CHECK(owned == 1);
  CHECK_OK(mongoelector_locker_release(w.other, 0));
  lease_world_close(&w);
}

/* A blocking acquire on another thread waits in fake time: it times out when advance()
 * passes its deadline, once the test has seen it waiting on the clock. */
typedef struct waiting_acquire {
  mongoelector_locker *locker;
  mongoelector_status status;
  int64_t fence;
} waiting_acquire;

static void *acquire_with_timeout(void *arg) {
  waiting_acquire *w = (waiting_acquire *)arg;
  w->status = mongoelector_locker_acquire(w->locker, 1, 5.0, 0.25, 0, &w->fence);
  return NULL;
}

static void test_blocking_acquire_waits_in_fake_time(void) {
  char uri[128];
  mongoelector_fake_clock *clock;
  mongoelector_client *client;
  mongoelector_locker *holder, *other;
  waiting_acquire w;
  pthread_t t;
  size_t idle = 0, waiting = 0;
  int64_t fence = 0;

  unique_uri(uri, sizeof uri, "kit-blocking");
  open_world(uri, 0, &clock, &client);
  new_locker(client, "job", 20, &holder);
  new_locker(client, "job", 20, &other);
  CHECK_OK(mongoelector_locker_acquire(holder, 0, -1, 0.25, 0, &fence));
  CHECK_OK(mongoelector_fake_clock_wait_for_waiters(clock, 0, -1, &idle));
  w.locker = other;
  w.status = MONGOELECTOR_OK;
  w.fence = 0;
  CHECK(pthread_create(&t, NULL, acquire_with_timeout, &w) == 0);
  CHECK_OK(mongoelector_fake_clock_wait_for_waiters(clock, idle + 1, 30000, &waiting));
  CHECK(waiting >= idle + 1);
  CHECK_OK(mongoelector_fake_clock_advance(clock, 4999));
  CHECK_OK(mongoelector_fake_clock_wait_for_waiters(clock, idle + 1, 30000, NULL));
  CHECK_OK(mongoelector_fake_clock_advance(clock, 1));
  CHECK(pthread_join(t, NULL) == 0);
  CHECK(w.status == MONGOELECTOR_ERR_TIMEOUT);
  CHECK(mongoelector_fake_clock_wait_for_waiters(clock, idle + 50, 10, NULL) ==
        MONGOELECTOR_ERR_TIMEOUT);
  CHECK_OK(mongoelector_locker_release(holder, 0));
  mongoelector_locker_free(other);
  mongoelector_locker_free(holder);
  mongoelector_client_free(client);
  mongoelector_fake_clock_free(clock);
}

/* The clock freed before what was made on its backend: those keep it alive (time
 * stands still for them) and are freed afterwards as usual. */
static void test_clock_freed_first(void) {
  lease_world w;
  int lost = -1, locked = -1;

  lease_world_open(&w, "kit-free-order", 15);
  CHECK_OK(mongoelector_fake_clock_advance(w.clock, 60000));
  mongoelector_fake_clock_free(w.clock);
  w.clock = NULL;
  CHECK_OK(mongoelector_lease_lost(w.lease, &lost));
  CHECK(lost == 0);
  mongoelector_lease_free(w.lease); /* releases */
  w.lease = NULL;
  CHECK_OK(mongoelector_locker_locked(w.other, &locked));
  CHECK(locked == 0);
  lease_world_close(&w);
}

/* An NTP-like step of the server's clock: the library's next sample sees the jump and
 * the lease, written on the old time base, is declared lost. */
static void test_wall_jump_is_noticed(void) {
  lease_world w;
  int64_t m0;

  lease_world_open(&w, "kit-jump", 15);
  CHECK_OK(mongoelector_fake_clock_advance(w.clock, 30000));
  CHECK(lease_lost(w.lease) == 0);
  m0 = mono(w.clock);
  CHECK_OK(mongoelector_fake_clock_jump_wall(w.clock, 3600 * 1000));
  CHECK(mono(w.clock) == m0);
  /* Samples are refreshed every minute at the latest. */
  CHECK_OK(mongoelector_fake_clock_advance(w.clock, 60000));
  CHECK(lease_lost(w.lease) == 1);
  CHECK(probe_calls(&w.probe) == 1);
  lease_world_close(&w);
}

/* ---- electors -------------------------------------------------------------------------- */

typedef struct node {
  pthread_mutex_t mu;
  int led, lost;
  /* on_leader blocks until `release` is set (the settle-timeout scenario). */
  int block;
  int release;
  pthread_cond_t cv;
} node;

static void node_init(node *n) {
  memset(n, 0, sizeof *n);
  pthread_mutex_init(&n->mu, NULL);
  pthread_cond_init(&n->cv, NULL);
}

static void on_leader(void *ud) {
  node *n = (node *)ud;
  pthread_mutex_lock(&n->mu);
  n->led++;
  if (n->block) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30; /* a safety net only: the test releases it long before */
    while (!n->release) {
      if (pthread_cond_timedwait(&n->cv, &n->mu, &until) != 0) break;
    }
  }
  pthread_mutex_unlock(&n->mu);
}

static void on_loss(void *ud) {
  node *n = (node *)ud;
  pthread_mutex_lock(&n->mu);
  n->lost++;
  pthread_mutex_unlock(&n->mu);
}

static int count(node *n, const int *field) {
  int v;
  pthread_mutex_lock(&n->mu);
  v = *field;
  pthread_mutex_unlock(&n->mu);
  return v;
}

static void new_elector(mongoelector_client *client, const char *key, node *n,
                        mongoelector_elector **out) {
  mongoelector_elector_config c;
  CHECK_OK(mongoelector_elector_config_init(&c, MONGOELECTOR_ELECTOR_CONFIG_VERSION));
  c.ttl_seconds = 10;
  c.on_leader = on_leader;
  c.on_leader_loss = on_loss;
  c.user_data = n;
  CHECK_OK(mongoelector_elector_new_with(client, key, &c, out));
}

static int is_leader(mongoelector_elector *e) {
  int v = -1;
  CHECK_OK(mongoelector_elector_is_leader(e, &v));
  return v;
}

/* The first elector leads once its loop settled; the second stays a follower for ten
 * minutes; when the leader's lock expires behind its back the follower leads, and the
 * old leader steps down, within ttl/2 of fake time. */
static void test_election_takeover(void) {
  mongoelector_fake_clock *clock = NULL;
  mongoelector_client *client = NULL;
  mongoelector_elector *a = NULL, *b = NULL;
  node na, nb;
  int64_t fa = 0, fb = 0, t0, b_at = -1, a_off_at = -1, t;
  int held = 0;
  char uri[128];

  unique_uri(uri, sizeof uri, "kit-election");
  open_world(uri, 0, &clock, &client);
  node_init(&na);
  node_init(&nb);
  new_elector(client, "svc", &na, &a);
  new_elector(client, "svc", &nb, &b);
  CHECK_OK(mongoelector_elector_start(a));
  CHECK_OK(mongoelector_fake_clock_settle(clock));
  CHECK(mono(clock) == 0);
  CHECK(is_leader(a) == 1 && count(&na, &na.led) == 1);
  CHECK_OK(mongoelector_elector_start(b));
  CHECK_OK(mongoelector_fake_clock_advance(clock, 10 * 60 * 1000));
  CHECK(is_leader(a) == 1 && is_leader(b) == 0);
  CHECK(count(&na, &na.led) == 1 && count(&na, &na.lost) == 0 && count(&nb, &nb.led) == 0);
  CHECK_OK(mongoelector_elector_fence(a, &fa));

  CHECK_OK(mongoelector_memory_force_expire(uri, "elector.locks", "svc", &held));
  CHECK(held == 1);
  CHECK(is_leader(a) == 1); /* not told: it learns at its next renewal */
  t0 = mono(clock);
  for (t = 100; t <= 5000 && (b_at < 0 || a_off_at < 0); t += 100) {
    CHECK_OK(mongoelector_fake_clock_advance(clock, 100));
    if (b_at < 0 && is_leader(b)) b_at = mono(clock) - t0;
    if (a_off_at < 0 && !is_leader(a)) a_off_at = mono(clock) - t0;
  }
  printf(
      "  takeover after force_expire: follower leads at +%lld ms, leader stepped down at "
      "+%lld ms (ttl 10 s)\n",
      (long long)b_at, (long long)a_off_at);
  CHECK(b_at > 0 && b_at <= 5000);
  CHECK(a_off_at > 0 && a_off_at <= 5000);
  CHECK(count(&nb, &nb.led) == 1 && count(&na, &na.lost) == 1 && count(&na, &na.led) == 1);
  CHECK_OK(mongoelector_elector_fence(b, &fb));
  CHECK(fb > fa);
  /* And it stays that way. */
  CHECK_OK(mongoelector_fake_clock_advance(clock, 60 * 1000));
  CHECK(is_leader(b) == 1 && is_leader(a) == 0 && count(&na, &na.led) == 1);

  CHECK_OK(mongoelector_elector_stop(a));
  CHECK_OK(mongoelector_elector_stop(b));
  CHECK(count(&nb, &nb.lost) == 1);
  mongoelector_elector_free(a);
  mongoelector_elector_free(b);
  mongoelector_client_free(client);
  mongoelector_fake_clock_free(clock);
}

/* A callback that blocks on the advancing thread never becomes idle: settle() reports it
 * (TIMEOUT after the settle timeout, 0.2 s of real time) instead of hanging. */
static void test_blocked_callback_is_reported_not_hung(void) {
  mongoelector_fake_clock *clock = NULL;
  mongoelector_client *client = NULL;
  mongoelector_elector *e = NULL;
  node n;
  double t0;
  char uri[128];

  unique_uri(uri, sizeof uri, "kit-blocked");
  open_world(uri, 200, &clock, &client);
  node_init(&n);
  n.block = 1;
  new_elector(client, "svc", &n, &e);
  CHECK_OK(mongoelector_elector_start(e));
  t0 = now_s();
  CHECK_STATUS(mongoelector_fake_clock_settle(clock), MONGOELECTOR_ERR_TIMEOUT);
  CHECK(now_s() - t0 < 10);
  CHECK(strstr(mongoelector_last_error(), "did not become idle within 200 ms") != NULL);
  pthread_mutex_lock(&n.mu);
  n.release = 1;
  pthread_cond_broadcast(&n.cv);
  pthread_mutex_unlock(&n.mu);
  CHECK_OK(mongoelector_fake_clock_settle(clock));
  CHECK(is_leader(e) == 1 && count(&n, &n.led) == 1);
  CHECK_OK(mongoelector_elector_stop(e));
  mongoelector_elector_free(e);
  mongoelector_client_free(client);
  mongoelector_fake_clock_free(clock);
}

int main(int argc, char **argv) {
  double t0 = now_s();
  (void)argc;
  (void)argv;
  (void)sleep_s; /* check.h's helper: this program never sleeps */
  test_arguments();
  test_attached_backend_lives_with_the_clock();
  test_lease_survives_an_hour_then_is_lost_at_its_deadline();
  test_stolen_lock_is_lost_at_the_next_renewal();
  test_wall_jump_is_noticed();
  test_clock_freed_first();
  test_blocking_acquire_waits_in_fake_time();
  test_election_takeover();
  test_blocked_callback_is_reported_not_hung();
  printf("testing_kit_test: %d passed, 0 failed (%.2f s of real time)\n", g_passed, now_s() - t0);
  return 0;
}
