#!/usr/bin/env bash
# The fault suite (README.md, "Fault suite"; tests/faults/README.md):
#   bash tests/faults/run.sh [--profile ci|long] [--server java|java-memory|ferretdb|mongodb://...]
#                            [--nodes N] [--ttl S] [--rounds N] [--faults a,b,...] [--workdir DIR]
# Installs what it needs (faketime, the server launcher, the Python package), builds the
# library and the native node, runs N electors (native + Python) under the nemesis and
# prints one table per fault. Exits non-zero on any safety violation (and, in the long
# profile, on liveness figures clearly off the goals). The long profile then runs each
# fuzz target for a minute (tests/fuzz/run.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
FAULTS="$ROOT/tests/faults"

# faketime (libfaketime) for the clock-skew fault.
if ! dpkg -s faketime >/dev/null 2>&1 || ! ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1; then
  say "apt-get install faketime"
  sudo=""; [[ $(id -u) -ne 0 ]] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq faketime >/dev/null
fi
install_apt

# The C library (only the target we need) and the native node over its public API.
if [[ ! -f "$BUILD_DIR/build.ninja" && ! -f "$BUILD_DIR/Makefile" ]]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
say "build libmongoelector ($BUILD_DIR) and the fault suite's native node"
cmake --build "$BUILD_DIR" -j2 --target mongoelector
NODE="$BUILD_DIR/tests/faults/fault_node"
mkdir -p "$(dirname "$NODE")"
cc -std=c11 -O2 -Wall -Wextra -Werror -I"$ROOT/capi/include" "$FAULTS/node.c" "$FAULTS/store.c" \
  -L"$BUILD_DIR/capi" -lmongoelector -lpthread -Wl,-rpath,"$BUILD_DIR/capi" -o "$NODE"

# The Python package, in the virtualenv tests/run_all.sh uses; (re)installed when missing
# or older than the sources it is built from.
PY_VENV="${FAULTS_PY_VENV:-$CACHE/py-venv}"
PY="$PY_VENV/bin/python"
need_py_install() {
  [[ -x "$PY" ]] || return 0
  local so
  so="$("$PY" -c 'import mongoelector._native as n, pymongo; print(n.__file__)' 2>/dev/null)" || return 0
  [[ -n "$(find "$ROOT/core" "$ROOT/python" "$ROOT/CMakeLists.txt" "$ROOT/pyproject.toml" \
    -newer "$so" -type f -print -quit)" ]]
}
if need_py_install; then
  say "install the Python package into $PY_VENV"
  [[ -x "$PY" ]] || python3 -m venv "$PY_VENV"
  "$PY" -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
  (cd "$ROOT" && "$PY" -m pip install -q --disable-pip-version-check \
    -C build-dir="$CACHE/py-build/$(echo "$ROOT" | md5sum | cut -c1-12)" ".[test]" pymongo)
fi

say "fault suite $*"
status=0
"$PY" "$FAULTS/orchestrate.py" --native-node "$NODE" "$@" || status=$?
# The long profile also fuzzes the inputs a server or a caller can send (issue #7):
# each libFuzzer target for 60 s (FAULTS_FUZZ_SECONDS), tests/fuzz/run.sh.
if [[ " $* " == *" --profile long "* || " $* " == *" --profile=long "* ]]; then
  bash "$ROOT/tests/fuzz/run.sh" "${FAULTS_FUZZ_SECONDS:-60}" || status=1
fi
exit "$status"
