"""Type annotations of the public API (issue #15).

The INSTALLED package (the one this interpreter imports, with its py.typed and the stub
of the native module) is type-checked from outside, as a user's project would:

* ``mypy --strict`` and pyright (strict) accept tests/python/typing_sample.py, a script
  using the whole public API, with no ``type: ignore``;
* they reject misuse (so the package is not silently ``Any``);
* ``mypy --strict -p mongoelector`` accepts the package itself, and ``stubtest`` finds
  the stub ``_native.pyi`` in step with the compiled module;
* the sample runs against the test server (so the annotations describe what happens).

mypy and pyright come with the test extras (``pip install .[test]``); pyright runs on
node (the system's): without it that test is skipped, saying so.
"""

import os
import shutil
import subprocess
import sys
import textwrap

import mongoelector
import pytest
from conftest import FERRETDB_SKIP, TEST_SERVER

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLE = os.path.join(HERE, "typing_sample.py")
PACKAGE_DIR = os.path.dirname(os.path.abspath(mongoelector.__file__))

# Misuse each checker must report, one per line (the line numbers are asserted).
MISUSE = textwrap.dedent("""\
    from typing import Optional
    from mongoelector import MongoLeaderElector, MongoLocker, lease
    lock = MongoLocker("k", 42)
    lock.acquire(blocking="yes")
    token: str = lock.fence
    lock.status["no_such_key"]
    MongoLeaderElector("e", "mongodb://h/db", on_leader=lambda leader: None)
    lease("mongodb://h/db", "k", no_such_option=1)
    when: Optional[int] = lock.touch()
    """)
MISUSE_LINES = [3, 4, 5, 6, 7, 8, 9]


def _run(cmd, cwd, timeout=600, env=None):
    proc = subprocess.run(
        cmd, cwd=str(cwd), capture_output=True, text=True, timeout=timeout, env=env
    )
    print("$", " ".join(cmd))
    print(proc.stdout + proc.stderr)
    return proc


def _error_lines(output, filename, marker):
    """Line numbers of the errors reported in ``filename`` ("path:line:...")."""
    lines = set()
    for line in output.splitlines():
        path, _, rest = line.strip().partition(":")
        if marker in line and os.path.basename(path) == filename:
            lines.add(int(rest.split(":", 1)[0]))
    return lines


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """Outside the repository: no config file of the checkout applies, no cache lands in
    it, and nothing but the installed package can be found as ``mongoelector``."""
    return tmp_path_factory.mktemp("typing")


@pytest.fixture(scope="module")
def mypy_cmd(workdir):
    pytest.importorskip("mypy", reason="mypy is not installed: pip install .[test]")
    return [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(workdir / "mypy-cache")]


@pytest.fixture(scope="module")
def pyright_cmd(workdir):
    pytest.importorskip("pyright", reason="pyright is not installed: pip install .[test]")
    env = dict(os.environ, PYRIGHT_PYTHON_IGNORE_WARNINGS="1")  # no version look-up online
    if shutil.which("node") is None:
        pytest.skip("pyright needs node, which is not on PATH (pyright-python would download one)")
    version = _run([sys.executable, "-m", "pyright", "--version"], workdir, timeout=120, env=env)
    if version.returncode != 0:
        pytest.skip(f"pyright does not run here: {version.stderr.strip()[:300]}")
    config = workdir / "pyrightconfig.json"
    config.write_text('{"typeCheckingMode": "strict"}\n')
    return [sys.executable, "-m", "pyright", "-p", str(config), "--pythonpath", sys.executable], env


def test_installed_package_ships_its_type_information():
    assert os.path.isfile(os.path.join(PACKAGE_DIR, "py.typed")), PACKAGE_DIR
    assert os.path.isfile(os.path.join(PACKAGE_DIR, "_native.pyi")), PACKAGE_DIR
    print("checking the package installed at", PACKAGE_DIR)


def test_mypy_strict_accepts_the_user_script(mypy_cmd, workdir):
    proc = _run(mypy_cmd + [SAMPLE], workdir)
    assert proc.returncode == 0
    assert "Success: no issues found in 1 source file" in proc.stdout


def test_mypy_strict_accepts_the_package(mypy_cmd, workdir):
    proc = _run(mypy_cmd + ["-p", "mongoelector"], workdir)
    assert proc.returncode == 0
    assert "Success: no issues found" in proc.stdout


def test_mypy_rejects_misuse(mypy_cmd, workdir):
    bad = workdir / "misuse_mypy.py"
    bad.write_text(MISUSE)
    proc = _run(mypy_cmd + [str(bad)], workdir)
    assert proc.returncode == 1
    assert _error_lines(proc.stdout, bad.name, ": error:") == set(MISUSE_LINES)


def test_native_stub_matches_the_compiled_module(mypy_cmd, workdir):
    """Every class, method, property and function of ``_native`` is in the stub and the
    other way round (pybind11 signatures are not introspectable: names, kinds and
    constructors only). Allowed: pybind11's metaclass, and the classes without a Python
    constructor (two storages; the acquire run, which a locker makes)."""
    # Every public class of the compiled module has pybind11's metaclass.
    classes = sorted(
        name
        for name, obj in vars(mongoelector._native).items()
        if isinstance(obj, type)
        and type(obj).__name__ == "pybind11_type"
        and not name.startswith("_")  # private: not in the stub, not checked
    )
    assert "Partitioner" in classes and "Locker" in classes
    allow = workdir / "stubtest-allowlist.txt"
    allow.write_text(
        "\n".join(
            ["mongoelector._native.%s" % c for c in classes]  # "metaclass differs"
            + [
                "mongoelector._native.Storage.__init__",
                "mongoelector._native.SqliteStorage.__init__",
                "mongoelector._native.AcquireRun.__init__",
                "mongoelector._native.ClaimInParts.__init__",
                "mongoelector._native.ReleaseInParts.__init__",
                "mongoelector._native.TouchInParts.__init__",
            ]
        )
        + "\n"
    )
    proc = _run(
        [sys.executable, "-m", "mypy.stubtest", "mongoelector._native", "--allowlist", str(allow)],
        workdir,
    )
    assert proc.returncode == 0


def test_pyright_strict_accepts_the_user_script(pyright_cmd, workdir):
    cmd, env = pyright_cmd
    proc = _run(cmd + [SAMPLE], workdir, env=env)
    assert proc.returncode == 0
    assert "0 errors, 0 warnings" in proc.stdout


def test_pyright_rejects_misuse(pyright_cmd, workdir):
    cmd, env = pyright_cmd
    bad = workdir / "misuse_pyright.py"
    bad.write_text(MISUSE)
    proc = _run(cmd + [str(bad)], workdir, env=env)
    assert proc.returncode == 1
    assert _error_lines(proc.stdout, bad.name, " - error:") == set(MISUSE_LINES)


@pytest.mark.server
@pytest.mark.skipif(TEST_SERVER == "ferretdb", reason=FERRETDB_SKIP)
def test_the_sample_runs_against_a_server(server_uri, workdir):
    proc = _run([sys.executable, SAMPLE, server_uri], workdir, timeout=120)
    assert proc.returncode == 0
    assert proc.stdout.rstrip().endswith("OK")
