/*
 * mongoelector/partitioner.h: the fenced partitioner: a group's N partitions shared by its
 * live members, each owned through a keep-alive lease with its own fencing token.
 *
 * Part of the C API of libmongoelector: programs include <mongoelector.h>, which
 * includes this file; the conventions of every function are stated there.
 */
#ifndef MONGOELECTOR_PARTITIONER_H
#define MONGOELECTOR_PARTITIONER_H

#include "client.h"
#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Partitioner (since 1.1) --------------------------------------------------------- */

/* A member of a partitioned group (docs/partitioner.md). Every member of `group` runs
 * with the same number of partitions; each partition is owned by the member that
 * rendezvous hashing picks among the LIVE members, through a keep-alive lease on the
 * partition's lock "<group>/<p>" whose fencing token strictly increases per partition
 * (pass it to the resource, which refuses tokens below the highest it saw). When a
 * member joins, leaves or dies only the partitions concerned move: a graceful move (a
 * member joined or left) runs the old owner's on_revoked(p) to completion, and releases
 * the partition only then, so the new owner's on_assigned(p, token) comes after it; a
 * dead member's partitions move when their leases expire, about one ttl after its death.
 *
 * The member loop runs on its own native thread (one per partitioner) and polls every
 * poll_seconds: it writes this member's report, reads the group's (two round trips when
 * nothing moves), revokes what is no longer its own and claims what is. Renewals go
 * through the library's renewer thread, in one batch per client.
 *
 * Callbacks run on one of the library's callback threads (a few per process, shared
 * with leases and electors), never on the member loop, the renewer or the deadline
 * timer, and never while a library lock is held. ONE AT A TIME per partitioner, in the
 * order the loop decided them: per partition always on_assigned(p, token) first, then
 * on_revoked(p), alternating. A slow callback delays this partitioner's next callbacks,
 * never a renewal or a loss; a lease is kept renewed while its on_revoked runs. They may
 * call into the library, this partitioner's stop and free included (see there). A
 * partition whose lease is LOST (its member cut off from the database past its renew
 * deadline) is revoked too, but another member may take it while that on_revoked still
 * runs: fence the writes. user_data is the configuration's user_data. */
typedef struct mongoelector_partitioner mongoelector_partitioner;
typedef void (*mongoelector_partition_assigned_fn)(int64_t partition, int64_t token,
                                                   void *user_data);
typedef void (*mongoelector_partition_revoked_fn)(int64_t partition, void *user_data);

/* The most partitions a group may have. */
#define MONGOELECTOR_PARTITIONS_MAX 100000

#define MONGOELECTOR_PARTITIONER_CONFIG_VERSION 1
typedef struct mongoelector_partitioner_config {
  uint32_t version;    /* the version passed to mongoelector_partitioner_config_init */
  int64_t partitions;  /* required: 1..MONGOELECTOR_PARTITIONS_MAX (init sets 0, refused) */
  double ttl_seconds;  /* default 15: a lease's (and a member report's) life unrenewed */
  double poll_seconds; /* default 0: ttl/3; else in (0, ttl/2] */
  const char *locks_collection;   /* NULL: "partitioner.locks" (fences in "<it>.fences"); copied */
  const char *members_collection; /* NULL: "partitioner.members"; copied */
  mongoelector_partition_assigned_fn on_assigned; /* NULL: none */
  mongoelector_partition_revoked_fn on_revoked;   /* NULL: none */
  void *user_data;                                /* passed to both callbacks */
  double op_timeout_seconds;                      /* default 0: ttl/10 in [0.1 s, 5 s] */
} mongoelector_partitioner_config;

/* Sets version and defaults (version: 1 .. MONGOELECTOR_PARTITIONER_CONFIG_VERSION). */
MONGOELECTOR_API mongoelector_status
mongoelector_partitioner_config_init(mongoelector_partitioner_config *config, uint32_t version);

/* A member of `group` over `client`'s connections. `config` is required (partitions has
 * no default). INVALID_ARGUMENT, naming the field, for partitions out of range, a ttl,
 * poll or collection that is not usable, or the same collection for locks and members.
 * Makes the collections' indexes (round trips on MongoDB); does not join.
 * *out: mongoelector_partitioner_free(). */
MONGOELECTOR_API mongoelector_status mongoelector_partitioner_new(
    mongoelector_client *client, const char *group, const mongoelector_partitioner_config *config,
    mongoelector_partitioner **out);
/* Joins the group: one read of the members' reports first, then the member loop starts
 * on its own thread. INVALID_ARGUMENT (nothing written) when the group's key holds
 * another kind of document or a live member runs with another number of partitions.
 * No-op while running. */
MONGOELECTOR_API mongoelector_status mongoelector_partitioner_start(mongoelector_partitioner *p);
/* Leaves the group: the member's report says so at once (the others take over),
 * on_revoked runs for every partition held and each is released (fenced) once it has
 * returned. Waits for all of it; from one of this partitioner's callbacks it only asks
 * (the loop leaves once the callback has returned). The partitioner may be started
 * again. */
MONGOELECTOR_API mongoelector_status mongoelector_partitioner_stop(mongoelector_partitioner *p);
/* Stops (as mongoelector_partitioner_stop) and frees. NULL ok. Any thread, also one of
 * this partitioner's own callbacks: the call then returns at once, no callback of this
 * partitioner starts after it (so user_data may be freed once the calling callback
 * returns), and the leave and the free happen on another library thread shortly after. */
MONGOELECTOR_API void mongoelector_partitioner_free(mongoelector_partitioner *p);

/* A partition this member owns and its fencing token. */
typedef struct mongoelector_partition_token {
  int64_t partition;
  int64_t token;
} mongoelector_partition_token;

/* The partitions this member owns now, in increasing order, with their tokens: a
 * malloc'd array of *count_out entries in *owned_out (NULL when 0), released with
 * mongoelector_free(). Owned means: its lease is not lost (read from its renew deadline
 * and the monotonic clock) and no release of it is under way. Local state, never a
 * round trip; any thread, callbacks included. */
MONGOELECTOR_API mongoelector_status mongoelector_partitioner_owned(
    mongoelector_partitioner *p, mongoelector_partition_token **owned_out, size_t *count_out);
/* *token_out = the fencing token of `partition` while this member owns it, else 0.
 * INVALID_ARGUMENT for a partition outside 0..partitions-1. Local, any thread. */
MONGOELECTOR_API mongoelector_status mongoelector_partitioner_token(mongoelector_partitioner *p,
                                                                    int64_t partition,
                                                                    int64_t *token_out);
/* This member's uuid, the owner named in the partitions' lock documents; owned by the
 * handle. */
MONGOELECTOR_API mongoelector_status mongoelector_partitioner_uuid(mongoelector_partitioner *p,
                                                                   const char **out);
/* *out = 1 while the member loop runs (start until stop). */
MONGOELECTOR_API mongoelector_status mongoelector_partitioner_running(mongoelector_partitioner *p,
                                                                      int *out);

/* The group's assignment as its documents show it now, as one JSON object (plain JSON:
 * instants are integers, ms since the epoch on the server's clock):
 *   {"group": "...", "partitions": N, "server_time_ms": ms, "settled": bool,
 *    "members": [{"uuid", "host", "pid", "live": bool, "running": bool,
 *                 "expire_ms": ms | null, "owned": n, "assigned": n}, ...],
 *    "owners": [{"partition": p, "key": "<group>/<p>", "owner": uuid | null,
 *                "host": str | null, "pid": n | null, "token": n (0: never held),
 *                "expire_ms": ms | null, "assigned": uuid | null,
 *                "conflict": str | null}, ...],
 *    "conflicts": [{"message": str}, ...]}
 * members: every report of the group (live or not; live members decide the assignment);
 * owners: one per partition, in order (owner: the holder while held; assigned: the
 * member rendezvous hashing gives it; conflict: another kind of document at its key);
 * conflicts: reports that cannot be the group's; settled: every partition held by the
 * member it is assigned to. One read of the reports and one per partition.
 * *json_out: mongoelector_free(). */
MONGOELECTOR_API mongoelector_status mongoelector_partitioner_status(mongoelector_partitioner *p,
                                                                     char **json_out);
/* The same object for `group`, read without joining (nothing written, nothing created).
 * partitions: 0 to take the number from the live members' reports (INVALID_ARGUMENT
 * when none is live, or they disagree); locks_collection and members_collection: NULL
 * for the defaults. Any thread. */
MONGOELECTOR_API mongoelector_status mongoelector_client_partition_status(
    mongoelector_client *client, const char *group, int64_t partitions,
    const char *locks_collection, const char *members_collection, char **json_out);

#ifdef __cplusplus
}
#endif

#endif /* MONGOELECTOR_PARTITIONER_H */
