/*
 * priority_test: priority leaders from C (mongoelector_elector_config version 4:
 * has_priority, priority, priority_stability_seconds) on memory://: the defaults, a
 * version 3 config still accepted, refusals that name the field, and a leader of lower
 * priority handing over to a running member of higher priority. The public header and
 * the shared library only, -std=c99 -pedantic -Werror.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK_PROGRAM "priority_test"
#include "check.h"
#include "mongoelector.h"

static mongoelector_elector *new_elector(mongoelector_client *client, uint32_t version,
                                         int has_priority, double priority, double stability,
                                         mongoelector_status expect) {
  mongoelector_elector_config cfg;
  mongoelector_elector *e = NULL;
  CHECK_OK(mongoelector_elector_config_init(&cfg, version));
  cfg.ttl_seconds = 2;
  if (version >= 4) {
    cfg.has_priority = has_priority;
    cfg.priority = priority;
    cfg.priority_stability_seconds = stability;
  }
  CHECK_STATUS(mongoelector_elector_new_with(client, "prio", &cfg, &e), expect);
  return e;
}

static int leads(mongoelector_elector *e) {
  int leader = 0;
  CHECK_OK(mongoelector_elector_is_leader(e, &leader));
  return leader;
}

int main(void) {
  mongoelector_client *client = NULL;
  mongoelector_elector_config cfg;
  mongoelector_elector *a, *b;
  char mem[96];
  double until;

  snprintf(mem, sizeof mem, "memory://priority-%ld", (long)getpid());
  CHECK_OK(mongoelector_client_new(mem, "", &client));
  CHECK_OK(mongoelector_elector_config_init(&cfg, 4));
  CHECK(cfg.has_priority == 0 && cfg.priority == 0 && cfg.priority_stability_seconds == -1);
  mongoelector_elector_free(new_elector(client, 3, 0, 0, 0, MONGOELECTOR_OK));

  printf("  refusals name the field\n");
  new_elector(client, 4, 1, NAN, -1, MONGOELECTOR_ERR_INVALID_ARGUMENT);
  CHECK(strstr(mongoelector_last_error(), "priority must be a finite number") != NULL);
  new_elector(client, 4, 1, 1, -2, MONGOELECTOR_ERR_INVALID_ARGUMENT);
  CHECK(strstr(mongoelector_last_error(), "priority_stability") != NULL);
  new_elector(client, 4, 1, 1, NAN, MONGOELECTOR_ERR_INVALID_ARGUMENT);
  CHECK(strstr(mongoelector_last_error(), "priority_stability") != NULL);
  /* Off: whatever the other fields say. */
  mongoelector_elector_free(new_elector(client, 4, 0, NAN, -2, MONGOELECTOR_OK));

  printf("  a lower leader hands over to a running higher member\n");
  a = new_elector(client, 4, 1, 1, 0, MONGOELECTOR_OK);
  b = new_elector(client, 4, 1, 5, 0, MONGOELECTOR_OK);
  CHECK_OK(mongoelector_elector_start(a));
  until = now_s() + 10;
  while (!leads(a) && now_s() < until) sleep_s(0.05);
  CHECK(leads(a));
  CHECK_OK(mongoelector_elector_start(b));
  until = now_s() + 15;
  while (!leads(b) && now_s() < until) sleep_s(0.05);
  CHECK(leads(b) && !leads(a));
  mongoelector_elector_free(a);
  mongoelector_elector_free(b);
  mongoelector_client_free(client);
  printf("priority_test: %d passed, 0 failed\n", g_passed);
  return 0;
}
