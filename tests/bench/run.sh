#!/usr/bin/env bash
# The benchmark command: builds bench_core, starts mongo-java-server (unless
# MONGOELECTOR_TEST_URI names a server already), runs the core's benchmark and the
# original Python package's, and prints both tables and a comparison.
#
# Environment:
#   MONGOELECTOR_BUILD_DIR         CMake build directory (default: <repo>/build)
#   MONGOELECTOR_TEST_URI          use this server instead of starting mongo-java-server
#   MONGOELECTOR_BENCH_ITERATIONS  measured iterations per operation (default 2000)
#   MONGOELECTOR_CACHE             cache root (venv of the original, test servers)
# Not a test and not run by CI: numbers depend on the machine.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
BUILD="${MONGOELECTOR_BUILD_DIR:-$REPO/build}"
ITER="${MONGOELECTOR_BENCH_ITERATIONS:-2000}"
case "$ITER" in '' | *[!0-9]* | 0) echo "run.sh: MONGOELECTOR_BENCH_ITERATIONS must be a positive integer" >&2; exit 2 ;; esac

if [[ "${1:-}" != "--inner" ]]; then
    echo "run.sh: building bench_core in $BUILD" >&2
    cmake -S "$REPO" -B "$BUILD" -DMONGOELECTOR_BUILD_TESTS=ON >/dev/null
    cmake --build "$BUILD" --target bench_core -j2 >/dev/null
    if [[ -n "${MONGOELECTOR_TEST_URI:-}" ]]; then
        exec "$0" --inner
    fi
    exec bash "$REPO/tests/servers/testserver.sh" run java -- "$0" --inner
fi

# --inner: MONGOELECTOR_TEST_URI is set.
BENCH="$BUILD/tests/bench/bench_core"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
SERVER="${MONGOELECTOR_TEST_SERVER:-}"
case "$SERVER" in
    java) SERVER_DESC="mongo-java-server 1.47.0 (in-memory, loopback), $(nproc) cores" ;;
    "") SERVER_DESC="$MONGOELECTOR_TEST_URI" ;;
    *) SERVER_DESC="$SERVER (loopback), $(nproc) cores" ;;
esac

# A fresh JVM compiles its hot paths during the first thousands of commands: warm the
# server with both clients first so that neither measurement pays for it.
echo "run.sh: warming up the server" >&2
"$BENCH" --iterations 300 --warmup 0 --seconds 1 >/dev/null
python3 "$HERE/original_roundtrips.py" --iterations 300 --warmup 0 --seconds 1 >/dev/null

echo "## ours: mongoelector core (C++, libmongoc)"
echo
"$BENCH" --iterations "$ITER" --json "$OUT/ours.json"
echo
echo
echo "## original: mongoelector 1.0.2 (pure Python, pymongo)"
echo
python3 "$HERE/original_roundtrips.py" --iterations "$ITER" --json "$OUT/original.json"
echo
python3 "$HERE/combine.py" "$OUT/ours.json" "$OUT/original.json" "$SERVER_DESC"
