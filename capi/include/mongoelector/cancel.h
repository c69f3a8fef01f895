/*
 * mongoelector/cancel.h: cancel tokens for the calls that wait.
 *
 * Part of the C API of libmongoelector: programs include <mongoelector.h>, which
 * includes this file; the conventions of every function are stated there.
 */
#ifndef MONGOELECTOR_CANCEL_H
#define MONGOELECTOR_CANCEL_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Cancel token (since 1.1) ------------------------------------------------------ */

/* A one-shot cancellation flag for the calls that take one (mongoelector_acquire_options):
 * once cancelled it stays cancelled, and a call given a cancelled token returns
 * MONGOELECTOR_ERR_CANCELLED at once. Cancelling affects only the calls given this
 * token, so a cancel that comes after the call returned has no effect on later calls:
 * use one token per call (or per context/scope). A waiting call notices within about
 * 100 ms; a round trip already on the wire is not interrupted (it ends within the
 * per-call timeout). *out is owned by the caller: mongoelector_cancel_token_free(). */
MONGOELECTOR_API mongoelector_status mongoelector_cancel_token_new(mongoelector_cancel_token **out);
/* Cancels. Any thread, any number of times, until the token is freed. */
MONGOELECTOR_API mongoelector_status
mongoelector_cancel_token_cancel(mongoelector_cancel_token *token);
/* *out = 1 once cancelled. Any thread. */
MONGOELECTOR_API mongoelector_status
mongoelector_cancel_token_is_cancelled(mongoelector_cancel_token *token, int *out);
/* Frees the token. NULL ok. Only after every call given the token has returned and no
 * thread will cancel it any more. */
MONGOELECTOR_API void mongoelector_cancel_token_free(mongoelector_cancel_token *token);

#ifdef __cplusplus
}
#endif

#endif /* MONGOELECTOR_CANCEL_H */
