/*
 * One node of the quick-start demo: runs an elector for "demo-service" and prints what
 * happens to it. The demo script starts three of these, kills the leader with SIGKILL
 * and shows another node taking over.
 *
 *   demo_node URI NAME TTL_SECONDS
 */
#define _POSIX_C_SOURCE 200809L
#include <mongoelector.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static const char *node_name = "?";
static mongoelector_elector *elector = NULL;
static volatile sig_atomic_t stop_requested = 0;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_leader(void *user_data) {
  int64_t fence = 0;
  (void)user_data;
  mongoelector_elector_fence(elector, &fence);
  printf("%.3f %s LEADER fence=%lld\n", now_s(), node_name, (long long)fence);
  fflush(stdout);
}

static void on_leader_loss(void *user_data) {
  (void)user_data;
  printf("%.3f %s LOST-LEADERSHIP\n", now_s(), node_name);
  fflush(stdout);
}

static void on_signal(int sig) {
  (void)sig;
  stop_requested = 1;
}

int main(int argc, char **argv) {
  mongoelector_client *client = NULL;
  mongoelector_elector_options options;
  if (argc != 4) {
    fprintf(stderr, "usage: %s URI NAME TTL_SECONDS\n", argv[0]);
    return 2;
  }
  node_name = argv[2];
  if (mongoelector_client_new(argv[1], "demo", &client) != MONGOELECTOR_OK) {
    fprintf(stderr, "%s: %s\n", node_name, mongoelector_last_error());
    return 1;
  }
  mongoelector_elector_options_init(&options);
  options.ttl_seconds = atof(argv[3]);
  options.on_leader = on_leader;
  options.on_leader_loss = on_leader_loss;
  options.app_version = "demo";
  if (mongoelector_elector_new(client, "demo-service", &options, &elector) != MONGOELECTOR_OK ||
      mongoelector_elector_start(elector) != MONGOELECTOR_OK) {
    fprintf(stderr, "%s: %s\n", node_name, mongoelector_last_error());
    mongoelector_elector_free(elector);
    mongoelector_client_free(client);
    return 1;
  }
  printf("%.3f %s FOLLOWING (pid %ld)\n", now_s(), node_name, (long)getpid());
  fflush(stdout);
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);
  while (!stop_requested) sleep(1);
  mongoelector_elector_free(elector); /* stops, releases leadership */
  mongoelector_client_free(client);
  return 0;
}
