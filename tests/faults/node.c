/*
 * Native node of the fault suite (tests/faults/README.md), over the public C API only.
 *
 *   fault_node elect URI NAME TTL LOG STORE_DIR KEY
 *       Runs an elector on KEY. Logs (JSON lines, CLOCK_MONOTONIC seconds) every
 *       leadership interval it believed in: "begin" (from on_leader or the first
 *       is_leader() that said yes) and "end" with last_true (the last is_leader() that said
 *       yes), first_false and the on_leader_loss time. While leading it writes a record
 *       every 50 ms to the fenced file store (store.c): accepted only if its token is >=
 *       the highest the store has seen. SIGUSR1: release leadership now (elector_release).
 *       SIGTERM/SIGINT: stop cleanly.
 *   fault_node forkcheck URI KEY TTL
 *       A process holding a lock forks; parent and child each make a new client and
 *       locker. Prints one JSON line: the child's and parent's owner ids and whether the
 *       child could see, renew or release the parent's lock. Exit 0 = safe.
 *   fault_node skewcheck URI KEY MAX_OFFSET
 *       One timeparanoid acquire (run it under faketime). Prints one JSON line with the
 *       status name and the measured offset.
 */
#define _GNU_SOURCE
#include <mongoelector.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store.h"

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s) {
  struct timespec ts;
  ts.tv_sec = (time_t)s;
  ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ------------------------------------------------------------------ elect ---- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static FILE *logf;
static const char *name;
static mongoelector_elector *elector;
static fault_store store;
static volatile sig_atomic_t stop_requested, release_requested;

/* Interval state, under mu. */
static int leading;
static int64_t cur_fence;
static double last_true, loss_cb_at, next_write;
static long seq;

static void logline(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logline(const char *fmt, ...) {
  va_list ap;
  fprintf(logf, "{\"t\":%.6f,\"node\":\"%s\",\"pid\":%ld,", mono(), name, (long)getpid());
  va_start(ap, fmt);
  vfprintf(logf, fmt, ap);
  va_end(ap);
  fputs("}\n", logf);
  fflush(logf);
}

/* Under mu. */
static void write_record(void) {
  double t;
  int accepted = fault_store_write(&store, name, cur_fence, ++seq, &t);
  (void)accepted;
  (void)t;
  next_write = mono() + 0.05;
}

/* Under mu: a yes from is_leader() (or on_leader) with this fence. */
static void saw_leader(int64_t fence, const char *src) {
  double now = mono();
  if (leading && fence != cur_fence && fence != 0) {
    logline(
        "\"ev\":\"end\",\"fence\":%lld,\"last_true\":%.6f,\"first_false\":%.6f,"
        "\"loss_cb\":null,\"why\":\"new-term\"",
        (long long)cur_fence, last_true, now);
    leading = 0;
  }
  if (!leading) {
    if (fence == 0) return; /* lost again in between */
    leading = 1;
    cur_fence = fence;
    loss_cb_at = 0;
    logline("\"ev\":\"begin\",\"fence\":%lld,\"src\":\"%s\"", (long long)fence, src);
    write_record(); /* first thing a new leader does: raise the store's fence */
  }
  last_true = now;
}

/* Under mu: a no from is_leader(). */
static void saw_follower(const char *why) {
  if (!leading) return;
  double now = mono();
  if (loss_cb_at > 0)
    logline(
        "\"ev\":\"end\",\"fence\":%lld,\"last_true\":%.6f,\"first_false\":%.6f,"
        "\"loss_cb\":%.6f,\"why\":\"%s\"",
        (long long)cur_fence, last_true, now, loss_cb_at, why);
  else
    logline(
        "\"ev\":\"end\",\"fence\":%lld,\"last_true\":%.6f,\"first_false\":%.6f,"
        "\"loss_cb\":null,\"why\":\"%s\"",
        (long long)cur_fence, last_true, now, why);
  leading = 0;
}

static void on_leader(void *ud) {
  (void)ud;
  int64_t fence = 0;
  int is = 0;
  pthread_mutex_lock(&mu);
  mongoelector_elector_is_leader(elector, &is);
  mongoelector_elector_fence(elector, &fence);
  if (is && fence)
    saw_leader(fence, "on_leader");
  else
    logline("\"ev\":\"on_leader_stale\",\"fence\":%lld", (long long)fence);
  pthread_mutex_unlock(&mu);
}

static void on_leader_loss(void *ud) {
  (void)ud;
  pthread_mutex_lock(&mu);
  double now = mono();
  logline("\"ev\":\"loss_cb\",\"leading\":%d", leading);
  if (leading) loss_cb_at = now;
  pthread_mutex_unlock(&mu);
}

static void on_signal(int sig) {
  if (sig == SIGUSR1)
    release_requested = 1;
  else
    stop_requested = 1;
}

static void log_cb(mongoelector_log_level level, const char *msg, void *ud) {
  (void)ud;
  if (level < MONGOELECTOR_LOG_INFO) return;
  pthread_mutex_lock(&mu);
  fprintf(logf, "{\"t\":%.6f,\"node\":\"%s\",\"pid\":%ld,\"ev\":\"lib\",\"level\":%d,\"msg\":\"",
          mono(), name, (long)getpid(), (int)level);
  for (const char *p = msg; *p; p++) {
    if (*p == '"' || *p == '\\') fputc('\\', logf);
    fputc((unsigned char)*p < 0x20 ? ' ' : *p, logf);
  }
  fputs("\"}\n", logf);
  fflush(logf);
  pthread_mutex_unlock(&mu);
}

static int run_elect(int argc, char **argv) {
  if (argc != 8) {
    fprintf(stderr, "usage: %s elect URI NAME TTL LOG STORE_DIR KEY\n", argv[0]);
    return 2;
  }
  const char *uri = argv[2];
  name = argv[3];
  double ttl = atof(argv[4]);
  logf = fopen(argv[5], "a");
  if (!logf || fault_store_open(&store, argv[6]) != 0) {
    perror("open log/store");
    return 1;
  }
  const char *key = argv[7];
  mongoelector_set_log_callback(log_cb, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGUSR1, &sa, NULL);
  mongoelector_client *client = NULL;
  mongoelector_elector_options o;
  mongoelector_elector_options_init(&o);
  o.ttl_seconds = ttl;
  o.on_leader = on_leader;
  o.on_leader_loss = on_leader_loss;
  o.app_version = "fault-suite";
  /* Like a robust application, retry until the elector can be made (its constructor does
   * a round trip, which fails while the server is unreachable). */
  for (;;) {
    if (mongoelector_client_new(uri, "faults", &client) == MONGOELECTOR_OK &&
        mongoelector_elector_new(client, key, &o, &elector) == MONGOELECTOR_OK)
      break;
    pthread_mutex_lock(&mu);
    logline("\"ev\":\"error\",\"msg\":\"%s\"", mongoelector_last_error());
    pthread_mutex_unlock(&mu);
    mongoelector_client_free(client);
    client = NULL;
    if (stop_requested) return 1;
    sleep_s(0.2);
  }
  const char *uuid = "";
  mongoelector_elector_uuid(elector, &uuid);
  pthread_mutex_lock(&mu);
  logline("\"ev\":\"start\",\"kind\":\"c\",\"uuid\":\"%s\",\"ttl\":%g", uuid, ttl);
  pthread_mutex_unlock(&mu);
  if (mongoelector_elector_start(elector) != MONGOELECTOR_OK) {
    pthread_mutex_lock(&mu);
    logline("\"ev\":\"error\",\"msg\":\"%s\"", mongoelector_last_error());
    pthread_mutex_unlock(&mu);
    return 1;
  }
  while (!stop_requested) {
    if (release_requested) {
      release_requested = 0;
      pthread_mutex_lock(&mu);
      logline("\"ev\":\"release_call\"");
      pthread_mutex_unlock(&mu);
      mongoelector_status st = mongoelector_elector_release(elector);
      pthread_mutex_lock(&mu);
      logline("\"ev\":\"release_done\",\"status\":\"%s\"", mongoelector_status_name(st));
      pthread_mutex_unlock(&mu);
    }
    int is = 0;
    int64_t fence = 0;
    pthread_mutex_lock(&mu);
    mongoelector_elector_is_leader(elector, &is);
    if (is) mongoelector_elector_fence(elector, &fence);
    if (is && fence) {
      saw_leader(fence, "is_leader");
      if (mono() >= next_write) {
        /* Check again right before the write: act only on a current belief. */
        mongoelector_elector_is_leader(elector, &is);
        if (is) {
          last_true = mono();
          write_record();
        } else {
          saw_follower("is_leader");
        }
      }
    } else {
      saw_follower("is_leader");
    }
    pthread_mutex_unlock(&mu);
    sleep_s(0.005);
  }
  pthread_mutex_lock(&mu);
  saw_follower("exit");
  logline("\"ev\":\"exit\"");
  pthread_mutex_unlock(&mu);
  mongoelector_elector_free(elector);
  mongoelector_client_free(client);
  return 0;
}

/* -------------------------------------------------------------- forkcheck ---- */

static int new_locker(const char *uri, const char *key, double ttl, mongoelector_client **c,
                      mongoelector_locker **l) {
  mongoelector_locker_options o;
  mongoelector_locker_options_init(&o);
  o.ttl_seconds = ttl;
  o.collection = "forklocks";
  if (mongoelector_client_new(uri, "faults", c) != MONGOELECTOR_OK) return -1;
  if (mongoelector_locker_new(*c, key, &o, l) != MONGOELECTOR_OK) return -1;
  return 0;
}

static int run_forkcheck(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s forkcheck URI KEY TTL\n", argv[0]);
    return 2;
  }
  const char *uri = argv[2], *key = argv[3];
  double ttl = atof(argv[4]);
  mongoelector_client *pc = NULL;
  mongoelector_locker *pl = NULL;
  int64_t fence = 0, fence_after = 0;
  if (new_locker(uri, key, ttl, &pc, &pl) != 0 ||
      mongoelector_locker_acquire(pl, 1, 5.0, 0.05, 0, &fence) != MONGOELECTOR_OK) {
    printf("{\"error\":\"parent acquire: %s\"}\n", mongoelector_last_error());
    return 1;
  }
  const char *puuid = "";
  mongoelector_locker_uuid(pl, &puuid);
  int fds[2];
  if (pipe(fds) != 0) return 1;
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    /* Child: a new client and locker, as a pre-fork worker would make. */
    mongoelector_client *cc = NULL;
    mongoelector_locker *cl = NULL;
    char out[512];
    if (new_locker(uri, key, ttl, &cc, &cl) != 0) {
      snprintf(out, sizeof out, "ERR %s", mongoelector_last_error());
    } else {
      const char *cu = "";
      int owned = -1, renewed = -1;
      mongoelector_locker_uuid(cl, &cu);
      mongoelector_locker_owned(cl, &owned);
      mongoelector_locker_touch(cl, &renewed, NULL);
      mongoelector_status rs = mongoelector_locker_release(cl, 0);
      snprintf(out, sizeof out, "%s %d %d %s", cu, owned, renewed, mongoelector_status_name(rs));
    }
    if (write(fds[1], out, strlen(out) + 1) < 0) _exit(3);
    _exit(0);
  }
  close(fds[1]);
  char buf[512] = {0};
  ssize_t n = read(fds[0], buf, sizeof buf - 1);
  int status = 0;
  waitpid(child, &status, 0);
  if (n <= 0 || strncmp(buf, "ERR", 3) == 0) {
    printf("{\"error\":\"child: %s\"}\n", n > 0 ? buf : "no answer");
    return 1;
  }
  char cu[128] = {0}, rs[64] = {0};
  int owned = -1, renewed = -1;
  sscanf(buf, "%127s %d %d %63s", cu, &owned, &renewed, rs);
  /* Parent: a new locker after the fork must differ too; the old hold must be intact. */
  mongoelector_client *pc2 = NULL;
  mongoelector_locker *pl2 = NULL;
  const char *puuid2 = "";
  int still_owned = -1;
  if (new_locker(uri, key, ttl, &pc2, &pl2) == 0) mongoelector_locker_uuid(pl2, &puuid2);
  mongoelector_locker_owned(pl, &still_owned);
  mongoelector_locker_fence(pl, &fence_after);
  mongoelector_lock_info info;
  int found = 0;
  mongoelector_locker_current(pl, &info, &found);
  int held_by_parent = found && strcmp(info.uuid, puuid) == 0 && info.fence == fence;
  int safe = strcmp(cu, puuid) != 0 && strcmp(cu, puuid2) != 0 && owned == 0 && renewed == 0 &&
             held_by_parent && still_owned == 1;
  printf(
      "{\"parent_uuid\":\"%s\",\"parent_new_uuid\":\"%s\",\"child_uuid\":\"%s\","
      "\"child_owned\":%d,\"child_renewed\":%d,\"child_release\":\"%s\","
      "\"parent_still_holds\":%d,\"safe\":%s}\n",
      puuid, puuid2, cu, owned, renewed, rs, held_by_parent && still_owned == 1,
      safe ? "true" : "false");
  mongoelector_locker_release(pl, 0);
  mongoelector_locker_free(pl2);
  mongoelector_client_free(pc2);
  mongoelector_locker_free(pl);
  mongoelector_client_free(pc);
  return safe ? 0 : 1;
}

/* -------------------------------------------------------------- skewcheck ---- */

static int run_skewcheck(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s skewcheck URI KEY MAX_OFFSET\n", argv[0]);
    return 2;
  }
  mongoelector_client *c = NULL;
  mongoelector_locker *l = NULL;
  mongoelector_locker_options o;
  mongoelector_locker_options_init(&o);
  o.ttl_seconds = 5;
  o.collection = "skewlocks";
  o.timeparanoid = 1;
  o.max_offset_seconds = atof(argv[4]);
  if (mongoelector_client_new(argv[2], "faults", &c) != MONGOELECTOR_OK ||
      mongoelector_locker_new(c, argv[3], &o, &l) != MONGOELECTOR_OK) {
    printf("{\"status\":\"SETUP\",\"error\":\"%s\"}\n", mongoelector_last_error());
    return 1;
  }
  double offset = 0;
  mongoelector_locker_verify_time(l, &offset);
  int64_t fence = 0;
  mongoelector_status st = mongoelector_locker_acquire(l, 0, -1, 0.1, 0, &fence);
  printf("{\"status\":\"%s\",\"offset\":%.3f,\"fence\":%lld}\n", mongoelector_status_name(st),
         offset, (long long)fence);
  if (st == MONGOELECTOR_OK) mongoelector_locker_release(l, 0);
  mongoelector_locker_free(l);
  mongoelector_client_free(c);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "elect") == 0) return run_elect(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "forkcheck") == 0) return run_forkcheck(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "skewcheck") == 0) return run_skewcheck(argc, argv);
  fprintf(stderr, "usage: %s elect|forkcheck|skewcheck ...\n", argv[0]);
  return 2;
}
