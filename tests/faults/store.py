"""The fenced resource of the fault suite, in Python (same files and format as store.c).

A write carries a fencing token; it is accepted only if the token is >= the highest token
the store has seen. Every attempt appends `t node token seq accepted highest_before` to
STORE_DIR/store.log, t = CLOCK_MONOTONIC seconds taken under the flock."""

import fcntl
import os
import time


class FencedStore:
    def __init__(self, directory):
        self.lock_fd = os.open(os.path.join(directory, "store.lock"), os.O_RDWR | os.O_CREAT, 0o644)
        self.state_fd = os.open(
            os.path.join(directory, "store.state"), os.O_RDWR | os.O_CREAT, 0o644
        )
        self.log_fd = os.open(
            os.path.join(directory, "store.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644
        )

    def write(self, node, token, seq):
        fcntl.flock(self.lock_fd, fcntl.LOCK_EX)
        try:
            raw = os.pread(self.state_fd, 64, 0)
            highest = int(raw) if raw.strip() else 0
            t = time.monotonic()
            accepted = token >= highest
            if accepted and token > highest:
                os.ftruncate(self.state_fd, 0)
                os.pwrite(self.state_fd, b"%d\n" % token, 0)
            os.write(
                self.log_fd,
                b"%.6f %s %d %d %d %d\n" % (t, node.encode(), token, seq, int(accepted), highest),
            )
        finally:
            fcntl.flock(self.lock_fd, fcntl.LOCK_UN)
        return accepted


def read_log(directory):
    """[(t, node, token, seq, accepted, highest_before)] in file order."""
    out = []
    path = os.path.join(directory, "store.log")
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) == 6:
                out.append((float(p[0]), p[1], int(p[2]), int(p[3]), p[4] == "1", int(p[5])))
    return out
