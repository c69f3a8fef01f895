/*
 * Test helper of tests/cli/run.sh: a member of a partition group. Joins GROUP with
 * PARTITIONS partitions, prints its uuid, then "owns N" each time the number of
 * partitions it owns changes, until SIGTERM: then it leaves the group (its partitions are
 * released) and exits 0. Public header and libmongoelector only.
 *
 *   partition_member URI DATABASE GROUP PARTITIONS TTL_SECONDS
 */
#define _POSIX_C_SOURCE 200809L
#include <mongoelector.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile sig_atomic_t g_stop = 0;
static void on_term(int sig) {
  (void)sig;
  g_stop = 1;
}

int main(int argc, char **argv) {
  mongoelector_client *client = NULL;
  mongoelector_partitioner *member = NULL;
  mongoelector_partitioner_config cfg;
  const char *uuid = NULL;
  long last = -1;
  struct timespec tick = {0, 20 * 1000 * 1000};
  if (argc != 6) {
    fprintf(stderr, "usage: %s URI DATABASE GROUP PARTITIONS TTL_SECONDS\n", argv[0]);
    return 2;
  }
  signal(SIGTERM, on_term);
  mongoelector_partitioner_config_init(&cfg, MONGOELECTOR_PARTITIONER_CONFIG_VERSION);
  cfg.partitions = atoll(argv[4]);
  cfg.ttl_seconds = atof(argv[5]);
  if (mongoelector_client_new(argv[1], argv[2], &client) != MONGOELECTOR_OK ||
      mongoelector_partitioner_new(client, argv[3], &cfg, &member) != MONGOELECTOR_OK ||
      mongoelector_partitioner_uuid(member, &uuid) != MONGOELECTOR_OK ||
      mongoelector_partitioner_start(member) != MONGOELECTOR_OK) {
    fprintf(stderr, "partition_member: %s\n", mongoelector_last_error());
    return 1;
  }
  printf("uuid %s\n", uuid);
  fflush(stdout);
  while (!g_stop) {
    mongoelector_partition_token *owned = NULL;
    size_t n = 0;
    if (mongoelector_partitioner_owned(member, &owned, &n) == MONGOELECTOR_OK) {
      mongoelector_free(owned);
      if ((long)n != last) {
        last = (long)n;
        printf("owns %ld\n", last);
        fflush(stdout);
      }
    }
    nanosleep(&tick, NULL);
  }
  mongoelector_partitioner_free(member); /* leaves: releases its partitions */
  mongoelector_client_free(client);
  return 0;
}
