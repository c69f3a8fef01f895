/* One benchmark contender process for tests/bench/harness.py: ours through the C API
 * (the public header mongoelector.h and libmongoelector.so.1 only). The C twin of
 * contender.py: same subcommands, options and line protocol (see there).
 *
 *   bench_contender SUBCOMMAND --uri URI --db NAME [options]
 *
 * Subcommands: probe, ops, cycles, elect, contend, cost (idle phase only: no GIL here),
 * scale (keep-alive leases). Not a test: run tests/bench/run.sh. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "mongoelector.h"

/* ---- options ------------------------------------------------------------------------ */
static struct {
  const char *cmd, *uri, *other_uri, *db, *keys, *key, *clients, *mode, *kind;
  int unsafe, n, threads, warmup, rounds;
  double seconds, ttl, start_at, step, idle;
} opt = {NULL, NULL, NULL, NULL, "k", "k",  "shared", "batched", "lock", 0,
         50,   1,    50,   5,    5.0, 15.0, 0.0,      0.25,      60.0};

static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

static void say(const char *fmt, ...) {
  va_list ap;
  pthread_mutex_lock(&out_mu);
  va_start(ap, fmt);
  vfprintf(stdout, fmt, ap);
  va_end(ap);
  fputc('\n', stdout);
  fflush(stdout);
  pthread_mutex_unlock(&out_mu);
}

static void die(const char *what) {
  say("ERROR %s: %s", what, mongoelector_last_error());
  fprintf(stderr, "bench_contender: %s: %s\n", what, mongoelector_last_error());
  _exit(1);
}

#define CHECK(call, what)                     \
  do {                                        \
    if ((call) != MONGOELECTOR_OK) die(what); \
  } while (0)

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s) {
  struct timespec ts;
  if (s <= 0) return;
  ts.tv_sec = (time_t)s;
  ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void mark(const char *label) {
  char line[64];
  say("MARK %s", label);
  if (fgets(line, sizeof line, stdin) == NULL) {
    fprintf(stderr, "bench_contender: harness went away\n");
    _exit(1);
  }
}

static long proc_status(const char *field) {
  char line[256];
  long v = -1;
  size_t n = strlen(field);
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL) return -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, field, n) == 0 && line[n] == ':') v = strtol(line + n + 1, NULL, 10);
  fclose(f);
  return v;
}

static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted array. */
static double pct(const double *v, size_t n, double p) {
  size_t rank;
  if (n == 0) return 0;
  rank = (size_t)((p * (double)n + 99.999999) / 100.0);
  if (rank < 1) rank = 1;
  if (rank > n) rank = n;
  return v[rank - 1];
}

static mongoelector_client *client_new(const char *uri) {
  mongoelector_client *c = NULL;
  CHECK(mongoelector_client_new(uri, opt.db, &c), "client_new");
  return c;
}

static mongoelector_locker *locker_new(mongoelector_client *c, const char *key, double ttl,
                                       int delete_on_release, const char *collection) {
  mongoelector_locker_options o;
  mongoelector_locker *l = NULL;
  mongoelector_locker_options_init(&o);
  o.ttl_seconds = ttl;
  if (delete_on_release >= 0) o.delete_on_release = delete_on_release;
  if (collection != NULL) o.collection = collection;
  o.allow_unsafe_server = opt.unsafe;
  CHECK(mongoelector_locker_new(c, key, &o, &l), "locker_new");
  return l;
}

/* acquire: blocking (default step) unless nb; returns the status. */
static void acquire(mongoelector_locker *l) {
  CHECK(mongoelector_locker_acquire(l, 1, -1, 0.25, 0, NULL), "acquire");
}

static void release(mongoelector_locker *l) { CHECK(mongoelector_locker_release(l, 0), "release"); }

/* ---- ops ---------------------------------------------------------------------------- */
#define MAX_OPS 24
static struct {
  const char *name;
  double *ms;
  int n;
} lat[MAX_OPS];
static int n_lat;

static double *lat_slot(const char *name) {
  int i;
  for (i = 0; i < n_lat; ++i)
    if (strcmp(lat[i].name, name) == 0) break;
  if (i == n_lat) {
    if (n_lat == MAX_OPS) die("too many ops");
    lat[i].name = name;
    lat[i].ms = calloc((size_t)opt.n + 1, sizeof(double));
    lat[i].n = 0;
    ++n_lat;
  }
  return &lat[i].ms[lat[i].n++];
}

static char mark_buf[128];
#define TIMED(op, stmt)                                  \
  do {                                                   \
    double t0_, *slot_;                                  \
    snprintf(mark_buf, sizeof mark_buf, "%s:begin", op); \
    mark(mark_buf);                                      \
    t0_ = mono();                                        \
    stmt;                                                \
    slot_ = lat_slot(op);                                \
    *slot_ = (mono() - t0_) * 1e3;                       \
    snprintf(mark_buf, sizeof mark_buf, "%s:end", op);   \
    mark(mark_buf);                                      \
  } while (0)

static void print_lat_result(void) {
  int i, j;
  pthread_mutex_lock(&out_mu);
  printf("RESULT {\"phase\":\"ops\",\"latency_ms\":{");
  for (i = 0; i < n_lat; ++i) {
    qsort(lat[i].ms, (size_t)lat[i].n, sizeof(double), cmp_double);
    printf("%s\"%s\":[", i ? "," : "", lat[i].name);
    for (j = 0; j < lat[i].n; ++j) printf("%s%.4f", j ? "," : "", lat[i].ms[j]);
    printf("]");
  }
  printf("}}\n");
  fflush(stdout);
  pthread_mutex_unlock(&out_mu);
}

static void cmd_ops(void) {
  mongoelector_client *c = client_new(opt.uri);
  mongoelector_client *other = client_new(opt.other_uri ? opt.other_uri : opt.uri);
  mongoelector_locker *a, *holder, *b, *lk;
  mongoelector_elector *lead[2], *fol[2];
  int i, s, flag, renewed;
  char key[64];

  a = locker_new(c, "ops-defaults", 600, -1, NULL);
  for (i = 0; i < 3; ++i) {
    acquire(a);
    release(a);
  }
  for (i = 0; i < opt.n; ++i) {
    TIMED("acquire_defaults", acquire(a));
    TIMED("touch", CHECK(mongoelector_locker_touch(a, &renewed, NULL), "touch"));
    if (!renewed) die("touch while holding");
    TIMED("locked", CHECK(mongoelector_locker_locked(a, &flag), "locked"));
    if (!flag) die("locked() while held");
    TIMED("owned", CHECK(mongoelector_locker_owned(a, &flag), "owned"));
    if (!flag) die("owned() while holding");
    TIMED("release_defaults", release(a));
  }
  for (s = 0; s < 2; ++s) { /* 0: document kept (present), 1: deleted (absent) */
    lk = locker_new(c, s ? "ops-absent" : "ops-present", 600, s, NULL);
    for (i = 0; i < 3; ++i) {
      acquire(lk);
      release(lk);
    }
    for (i = 0; i < opt.n; ++i) {
      TIMED(s ? "acquire_absent" : "acquire_present", acquire(lk));
      TIMED(s ? "release_delete" : "release_keep", release(lk));
    }
    mongoelector_locker_free(lk);
  }

  holder = locker_new(other, "ops-held", 600, -1, NULL);
  acquire(holder);
  b = locker_new(c, "ops-held", 600, -1, NULL);
  for (i = 0; i <= opt.n; ++i) {
    mongoelector_status st;
    if (i == 0) {
      st = mongoelector_locker_acquire(b, 0, -1, 0.25, 0, NULL);
    } else {
      TIMED("contended", st = mongoelector_locker_acquire(b, 0, -1, 0.25, 0, NULL));
    }
    if (st != MONGOELECTOR_ERR_LOCK_EXISTS) die("contended acquire did not say LOCK_EXISTS");
  }
  release(holder);

  for (i = 0; i <= opt.n; ++i) {
    snprintf(key, sizeof key, "ops-new-%d", i);
    if (i == 0) {
      lk = locker_new(c, key, 600, -1, "ops_new");
      acquire(lk);
    } else {
      TIMED("new_key", lk = locker_new(c, key, 600, -1, "ops_new"); acquire(lk));
    }
    mongoelector_locker_free(lk);
  }

  for (s = 0; s < 2; ++s) {
    mongoelector_elector_options eo;
    mongoelector_elector_options_init(&eo);
    eo.ttl_seconds = 60;
    eo.report_status = s;
    CHECK(mongoelector_elector_new(c, s ? "ops-elect_status" : "ops-elect", &eo, &lead[s]),
          "elector_new");
    CHECK(mongoelector_elector_new(c, s ? "ops-elect_status" : "ops-elect", &eo, &fol[s]),
          "elector_new");
    CHECK(mongoelector_elector_poll(lead[s]), "poll");
    CHECK(mongoelector_elector_poll(fol[s]), "poll");
    CHECK(mongoelector_elector_is_leader(lead[s], &flag), "is_leader");
    if (!flag) die("first poll leads");
    CHECK(mongoelector_elector_is_leader(fol[s], &flag), "is_leader");
    if (flag) die("second poll follows");
  }
  for (i = 0; i < opt.n; ++i) {
    TIMED("leader_poll", CHECK(mongoelector_elector_poll(lead[0]), "poll"));
    TIMED("follower_poll", CHECK(mongoelector_elector_poll(fol[0]), "poll"));
    TIMED("leader_poll_status", CHECK(mongoelector_elector_poll(lead[1]), "poll"));
    TIMED("follower_poll_status", CHECK(mongoelector_elector_poll(fol[1]), "poll"));
  }
  for (s = 0; s < 2; ++s) {
    CHECK(mongoelector_elector_is_leader(lead[s], &flag), "is_leader");
    if (!flag) die("leaders keep leading");
    mongoelector_elector_free(fol[s]);
    mongoelector_elector_free(lead[s]);
  }
  print_lat_result();
  mongoelector_locker_free(a);
  mongoelector_locker_free(b);
  mongoelector_locker_free(holder);
  mongoelector_client_free(c);
  mongoelector_client_free(other);
}

/* ---- cycles ------------------------------------------------------------------------- */
static volatile int cyc_go, cyc_stop;
typedef struct {
  mongoelector_locker *l;
  long n;
  double *lat;
  size_t cap;
} cyc_arg;

static void *cyc_run(void *p) {
  cyc_arg *a = p;
  while (!__atomic_load_n(&cyc_go, __ATOMIC_ACQUIRE)) sched_yield();
  while (!__atomic_load_n(&cyc_stop, __ATOMIC_ACQUIRE)) {
    double t0 = mono();
    acquire(a->l);
    release(a->l);
    if (a->lat != NULL) {
      if ((size_t)a->n == a->cap) {
        a->cap *= 2;
        a->lat = realloc(a->lat, a->cap * sizeof(double));
        if (a->lat == NULL) die("out of memory");
      }
      a->lat[a->n] = (mono() - t0) * 1e3;
    }
    ++a->n;
  }
  return NULL;
}

static void cmd_cycles(void) {
  int t, T = opt.threads, shared = strcmp(opt.clients, "shared") == 0, i;
  mongoelector_client *base = shared ? client_new(opt.uri) : NULL;
  mongoelector_client **cl = calloc((size_t)T, sizeof *cl);
  cyc_arg *args = calloc((size_t)T, sizeof *args);
  pthread_t *th = calloc((size_t)T, sizeof *th);
  double t0, secs, cpu0, cpu;
  long total = 0;
  char key[64];
  for (t = 0; t < T; ++t) {
    cl[t] = shared ? base : client_new(opt.uri);
    snprintf(key, sizeof key, "cyc-%ld-%d", (long)getpid(), t);
    args[t].l = locker_new(cl[t], key, 600, -1, NULL);
    for (i = 0; i < opt.warmup; ++i) {
      acquire(args[t].l);
      release(args[t].l);
    }
    if (T == 1) {
      args[t].cap = 65536;
      args[t].lat = malloc(args[t].cap * sizeof(double));
    }
    pthread_create(&th[t], NULL, cyc_run, &args[t]);
  }
  cpu0 = cpu_seconds();
  t0 = mono();
  __atomic_store_n(&cyc_go, 1, __ATOMIC_RELEASE);
  sleep_s(opt.seconds);
  __atomic_store_n(&cyc_stop, 1, __ATOMIC_RELEASE);
  for (t = 0; t < T; ++t) pthread_join(th[t], NULL);
  secs = mono() - t0;
  cpu = cpu_seconds() - cpu0;
  for (t = 0; t < T; ++t) total += args[t].n;
  pthread_mutex_lock(&out_mu);
  printf(
      "RESULT {\"phase\":\"cycles\",\"threads\":%d,\"clients\":\"%s\",\"cycles\":%ld,"
      "\"seconds\":%.6f,\"cpu_s\":%.4f,\"per_thread\":[",
      T, opt.clients, total, secs, cpu);
  for (t = 0; t < T; ++t) printf("%s%ld", t ? "," : "", args[t].n);
  printf("]");
  if (T == 1 && args[0].n > 0) {
    size_t n = (size_t)args[0].n;
    double *v = args[0].lat, sum = 0;
    qsort(v, n, sizeof(double), cmp_double);
    for (i = 0; (size_t)i < n; ++i) sum += v[i];
    printf(",\"p50_ms\":%.5f,\"p90_ms\":%.5f,\"p99_ms\":%.5f,\"mean_ms\":%.5f,\"cdf_ms\":[",
           pct(v, n, 50), pct(v, n, 90), pct(v, n, 99), sum / (double)n);
    for (i = 0; i <= 200; ++i)
      printf("%s%.5f", i ? "," : "", v[(size_t)((double)i * (double)(n - 1) / 200.0 + 0.5)]);
    printf("]");
  }
  printf("}\n");
  fflush(stdout);
  pthread_mutex_unlock(&out_mu);
  for (t = 0; t < T; ++t) {
    mongoelector_locker_free(args[t].l);
    if (!shared) mongoelector_client_free(cl[t]);
  }
  mongoelector_client_free(base);
}

/* ---- elect -------------------------------------------------------------------------- */
static volatile sig_atomic_t stopping;
static void on_term(int sig) {
  (void)sig;
  stopping = 1;
}

static void ev_leader(void *key) { say("EVENT leader %.6f %s", mono(), (const char *)key); }
static void ev_loss(void *key) { say("EVENT loss %.6f %s", mono(), (const char *)key); }

static char **split_keys(const char *s, int *n) {
  char *copy = strdup(s), *tok, *save = NULL;
  char **out = calloc(strlen(s) + 1, sizeof *out);
  *n = 0;
  for (tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save))
    out[(*n)++] = tok;
  return out;
}

static void install_term(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_term;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
}

static void cmd_elect(void) {
  int n, i;
  char **keys = split_keys(opt.keys, &n);
  mongoelector_client *c = client_new(opt.uri);
  mongoelector_elector **e = calloc((size_t)n, sizeof *e);
  double t;
  install_term();
  for (i = 0; i < n; ++i) {
    mongoelector_elector_options eo;
    mongoelector_elector_options_init(&eo);
    eo.ttl_seconds = opt.ttl;
    eo.on_leader = ev_leader;
    eo.on_leader_loss = ev_loss;
    eo.user_data = keys[i];
    CHECK(mongoelector_elector_new(c, keys[i], &eo, &e[i]), "elector_new");
  }
  for (i = 0; i < n; ++i) {
    CHECK(mongoelector_elector_start(e[i]), "elector_start");
    say("EVENT started %.6f %s", mono(), keys[i]);
  }
  while (!stopping) sleep_s(0.05);
  t = mono();
  for (i = 0; i < n; ++i) mongoelector_elector_stop(e[i]);
  say("EVENT stopped %.6f %.3f", mono(), mono() - t);
  _exit(0);
}

/* ---- contend ------------------------------------------------------------------------ */
static void cmd_contend(void) {
  mongoelector_client *c = client_new(opt.uri);
  mongoelector_locker *l = locker_new(c, opt.key, opt.ttl, -1, NULL);
  double end, off, *waits;
  long n = 0, cap = 1 << 16;
  CHECK(mongoelector_locker_verify_time(l, &off), "verify_time");
  waits = malloc((size_t)cap * sizeof(double));
  say("READY");
  {
    char line[128];
    if (fgets(line, sizeof line, stdin) == NULL || strncmp(line, "GO ", 3) != 0) _exit(0);
    opt.start_at = atof(line + 3);
    end = opt.start_at + opt.seconds;
  }
  sleep_s(opt.start_at - mono());
  for (;;) {
    double left = end - mono(), t0, t1;
    mongoelector_status st;
    if (left <= 0) break;
    t0 = mono();
    st = mongoelector_locker_acquire(l, 1, left, opt.step, 0, NULL);
    if (st == MONGOELECTOR_ERR_TIMEOUT) break;
    if (st != MONGOELECTOR_OK) die("acquire");
    t1 = mono();
    if (t1 > end) {
      release(l);
      break;
    }
    if (n < cap) waits[n] = (t1 - t0) * 1e3;
    ++n;
    release(l);
  }
  qsort(waits, (size_t)(n < cap ? n : cap), sizeof(double), cmp_double);
  say("RESULT {\"phase\":\"contend\",\"acquisitions\":%ld,\"wait_p50_ms\":%.4f,"
      "\"wait_max_ms\":%.4f}",
      n, pct(waits, (size_t)(n < cap ? n : cap), 50), n ? waits[(n < cap ? n : cap) - 1] : 0.0);
}

/* ---- cost --------------------------------------------------------------------------- */
static volatile int cost_leading;
static void ev_cost_leader(void *p) {
  (void)p;
  __atomic_store_n(&cost_leading, 1, __ATOMIC_RELEASE);
}

static void cmd_cost(void) {
  mongoelector_client *c = client_new(opt.uri);
  mongoelector_elector *e;
  mongoelector_elector_options eo;
  long rss_base = proc_status("VmRSS"), threads_base = proc_status("Threads");
  double t0, cpu0, waited = 0;
  char line[64];
  mongoelector_elector_options_init(&eo);
  eo.ttl_seconds = opt.ttl;
  eo.on_leader = ev_cost_leader;
  CHECK(mongoelector_elector_new(c, "cost-idle", &eo, &e), "elector_new");
  CHECK(mongoelector_elector_start(e), "elector_start");
  while (!__atomic_load_n(&cost_leading, __ATOMIC_ACQUIRE) && waited < 30) {
    sleep_s(0.01);
    waited += 0.01;
  }
  if (!cost_leading) {
    say("ERROR the idle elector did not lead within 30 s");
    _exit(1);
  }
  sleep_s(0.5);
  say("READY");
  cpu0 = cpu_seconds();
  t0 = mono();
  sleep_s(opt.idle);
  say("RESULT {\"phase\":\"idle\",\"cpu_s\":%.4f,\"seconds\":%.3f,\"rss_kib\":%ld,"
      "\"rss_base_kib\":%ld,\"threads\":%ld,\"threads_base\":%ld}",
      cpu_seconds() - cpu0, mono() - t0, proc_status("VmRSS"), rss_base, proc_status("Threads"),
      threads_base);
  mongoelector_elector_free(e);
  mongoelector_client_free(c);
  while (fgets(line, sizeof line, stdin) != NULL) {
  }
}

/* ---- scale -------------------------------------------------------------------------- */
/* Keep-alive leases on keys scale-0 .. scale-(N-1), one client: locks, or with --kind
 * semaphore one slot of each key scale-sem-I (limit 2) held by a semaphore lease. --mode batched (the
 * library's default: one renewer batches the renewals of the client) or per-key (the
 * harness starts the process with MONGOELECTOR_BATCH_RENEWALS=0: each lease renews with
 * its own command); the mode is checked against the environment, so that a row is never
 * mislabelled. GROW N acquires the missing keys on 8 threads at once (HOLDING N
 * SECONDS once all are held); a lease's loss is reported the moment its on_lost runs
 * (EVENT lost T KEY); STATS prints the counters (cumulative: the harness takes deltas). */
/* Below the client's default pool (10 connections), so that the renewer always finds
 * one while keys are being acquired. */
#define SCALE_GROW_THREADS 8
#define SCALE_GROW_ATTEMPTS 10
static struct {
  mongoelector_client *c;
  mongoelector_locker **lk;
  mongoelector_lease **le;
  mongoelector_semaphore **sm;
  mongoelector_semaphore_lease **sl;
  int next, target, failed;
  pthread_mutex_t mu;
  char error[256];
} sc = {NULL, NULL, NULL, NULL, NULL, 0, 0, 0, PTHREAD_MUTEX_INITIALIZER, ""};

#define SCALE_SEMAPHORE_LIMIT 2
static void ev_lease_lost(void *p);
/* One slot of scale-sem-I kept alive: the semaphore flavour of the loop below. */
static mongoelector_status scale_grow_slot(int i) {
  char key[64];
  mongoelector_semaphore_config cfg;
  mongoelector_acquire_options ao;
  mongoelector_status st = MONGOELECTOR_OK;
  int attempt;
  snprintf(key, sizeof key, "scale-sem-%d", i);
  mongoelector_semaphore_config_init(&cfg, MONGOELECTOR_SEMAPHORE_CONFIG_VERSION);
  cfg.limit = SCALE_SEMAPHORE_LIMIT;
  cfg.ttl_seconds = opt.ttl;
  cfg.allow_unsafe_server = opt.unsafe;
  mongoelector_acquire_options_init(&ao, MONGOELECTOR_ACQUIRE_OPTIONS_VERSION);
  ao.blocking = 0;
  for (attempt = 0; attempt < SCALE_GROW_ATTEMPTS; ++attempt) {
    if (sc.sm[i] == NULL) st = mongoelector_semaphore_new(sc.c, key, &cfg, &sc.sm[i]);
    if (sc.sm[i] != NULL)
      st = mongoelector_semaphore_lease_acquire(sc.sm[i], &ao, ev_lease_lost, (void *)(intptr_t)i,
                                                &sc.sl[i]);
    if (st == MONGOELECTOR_OK) break;
    fprintf(stderr, "bench_contender: %s: attempt %d: %s\n", key, attempt + 1,
            mongoelector_last_error());
    if (attempt + 1 < SCALE_GROW_ATTEMPTS) sleep_s(0.5);
  }
  return st;
}

static void ev_lease_lost(void *p) { say("EVENT lost %.6f scale-%ld", mono(), (long)(intptr_t)p); }

static void *scale_grow(void *unused) {
  (void)unused;
  for (;;) {
    int i;
    char key[64];
    mongoelector_lease_options lo;
    mongoelector_locker_options o;
    mongoelector_locker *l = NULL;
    mongoelector_status st;
    int attempt;
    pthread_mutex_lock(&sc.mu);
    i = sc.failed ? sc.target : sc.next;
    if (i < sc.target) ++sc.next;
    pthread_mutex_unlock(&sc.mu);
    if (i >= sc.target) return NULL;
    if (strcmp(opt.kind, "semaphore") == 0) {
      st = scale_grow_slot(i);
      if (st == MONGOELECTOR_OK) continue;
      pthread_mutex_lock(&sc.mu);
      if (!sc.failed)
        snprintf(sc.error, sizeof sc.error, "semaphore_lease_acquire scale-sem-%d: %s", i,
                 mongoelector_last_error());
      sc.failed = 1;
      pthread_mutex_unlock(&sc.mu);
      return NULL;
    }
    snprintf(key, sizeof key, "scale-%d", i);
    mongoelector_locker_options_init(&o);
    o.ttl_seconds = opt.ttl;
    o.allow_unsafe_server = opt.unsafe;
    mongoelector_lease_options_init(&lo);
    lo.blocking = 0;
    lo.on_lost = ev_lease_lost;
    lo.user_data = (void *)(intptr_t)i;
    /* A transient failure (e.g. a call that timed out while the server was busy) is
     * retried. Only this process uses these keys: a key found held after a failed
     * attempt was taken by that attempt (it reached the server), so it is freed first. */
    st = MONGOELECTOR_ERR_UNAVAILABLE;
    for (attempt = 0; attempt < SCALE_GROW_ATTEMPTS; ++attempt) {
      if (l == NULL) st = mongoelector_locker_new(sc.c, key, &o, &l);
      if (l != NULL) st = mongoelector_lease_acquire(l, &lo, &sc.le[i]);
      if (st == MONGOELECTOR_OK || (st == MONGOELECTOR_ERR_LOCK_EXISTS && attempt == 0)) break;
      if (l != NULL && st == MONGOELECTOR_ERR_LOCK_EXISTS) {
        fprintf(stderr, "bench_contender: %s: held after a failed attempt: freeing it\n", key);
        if (mongoelector_locker_release(l, 1) == MONGOELECTOR_OK) continue;
      }
      fprintf(stderr, "bench_contender: %s: attempt %d: %s\n", key, attempt + 1,
              mongoelector_last_error());
      if (attempt + 1 < SCALE_GROW_ATTEMPTS) sleep_s(0.5);
    }
    if (st != MONGOELECTOR_OK) {
      pthread_mutex_lock(&sc.mu);
      if (!sc.failed)
        snprintf(sc.error, sizeof sc.error, "lease_acquire %s: %s", key, mongoelector_last_error());
      sc.failed = 1;
      pthread_mutex_unlock(&sc.mu);
      return NULL;
    }
    sc.lk[i] = l;
  }
}

static void cmd_scale(void) {
  const char *env = getenv("MONGOELECTOR_BATCH_RENEWALS");
  int per_key_env = env != NULL && strcmp(env, "0") == 0;
  int held = 0, i;
  char line[128];
  if (strcmp(opt.mode, "batched") != 0 && strcmp(opt.mode, "per-key") != 0) {
    say("ERROR unknown --mode %s (batched or per-key)", opt.mode);
    _exit(1);
  }
  if (strcmp(opt.kind, "lock") != 0 && strcmp(opt.kind, "semaphore") != 0) {
    say("ERROR unknown --kind %s (lock or semaphore)", opt.kind);
    _exit(1);
  }
  if (per_key_env != (strcmp(opt.mode, "per-key") == 0)) {
    say("ERROR --mode %s but MONGOELECTOR_BATCH_RENEWALS=%s", opt.mode, env ? env : "(unset)");
    _exit(1);
  }
  sc.c = client_new(opt.uri);
  say("READY");
  while (fgets(line, sizeof line, stdin) != NULL) {
    if (strncmp(line, "GROW ", 5) == 0) {
      int target = atoi(line + 5), t, nt;
      pthread_t th[SCALE_GROW_THREADS];
      double t0 = mono();
      if (target > held) {
        sc.lk = realloc(sc.lk, (size_t)target * sizeof *sc.lk);
        sc.le = realloc(sc.le, (size_t)target * sizeof *sc.le);
        sc.sm = realloc(sc.sm, (size_t)target * sizeof *sc.sm);
        sc.sl = realloc(sc.sl, (size_t)target * sizeof *sc.sl);
        if (sc.lk == NULL || sc.le == NULL || sc.sm == NULL || sc.sl == NULL) die("out of memory");
        for (t = held; t < target; ++t) sc.sm[t] = NULL;
        sc.next = held;
        sc.target = target;
        nt = target - held < SCALE_GROW_THREADS ? target - held : SCALE_GROW_THREADS;
        for (t = 0; t < nt; ++t)
          if (pthread_create(&th[t], NULL, scale_grow, NULL) != 0) die("pthread_create");
        for (t = 0; t < nt; ++t) pthread_join(th[t], NULL);
        if (sc.failed) {
          say("ERROR %s", sc.error);
          _exit(1);
        }
        held = target;
      }
      say("HOLDING %d %.3f", held, mono() - t0);
    } else if (strncmp(line, "STATS", 5) == 0) {
      int lost_n = 0, lost;
      mongoelector_stats st;
      memset(&st, 0, sizeof st);
      st.version = MONGOELECTOR_STATS_VERSION;
      CHECK(mongoelector_stats_get(&st), "stats_get");
      for (i = 0; i < held; ++i) {
        mongoelector_status ls = strcmp(opt.kind, "semaphore") == 0
                                     ? mongoelector_semaphore_lease_lost(sc.sl[i], &lost)
                                     : mongoelector_lease_lost(sc.le[i], &lost);
        if (ls == MONGOELECTOR_OK && lost) ++lost_n;
      }
      say("RESULT "
          "{\"phase\":\"scale\",\"kind\":\"%s\",\"mode\":\"%s\",\"held\":%d,\"lost\":%d,"
          "\"threads\":%ld,"
          "\"rss_kib\":%ld,\"cpu_s\":%.4f,\"renewals\":%llu,\"renewal_failures\":%llu,"
          "\"round_trips\":%llu}",
          opt.kind, opt.mode, held, lost_n, proc_status("Threads"), proc_status("VmRSS"),
          cpu_seconds(), (unsigned long long)st.renewals, (unsigned long long)st.renewal_failures,
          (unsigned long long)st.round_trips);
    } else if (strncmp(line, "QUIT", 4) == 0) {
      break;
    }
  }
  _exit(0);
}

/* ---- probe -------------------------------------------------------------------------- */
static void cmd_probe(void) {
  mongoelector_client *c = client_new(opt.uri);
  mongoelector_locker *l = locker_new(c, "probe", 30, -1, NULL);
  const char *name = "?", *version = "?";
  CHECK(mongoelector_locker_acquire(l, 0, -1, 0.25, 0, NULL), "acquire");
  release(l);
  CHECK(mongoelector_client_server_info(c, &name, &version), "server_info");
  say("RESULT {\"phase\":\"probe\",\"version\":\"%s\",\"server\":\"%s %s\"}",
      mongoelector_version(), name, version);
  mongoelector_locker_free(l);
  mongoelector_client_free(c);
}

int main(int argc, char **argv) {
  int i;
  if (argc < 2) {
    fprintf(stderr,
            "usage: bench_contender probe|ops|cycles|elect|contend|cost|scale --uri URI "
            "--db NAME [options] (see contender.py)\n");
    return 2;
  }
  opt.cmd = argv[1];
  for (i = 2; i < argc; ++i) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--unsafe") == 0) {
      opt.unsafe = 1;
      continue;
    }
    if (v == NULL) {
      fprintf(stderr, "bench_contender: %s needs a value\n", a);
      return 2;
    }
    ++i;
    if (strcmp(a, "--uri") == 0)
      opt.uri = v;
    else if (strcmp(a, "--other-uri") == 0)
      opt.other_uri = v;
    else if (strcmp(a, "--db") == 0)
      opt.db = v;
    else if (strcmp(a, "--keys") == 0)
      opt.keys = v;
    else if (strcmp(a, "--key") == 0)
      opt.key = v;
    else if (strcmp(a, "--clients") == 0)
      opt.clients = v;
    else if (strcmp(a, "--mode") == 0)
      opt.mode = v;
    else if (strcmp(a, "--kind") == 0)
      opt.kind = v;
    else if (strcmp(a, "--n") == 0)
      opt.n = atoi(v);
    else if (strcmp(a, "--threads") == 0)
      opt.threads = atoi(v);
    else if (strcmp(a, "--warmup") == 0)
      opt.warmup = atoi(v);
    else if (strcmp(a, "--rounds") == 0)
      opt.rounds = atoi(v);
    else if (strcmp(a, "--seconds") == 0)
      opt.seconds = atof(v);
    else if (strcmp(a, "--ttl") == 0)
      opt.ttl = atof(v);
    else if (strcmp(a, "--step") == 0)
      opt.step = atof(v);
    else if (strcmp(a, "--idle") == 0)
      opt.idle = atof(v);
    else if (strcmp(a, "--impl") == 0 || strcmp(a, "--spin") == 0 || strcmp(a, "--spin-ttl") == 0) {
      /* contender.py's options without a meaning here */
    } else {
      fprintf(stderr, "bench_contender: unknown option %s\n", a);
      return 2;
    }
  }
  if (opt.uri == NULL || opt.db == NULL || opt.n < 1 || opt.threads < 1) {
    fprintf(stderr, "bench_contender: --uri and --db are required\n");
    return 2;
  }
  if (strcmp(opt.cmd, "probe") == 0)
    cmd_probe();
  else if (strcmp(opt.cmd, "ops") == 0)
    cmd_ops();
  else if (strcmp(opt.cmd, "cycles") == 0)
    cmd_cycles();
  else if (strcmp(opt.cmd, "elect") == 0)
    cmd_elect();
  else if (strcmp(opt.cmd, "contend") == 0)
    cmd_contend();
  else if (strcmp(opt.cmd, "cost") == 0)
    cmd_cost();
  else if (strcmp(opt.cmd, "scale") == 0)
    cmd_scale();
  else {
    fprintf(stderr, "bench_contender: unknown subcommand %s\n", opt.cmd);
    return 2;
  }
  return 0;
}
