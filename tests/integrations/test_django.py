"""mongoelector.django with 3 real `manage.py` processes released at once: the command
(base class and decorator) runs on one; django-cron's runcrons with CronJobLock runs its
job once."""

import os
import subprocess
import sys

import pytest
from procs import HERE, env

pytest.importorskip("django")

PROJECT = os.path.join(HERE, "djproj")


def run_three(tmp_path, store, *argv):
    e = env(ME_TEST_DIR=str(tmp_path), ME_TEST_DB=store)
    e["PYTHONPATH"] = os.pathsep.join([PROJECT, e["PYTHONPATH"]])
    procs = [
        subprocess.Popen(
            [sys.executable, "manage.py", *argv],
            cwd=PROJECT,
            env=e,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    # Every process waits at the barrier (in execute(), before the lock) until all exist.
    (tmp_path / "go").touch()
    out = [p.communicate(timeout=180) for p in procs]
    for p, (o, err) in zip(procs, out):
        assert p.returncode == 0, err
    return out


def runs(tmp_path):
    path = tmp_path / "runs.log"
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("command", ["exclusive_report", "decorated_report"])
def test_command_runs_on_one_of_three(tmp_path, store, command):
    out = run_three(tmp_path, store, command)
    ran = [o for o, _ in out if "ran" in o]
    skipped = [e for _, e in out if "skipped" in e]
    assert len(ran) == 1 and len(skipped) == 2, out
    rows = runs(tmp_path)
    assert [r[0] for r in rows] == ["start", "end"], rows
    assert rows[0][2] == rows[1][2] != "None"  # the fencing token, while it ran
    print(f"\n{command}: 3 processes, 1 ran (fence {rows[0][2]}), 2 skipped")


def test_django_cron_job_runs_once(tmp_path, store):
    e = env(ME_TEST_DIR=str(tmp_path), ME_TEST_DB=store)
    e["PYTHONPATH"] = os.pathsep.join([PROJECT, e["PYTHONPATH"]])
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"], cwd=PROJECT, env=e, check=True
    )
    run_three(tmp_path, store, "runcrons")
    rows = runs(tmp_path)
    assert [r[0] for r in rows] == ["cron"], rows
    print("\ndjango-cron: 3 runcrons processes, the job ran once")
