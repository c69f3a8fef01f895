#!/usr/bin/env bash
# The benchmark harness (issue #10): the original mongoelector 1.0.2 against ours through
# Python (pymongo Database and URI transports) and through the C API, on one server in
# one run. Not a test and not run by CI: the figures depend on the machine.
#
#   bash tests/bench/run.sh [--quick] [--only ops,cycles,failover,contention,cost,load,scale]
#                           [--trials N] [--results DIR] [--server java|ferretdb]
#                           [--contenders original,py-db,py-uri,c] [--scale-sizes 1,10,100]
#                           [--scale-modes batched,per-key] [--scale-ttl S] [--scale-window S]
#                           [--renewal] [--go] [--no-install]
#   bash tests/bench/run.sh --instructions [--contenders original,db,...] [--quick] [--json F]
#
#   --quick        smoke-test profile (about 3 minutes; the full one takes about 15)
#   --only S,...   run only these scenarios
#   --trials N     failover trials per contender and kind of stop (full 20, quick 3)
#   --results DIR  where results.md, results.json, results.png and logs/ go
#                  (default tests/bench/results)
#   --server KIND  start this test server (default java); MONGOELECTOR_TEST_URI or --uri
#                  URI use a running server instead (MongoDB: its own TTL monitor)
#   --renewal      the figures of issue #17 (what tests/bench/renewal.sh runs): the scale
#                  scenario alone, N = 1..5000 at ttl 15 for 60 s, batched vs per-key
#                  renewal, ours only, into renewal.md (--quick: renewal-quick.md)
#   --go           add the Go binding as a contender (capi/go; needs Go and its module)
#   --no-install   use the existing builds and venvs as they are (no cmake, no pip)
#   --instructions instead of the harness: instructions.py (CPU instructions per cycle
#                  under valgrind, the Python contenders) with the venvs below, on
#                  MONGOELECTOR_TEST_URI / --uri or a mongo-java-server of its own
#
# What it prepares (cached, incremental):
#   * the C library and bench_contender (contender.c over the public header only) in
#     $MONGOELECTOR_BENCH_BUILD (default $MONGOELECTOR_CACHE/build-bench)
#   * our Python package: `pip install <repo>` into $MONGOELECTOR_CACHE/bench-venv (with
#     matplotlib for the plot), build tree $MONGOELECTOR_CACHE/bench-py-build
#   * the original: mongoelector==1.0.2 + pymongo in $MONGOELECTOR_CACHE/orig-venv (the
#     same venv tests/python uses)
#   * mongo-java-server (tests/servers/testserver.sh), started and stopped by the harness
# A contender that cannot be prepared or cannot run is reported and skipped; the others run.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
CACHE="${MONGOELECTOR_CACHE:-$HOME/.cache/mongoelector}"
export MONGOELECTOR_CACHE="$CACHE"
BUILD="${MONGOELECTOR_BENCH_BUILD:-$CACHE/build-bench}"
BENCH_VENV="$CACHE/bench-venv"
ORIG_VENV="$CACHE/orig-venv"
ORIGINAL="mongoelector==1.0.2"
PYMONGO="pymongo>=4.13,<5"

INSTALL=1
GO=0
RENEWAL=0
INSTR=0
ARGS=()
# The command line, for the header of the results (renewal.sh sets its own).
export MONGOELECTOR_BENCH_COMMAND="${MONGOELECTOR_BENCH_COMMAND:-bash tests/bench/run.sh${*:+ $*}}"
while (($#)); do
  case "$1" in
    --renewal) RENEWAL=1; ARGS+=("$1"); shift ;;
    --no-install) INSTALL=0; shift ;;
    --go) GO=1; shift ;;
    --instructions) INSTR=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done

say() { printf 'run.sh: %s\n' "$*" >&2; }
# The commit a build comes from (+dirty when tracked files differ from it).
tree_id() {
  local c
  c="$(git -C "$REPO" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
  [[ -n "$(git -C "$REPO" status --porcelain --untracked-files=no 2>/dev/null)" ]] && c+="+dirty"
  echo "$c"
}
mkdir -p "$CACHE"
T0=$SECONDS
HARNESS_ARGS=()

# ---- the original, in its own venv --------------------------------------------------
orig_ok() {
  [[ -x "$ORIG_VENV/bin/python" ]] && (cd / && env -u PYTHONPATH "$ORIG_VENV/bin/python" -c \
    "import importlib.metadata as m, pymongo; assert m.version('mongoelector') == '1.0.2'") 2>/dev/null
}
# The renewal figures leave the original out (it has no lease) unless --contenders names it.
WANT_ORIG=1
if ((RENEWAL)) && [[ " ${ARGS[*]} " != *original* ]]; then WANT_ORIG=0; fi
if ((WANT_ORIG)) && ! orig_ok && ((INSTALL)); then
  say "installing $ORIGINAL into $ORIG_VENV"
  python3 -m venv --clear "$ORIG_VENV" &&
    "$ORIG_VENV/bin/python" -m pip install -q --disable-pip-version-check "$ORIGINAL" "$PYMONGO" ||
    say "WARNING: could not install the original"
fi
if ((!WANT_ORIG)); then
  :
elif orig_ok; then
  HARNESS_ARGS+=(--original-python "$ORIG_VENV/bin/python")
else
  say "WARNING: no original contender ($ORIG_VENV)"
fi

# ---- ours through Python --------------------------------------------------------------
if ((INSTALL)); then
  [[ -x "$BENCH_VENV/bin/python" ]] || python3 -m venv "$BENCH_VENV"
  say "pip install $REPO into $BENCH_VENV (incremental build in $CACHE/bench-py-build)"
  if "$BENCH_VENV/bin/python" -m pip install -q --disable-pip-version-check \
      -C build-dir="$CACHE/bench-py-build" "$REPO" 'matplotlib>=3.5' >"$CACHE/bench-pip.log" 2>&1; then
    echo "commit $(tree_id), installed $(date -u '+%Y-%m-%d %H:%M UTC')" >"$BENCH_VENV/mongoelector-tree.txt"
  else
    tail -n 30 "$CACHE/bench-pip.log" >&2
    say "WARNING: pip install of this tree failed (log $CACHE/bench-pip.log); using what $BENCH_VENV has"
    HARNESS_ARGS+=(--note "python=STALE: pip install of this tree failed; the package installed before is used ($(cat "$BENCH_VENV/mongoelector-tree.txt" 2>/dev/null || echo 'unknown tree'))")
  fi
elif [[ -f "$BENCH_VENV/mongoelector-tree.txt" ]]; then
  HARNESS_ARGS+=(--note "python=--no-install: package from $(cat "$BENCH_VENV/mongoelector-tree.txt")")
fi
if [[ -x "$BENCH_VENV/bin/python" ]] && (cd / && env -u PYTHONPATH "$BENCH_VENV/bin/python" -c \
    "import mongoelector, pymongo; assert mongoelector.__version__ != '1.0.2'") 2>/dev/null; then
  HARNESS_ARGS+=(--ours-python "$BENCH_VENV/bin/python")
  PY="$BENCH_VENV/bin/python"
else
  say "WARNING: no Python contenders of ours ($BENCH_VENV lacks the package)"
  PY="$BENCH_VENV/bin/python"
  [[ -x "$PY" ]] || PY=python3
fi
"$PY" -c "import pymongo" 2>/dev/null || { say "error: $PY has no pymongo (needed by the harness)"; exit 1; }

# ---- ours through the C API -----------------------------------------------------------
DRIVER="$BUILD/bench_contender"
if ((INSTALL && !INSTR)); then
  say "building libmongoelector in $BUILD"
  if cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMONGOELECTOR_BUILD_TESTS=OFF \
      -DMONGOELECTOR_BUILD_PYTHON=OFF >"$BUILD.log" 2>&1 &&
    cmake --build "$BUILD" -j2 --target mongoelector >>"$BUILD.log" 2>&1; then
    # contender.c uses only the public header and the shared library, as any C program.
    if ! cc -O2 -std=c99 -Wall -Wextra -I "$REPO/capi/include" "$HERE/contender.c" \
        -L "$BUILD/capi" -lmongoelector -Wl,-rpath,"$BUILD/capi" -lpthread -o "$DRIVER.tmp" \
        >>"$BUILD.log" 2>&1; then
      tail -n 20 "$BUILD.log" >&2
      say "WARNING: contender.c did not compile (log $BUILD.log)"
      HARNESS_ARGS+=(--note "c=STALE: contender.c did not compile; an older build is used")
    else
      mv -f "$DRIVER.tmp" "$DRIVER"
    fi
  else
    tail -n 30 "$BUILD.log" >&2
    say "WARNING: the C library did not build (log $BUILD.log)"
    HARNESS_ARGS+=(--note "c=STALE: the C library of this tree did not build; an older build is used")
  fi
fi
if [[ -x "$DRIVER" ]]; then
  HARNESS_ARGS+=(--c-driver "$DRIVER")
elif ((!INSTR)); then
  say "WARNING: no C API contender ($DRIVER)"
fi

# ---- ours through Go (optional) -------------------------------------------------------
if ((GO && !INSTR)); then
  GODRV="$BUILD/bench_contender_go"
  if bash "$HERE/go/build.sh" "$REPO" "$BUILD" "$GODRV" >"$BUILD.go.log" 2>&1; then
    HARNESS_ARGS+=(--go-driver "$GODRV")
  else
    tail -n 20 "$BUILD.go.log" >&2
    say "WARNING: the Go contender did not build (log $BUILD.go.log): running without it"
  fi
fi

# ---- the server -----------------------------------------------------------------------
if [[ -z "${MONGOELECTOR_TEST_URI:-}" ]] && ((INSTALL)); then
  kind=java
  for ((i = 0; i < ${#ARGS[@]}; i++)); do
    [[ "${ARGS[$i]}" == --server ]] && kind="${ARGS[$((i + 1))]:-java}"
  done
  bash "$REPO/tests/servers/testserver.sh" install "$kind"
fi

cd "$REPO"
if ((INSTR)); then
  say "prepared in $((SECONDS - T0)) s; counting instructions (tests/bench/instructions.py)"
  IARGS=(--python-ours "$PY" --python-original "$ORIG_VENV/bin/python")
  if [[ -n "${MONGOELECTOR_TEST_URI:-}" || " ${ARGS[*]} " == *" --uri "* ]]; then
    exec "$PY" "$HERE/instructions.py" "${IARGS[@]}" "${ARGS[@]}"
  fi
  exec bash "$REPO/tests/servers/testserver.sh" run java -- \
    "$PY" "$HERE/instructions.py" "${IARGS[@]}" "${ARGS[@]}"
fi
say "prepared in $((SECONDS - T0)) s; running the harness"
exec "$PY" "$HERE/harness.py" "${HARNESS_ARGS[@]}" "${ARGS[@]}"
