#!/usr/bin/env bash
# Installs what is needed, builds, and runs every suite: lint (first, tests/lint.sh), unit,
# build checks (exported symbols, header, ABI, install consumer), the C++ and C integration
# suites against mongo-java-server AND FerretDB, the Python suite, the Python integrations
# (tests/integrations: celery, APScheduler, Django, uvicorn processes), the documentation's
# examples, and the Go and Rust bindings.
# Also against $MONGOELECTOR_TEST_URI when set (a real MongoDB of yours).
# Exits non-zero if any suite fails. Idempotent.
#
#   bash tests/run_all.sh            everything (what CI runs; about 30 minutes on 2 cores)
#   bash tests/run_all.sh --quick    the loop for a change: lint, unit tests with the
#     simulation's first 500 CI schedules and the memory and SQLite storage suites (ctest -LE
#     integration), the Python suite on memory:// and mongomock (no server, not the
#     slow tests, not the type checkers' test_typing.py; the package is reinstalled only
#     when its sources changed), and the command on SQLite. No server is started.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

QUICK=0
[[ "${1:-}" == "--quick" ]] && QUICK=1
USER_URI="${MONGOELECTOR_TEST_URI:-}"
unset MONGOELECTOR_TEST_URI MONGOELECTOR_TEST_SERVER
FAILED=()
PASSED=()
run_suite() {  # run_suite NAME CMD...: runs, records, never aborts the script
  local name="$1"; shift
  say "$name"
  local start=$SECONDS
  if "$@"; then
    PASSED+=("$name ($((SECONDS - start)) s)")
  else
    FAILED+=("$name")
    echo "*** suite failed: $name"
  fi
}
with_server() {  # with_server KIND CMD...: a fresh server for CMD
  bash "$ROOT/tests/servers/testserver.sh" run "$@"
}

# First: formatting and static checks (seconds once its tools are installed).
run_suite "lint (tests/lint.sh: ruff, rustfmt, clippy, gofmt, go vet, staticcheck, clang-format)" \
  bash "$ROOT/tests/lint.sh"
install_apt
install_pip
((QUICK)) || install_servers java ferretdb
build_native

# Python: the package built by `pip install .[test]` into a virtualenv kept in the cache.
PY_VENV="${MONGOELECTOR_PY_VENV:-$CACHE/py-venv}"  # MONGOELECTOR_PY_VENV: another virtualenv
# What the package is built from (tracked files and uncommitted edits of its sources):
# --quick skips the install when the virtualenv already holds a build of exactly this.
package_sources_stamp() {
  (cd "$ROOT" && { git ls-files -s core python CMakeLists.txt pyproject.toml VERSION cmake
    git diff HEAD -- core python CMakeLists.txt pyproject.toml VERSION cmake; } | md5sum)
}
install_python_package() {
  local stamp
  stamp="$(package_sources_stamp)"
  if ((QUICK)) && [[ "$(cat "$PY_VENV/.mongoelector-sources" 2>/dev/null)" == "$stamp" ]]; then
    echo "the virtualenv holds a build of these sources already ($PY_VENV)"
    return 0
  fi
  [[ -x "$PY_VENV/bin/python" ]] || python3 -m venv "$PY_VENV"
  "$PY_VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
  (cd "$ROOT" && "$PY_VENV/bin/python" -m pip install -q --disable-pip-version-check \
    -C build-dir="$CACHE/py-build/$(echo "$ROOT" | md5sum | cut -c1-12)" ".[test]")
  echo "$stamp" >"$PY_VENV/.mongoelector-sources"
}
# The C library of the build tree, for the Python tests that drive it through ctypes
# (test_capi_mixed_fleet.py: a C elector next to the original 1.0.2).
MONGOELECTOR_LIB_DIR="$(dirname "$(find "$BUILD_DIR" -name libmongoelector.so.1 -not -path '*/CMakeFiles/*' | head -1)")"
export MONGOELECTOR_LIB_DIR
PYTEST=("$PY_VENV/bin/python" -m pytest -p no:cacheprovider)

summary() {
  say "summary"
  local s
  for s in "${PASSED[@]}"; do echo "  ok      $s"; done
  for s in "${FAILED[@]}"; do echo "  FAILED  $s"; done
  echo "${#PASSED[@]} passed, ${#FAILED[@]} failed (${SECONDS} s)"
  ((${#FAILED[@]} == 0))
}

CTEST=(ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 900)
# --quick: the simulation's CI profile on its first 500 schedules (the full run: 2,000).
((QUICK)) && export MONGOELECTOR_SIM_CI_SEEDS=1..500
run_suite "unit tests and build checks (ctest -LE integration)" "${CTEST[@]}" -LE integration
if ((QUICK)); then
  run_suite "mongoelector command on SQLite (tests/cli --sqlite)" \
    bash "$ROOT/tests/cli/run.sh" "$BUILD_DIR" --sqlite
  run_suite "Python package install (pip install .[test])" install_python_package
  # Not test_typing.py either: its mypy and pyright runs take minutes (the full run has it).
  run_suite "Python suite on memory:// and mongomock (pytest -m 'not server and not slow')" \
    "${PYTEST[@]}" -q -m "not server and not slow" --ignore "$ROOT/tests/python/test_typing.py" \
    "$ROOT/tests/python"
  summary
  exit
fi
# Verbose: the log shows which server (name and version) each suite talked to, and the
# measured takeover, step-down and round-trip figures.
for server in java ferretdb; do
  run_suite "integration suites on $server (ctest -L integration)" \
    with_server "$server" -- "${CTEST[@]}" -V -L integration
done
if [[ -n "$USER_URI" ]]; then
  run_suite "integration suites on \$MONGOELECTOR_TEST_URI" \
    env MONGOELECTOR_TEST_URI="$USER_URI" "${CTEST[@]}" -L integration
fi
run_suite "mongoelector command (tests/cli: SQLite, then java)" bash "$ROOT/tests/cli/run.sh" "$BUILD_DIR"
run_suite "Python package install (pip install .[test])" install_python_package
run_suite "Python suite on java (pytest: mongomock + real server, processes, mixed fleet, GIL)" \
  with_server java -- "${PYTEST[@]}" "$ROOT/tests/python"
run_suite "Python suite on ferretdb (pytest -m ferretdb)" \
  with_server ferretdb -- "${PYTEST[@]}" -m ferretdb "$ROOT/tests/python"
# The integrations (celery beat + worker, APScheduler, Django, uvicorn processes).
run_suite "Python integrations on SQLite (tests/integrations: celery, APScheduler, Django, ASGI)" \
  bash "$ROOT/tests/integrations/run.sh" "$PY_VENV/bin/python"
run_suite "Python integrations on java (tests/integrations)" \
  with_server java -- bash "$ROOT/tests/integrations/run.sh" "$PY_VENV/bin/python"
if [[ -n "$USER_URI" ]]; then
  run_suite "Python suite on \$MONGOELECTOR_TEST_URI" \
    env MONGOELECTOR_TEST_URI="$USER_URI" "${PYTEST[@]}" "$ROOT/tests/python"
fi

# The documentation: mkdocs build --strict and every example of README.md and docs/
# (Python with the package just installed, C against the build tree, the command).
run_suite "documentation (mkdocs --strict, examples of README.md and docs/)" \
  with_server java -- bash "$ROOT/tests/docs/run.sh" "$PY_VENV" "$BUILD_DIR"

run_suite "fault suite (CI profile) on java" bash "$ROOT/tests/faults/run.sh" --profile ci

# Bindings over the C ABI (each starts its own mongo-java-server unless a URI is given).
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$CACHE/cargo-target}"
run_suite "Go binding (go vet, go test -race)" bash "$ROOT/tests/bindings/run_go.sh" "$BUILD_DIR"
run_suite "Rust binding (cargo test)" bash "$ROOT/tests/bindings/run_rust.sh" "$BUILD_DIR"
run_suite "installed library consumers (pkg-config and CMake)" \
  bash "$ROOT/tests/consumer/run.sh" "$BUILD_DIR"
# Its own build tree in the cache (tests/sanitize/run.sh); TSan and fuzzing are run by hand.
run_suite "ASan+UBSan build: unit + integration on java" bash "$ROOT/tests/sanitize/run.sh" asan

summary
