#!/usr/bin/env bash
# One process holding and renewing N keys (1, 10, 100, 1000; ttl 15) on one client:
# threads, server connections, RSS and missed renewals, for the library built from this
# tree and for a baseline commit (default: the last one before the shared pool), side
# by side. Starts mongo-java-server unless MONGOELECTOR_TEST_URI names a server.
#
#   bash tests/bench/pool.sh [--baseline REV] [--sizes 1,10,100,1000] [--seconds 20]
#
# Not a test and not run by CI: the figures depend on the machine.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

BASELINE="${POOL_BENCH_BASELINE:-b43f592}"
INNER=0
ARGS=()
while (($#)); do
  case "$1" in
    --baseline) BASELINE="$2"; shift 2 ;;
    --inner) INNER=1; shift ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
OLD_SRC="$CACHE/pool-baseline/$BASELINE/src"
OLD_BUILD="$CACHE/pool-baseline/$BASELINE/build"

if ((INNER == 0)); then
  install_apt
  install_pip
  install_servers java
  say "build (this tree): libmongoelector and pool_bench"
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD_DIR" -j2 --target mongoelector pool_bench >/dev/null
  if [[ ! -f "$OLD_BUILD/.built" ]]; then
    say "build (baseline $BASELINE): libmongoelector"
    rm -rf "$OLD_SRC" "$OLD_BUILD" && mkdir -p "$OLD_SRC"
    git -C "$ROOT" archive "$BASELINE" | tar -x -C "$OLD_SRC"
    cmake -S "$OLD_SRC" -B "$OLD_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DMONGOELECTOR_BUILD_TESTS=OFF >/dev/null
    cmake --build "$OLD_BUILD" -j2 --target mongoelector >/dev/null
    touch "$OLD_BUILD/.built"
  fi
  export POOL_BENCH_BASELINE="$BASELINE"
  if [[ -n "${MONGOELECTOR_TEST_URI:-}" ]]; then
    exec bash "${BASH_SOURCE[0]}" --inner "${ARGS[@]}"
  fi
  exec bash "$ROOT/tests/servers/testserver.sh" run java -- \
    bash "${BASH_SOURCE[0]}" --inner "${ARGS[@]}"
fi

say "pool benchmark on $MONGOELECTOR_TEST_URI ($(nproc) cores)"
python3 "$ROOT/tests/bench/pool_bench.py" --bench "$BUILD_DIR/tests/bench/pool_bench" \
  --design "one pool per locker (baseline $BASELINE)=$OLD_BUILD/capi" \
  --design "shared pool (this tree)=$BUILD_DIR/capi" "${ARGS[@]}"
