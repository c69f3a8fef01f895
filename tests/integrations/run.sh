#!/usr/bin/env bash
# The integrations suite (mongoelector.celery, .apscheduler, .django, .asgi) with real
# processes: celery beat + worker, APScheduler nodes, manage.py, uvicorn replicas.
#
#   bash tests/integrations/run.sh PYTHON     PYTHON: an interpreter with mongoelector
#                                             installed (run_all.sh: its virtualenv)
#
# Installs the `test-integrations` extra's requirements (pyproject.toml) into PYTHON's
# environment (idempotent; seconds when present). Locks on a SQLite file, or on the
# server of MONGOELECTOR_TEST_URI when set (tests/servers/testserver.sh run java -- ...).
# About 2.5 minutes on a loaded 2-core machine.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PY="${1:?usage: run.sh PYTHON}"
mapfile -t REQS < <("$PY" - "$ROOT/pyproject.toml" <<'PYEOF'
import sys
try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib
with open(sys.argv[1], "rb") as f:
    print("\n".join(tomllib.load(f)["project"]["optional-dependencies"]["test-integrations"]))
PYEOF
)
"$PY" -m pip install -q --disable-pip-version-check "${REQS[@]}"
echo "locks on: ${MONGOELECTOR_TEST_URI:-a SQLite file per test}"
cd "$ROOT"
exec "$PY" -m pytest -p no:cacheprovider -q -rA -s "$HERE"
