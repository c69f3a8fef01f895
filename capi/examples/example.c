/* libmongoelector example: a lock acquired with a timeout, a write guarded by the
 * fencing token, and a leader elector with callbacks.
 *
 *   cc -std=c11 example.c $(pkg-config --cflags --libs mongoelector) -o example
 *   ./example mongodb://127.0.0.1:27017/
 *
 * tests/consumer/run.sh builds and runs it against an installed library.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */

#include <mongoelector.h>

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Reports a failure with what the server said about it (code, name, labels), so that,
 * say, an authentication failure (18) can be told from a transient one. */
static int fail(const char *what, mongoelector_status st) {
  mongoelector_error_info info;
  info.version = MONGOELECTOR_ERROR_INFO_VERSION;
  fprintf(stderr, "%s: %s: %s\n", what, mongoelector_status_name(st), mongoelector_last_error());
  if (mongoelector_last_error_info(&info) == MONGOELECTOR_OK && info.code != 0)
    fprintf(stderr, "  server error %d (%s)%s\n", (int)info.code, info.code_name,
            mongoelector_last_error_has_label("RetryableWriteError") ? ", retryable" : "");
  return 1;
}

/* A resource that refuses writes from superseded lock holders. In a real system this
 * check lives in the resource itself, e.g. a MongoDB update filtered on
 * {fence: {$lte: token}} or a SQL "WHERE fence <= ?". */
struct fenced_store {
  int64_t highest_fence;
  char value[64];
};

static int store_write(struct fenced_store *s, int64_t fence, const char *value) {
  if (fence < s->highest_fence) return 0; /* a newer holder wrote already: refuse */
  s->highest_fence = fence;
  snprintf(s->value, sizeof s->value, "%s", value);
  return 1;
}

static int lock_example(mongoelector_client *client) {
  mongoelector_locker_config config;
  mongoelector_locker_config_init(&config, MONGOELECTOR_LOCKER_CONFIG_VERSION);
  config.ttl_seconds = 30; /* the lease: a crashed holder's lock frees itself after 30 s */

  mongoelector_locker *locker = NULL;
  mongoelector_status st = mongoelector_locker_new_with(client, "example-report", &config, &locker);
  if (st != MONGOELECTOR_OK) return fail("locker_new_with", st);

  /* Wait at most 10 s. options.cancel may carry a mongoelector_cancel_token that another
   * thread cancels (per call: a late cancel never affects a later acquire). */
  mongoelector_acquire_options options;
  mongoelector_acquire_options_init(&options, MONGOELECTOR_ACQUIRE_OPTIONS_VERSION);
  options.timeout_seconds = 10;
  int64_t fence = 0;
  st = mongoelector_locker_acquire_with(locker, &options, &fence);
  if (st == MONGOELECTOR_ERR_TIMEOUT) {
    mongoelector_lock_details holder;
    int found = 0;
    holder.version = MONGOELECTOR_LOCK_DETAILS_VERSION;
    if (mongoelector_locker_current_details(locker, &holder, &found) == MONGOELECTOR_OK && found) {
      printf("lock busy: held by %s pid %" PRId64 "\n", holder.host, holder.pid);
      mongoelector_lock_details_clear(&holder);
    }
    mongoelector_locker_free(locker);
    return 1;
  }
  if (st != MONGOELECTOR_OK) {
    mongoelector_locker_free(locker);
    return fail("acquire", st);
  }
  printf("lock acquired, fencing token %" PRId64 "\n", fence);

  struct fenced_store store = {0, ""};
  printf("write with our token: %s\n",
         store_write(&store, fence, "report v2") ? "accepted" : "refused");
  /* A holder that paused past its lease and was superseded carries a smaller token: */
  printf("write with a stale token: %s\n",
         store_write(&store, fence - 1, "stale") ? "accepted" : "refused");

  st = mongoelector_locker_release(locker, 0);
  mongoelector_locker_free(locker);
  return st == MONGOELECTOR_OK ? 0 : fail("release", st);
}

/* Callbacks run on the elector's thread: keep them short and thread-safe. */
static atomic_int became_leader;
static void on_leader(void *user_data) {
  printf("[%s] I am the leader now\n", (const char *)user_data);
  atomic_store(&became_leader, 1);
}
static void on_leader_loss(void *user_data) {
  printf("[%s] leadership lost\n", (const char *)user_data);
}

static int elector_example(mongoelector_client *client) {
  mongoelector_elector_config config;
  mongoelector_elector_config_init(&config, MONGOELECTOR_ELECTOR_CONFIG_VERSION);
  config.ttl_seconds = 5; /* a dead leader is replaced after about 5 s */
  config.on_leader = on_leader;
  config.on_leader_loss = on_leader_loss;
  config.user_data = (void *)"example-node";
  /* config.delete_on_release is on by default: a stopping leader deletes its lock
   * document, so nodes of the original mongoelector take over at once. */

  mongoelector_elector *elector = NULL;
  mongoelector_status st =
      mongoelector_elector_new_with(client, "example-cluster", &config, &elector);
  if (st != MONGOELECTOR_OK) return fail("elector_new_with", st);
  if ((st = mongoelector_elector_start(elector)) != MONGOELECTOR_OK) {
    mongoelector_elector_free(elector);
    return fail("elector_start", st);
  }
  for (int i = 0; i < 100 && !atomic_load(&became_leader); i++) {
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  int leader = 0;
  int64_t fence = 0;
  mongoelector_elector_is_leader(elector, &leader);
  mongoelector_elector_fence(elector, &fence);
  printf("leader: %s, token %" PRId64 "\n", leader ? "yes" : "no", fence);

  char *json = NULL;
  if (mongoelector_elector_cluster_detail(elector, &json) == MONGOELECTOR_OK) {
    printf("cluster: %.200s%s\n", json, strlen(json) > 200 ? "..." : "");
    mongoelector_free(json);
  }
  mongoelector_elector_free(elector); /* stops, releases leadership (on_leader_loss fires) */
  return leader ? 0 : 1;
}

int main(int argc, char **argv) {
  const char *uri = argc > 1 ? argv[1] : "mongodb://127.0.0.1:27017/";
  printf("libmongoelector %s\n", mongoelector_version());
  mongoelector_client *client = NULL;
  mongoelector_status st = mongoelector_client_new(uri, "mongoelector_example", &client);
  if (st != MONGOELECTOR_OK) return fail("client_new", st);
  int rc = lock_example(client);
  if (rc == 0) rc = elector_example(client);
  mongoelector_client_free(client); /* after every locker and elector made from it */
  return rc;
}
