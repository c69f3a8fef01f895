"""Processes of the integrations suite: started with unbuffered output to a log file,
waited on by reading that file (deadlines, never fixed sleeps), killed by their pid."""

import os
import re
import signal
import subprocess
import sys
import time
from typing import Callable, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BIN = os.path.dirname(sys.executable)


def env(**extra: str) -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([HERE, e.get("PYTHONPATH", "")])
    e["PYTHONUNBUFFERED"] = "1"
    e.update(extra)
    return e


class Proc:
    def __init__(self, name: str, argv: List[str], log: str, **extra: str) -> None:
        self.name = name
        self.log = log
        self._out = open(log, "w")
        self.p = subprocess.Popen(
            argv, stdout=self._out, stderr=subprocess.STDOUT, env=env(**extra), cwd=HERE
        )

    def text(self) -> str:
        with open(self.log) as f:
            return f.read()

    def wait_for(self, pattern: str, timeout: float = 60, after: int = 0) -> re.Match:
        """The first match of `pattern` in the log past offset `after`."""
        end = time.monotonic() + timeout
        rx = re.compile(pattern)
        while True:
            m = rx.search(self.text(), after)
            if m:
                return m
            if self.p.poll() is not None:
                raise AssertionError(
                    f"{self.name} exited ({self.p.returncode}):\n{self.text()[-3000:]}"
                )
            if time.monotonic() > end:
                raise AssertionError(
                    f"{self.name}: no {pattern!r} within {timeout}s:\n{self.text()[-3000:]}"
                )
            time.sleep(0.02)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.p.poll() is None:
            self.p.send_signal(sig)

    def stop(self, timeout: float = 30) -> Optional[int]:
        self.kill(signal.SIGTERM)
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.p.wait(10)
        finally:
            self._out.close()


def wait_until(pred: Callable[[], bool], timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.05)


def read_lines(path: str) -> List[List[str]]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.split() for line in f if line.strip()]
