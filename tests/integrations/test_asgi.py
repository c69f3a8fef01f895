"""mongoelector.asgi under uvicorn: 3 replicas, the background work runs on exactly one;
it moves on kill -9, stops on a frozen replica (SIGSTOP) and restarts on re-election."""

import os
import signal
import socket
import sys
import time

import pytest
from procs import Proc, read_lines, wait_until

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

TTL = 2.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def beats(path):
    return [(int(r[0]), int(r[1]), float(r[2])) for r in read_lines(path)]


def writers_since(path, t):
    return {pid for pid, _, when in beats(path) if when >= t}


def test_work_runs_on_one_replica_and_moves(tmp_path, store):
    out = str(tmp_path / "beats.log")
    replicas = [
        Proc(
            f"r{i}",
            [
                sys.executable,
                "-m",
                "uvicorn",
                "asgi_app:app",
                "--port",
                str(free_port()),
                "--log-level",
                "info",
            ],
            str(tmp_path / f"r{i}.log"),
            ME_TEST_DIR=str(tmp_path),
            ME_TEST_DB=store,
            ME_TTL=str(TTL),
        )
        for i in range(3)
    ]
    by_pid = {r.p.pid: r for r in replicas}
    frozen = None
    try:
        for r in replicas:
            r.wait_for("Application startup complete", timeout=90)
        wait_until(lambda: len(beats(out)) >= 5, 30, "the work started")
        first = beats(out)[-1][0]
        t = time.time()
        time.sleep(1.0)  # observation window, not for correctness
        assert writers_since(out, t) == {first}
        # kill -9: the work moves to another replica within about one ttl.
        by_pid[first].kill()
        killed = time.time()
        wait_until(lambda: writers_since(out, killed) - {first}, 30, "the work moved")
        moved = min(w for p, _, w in beats(out) if w >= killed and p != first) - killed
        second = next(iter(writers_since(out, killed) - {first}))
        # Freeze the new leader past its lease: the third replica takes over; on resume the
        # frozen one has stopped its work (cancelled on loss) and writes nothing more.
        frozen = by_pid[second]
        os.kill(second, signal.SIGSTOP)
        stopped = time.time()
        wait_until(lambda: writers_since(out, stopped) - {second}, 30, "the work moved again")
        third = next(iter(writers_since(out, stopped) - {second}))
        os.kill(second, signal.SIGCONT)
        frozen = None
        resumed = time.time()
        time.sleep(1.0)  # observation window
        assert writers_since(out, resumed) == {third}, "two replicas worked at once"
        # Re-election: stop the third gracefully; the resumed replica leads again and
        # restarts its work with a new fencing token.
        stop_at = time.time()
        by_pid[third].stop()
        wait_until(lambda: second in writers_since(out, stop_at), 30, "the work restarted")
    finally:
        if frozen is not None:
            os.kill(frozen.p.pid, signal.SIGCONT)
        for r in replicas:
            r.kill()
    rows = beats(out)
    # Never two at once: ordered by time, the writer changes only at hand-overs and a
    # replica that lost never writes again in that term.
    segments = []
    for pid, fence, when in sorted(rows, key=lambda r: r[2]):
        if not segments or segments[-1][0] != (pid, fence):
            segments.append([(pid, fence), when, when])
        else:
            segments[-1][2] = when
    terms = [s[0] for s in segments]
    assert len(terms) == len(set(terms)), f"a term's work interleaved with another's: {segments}"
    fences = [f for _, f in terms]
    assert fences == sorted(fences) and len(set(fences)) == len(fences), terms
    assert [p for p, _ in terms] == [first, second, third, second], terms
    print(
        f"\nasgi: work moved {moved:.2f} s after kill -9 (ttl {TTL:g} s); terms {terms}; "
        "never two replicas at once"
    )
