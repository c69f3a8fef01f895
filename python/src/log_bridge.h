// Forwards core's log messages to logging.getLogger("mongoelector").
//
// The core may log from its election thread at any time. Taking the GIL right there
// would let a main thread that holds the GIL (a long C call) stall the election loop,
// so the sink only queues the message; one native drainer thread takes the GIL to hand
// queued messages to `logging`. Before the interpreter finalizes, shutdown() flushes
// and joins the drainer; later messages (warnings and errors) go to stderr.
#pragma once

namespace mongoelector_py {

// Installs the core log sink. Needs the GIL (looks up the logger).
void install_log_bridge();
// Waits until every message queued so far reached `logging` (tests). Caller holds the
// GIL; it is released while waiting.
void flush_log_bridge();
// Flushes, stops the drainer and restores stderr logging. Caller holds the GIL.
void shutdown_log_bridge();

}  // namespace mongoelector_py
