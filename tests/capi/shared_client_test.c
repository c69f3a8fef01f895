/* One client, many lockers, and fork(), through the C API against a real server
 * (MONGOELECTOR_TEST_URI; exit 77 without it):
 *   - 200 lockers on one client hold 200 keys without adding a thread or a pool each;
 *   - freeing the client before its lockers is safe: they keep working;
 *   - after fork(), a child's new locker has its own owner id (ids come from the kernel,
 *     not from a generator state copied by fork), cannot renew or release the parent's
 *     lock, and the parent's locker refuses to run in the child with a clear error,
 *     while the parent keeps its lock. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mongoelector.h"

static int g_failures = 0;

#define CHECK(cond)                                                                               \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      fprintf(stderr, "%s:%d: [pid %ld] CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__, \
              (long)getpid(), #cond, mongoelector_last_error());                                  \
      ++g_failures;                                                                               \
    }                                                                                             \
  } while (0)
#define CHECK_OK(call) CHECK((call) == MONGOELECTOR_OK)

static int thread_count(void) {
  int n = 0;
  DIR *d = opendir("/proc/self/task");
  struct dirent *e;
  if (d == NULL) return -1;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n;
}

static mongoelector_locker *new_locker(mongoelector_client *client, const char *key) {
  mongoelector_locker_options o;
  mongoelector_locker *lk = NULL;
  mongoelector_locker_options_init(&o);
  o.ttl_seconds = 15;
  o.timeparanoid = 0;
  o.allow_unsafe_server = 1; /* FerretDB too: no contention here, only ownership */
  CHECK_OK(mongoelector_locker_new(client, key, &o, &lk));
  return lk;
}

static void test_many_lockers(const char *uri, const char *db) {
  enum { N = 200 };
  static mongoelector_locker *lockers[N];
  mongoelector_client *client = NULL;
  int i, before, after, renewed = 0, all_renewed = 1;
  char key[64];

  CHECK_OK(mongoelector_client_new(uri, db, &client));
  lockers[0] = new_locker(client, "many-0");
  CHECK_OK(mongoelector_locker_acquire(lockers[0], 0, -1, 0.25, 0, NULL));
  before = thread_count(); /* the pool and its monitor exist now */
  for (i = 1; i < N; ++i) {
    sprintf(key, "many-%d", i);
    lockers[i] = new_locker(client, key);
    CHECK_OK(mongoelector_locker_acquire(lockers[i], 0, -1, 0.25, 0, NULL));
  }
  after = thread_count();
  printf("shared_client_test: threads with 1 locker: %d, with %d lockers: %d\n", before, N, after);
  CHECK(after - before <= 2);

  /* The client goes first; its lockers keep the connections alive. */
  mongoelector_client_free(client);
  for (i = 0; i < N; ++i) {
    CHECK_OK(mongoelector_locker_touch(lockers[i], &renewed, NULL));
    all_renewed &= renewed;
  }
  CHECK(all_renewed);
  for (i = 0; i < N; ++i) {
    CHECK_OK(mongoelector_locker_release(lockers[i], 0));
    mongoelector_locker_free(lockers[i]);
  }
}

/* In the child: returns the number of failed checks as the exit status. */
static int child_after_fork(mongoelector_client *client, mongoelector_locker *parents,
                            const char *parent_uuid, int report_fd) {
  mongoelector_locker *mine = new_locker(client, "forked");
  const char *uuid = NULL;
  int owned = -1, renewed = -1;
  mongoelector_status st;

  CHECK_OK(mongoelector_locker_uuid(mine, &uuid));
  CHECK(uuid != NULL && strcmp(uuid, parent_uuid) != 0);
  if (uuid != NULL && write(report_fd, uuid, strlen(uuid) + 1) < 0) ++g_failures;
  /* Fresh connections work in the child; the lock is the parent's. */
  CHECK_OK(mongoelector_locker_owned(mine, &owned));
  CHECK(owned == 0);
  CHECK(mongoelector_locker_acquire(mine, 0, -1, 0.25, 0, NULL) == MONGOELECTOR_ERR_LOCK_EXISTS);
  CHECK_OK(mongoelector_locker_touch(mine, &renewed, NULL));
  CHECK(renewed == 0);
  CHECK_OK(mongoelector_locker_release(mine, 0)); /* not ours: nothing happens */
  mongoelector_locker_free(mine);

  /* The parent's locker refuses to run here, saying why. */
  st = mongoelector_locker_touch(parents, &renewed, NULL);
  CHECK(st == MONGOELECTOR_ERR_INVALID_ARGUMENT);
  CHECK(strstr(mongoelector_last_error(), "fork") != NULL);
  st = mongoelector_locker_release(parents, 0);
  CHECK(st == MONGOELECTOR_ERR_INVALID_ARGUMENT);
  return g_failures;
}

static void test_fork(const char *uri, const char *db) {
  mongoelector_client *client = NULL;
  mongoelector_locker *parents;
  mongoelector_locker *after;
  const char *parent_uuid = NULL;
  const char *after_uuid = NULL;
  char child_uuid[64] = {0};
  int fds[2], status = 0, owned = 0, renewed = 0;
  int64_t fence = 0;
  pid_t pid;

  CHECK_OK(mongoelector_client_new(uri, db, &client));
  parents = new_locker(client, "forked"); /* makes ids and connections before the fork */
  CHECK_OK(mongoelector_locker_acquire(parents, 0, -1, 0.25, 0, &fence));
  CHECK_OK(mongoelector_locker_uuid(parents, &parent_uuid));
  CHECK(pipe(fds) == 0);
  fflush(stdout);
  pid = fork();
  if (pid == 0) {
    close(fds[0]);
    _exit(child_after_fork(client, parents, parent_uuid, fds[1]) > 0 ? 1 : 0);
  }
  close(fds[1]);
  CHECK(pid > 0);
  if (read(fds[0], child_uuid, sizeof child_uuid - 1) < 0) ++g_failures;
  close(fds[0]);
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  /* Both processes made a locker after the fork: their ids differ. */
  after = new_locker(client, "forked-after");
  CHECK_OK(mongoelector_locker_uuid(after, &after_uuid));
  CHECK(strlen(child_uuid) == 36 && strcmp(after_uuid, child_uuid) != 0);
  printf("shared_client_test: uuids parent %s, parent after fork %s, child %s\n", parent_uuid,
         after_uuid, child_uuid);
  mongoelector_locker_free(after);

  /* The parent still holds its lock, untouched by the child. */
  CHECK_OK(mongoelector_locker_owned(parents, &owned));
  CHECK(owned == 1);
  CHECK_OK(mongoelector_locker_touch(parents, &renewed, NULL));
  CHECK(renewed == 1);
  CHECK_OK(mongoelector_locker_release(parents, 0));
  mongoelector_locker_free(parents);
  mongoelector_client_free(client);
}

int main(void) {
  const char *uri = getenv("MONGOELECTOR_TEST_URI");
  char db[64];
  if (uri == NULL || *uri == '\0') {
    printf("shared_client_test: MONGOELECTOR_TEST_URI is not set: skipped\n");
    return 77;
  }
  sprintf(db, "shared_client_%ld_%ld", (long)getpid(), (long)time(NULL) % 100000);
  test_many_lockers(uri, db);
  test_fork(uri, db);
  printf("shared_client_test: %s (%d failed checks)\n", g_failures ? "FAILED" : "passed",
         g_failures);
  return g_failures ? 1 : 0;
}
