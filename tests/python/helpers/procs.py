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


def spawn(*args, python=sys.executable, worker=WORKER, **kw):
    kw.setdefault("env", env_of(python))
    return subprocess.Popen(
        [python, worker, *map(str, args)],
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


def kill_holder(proc):
    """Reads a holding worker's "held <fence> <t_before> <t_after>" line, then kills it
    with SIGKILL (it releases nothing): (fence, t_before, t_after) on the host's
    monotonic clock, t_before taken before it asked, t_after once it held."""
    line = proc.stdout.readline().split()
    assert line and line[0] == "held", proc.stderr.read()
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    return int(line[1]), float(line[2]), float(line[3])


def finish(*procs):
    """Kills the workers still running, and reaps them all."""
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(10)


def wait_all(procs, timeout=300):
    """Waits for every worker to exit with status 0 (its stderr shown otherwise); kills
    and reaps whatever is left when one fails."""
    try:
        for p in procs:
            assert p.wait(timeout) == 0, p.stderr.read()
    finally:
        finish(*procs)


def max_overlap(starts, ends):
    """The most hold intervals (given by their starts and ends) open at one instant; an
    end counts before a start at the same instant."""
    events = sorted([(t, 0, -1) for t in ends] + [(t, 1, +1) for t in starts])
    inside = most = 0
    for _, _, d in events:
        inside += d
        most = max(most, inside)
    return most


def check_tokens_ordered(holds):
    """holds: [(t_requested, t_entered, fence)] of every hold of one key, on the host's
    monotonic clock. Tokens are unique, and a hold requested after another was entered
    has the larger token: X's claim was sent after X requested, Y's had completed when Y
    entered. (Comparing with exits, or with X's own enter, would blame the token order
    for a process descheduled between its claim and its log line.)"""
    fences = [f for _, _, f in holds]
    assert len(set(fences)) == len(fences), "a fencing token was handed out twice"
    completed = sorted((t, f) for _, t, f in holds)
    j, max_completed = 0, 0
    for t_req, _, fence in sorted(holds):
        while j < len(completed) and completed[j][0] < t_req:
            max_completed = max(max_completed, completed[j][1])
            j += 1
        assert fence > max_completed, "a later claim got a smaller token"
