"""The original's documented examples run unchanged against ours on the real server."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from procs import default_sigint

HARNESS = os.path.join(os.path.dirname(__file__), "helpers", "seed_examples.py")


@pytest.mark.slow
def test_seed_examples_run_unchanged(server_db):
    db, uri = server_db
    p = subprocess.Popen(
        [sys.executable, HARNESS, uri],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    lines = []
    watchdog = threading.Timer(120, p.kill)  # a hang fails the test instead of the run
    watchdog.start()
    try:
        for line in p.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("== elector-with"):
                time.sleep(2)  # the second elector follows forever: Ctrl-C ends it
                p.send_signal(signal.SIGINT)
            if line.startswith("== end"):
                break
        rest, err = p.communicate(timeout=30)
        lines += rest.splitlines()
    finally:
        watchdog.cancel()
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    out = [line for line in lines if not line.startswith("== ")]
    # The non-blocking example gets the free lock (and keeps it), so the timeout
    # example times out -- exactly as with the original.
    assert out[:2] == ["Could not acquire lock within 5 seconds", "I am the leader now"]
    assert "== interrupted" in lines
    assert out[2:4] == ["Is leader: False", "Leader exists: True"]
    assert out[4].startswith("Node status: {'uuid': ") and "'is_leader': False" in out[4]
    assert out[5].startswith("Cluster detail: {'member_detail': [")
    assert "'leader': {'host': " in out[5]
    # At exit the still-running first elector is stopped and gives up leadership.
    assert out[6:] == ["No longer the leader"]
    doc = db["elector.locks"].find_one({"_id": "my-service"})
    assert doc is None or doc["locked"] is False
