#!/usr/bin/env bash
# The simulation's profiles: CI (default: 2,000 schedules or $MONGOELECTOR_SIM_CI_SEEDS,
# then the seeds in found_seeds.txt) and --long (1,000,000).
# Extra arguments go to mongoelector_sim (e.g. --jobs 4, --expect-violations).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BIN="$ROOT/build/tests/sim/mongoelector_sim"
SEEDS="${MONGOELECTOR_SIM_CI_SEEDS:-1..2000}"  # the quick loop runs fewer
FOUND=1
ARGS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) BIN="$2"; shift 2 ;;
    --long) SEEDS="1..1000000"; FOUND=0; shift ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
if [[ ! -x "$BIN" ]]; then
  cmake --build "$ROOT/build" -j2 --target mongoelector_sim
fi
"$BIN" --seeds "$SEEDS" --jobs "$(nproc)" --quiet "${ARGS[@]}"
if ((FOUND)); then
  echo "seeds found beyond the CI profile (found_seeds.txt):"
  grep -v '^#' "$HERE/found_seeds.txt" | while read -r seed why; do
    [[ -n "$seed" ]] || continue
    "$BIN" --seeds "$seed..$seed" --jobs 1 --quiet "${ARGS[@]}" | grep -E "^seed|^schedules run" | sed "s/^/  $seed: /"
    test "${PIPESTATUS[0]}" -eq 0
  done
fi
