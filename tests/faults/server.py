"""The server under test: build and run mongo-java-server (java/FaultServer.java), freeze,
thaw, stop, restart it on the same port, step its clock; or a FerretDB / external URI.

Java: H2 file backend by default (data and fence epochs survive a restart); `memory` is the
in-memory backend, which loses them on restart (the restart fault then reports it)."""

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.environ.get("MONGOELECTOR_CACHE", os.path.expanduser("~/.cache/mongoelector"))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def port_open(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def build_java():
    src = os.path.join(HERE, "java")
    key = hashlib.sha256(
        b"".join(open(os.path.join(src, f), "rb").read() for f in ("FaultServer.java", "pom.xml"))
    ).hexdigest()[:16]
    out = os.path.join(CACHE, "fault-server", key)
    if os.path.exists(os.path.join(out, ".complete")):
        return out
    os.makedirs(os.path.dirname(out), exist_ok=True)
    tmp = tempfile.mkdtemp(dir=os.path.dirname(out), prefix=".build.")
    for f in ("FaultServer.java", "pom.xml"):
        shutil.copy(os.path.join(src, f), tmp)
    mvn = [
        "mvn",
        "-q",
        "-B",
        "-Dstyle.color=never",
        "-f",
        os.path.join(tmp, "pom.xml"),
        "dependency:copy-dependencies",
        "-DoutputDirectory=" + os.path.join(tmp, "lib"),
        "-DincludeScope=runtime",
    ]
    if subprocess.run(["mvn", "-o"] + mvn[1:], capture_output=True).returncode != 0:
        r = subprocess.run(mvn, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("maven failed:\n" + r.stdout + r.stderr)
    r = subprocess.run(
        [
            "javac",
            "--release",
            "11",
            "-nowarn",
            "-d",
            os.path.join(tmp, "classes"),
            "-cp",
            os.path.join(tmp, "lib", "*"),
            os.path.join(tmp, "FaultServer.java"),
        ],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        raise RuntimeError("javac failed:\n" + r.stderr)
    open(os.path.join(tmp, ".complete"), "w").close()
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    return out


class JavaServer:
    kind = "java"
    can_freeze = can_restart = can_step_clock = True

    def __init__(self, workdir, backend="h2"):
        self.dir = build_java()
        self.workdir = workdir
        self.backend = backend
        self.durable = backend == "h2"
        self.port = free_port()
        self.offset_file = os.path.join(workdir, "server-clock-offset-ms")
        self.clock_offset_ms = 0
        with open(self.offset_file, "w") as f:
            f.write("0\n")
        self.proc = None
        self.log = open(os.path.join(workdir, "server.log"), "ab")
        self.start()

    @property
    def uri(self):
        return f"mongodb://127.0.0.1:{self.port}/"

    def start(self):
        args = [
            "java",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Xss512k",
            "-cp",
            f"{self.dir}/classes:{self.dir}/lib/*",
            "FaultServer",
            str(self.port),
            "--wire-version=13",
            f"--clock-offset-file={self.offset_file}",
        ]
        if self.backend == "h2":
            args.append(f"--h2-file={os.path.join(self.workdir, 'server.h2')}")
        for attempt in range(50):
            self.proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=self.log,
                stderr=self.log,
                start_new_session=True,
            )
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and self.proc.poll() is None:
                if port_open(self.port):
                    return
                time.sleep(0.05)
            if self.proc.poll() is None:
                raise RuntimeError("server did not listen in 60 s")
            time.sleep(0.2)  # port still in use by the previous instance: retry
        raise RuntimeError("server could not bind its port again")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def freeze(self):
        os.kill(self.proc.pid, signal.SIGSTOP)

    def thaw(self):
        os.kill(self.proc.pid, signal.SIGCONT)

    def step_clock(self, delta_ms):
        self.clock_offset_ms += int(delta_ms)
        tmp = self.offset_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{self.clock_offset_ms}\n")
        os.replace(tmp, self.offset_file)
        time.sleep(0.05)  # the launcher re-reads the file every 10 ms

    def close(self):
        self.stop()


class FerretServer:
    """FerretDB via tests/servers/testserver.sh: freeze/thaw by its pid; no restart/clock."""

    kind = "ferretdb"
    can_freeze = True
    can_restart = can_step_clock = False
    durable = True

    def __init__(self, workdir):
        ts = os.path.join(HERE, "..", "servers", "testserver.sh")
        self.ts = ts
        self._uri = (
            subprocess.run(
                ["bash", ts, "start", "ferretdb"], check=True, capture_output=True, text=True
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        self.port = int(self._uri.rsplit(":", 1)[1].strip("/"))
        run = os.path.join(CACHE, "run", str(self.port), "pid")
        self.pid = int(open(run).read())

    @property
    def uri(self):
        return self._uri

    def freeze(self):
        os.kill(self.pid, signal.SIGSTOP)

    def thaw(self):
        os.kill(self.pid, signal.SIGCONT)

    def close(self):
        try:
            os.kill(self.pid, signal.SIGCONT)
        except OSError:
            pass
        subprocess.run(["bash", self.ts, "stop", self._uri], capture_output=True)


class ExternalServer:
    """Any mongodb:// URI (host:port proxied): only node and network faults apply."""

    kind = "uri"
    can_freeze = can_restart = can_step_clock = False
    durable = True

    def __init__(self, uri):
        self._uri = uri
        hostport = uri.split("://", 1)[1].split("/", 1)[0].split(",")[0]
        self.host, _, port = hostport.rpartition(":")
        self.port = int(port or 27017)

    @property
    def uri(self):
        return self._uri

    def close(self):
        pass
