"""Runs `mongoelector run` on a pseudo-terminal under an interactive bash, as a user at a
terminal would: CMD (in its own process group) must get the terminal's foreground, so it
can read what is typed, and Ctrl-C must reach it once.

usage: python3 pty_run.py MONGOELECTOR_BIN KEY   (MONGOELECTOR_URI in the environment)
Prints what the terminal showed; exits 0 when both checks pass.
"""

import os
import pty
import re
import select
import sys
import time

BIN, KEY = sys.argv[1], sys.argv[2]
SCRIPT = (
    f"{BIN} run {KEY}-read -- bash -c 'read -r x; echo got:$x; exit 4'; echo rc1:$?; "
    f'{BIN} run {KEY}-intr -- bash -c \'trap "echo int; exit 9" INT; echo ready; '
    "while :; do sleep 0.05; done'; echo rc2:$?"
)


def read_until(fd, token, seconds):
    """Reads until `token` was seen or `seconds` pass (never blocks longer)."""
    out = b""
    end = time.time() + seconds
    while time.time() < end and token not in out:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if not ready:
            continue
        try:
            data = os.read(fd, 4096)
        except OSError:
            break
        if not data:
            break
        out += data
    return out


pid, fd = pty.fork()
if pid == 0:
    os.execvp("bash", ["bash", "--norc", "--noprofile", "-i", "-c", SCRIPT])
seen = read_until(fd, b"", 0)  # nothing yet
time.sleep(0.8)
os.write(fd, b"hello\n")
seen += read_until(fd, b"rc1:", 10)
seen += read_until(fd, b"ready", 10)
time.sleep(0.2)
for _ in range(3):  # Ctrl-C; sent again only if nothing came of it
    os.write(fd, b"\x03")
    seen += read_until(fd, b"rc2:", 3)
    if b"rc2:" in seen:
        break
seen += read_until(fd, b"\n", 1)
try:
    os.kill(pid, 9)  # the interactive shell, if something is still hanging
except ProcessLookupError:
    pass
os.waitpid(pid, 0)
text = seen.decode(errors="replace").replace("\r", "")
print(text)
ok = (
    "got:hello" in text
    and "rc1:4" in text
    and "rc2:9" in text
    and len(re.findall(r"(?:^|\n|\^C)int\n", text)) == 1
)  # Ctrl-C reached CMD once
sys.exit(0 if ok else 1)
