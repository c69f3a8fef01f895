"""The run's event logs: JSON lines, one file per writer, times on CLOCK_MONOTONIC."""

import json
import os
import threading
import time


class EventLog:
    def __init__(self, path):
        self.f = open(path, "a", buffering=1)
        self.mu = threading.Lock()

    def emit(self, ev, **kw):
        rec = {"t": round(time.monotonic(), 6), "ev": ev}
        rec.update(kw)
        with self.mu:
            self.f.write(json.dumps(rec) + "\n")
        return rec["t"]


def read_jsonl(path):
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass  # a line cut by kill -9
    return out
