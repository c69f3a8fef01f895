/*
 * payload_test: the leader payload from C (mongoelector_elector_config.payload_json,
 * mongoelector_elector_set_payload, mongoelector_leader_state.payload_json, the cluster
 * detail's leader.payload), on every backend: the public header and the shared library
 * only, -std=c99 -pedantic -Werror.
 *
 * Usage: payload_test [--offline]
 *   --offline   argument checks, then the scenario on memory:// and on an SQLite file.
 *   (default)   the scenario against the server at MONGOELECTOR_TEST_URI (exit 77
 *               without it; skipped on FerretDB, where electors are refused).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK_PROGRAM "payload_test"
#include "check.h"
#include "mongoelector.h"

static void unique_key(char *out, size_t n, const char *prefix) {
  static int counter = 0;
  snprintf(out, n, "%s-%ld-%d-%d", prefix, (long)getpid(), (int)time(NULL), ++counter);
}

static mongoelector_elector *new_elector(mongoelector_client *client, const char *key,
                                         const char *payload, mongoelector_status expect) {
  mongoelector_elector_config cfg;
  mongoelector_elector *e = NULL;
  CHECK_OK(mongoelector_elector_config_init(&cfg, MONGOELECTOR_ELECTOR_CONFIG_VERSION));
  CHECK(cfg.payload_json == NULL);
  cfg.ttl_seconds = 10;
  cfg.payload_json = payload;
  CHECK_STATUS(mongoelector_elector_new_with(client, key, &cfg, &e), expect);
  return e;
}

/* Polls until `e` leads (deadline 10 s). */
static void lead(mongoelector_elector *e) {
  int leader = 0;
  double until = now_s() + 10;
  while (!leader && now_s() < until) {
    CHECK_OK(mongoelector_elector_poll(e));
    CHECK_OK(mongoelector_elector_is_leader(e, &leader));
    if (!leader) sleep_s(0.05);
  }
  CHECK(leader);
}

static void check_observed(mongoelector_observer *o, const char *payload) {
  mongoelector_leader_state s;
  memset(&s, 0, sizeof s);
  s.version = MONGOELECTOR_LEADER_STATE_VERSION;
  CHECK_OK(mongoelector_observer_read(o, &s));
  CHECK(s.has_leader);
  CHECK(s.payload_json != NULL);
  if (strcmp(s.payload_json, payload) != 0) {
    fprintf(stderr, "observed payload %s, expected %s\n", s.payload_json, payload);
    CHECK(0);
  }
  /* A version-2 reader gets its fields, and nothing is written past them. */
  {
    struct {
      mongoelector_leader_state s;
    } v2;
    memset(&v2, 0, sizeof v2);
    v2.s.version = 2;
    v2.s.payload_json = "untouched";
    CHECK_OK(mongoelector_observer_read(o, &v2.s));
    CHECK(strcmp(v2.s.payload_json, "untouched") == 0);
  }
}

static void run_backend(mongoelector_client *client, const char *what) {
  char key[128];
  char *text = NULL;
  int written = -1;
  mongoelector_elector *a, *b;
  mongoelector_observer *o = NULL;
  unique_key(key, sizeof key, "payload");
  printf("  %s: a new term carries its leader's payload; set_payload; observers; detail\n", what);
  a = new_elector(client, key, "{\"endpoint\": \"10.0.0.1:8080\"}", MONGOELECTOR_OK);
  CHECK_OK(mongoelector_observer_new(client, key, NULL, NULL, NULL, &o));
  lead(a);
  check_observed(o, "{\"endpoint\": \"10.0.0.1:8080\"}");
  CHECK_OK(mongoelector_elector_payload(a, &text));
  CHECK(text != NULL && strcmp(text, "{\"endpoint\": \"10.0.0.1:8080\"}") == 0);
  mongoelector_free(text);

  /* Bad payloads: refused before any write, the published one stays. */
  CHECK_INVALID(mongoelector_elector_set_payload(a, "[1, 2]", &written));
  CHECK(strstr(mongoelector_last_error(), "payload") != NULL);
  CHECK_INVALID(mongoelector_elector_set_payload(a, "{\"a\": ", &written));
  check_observed(o, "{\"endpoint\": \"10.0.0.1:8080\"}");

  CHECK_OK(
      mongoelector_elector_set_payload(a, "{\"endpoint\": \"10.0.0.1:9090\", \"v\": 2}", &written));
  CHECK(written == 1);
  check_observed(o, "{\"endpoint\": \"10.0.0.1:9090\", \"v\": 2}");
  CHECK_OK(mongoelector_client_cluster_detail(client, key, &text));
  CHECK(strstr(text, "\"payload\" : { \"endpoint\" : \"10.0.0.1:9090\"") != NULL);
  mongoelector_free(text);

  /* The next leader's term starts with its own payload. */
  b = new_elector(client, key, "{\"endpoint\": \"10.0.0.2:8080\"}", MONGOELECTOR_OK);
  CHECK_OK(mongoelector_elector_poll(b));
  CHECK_OK(mongoelector_elector_set_payload(b, "{\"endpoint\": \"10.0.0.2:7070\"}", &written));
  CHECK(written == 0); /* not leading: kept for its claim */
  CHECK_OK(mongoelector_elector_release(a));
  lead(b);
  check_observed(o, "{\"endpoint\": \"10.0.0.2:7070\"}");

  /* None: cleared (NULL), and an observer then reports "". */
  CHECK_OK(mongoelector_elector_set_payload(b, NULL, &written));
  CHECK(written == 1);
  {
    mongoelector_leader_state s;
    memset(&s, 0, sizeof s);
    s.version = MONGOELECTOR_LEADER_STATE_VERSION;
    CHECK_OK(mongoelector_observer_read(o, &s));
    CHECK(s.has_leader && strcmp(s.payload_json, "") == 0);
  }
  CHECK_OK(mongoelector_elector_payload(b, &text));
  CHECK(text == NULL);
  mongoelector_observer_free(o);
  mongoelector_elector_free(b);
  mongoelector_elector_free(a);
}

static void test_arguments(mongoelector_client *client) {
  char big[MONGOELECTOR_PAYLOAD_MAX_BYTES + 64];
  size_t n;
  printf("  arguments: not an object, too large, NULL elector\n");
  new_elector(client, "payload-args", "42", MONGOELECTOR_ERR_INVALID_ARGUMENT);
  CHECK(strstr(mongoelector_last_error(), "42") != NULL);
  new_elector(client, "payload-args", "{\"x\": 1} trailing", MONGOELECTOR_ERR_INVALID_ARGUMENT);
  strcpy(big, "{\"a\": \"");
  n = strlen(big);
  memset(big + n, 'x', MONGOELECTOR_PAYLOAD_MAX_BYTES);
  strcpy(big + n + MONGOELECTOR_PAYLOAD_MAX_BYTES, "\"}");
  new_elector(client, "payload-args", big, MONGOELECTOR_ERR_INVALID_ARGUMENT);
  CHECK(strstr(mongoelector_last_error(), "16384") != NULL);
  CHECK_INVALID(mongoelector_elector_set_payload(NULL, "{}", NULL));
}

int main(int argc, char **argv) {
  int offline = argc > 1 && strcmp(argv[1], "--offline") == 0;
  const char *uri = getenv("MONGOELECTOR_TEST_URI");
  char path[256], name[128], mem[160];
  char *server = NULL, *version = NULL;
  mongoelector_client *client = NULL;

  if (offline) {
    unique_key(name, sizeof name, "payload");
    snprintf(mem, sizeof mem, "memory://%s", name);
    CHECK_OK(mongoelector_client_new(mem, "", &client));
    test_arguments(client);
    run_backend(client, "memory://");
    mongoelector_client_free(client);
    snprintf(path, sizeof path, "sqlite://%s/payload-%ld.db",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid());
    CHECK_OK(mongoelector_client_new(path, "", &client));
    run_backend(client, "sqlite");
    mongoelector_client_free(client);
    unlink(path + strlen("sqlite://"));
    printf("payload_test: %d passed, 0 failed\n", g_passed);
    return 0;
  }
  if (uri == NULL || uri[0] == '\0') {
    printf("payload_test: MONGOELECTOR_TEST_URI is not set: skipped\n");
    return 77;
  }
  CHECK_OK(mongoelector_client_new(uri, "payload_test", &client));
  CHECK_OK(mongoelector_client_server_info_copy(client, &server, &version));
  printf("payload_test on %s %s\n", server, version);
  if (strcmp(server, "FerretDB") == 0) {
    printf("payload_test: electors are refused on FerretDB: skipped\n");
    return 77;
  }
  run_backend(client, "server");
  mongoelector_free(server);
  mongoelector_free(version);
  mongoelector_client_free(client);
  printf("payload_test: %d passed, 0 failed\n", g_passed);
  return 0;
}
