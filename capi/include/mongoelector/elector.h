/*
 * mongoelector/elector.h: electors: leader election on a key, graceful handover.
 *
 * Part of the C API of libmongoelector: programs include <mongoelector.h>, which
 * includes this file; the conventions of every function are stated there.
 */
#ifndef MONGOELECTOR_ELECTOR_H
#define MONGOELECTOR_ELECTOR_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Elector ----------------------------------------------------------------------- */

/* Elector callbacks run on the elector's own thread (or the thread calling
 * mongoelector_elector_poll/release/stop), except on_leader_loss at a missed renew
 * deadline, which runs on one of the library's callback threads (a few per process,
 * shared by every elector and lease: keep it short) so that it fires on time while the
 * elector's thread hangs in I/O; leadership itself (mongoelector_elector_is_leader) ends
 * at the deadline whatever any callback does. Never while a library lock is held: they may call
 * mongoelector_elector_stop() or _release() on the same elector, but must not free it.
 * allow_unsafe_server is refused for electors (MONGOELECTOR_ERR_INVALID_ARGUMENT): on a
 * server whose findAndModify is not atomic, two nodes could lead with one token.
 * user_data is the configuration's user_data. */
typedef void (*mongoelector_callback_fn)(void *user_data);

/* Since 1.1: an elector's configuration, grown by appending fields. Defaults (shared by
 * every binding, Python's MongoLeaderElector included): ttl 15 s, report_status on,
 * delete_on_release ON (a leader that stops deletes its lock document, so nodes of the
 * original mongoelector 1.0.2 take over at once during a rolling upgrade; the next
 * leader of ours pays two extra round trips), per-call timeout as for lockers, followers
 * peek every ttl/4 while a leader exists (version 2). Callbacks: see
 * mongoelector_callback_fn. Version 1 is the struct up to op_timeout_seconds; a
 * program compiled against it keeps working (the fields it lacks take their defaults). */
#define MONGOELECTOR_ELECTOR_CONFIG_VERSION 4
typedef struct mongoelector_elector_config {
  uint32_t version;   /* as passed to mongoelector_elector_config_init */
  double ttl_seconds; /* > 0 and finite */
  int report_status;
  const char *app_version;                 /* NULL: none; copied */
  mongoelector_callback_fn on_leader;      /* NULL: none */
  mongoelector_callback_fn on_leader_loss; /* NULL: none */
  mongoelector_callback_fn on_loop;        /* NULL: none; after each poll */
  void *user_data;                         /* passed to the three callbacks */
  int delete_on_release;
  double op_timeout_seconds; /* as in mongoelector_locker_config */
  /* Version 2. While another node leads, a follower reads the lock document every this
   * many seconds (one read, no write), so that a resign or transfer elsewhere is noticed
   * within about that (README, "Graceful handover"). < 0: ttl/4 (the default, -1);
   * 0: off (followers wake only when the leader's lease can expire, about a ttl);
   * else finite and at most 1e9 (INVALID_ARGUMENT otherwise). */
  double handover_poll_seconds;
  /* Version 3. The leader payload (see mongoelector_elector_set_payload): a JSON object
   * this node publishes with every term it leads, or NULL (default) for none. Copied;
   * INVALID_ARGUMENT when it is not a JSON object or above
   * MONGOELECTOR_PAYLOAD_MAX_BYTES. */
  const char *payload_json;
  /* Version 4. Priority leaders (docs/handover.md), off by default (has_priority 0): with
   * has_priority != 0 this node publishes `priority` (finite) in its status report and,
   * while leading, hands leadership over (as mongoelector_elector_transfer) to the running
   * member of highest priority strictly above its own, once that member has been seen
   * live at every poll for priority_stability_seconds. A tie never moves leadership;
   * members without a priority are never chosen; needs report_status.
   * priority_stability_seconds: -1 (the default): one ttl; else finite, in [0, 1e9].
   * INVALID_ARGUMENT, naming the field, for anything else. */
  int has_priority;
  double priority;
  double priority_stability_seconds;
} mongoelector_elector_config;

/* Since 1.1: the largest leader payload, in bytes of its JSON text. */
#define MONGOELECTOR_PAYLOAD_MAX_BYTES 16384

/* Sets version and defaults (version: 1 .. MONGOELECTOR_ELECTOR_CONFIG_VERSION). */
MONGOELECTOR_API mongoelector_status
mongoelector_elector_config_init(mongoelector_elector_config *config, uint32_t version);
/* Creates an elector for `key` with `config` (NULL: defaults); collections
 * "elector.locks" and "elector.leader_status". *out is owned by the caller:
 * mongoelector_elector_free(). */
MONGOELECTOR_API mongoelector_status mongoelector_elector_new_with(
    mongoelector_client *client, const char *key, const mongoelector_elector_config *config,
    mongoelector_elector **out);
/* Stops the elector (releasing leadership, firing on_leader_loss if it led) and frees
 * it. NULL ok. Any thread. Since 1.1 also from one of the elector's own callbacks: the
 * call returns as soon as no OTHER callback of this elector is running (one that runs
 * on another thread at that moment is waited for); no callback of this elector starts
 * after it, so user_data may be freed once the calling callback returns. The stop,
 * the release of leadership (without on_leader_loss) and the free happen on another
 * library thread shortly after. Not from a callback of ANOTHER elector whose
 * thread this elector's stop would wait for. */
MONGOELECTOR_API void mongoelector_elector_free(mongoelector_elector *elector);
/* Starts the election loop on a new native thread (no-op if running). */
MONGOELECTOR_API mongoelector_status mongoelector_elector_start(mongoelector_elector *elector);
/* Ends the loop, waits for its thread (unless called from a callback), releases
 * leadership. */
MONGOELECTOR_API mongoelector_status mongoelector_elector_stop(mongoelector_elector *elector);
/* Runs one poll cycle on the calling thread. */
MONGOELECTOR_API mongoelector_status mongoelector_elector_poll(mongoelector_elector *elector);
/* Gives up leadership now (on_leader_loss fires if it led). */
MONGOELECTOR_API mongoelector_status mongoelector_elector_release(mongoelector_elector *elector);
/* Leader now: false the moment the renew deadline passes, even if a renewal hangs. */
MONGOELECTOR_API mongoelector_status mongoelector_elector_is_leader(mongoelector_elector *elector,
                                                                    int *out);
MONGOELECTOR_API mongoelector_status
mongoelector_elector_leader_exists(mongoelector_elector *elector, int *out);
MONGOELECTOR_API mongoelector_status mongoelector_elector_running(mongoelector_elector *elector,
                                                                  int *out);
/* The original's nominal seconds between polls: ttl/2 as leader, ttl as follower (the
 * drop-in value). The loop itself renews every ttl/3 as leader, and as follower looks
 * every ttl/4 while a leader exists (handover_poll_seconds), else every ttl. */
MONGOELECTOR_API mongoelector_status mongoelector_elector_poll_wait(mongoelector_elector *elector,
                                                                    double *out);
/* Fencing token of the current leadership, 0 when not leader. */
MONGOELECTOR_API mongoelector_status mongoelector_elector_fence(mongoelector_elector *elector,
                                                                int64_t *out);
/* This node's uuid (owned by the elector). */
MONGOELECTOR_API mongoelector_status mongoelector_elector_uuid(mongoelector_elector *elector,
                                                               const char **out);
/* Node status / cluster detail as a JSON object in MongoDB's relaxed Extended JSON v2,
 * written by libbson: dates as {"$date": "2026-11-23T17:38:28.123Z"} ({"$date":
 * {"$numberLong": "<ms>"}} outside years 1970..9999), NaN and infinities as
 * {"$numberDouble": "NaN"}, other numbers plain. *json_out is owned by the caller:
 * mongoelector_free(). Node status reads local state, never a round trip (its
 * timestamp is the server-time estimate, or the host's clock before the first
 * sample); cluster detail reads the status collection (one round trip). */
MONGOELECTOR_API mongoelector_status mongoelector_elector_node_status(mongoelector_elector *elector,
                                                                      char **json_out);
MONGOELECTOR_API mongoelector_status
mongoelector_elector_cluster_detail(mongoelector_elector *elector, char **json_out);
/* Since 1.1: the cluster detail of the election `key` as mongoelector_elector_cluster_detail
 * gives it, read without joining: no elector runs, nothing is written (no index, no status
 * report) and a database or collection that does not exist is not created. MongoDB: one
 * find of the members' reports, one of the lock, plus a server-clock sample. *json_out is
 * owned by the caller: mongoelector_free(). Any thread. */
MONGOELECTOR_API mongoelector_status mongoelector_client_cluster_detail(mongoelector_client *client,
                                                                        const char *key,
                                                                        char **json_out);
/* Since 1.1. Graceful handover (README, "Graceful handover"). Both end this node's term
 * locally first (is_leader turns 0, on_leader_loss runs and returns on the calling
 * thread) and only then send the one fenced write that lets another member take over, so
 * two nodes never lead at once. While a leader exists, followers look at the lock every
 * ttl/4, so the next leader is in place within about ttl/4 plus one round trip instead
 * of about a ttl. Any thread, the elector's own callbacks included; blocking (up to two
 * round trips).
 *
 * resign: gives up leadership now (a fenced release) and keeps the loop running, but
 * does not stand for election again for hold_off_seconds (< 0: the elector's ttl), so
 * another member takes over. Not leader: only the hold-off applies. INVALID_ARGUMENT
 * for a hold-off that is NaN or above 1e9; UNAVAILABLE/SERVER when the release could not
 * be confirmed (leadership is given up anyway; the loop releases the lock later). */
MONGOELECTOR_API mongoelector_status mongoelector_elector_resign(mongoelector_elector *elector,
                                                                 double hold_off_seconds);
/* transfer: the leader hands leadership to the member whose uuid is `to_uuid`
 * (mongoelector_elector_uuid of that member); the target takes over at its next look
 * with one renewal of its own, its token one above this term's. INVALID_ARGUMENT when
 * this node is not leader (also when its lease ended before the write: nothing was
 * handed over), when to_uuid is NULL, empty or this node, or, with status reports on,
 * when no status document of that member exists. UNAVAILABLE/SERVER when the write
 * failed: leadership is given up anyway and the outcome is unknown (the loop takes the
 * lock back if it is still this node's). A target that has died costs one ttl, as a
 * crashed leader does. */
MONGOELECTOR_API mongoelector_status mongoelector_elector_transfer(mongoelector_elector *elector,
                                                                   const char *to_uuid);

/* Since 1.1. The leader payload: a small JSON object (an endpoint, a version, ...) that
 * the leader publishes with its term, shown to everyone who reads leadership (observers'
 * payload_json, "payload" of the cluster detail's leader, `mongoelector status`). The
 * claim that starts a term writes the new leader's payload in the same atomic write, so
 * a term never shows the previous leader's payload (a leader without one clears it);
 * after a transfer the target's term starts without one until its own write, one poll
 * later. Stored as given (the text), in the lock document's "payload" field.
 *
 * set_payload replaces this node's payload (json NULL: none). While leading, one write
 * that names this term (uuid and fence) and carries a version above every earlier one:
 * a write that lands late changes this term's payload only, and never back to an older
 * one. *written_out (may be NULL) is 1 when it was applied now, 0 when this node does
 * not lead (it is kept for its next claim). INVALID_ARGUMENT when json is not a JSON
 * object (UTF-8, at most MONGOELECTOR_PAYLOAD_MAX_BYTES bytes); UNAVAILABLE/SERVER when
 * the write failed (kept: the loop writes it at its next poll while it leads). Any
 * thread, the elector's callbacks included; blocking (one round trip when leading). */
MONGOELECTOR_API mongoelector_status mongoelector_elector_set_payload(mongoelector_elector *elector,
                                                                      const char *json,
                                                                      int *written_out);
/* This node's payload, as last set (NULL when none), in *json_out, owned by the caller:
 * mongoelector_free(). Local state, never a round trip. */
MONGOELECTOR_API mongoelector_status mongoelector_elector_payload(mongoelector_elector *elector,
                                                                  char **json_out);

#ifdef __cplusplus
}
#endif

#endif /* MONGOELECTOR_ELECTOR_H */
