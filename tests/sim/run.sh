#!/usr/bin/env bash
# The simulation's profiles: CI (default: 2,000 schedules) and --long (1,000,000).
# Extra arguments go to mongoelector_sim (e.g. --jobs 4, --expect-violations).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$ROOT/build/tests/sim/mongoelector_sim"
SEEDS="1..2000"
ARGS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) BIN="$2"; shift 2 ;;
    --long) SEEDS="1..1000000"; shift ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
if [[ ! -x "$BIN" ]]; then
  cmake --build "$ROOT/build" -j2 --target mongoelector_sim
fi
exec "$BIN" --seeds "$SEEDS" --jobs "$(nproc)" --quiet "${ARGS[@]}"
