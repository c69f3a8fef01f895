#!/usr/bin/env bash
# Quick-start demo: three processes elect a leader over a real MongoDB-protocol server
# (mongo-java-server on a free loopback port, or $MONGOELECTOR_TEST_URI), the leader is
# killed with SIGKILL, and another process takes over. Prints the measured failover.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TTL="${DEMO_TTL:-3}"
install_apt
install_servers java
build_native
say "build the demo node (C, public header + libmongoelector.so only)"
cc -std=c99 -Wall -Wextra -pedantic -Werror -I"$ROOT/capi/include" \
  "$ROOT/capi/examples/demo_node.c" -L"$BUILD_DIR/capi" -lmongoelector \
  -Wl,-rpath,"$BUILD_DIR/capi" -o "$BUILD_DIR/demo_node"

STARTED_SERVER=""
URI="${MONGOELECTOR_TEST_URI:-}"
if [[ -z "$URI" ]]; then
  URI="$(bash "$ROOT/tests/servers/testserver.sh" start java | tail -n1)"
  STARTED_SERVER="$URI"
fi
LOG="$(mktemp)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [[ -n "$STARTED_SERVER" ]] && bash "$ROOT/tests/servers/testserver.sh" stop "$STARTED_SERVER" >/dev/null 2>&1
  rm -f "$LOG"
}
trap cleanup EXIT

mono() { python3 -c 'import time; print(f"{time.monotonic():.3f}")'; }
wait_for() {  # wait_for REGEX TIMEOUT_S: prints the first log line matching after the current count
  local re="$1" deadline=$(( $(date +%s) + $2 )) from="$3"
  while (( $(date +%s) < deadline )); do
    local line
    line="$(tail -n +"$from" "$LOG" | grep -E -m1 "$re" || true)"
    [[ -n "$line" ]] && { echo "$line"; return 0; }
    sleep 0.1
  done
  return 1
}

say "three nodes elect a leader on $URI (ttl ${TTL}s)"
for n in node-1 node-2 node-3; do
  "$BUILD_DIR/demo_node" "$URI" "$n" "$TTL" >>"$LOG" 2>&1 &
  PIDS+=($!)
  sleep 0.2
done
first="$(wait_for ' LEADER ' 30 1)" || { cat "$LOG"; echo "no leader elected" >&2; exit 1; }
sleep $((TTL * 2))  # several renewals: leadership must stay put
cat "$LOG"
if grep -q "LOST-LEADERSHIP" "$LOG" || (( $(grep -c " LEADER " "$LOG") != 1 )); then
  echo "leadership flapped while the leader was healthy" >&2
  exit 1
fi
leader="$(awk '{print $2}' <<<"$first")"
idx="${leader#node-}"
leader_pid="${PIDS[$((idx - 1))]}"
lines_before=$(( $(wc -l <"$LOG") + 1 ))

say "kill -9 the leader ($leader, pid $leader_pid)"
killed_at="$(mono)"
kill -9 "$leader_pid"
wait "$leader_pid" 2>/dev/null || true
second="$(wait_for ' LEADER ' $((TTL * 3 + 10)) "$lines_before")" || { cat "$LOG"; echo "no failover" >&2; exit 1; }
echo "$second"
new_at="$(awk '{print $1}' <<<"$second")"
python3 - "$killed_at" "$new_at" "$TTL" <<'PY'
import sys
killed, new, ttl = map(float, sys.argv[1:])
print(f"\nfailover: {new - killed:.2f} s after SIGKILL (ttl {ttl:g} s; the original package "
      f"needs up to ttl + 60 s for its TTL monitor + one follower poll)")
PY
