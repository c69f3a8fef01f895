/*
 * mongoelector/testing.h: the testing kit of libmongoelector (since 1.1): a fake clock
 * and levers on the in-process memory:// backend, for the tests of programs that use
 * the library. Opt-in, not included by <mongoelector.h>:
 *
 *     #include <mongoelector.h>
 *     #include <mongoelector/testing.h>
 *
 * (It includes what it needs itself.) The functions are in libmongoelector.so like every
 * other; the conventions of <mongoelector.h> apply.
 */
#ifndef MONGOELECTOR_TESTING_H
#define MONGOELECTOR_TESTING_H

#include "client.h"
#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A fake clock for the tests of code that uses this library: no server, no sleeps, the
 * same outcome every run. Attach it to a memory:// backend (mongoelector_client_new(
 * "memory://NAME", ""): an in-process backend with the semantics of the MongoDB one,
 * shared by every client of NAME in this process) and every locker, lease, elector,
 * semaphore and observer made on that backend runs on it: leases renew, expire and are
 * declared lost, electors poll, win and step down, observers look, at the instants the
 * fake time says, on the library's own threads.
 *
 * Time moves only through mongoelector_fake_clock_advance(), which walks forward to each
 * pending deadline in turn (a renewal due, a renew deadline, an elector's next poll, a
 * retry) and at each one waits, in REAL time, until every library thread working on this
 * clock has acted and is idle again. Advancing an hour renews a lease of ttl 15 s 720
 * times, as an hour would, in milliseconds; what an election does within a ttl has been
 * done when advance(ttl) returns. The wall clock, which is also the server clock of the
 * attached backends, moves with it.
 *
 * Every wait of the library on an attached backend is in fake time too: a blocking
 * acquire's timeout and retry step, mongoelector_lease_wait_lost()'s timeout. They end
 * when advance() reaches their deadline: call them with a zero timeout, or from another
 * thread than the one that advances.
 *
 * Callbacks run on the library's threads as usual (a lease's on_lost and an elector's
 * on_leader_loss at a missed renew deadline on the clock's own callback threads), and
 * advance() waits for them to return. A
 * callback that blocks on something the advancing thread holds never becomes idle:
 * advance() then fails with MONGOELECTOR_ERR_TIMEOUT after the settle timeout instead of
 * hanging. No callback may call advance() or settle(): from a callback that advance()
 * runs on its own thread, or while another thread advances, the call is refused
 * (INVALID_ARGUMENT); otherwise, from a library thread, it waits for itself and fails
 * with MONGOELECTOR_ERR_TIMEOUT after the settle timeout.
 *
 * A test double: MongoDB and SQLite backends never run on it. */
typedef struct mongoelector_fake_clock mongoelector_fake_clock;

/* A fake clock whose wall time starts at wall_start_ms (ms since the Unix epoch, 0 ..
 * 253402300799999: up to the end of year 9999) and whose monotonic time starts at 0.
 * settle_timeout_ms bounds, in real time, how long each step of advance() and settle()
 * waits for the library's threads (<= 0: 10000; at most 3600000). INVALID_ARGUMENT for a
 * value out of range or a NULL out. *out is owned by the caller:
 * mongoelector_fake_clock_free(). Any thread; not in a child after fork() (the clock's
 * threads do not exist there). */
MONGOELECTOR_API mongoelector_status mongoelector_fake_clock_new(int64_t wall_start_ms,
                                                                 int64_t settle_timeout_ms,
                                                                 mongoelector_fake_clock **out);
/* Frees the clock and lets go of the backends attached to it. NULL ok. Objects made on
 * those backends keep the backend (and the clock) alive, but time no longer moves for
 * them: a wait of theirs in fake time would never end, so free them first. Not while
 * another thread is inside a call on this clock. From a callback that this clock's own
 * advance() or settle() runs, it is refused (logged as an error; the clock stays). */
MONGOELECTOR_API void mongoelector_fake_clock_free(mongoelector_fake_clock *clock);
/* Runs the memory:// backend `memory_uri` ("memory://NAME") on this clock from now on,
 * and keeps it alive (its locks included) while the clock lives. Attach before anything
 * opens NAME: INVALID_ARGUMENT when NAME is already in use on another clock (a client
 * opened it first: the system clock; or another fake clock), also for a NULL URI or one
 * that is not memory://NAME. Attaching a NAME to the same clock again is OK. Any thread. */
MONGOELECTOR_API mongoelector_status mongoelector_fake_clock_attach(mongoelector_fake_clock *clock,
                                                                    const char *memory_uri);
/* Moves time forward by ms (>= 0), stopping at every pending deadline on the way, and
 * returns once the library's threads have acted on each (see above). Blocking, in real
 * time, for as long as those threads take. Not from the library's callbacks.
 * MONGOELECTOR_ERR_TIMEOUT: at some step the threads did not become idle within the
 * settle timeout (a callback blocked on the advancing thread, or calling advance() from a
 * library thread); the clock has moved by ms anyway and the library logged how many
 * threads were busy. INVALID_ARGUMENT: ms < 0, a clock that would pass the end of year
 * 9999, a call from a callback this clock's advance() or settle() is running on this
 * thread, or another thread advancing or settling this clock at the same time (one
 * thread drives a clock). */
MONGOELECTOR_API mongoelector_status mongoelector_fake_clock_advance(mongoelector_fake_clock *clock,
                                                                     int64_t ms);
/* What advance(0) does: waits until the library's threads have acted on the time it is
 * now (an elector just started has run its first poll) and runs the timer tasks already
 * due. Errors and thread rules as for mongoelector_fake_clock_advance. */
MONGOELECTOR_API mongoelector_status mongoelector_fake_clock_settle(mongoelector_fake_clock *clock);
/* *wall_ms_out = the wall clock (ms since the epoch; the attached backends' server
 * clock), *mono_ms_out = the monotonic clock (ms of fake time since the clock was made;
 * jump_wall does not move it). Either may be NULL, not both. Any thread, also while
 * another thread advances, and from callbacks. */
MONGOELECTOR_API mongoelector_status mongoelector_fake_clock_now(mongoelector_fake_clock *clock,
                                                                 int64_t *wall_ms_out,
                                                                 int64_t *mono_ms_out);
/* Steps the wall clock alone by ms (either sign), as NTP would: the attached backends'
 * server clock jumps, intervals measured on the monotonic clock do not change. The
 * library sees it at its next server-time sample (a jump: leases written on the old time
 * base are declared lost), i.e. during a later advance(). INVALID_ARGUMENT when the wall
 * clock would leave 1970 .. year 9999. Any thread. */
MONGOELECTOR_API mongoelector_status
mongoelector_fake_clock_jump_wall(mongoelector_fake_clock *clock, int64_t ms);
/* Blocks, in REAL time, until at least n threads wait on this clock (the library's own,
 * and any blocked in a call that waits in fake time), then sets *waiting_out (may be
 * NULL) to how many do. For a test whose own thread makes a blocking call (an acquire
 * with a timeout, wait_lost): read the count with n = 0 first, start the thread, then
 * wait for count + 1 before advancing past the call's deadline. real_timeout_ms < 0:
 * 10 s. MONGOELECTOR_ERR_TIMEOUT when fewer wait after it. Any thread. */
MONGOELECTOR_API mongoelector_status mongoelector_fake_clock_wait_for_waiters(
    mongoelector_fake_clock *clock, size_t n, int64_t real_timeout_ms, size_t *waiting_out);

/* Levers on a memory:// backend (with or without a fake clock), for the situations a
 * holder must survive. (Another node stealing the lock, or releasing it behind the
 * holder's back: a second locker's forced acquire or release.) INVALID_ARGUMENT for a
 * NULL URI or one that is not memory://NAME. Any thread.
 *
 * force_expire: the lock on `key` in `collection` (NULL: "mongolocker"; electors' locks
 * are in "elector.locks") expires now (its expiry set to the server's time), as if its
 * holder had stopped renewing. The holder is not told: its next renewal finds the lock no
 * longer its own (a lease is declared lost, an elector steps down; with no other
 * candidate it wins the free lock back at its next poll), and anyone may claim it
 * meanwhile, so that for a while two nodes believe they hold it: what a test of fencing
 * needs. *was_held_out (may be NULL) = 1 if an unexpired lock was there, else 0
 * (also for a NAME nothing uses). INVALID_ARGUMENT also for a NULL or invalid key or an
 * invalid collection name. */
MONGOELECTOR_API mongoelector_status mongoelector_memory_force_expire(const char *memory_uri,
                                                                      const char *collection,
                                                                      const char *key,
                                                                      int *was_held_out);
/* set_unavailable: unavailable != 0: from now on every call to the backend fails at once
 * with MONGOELECTOR_ERR_UNAVAILABLE, as a server that is down: holders keep their locks
 * until their renew deadline and then report them lost, electors step down, acquires
 * fail. 0: it answers again. Turning it on for a NAME that nothing in this process uses
 * is INVALID_ARGUMENT (the setting would vanish with the unused backend); turning it off
 * is then a no-op. */
MONGOELECTOR_API mongoelector_status mongoelector_memory_set_unavailable(const char *memory_uri,
                                                                         int unavailable);

#ifdef __cplusplus
}
#endif

#endif /* MONGOELECTOR_TESTING_H */
