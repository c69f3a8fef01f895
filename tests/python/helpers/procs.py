"""Starting and reading worker.py subprocesses."""

import os
import signal
import subprocess
import sys
import time

WORKER = os.path.join(os.path.dirname(__file__), "worker.py")


def default_sigint():
    """preexec_fn: a shell that started the tests in the background (`cmd &`) ignores
    SIGINT, the children inherit that and Python then installs no KeyboardInterrupt
    handler; restore the default so Ctrl-C can be simulated with SIGINT."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def env_of(python):
    """The environment of a worker run by `python`: another interpreter (the original's
    virtualenv) imports its own mongoelector, never the one PYTHONPATH may point this run
    at."""
    if python == sys.executable:
        return None
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def spawn(*args, python=sys.executable, **kw):
    kw.setdefault("env", env_of(python))
    return subprocess.Popen(
        [python, WORKER, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
        **kw,
    )


def run(*args, python=sys.executable, timeout=60):
    return subprocess.run(
        [python, WORKER, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env_of(python),
    )


def read_line(proc, timeout=20):
    """The next stdout line of `proc` (fails the test on EOF or timeout)."""
    import selectors

    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(timeout):
        raise AssertionError(f"no output from worker within {timeout}s")
    line = proc.stdout.readline()
    if not line:
        raise AssertionError("worker exited: " + proc.stderr.read())
    return line.split()


def read_log(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.split() for line in f if line.strip()]


def wait_log(path, pred, timeout=20):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        rows = read_log(path)
        if pred(rows):
            return rows
        time.sleep(0.02)
    raise AssertionError(f"log {path} never satisfied the condition: {read_log(path)}")


def check_no_overlap(rows):
    """rows: [name, start, end]; no two hold intervals overlap."""
    iv = sorted((float(s), float(e), n) for n, s, e in rows)
    for (s1, e1, n1), (s2, e2, n2) in zip(iv, iv[1:]):
        assert s2 >= e1, f"{n1} held [{s1}, {e1}] while {n2} held from {s2}"
    return iv
