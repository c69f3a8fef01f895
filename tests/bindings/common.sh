# Sourced by the binding runners: builds libmongoelector when needed and exports
# MONGOELECTOR_LIB_DIR (the directory holding libmongoelector.so).
#   BUILD_DIR: $1 of the runner, default build-bindings in the checkout (reused if present)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
BUILD="${1:-$REPO/build-bindings}"
mkdir -p "$BUILD" && BUILD="$(cd "$BUILD" && pwd)"  # absolute: used from other directories
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  cmake -S "$REPO" -B "$BUILD" -DMONGOELECTOR_BUILD_PYTHON=OFF -DMONGOELECTOR_BUILD_TESTS=OFF >/dev/null
fi
cmake --build "$BUILD" -j"${MONGOELECTOR_JOBS:-2}" --target mongoelector >/dev/null
MONGOELECTOR_LIB_DIR="$(dirname "$(find "$BUILD" -name 'libmongoelector.so' -not -path '*/CMakeFiles/*' | head -1)")"
[[ -f "$MONGOELECTOR_LIB_DIR/libmongoelector.so" ]] || { echo "no libmongoelector.so under $BUILD" >&2; exit 1; }
export MONGOELECTOR_LIB_DIR

# Without a server URI, run under a fresh mongo-java-server (stopped afterwards).
# Usage: with_server "$0" "$@"   (re-executes the runner inside `testserver.sh run java`)
with_server() {
  if [[ -z "${MONGOELECTOR_TEST_URI:-}" && -x "$REPO/tests/servers/testserver.sh" && -z "${MONGOELECTOR_NO_SERVER:-}" ]]; then
    exec bash "$REPO/tests/servers/testserver.sh" run java -- bash "$@"
  fi
}
