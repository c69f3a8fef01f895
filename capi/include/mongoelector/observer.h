/*
 * mongoelector/observer.h: leader observers: who leads an elector key, seen from outside.
 *
 * Part of the C API of libmongoelector: programs include <mongoelector.h>, which
 * includes this file; the conventions of every function are stated there.
 */
#ifndef MONGOELECTOR_OBSERVER_H
#define MONGOELECTOR_OBSERVER_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Leader observer (since 1.1) --------------------------------------------------- */

/* Watches an elector key from outside the election (any process, no elector needed) and
 * reports who leads it: every change of leader, and "no leader" (the lock absent,
 * released or expired on the server's clock) as a change of its own, so that a client
 * never keeps talking to a leader that is gone. It polls the key's lock document in
 * "elector.locks" (one read per interval, never a write). A change is a different
 * status or a different (uuid, fence) (the leader's, or a pending hand-over's target's):
 * a hand-over (transfer) always shows; a leader that resigns and wins again between two
 * polls shows as no change. The first poll always reports the current state.
 * A leader is named only while its lease surely runs: its end (expire_ms) is compared
 * with the latest the server's clock can read on the observer's estimate (estimate plus
 * its uncertainty), so the named leader never outlives its lease under any clock error
 * the estimate allows. While reads fail, the state turns MONGOELECTOR_LEADER_UNKNOWN at
 * the instant that lease ends (no read needed). After a transfer the observer reports
 * MONGOELECTOR_LEADER_PENDING (has_leader 0, the target in handover_*) until the target
 * has taken the hand-over with its own renewal (its mongoelector_elector_is_leader turns 1
 * then), and only then the target as leader; a target that never takes it stays pending
 * until the hand-over's expiry, then nobody leads. */
typedef struct mongoelector_observer mongoelector_observer;

/* Who leads a key, as an observer saw it. Filled by the library: in a callback `version`
 * is the library's MONGOELECTOR_LEADER_STATE_VERSION (fields are only ever appended, so
 * a program reads the fields it knows); for mongoelector_observer_read the caller sets
 * it and the fields of that version are written. Strings are never NULL ("" without a
 * leader) and belong to the library (see each function for how long they live). */
#define MONGOELECTOR_LEADER_STATE_VERSION 3
/* Since 1.1 (mongoelector_leader_state version 2): what the observer can tell (the
 * numbers are stable). */
typedef enum mongoelector_leader_status {
  MONGOELECTOR_LEADER_NONE = 0,  /* nobody leads: the lock is absent, released or expired */
  MONGOELECTOR_LEADER_LEADS = 1, /* `uuid` leads (has_leader 1) */
  /* A hand-over to handover_uuid is written and the target has not taken it yet: nobody
   * leads (the old leader stepped down before writing it). */
  MONGOELECTOR_LEADER_PENDING = 2,
  /* The reads fail and the lease last seen has ended on the observer's estimate of the
   * server's clock: it cannot tell who leads. */
  MONGOELECTOR_LEADER_UNKNOWN = 3
} mongoelector_leader_status;
typedef struct mongoelector_leader_state {
  uint32_t version;
  int has_leader;         /* 1: `uuid` leads; 0: nobody leads (the fields below are 0/"") */
  const char *uuid;       /* the leader's uuid (mongoelector_elector_uuid of that node) */
  const char *host;       /* the leader's host name */
  int64_t pid;            /* the leader's process id on that host */
  int64_t fence;          /* the fencing token of the leader's term */
  int64_t server_time_ms; /* when it was observed: the server's clock (estimate), ms */
  /* Version 2. */
  int status; /* a mongoelector_leader_status */
  /* Server time (ms) at which the lease ends unless renewed: LEADS the leader's, PENDING
   * the hand-over's (the lock frees then if the target never takes it), UNKNOWN the one
   * that ended unseen; 0 for NONE. */
  int64_t expire_ms;
  const char *handover_uuid; /* PENDING: the member the lock is handed to; "" otherwise */
  const char *handover_host; /* PENDING: its host name; "" otherwise */
  int64_t handover_pid;      /* PENDING: its process id; 0 otherwise */
  int64_t handover_fence;    /* PENDING: the token it will lead with; 0 otherwise */
  /* Version 3 (since 1.1). LEADS: the leader's payload (mongoelector_elector_set_payload),
   * JSON object text read with its term; "" when it has none or nobody leads. A change
   * of payload is a change (on_change is called). */
  const char *payload_json;
} mongoelector_leader_state;

/* Called on the observer's own thread (one per observer) with the new state, which is
 * valid only during the call (copy what you keep). Calls of one observer never overlap
 * and come in the order of the changes. The callback may call into the library,
 * mongoelector_observer_free of this observer included; it should return soon: the
 * next poll waits for it. */
typedef void (*mongoelector_leader_change_fn)(const mongoelector_leader_state *state,
                                              void *user_data);

#define MONGOELECTOR_OBSERVER_CONFIG_VERSION 1
typedef struct mongoelector_observer_config {
  uint32_t version;        /* the version passed to mongoelector_observer_config_init */
  double interval_seconds; /* default 1: between polls; finite, > 0 and at most 1e6 */
  /* Time bound of one read. 0 (default): as for an elector of the default ttl (1.5 s);
   * else finite and > 0. */
  double op_timeout_seconds;
} mongoelector_observer_config;

/* Sets version and defaults (version: 1 .. MONGOELECTOR_OBSERVER_CONFIG_VERSION).
 * INVALID_ARGUMENT for another version or NULL. Any thread. */
MONGOELECTOR_API mongoelector_status
mongoelector_observer_config_init(mongoelector_observer_config *config, uint32_t version);
/* Creates an observer of the elector key `key` over `client`'s connections (config
 * NULL: defaults). With on_change (may be NULL: then only mongoelector_observer_read
 * works) the observer's thread starts now and calls on_change(state, user_data) with the
 * current state at its first poll, then at each change. A poll that fails (server
 * unreachable) is logged as a warning and retried at the next interval; it reports
 * nothing, except MONGOELECTOR_LEADER_UNKNOWN once the lease last seen has ended (a "no
 * leader" comes only from an answer). No round trip here.
 * INVALID_ARGUMENT: NULL client or out, a NULL, empty or invalid key, a bad config.
 * *out is owned by the caller: mongoelector_observer_free(), before or after the
 * client. Any thread. An observer inherited across fork() must not be used nor freed in
 * the child (its thread does not exist there). */
MONGOELECTOR_API mongoelector_status mongoelector_observer_new(
    mongoelector_client *client, const char *key, const mongoelector_observer_config *config,
    mongoelector_leader_change_fn on_change, void *user_data, mongoelector_observer **out);
/* The state now: one read of the lock document (and a server-clock sample when the last
 * one is stale); never MONGOELECTOR_LEADER_UNKNOWN (a failed read is an error). Does not
 * call on_change nor change what it compares with. Set out->version first (1 to 3: the
 * fields of that version are written). The strings written live until the next mongoelector_observer_read
 * on the calling thread (or its exit). UNAVAILABLE/SERVER when the server did not answer.
 * Any thread, concurrently with the observer's thread and with other reads. */
MONGOELECTOR_API mongoelector_status mongoelector_observer_read(mongoelector_observer *observer,
                                                                mongoelector_leader_state *out);
/* Stops the observer's thread and frees it. NULL ok. From any other thread it waits for
 * a running on_change to return: once it returns, on_change is never called again and
 * user_data may be freed. From inside this observer's own on_change it returns at once;
 * no call starts after it (user_data may be freed once the callback returns) and the
 * thread ends on another library thread shortly after. Freeing ANOTHER observer from a
 * callback waits for that one's running callback: two observers must not free each
 * other from their callbacks. */
MONGOELECTOR_API void mongoelector_observer_free(mongoelector_observer *observer);

#ifdef __cplusplus
}
#endif

#endif /* MONGOELECTOR_OBSERVER_H */
