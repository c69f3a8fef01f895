#!/usr/bin/env bash
# Installs a built wheel into a fresh venv and uses it with the system's libmongoc,
# libbson and libsqlite3 (libraries, headers, pkg-config and CMake files) hidden:
#
#   bash tests/wheels/test_hidden.sh [WHEEL]
#
# WHEEL defaults to the newest wheel in the cache's wheel/dist for python3's version
# (MONGOELECTOR_WHEEL_PYTHON picks another interpreter). They cannot be uninstalled on a
# shared machine, so a private mount namespace (unshare -m, needs root) covers each of
# their files with /dev/null and each of their directories with an empty tmpfs; nothing
# outside the namespace sees it. There, against a fresh mongo-java-server:
# tests/wheels/installed_checks.py (URI and pymongo transports: lock, two-process
# contention, elector; SQLite; TLS compiled in) and the wheel's `mongoelector` command.
# Ends with "N passed, N failed".
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
source "$HERE/tools.sh"

if [[ "${1:-}" == --in-namespace ]]; then
  # ---- inside the namespace (and under testserver.sh: MONGOELECTOR_TEST_URI is set) ----
  VENV="$2" SCRATCH="$3"
  mount --make-rprivate /
  files=0 dirs=0
  for pkg in libmongoc-1.0-0 libmongoc-dev libbson-1.0-0 libbson-dev libsqlite3-0 libsqlite3-dev; do
    dpkg -s "$pkg" >/dev/null 2>&1 || continue
    while read -r path; do
      if [[ -d "$path" && ! -L "$path" ]]; then
        # Their own directories (headers, CMake packages), not shared ones like /usr/lib.
        if [[ "$path" =~ /(libmongoc-1\.0|libbson-1\.0|mongoc-1\.0|bson-1\.0|libmongoc-static-1\.0|libbson-static-1\.0|mongoc|bson)$ ]]; then
          mount -t tmpfs -o ro,size=4k none "$path"; dirs=$((dirs + 1))
        fi
      elif [[ -f "$path" && "$path" =~ \.(so(\.[0-9.]+)?|a|h|pc|cmake)$ ]]; then
        mount --bind /dev/null "$path"; files=$((files + 1))
      fi
    done < <(dpkg -L "$pkg")
  done
  echo "hidden: $files files, $dirs directories of libmongoc, libbson and libsqlite3"
  passed=0 failed=0
  ok() { echo "ok: $*"; passed=$((passed + 1)); }
  bad() { echo "FAIL: $*"; failed=$((failed + 1)); }
  for lib in libmongoc-1.0.so.0 libbson-1.0.so.0 libsqlite3.so.0; do
    if "$VENV/bin/python" -c "import ctypes, sys; ctypes.CDLL(sys.argv[1])" "$lib" 2>/dev/null; then
      bad "$lib can still be loaded: not hidden"
    else
      ok "$lib cannot be loaded"
    fi
  done
  [[ ! -s /usr/include/libmongoc-1.0/mongoc/mongoc.h ]] && ok "libmongoc headers hidden" || bad "libmongoc headers visible"

  rc=0
  "$VENV/bin/python" "$HERE/installed_checks.py" "$MONGOELECTOR_TEST_URI" "$SCRATCH" | tee "$SCRATCH/checks.log" || rc=$?
  ((rc == 0)) && ok "installed_checks.py" || bad "installed_checks.py (exit $rc)"

  cli="$VENV/bin/mongoelector"
  version="$("$cli" --version 2>&1)" && ok "mongoelector --version: $version" || bad "mongoelector --version: $version"
  uri="${MONGOELECTOR_TEST_URI%/}/wheeltest"
  out="$("$cli" run wheel-cli --uri "$uri" -- sh -c 'echo "fence $MONGOELECTOR_FENCE"' 2>&1)" &&
    [[ "$out" == "fence "[0-9]* ]] && ok "mongoelector run on mongodb: $out" || bad "mongoelector run on mongodb: $out"
  out="$("$cli" status wheel-cli --uri "$uri" --json 2>&1)" && [[ "$out" == *'"key"'* ]] &&
    ok "mongoelector status --json" || bad "mongoelector status --json: $out"
  out="$("$cli" run wheel-cli --uri "sqlite://$SCRATCH/cli.db" -- true 2>&1)" &&
    ok "mongoelector run on sqlite" || bad "mongoelector run on sqlite: $out"
  echo "hidden-libmongoc wheel test: $passed passed, $failed failed"
  ((failed == 0))
  exit
fi

# ---- outside: venv, server, namespace -------------------------------------------------
[[ $(id -u) -eq 0 ]] || { echo "test_hidden: needs root (unshare -m, mount)" >&2; exit 1; }
PY="${MONGOELECTOR_WHEEL_PYTHON:-python3}"
tag="$("$PY" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')"
WHEEL="${1:-$(ls -t "$WHEEL_CACHE/dist"/mongoelector-*-"$tag"-"$tag"-*manylinux*.whl 2>/dev/null | head -1)}"
[[ -f "$WHEEL" ]] || { echo "test_hidden: no wheel for $tag (bash tests/wheels/build.sh first)" >&2; exit 1; }
echo "wheel: $WHEEL"

VENV="$WHEEL_CACHE/test-venv-$tag"
rm -rf "$VENV"
"$PY" -m venv "$VENV"
# The wheel and its one dependency, pymongo, from PyPI; nothing else.
"$VENV/bin/python" -m pip install -q --disable-pip-version-check "$WHEEL"
"$VENV/bin/python" -m pip list --disable-pip-version-check 2>/dev/null | grep -i -E '^(mongoelector|pymongo) '

SCRATCH="$(mktemp -d "${TMPDIR:-/tmp}/mongoelector-wheeltest.XXXXXX")"
trap 'rm -rf "$SCRATCH"' EXIT
bash "$ROOT/tests/servers/testserver.sh" run java -- \
  unshare -m --propagation private bash "${BASH_SOURCE[0]}" --in-namespace "$VENV" "$SCRATCH"
