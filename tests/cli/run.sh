#!/usr/bin/env bash
# Tests of the `mongoelector` command (capi/cli) with real processes: on the embedded
# SQLite backend (no server), then on mongo-java-server (started here through
# tests/servers/testserver.sh), or on one given storage.
#
#   bash tests/cli/run.sh [BUILD_DIR]                 SQLite, then java (what CI runs)
#   bash tests/cli/run.sh BUILD_DIR --sqlite          SQLite only (no Java needed)
#   bash tests/cli/run.sh BUILD_DIR --uri URI         one storage (mongodb://... or sqlite:///...)
#   MONGOELECTOR_CLI_TESTS="t_grace_rule ..." bash tests/cli/run.sh ...   only those tests
#
# BUILD_DIR (default: build/) must hold capi/cli/mongoelector and capi/libmongoelector.so
# (cmake --build BUILD_DIR --target mongoelector_cli). Exits non-zero if a test fails.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="$(cd "${1:-$ROOT/build}" && pwd)"
shift || true
MODE="${1:-all}"
BIN="$BUILD_DIR/capi/cli/mongoelector"
[[ -x "$BIN" ]] || { echo "no $BIN: cmake --build $BUILD_DIR --target mongoelector_cli" >&2; exit 2; }

if [[ "$MODE" == all ]]; then
  bash "$0" "$BUILD_DIR" --sqlite
  rc_sqlite=$?
  bash "$ROOT/tests/servers/testserver.sh" run java -- \
    bash -c 'bash "$0" "$1" --uri "$MONGOELECTOR_TEST_URI"' "$0" "$BUILD_DIR"
  rc_java=$?
  (( rc_sqlite == 0 && rc_java == 0 ))
  exit $?
fi

T="$(mktemp -d "${TMPDIR:-/tmp}/mongoelector-cli-test.XXXXXX")"
HELPER="$T/force_lock"
cc -std=c99 -Wall -Wextra -Werror -I"$ROOT/capi/include" "$ROOT/tests/cli/force_lock.c" \
  -L"$BUILD_DIR/capi" -lmongoelector -Wl,-rpath,"$BUILD_DIR/capi" -o "$HELPER" || exit 2
SEMHOLD="$T/semaphore_hold"
cc -std=c99 -Wall -Wextra -Werror -I"$ROOT/capi/include" "$ROOT/tests/cli/semaphore_hold.c" \
  -L"$BUILD_DIR/capi" -lmongoelector -Wl,-rpath,"$BUILD_DIR/capi" -o "$SEMHOLD" || exit 2
MEMBER="$T/partition_member"
cc -std=c99 -Wall -Wextra -Werror -I"$ROOT/capi/include" "$ROOT/tests/cli/partition_member.c" \
  -L"$BUILD_DIR/capi" -lmongoelector -Wl,-rpath,"$BUILD_DIR/capi" -o "$MEMBER" || exit 2

case "$MODE" in
  --sqlite) URI="sqlite://$T/locks.db"; DB=""; STORAGE=sqlite ;;
  --uri)
    URI="$2"
    if [[ "$URI" == sqlite:* ]]; then DB=""; STORAGE=sqlite; else DB=mongoelector; STORAGE=mongo; fi
    ;;
  *) echo "usage: $0 [BUILD_DIR] [--sqlite | --uri URI]" >&2; exit 2 ;;
esac
export MONGOELECTOR_URI="$URI"
SERVER_PID=""
if [[ "$STORAGE" == mongo && "${MONGOELECTOR_TEST_SERVER:-}" == java ]]; then
  port="${URI##*:}"; port="${port%%/*}"
  SERVER_PID="$(cat "${MONGOELECTOR_CACHE:-$HOME/.cache/mongoelector}/run/$port/pid" 2>/dev/null || true)"
fi
cleanup() {
  [[ -n "$SERVER_PID" ]] && kill -CONT "$SERVER_PID" 2>/dev/null
  jobs -p | xargs -r kill -9 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT

PASSED=0
FAILED=()
SKIPPED=()
fail() { echo "    FAIL: $*" >&2; exit 1; }
now_ms() { date +%s%3N; }
# wait_for 'CONDITION' SECONDS: polls the condition (a shell command) every 20 ms.
wait_for() {
  local deadline=$(( $(now_ms) + ${2%.*} * 1000 ))
  until eval "$1"; do
    (( $(now_ms) > deadline )) && return 1
    sleep 0.02
  done
}
# exit_code PID SECONDS: waits for a background process of this shell; its exit status
# goes to $RC (999 if it did not exit in time: it is then killed).
exit_code() {
  RC=0
  if ! wait_for "! kill -0 $1 2>/dev/null" "$2"; then
    echo "    pid $1 did not exit in $2 s" >&2
    kill -9 "$1" 2>/dev/null || true
    RC=999
    return 0
  fi
  wait "$1" || RC=$?
}
json() {  # json FILE PYTHON-EXPRESSION-ON-d
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
run_test() {
  local name="$1"; shift
  # MONGOELECTOR_CLI_TESTS="t_a t_b": only those (a quicker loop while working on them).
  [[ -n "${MONGOELECTOR_CLI_TESTS:-}" && " $MONGOELECTOR_CLI_TESTS " != *" $1 "* ]] && return 0
  local start; start=$(now_ms)
  # Leftover background processes of a test die with it (their commands follow through
  # PR_SET_PDEATHSIG).
  ( set -e; trap 'set +e; p=$(jobs -p); [ -n "$p" ] && kill -9 $p 2>/dev/null; true' EXIT; "$@" )
  local rc=$?
  local ms=$(( $(now_ms) - start ))
  if (( rc == 0 )); then
    PASSED=$((PASSED + 1)); printf '  ok    %-58s %5d ms\n' "$name" "$ms"
  elif (( rc == 77 )); then
    SKIPPED+=("$name"); printf '  skip  %s\n' "$name"
  else
    FAILED+=("$name"); printf '  FAIL  %-58s %5d ms\n' "$name" "$ms"
  fi
}

# A command that records the signals it gets, says "ready", and waits (exits 7 on a signal).
cat >"$T/sig.sh" <<'EOF'
#!/bin/bash
for s in TERM INT HUP; do trap "echo $s >>\"\$OUT\"; kill \$c 2>/dev/null; exit 7" $s; done
echo "ready $MONGOELECTOR_FENCE $$" >>"$OUT"
sleep 1000 & c=$!
wait $c
EOF
# The collections and indexes of a database ("absent" when the server does not list it).
cat >"$T/dbstate.py" <<'EOF'
import json, sys
import pymongo
_, hostport, db = sys.argv
c = pymongo.MongoClient("mongodb://" + hostport, serverSelectionTimeoutMS=5000)
if db not in c.list_database_names():
    print("absent")
else:
    d = c[db]
    print(json.dumps({n: sorted(str(sorted(i["key"].items())) for i in d[n].list_indexes())
                      for n in sorted(d.list_collection_names())}, sort_keys=True))
EOF
# get.py URL: "CODE BODY" of a GET (no proxy; "000 error" when nothing answered).
cat >"$T/get.py" <<'EOF'
import sys, urllib.error, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
try:
    r = opener.open(sys.argv[1], timeout=2)
    code, body = r.status, r.read()
except urllib.error.HTTPError as e:
    code, body = e.code, e.read()
except Exception as e:  # noqa: BLE001
    code, body = 0, repr(e).encode()
print("%03d %s" % (code, body.decode(errors="replace").strip().replace("\n", " ")))
EOF
# raw.py PORT DATA-REPR: sends raw bytes, prints the reply's status line.
cat >"$T/raw.py" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(eval(sys.argv[2]))  # test input: a bytes expression
print(s.makefile("rb").readline().decode().strip())
EOF
# notify_recv.py SOCKET OUT: systemd's side of sd_notify: one line per message, with the
# time (ms) it came, until STOPPING=1 (or 60 s of silence). '@name': an abstract socket.
cat >"$T/notify_recv.py" <<'EOF'
import socket, sys, time
addr, out = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\0" + addr[1:] if addr.startswith("@") else addr)
open(out + ".bound", "w").close()
s.settimeout(60)
with open(out, "a") as f:
    while True:
        try:
            data = s.recv(4096)
        except socket.timeout:
            break
        for line in data.decode().splitlines():
            f.write("%d %s\n" % (time.time() * 1000, line))
        f.flush()
        if b"STOPPING=1" in data:
            break
EOF
# Mutual exclusion worker: start/end lines around a short critical section.
cat >"$T/worker.sh" <<'EOF'
#!/bin/bash
echo "start $1 $MONGOELECTOR_FENCE $MONGOELECTOR_KEY" >>"$LOG"
sleep 0.15
echo "end $1" >>"$LOG"
EOF
# Leader-only command of `elect`: logs when it starts and when it is stopped.
cat >"$T/leader.sh" <<'EOF'
#!/bin/bash
trap 'echo "stopped $NAME $(date +%s%3N)" >>"$LOG"; kill $c 2>/dev/null; exit 0' TERM INT
echo "lead $NAME $MONGOELECTOR_FENCE $(date +%s%3N)" >>"$LOG"
sleep 1000 & c=$!
wait $c
EOF
chmod +x "$T"/*.sh

# ---------------------------------------------------------------- tests -------

t_cli_basics() {
  "$BIN" --version | grep -q "^mongoelector 1\." || fail "--version"
  for sub in run elect status demo; do
    "$BIN" "$sub" --help | grep -q "^Usage: mongoelector $sub" || fail "$sub --help"
    "$BIN" "$sub" --help | grep -q "Exit status" || fail "$sub --help has no exit codes"
  done
  "$BIN" --help | grep -q "sqlite://" || fail "--help does not print the default URI"
  local rc=0; "$BIN" frobnicate 2>/dev/null || rc=$?; [[ $rc == 64 ]] || fail "unknown subcommand: $rc"
  rc=0; "$BIN" run k 2>/dev/null || rc=$?; [[ $rc == 64 ]] || fail "run without CMD: $rc"
  rc=0; "$BIN" run k --ttl -1 -- true 2>/dev/null || rc=$?; [[ $rc == 64 ]] || fail "bad --ttl: $rc"
  rc=0; "$BIN" run k -- /nonexistent/cmd 2>"$T/e" || rc=$?
  [[ $rc == 127 ]] && grep -q "not found" "$T/e" || fail "missing CMD: $rc $(cat "$T/e")"
  rc=0; "$BIN" run k -- sh -c 'exit 3' || rc=$?; [[ $rc == 3 ]] || fail "CMD status: $rc"
  rc=0; "$BIN" run k -- sh -c 'kill -KILL $$' || rc=$?; [[ $rc == 137 ]] || fail "CMD killed: $rc"
  rc=0; "$BIN" status k --uri sqlite:///nonexistent/dir/x.db 2>"$T/e" || rc=$?
  [[ $rc == 78 ]] && grep -q "does not exist" "$T/e" || fail "bad sqlite path: $rc $(cat "$T/e")"
}

t_uri_parser() {  # the URI is read by the library's parser (core/storage/uri.h), not by the command
  local rc=0; "$BIN" status k --uri "sqlite:$T/x.db" 2>"$T/e" || rc=$?
  [[ $rc == 78 ]] && grep -q "three slashes" "$T/e" || fail "sqlite: without //: $rc $(cat "$T/e")"
  rc=0; "$BIN" status k --uri "postgres://h/db" 2>"$T/e" || rc=$?
  [[ $rc == 78 ]] && grep -q "unknown scheme" "$T/e" || fail "unknown scheme: $rc $(cat "$T/e")"
}

t_default_uri() {  # no --uri, no MONGOELECTOR_URI: the per-user SQLite file, directory created
  local home="$T/home-$RANDOM"
  mkdir "$home"
  env -u MONGOELECTOR_URI -u XDG_STATE_HOME HOME="$home" "$BIN" run k -- true || fail "run on the default"
  [[ -f "$home/.local/state/mongoelector/locks.db" ]] || fail "no $home/.local/state/mongoelector/locks.db"
  env -u MONGOELECTOR_URI XDG_STATE_HOME="$home/xdg" "$BIN" run k -- true || fail "run on XDG"
  [[ -f "$home/xdg/mongoelector/locks.db" ]] || fail "XDG_STATE_HOME ignored"
  env -u MONGOELECTOR_URI XDG_STATE_HOME="$home/xdg" "$BIN" --help | grep -q "sqlite://$home/xdg/mongoelector/locks.db" ||
    fail "--help does not show the default path"
}

t_status_of_a_lock() {  # a key used by run only: its election is said unused, not "free"
  local key="lockonly-$RANDOM"
  "$BIN" run "$key" -- bash -c '"$0" status "$1" >"$2"' "$BIN" "$key" "$T/st.txt" || fail "run"
  grep -q "^lock *held by" "$T/st.txt" || fail "lock not shown held: $(cat "$T/st.txt")"
  grep -q "^election *not used for an election" "$T/st.txt" || fail "election: $(cat "$T/st.txt")"
  ! grep -q -E "^(leader|members) " "$T/st.txt" || fail "leader/members lines for a lock: $(cat "$T/st.txt")"
}

t_unreachable_server() {  # errors name the URI the user gave, not the driver's command
  local rc=0
  timeout 60 "$BIN" status k --uri "mongodb://127.0.0.1:1/x" 2>"$T/e" || rc=$?
  [[ $rc == 69 ]] || fail "status: exit $rc: $(cat "$T/e")"
  grep -q "cannot reach mongodb://127.0.0.1:1/x: no server answered within [0-9]* s" "$T/e" ||
    fail "status: $(cat "$T/e")"
  ! grep -q -i "createIndexes\|findAndModify" "$T/e" || fail "status names a driver command: $(cat "$T/e")"
  rc=0
  timeout 60 "$BIN" run k --uri "mongodb://127.0.0.1:1/x" -- true 2>"$T/e" || rc=$?
  [[ $rc == 69 ]] && grep -q "cannot reach mongodb://127.0.0.1:1/x" "$T/e" || fail "run: exit $rc: $(cat "$T/e")"
}

t_default_uri_says_host_only() {  # run/elect on the per-user file say once that it locks this host only
  local home="$T/home-$RANDOM" note="locks on this host only; set MONGOELECTOR_URI or --uri to coordinate hosts"
  mkdir "$home"
  env -u MONGOELECTOR_URI XDG_STATE_HOME="$home" "$BIN" run k -- true 2>"$T/e" || fail "run: $(cat "$T/e")"
  [[ $(grep -c -F "$note" "$T/e") == 1 ]] || fail "run on the default file: no single note: $(cat "$T/e")"
  env -u MONGOELECTOR_URI XDG_STATE_HOME="$home" "$BIN" elect k -- true 2>"$T/e" || true
  [[ $(grep -c -F "$note" "$T/e") == 1 ]] || fail "elect on the default file: no single note: $(cat "$T/e")"
  # Not with a URI given, from either place; never from status.
  env -u MONGOELECTOR_URI "$BIN" run k --uri "sqlite://$home/given.db" -- true 2>"$T/e" || fail "run --uri: $(cat "$T/e")"
  ! grep -q -F "host only" "$T/e" || fail "note printed with --uri"
  MONGOELECTOR_URI="sqlite://$home/given.db" "$BIN" run k -- true 2>"$T/e" || fail "run MONGOELECTOR_URI: $(cat "$T/e")"
  ! grep -q -F "host only" "$T/e" || fail "note printed with MONGOELECTOR_URI"
  env -u MONGOELECTOR_URI XDG_STATE_HOME="$home" "$BIN" status k >/dev/null 2>"$T/e" || true
  ! grep -q -F "host only" "$T/e" || fail "note printed by status"
}

t_mutual_exclusion() {  # 3 processes x 3 runs each on one key: never two CMDs at once
  local key="mutex-$RANDOM" pids=()
  export LOG="$T/mutex.log"; : >"$LOG"
  for w in a b c; do
    ( for i in 1 2 3; do "$BIN" run "$key" --ttl 5 --wait --timeout 60 -- "$T/worker.sh" "$w$i" || exit 1; done ) &
    pids+=($!)
  done
  for p in "${pids[@]}"; do exit_code "$p" 90; [[ $RC == 0 ]] || fail "a worker failed"; done
  python3 - "$LOG" "$key" <<'PY' || fail "overlap or fences out of order: $(cat "$LOG")"
import sys
lines = [l.split() for l in open(sys.argv[1])]
assert len(lines) == 18, len(lines)
last = 0
for i in range(0, 18, 2):
    s, e = lines[i], lines[i + 1]
    assert s[0] == "start" and e == ["end", s[1]], (s, e)   # no other start in between
    assert s[3] == sys.argv[2], s                               # MONGOELECTOR_KEY
    assert int(s[2]) > last, (s, last)                          # MONGOELECTOR_FENCE increases
    last = int(s[2])
PY
}

t_held_timeout_status() {  # 75 at once when held; --timeout; status --json names the holder
  local key="held-$RANDOM"
  export OUT="$T/held.out"; : >"$OUT"
  mkfifo "$T/go"
  "$BIN" run "$key" --ttl 5 -- bash -c 'echo "ready $MONGOELECTOR_FENCE" >>"$OUT"; read -r _ <"$0"' "$T/go" &
  local holder=$!
  wait_for "grep -q ready '$OUT'" 10 || fail "holder did not start"
  local fence1; fence1=$(awk '/ready/{print $2}' "$OUT")
  local rc=0 t0; t0=$(now_ms)
  "$BIN" run "$key" -- sh -c 'echo ran >>"$OUT"' 2>"$T/e" || rc=$?
  (( rc == 75 )) || fail "held without --wait: exit $rc"
  (( $(now_ms) - t0 < 2000 )) || fail "75 was not at once"
  grep -q "held by .* pid $holder" "$T/e" || fail "does not say who holds it: $(cat "$T/e")"
  rc=0; t0=$(now_ms)
  "$BIN" run "$key" --wait --timeout 0.5 -- sh -c 'echo ran >>"$OUT"' 2>"$T/e" || rc=$?
  local waited=$(( $(now_ms) - t0 ))
  (( rc == 75 && waited >= 450 && waited < 3000 )) || fail "--timeout 0.5: exit $rc after $waited ms"
  ! grep -q ran "$OUT" || fail "CMD ran without the lock"
  "$BIN" status "$key" --json >"$T/status.json" || fail "status --json"
  [[ $(json "$T/status.json" 'd["lock"]["pid"]') == "$holder" ]] || fail "status names $(cat "$T/status.json")"
  [[ $(json "$T/status.json" 'd["lock"]["fence"]') == "$fence1" ]] || fail "status fence"
  [[ $(json "$T/status.json" '0 < d["lock"]["expires_in_s"] <= 5') == True ]] || fail "status expiry"
  "$BIN" status "$key" | grep -q "held by .* pid $holder" || fail "status table"
  # SIGTERM while waiting: 128+15 at once, CMD not run.
  "$BIN" run "$key" --wait --verbose -- sh -c 'echo ran >>"$OUT"' 2>"$T/e" &
  local impatient=$!
  wait_for "grep -q 'waiting for $key, held by' '$T/e'" 5 || fail "no 'waiting' message: $(cat "$T/e")"
  t0=$(now_ms); kill -TERM "$impatient"
  exit_code "$impatient" 5
  (( RC == 143 && $(now_ms) - t0 < 2000 )) || fail "SIGTERM while waiting: exit $RC: $(cat "$T/e")"
  ! grep -q ran "$OUT" || fail "CMD ran without the lock"
  # A waiter gets the lock as soon as the holder's CMD exits (released, not expired).
  "$BIN" run "$key" --wait --timeout 20 -- sh -c 'echo "waiter $MONGOELECTOR_FENCE" >>"$OUT"' &
  local waiter=$!
  echo go >"$T/go"
  exit_code "$holder" 10; [[ $RC == 0 ]] || fail "holder exit"
  t0=$(now_ms)
  exit_code "$waiter" 10; [[ $RC == 0 ]] || fail "waiter exit"
  (( $(now_ms) - t0 < 3000 )) || fail "waiter waited for expiry instead of the release"
  local fence2; fence2=$(awk '/waiter/{print $2}' "$OUT")
  (( fence2 > fence1 )) || fail "fence did not increase: $fence1 -> $fence2"
  "$BIN" status "$key" --json >"$T/status.json"
  [[ $(json "$T/status.json" 'd["lock"]') == None ]] || fail "not released: $(cat "$T/status.json")"
}

t_signals_forwarded() {  # SIGTERM, SIGINT, SIGHUP to `run` reach CMD once; its status comes back
  for sig in TERM INT HUP; do
    export OUT="$T/sig-$sig.out"; : >"$OUT"
    # Signals ignored where the suite was started (nohup: HUP; a background job: INT)
    # stay ignored by the command, as for any Unix program: start it with their defaults.
    env --default-signal=INT,HUP "$BIN" run "sig-$RANDOM" -- "$T/sig.sh" &
    local pid=$!
    wait_for "grep -q ready '$OUT'" 10 || fail "CMD did not start"
    kill -"$sig" "$pid"
    exit_code "$pid" 10; local rc=$RC
    [[ $rc == 7 ]] || fail "SIG$sig: exit $rc"
    [[ $(grep -c "^$sig\$" "$OUT") == 1 ]] || fail "SIG$sig not forwarded once: $(cat "$OUT")"
  done
}

t_lost_forced() {  # the lock forced away while CMD runs: CMD gets SIGTERM, exit 70
  local key="forced-$RANDOM"
  export OUT="$T/forced.out"; : >"$OUT"
  "$BIN" run "$key" --ttl 3 -- "$T/sig.sh" 2>"$T/e" &
  local pid=$!
  wait_for "grep -q ready '$OUT'" 10 || fail "CMD did not start"
  local t0; t0=$(now_ms)
  "$HELPER" "$URI" "$DB" "$key" 30 >/dev/null || fail "force_lock"
  exit_code "$pid" 10; local rc=$RC
  local took=$(( $(now_ms) - t0 ))
  [[ $rc == 70 ]] || fail "exit $rc: $(cat "$T/e")"
  grep -qx TERM "$OUT" || fail "CMD did not get SIGTERM: $(cat "$OUT")"
  grep -q "LOST" "$T/e" || fail "no message: $(cat "$T/e")"
  (( took < 3000 )) || fail "noticed after $took ms (ttl 3 s, renewals every 1 s)"
  echo "    lock forced away: CMD stopped and exit 70 after $took ms (ttl 3 s)"
}

t_lost_grace_kill() {  # a CMD ignoring SIGTERM is killed after --grace
  local key="grace-$RANDOM"
  "$BIN" run "$key" --ttl 10 --grace 0.5 -- bash -c "trap '' TERM; echo ready >'$T/grace.out'; while :; do sleep 0.05; done" 2>"$T/e" &
  local pid=$!
  wait_for "[ -s '$T/grace.out' ]" 10 || fail "CMD did not start"
  local t0; t0=$(now_ms)
  "$HELPER" "$URI" "$DB" "$key" 30 >/dev/null || fail "force_lock"
  exit_code "$pid" 10; local rc=$RC
  [[ $rc == 70 ]] || fail "exit $rc: $(cat "$T/e")"
  grep -q "SIGKILL" "$T/e" || fail "no SIGKILL: $(cat "$T/e")"
  (( $(now_ms) - t0 >= 500 )) || fail "killed before the grace period"
}

# A CMD that ignores SIGTERM and logs the time (microseconds, this host's wall clock:
# SQLite's server clock) every 10 ms.
cat >"$T/tick.sh" <<'EOF'
#!/bin/bash
trap "" TERM
echo ready >>"$OUT"
while :; do echo "tick ${EPOCHREALTIME/./}" >>"$OUT"; sleep 0.01; done
EOF
chmod +x "$T/tick.sh"
# sqlite_write_lock DB FLAG [KEY]: another process takes SQLite's write lock on DB (every
# renewal fails from then on), then creates FLAG; with KEY, FLAG holds the expiry (ms) of
# the last renewal of the lock KEY that made it, read inside that transaction. Runs until
# killed. Run it in the background: its $! is the python process (exec).
sqlite_write_lock() {
  exec python3 -c '
import datetime, json, os, sqlite3, sys, time
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("BEGIN EXCLUSIVE")
ms = ""
if len(sys.argv) > 3:
    doc = json.loads(con.execute("SELECT doc FROM documents WHERE coll = ? AND id = ?",
                                 ("mongolocker", json.dumps(sys.argv[3]))).fetchone()[0])
    d = doc["ts_expire"]["$date"]
    if isinstance(d, dict):
        ms = int(d["$numberLong"])
    elif isinstance(d, str):
        ms = round(datetime.datetime.fromisoformat(d.replace("Z", "+00:00")).timestamp() * 1000)
    else:
        ms = int(d)
with open(sys.argv[2] + ".tmp", "w") as f:
    f.write(str(ms))
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
while True:
    time.sleep(1)' "$@"
}

t_lost_deadline_before_takeover() {  # storage cut off: a CMD ignoring SIGTERM is dead before another holder can start
  [[ $STORAGE == sqlite ]] || { echo "    (SQLite: the database is write-locked by another process)"; exit 77; }
  local key="deadline-$RANDOM" ttl=3 db="${URI#sqlite://}"
  export OUT="$T/deadline.out"; : >"$OUT"
  # No --grace: the default must keep its own rule. CMD ignores SIGTERM and logs the time
  # (microseconds, this host's wall clock: SQLite's server clock) every 10 ms.
  "$BIN" run "$key" --ttl $ttl -- "$T/tick.sh" 2>"$T/e" &
  local pid=$!
  wait_for "grep -q ready '$OUT'" 10 || fail "CMD did not start: $(cat "$T/e")"
  sqlite_write_lock "$db" "$T/write-locked" "$key" &
  local blocker=$!
  wait_for "[ -e '$T/write-locked' ]" 10 || fail "could not lock the database"
  local expire; expire=$(cat "$T/write-locked")
  wait_for "grep -q LOST '$T/e'" $((ttl + 2)) || fail "the lease was not lost: $(cat "$T/e")"
  # The next holder: waits for the lock, which is free once it has expired.
  "$BIN" run "$key" --wait --timeout 20 -- bash -c 'echo "second ${EPOCHREALTIME/./}" >>"$OUT"' 2>"$T/e2" &
  local second=$!
  kill "$blocker"; wait "$blocker" 2>/dev/null || true
  exit_code "$pid" 10; local rc=$RC
  exit_code "$second" 20; [[ $RC == 0 ]] || fail "the next holder: exit $RC: $(cat "$T/e2")"
  [[ $rc == 70 ]] || fail "exit $rc: $(cat "$T/e")"
  grep -q "SIGKILL" "$T/e" || fail "no SIGKILL: $(cat "$T/e")"
  local last_tick second_at
  last_tick=$(awk '/^tick /{t=$2} END{print t}' "$OUT")
  second_at=$(awk '/^second /{print $2}' "$OUT")
  (( last_tick < expire * 1000 )) ||
    fail "CMD ran until $(( last_tick / 1000 )), $(( last_tick / 1000 - expire )) ms past the lease's expiry $expire: $(cat "$T/e")"
  (( last_tick < second_at )) || fail "CMD still ran when the next holder started ($last_tick >= $second_at)"
  echo "    storage cut off: CMD (ignoring SIGTERM) dead $(( expire - last_tick / 1000 )) ms before the lease could expire; next holder $(( (second_at - last_tick) / 1000 )) ms later (ttl $ttl s, default --grace)"
}

t_grace_rule() {  # a --grace that lets CMD outlive the lease is refused, naming the values
  local rc=0
  "$BIN" run "g-$RANDOM" --ttl 30 --grace 5 -- true 2>"$T/e" || rc=$?
  (( rc == 64 )) || fail "run --ttl 30 --grace 5: exit $rc"
  grep -q -- "--grace 5" "$T/e" && grep -q -- "--ttl 30" "$T/e" && grep -q "1.5" "$T/e" ||
    fail "the message does not name the values: $(cat "$T/e")"
  rc=0; "$BIN" elect "g-$RANDOM" --grace 5 -- true 2>"$T/e" || rc=$?
  (( rc == 64 )) || fail "elect --grace 5 (default ttl 15): exit $rc"
  grep -q -- "--grace 5" "$T/e" && grep -q "0.75" "$T/e" || fail "elect message: $(cat "$T/e")"
  rc=0; "$BIN" elect "g-$RANDOM" --ttl 2 --grace 0.2 -- true 2>"$T/e" || rc=$?
  (( rc == 64 )) || fail "elect --ttl 2 --grace 0.2: exit $rc"
  "$BIN" run "g-$RANDOM" --ttl 30 --grace 1.5 -- true || fail "--grace ttl/20 is allowed"
  "$BIN" run "g-$RANDOM" --ttl 30 --grace 0 -- true || fail "--grace 0 is allowed"
  "$BIN" run --help | grep -q "ttl/20" || fail "run --help does not state the rule"
  "$BIN" elect --help | grep -q "ttl/20" || fail "elect --help does not state the rule"
}

t_lost_frozen_server() {  # server frozen (SIGSTOP): CMD, even one ignoring SIGTERM, dead before the lease can expire
  [[ -n "$SERVER_PID" ]] || { echo "    (needs a server started by testserver.sh: java)"; exit 77; }
  local key="frozen-$RANDOM" ttl=6
  export OUT="$T/frozen.out"; : >"$OUT"
  # Default --grace. CMD notes SIGTERM and goes on; it logs the time (us) every 10 ms.
  "$BIN" run "$key" --ttl $ttl -- bash -c \
    'trap "echo term \${EPOCHREALTIME/./} >>\"\$OUT\"" TERM; echo ready >>"$OUT"; while :; do echo "tick ${EPOCHREALTIME/./}" >>"$OUT"; sleep 0.01; done' 2>"$T/e" &
  local pid=$!
  wait_for "grep -q ready '$OUT'" 10 || fail "CMD did not start"
  # Freeze just after a renewal (its expiry then is the lease's last word: no renewal can
  # land between that read and the freeze; one sent during the freeze lands after it).
  "$BIN" status "$key" --json >"$T/status.json" || fail "status"
  local first expire
  first=$(json "$T/status.json" 'd["lock"]["expire_ms"]')
  expire=$first
  local give_up=$(( $(now_ms) + 10000 ))
  while (( expire == first )); do
    (( $(now_ms) < give_up )) || fail "the lease was not renewed within 10 s"
    "$BIN" status "$key" --json >"$T/status.json" || fail "status"
    expire=$(json "$T/status.json" 'd["lock"]["expire_ms"]')
  done
  kill -STOP "$SERVER_PID"
  local t_freeze; t_freeze=$(now_ms)
  exit_code "$pid" $((ttl + 5)); local rc=$RC
  kill -CONT "$SERVER_PID"
  [[ $rc == 70 ]] || fail "exit $rc: $(cat "$T/e")"
  local t_term last_tick
  t_term=$(awk '/^term /{print substr($2, 1, length($2) - 3); exit}' "$OUT")  # us -> ms
  last_tick=$(awk '/^tick /{t=$2} END{print substr(t, 1, length(t) - 3)}' "$OUT")
  [[ -n "$t_term" ]] || fail "CMD got no SIGTERM: $(cat "$T/e")"
  (( t_term < expire )) || fail "SIGTERM at $t_term, after the lease's expiry $expire"
  (( last_tick < expire )) || fail "CMD ran until $last_tick, $(( last_tick - expire )) ms past the lease's expiry $expire"
  echo "    server frozen: CMD got SIGTERM $(( t_term - t_freeze )) ms after the freeze, $(( expire - t_term )) ms before the lease could expire; ignoring it, it was dead $(( expire - last_tick )) ms before (ttl $ttl s)"
}

t_elect_failover() {  # kill -9 of the leading `elect`: its CMD stops, the other leads
  local key="elect-$RANDOM" ttl=2
  export LOG="$T/elect.log"; : >"$LOG"
  NAME=e1 env --default-signal=INT "$BIN" elect "$key" --ttl $ttl -- "$T/leader.sh" 2>"$T/e1" &
  local p1=$!
  NAME=e2 env --default-signal=INT "$BIN" elect "$key" --ttl $ttl -- "$T/leader.sh" 2>"$T/e2" &
  local p2=$!
  wait_for "grep -q '^lead' '$LOG'" 20 || fail "nobody leads: $(cat "$T/e1" "$T/e2")"
  read -r _ first fence1 _ < <(grep '^lead' "$LOG")
  local leader_pid=$p1 other_pid=$p2 other=e2
  [[ $first == e2 ]] && { leader_pid=$p2; other_pid=$p1; other=e1; }
  # Each member reports at its first poll: the one that does not lead may report after
  # the leader's first line.
  wait_for "'$BIN' status '$key' --json >'$T/status.json' && [[ \$(json '$T/status.json' 'len(d[\"members\"])') == 2 ]]" 10 ||
    fail "status members: $(cat "$T/status.json")"
  [[ $(json "$T/status.json" 'd["leader"]["pid"]') == "$leader_pid" ]] || fail "status leader: $(cat "$T/status.json")"
  # Each member's report carries its process's metrics: both have talked to the storage.
  [[ $(json "$T/status.json" 'min(m["metrics"]["round_trips"] for m in d["members"]) > 0') == True ]] ||
    fail "status metrics: $(cat "$T/status.json")"
  # The table: counters only with --verbose; the key is an election, not a lock.
  "$BIN" status "$key" >"$T/status.txt"
  ! grep -q "round trips" "$T/status.txt" || fail "status table shows counters without --verbose"
  grep -q "^lock *not used as a lock" "$T/status.txt" || fail "status of an election: $(cat "$T/status.txt")"
  "$BIN" status "$key" --verbose | grep -q "round trips" || fail "status --verbose without counters"
  local t_kill; t_kill=$(now_ms)
  kill -9 "$leader_pid"; wait "$leader_pid" 2>/dev/null || true
  wait_for "grep -q '^stopped $first' '$LOG'" 5 || fail "the killed leader's CMD still runs"
  wait_for "grep -q '^lead $other' '$LOG'" $((3 * ttl + 5)) || fail "no failover: $(cat "$LOG" "$T/e1" "$T/e2")"
  read -r _ _ fence2 t_lead < <(grep "^lead $other" "$LOG")
  local failover=$(( t_lead - t_kill ))
  (( failover < ttl * 1000 + 1500 )) || fail "failover took $failover ms (ttl $ttl s)"
  (( fence2 > fence1 )) || fail "fence $fence1 -> $fence2"
  kill -INT "$other_pid"
  exit_code "$other_pid" 10; [[ $RC == 0 ]] || fail "elect did not exit 0 on SIGINT"
  grep -q "^stopped $other" "$LOG" || fail "CMD not stopped on Ctrl-C"
  "$BIN" status "$key" --json >"$T/status.json"
  [[ $(json "$T/status.json" 'd["leader"]') == None ]] || fail "leadership not released: $(cat "$T/status.json")"
  echo "    elect failover: $failover ms after kill -9 of the leader (ttl $ttl s)"
}

t_elect_loss_stops_cmd() {  # leadership lost (lock forced away): CMD stopped, led again later
  local key="eloss-$RANDOM"
  export LOG="$T/eloss.log"; : >"$LOG"
  # Leadership is lost by freezing the leading `elect` process (SIGSTOP) beyond its lease:
  # on SIGCONT its renew deadline has passed and it must stop CMD at once.
  NAME=e1 "$BIN" elect "$key" --ttl 2 -- "$T/leader.sh" 2>"$T/e1" &
  local p1=$!
  wait_for "grep -q '^lead e1' '$LOG'" 20 || fail "e1 does not lead"
  NAME=e2 "$BIN" elect "$key" --ttl 2 -- "$T/leader.sh" 2>"$T/e2" &
  local p2=$!
  kill -STOP "$p1"            # e1 frozen: its lease expires, e2 takes over
  wait_for "grep -q '^lead e2' '$LOG'" 10 || fail "e2 did not take over"
  kill -CONT "$p1"            # e1 wakes past its deadline: stops its CMD, follows
  wait_for "grep -q '^stopped e1' '$LOG'" 5 || fail "e1 did not stop its CMD: $(cat "$T/e1")"
  grep -q "leadership LOST" "$T/e1" || fail "no message: $(cat "$T/e1")"
  kill -TERM "$p2"            # e2 leaves: e1 leads again and restarts CMD
  exit_code "$p2" 10; [[ $RC == 0 ]] || fail "e2 exit"
  wait_for "[ \$(grep -c '^lead e1' '$LOG') -ge 2 ]" 10 || fail "e1 did not lead again"
  kill -TERM "$p1"
  exit_code "$p1" 10; [[ $RC == 0 ]] || fail "e1 exit"
}

t_process_group() {  # signals reach CMD's whole group; what CMD leaves running dies with it
  local key="pgrp-$RANDOM"
  export OUT="$T/pgrp.out"; : >"$OUT"
  # CMD (bash, no trap: SIGTERM ends it) starts a worker that records the signals it gets.
  "$BIN" run "$key" -- bash -c 'sh -c "trap \"echo worker-TERM >>\$OUT; exit 0\" TERM; echo worker \$\$ >>\$OUT; while :; do sleep 0.05; done" & wait' &
  local pid=$!
  wait_for "grep -q '^worker ' '$OUT'" 10 || fail "worker did not start"
  local worker; worker=$(awk '/^worker /{print $2}' "$OUT")
  kill -TERM "$pid"
  exit_code "$pid" 10
  (( RC == 143 )) || fail "exit $RC, expected CMD's 128+15"
  wait_for "grep -q worker-TERM '$OUT'" 5 || fail "the worker CMD started never got SIGTERM"
  wait_for "! kill -0 $worker 2>/dev/null" 5 || fail "worker $worker still running"
  # CMD exits 3 and leaves a process behind: the status is CMD's, the leftover is killed.
  : >"$OUT"
  local rc=0
  "$BIN" run "$key" -- bash -c 'sleep 1000 & echo "left $!" >>"$OUT"; exit 3' || rc=$?
  (( rc == 3 )) || fail "exit $rc, expected CMD's 3"
  local left; left=$(awk '/^left /{print $2}' "$OUT")
  wait_for "! kill -0 $left 2>/dev/null" 5 || fail "process $left left by CMD still runs without the lock"
  # Killed by a signal: 128+N.
  rc=0
  "$BIN" run "$key" -- bash -c 'kill -KILL $$' || rc=$?
  (( rc == 137 )) || fail "CMD killed by SIGKILL: exit $rc"
}

t_min_hold() {  # --min-hold: the lock stays taken until min_hold after the acquire
  local key="minhold-$RANDOM" rc=0 t0
  t0=$(now_ms)
  "$BIN" run "$key" --min-hold 3 -- true || fail "first run"
  "$BIN" run "$key" -- sh -c 'echo ran >>"$T/minhold.out"' 2>"$T/e" || rc=$?
  (( rc == 75 )) || fail "a second run within min_hold: exit $rc"
  [[ ! -e "$T/minhold.out" ]] || fail "ran within min_hold"
  "$BIN" status "$key" --json >"$T/status.json"
  [[ $(json "$T/status.json" '0 < d["lock"]["expires_in_s"] <= 3') == True ]] || fail "status: $(cat "$T/status.json")"
  "$BIN" run "$key" --wait --timeout 10 -- sh -c 'echo ran >>"$T/minhold.out"' || fail "waiter"
  local waited=$(( $(now_ms) - t0 ))
  (( waited >= 2900 && waited < 6000 )) || fail "free after $waited ms, expected about 3000"
  rc=0; "$BIN" run "$key" --min-hold 1x -- true 2>/dev/null || rc=$?
  (( rc == 64 )) || fail "bad --min-hold: exit $rc"
  # CMD takes the lock away (by force) and exits before a renewal notices: the minimum
  # hold cannot be kept; run says so and keeps CMD's status.
  local key2="minhold-lost-$RANDOM"
  rc=0; "$BIN" run "$key2" --min-hold 30 -- "$HELPER" "$URI" "$DB" "$key2" 30 >/dev/null 2>"$T/e" || rc=$?
  (( rc == 0 )) || fail "a min hold not kept: exit $rc: $(cat "$T/e")"
  grep -q "may be taken again before --min-hold 30 s ends" "$T/e" || fail "no warning: $(cat "$T/e")"
  echo "    --min-hold 3: the next run started $waited ms after the first began"
}

t_once_per() {  # --once-per: one run per window whatever node fires it
  local key="once-$RANDOM"
  export OUT="$T/once.out"; : >"$OUT"
  # 4 s windows (aligned on the server's clock, the host's here on loopback): start 0.3 s
  # into one so that everything below happens inside it.
  while (( $(now_ms) % 4000 < 300 || $(now_ms) % 4000 > 600 )); do sleep 0.02; done
  local pids=() i
  for i in 1 2 3; do
    "$BIN" run "$key" --once-per 4s --wait --timeout 3 -- sh -c "echo run $i >>'$OUT'" 2>>"$T/e" &
    pids+=($!)
  done
  local ok=0 skipped=0
  for i in "${pids[@]}"; do
    exit_code "$i" 10
    if (( RC == 0 )); then ok=$((ok + 1)); elif (( RC == 75 )); then skipped=$((skipped + 1)); else fail "exit $RC"; fi
  done
  (( ok == 1 && skipped == 2 )) || fail "$ok ran, $skipped skipped: $(cat "$OUT" "$T/e")"
  [[ $(grep -c '^run ' "$OUT") == 1 ]] || fail "ran $(grep -c '^run ' "$OUT") times in one window"
  grep -q "already ran in this 4 s window" "$T/e" || fail "no message: $(cat "$T/e")"
  # The next window runs again, once.
  local next=$(( $(now_ms) / 4000 + 1 ))
  while (( $(now_ms) / 4000 < next || $(now_ms) % 4000 < 300 )); do sleep 0.02; done
  "$BIN" run "$key" --once-per 4s -- sh -c "echo run next >>'$OUT'" || fail "next window"
  local rc=0; "$BIN" run "$key" --once-per 4s -- sh -c "echo run again >>'$OUT'" 2>/dev/null || rc=$?
  (( rc == 75 )) || fail "second run in the next window: exit $rc"
  [[ $(grep -c '^run ' "$OUT") == 2 ]] || fail "runs: $(cat "$OUT")"
  rc=0; "$BIN" run "$key" --once-per 0 -- true 2>/dev/null || rc=$?
  (( rc == 64 )) || fail "--once-per 0: exit $rc"
}

t_terminal() {  # at a terminal: CMD reads what is typed; Ctrl-C reaches it once
  python3 "$ROOT/tests/cli/pty_run.py" "$BIN" "tty-$RANDOM" >"$T/pty.out" 2>&1 || fail "$(cat "$T/pty.out")"
}

t_status_reads_only() {  # status sends reads only: it creates no database, collection or index
  [[ $STORAGE == mongo ]] || { echo "    (MongoDB: databases, collections and indexes listed around status)"; exit 77; }
  local hp="${URI#mongodb://}"; hp="${hp%%/*}"; hp="${hp%%\?*}"
  local db="ro$RANDOM" key="ro-$RANDOM"
  # A database that does not exist: status answers "free" and leaves nothing behind.
  "$BIN" status "$key" --uri "mongodb://$hp/$db" --json >"$T/ro.json" || fail "status: $(cat "$T/ro.json")"
  [[ $(json "$T/ro.json" 'd["lock"] is None and d["leader"] is None and d["members"] == []') == True ]] ||
    fail "status of nothing: $(cat "$T/ro.json")"
  # (mongo-java-server lists a database once any command named it, a find included: there
  # it shows without collections; MongoDB does not list it at all.)
  python3 "$T/dbstate.py" "$hp" "$db" >"$T/empty"
  [[ $(cat "$T/empty") == "absent" || $(cat "$T/empty") == "{}" ]] || fail "status created in $db: $(cat "$T/empty")"
  # A database where `run` holds the lock: status names it and adds no collection or index
  # (not the elector's, which the key never used).
  "$BIN" run "$key" --uri "mongodb://$hp/${db}b" -- bash -c \
    'python3 "$0" "$1" "$2" >"$3/before" && "$4" status "$5" --uri "mongodb://$1/$2" --json >"$3/ro2.json" && python3 "$0" "$1" "$2" >"$3/after"' \
    "$T/dbstate.py" "$hp" "${db}b" "$T" "$BIN" "$key" || fail "run/status: $(cat "$T/ro2.json" 2>/dev/null)"
  [[ $(json "$T/ro2.json" 'd["lock"]["pid"] > 0') == True ]] || fail "status does not name the holder: $(cat "$T/ro2.json")"
  grep -q '"mongolocker"' "$T/before" || fail "the snapshot does not see run's collection: $(cat "$T/before")"
  cmp -s "$T/before" "$T/after" || fail "status changed the database: $(diff "$T/before" "$T/after")"
}

t_status_partitions() {  # status shows a partition group: members, each partition's owner and token; --json
  local group="pg-$RANDOM"
  "$MEMBER" "$URI" "$DB" "$group" 6 3 >"$T/m1.out" 2>"$T/m1.err" &
  local m1=$!
  wait_for "grep -q '^owns 6' '$T/m1.out'" 20 || fail "first member: $(cat "$T/m1.out" "$T/m1.err")"
  local u1; u1=$(awk '/^uuid/ {print $2}' "$T/m1.out")
  "$BIN" status "$group" --json >"$T/pg.json" || fail "status --json: $(cat "$T/pg.json")"
  [[ $(json "$T/pg.json" 'd["partition_group"]["partitions"]') == 6 ]] || fail "partitions: $(cat "$T/pg.json")"
  [[ $(json "$T/pg.json" 'all(o["owner"] == "'"$u1"'" and o["token"] > 0 for o in d["partition_group"]["owners"])') == True ]] ||
    fail "owners: $(cat "$T/pg.json")"
  [[ $(json "$T/pg.json" 'd["partition_group"]["settled"]') == True ]] || fail "settled: $(cat "$T/pg.json")"
  [[ $(json "$T/pg.json" '[m["pid"] for m in d["partition_group"]["members"]]') == "[$m1]" ]] || fail "members: $(cat "$T/pg.json")"
  # A second member: the group is shared, each partition owned by the member rendezvous
  # hashing assigns it (with 6 partitions one member may be assigned none).
  "$MEMBER" "$URI" "$DB" "$group" 6 3 >"$T/m2.out" 2>"$T/m2.err" &
  local m2=$!
  wait_for "'$BIN' status '$group' --json >'$T/pg.json' && [[ \$(json '$T/pg.json' 'd[\"partition_group\"][\"settled\"] and sum(m[\"live\"] for m in d[\"partition_group\"][\"members\"]) == 2') == True ]]" 30 ||
    fail "not shared: $(cat "$T/pg.json")"
  [[ $(json "$T/pg.json" 'sorted((m["pid"], m["owned"] == m["assigned"]) for m in d["partition_group"]["members"])') == \
     "$(python3 -c "print(sorted([($m1, True), ($m2, True)]))")" ]] || fail "members' shares: $(cat "$T/pg.json")"
  [[ $(json "$T/pg.json" 'all(o["owner"] == o["assigned"] for o in d["partition_group"]["owners"])') == True ]] ||
    fail "owner != assigned: $(cat "$T/pg.json")"
  "$BIN" status "$group" >"$T/pg.txt" || fail "status table"
  grep -q "^partitions 6 in group $group, settled" "$T/pg.txt" && grep -q "^election  not used for an election" "$T/pg.txt" ||
    fail "table header: $(cat "$T/pg.txt")"
  grep -q " $m1  " "$T/pg.txt" && grep -q " $m2  " "$T/pg.txt" || fail "table members: $(cat "$T/pg.txt")"
  grep -q " pid $m1 \| pid $m2 " "$T/pg.txt" || fail "table owners: $(cat "$T/pg.txt")"
  [[ $(grep -c " live " "$T/pg.txt") == 2 ]] || fail "table members: $(cat "$T/pg.txt")"
  # Both leave: no member is live; --partitions still reads the partitions (free).
  kill -TERM "$m1" "$m2"
  exit_code "$m1" 20; [[ $RC == 0 ]] || fail "member 1 exit $RC: $(cat "$T/m1.err")"
  exit_code "$m2" 20; [[ $RC == 0 ]] || fail "member 2 exit $RC: $(cat "$T/m2.err")"
  "$BIN" status "$group" --json >"$T/pg.json" || fail "status after"
  [[ $(json "$T/pg.json" 'd["partition_group"]') == None ]] || fail "a group without live members: $(cat "$T/pg.json")"
  "$BIN" status "$group" --partitions 6 --json >"$T/pg.json" || fail "status --partitions"
  [[ $(json "$T/pg.json" 'all(o["owner"] is None and o["token"] > 0 for o in d["partition_group"]["owners"])') == True ]] ||
    fail "released: $(cat "$T/pg.json")"
  local rc=0; "$BIN" status "$group" --partitions 0 2>"$T/e" || rc=$?
  [[ $rc == 64 ]] && grep -q -- "--partitions must be a whole number" "$T/e" || fail "--partitions 0: $rc $(cat "$T/e")"
}

t_status_rwlock() {  # status shows a read-write lock's readers and its writer (table and --json)
  local key="rws-$RANDOM"
  export LOG="$T/rws.log" RELEASE="$T/rws-release-$RANDOM"; : >"$LOG"
  "$BIN" run --shared "$key" --ttl 10 -- "$T/rw.sh" r1 2>"$T/r1.err" &
  local r1=$!
  "$BIN" run --shared "$key" --ttl 10 -- "$T/rw.sh" r2 2>"$T/r2.err" &
  local r2=$!
  wait_for "[[ \$(grep -c '^start r' '$LOG') == 2 ]]" 15 || fail "readers: $(cat "$LOG" "$T"/r?.err)"
  "$BIN" status "$key" --json >"$T/rws.json" || fail "status --json"
  [[ $(json "$T/rws.json" 'sorted(h["side"] for h in d["rwlock"])') == "['read', 'read']" ]] || fail "holders: $(cat "$T/rws.json")"
  [[ $(json "$T/rws.json" 'all(h["fence"] > 0 and h["expire_ms"] > d["server_time_ms"] for h in d["rwlock"])') == True ]] ||
    fail "fences: $(cat "$T/rws.json")"
  "$BIN" status "$key" >"$T/rws.txt"
  [[ $(grep -c "read            by .* pid" "$T/rws.txt") == 2 ]] || fail "table: $(cat "$T/rws.txt")"
  touch "$RELEASE"
  exit_code "$r1" 15; exit_code "$r2" 15
  "$BIN" status "$key" --json >"$T/rws.json"
  [[ $(json "$T/rws.json" 'd["rwlock"]') == "[]" ]] || fail "released: $(cat "$T/rws.json")"
}

t_status_sqlite_read_only() {  # status opens a SQLite file read-only: no write permission needed, nothing created
  [[ $STORAGE == sqlite ]] || { echo "    (SQLite files listed around status)"; exit 77; }
  local key="ro-$RANDOM" d="$T/ro"
  mkdir -m 0755 "$d"
  # A file that does not exist (its directory does): "free", and the file is not created.
  "$BIN" status "$key" --uri "sqlite://$d/none.db" --json >"$T/ro.json" || fail "status: $(cat "$T/ro.json")"
  [[ $(json "$T/ro.json" 'd["lock"] is None and d["leader"] is None') == True ]] || fail "status of nothing: $(cat "$T/ro.json")"
  [[ ! -e $d/none.db ]] || fail "status created $d/none.db"
  # A file where `run` holds the lock, read by a user who may not write it (0644, owned by
  # someone else; as root the check runs under uid 65534): status names the holder and
  # leaves the file's bytes as they were.
  local as_other=()
  if (( $(id -u) == 0 )); then
    as_other=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    chmod 0711 "$T"  # uid 65534 may pass through to $d
  fi
  "$BIN" run "$key" --uri "sqlite://$d/held.db" -- bash -c \
    'chmod 0644 "$1/held.db"* && sha256sum "$1/held.db" >"$1/before" && "${@:4}" "$2" status "$3" --uri "sqlite://$1/held.db" --json >"$1/ro2.json" 2>"$1/ro2.err"; rc=$?; sha256sum "$1/held.db" >"$1/after"; exit $rc' \
    _ "$d" "$BIN" "$key" "${as_other[@]}" || fail "run/status: $(cat "$d/ro2.json" "$d/ro2.err" 2>/dev/null)"
  [[ $(json "$d/ro2.json" 'd["lock"]["pid"] > 0') == True ]] || fail "status does not name the holder: $(cat "$d/ro2.json")"
  cmp -s "$d/before" "$d/after" || fail "status changed the file"
}

# http PORT PATH: "CODE BODY" from this host's 127.0.0.1:PORT; code PORT PATH: the code only.
http() { python3 "$T/get.py" "http://127.0.0.1:$1$2"; }
code() { http "$1" "$2" | cut -d' ' -f1; }
# http_port FILE: the port an `--http 127.0.0.1:0` process printed on stderr.
http_port() { sed -n 's/.*http: listening on [0-9.]*:\([0-9]*\)$/\1/p' "$1" | head -n 1; }

t_http_elect_failover() {  # --http: /leader, /healthz, /readyz of two members; kill -9 of the leader
  local key="http-$RANDOM" ttl=3
  export LOG="$T/http.log"; : >"$LOG"
  NAME=h1 "$BIN" elect "$key" --ttl $ttl --http 127.0.0.1:0 -- "$T/leader.sh" 2>"$T/h1" &
  local p1=$!
  # The second once the first has opened the storage: two processes creating one new
  # SQLite file at the same instant can find it locked (when this test runs alone).
  wait_for "[[ -n \$(http_port '$T/h1') ]]" 10 || fail "no port printed: $(cat "$T/h1")"
  NAME=h2 "$BIN" elect "$key" --ttl $ttl --http 127.0.0.1:0 -- "$T/leader.sh" 2>"$T/h2" &
  local p2=$!
  wait_for "[[ -n \$(http_port '$T/h1') && -n \$(http_port '$T/h2') ]]" 10 || fail "no port printed: $(cat "$T/h1" "$T/h2")"
  local port1 port2; port1=$(http_port "$T/h1"); port2=$(http_port "$T/h2")
  # One member ready, the other not, and its /leader naming the ready one (read every
  # ttl/4). Roles are read again at each try: under load a first term may end early.
  local lport oport lpid opid
  agreed() {
    if [[ $(code $port1 /readyz) == 200 ]]; then lport=$port1 oport=$port2 lpid=$p1 opid=$p2
    elif [[ $(code $port2 /readyz) == 200 ]]; then lport=$port2 oport=$port1 lpid=$p2 opid=$p1
    else return 1; fi
    [[ $(code $oport /readyz) == 503 ]] && http $oport /leader | grep -q "\"pid\": $lpid}"
  }
  wait_for agreed 20 || fail "no agreed leader: $(http $port1 /leader) $(http $port2 /leader) $(cat "$T/h1" "$T/h2")"
  [[ $(code $lport /healthz) == 200 && $(code $oport /healthz) == 200 ]] || fail "unhealthy: $(http $lport /healthz) $(http $oport /healthz)"
  http $lport /leader >"$T/leader.txt"
  cut -d' ' -f2- "$T/leader.txt" >"$T/leader.json"
  [[ $(json "$T/leader.json" 'd["status"] == "leads" and d["leader"]["pid"] == '$lpid' and d["fence"] == d["self"]["fence"] > 0 and d["self"]["ready"] and 0 < d["expires_in_s"] <= '$ttl) == True ]] ||
    fail "/leader of the leader: $(cat "$T/leader.txt")"
  # Requests it refuses: bad request line, oversized, unknown path, another method.
  [[ $(python3 "$T/raw.py" $lport "b'BLAH\r\n\r\n'") == "HTTP/1.1 400 Bad Request" ]] || fail "garbage not refused"
  [[ $(python3 "$T/raw.py" $lport "b'GET /healthz HTTP/1.1\r\nX: ' + b'a' * 20000 + b'\r\n\r\n'") == "HTTP/1.1 400 Bad Request" ]] || fail "oversized request not refused"
  [[ $(code $lport /nothing) == 404 ]] || fail "unknown path"
  [[ $(python3 "$T/raw.py" $lport "b'POST /leader HTTP/1.1\r\n\r\n'") == "HTTP/1.1 405 Method Not Allowed" ]] || fail "POST not refused"
  local t_kill; t_kill=$(now_ms)
  kill -9 $lpid
  wait_for "[[ \$(code $oport /readyz) == 200 ]]" $((ttl * 5)) || fail "the other member never became ready: $(cat "$T/h1" "$T/h2")"
  local t_ready; t_ready=$(now_ms)
  [[ $(code $oport /healthz) == 200 ]] || fail "new leader unhealthy: $(http $oport /healthz)"
  wait_for "http $oport /leader | grep -q '\"pid\": $opid}'" 5 || fail "/leader after failover: $(http $oport /leader)"
  echo "    /readyz of the other member turned 200 $(( t_ready - t_kill )) ms after kill -9 of the leader (ttl $ttl s)"
  kill -TERM $opid; exit_code $opid 10; [[ $RC == 0 ]] || fail "exit $RC"
}

t_elect_payload() {  # elect --payload: /leader and status show the leader's, a new term its own
  local key="payload-$RANDOM" ttl=2 rc=0
  "$BIN" elect "$key" --payload '[1, 2]' -- true 2>"$T/pe" || rc=$?
  [[ $rc == 64 ]] && grep -q "payload" "$T/pe" || fail "a list payload: exit $rc: $(cat "$T/pe")"
  export LOG="$T/payload.log"; : >"$LOG"
  NAME=q1 "$BIN" elect "$key" --ttl $ttl --http 127.0.0.1:0 --payload '{"endpoint": "10.0.0.1:8080"}' -- "$T/leader.sh" 2>"$T/q1" &
  local p1=$!
  wait_for "[[ -n \$(http_port '$T/q1') ]]" 10 || fail "no port printed: $(cat "$T/q1")"
  local port1; port1=$(http_port "$T/q1")
  wait_for "[[ \$(code $port1 /readyz) == 200 ]] && http $port1 /leader | grep -q '\"pid\": $p1}'" 20 || fail "q1 never led: $(http $port1 /leader)"
  http $port1 /leader | cut -d' ' -f2- >"$T/pleader.json"
  [[ $(json "$T/pleader.json" 'd["payload"] == {"endpoint": "10.0.0.1:8080"}') == True ]] || fail "/leader: $(cat "$T/pleader.json")"
  "$BIN" status "$key" --json >"$T/pstatus.json" || fail "status"
  [[ $(json "$T/pstatus.json" 'd["leader"]["payload"] == {"endpoint": "10.0.0.1:8080"}') == True ]] || fail "status --json: $(cat "$T/pstatus.json")"
  "$BIN" status "$key" | grep -q 'payload   {"endpoint": "10.0.0.1:8080"}' || fail "status table: $("$BIN" status "$key")"
  NAME=q2 "$BIN" elect "$key" --ttl $ttl --http 127.0.0.1:0 --payload '{"endpoint": "10.0.0.2:8080"}' -- "$T/leader.sh" 2>"$T/q2" &
  local p2=$!
  wait_for "[[ -n \$(http_port '$T/q2') ]]" 10 || fail "no port printed: $(cat "$T/q2")"
  local port2; port2=$(http_port "$T/q2")
  kill -9 $p1
  # Every /leader read that names q2 carries q2's payload, never q1's.
  local seen=0
  for _ in $(seq 1 200); do
    http $port2 /leader | cut -d' ' -f2- >"$T/pleader2.json"
    if [[ $(json "$T/pleader2.json" 'd["leader"] is not None and d["leader"]["pid"] == '$p2) == True ]]; then
      [[ $(json "$T/pleader2.json" 'd["payload"] == {"endpoint": "10.0.0.2:8080"}') == True ]] || fail "q2's term showed: $(cat "$T/pleader2.json")"
      seen=$((seen + 1)); (( seen >= 3 )) && break
    fi
    sleep 0.1
  done
  (( seen >= 3 )) || fail "q2 never named by /leader: $(cat "$T/pleader2.json") $(cat "$T/q2")"
  kill -TERM $p2; exit_code $p2 10; [[ $RC == 0 ]] || fail "exit $RC"
}

t_elect_priority() {  # elect --priority: the higher member joins later and leads; bad values refused by name
  local key="prio-$RANDOM" ttl=2 rc args
  for args in "--priority abc:--priority" "--priority nan:--priority" "--priority inf:--priority" \
      "--priority 1 --priority-stability -1:--priority-stability" \
      "--priority 1 --priority-stability x:--priority-stability" \
      "--priority-stability 1:--priority-stability needs --priority"; do
    rc=0
    # shellcheck disable=SC2086
    "$BIN" elect "$key" ${args%%:*} -- true 2>"$T/prio-err" || rc=$?
    [[ $rc == 64 ]] && grep -q -- "${args#*:}" "$T/prio-err" || fail "${args%%:*}: exit $rc: $(cat "$T/prio-err")"
  done
  export LOG="$T/prio.log"; : >"$LOG"
  NAME=low "$BIN" elect "$key" --ttl $ttl --priority 0 --priority-stability 1 -- "$T/leader.sh" 2>"$T/low" &
  local p_low=$!
  wait_for "grep -q '^lead low' '$LOG'" 30 || fail "the first member never led: $(cat "$T/low")"
  read -r _ _ fence1 _ < <(grep '^lead low' "$LOG")
  NAME=high "$BIN" elect "$key" --ttl $ttl --priority 1 --priority-stability 1 -- "$T/leader.sh" 2>"$T/high" &
  local p_high=$!
  # No fixed delay: the hand-over comes after the stability delay and a poll or two.
  wait_for "grep -q '^lead high' '$LOG'" 60 || fail "the higher member never led: $(cat "$LOG" "$T/low" "$T/high")"
  read -r _ _ fence2 _ < <(grep '^lead high' "$LOG")
  (( fence2 > fence1 )) || fail "fence $fence1 -> $fence2"
  wait_for "grep -q '^stopped low' '$LOG'" 30 || fail "the lower member's CMD still runs: $(cat "$LOG")"
  wait_for "'$BIN' status '$key' --json >'$T/prio.json' && [[ \$(json '$T/prio.json' 'd[\"leader\"] is not None and d[\"leader\"][\"pid\"] == $p_high and sorted(m[\"priority\"] for m in d[\"members\"]) == [0, 1]') == True ]]" 30 ||
    fail "status: $(cat "$T/prio.json")"
  "$BIN" status "$key" | grep -q "priority 1" || fail "status table: $("$BIN" status "$key")"
  kill -TERM "$p_high" "$p_low"
  exit_code "$p_high" 20; [[ $RC == 0 ]] || fail "the leader exited $RC"
  exit_code "$p_low" 20; [[ $RC == 0 ]] || fail "the follower exited $RC"
}

t_http_run() {  # run --http: the holder is ready, a waiter healthy but not ready; /leader names the holder
  local key="httprun-$RANDOM"
  export OUT="$T/httprun.out"; : >"$OUT"
  "$BIN" run "$key" --ttl 3 --http 127.0.0.1:0 -- "$T/sig.sh" 2>"$T/r1" &
  local p1=$!
  wait_for "grep -q ready '$OUT'" 10 || fail "CMD did not start: $(cat "$T/r1")"
  # The waiter listens on every interface (":PORT"); 127.0.0.1 reaches it.
  "$BIN" run "$key" --ttl 3 --wait --http :0 -- true 2>"$T/r2" &
  local p2=$!
  wait_for "[[ -n \$(http_port '$T/r1') && -n \$(http_port '$T/r2') ]]" 10 || fail "no port: $(cat "$T/r1" "$T/r2")"
  local port1 port2; port1=$(http_port "$T/r1"); port2=$(http_port "$T/r2")
  [[ $(code $port1 /readyz) == 200 && $(code $port1 /healthz) == 200 ]] || fail "holder: $(http $port1 /readyz) $(http $port1 /healthz)"
  [[ $(code $port2 /readyz) == 503 && $(code $port2 /healthz) == 200 ]] || fail "waiter: $(http $port2 /readyz) $(http $port2 /healthz) $(cat "$T/r2")"
  wait_for "http $port2 /leader | grep -q '\"pid\": $p1}'" 5 || fail "/leader of the waiter: $(http $port2 /leader)"
  # Renewals keep it healthy past ttl/2 (the bound after the acquire).
  sleep 2
  [[ $(code $port1 /healthz) == 200 ]] || fail "holder unhealthy after renewals: $(http $port1 /healthz)"
  grep -q "listening on 0\.0\.0\.0:" "$T/r2" || fail ":PORT is not every interface: $(cat "$T/r2")"
  kill -TERM $p1; exit_code $p1 10
  exit_code $p2 10; [[ $RC == 0 ]] || fail "waiter exit $RC: $(cat "$T/r2")"
  # A bad ADDR is a usage error, before anything runs.
  local rc=0; "$BIN" run "$key" --http 127.0.0.1 -- true 2>"$T/e" || rc=$?
  [[ $rc == 64 ]] && grep -q "HOST:PORT" "$T/e" || fail "--http without a port: $rc $(cat "$T/e")"
  rc=0; "$BIN" elect "$key" --http 127.0.0.1:70000 -- true 2>"$T/e" || rc=$?
  [[ $rc == 64 ]] || fail "--http port 70000: $rc $(cat "$T/e")"
}

t_notify() {  # --notify: READY=1, STATUS=, WATCHDOG=1 every WatchdogSec/2, STOPPING=1; CMD does not get the socket
  local key="notify-$RANDOM" sock="@mongoelector-test-$RANDOM-$$"
  python3 "$T/notify_recv.py" "$sock" "$T/notify.log" &
  local rp=$!
  wait_for "[[ -e '$T/notify.log.bound' ]]" 10 || fail "receiver did not bind"
  NOTIFY_SOCKET="$sock" WATCHDOG_USEC=400000 "$BIN" elect "$key" --ttl 2 --notify -- \
    bash -c 'echo "env ${NOTIFY_SOCKET:-unset} ${WATCHDOG_USEC:-unset}" >"$0"; exec sleep 1000' "$T/notify.env" 2>"$T/n1" &
  local p1=$!
  wait_for "grep -q 'STATUS=leader of' '$T/notify.log'" 20 || fail "no leader status: $(cat "$T/notify.log" "$T/n1")"
  sleep 1.2
  kill -TERM $p1; exit_code $p1 10; [[ $RC == 0 ]] || fail "exit $RC: $(cat "$T/n1")"
  exit_code $rp 10
  local lines; lines=$(cut -d' ' -f2- "$T/notify.log" | tr '\n' '|')
  grep -q ' READY=1$' "$T/notify.log" || fail "no READY=1: $lines"
  grep -q ' STOPPING=1$' "$T/notify.log" || fail "no STOPPING=1: $lines"
  # READY first, STOPPING last; pings every 200 ms (WATCHDOG_USEC / 2) while it ran.
  [[ $(head -n 1 "$T/notify.log" | cut -d' ' -f2) == READY=1 ]] || fail "READY=1 not first: $lines"
  [[ $(tail -n 1 "$T/notify.log" | cut -d' ' -f2) == STOPPING=1 ]] || fail "STOPPING=1 not last: $lines"
  python3 - "$T/notify.log" <<'PY' || fail "watchdog pings: $lines"
import sys
t = [int(l.split()[0]) for l in open(sys.argv[1]) if l.split()[1] == "WATCHDOG=1"]
gaps = [b - a for a, b in zip(t, t[1:])]
assert len(t) >= 5, t
assert all(100 <= g <= 400 for g in gaps), gaps
PY
  [[ $(cat "$T/notify.env") == "env unset unset" ]] || fail "CMD got systemd's variables: $(cat "$T/notify.env")"
}

t_http_frozen_server() {  # server frozen: /healthz of the leader is 503 (and pings stop) before its lease could expire
  [[ -n "$SERVER_PID" ]] || { echo "    (needs a server started by testserver.sh: java)"; exit 77; }
  local key="hfrozen-$RANDOM" ttl=6 sock="@mongoelector-test-$RANDOM-$$"
  export LOG="$T/hfrozen.log"; : >"$LOG"
  python3 "$T/notify_recv.py" "$sock" "$T/hnotify.log" &
  wait_for "[[ -e '$T/hnotify.log.bound' ]]" 10 || fail "receiver did not bind"
  NAME=f1 NOTIFY_SOCKET="$sock" WATCHDOG_USEC=200000 "$BIN" elect "$key" --ttl $ttl --http 127.0.0.1:0 --notify -- "$T/leader.sh" 2>"$T/f1" &
  local p1=$!
  wait_for "[[ -n \$(http_port '$T/f1') ]]" 10 || fail "no port: $(cat "$T/f1")"
  local port; port=$(http_port "$T/f1")
  wait_for "[[ \$(code $port /readyz) == 200 ]]" 20 || fail "not leading: $(cat "$T/f1")"
  sleep 1  # a few pings while healthy
  [[ $(code $port /healthz) == 200 ]] || fail "unhealthy before the freeze: $(http $port /healthz)"
  kill -STOP "$SERVER_PID"
  local t_freeze t_503=""; t_freeze=$(now_ms)
  while (( $(now_ms) < t_freeze + ttl * 1000 + 2000 )); do
    if [[ $(code $port /healthz) == 503 ]]; then t_503=$(now_ms); break; fi
    sleep 0.05
  done
  # The lease's end after the node's last successful renewal (no renewal can land while
  # the server is frozen; one it applied without answering would only end it later).
  http $port /leader | cut -d' ' -f2- >"$T/hleader.json"
  http $port /healthz >"$T/h503"
  sleep 0.5
  local t_cont; t_cont=$(now_ms)
  kill -CONT "$SERVER_PID"
  [[ -n "$t_503" ]] || fail "/healthz never turned 503: $(cat "$T/f1")"
  local expire; expire=$(json "$T/hleader.json" 'd["self"]["lease_expire_ms"]')
  [[ "$expire" =~ ^[0-9]+$ ]] || fail "no lease end: $(cat "$T/hleader.json")"
  (( t_503 < expire )) || fail "/healthz turned 503 at $t_503, after the lease's expiry $expire"
  grep -q "no successful round trip" "$T/h503" || fail "reason: $(cat "$T/h503")"
  # The watchdog: pings while healthy, none from the 503 until the server runs again (the
  # receiver's clock is ours).
  local late
  late=$(awk -v t="$t_503" -v c="$t_cont" '$2 == "WATCHDOG=1" && $1 > t + 150 && $1 < c {n++} END {print n + 0}' "$T/hnotify.log")
  (( late == 0 )) || fail "$late watchdog pings after /healthz turned 503 at $t_503: $(cat "$T/hnotify.log")"
  awk -v t="$t_freeze" '$2 == "WATCHDOG=1" && $1 < t {n++} END {exit !(n > 3)}' "$T/hnotify.log" || fail "no pings before the freeze"
  grep -q "STATUS=unhealthy: " "$T/hnotify.log" || fail "no unhealthy STATUS"
  echo "    server frozen: /healthz 503 $(( t_503 - t_freeze )) ms after the freeze, $(( expire - t_503 )) ms before the lease could expire (ttl $ttl s); watchdog pings stopped"
  kill -TERM $p1; exit_code $p1 15
}

# A --shared/--exclusive CMD: logs its start (side, fence) and end; a reader stays until
# $RELEASE exists, so that the test decides when the readers end.
cat >"$T/rw.sh" <<'EOF'
#!/bin/bash
echo "start $1 $MONGOELECTOR_SIDE $MONGOELECTOR_FENCE $(date +%s%3N)" >>"$LOG"
if [[ $1 == r* ]]; then until [[ -e "$RELEASE" ]]; do sleep 0.02; done; else sleep 0.2; fi
echo "end $1 $(date +%s%3N)" >>"$LOG"
EOF
chmod +x "$T/rw.sh"

t_shared_exclusive() {  # run --shared: 3 hold together; --exclusive waits for them, stops new readers, runs alone
  local key="rw-$RANDOM" readers=()
  export LOG="$T/rw.log" RELEASE="$T/rw-release-$RANDOM"; : >"$LOG"
  for r in r1 r2 r3; do  # no --wait: each gets in at once, next to the others
    "$BIN" run --shared "$key" --ttl 5 $([[ $r == r1 ]] && echo --http 127.0.0.1:0) -- "$T/rw.sh" "$r" 2>"$T/$r.err" &
    readers+=($!)
  done
  wait_for "[[ \$(grep -c '^start r' '$LOG') == 3 ]]" 15 || fail "3 readers did not hold together: $(cat "$LOG" "$T"/r?.err)"
  local port; port=$(http_port "$T/r1.err")
  wait_for "http $port /leader | grep -q '\"status\": \"read\"'" 5 || fail "/leader: $(http $port /leader)"
  # /leader shows the holders as last read (read_age_s): wait for the read after the third.
  wait_for "[[ \$(http $port /leader | grep -o '\"host\"' | wc -l) == 3 ]]" 10 || fail "/leader readers: $(http $port /leader)"
  [[ $(code $port /readyz) == 200 ]] || fail "reader not ready: $(http $port /readyz)"
  # A writer without --wait: 75 at once, naming the readers.
  local rc=0; "$BIN" run --exclusive "$key" -- "$T/rw.sh" w0 2>"$T/e" || rc=$?
  [[ $rc == 75 ]] && grep -q "is held for reading by 3 processes" "$T/e" || fail "writer without --wait: $rc $(cat "$T/e")"
  # A waiting writer: new readers wait for it (75 without --wait, naming it).
  "$BIN" run --exclusive "$key" --ttl 5 --wait --timeout 60 --verbose -- "$T/rw.sh" w 2>"$T/w.err" &
  local writer=$!
  wait_for "grep -q 'waiting for $key for writing, held for reading by 3' '$T/w.err'" 10 || fail "writer: $(cat "$T/w.err")"
  wait_for "! '$BIN' run --shared '$key' -- true 2>'$T/e'" 10 || fail "a new reader entered past the waiting writer"
  rc=0; "$BIN" run --shared "$key" -- "$T/rw.sh" r4 2>"$T/e" || rc=$?
  [[ $rc == 75 ]] && grep -q "wanted by a waiting writer, .* pid $writer" "$T/e" || fail "reader past a waiting writer: $rc $(cat "$T/e")"
  # The plain lock KEY is another object: not held by any of them.
  "$BIN" run "$key" -- true || fail "the lock KEY was held by the read-write lock's holders"
  touch "$RELEASE"
  for p in "${readers[@]}"; do exit_code "$p" 10; [[ $RC == 0 ]] || fail "a reader exited $RC"; done
  exit_code "$writer" 20; [[ $RC == 0 ]] || fail "writer exit $RC: $(cat "$T/w.err")"
  "$BIN" run --shared "$key" -- "$T/rw.sh" w-after || fail "a reader after the writer"  # not r*: no wait
  python3 - "$LOG" <<'PY' || fail "order or fences wrong: $(cat "$LOG")"
import sys
ev = [l.split() for l in open(sys.argv[1])]
start = {e[1]: e for e in ev if e[0] == "start"}
end = {e[1]: int(e[2]) for e in ev if e[0] == "end"}
assert sorted(start) == ["r1", "r2", "r3", "w", "w-after"], sorted(start)
readers = [start[r] for r in ("r1", "r2", "r3")]
assert all(r[2] == "read" for r in readers) and start["w"][2] == "write", ev
w_start, w_fence = int(start["w"][4]), int(start["w"][3])
assert max(int(r[4]) for r in readers) < min(end[r] for r in ("r1", "r2", "r3")), ev  # together
assert all(end[r] <= w_start for r in ("r1", "r2", "r3")), ev      # the writer after every reader
assert all(w_fence > int(r[3]) for r in readers), ev               # and a greater token
assert end["w"] <= int(start["w-after"][4]) and int(start["w-after"][3]) > w_fence, ev
PY
}

t_shared_lost() {  # storage cut off under run --shared: CMD ignoring SIGTERM dead (70) before a writer starts
  [[ $STORAGE == sqlite ]] || { echo "    (SQLite: the database is write-locked by another process)"; exit 77; }
  local key="rwlost-$RANDOM" ttl=3 db="${URI#sqlite://}"
  export OUT="$T/rwlost.out"; : >"$OUT"
  "$BIN" run --shared "$key" --ttl $ttl -- "$T/tick.sh" 2>"$T/e" &
  local pid=$!
  wait_for "grep -q ready '$OUT'" 10 || fail "CMD did not start: $(cat "$T/e")"
  sqlite_write_lock "$db" "$T/rw-write-locked" &
  local blocker=$!
  wait_for "[ -e '$T/rw-write-locked' ]" 10 || fail "could not lock the database"
  wait_for "grep -q LOST '$T/e'" $((ttl + 2)) || fail "the lease was not lost: $(cat "$T/e")"
  "$BIN" run --exclusive "$key" --wait --timeout 20 -- bash -c 'echo "writer ${EPOCHREALTIME/./}" >>"$OUT"' 2>"$T/e2" &
  local writer=$!
  kill "$blocker"; wait "$blocker" 2>/dev/null || true
  exit_code "$pid" 10; local rc=$RC
  exit_code "$writer" 20; [[ $RC == 0 ]] || fail "the writer: exit $RC: $(cat "$T/e2")"
  [[ $rc == 70 ]] && grep -q "lease on $key for reading LOST" "$T/e" || fail "exit $rc: $(cat "$T/e")"
  local last_tick writer_at
  last_tick=$(awk '/^tick /{t=$2} END{print t}' "$OUT")
  writer_at=$(awk '/^writer /{print $2}' "$OUT")
  (( last_tick < writer_at )) || fail "the reader's CMD still ran when the writer started"
  echo "    --shared lease lost: CMD dead $(( (writer_at - last_tick) / 1000 )) ms before the writer started (ttl $ttl s)"
}

t_rw_bad_input() {  # --shared/--exclusive: bad combinations and values refused by name, exit 64
  local key="rwbad-$RANDOM" rc
  check64() {  # check64 TEXT ARGS...: exit 64 and TEXT on stderr
    local text="$1"; shift
    rc=0; "$BIN" run "$@" -- true 2>"$T/e" || rc=$?
    [[ $rc == 64 ]] && grep -q -e "$text" "$T/e" || fail "run $*: exit $rc: $(cat "$T/e")"
  }
  check64 "exclude each other" --shared --exclusive "$key"
  check64 "goes with --shared or --exclusive" --max-readers 4 "$key"
  check64 "min-hold applies to the lock KEY only" --shared --min-hold 5 "$key"
  check64 "once-per applies to the lock KEY only" --exclusive --once-per 1h "$key"
  check64 "max-readers must be a whole number" --shared --max-readers many "$key"
  check64 "max_readers must be an integer between 1 and" --shared --max-readers 0 "$key"
  check64 "max_readers must be an integer between 1 and" --exclusive --max-readers -2 "$key"
  "$BIN" run --shared --max-readers 2 "$key" -- true || fail "--max-readers 2"
  check64 "has max_readers 2" --shared --max-readers 3 "$key"
  check64 "has max_readers 2" --exclusive "$key"   # the default, 64, is another number
  "$BIN" run --exclusive --max-readers 2 "$key" -- true || fail "the same number is fine"
}

t_fair() {  # run --fair: waiters take KEY in the order they queued; --fair refused with --shared
  local key="fair-$RANDOM"
  export OUT="$T/fair.out" TURNS="$T/fair.turns"; : >"$OUT"; : >"$TURNS"
  mkfifo "$T/fair-go"
  "$BIN" run --fair "$key" -- bash -c 'echo ready >>"$OUT"; read -r _ <"$0"' "$T/fair-go" &
  local holder=$!
  wait_for "grep -q ready '$OUT'" 10 || fail "holder did not start"
  # queued N: a --fair run without --wait is refused (75) because N runs wait before it.
  queued() {
    local rc=0
    "$BIN" run --fair "$key" -- sh -c 'echo probe >>"$OUT"' 2>"$T/fair.e" || rc=$?
    (( rc == 75 )) || fail "probe: exit $rc: $(cat "$T/fair.e")"
    grep -q "$1 waiter(s) before this one" "$T/fair.e"
  }
  "$BIN" run --fair --wait "$key" -- sh -c 'echo first >>"$TURNS"' &
  local first=$!
  wait_for "queued 1" 20 || fail "the first waiter did not queue: $(cat "$T/fair.e")"
  grep -q "add --wait to queue for it" "$T/fair.e" || fail "refusal: $(cat "$T/fair.e")"
  "$BIN" run --fair --wait "$key" -- sh -c 'echo second >>"$TURNS"' &
  local second=$!
  wait_for "queued 2" 20 || fail "the second waiter did not queue: $(cat "$T/fair.e")"
  echo go >"$T/fair-go"
  exit_code "$holder" 10; [[ $RC == 0 ]] || fail "holder exit $RC"
  exit_code "$first" 20; [[ $RC == 0 ]] || fail "first waiter exit $RC"
  exit_code "$second" 20; [[ $RC == 0 ]] || fail "second waiter exit $RC"
  [[ "$(tr '\n' ' ' <"$TURNS")" == "first second " ]] || fail "turns: $(tr '\n' ' ' <"$TURNS")"
  ! grep -q probe "$OUT" || fail "a probe ran CMD past the queue"
  # Not with --shared (readers do not queue); with --exclusive (the writers queue).
  local rc=0
  "$BIN" run --fair --shared "$key" -- true 2>"$T/fair.e" || rc=$?
  (( rc == 64 )) && grep -q -- "--fair does not go with --shared" "$T/fair.e" \
    || fail "--fair --shared: exit $rc: $(cat "$T/fair.e")"
  "$BIN" run --fair --exclusive "$key" -- true || fail "--fair --exclusive"
}

t_status_queue() {  # status lists the fair waiters of a lock, a semaphore and a read-write lock, first in line first
  local key="sq-$RANDOM"
  "$BIN" status "$key" --json >"$T/sq.json" || fail "status"
  [[ $(json "$T/sq.json" 'd["waiting"] == {"lock": [], "semaphore": [], "rwlock": []}') == True ]] ||
    fail "nobody waits: $(cat "$T/sq.json")"
  "$BIN" status "$key" >"$T/sq.txt" || fail "status"
  ! grep -q "^waiting" "$T/sq.txt" || fail "waiters shown when none: $(cat "$T/sq.txt")"
  mkfifo "$T/sq-go" "$T/sq-wgo"
  "$BIN" run --fair "$key" -- bash -c 'echo ready >"$1"; read -r _ <"$0"' "$T/sq-go" "$T/sq.ready" &
  local holder=$!
  "$BIN" run --fair --exclusive "$key" -- bash -c 'echo ready >"$1"; read -r _ <"$0"' "$T/sq-wgo" "$T/sq.wready" &
  local writer=$!
  wait_for "[[ -s '$T/sq.ready' && -s '$T/sq.wready' ]]" 10 || fail "holders did not start"
  "$BIN" run --fair --wait "$key" -- true &
  local waiter=$!
  "$BIN" run --fair --exclusive --wait "$key" -- true &
  local wwaiter=$!
  # Queued, as the library's own gate reads the lock's queue document: a probe is refused
  # because one waiter is before it.
  wait_for "! '$BIN' run --fair '$key' -- true 2>'$T/sq.e' && grep -q '1 waiter(s) before this one' '$T/sq.e'" 20 ||
    fail "the lock's waiter did not queue: $(cat "$T/sq.e")"
  wait_for "'$BIN' status '$key' --json >'$T/sq.json' && [[ \$(json '$T/sq.json' 'len(d[\"waiting\"][\"rwlock\"])') == 1 ]]" 20 ||
    fail "the writer's waiter not listed: $(cat "$T/sq.json")"
  [[ $(json "$T/sq.json" 'len(d["waiting"]["lock"]) == 1 and d["waiting"]["semaphore"] == []') == True ]] ||
    fail "the lock's waiter not listed: $(cat "$T/sq.json")"
  [[ $(json "$T/sq.json" 'all(e["ticket"] > 0 and e["expire_ms"] > d["server_time_ms"] and 0 < e["expires_in_s"] and len(e["uuid"]) >= 32 for q in d["waiting"].values() for e in q)') == True ]] ||
    fail "entries: $(cat "$T/sq.json")"
  "$BIN" status "$key" >"$T/sq.txt" || fail "status"
  local lock_uuid; lock_uuid=$(json "$T/sq.json" 'd["waiting"]["lock"][0]["uuid"]')
  grep -q "^waiting   lock      #1 uuid $lock_uuid, ticket [0-9]*, expires in" "$T/sq.txt" ||
    fail "table: $(cat "$T/sq.txt")"
  grep -q "^          rwlock    #1 uuid " "$T/sq.txt" || fail "table: $(cat "$T/sq.txt")"
  # A fair semaphore's waiter (KEY's semaphore, limit 1), listed once its entry is queued.
  mkfifo "$T/sq-s1" "$T/sq-s2"
  "$SEMHOLD" "$URI" "$DB" "$key" <"$T/sq-s1" >"$T/sq.s1" &
  local s1=$!
  exec 7>"$T/sq-s1"
  wait_for "grep -q held '$T/sq.s1'" 20 || fail "the semaphore holder did not start"
  "$SEMHOLD" "$URI" "$DB" "$key" <"$T/sq-s2" >"$T/sq.s2" 7>&- &
  local s2=$!
  exec 8>"$T/sq-s2"
  wait_for "'$BIN' status '$key' --json >'$T/sq.json' && [[ \$(json '$T/sq.json' 'len(d[\"waiting\"][\"semaphore\"])') == 1 ]]" 20 ||
    fail "the semaphore's waiter not listed: $(cat "$T/sq.json")"
  ! grep -q held "$T/sq.s2" || fail "the second semaphore holder did not wait"
  "$BIN" status "$key" | grep -q "^          semaphore #1 uuid " || fail "table: $("$BIN" status "$key")"
  exec 7>&-
  wait_for "grep -q held '$T/sq.s2'" 20 || fail "the semaphore's waiter was not served"
  exec 8>&-
  exit_code "$s1" 20; [[ $RC == 0 ]] || fail "semaphore holder exit $RC"
  exit_code "$s2" 20; [[ $RC == 0 ]] || fail "semaphore waiter exit $RC"
  echo go >"$T/sq-go"; echo go >"$T/sq-wgo"
  for p in $holder $writer $waiter $wwaiter; do exit_code "$p" 20; [[ $RC == 0 ]] || fail "exit $RC"; done
  "$BIN" status "$key" --json >"$T/sq.json" || fail "status"
  [[ $(json "$T/sq.json" 'd["waiting"] == {"lock": [], "semaphore": [], "rwlock": []}') == True ]] ||
    fail "served waiters still listed: $(cat "$T/sq.json")"
}

t_demo() {
  if [[ "$STORAGE" == sqlite ]]; then "$BIN" demo >"$T/demo.out" 2>&1 || fail "$(cat "$T/demo.out")"
  else "$BIN" demo --uri "$URI" >"$T/demo.out" 2>&1 || fail "$(cat "$T/demo.out")"; fi
  grep -q "^failover: " "$T/demo.out" || fail "no failover line: $(cat "$T/demo.out")"
  grep "^failover: " "$T/demo.out" | sed 's/^/    /'
}

echo "mongoelector command tests on $STORAGE ($URI)"
[[ $STORAGE == sqlite ]] && run_test "basics: --version, --help, usage errors, CMD status" t_cli_basics
[[ $STORAGE == sqlite ]] && run_test "URI read by the library's parser (errors of core/storage/uri.h)" t_uri_parser
[[ $STORAGE == sqlite ]] && run_test "default URI: per-user SQLite file, XDG_STATE_HOME" t_default_uri
[[ $STORAGE == sqlite ]] && run_test "default URI: run/elect say it locks this host only" t_default_uri_says_host_only
run_test "status: a lock's election is \"not used for an election\"" t_status_of_a_lock
[[ $STORAGE == sqlite ]] && run_test "unreachable server: the error names the URI, not a command" t_unreachable_server
[[ $STORAGE == mongo ]] && run_test "status: reads only (no database, collection or index created)" t_status_reads_only
[[ $STORAGE == sqlite ]] && run_test "status: opens SQLite read-only (no write permission needed, no file created)" t_status_sqlite_read_only
run_test "status: a partition group's members, owners and tokens (--json, --partitions)" t_status_partitions
run_test "status: a read-write lock's holders (table and --json)" t_status_rwlock
run_test "run: mutual exclusion of 3 processes, fences increase" t_mutual_exclusion
run_test "run: 75 when held, --wait --timeout, status --json" t_held_timeout_status
run_test "run: SIGTERM/SIGINT/SIGHUP forwarded once" t_signals_forwarded
run_test "run: lock forced away -> SIGTERM, exit 70" t_lost_forced
run_test "run: CMD ignoring SIGTERM killed after --grace" t_lost_grace_kill
run_test "run: signals reach CMD's process group; leftovers killed; exact status" t_process_group
[[ $STORAGE == sqlite ]] && run_test "run: at a terminal, CMD has it (reads input, gets Ctrl-C once)" t_terminal
run_test "run: --min-hold keeps the lock taken after CMD ends" t_min_hold
run_test "run: --once-per runs once per window across processes" t_once_per
[[ $STORAGE == mongo ]] && run_test "run: server frozen -> CMD stopped before expiry, 70" t_lost_frozen_server
run_test "run: storage cut off -> CMD ignoring SIGTERM dead before the next holder" t_lost_deadline_before_takeover
[[ $STORAGE == sqlite ]] && run_test "run/elect: a --grace longer than ttl/20 is refused" t_grace_rule
run_test "elect: failover after kill -9 of the leader" t_elect_failover
run_test "elect: leadership lost -> CMD stopped, restarted on re-election" t_elect_loss_stops_cmd
run_test "elect --http: /leader, /healthz, /readyz across a failover; bad requests" t_http_elect_failover
run_test "elect --payload: /leader and status show the leader's payload, a new term its own" t_elect_payload
run_test "elect --priority: a higher member joining later leads; bad values refused" t_elect_priority
run_test "run --http: holder ready, waiter healthy and not ready" t_http_run
run_test "run --shared: 3 hold together; --exclusive waits, stops new readers, runs alone" t_shared_exclusive
[[ $STORAGE == sqlite ]] && run_test "run --shared: storage cut off -> CMD dead (70) before the writer" t_shared_lost
[[ $STORAGE == sqlite ]] && run_test "run --shared/--exclusive: bad input refused by name (64)" t_rw_bad_input
run_test "run --fair: waiters served in the order they queued; not with --shared" t_fair
run_test "elect --notify: READY, STATUS, WATCHDOG pings, STOPPING" t_notify
[[ $STORAGE == mongo ]] && run_test "elect --http: server frozen -> /healthz 503 before expiry" t_http_frozen_server
run_test "status: the fair waiters of a lock, a semaphore and a read-write lock (table, --json)" t_status_queue
run_test "demo" t_demo

echo "$STORAGE: ${PASSED} passed, ${#FAILED[@]} failed, ${#SKIPPED[@]} skipped"
(( ${#FAILED[@]} == 0 ))
